//! `versions`: the whole definition of a job, workflow or trigger at each of its
//! versions, with who made it and how, for its history and for restoring an earlier one.
//!
//! One table serves every kind, keyed by ([`Kind`], object id, version), so the statements
//! keeping and reading versions are written once: the kinds differ only in what their
//! definition holds, which their services decide. Each kind's id is also a generated
//! column referencing its table, so an object's versions go with it when it is deleted.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;

/// What kind of object a version belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A job (its definition: the job's fields as a create sends them).
    Job,
    /// A workflow (name, description, steps, declared parameters).
    Workflow,
    /// A job's trigger (its schedule, parameters, calendar, jitter, fires and `after`).
    Trigger,
}

impl Kind {
    /// The kind as the `versions.kind` column holds it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Job => "job",
            Kind::Workflow => "workflow",
            Kind::Trigger => "trigger",
        }
    }
}

/// A version as listed: who made it, how, when, and the whole definition it had.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Version {
    /// The version number of the job, workflow or trigger.
    pub version: i64,
    /// Who made it (`unknown` for the version an object had before versions were kept).
    pub actor: String,
    /// `create`, `update`, `restore` or `before`.
    pub action: String,
    /// The version a restore brought back.
    pub restored_from: Option<i64>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The definition (secret values sealed; callers mask them before showing it).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub definition: serde_json::Value,
}

/// How a version came to be.
#[derive(Debug, Clone, Copy)]
pub struct Made<'a> {
    /// Who.
    pub actor: &'a str,
    /// `create`, `update`, `restore` or `before`.
    pub action: &'a str,
    /// The version a restore brought back.
    pub restored_from: Option<i64>,
}

/// Keeps `definition` as version `version` of the `kind` object `id` (a version already
/// kept stays as it is).
pub async fn record(
    db: impl PgExecutor<'_>,
    kind: Kind,
    id: i64,
    version: i64,
    definition: &(impl Serialize + Sync),
    made: Made<'_>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO versions (kind, object_id, version, definition, actor, action, restored_from)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kind, object_id, version) DO NOTHING",
        kind.as_str(),
        id,
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

/// Every kept version of the `kind` object `id`, newest first.
pub async fn list(db: impl PgExecutor<'_>, kind: Kind, id: i64) -> Result<Vec<Version>, StoreError> {
    Ok(sqlx::query_as!(
        Version,
        "SELECT version, actor, action, restored_from, created_at, definition
         FROM versions WHERE kind = $1 AND object_id = $2 ORDER BY version DESC",
        kind.as_str(),
        id
    )
    .fetch_all(db)
    .await?)
}

/// Version `version` of the `kind` object `id`.
pub async fn get(
    db: impl PgExecutor<'_>,
    kind: Kind,
    id: i64,
    version: i64,
) -> Result<Option<Version>, StoreError> {
    Ok(sqlx::query_as!(
        Version,
        "SELECT version, actor, action, restored_from, created_at, definition
         FROM versions WHERE kind = $1 AND object_id = $2 AND version = $3",
        kind.as_str(),
        id,
        version
    )
    .fetch_optional(db)
    .await?)
}
