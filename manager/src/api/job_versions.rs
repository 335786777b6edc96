//! `/api/v1/jobs/{id}/versions`: what changed in a job, and restoring an earlier version.

use axum::extract::{Path, State};
use axum::Json;
use probactr_common::store::versions::Version as JobVersion;

use super::Id;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::service::job_versions;
use crate::service::jobs::JobView;
use crate::service::Paged;
use crate::state::AppState;

/// A job's or workflow's id and one of its versions, from the path; `what` names them in
/// a 404 (`job`, `job version`).
pub(super) fn id_and_version(
    what: (&'static str, &'static str),
    id: &str,
    version: &str,
) -> Result<(i64, i64), ApiError> {
    let id = id.parse::<i64>().map_err(|_| ApiError::not_found(what.0, id))?;
    let version = version
        .parse::<i64>()
        .map_err(|_| ApiError::not_found(what.1, version))?;
    Ok((id, version))
}

/// The kept versions of a job, newest first: who made each, how, when, and the whole
/// definition (secret values masked).
#[utoipa::path(get, path = "/jobs/{id}/versions", operation_id = "list_job_versions", tag = "jobs",
    params(("id" = i64, Path, description = "The job")),
    responses(
        (status = OK, description = "Its versions, newest first", body = Paged<JobVersion>),
        (status = NOT_FOUND, description = "No such job", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Paged<JobVersion>>, ApiError> {
    let items = job_versions::list(&state.handles, &who, id).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// One version of a job.
#[utoipa::path(get, path = "/jobs/{id}/versions/{version}", operation_id = "get_job_version", tag = "jobs",
    params(("id" = i64, Path, description = "The job"), ("version" = i64, Path, description = "Its version")),
    responses(
        (status = OK, description = "The version", body = JobVersion),
        (status = NOT_FOUND, description = "No such job or version", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<AppState>,
    who: Principal,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<JobVersion>, ApiError> {
    let (id, version) = id_and_version(("job", "job version"), &id, &version)?;
    Ok(Json(job_versions::get(&state.handles, &who, id, version).await?))
}

/// Make an earlier version the job's definition again (as a new version; its triggers and
/// child jobs stay as they are).
#[utoipa::path(post, path = "/jobs/{id}/versions/{version}/restore", operation_id = "restore_job_version", tag = "jobs",
    params(("id" = i64, Path, description = "The job"), ("version" = i64, Path, description = "The version to restore")),
    responses(
        (status = OK, description = "The job as restored", body = JobView),
        (status = NOT_FOUND, description = "No such job or version", body = ErrorBody),
        (status = CONFLICT, description = "Another job took its name meanwhile, or the version cannot be read back", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn restore(
    State(state): State<AppState>,
    who: Principal,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<JobView>, ApiError> {
    let (id, version) = id_and_version(("job", "job version"), &id, &version)?;
    Ok(Json(
        job_versions::restore(&state.handles, &who, id, version).await?,
    ))
}
