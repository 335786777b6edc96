//! Births: runs queued by hand (run now). Fired runs are born in the firing transaction
//! ([`crate::store::triggers::insert_fired_runs`]), retries with the attempt they replace.

use sqlx::PgExecutor;

use crate::model::Run;
use crate::store::StoreError;

/// Queues a run of `job_id` now, outside any trigger ("run now").
pub async fn queue_now(db: impl PgExecutor<'_>, job_id: i64) -> Result<Run, StoreError> {
    Ok(
        sqlx::query_as::<_, Run>("INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now()) RETURNING *")
            .bind(job_id)
            .fetch_one(db)
            .await?,
    )
}

/// Queues `count` run-now runs of one job in one statement (benchmarks, bulk tools).
pub async fn queue_many_now(db: impl PgExecutor<'_>, job_id: i64, count: i64) -> Result<u64, StoreError> {
    let done =
        sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2)")
            .bind(job_id)
            .bind(count)
            .execute(db)
            .await?;
    Ok(done.rows_affected())
}
