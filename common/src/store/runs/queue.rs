//! Births: runs queued by hand (run now, retry), by backfills and for services' missing
//! instances.
//! Fired runs are born in the firing transaction ([`super::insert_fired_runs`]), next
//! attempts with the attempt they follow (`probactr_next_attempt`), workflow steps and
//! child jobs by the database (`probactr_queue_run`).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::model::{Run, RunState};
use crate::store::{rows_written, StoreError};

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

/// Queues the next attempt of the chain of `run_id` now, by hand: same job, instant,
/// trigger and shard, its parameters those of the chain. Only when the run failed, timed
/// out or was abandoned and is its chain's latest attempt; None otherwise (a concurrent
/// retry of the same run included).
pub async fn retry_now(
    db: impl PgExecutor<'_>,
    run_id: i64,
    reason: &str,
) -> Result<Option<Run>, StoreError> {
    Ok(sqlx::query_as!(
        Run,
        r#"INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id, reason, shard, shard_total, pinned_to)
           SELECT ended.job_id, ended.trigger_id, ended.scheduled_at, ended.attempt + 1,
                  coalesce(ended.first_run_id, ended.id), $2, ended.shard, ended.shard_total, ended.pinned_to
           FROM runs AS ended
           WHERE ended.id = $1 AND ended.state IN ('failed', 'timed_out', 'abandoned')
             AND NOT EXISTS (SELECT 1 FROM runs AS later
                             WHERE later.first_run_id = coalesce(ended.first_run_id, ended.id)
                               AND later.attempt > ended.attempt)
           ON CONFLICT DO NOTHING
           RETURNING id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica"#,
        run_id,
        reason
    )
    .fetch_optional(db)
    .await?)
}

/// Queues the runs of a webhook trigger's delivery (one per target of the job's route),
/// as runs of that trigger. Deliveries to one trigger are decided one at a time, and each
/// takes the clock after its predecessor committed, so their instants never collide.
pub async fn queue_delivered(
    db: impl PgExecutor<'_>,
    job_id: i64,
    trigger_id: i64,
) -> Result<Vec<Run>, StoreError> {
    Ok(sqlx::query_as!(
        Run,
        r#"INSERT INTO runs (job_id, trigger_id, scheduled_at, shard, shard_total, pinned_to)
           SELECT $1, $2, delivered.at, target.shard, target.shard_total, target.pinned_to
           FROM probactr_run_targets($1) AS target CROSS JOIN (SELECT clock_timestamp() AS at) AS delivered
           ORDER BY target.shard
           RETURNING id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica"#,
        job_id,
        trigger_id
    )
    .fetch_all(db)
    .await?)
}

/// Queues `count` run-now runs of one job in one statement (benchmarks, bulk tools).
pub async fn queue_many_now(db: impl PgExecutor<'_>, job_id: i64, count: i64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2::bigint)",
        job_id,
        count
    );
    rows_written(db, statement).await
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
    let statement = sqlx::query!(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, reason)
         SELECT $1, $2, instant, $4 FROM unnest($3::timestamptz[]) AS instant
         WHERE NOT EXISTS (SELECT 1 FROM runs_done AS done
                           WHERE done.trigger_id = $2 AND done.scheduled_at = instant AND done.attempt = 1)
         ON CONFLICT DO NOTHING",
        job_id,
        trigger_id,
        instants,
        reason
    );
    rows_written(db, statement).await
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

/// An instance queued to start.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StartedReplica {
    /// Its run.
    pub run_id: i64,
    /// The service.
    pub job_id: i64,
    /// Its slot.
    pub replica: i32,
    /// When it may start (later than now after quick ends: the backoff).
    pub available_at: DateTime<Utc>,
}

/// Services: queues an instance for every slot of every unpaused service that has none live.
/// The delay before it may start doubles with each instance of the slot that ended
/// (by itself, not stopped or lost with its executor) within 30 s of starting in the
/// last 10 minutes, from 1 s up to 60 s.
pub async fn queue_missing_service_instances(
    db: impl PgExecutor<'_>,
) -> Result<Vec<StartedReplica>, StoreError> {
    Ok(sqlx::query_as!(
        StartedReplica,
        r#"WITH wanted AS (
               SELECT jobs.id AS job_id, slot
               FROM jobs CROSS JOIN LATERAL generate_series(0, jobs.replicas - 1) AS slot
               WHERE jobs.mode = 'service' AND NOT jobs.paused),
           missing AS (
               SELECT wanted.job_id, wanted.slot,
                      (SELECT count(*) FROM runs_done AS ended
                       WHERE ended.job_id = wanted.job_id AND ended.replica = wanted.slot
                         AND ended.scheduled_at > now() - interval '1 day'
                         AND ended.finished_at > now() - interval '10 minutes'
                         AND ended.state IN ('succeeded', 'failed', 'timed_out')
                         AND ended.finished_at - coalesce(ended.started_at, ended.finished_at)
                             < interval '30 seconds') AS quick_ends
               FROM wanted
               WHERE NOT EXISTS (SELECT 1 FROM runs_live AS live
                                 WHERE live.job_id = wanted.job_id AND live.replica = wanted.slot))
           INSERT INTO runs (job_id, scheduled_at, available_at, replica, reason)
           SELECT job_id, now(),
                  now() + make_interval(secs => CASE WHEN quick_ends = 0 THEN 0
                                                     ELSE least(60, power(2, quick_ends - 1)) END),
                  slot,
                  CASE WHEN quick_ends = 0 THEN 'service instance ' || slot
                       ELSE 'service instance ' || slot || ', restarted after ' || quick_ends
                            || ' quick end(s)' END
           FROM missing
           ON CONFLICT DO NOTHING
           RETURNING id AS run_id, job_id, replica AS "replica!", available_at"#
    )
    .fetch_all(db)
    .await?)
}
