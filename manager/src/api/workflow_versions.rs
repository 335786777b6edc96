//! `/api/v1/workflows/{id}/versions`: what changed in a workflow, and restoring an
//! earlier version.

use axum::extract::{Path, State};
use axum::Json;
use probactr_common::store::versions::Version as WorkflowVersion;

use super::job_versions::id_and_version;
use super::Id;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::service::workflow_versions;
use crate::service::workflows::WorkflowView;
use crate::service::Paged;
use crate::state::AppState;

const WHAT: (&str, &str) = ("workflow", "workflow version");

/// The kept versions of a workflow, newest first: who made each, how, when, and the whole
/// definition (name, description, steps, declared parameters; secret values masked).
#[utoipa::path(get, path = "/workflows/{id}/versions", operation_id = "list_workflow_versions", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow")),
    responses(
        (status = OK, description = "Its versions, newest first", body = Paged<WorkflowVersion>),
        (status = NOT_FOUND, description = "No such workflow", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Paged<WorkflowVersion>>, ApiError> {
    let items = workflow_versions::list(&state.handles, &who, id).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// One version of a workflow.
#[utoipa::path(get, path = "/workflows/{id}/versions/{version}", operation_id = "get_workflow_version", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow"), ("version" = i64, Path, description = "Its version")),
    responses(
        (status = OK, description = "The version", body = WorkflowVersion),
        (status = NOT_FOUND, description = "No such workflow or version", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<AppState>,
    who: Principal,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<WorkflowVersion>, ApiError> {
    let (id, version) = id_and_version(WHAT, &id, &version)?;
    Ok(Json(
        workflow_versions::get(&state.handles, &who, id, version).await?,
    ))
}

/// Make an earlier version the workflow's definition again (as a new version; its pause,
/// triggers and runs stay as they are). Checked as an edit is.
#[utoipa::path(post, path = "/workflows/{id}/versions/{version}/restore", operation_id = "restore_workflow_version", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow"), ("version" = i64, Path, description = "The version to restore")),
    responses(
        (status = OK, description = "The workflow as restored", body = WorkflowView),
        (status = NOT_FOUND, description = "No such workflow or version", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "The version no longer passes the checks of an edit (a job it names is gone), each field named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn restore(
    State(state): State<AppState>,
    who: Principal,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<WorkflowView>, ApiError> {
    let (id, version) = id_and_version(WHAT, &id, &version)?;
    Ok(Json(
        workflow_versions::restore(&state.handles, &who, id, version).await?,
    ))
}
