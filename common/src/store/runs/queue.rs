//! Births: runs queued by hand (run now). Fired runs are born in the firing transaction
//! ([`crate::store::triggers::insert_fired_runs`]), retries with the attempt they replace.

use sqlx::PgExecutor;

use crate::model::{Run, RunState};
use crate::store::StoreError;

/// Queues a run of `job_id` now, outside any trigger ("run now").
pub async fn queue_now(db: impl PgExecutor<'_>, job_id: i64) -> Result<Run, StoreError> {
    Ok(sqlx::query_as!(
        Run,
        r#"INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now())
           RETURNING id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated"#,
        job_id
    )
    .fetch_one(db)
    .await?)
}

/// Queues `count` run-now runs of one job in one statement (benchmarks, bulk tools).
pub async fn queue_many_now(db: impl PgExecutor<'_>, job_id: i64, count: i64) -> Result<u64, StoreError> {
    let done = sqlx::query!(
        "INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2::bigint)",
        job_id,
        count
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
