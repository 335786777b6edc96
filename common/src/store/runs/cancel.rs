//! Cancelling: a queued or claimed run ends `cancelled` at once; a running one is flagged
//! for its executor to stop (and ends through [`finish_many`](super::finish_many)).

use std::sync::LazyLock;

use sqlx::{AssertSqlSafe, PgExecutor};
use uuid::Uuid;

use super::end_runs_ctes;
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
    let row: Option<(String,)> = sqlx::query_as(AssertSqlSafe(REQUEST_CANCEL_SQL.as_str()))
        .bind(run_id)
        .bind(reason)
        .fetch_optional(db)
        .await?;
    row.map(|(state,)| {
        state
            .parse()
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))
    })
    .transpose()
}

/// [`request_cancel`]: a queued or claimed run ends `cancelled`; a running one is
/// flagged; an ended one is left as it is. Answers the run's state after the request.
static REQUEST_CANCEL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {},
         flagged AS (
             UPDATE runs_live SET cancel_requested_at = now(), reason = $2
             WHERE id = $1 AND state = 'running'
             RETURNING state)
         SELECT state FROM ended
         UNION ALL SELECT state FROM flagged
         UNION ALL SELECT state FROM runs
                   WHERE id = $1 AND state NOT IN ('queued', 'claimed', 'running')",
        end_runs_ctes(
            "DELETE FROM runs_live AS runs
             WHERE id = $1 AND state IN ('queued', 'claimed')
             RETURNING runs.*",
            &[
                ("state", "'cancelled'"),
                ("reason", "$2"),
                ("finished_at", "now()")
            ],
        )
    )
});

/// The executor's running runs whose cancellation was requested.
pub async fn cancel_requested(db: impl PgExecutor<'_>, executor_id: Uuid) -> Result<Vec<i64>, StoreError> {
    let rows: Vec<(i64,)> = sqlx::query_as(
        "SELECT id FROM runs
         WHERE executor_id = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL",
    )
    .bind(executor_id)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}
