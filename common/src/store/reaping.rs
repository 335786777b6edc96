//! The monitor's queries: abandoning the runs of dead executors, returning stale claims,
//! expiring stuck and stale runs, and pruning history.
//!
//! Every statement is conditional on the state it changes, so several monitors running
//! the same statement at once change each row once: PostgreSQL re-checks the condition
//! of a row another transaction just updated, and the chain's unique (first_run_id,
//! attempt) makes a second re-queue of the same attempt a no-op.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::{AssertSqlSafe, PgExecutor};
use uuid::Uuid;

use super::runs::{end_runs_ctes, QUEUE_RETRIES_SQL};
use super::StoreError;

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
    format!(
        "WITH {ending},
         retry AS ({QUEUE_RETRIES_SQL})
         SELECT ended.id, ended.job_id, ended.executor_id, ended.exclusive, ended.lock_token,
                retry.id AS retry_run_id
         FROM ended LEFT JOIN retry ON retry.first_run_id = coalesce(ended.first_run_id, ended.id)"
    )
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
    format!(
        "WITH {ending},
         retry AS ({QUEUE_RETRIES_SQL})
         SELECT ended.id, ended.job_id, ended.executor_id, ended.exclusive, ended.lock_token,
                retry.id AS retry_run_id
         FROM ended LEFT JOIN retry ON retry.first_run_id = coalesce(ended.first_run_id, ended.id)"
    )
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

/// Deletes up to `batch` finished runs older than `retention`; returns how many. Call it
/// repeatedly: short statements keep locks short.
pub async fn prune_runs(db: impl PgExecutor<'_>, retention: Duration, batch: i64) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM runs WHERE id IN (
             SELECT id FROM runs
             WHERE queued_at < now() - make_interval(secs => $1)
               AND state NOT IN ('queued', 'claimed', 'running')
               AND NOT EXISTS (SELECT 1 FROM runs AS later
                               WHERE later.first_run_id = runs.id
                                 AND later.state IN ('queued', 'claimed', 'running'))
             LIMIT $2)",
    )
    .bind(retention.as_secs_f64())
    .bind(batch)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// How many days ahead the daily partitions of ended runs are created.
pub const PARTITION_DAYS_AHEAD: i32 = 7;

/// Keeps the ended runs' daily partitions (migration `20261124000001`): creates the days
/// ahead, and drops whole days past `retention` (all their runs queued before the cutoff,
/// no live retry of theirs). Returns the runs dropped. [`prune_runs`] deletes the rest
/// row by row (the default partition, the boundary day, runs kept by a live retry).
pub async fn maintain_history(db: impl PgExecutor<'_>, retention: Duration) -> Result<u64, StoreError> {
    let dropped: i64 =
        sqlx::query_scalar("SELECT probactr_maintain_run_partitions(make_interval(secs => $1), $2)")
            .bind(retention.as_secs_f64())
            .bind(PARTITION_DAYS_AHEAD)
            .fetch_one(db)
            .await?;
    Ok(dropped.max(0) as u64)
}

/// Vacuums and analyzes the live runs' partition: its rows change state several times
/// each and leave dead index entries at the head of the claim's index, and its size and
/// mix of states swing with the backlog. A frequent vacuum of this small table keeps the
/// claim's cost flat, and fresh statistics keep its plan an ordered walk of the queue
/// (autovacuum visits a database only once per `autovacuum_naptime`). Skipped when
/// another vacuum holds the table.
pub async fn vacuum_live_runs(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query("VACUUM (ANALYZE, SKIP_LOCKED) runs_live")
        .execute(db)
        .await?;
    Ok(())
}

/// Deletes misfire records and dead or stopped process rows older than `retention`.
pub async fn prune_records(db: impl PgExecutor<'_> + Copy, retention: Duration) -> Result<u64, StoreError> {
    let secs = retention.as_secs_f64();
    let misfires = sqlx::query("DELETE FROM misfires WHERE recorded_at < now() - make_interval(secs => $1)")
        .bind(secs)
        .execute(db)
        .await?;
    let processes = sqlx::query(
        "DELETE FROM executors WHERE state IN ('dead', 'stopped')
           AND last_heartbeat_at < now() - make_interval(secs => $1)",
    )
    .bind(secs)
    .execute(db)
    .await?;
    Ok(misfires.rows_affected() + processes.rows_affected())
}
