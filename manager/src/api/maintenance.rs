//! `/api/v1/maintenance` and `/api/v1/cluster/pause`, `/resume`: windows in which the
//! instants of some or all jobs are skipped or deferred.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::maintenance::{Policy, Window};
use serde::Serialize;
use serde_json::Value;

use super::bodies::MaintenanceBody;
use super::Id;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input};
use crate::service::maintenance::{self, WindowDraft};
use crate::service::Paged;
use crate::state::AppState;

/// The windows not over yet (active or to come), the earliest first.
#[utoipa::path(get, path = "/maintenance", operation_id = "list_maintenance", tag = "maintenance",
    responses(
        (status = OK, description = "The windows", body = Paged<Window>),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(State(state): State<AppState>, _who: Principal) -> Result<Json<Paged<Window>>, ApiError> {
    Ok(Json(Paged::all(maintenance::current(&state.handles).await?)))
}

/// Open a maintenance window (cluster admins).
#[utoipa::path(post, path = "/maintenance", operation_id = "create_maintenance", tag = "maintenance",
    request_body = MaintenanceBody,
    responses(
        (status = CREATED, description = "The window", body = Window),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named; nothing was changed", body = ErrorBody),
        (status = "default", description = "Not a cluster admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Window>), ApiError> {
    let mut input = Input::new(body)?;
    let from = input.time("from").flatten();
    let until = input.time("until").flatten();
    let scope = input.raw("scope");
    if scope.is_none() {
        input.error("scope", "required");
    }
    let policy = input
        .choice::<PolicyName>("policy")
        .flatten()
        .map_or(Policy::Skip, |p| p.0);
    let reason = input.text("reason").flatten().unwrap_or_default();
    let stop_running = input.boolean("stop_running").flatten().unwrap_or(false);
    input.finish()?;
    let draft = WindowDraft {
        from,
        until,
        scope: scope.unwrap_or_default(),
        policy,
        reason,
        stop_running,
    };
    let window = maintenance::create(&state.handles, &who, draft).await?;
    Ok((StatusCode::CREATED, Json(window)))
}

/// A policy's name in a body.
struct PolicyName(Policy);

impl std::str::FromStr for PolicyName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "skip" => Ok(PolicyName(Policy::Skip)),
            "defer" => Ok(PolicyName(Policy::Defer)),
            other => Err(format!("{other:?} is not skip or defer")),
        }
    }
}

/// Delete a window (cluster admins); the instants it skipped stay in the ledger.
#[utoipa::path(delete, path = "/maintenance/{id}", operation_id = "delete_maintenance", tag = "maintenance",
    params(("id" = i64, Path, description = "The window")),
    responses(
        (status = NO_CONTENT, description = "Deleted"),
        (status = NOT_FOUND, description = "No such window", body = ErrorBody),
        (status = "default", description = "Not a cluster admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    maintenance::delete(&state.handles, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause the cluster: an open-ended window over every job from now; their instants are
/// recorded skipped until the resume (cluster admins).
#[utoipa::path(post, path = "/cluster/pause", operation_id = "pause_cluster", tag = "maintenance",
    responses(
        (status = CREATED, description = "The window of the pause", body = Window),
        (status = "default", description = "Not a cluster admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn pause_cluster(
    State(state): State<AppState>,
    who: Principal,
) -> Result<(StatusCode, Json<Window>), ApiError> {
    let window = maintenance::pause_cluster(&state.handles, &who).await?;
    Ok((StatusCode::CREATED, Json(window)))
}

/// What a resume ended.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Resumed {
    /// Open-ended windows over every job that it ended.
    pub ended: u64,
}

/// Resume the cluster: end every open-ended window over every job now (cluster admins).
#[utoipa::path(post, path = "/cluster/resume", operation_id = "resume_cluster", tag = "maintenance",
    responses(
        (status = OK, description = "How many windows it ended", body = Resumed),
        (status = "default", description = "Not a cluster admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn resume_cluster(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Resumed>, ApiError> {
    let ended = maintenance::resume_cluster(&state.handles, &who).await?;
    Ok(Json(Resumed { ended }))
}
