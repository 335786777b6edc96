//! A job's versions: its whole definition as each change left it, and restoring an
//! earlier one (which makes a new version, so a restore can itself be undone).

use probactr_common::jobspec::redact_secrets;
use probactr_common::model::Job;
use probactr_common::store::jobs::NewJob;
use probactr_common::store::versions::{Kind, Version as JobVersion};
use probactr_common::store::{self, audit::Change};
use sqlx::PgConnection;

use super::jobs::{self, JobView};
use super::versions::{history_of, kept, read_back, shown_list, HistoryEntry, Versioned};
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
    super::versions::keep(conn, who, versioned(job), definition, action, restored_from).await
}

/// Keeps the version a job had before versions were kept, before it is first changed
/// (nothing when that version is already kept).
pub async fn keep_before(conn: &mut PgConnection, job: &Job) -> Result<(), ApiError> {
    super::versions::keep_before(conn, versioned(job), &definition_of(job)).await
}

/// The version `job` has.
fn versioned(job: &Job) -> Versioned {
    Versioned {
        kind: Kind::Job,
        id: job.id,
        version: job.version,
    }
}

/// The kept versions of job `id`, newest first, secret values masked.
pub async fn list(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<JobVersion>, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    jobs::visible(&mut conn, who, id, false).await?;
    shown_list(&mut *conn, Kind::Job, id, masked).await
}

/// Version `version` of job `id`, secret values masked.
pub async fn get(handles: &Handles, who: &Principal, id: i64, version: i64) -> Result<JobVersion, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    jobs::visible(&mut conn, who, id, false).await?;
    Ok(masked(kept(&mut conn, Kind::Job, id, version).await?))
}

/// Makes version `version` of job `id` its current definition again, as a new version,
/// checked as an edit is; the job keeps its current pause and owner, and its children.
pub async fn restore(handles: &Handles, who: &Principal, id: i64, version: i64) -> Result<JobView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let before = jobs::visible(&mut tx, who, id, true).await?;
    who.require_operator(&before.namespace, "edit jobs")?;
    who.require_job_kind(&before.namespace, before.kind)?;
    jobs::refuse_deleted(&before)?;
    let kept = kept(&mut tx, Kind::Job, id, version).await?;
    let mut definition: NewJob = read_back("job", id, &kept)?;
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

/// The job's versions, newest first, each with what it changed.
pub async fn history(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<HistoryEntry>, ApiError> {
    Ok(history_of(&list(handles, who, id).await?))
}

/// A version as shown: secret values in its spec masked.
fn masked(mut version: JobVersion) -> JobVersion {
    if let Some(spec) = version.definition.get("spec") {
        version.definition["spec"] = redact_secrets(spec);
    }
    version
}
