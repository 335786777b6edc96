//! `/api/v1/executors` (and their cordon, uncordon and drain), `/api/v1/monitors`,
//! `/api/v1/status`, `/api/v1/audit`.

use axum::extract::{Path, State};
use axum::Json;
use probactr_common::model::ProcessRole;
use probactr_common::store::processes::Routing;
use probactr_common::store::{audit::Entry, cluster::Status};
use uuid::Uuid;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::cluster::ProcessView;
use crate::service::{self, Paged};
use crate::state::AppState;

async fn processes(
    state: &AppState,
    who: &Principal,
    role: ProcessRole,
) -> Result<Json<Paged<ProcessView>>, ApiError> {
    Ok(Json(Paged::all(
        service::cluster::processes(&state.handles, who, role).await?,
    )))
}

/// Registered executors, with how many runs each is executing and can execute.
#[utoipa::path(get, path = "/executors", operation_id = "list_executors", tag = "cluster",
    responses(
        (status = OK, description = "Executors, newest first", body = Paged<ProcessView>),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn executors(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Paged<ProcessView>>, ApiError> {
    processes(&state, &who, ProcessRole::Executor).await
}

/// Stop an executor claiming new runs (those running go on) (cluster admins).
#[utoipa::path(post, path = "/executors/{id}/cordon", operation_id = "cordon_executor", tag = "cluster",
    params(("id" = Uuid, Path, description = "The executor")),
    responses(
        (status = OK, description = "The cordoned executor", body = ProcessView),
        (status = NOT_FOUND, description = "No such executor", body = ErrorBody),
        (status = CONFLICT, description = "The executor is dead or stopped", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn cordon(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> Result<Json<ProcessView>, ApiError> {
    route(&state, &who, &id, Routing::Cordon).await
}

/// Let a cordoned executor claim runs again (a draining one goes on draining) (cluster admins).
#[utoipa::path(post, path = "/executors/{id}/uncordon", operation_id = "uncordon_executor", tag = "cluster",
    params(("id" = Uuid, Path, description = "The executor")),
    responses(
        (status = OK, description = "The executor", body = ProcessView),
        (status = NOT_FOUND, description = "No such executor", body = ErrorBody),
        (status = CONFLICT, description = "The executor is dead or stopped", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn uncordon(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> Result<Json<ProcessView>, ApiError> {
    route(&state, &who, &id, Routing::Uncordon).await
}

/// Drain an executor: cordon it; at its next heartbeat it lets its running jobs finish
/// (up to its `PROBACTR_DRAIN_TIMEOUT`, then stops and records the rest, which are taken
/// over elsewhere per their job's policy) and exits, as on SIGTERM (cluster admins).
#[utoipa::path(post, path = "/executors/{id}/drain", operation_id = "drain_executor", tag = "cluster",
    params(("id" = Uuid, Path, description = "The executor")),
    responses(
        (status = OK, description = "The executor, asked to drain", body = ProcessView),
        (status = NOT_FOUND, description = "No such executor", body = ErrorBody),
        (status = CONFLICT, description = "The executor is dead or stopped", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn drain(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> Result<Json<ProcessView>, ApiError> {
    route(&state, &who, &id, Routing::Drain).await
}

async fn route(
    state: &AppState,
    who: &Principal,
    id: &str,
    change: Routing,
) -> Result<Json<ProcessView>, ApiError> {
    let id = Uuid::parse_str(id).map_err(|_| ApiError::not_found("executor", id))?;
    Ok(Json(
        service::cluster::route_executor(&state.handles, who, id, change).await?,
    ))
}

/// Registered monitors.
#[utoipa::path(get, path = "/monitors", operation_id = "list_monitors", tag = "cluster",
    responses(
        (status = OK, description = "Monitors, newest first", body = Paged<ProcessView>),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn monitors(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Paged<ProcessView>>, ApiError> {
    processes(&state, &who, ProcessRole::Monitor).await
}

/// The cluster at a glance: processes by state, the last hour's runs, recent failures,
/// the next instants to fire. Computed at most once a second per manager: it may be up to
/// a second old.
#[utoipa::path(get, path = "/status", operation_id = "status", tag = "cluster",
    responses(
        (status = OK, description = "The summary", body = Status),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn status(State(state): State<AppState>, who: Principal) -> Result<Json<Status>, ApiError> {
    let status = service::cluster::status_for(&state.handles, &who).await?;
    Ok(Json(Status::clone(&status)))
}

/// The audit log, newest first: who changed what, when, before and after (cluster
/// admins: every entry; a namespace's admins: that namespace's entries).
#[utoipa::path(get, path = "/audit", operation_id = "list_audit", tag = "cluster",
    params(
        ("user" = Option<String>, Query, description = "Only what this user did (their name)"),
        ("object_type" = Option<String>, Query, description = "Only entries on this kind of object: job, trigger, run, user, token, secret, workflow…"),
        ("object" = Option<String>, Query, description = "Only entries on the object of this name (a trigger's or run's: its job's) or id"),
        ("action" = Option<String>, Query, description = "Only this action (`job.update`), or every action of a kind (`job`)"),
        ("namespace" = Option<String>, Query, description = "Only entries on objects of this namespace"),
        ("limit" = Option<i64>, Query, description = "Page size, 1–500 (default 50)"),
        ("offset" = Option<i64>, Query, description = "Items to skip"),
    ),
    responses(
        (status = OK, description = "A page of the audit log", body = Paged<Entry>),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad parameter, named", body = ErrorBody),
        (status = FORBIDDEN, description = "Not an admin", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn audit(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<Entry>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = service::cluster::audit_filter(&query, &mut errors);
    check(errors)?;
    Ok(Json(
        service::cluster::audit_log(&state.handles, &who, &filter, page).await?,
    ))
}
