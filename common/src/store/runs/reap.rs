//! The monitor's transitions: running runs of dead executors and runs that do not stop
//! → abandoned (with their retries), stale claims → queued, queued first attempts past
//! their trigger's misfire threshold → missed (those of rated jobs → skipped beyond what
//! the rate starts in time), and overdue runs flagged to stop.
//!
//! Every statement is conditional on the state it changes, so several monitors running
//! the same statement at once change each row once: PostgreSQL re-checks the condition
//! of a row another transaction just updated, and the chain's unique (first_run_id,
//! attempt) makes a second re-queue of the same attempt a no-op.

use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::store::StoreError;

/// A run the monitor ended, with what it needs to release the run's lock.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EndedRun {
    /// The run.
    pub id: i64,
    /// Its job.
    pub job_id: i64,
    /// The executor that ran it.
    pub executor_id: Option<Uuid>,
    /// Whether it held the job's mutex (else a permit, if a token is set).
    pub exclusive: bool,
    /// The lock or permit token it held.
    pub lock_token: Option<String>,
    /// The attempt queued to replace it, if the retry policy allowed one.
    pub retry_run_id: Option<i64>,
}

/// Abandons the running runs of dead (or stopped) executors and queues their takeovers
/// or retries.
pub async fn abandon_orphans(db: impl PgExecutor<'_>) -> Result<Vec<EndedRun>, StoreError> {
    abandon(db, None).await
}

/// The one statement abandoning runs (`sql/abandon.sql`): those of lost executors
/// (`stuck_after` None), or those whose stop was requested more than `stuck_after` plus
/// their job's stop grace ago.
async fn abandon(
    db: impl PgExecutor<'_>,
    stuck_after: Option<Duration>,
) -> Result<Vec<EndedRun>, StoreError> {
    let stuck_after_secs = stuck_after.map(|grace| grace.as_secs_f64());
    Ok(
        sqlx::query_file_as!(EndedRun, "src/store/runs/sql/abandon.sql", stuck_after_secs)
            .fetch_all(db)
            .await?,
    )
}

/// Returns to the queue the claimed (never started) runs of dead executors, and claims
/// older than `stale_after` of any executor.
pub async fn requeue_stale_claims(
    db: impl PgExecutor<'_>,
    stale_after: Duration,
) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "UPDATE runs SET state = 'queued', executor_id = NULL, claimed_at = NULL
         WHERE state = 'claimed' AND (
             claimed_at < now() - make_interval(secs => $1)
             OR executor_id IN (SELECT id FROM executors WHERE state IN ('dead', 'stopped')))
         RETURNING id",
        stale_after.as_secs_f64()
    )
    .fetch_all(db)
    .await?)
}

/// Asks the executors of runs running longer than their job's timeout plus its stop grace
/// (the executor's own SIGTERM to SIGKILL) plus `grace` to stop them. Returns the runs flagged now.
pub async fn flag_overdue(db: impl PgExecutor<'_>, grace: Duration) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "UPDATE runs SET cancel_requested_at = now(), reason = 'overdue: still running past its timeout'
         FROM jobs
         WHERE jobs.id = runs.job_id AND runs.state = 'running' AND runs.cancel_requested_at IS NULL
           AND runs.started_at < now() - make_interval(secs => jobs.timeout_secs + jobs.stop_grace_secs + $1::float8)
           -- A service's instances run until stopped.
           AND runs.replica IS NULL
         RETURNING runs.id",
        grace.as_secs_f64()
    )
    .fetch_all(db)
    .await?)
}

/// Abandons running runs whose stop was requested more than `grace` plus their job's stop
/// grace ago and that are still running (their executor is alive but does not stop them).
pub async fn abandon_stuck(db: impl PgExecutor<'_>, grace: Duration) -> Result<Vec<EndedRun>, StoreError> {
    abandon(db, Some(grace)).await
}

/// Marks missed the queued first attempts of triggered runs that waited longer than
/// their trigger's misfire threshold (no executor was free to take them, or none could
/// lock them). The wait counts from when the run was queued: giving a run back to the
/// queue (which moves its `available_at`) does not make it young again. Runs of a job
/// with a rate, or in a pool with one, are never marked missed: they wait their turn.
pub async fn expire_stale_queued(db: impl PgExecutor<'_>) -> Result<Vec<i64>, StoreError> {
    Ok(
        sqlx::query_file_scalar!("src/store/runs/sql/expire_stale_queued.sql")
            .fetch_all(db)
            .await?,
    )
}

/// Skips the queued first attempts of triggered runs of jobs with a rate that have more
/// runs ahead of them than the rate starts within their trigger's misfire threshold (see
/// `sql/skip_beyond_rate.sql`): the bound of a rated job's queue, whose runs
/// [`expire_stale_queued`] leaves alone.
pub async fn skip_beyond_rate(db: impl PgExecutor<'_>) -> Result<Vec<i64>, StoreError> {
    Ok(
        sqlx::query_file_scalar!("src/store/runs/sql/skip_beyond_rate.sql")
            .fetch_all(db)
            .await?,
    )
}

/// Runs pinned to executors that left, put right: the queued runs of broadcasts are
/// skipped (see `sql/skip_stranded_broadcasts.sql`); queued shards are unpinned, free for
/// any executor, when their executor is gone, draining or cordoned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rerouted {
    /// Broadcast runs ended `skipped`.
    pub skipped: Vec<i64>,
    /// Shards unpinned.
    pub unpinned: Vec<i64>,
}

/// Puts right the queued runs pinned to executors that left (see [`Rerouted`]).
pub async fn reroute_stranded(db: &sqlx::PgPool) -> Result<Rerouted, StoreError> {
    let skipped = sqlx::query_file_scalar!("src/store/runs/sql/skip_stranded_broadcasts.sql")
        .fetch_all(db)
        .await?;
    let unpinned = sqlx::query_scalar!(
        "UPDATE runs_live AS runs SET pinned_to = NULL
         FROM jobs
         WHERE runs.pinned_to IS NOT NULL AND runs.state = 'queued'
           AND jobs.id = runs.job_id AND jobs.route <> 'broadcast'
           AND NOT EXISTS (SELECT 1 FROM executors
                           WHERE executors.id = runs.pinned_to AND executors.state = 'alive'
                             AND NOT executors.cordoned AND NOT executors.drain_requested)
         RETURNING runs.id"
    )
    .fetch_all(db)
    .await?;
    Ok(Rerouted { skipped, unpinned })
}
