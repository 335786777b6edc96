//! `workflow_versions`: a workflow's whole definition at each of its versions, with who
//! made it and how, for its history and for restoring an earlier one.

use serde_json::Value;
use sqlx::PgExecutor;

pub use super::versions::{Made, Version as WorkflowVersion};
use super::StoreError;

/// Keeps `definition` as version `version` of workflow `workflow_id` (a version already
/// kept stays as it is).
pub async fn record(
    db: impl PgExecutor<'_>,
    workflow_id: i64,
    version: i64,
    definition: &Value,
    made: Made<'_>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO workflow_versions (workflow_id, version, definition, actor, action, restored_from)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (workflow_id, version) DO NOTHING",
        workflow_id,
        version,
        definition,
        made.actor,
        made.action,
        made.restored_from
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Every kept version of workflow `workflow_id`, newest first.
pub async fn list(db: impl PgExecutor<'_>, workflow_id: i64) -> Result<Vec<WorkflowVersion>, StoreError> {
    Ok(sqlx::query_as!(
        WorkflowVersion,
        "SELECT version, actor, action, restored_from, created_at, definition
         FROM workflow_versions WHERE workflow_id = $1 ORDER BY version DESC",
        workflow_id
    )
    .fetch_all(db)
    .await?)
}

/// Version `version` of workflow `workflow_id`.
pub async fn get(
    db: impl PgExecutor<'_>,
    workflow_id: i64,
    version: i64,
) -> Result<Option<WorkflowVersion>, StoreError> {
    Ok(sqlx::query_as!(
        WorkflowVersion,
        "SELECT version, actor, action, restored_from, created_at, definition
         FROM workflow_versions WHERE workflow_id = $1 AND version = $2",
        workflow_id,
        version
    )
    .fetch_optional(db)
    .await?)
}
