//! Cancelling: a queued or claimed run ends `cancelled` at once; a running one is flagged
//! for its executor to stop (and ends through [`finish_many`](super::finish_many)).

use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::model::RunState;
use crate::store::jobs::FactsRow;
use crate::store::StoreError;

/// Asks for a run to stop. A queued or claimed run is cancelled at once; a running one is
/// flagged and its executor stops it (it polls for the flag). Returns the run's state
/// after the request, or None when the run does not exist.
///
/// The statement reads the run in one snapshot, so a claim, a give-back or an end that
/// commits while it waits for the run's row leaves it matching nothing although the run
/// exists. Read committed gives each statement a new snapshot: asked again, it sees the
/// run as it now is (see [`CANCEL_TRIES`]).
pub async fn request_cancel(
    conn: &mut PgConnection,
    run_id: i64,
    reason: &str,
) -> Result<Option<RunState>, StoreError> {
    for _ in 1..CANCEL_TRIES {
        if let Some(state) = request_cancel_once(&mut *conn, run_id, reason).await? {
            return Ok(Some(state));
        }
    }
    request_cancel_once(&mut *conn, run_id, reason).await
}

/// How many times a cancellation is asked before its run is taken not to exist: each
/// miss needs a state change of the run committed during the statement, so a run that
/// exists is found within a few.
const CANCEL_TRIES: usize = 4;

async fn request_cancel_once(
    db: impl PgExecutor<'_>,
    run_id: i64,
    reason: &str,
) -> Result<Option<RunState>, StoreError> {
    Ok(
        sqlx::query_file_scalar!("src/store/runs/sql/request_cancel.sql", run_id, reason)
            .fetch_optional(db)
            .await?,
    )
}

/// What `overlap = replace` did for a run (see [`request_replace`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replacement {
    /// The running runs flagged to stop now (none when they already were).
    pub stopping: Vec<i64>,
    /// A running run of a later instant than the replacing one's: then nothing is
    /// stopped, and the replacing run gives way to it.
    pub newer: Option<i64>,
}

/// `overlap = replace`: asks the running attempts of `job_id` whose instant
/// (`coalesce(scheduled_at, queued_at)`) is earlier than run `run_id`'s to stop (their
/// executors stop them as on a cancellation: SIGTERM, the job's grace, SIGKILL). Instants
/// order, not ids: a retry of an older instant is born after a newer instant's run and
/// must not stop it. When a running attempt's instant is later than `run_id`'s, none is
/// stopped and that attempt is named.
pub async fn request_replace(
    db: impl PgExecutor<'_>,
    job_id: i64,
    run_id: i64,
) -> Result<Replacement, StoreError> {
    let row = sqlx::query!(
        r#"WITH me AS (SELECT coalesce(scheduled_at, queued_at) AS at FROM runs_live WHERE id = $2),
           newer AS (SELECT runs.id FROM runs_live AS runs, me
                     WHERE runs.job_id = $1 AND runs.state = 'running' AND runs.id <> $2
                       AND coalesce(runs.scheduled_at, runs.queued_at) > me.at
                     ORDER BY coalesce(runs.scheduled_at, runs.queued_at) DESC, runs.id DESC
                     LIMIT 1),
           stopping AS (UPDATE runs_live SET cancel_requested_at = now(), reason = 'overlap: replaced by run ' || $2
                        FROM me
                        WHERE runs_live.job_id = $1 AND runs_live.state = 'running' AND runs_live.id <> $2
                          AND runs_live.cancel_requested_at IS NULL
                          AND coalesce(runs_live.scheduled_at, runs_live.queued_at) < me.at
                          AND NOT EXISTS (SELECT 1 FROM newer)
                        RETURNING runs_live.id)
           SELECT (SELECT id FROM newer) AS newer, array(SELECT id FROM stopping) AS "stopping!""#,
        job_id,
        run_id
    )
    .fetch_one(db)
    .await?;
    Ok(Replacement {
        stopping: row.stopping,
        newer: row.newer,
    })
}

/// The executor's running runs whose cancellation was requested.
pub async fn cancel_requested(db: impl PgExecutor<'_>, executor_id: Uuid) -> Result<Vec<i64>, StoreError> {
    Ok(
        sqlx::query_file_scalar!("src/store/runs/sql/cancel_requested.sql", executor_id)
            .fetch_all(db)
            .await?,
    )
}

/// The live (queued, claimed or running) attempts of the chains whose first attempts are
/// `chain_ids` (cancelling a workflow run cancels its steps' current attempts).
pub async fn live_attempts_of(db: impl PgExecutor<'_>, chain_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT id FROM runs_live WHERE id = ANY($1) OR first_run_id = ANY($1)",
        chain_ids
    )
    .fetch_all(db)
    .await?)
}

/// The live (queued, claimed or running) runs of a job.
pub async fn live_of_job(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<i64>, StoreError> {
    Ok(
        sqlx::query_scalar!("SELECT id FROM runs_live WHERE job_id = $1", job_id)
            .fetch_all(db)
            .await?,
    )
}

/// The running runs, each with what a maintenance window's scope reads of its job (a
/// window that stops running runs picks those in its scope).
pub async fn running_with_jobs(
    db: impl PgExecutor<'_>,
) -> Result<Vec<(i64, crate::maintenance::OwnedJobFacts)>, StoreError> {
    Ok(sqlx::query_as!(
        FactsRow,
        "SELECT runs.id, jobs.name, jobs.namespace, jobs.selector
         FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state = 'running'
         -- In id order: callers that lock them one by one take them in one order.
         ORDER BY runs.id"
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(FactsRow::keyed)
    .collect())
}
