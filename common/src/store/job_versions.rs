//! `job_versions`: a job's whole definition at each of its versions, with who made it and
//! how, for its history and for restoring an earlier one.

use sqlx::PgExecutor;

use super::jobs::NewJob;
pub use super::versions::{Made, Version as JobVersion};
use super::StoreError;

/// Keeps `definition` as version `version` of job `job_id` (a version already kept stays
/// as it is).
pub async fn record(
    db: impl PgExecutor<'_>,
    job_id: i64,
    version: i64,
    definition: &NewJob,
    made: Made<'_>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO job_versions (job_id, version, definition, actor, action, restored_from)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id, version) DO NOTHING",
        job_id,
        version,
        sqlx::types::Json(definition) as _,
        made.actor,
        made.action,
        made.restored_from
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Every kept version of job `job_id`, newest first.
pub async fn list(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<JobVersion>, StoreError> {
    Ok(sqlx::query_as!(
        JobVersion,
        "SELECT version, actor, action, restored_from, created_at, definition
         FROM job_versions WHERE job_id = $1 ORDER BY version DESC",
        job_id
    )
    .fetch_all(db)
    .await?)
}

/// Version `version` of job `job_id`.
pub async fn get(
    db: impl PgExecutor<'_>,
    job_id: i64,
    version: i64,
) -> Result<Option<JobVersion>, StoreError> {
    Ok(sqlx::query_as!(
        JobVersion,
        "SELECT version, actor, action, restored_from, created_at, definition
         FROM job_versions WHERE job_id = $1 AND version = $2",
        job_id,
        version
    )
    .fetch_optional(db)
    .await?)
}
