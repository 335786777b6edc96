//! The monitor's transitions: running runs of dead executors and runs that do not stop
//! → abandoned (with their retries), stale claims → queued, queued first attempts past
//! their trigger's misfire threshold → missed, and overdue runs flagged to stop.
//!
//! Every statement is conditional on the state it changes, so several monitors running
//! the same statement at once change each row once: PostgreSQL re-checks the condition
//! of a row another transaction just updated, and the chain's unique (first_run_id,
//! attempt) makes a second re-queue of the same attempt a no-op.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::{AssertSqlSafe, PgExecutor};
use uuid::Uuid;

use super::{end_runs_ctes, QUEUE_RETRIES_SQL};
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

/// The statement that abandons the runs `ending` (see [`end_runs_ctes`]) ends, queues
/// their retries, and returns them as [`EndedRun`]s.
fn abandoned_with_retries(ending: &str) -> String {
    format!(
        "WITH {ending},
         retry AS ({QUEUE_RETRIES_SQL})
         SELECT ended.id, ended.job_id, ended.executor_id, ended.exclusive, ended.lock_token,
                retry.id AS retry_run_id
         FROM ended LEFT JOIN retry ON retry.first_run_id = coalesce(ended.first_run_id, ended.id)"
    )
}

static ABANDON_ORPHANS_SQL: LazyLock<String> = LazyLock::new(|| {
    let ending = end_runs_ctes(
        "DELETE FROM runs_live AS runs USING executors
         WHERE runs.executor_id = executors.id AND executors.state IN ('dead', 'stopped')
           AND runs.state = 'running'
         RETURNING runs.*",
        &[
            ("state", "'abandoned'"),
            ("reason", "'executor lost'"),
            ("finished_at", "now()"),
        ],
    );
    abandoned_with_retries(&ending)
});

/// Abandons the running runs of dead (or stopped) executors and queues their retries.
pub async fn abandon_orphans(db: impl PgExecutor<'_>) -> Result<Vec<EndedRun>, StoreError> {
    Ok(
        sqlx::query_as::<_, EndedRun>(AssertSqlSafe(ABANDON_ORPHANS_SQL.as_str()))
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
    let rows: Vec<(i64,)> = sqlx::query_as(
        "UPDATE runs SET state = 'queued', executor_id = NULL, claimed_at = NULL
         WHERE state = 'claimed' AND (
             claimed_at < now() - make_interval(secs => $1)
             OR executor_id IN (SELECT id FROM executors WHERE state IN ('dead', 'stopped')))
         RETURNING id",
    )
    .bind(stale_after.as_secs_f64())
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Asks the executors of runs running longer than their job's timeout plus `grace` to
/// stop them. Returns the runs flagged now.
pub async fn flag_overdue(db: impl PgExecutor<'_>, grace: Duration) -> Result<Vec<i64>, StoreError> {
    let rows: Vec<(i64,)> = sqlx::query_as(
        "UPDATE runs SET cancel_requested_at = now(), reason = 'overdue: still running past its timeout'
         FROM jobs
         WHERE jobs.id = runs.job_id AND runs.state = 'running' AND runs.cancel_requested_at IS NULL
           AND runs.started_at < now() - make_interval(secs => jobs.timeout_secs + $1)
         RETURNING runs.id",
    )
    .bind(grace.as_secs_f64())
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

static ABANDON_STUCK_SQL: LazyLock<String> = LazyLock::new(|| {
    let ending = end_runs_ctes(
        "DELETE FROM runs_live AS runs
         WHERE state = 'running' AND cancel_requested_at < now() - make_interval(secs => $1)
         RETURNING runs.*",
        &[
            ("state", "'abandoned'"),
            ("finished_at", "now()"),
            (
                "reason",
                "coalesce(gone.reason, 'stopped') || '; abandoned: its executor did not stop it'",
            ),
        ],
    );
    abandoned_with_retries(&ending)
});

/// Abandons running runs whose stop was requested more than `grace` ago and that are
/// still running (their executor is alive but does not stop them).
pub async fn abandon_stuck(db: impl PgExecutor<'_>, grace: Duration) -> Result<Vec<EndedRun>, StoreError> {
    Ok(
        sqlx::query_as::<_, EndedRun>(AssertSqlSafe(ABANDON_STUCK_SQL.as_str()))
            .bind(grace.as_secs_f64())
            .fetch_all(db)
            .await?,
    )
}

/// Marks missed the queued first attempts of triggered runs that waited longer than
/// their trigger's misfire threshold (no executor was free to take them, or none could
/// lock them). The wait counts from when the run was queued: giving a run back to the
/// queue (which moves its `available_at`) does not make it young again.
pub async fn expire_stale_queued(db: impl PgExecutor<'_>) -> Result<Vec<i64>, StoreError> {
    let rows: Vec<(i64,)> = sqlx::query_as(AssertSqlSafe(EXPIRE_STALE_QUEUED_SQL.as_str()))
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

static EXPIRE_STALE_QUEUED_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {} SELECT id FROM ended",
        end_runs_ctes(
            "DELETE FROM runs_live AS runs USING triggers
             WHERE triggers.id = runs.trigger_id AND runs.state = 'queued' AND runs.attempt = 1
               AND runs.queued_at < now() - make_interval(secs => triggers.misfire_threshold_secs)
             RETURNING runs.*",
            &[
                ("state", "'missed'"),
                ("finished_at", "now()"),
                (
                    "reason",
                    "'waited in the queue longer than the trigger''s misfire threshold'",
                ),
            ],
        )
    )
});
