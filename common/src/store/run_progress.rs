//! `run_progress`: the latest progress a running shell job reported through the file
//! `PROBACTR_PROGRESS_FILE` names (written by the executor when the report changes), read
//! by the run's page, the API and the client, and purged once its run is gone (by the
//! monitor). A run that reports nothing has no row and costs no statement.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::{rows_written, StoreError};

/// A run's latest report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Progress {
    /// How far along, 0 to 100, when the job said.
    pub percent: Option<f32>,
    /// What the job said it is doing.
    pub message: String,
    /// When the executor read it.
    pub reported_at: DateTime<Utc>,
}

/// Stores a run's latest report.
pub async fn report(
    db: impl PgExecutor<'_>,
    run_id: i64,
    percent: Option<f32>,
    message: &str,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO run_progress (run_id, percent, message) VALUES ($1, $2, $3)
         ON CONFLICT (run_id) DO UPDATE
         SET percent = excluded.percent, message = excluded.message, reported_at = now()",
        run_id,
        percent,
        message
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A run's latest report, if it made one.
pub async fn get(db: impl PgExecutor<'_>, run_id: i64) -> Result<Option<Progress>, StoreError> {
    Ok(sqlx::query_as!(
        Progress,
        "SELECT percent, message, reported_at FROM run_progress WHERE run_id = $1",
        run_id
    )
    .fetch_optional(db)
    .await?)
}

/// Deletes up to `batch` reports whose run is gone; returns how many.
pub async fn purge(db: impl PgExecutor<'_>, batch: i64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "DELETE FROM run_progress WHERE run_id IN (
             SELECT old.run_id FROM run_progress AS old
             WHERE NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = old.run_id)
             LIMIT $1)",
        batch
    );
    rows_written(db, statement).await
}
