//! A job's versions: its whole definition as each change left it, and restoring an
//! earlier one (which makes a new version, so a restore can itself be undone).

use probactr_common::jobspec::redact_secrets;
use probactr_common::model::Job;
use probactr_common::store::job_versions::{self, JobVersion, Made};
use probactr_common::store::jobs::NewJob;
use probactr_common::store::{self, audit::Change};
use sqlx::PgConnection;

use super::jobs::{self, JobView};
use super::Handles;
use crate::auth::Principal;
use crate::command::job::definition_of;
use crate::error::ApiError;

/// Keeps `definition` as the version `job` now has, made by `who`.
pub async fn keep(
    conn: &mut PgConnection,
    who: &Principal,
    job: &Job,
    definition: &NewJob,
    action: &str,
    restored_from: Option<i64>,
) -> Result<(), ApiError> {
    let made = Made {
        actor: &who.username,
        action,
        restored_from,
    };
    job_versions::record(conn, job.id, job.version, definition, made).await?;
    Ok(())
}

/// Keeps the version a job had before versions were kept, before it is first changed
/// (nothing when that version is already kept).
pub async fn keep_before(conn: &mut PgConnection, job: &Job) -> Result<(), ApiError> {
    let made = Made {
        actor: "unknown",
        action: "before",
        restored_from: None,
    };
    job_versions::record(conn, job.id, job.version, &definition_of(job), made).await?;
    Ok(())
}

/// The kept versions of job `id`, newest first, secret values masked.
pub async fn list(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<JobVersion>, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    jobs::visible(&mut conn, who, id, false).await?;
    Ok(job_versions::list(&mut *conn, id)
        .await?
        .into_iter()
        .map(masked)
        .collect())
}

/// Version `version` of job `id`, secret values masked.
pub async fn get(handles: &Handles, who: &Principal, id: i64, version: i64) -> Result<JobVersion, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    jobs::visible(&mut conn, who, id, false).await?;
    job_versions::get(&mut *conn, id, version)
        .await?
        .map(masked)
        .ok_or_else(|| ApiError::not_found("job version", version))
}

/// Makes version `version` of job `id` its current definition again, as a new version,
/// checked as an edit is; the job keeps its current pause and owner, and its children.
pub async fn restore(handles: &Handles, who: &Principal, id: i64, version: i64) -> Result<JobView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let before = jobs::visible(&mut tx, who, id, true).await?;
    who.require_operator(&before.namespace, "edit jobs")?;
    who.require_job_kind(&before.namespace, before.kind)?;
    jobs::refuse_deleted(&before)?;
    let kept = job_versions::get(&mut *tx, id, version)
        .await?
        .ok_or_else(|| ApiError::not_found("job version", version))?;
    let mut definition: NewJob = serde_json::from_value(kept.definition).map_err(|err| {
        ApiError::Conflict(format!(
            "version {version} of job {id} cannot be read back ({err}); edit the job instead"
        ))
    })?;
    // A job does not move between namespaces; its pause (perhaps for an incident) and its
    // owner are its current state, not part of the definition brought back.
    definition.namespace = before.namespace.clone();
    definition.paused = before.paused;
    definition.managed_by = before.managed_by.clone();
    who.require_job_kind(&before.namespace, definition.kind)?;
    // The checks an edit makes: what the version names may have changed since.
    jobs::check_secrets(&mut tx, &definition).await?;
    jobs::check_pool(&mut tx, &definition).await?;
    jobs::refuse_triggered_service(&mut tx, &before, &definition).await?;
    keep_before(&mut tx, &before).await?;
    let after = store::jobs::update(&mut *tx, id, before.version, &definition)
        .await
        .map_err(jobs::name_taken)?
        .ok_or_else(|| jobs::stale("job", id, before.version, before.version))?;
    keep(&mut tx, who, &after, &definition, "restore", Some(version)).await?;
    let change = Change {
        action: "job.restore",
        object_type: "job",
        object_id: Some(id),
        before: jobs::audited(&before),
        after: jobs::audited(&after),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        job.id = id,
        restored_from = version,
        version = after.version,
        "job version restored"
    );
    jobs::get(handles, who, id).await
}

/// A version in a job's history: who made it, how, when, and what it changed from the
/// version before it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HistoryEntry {
    /// The version.
    pub version: i64,
    /// Who.
    pub actor: String,
    /// `create`, `update`, `restore` or `before`.
    pub action: String,
    /// The version a restore brought back.
    pub restored_from: Option<i64>,
    /// When.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Each field it changed: name, before, after (as JSON text).
    pub changes: Vec<(String, String, String)>,
}

/// The job's versions, newest first, each with what it changed.
pub async fn history(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<HistoryEntry>, ApiError> {
    let versions = list(handles, who, id).await?;
    let mut entries = Vec::with_capacity(versions.len());
    for (at, version) in versions.iter().enumerate() {
        let previous = versions.get(at + 1).map(|older| &older.definition);
        entries.push(HistoryEntry {
            version: version.version,
            actor: version.actor.clone(),
            action: version.action.clone(),
            restored_from: version.restored_from,
            created_at: version.created_at,
            changes: previous
                .map(|before| changes(before, &version.definition))
                .unwrap_or_default(),
        });
    }
    Ok(entries)
}

/// The top-level fields that differ between two definitions.
fn changes(before: &serde_json::Value, after: &serde_json::Value) -> Vec<(String, String, String)> {
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut fields: Vec<&String> = before.keys().chain(after.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let (old, new) = (before.get(field), after.get(field));
            (old != new).then(|| {
                let text = |value: Option<&serde_json::Value>| {
                    value.map_or_else(|| "—".to_owned(), ToString::to_string)
                };
                (field.clone(), text(old), text(new))
            })
        })
        .collect()
}

/// A version as shown: secret values in its spec masked.
fn masked(mut version: JobVersion) -> JobVersion {
    if let Some(spec) = version.definition.get("spec") {
        version.definition["spec"] = redact_secrets(spec);
    }
    version
}
