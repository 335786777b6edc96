//! The reconciler: compares what each trigger's schedule made due with what was recorded
//! — a run, or a misfire — over the last hour, and records every gap once as a missed
//! stretch (which raises the `fire_missed` alert). A gap means an instant was lost
//! without a word; the invariants say there are none, and this is the watch that says
//! so in production. It also feeds backfills into the queue.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use probactr_common::ledger::{self, LedgerError, RECORDED_GAP_REASON};
use probactr_common::store::triggers::{self, MissedInstants, Watched};
use probactr_common::store::{backfills, db_now};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// How far back the reconciler looks.
const WINDOW: TimeDelta = TimeDelta::hours(1);
/// The most instants of one trigger it checks in a pass.
const MAX_INSTANTS: usize = 5_000;
/// Pause between two passes.
const EVERY: Duration = Duration::from_secs(30);
/// Pause between two feedings of the backfills.
const FEED_EVERY: Duration = Duration::from_millis(500);

/// Runs the reconciler and the backfill feeder until `stop` is cancelled.
pub async fn run(pool: PgPool, stop: CancellationToken) {
    let feeder = tokio::spawn(feed_loop(pool.clone(), stop.clone()));
    loop {
        match reconcile_once(&pool).await {
            Ok(0) => {}
            Ok(gaps) => tracing::warn!(gaps, "fire ledger gaps recorded as missed"),
            Err(err) => tracing::warn!(error = %err, "fire ledger reconciliation failed; retrying"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
    let _ = feeder.await;
}

async fn feed_loop(pool: PgPool, stop: CancellationToken) {
    loop {
        let fed = async {
            let mut tx = pool.begin().await?;
            let queued = backfills::feed(&mut tx).await?;
            tx.commit().await?;
            Ok::<u64, probactr_common::store::StoreError>(queued)
        };
        if let Err(err) = fed.await {
            tracing::warn!(error = %err, "feeding backfills failed; retrying");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(FEED_EVERY) => {}
        }
    }
}

/// One pass over every watched trigger; returns how many instants it recorded as missed.
pub async fn reconcile_once(pool: &PgPool) -> Result<i64, LedgerError> {
    let now = db_now(pool).await?;
    let mut recorded = 0;
    for watched in triggers::watched(pool).await? {
        recorded += reconcile_trigger(pool, &watched, now).await?;
    }
    Ok(recorded)
}

/// Records the gaps of one trigger: instants before its `next_fire_at` (every one of them
/// was fired, so each must have a run or a misfire), since it and its job last changed
/// (an edit or a pause moves what was due).
async fn reconcile_trigger(
    pool: &PgPool,
    watched: &Watched,
    now: chrono::DateTime<Utc>,
) -> Result<i64, LedgerError> {
    let trigger = &watched.trigger;
    let from = [
        now - WINDOW,
        trigger.created_at,
        trigger.updated_at,
        watched.job_updated_at,
    ]
    .into_iter()
    .max()
    .unwrap_or(now);
    let to = trigger.next_fire_at.map_or(now, |next| next.min(now));
    if from >= to {
        return Ok(0);
    }
    let ledger = ledger::read(pool, trigger, false, from, to, MAX_INSTANTS).await?;
    let stretches = ledger::gap_stretches(&ledger.entries);
    if stretches.is_empty() {
        return Ok(0);
    }
    let missed: Vec<MissedInstants> = stretches
        .iter()
        .map(|&(first, last, count)| {
            MissedInstants::of(trigger, first, last, count, RECORDED_GAP_REASON.into())
        })
        .collect();
    let mut conn = pool
        .acquire()
        .await
        .map_err(probactr_common::store::StoreError::from)?;
    triggers::record_misfires(&mut conn, &missed).await?;
    for gap in &missed {
        tracing::warn!(trigger.id = trigger.id, job.id = trigger.job_id, first = %gap.first, last = %gap.last,
            instants = gap.count, "instants due and never fired nor recorded: recorded as missed");
    }
    Ok(missed.iter().map(|gap| gap.count).sum())
}
