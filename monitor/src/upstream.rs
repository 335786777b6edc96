//! Runs waiting for another job (a trigger's `after`): every second, releases the ones
//! whose job waited for has succeeded on their day and ends `failed` the ones past their
//! deadline (see `store::runs::upstream`). The pass reads only the waiting runs' own rows,
//! so a cluster where no trigger has `after` pays an empty read a second.
//! Several monitors may run it at once: each statement takes a row once.

use std::time::Duration;

use probactr_common::store::retry::retry_transient;
use probactr_common::store::{runs, StoreError};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Pause between two passes.
const EVERY: Duration = Duration::from_secs(1);

/// Runs the passes until `stop` is cancelled.
pub async fn run(pool: PgPool, stop: CancellationToken) {
    loop {
        if let Err(err) = pass(&pool).await {
            tracing::warn!(error = %err, "releasing waiting runs failed; retrying");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}

/// One pass: releases what may run, then fails what waited too long.
pub async fn pass(pool: &PgPool) -> Result<(), StoreError> {
    let released = retry_transient("release waiting runs", || async {
        let mut tx = pool.begin().await?;
        let released = runs::release_ready(&mut tx).await?;
        tx.commit().await?;
        Ok::<_, StoreError>(released)
    })
    .await?;
    for run_id in &released {
        tracing::info!(run.id = run_id, "run released: the job it waited for succeeded");
    }
    let failed = retry_transient("fail overdue waiting runs", || runs::fail_overdue(pool)).await?;
    for run_id in &failed {
        tracing::warn!(
            run.id = run_id,
            "run failed: the job it waited for did not succeed in time"
        );
    }
    Ok(())
}
