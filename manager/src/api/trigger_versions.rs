//! `/api/v1/triggers/{id}/versions`: what changed in a trigger, and restoring an earlier
//! version.

use axum::extract::{Path, State};
use axum::Json;
use probactr_common::store::versions::Version as TriggerVersion;

use super::job_versions::id_and_version;
use super::Id;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::service::trigger_versions;
use crate::service::triggers::TriggerView;
use crate::service::Paged;
use crate::state::AppState;

const WHAT: (&str, &str) = ("trigger", "trigger version");

/// The kept versions of a trigger, newest first: who made each, how, when, and the whole
/// definition (schedule, parameters, calendar, jitter, fires, `after`; secret values masked).
#[utoipa::path(get, path = "/triggers/{id}/versions", operation_id = "list_trigger_versions", tag = "triggers",
    params(("id" = i64, Path, description = "The trigger")),
    responses(
        (status = OK, description = "Its versions, newest first", body = Paged<TriggerVersion>),
        (status = NOT_FOUND, description = "No such trigger", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Paged<TriggerVersion>>, ApiError> {
    let items = trigger_versions::list(&state.handles, &who, id).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// One version of a trigger.
#[utoipa::path(get, path = "/triggers/{id}/versions/{version}", operation_id = "get_trigger_version", tag = "triggers",
    params(("id" = i64, Path, description = "The trigger"), ("version" = i64, Path, description = "Its version")),
    responses(
        (status = OK, description = "The version", body = TriggerVersion),
        (status = NOT_FOUND, description = "No such trigger or version", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<AppState>,
    who: Principal,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<TriggerVersion>, ApiError> {
    let (id, version) = id_and_version(WHAT, &id, &version)?;
    Ok(Json(
        trigger_versions::get(&state.handles, &who, id, version).await?,
    ))
}

/// Make an earlier version the trigger's definition again (as a new version; its pause,
/// fires so far and webhook token stay as they are). Checked as an edit is.
#[utoipa::path(post, path = "/triggers/{id}/versions/{version}/restore", operation_id = "restore_trigger_version", tag = "triggers",
    params(("id" = i64, Path, description = "The trigger"), ("version" = i64, Path, description = "The version to restore")),
    responses(
        (status = OK, description = "The trigger as restored, its next instant recomputed", body = TriggerView),
        (status = NOT_FOUND, description = "No such trigger or version", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "The version no longer passes the checks of an edit (its calendar or the job it waits for is gone), each field named; nothing was changed", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn restore(
    State(state): State<AppState>,
    who: Principal,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<TriggerView>, ApiError> {
    let (id, version) = id_and_version(WHAT, &id, &version)?;
    Ok(Json(
        trigger_versions::restore(&state.handles, &who, id, version).await?,
    ))
}
