//! Cancelling: a queued or claimed run ends `cancelled` at once; a running one is flagged
//! for its executor to stop (and ends through [`finish_many`](super::finish_many)).

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::model::RunState;
use crate::store::StoreError;

/// Asks for a run to stop. A queued or claimed run is cancelled at once; a running one is
/// flagged and its executor stops it (it polls for the flag). Returns the run's state
/// after the request, or None when the run does not exist.
pub async fn request_cancel(
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

/// `overlap = replace`: asks the running attempts of `job_id` to stop for run `run_id`
/// (their executors stop them as on a cancellation: SIGTERM, the job's grace, SIGKILL).
/// Returns the runs flagged now (none when they already were).
pub async fn request_replace(
    db: impl PgExecutor<'_>,
    job_id: i64,
    run_id: i64,
) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "UPDATE runs_live SET cancel_requested_at = now(), reason = 'overlap: replaced by run ' || $2
         WHERE job_id = $1 AND state = 'running' AND id <> $2 AND cancel_requested_at IS NULL
         RETURNING id",
        job_id,
        run_id
    )
    .fetch_all(db)
    .await?)
}

/// The executor's running runs whose cancellation was requested.
pub async fn cancel_requested(db: impl PgExecutor<'_>, executor_id: Uuid) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT id FROM runs
         WHERE executor_id = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL",
        executor_id
    )
    .fetch_all(db)
    .await?)
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
    Ok(sqlx::query!(
        "SELECT runs.id, jobs.name, jobs.namespace, jobs.selector
         FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state = 'running'
         -- In id order: callers that lock them one by one take them in one order.
         ORDER BY runs.id"
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| {
        let facts = crate::maintenance::OwnedJobFacts {
            name: row.name,
            namespace: row.namespace,
            selector: row.selector,
        };
        (row.id, facts)
    })
    .collect())
}
