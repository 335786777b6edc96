//! Births: runs queued by hand (run now) and by backfills. Fired runs are born in the firing transaction
//! ([`crate::store::triggers::insert_fired_runs`]), retries with the attempt they replace.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::model::{Run, RunState};
use crate::store::StoreError;

/// Queues a run of `job_id` now, outside any trigger ("run now"). For a job whose route
/// fans out, the first of the instant's runs (see [`queue_now_fanned_out`]).
pub async fn queue_now(db: impl PgExecutor<'_>, job_id: i64) -> Result<Run, StoreError> {
    let runs = queue_now_fanned_out(db, job_id).await?;
    runs.into_iter()
        .next()
        .ok_or(StoreError::Database(sqlx::Error::RowNotFound))
}

/// Queues the runs of one instant of `job_id` now, outside any trigger: one run, or as
/// many as its route fans out to (`probactr_run_targets`), in shard order.
pub async fn queue_now_fanned_out(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<Run>, StoreError> {
    Ok(sqlx::query_as!(
        Run,
        r#"INSERT INTO runs (job_id, scheduled_at, shard, shard_total, pinned_to)
           SELECT $1, now(), target.shard, target.shard_total, target.pinned_to
           FROM probactr_run_targets($1) AS target
           ORDER BY target.shard
           RETURNING id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica"#,
        job_id
    )
    .fetch_all(db)
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

/// Queues a run of the trigger for each of `instants` that has none yet (a backfill),
/// each carrying its original instant and `reason`; returns how many were queued. Like
/// firing, it checks the ended runs too, so an instant never gets a second chain.
pub async fn queue_instants(
    db: impl PgExecutor<'_>,
    job_id: i64,
    trigger_id: i64,
    instants: &[DateTime<Utc>],
    reason: &str,
) -> Result<u64, StoreError> {
    if instants.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query!(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, reason)
         SELECT $1, $2, instant, $4 FROM unnest($3::timestamptz[]) AS instant
         WHERE NOT EXISTS (SELECT 1 FROM runs_done AS done
                           WHERE done.trigger_id = $2 AND done.scheduled_at = instant AND done.attempt = 1)
         ON CONFLICT DO NOTHING",
        job_id,
        trigger_id,
        instants,
        reason
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// How many live (queued, claimed or running) first attempts carry `reason` (a
/// backfill's; their retries are not counted).
pub async fn count_live_with_reason(db: impl PgExecutor<'_>, reason: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM runs_live WHERE reason = $1"#,
        reason
    )
    .fetch_one(db)
    .await?)
}
