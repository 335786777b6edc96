//! `/api/v1/runs`: list (newest first, filtered), read, cancel.

use axum::extract::State;
use axum::Json;
use probactr_common::model::RunState;
use probactr_common::store::runs::history::{RunFilter, RunSummary};

use super::Id;
use crate::auth::Principal;

use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::runs::RunView;
use crate::service::runs::{self, Cancelled};
use crate::service::Paged;
use crate::state::AppState;

/// List runs, newest first, filtered and paginated (outputs are only flagged).
#[utoipa::path(get, path = "/runs", operation_id = "list_runs", tag = "runs",
    params(
        ("job_id" = Option<i64>, Query, description = "Only this job's runs"),
        ("state" = Option<RunState>, Query, description = "Only runs in this state"),
        ("since" = Option<String>, Query, description = "Queued at or after this instant (RFC 3339)"),
        ("until" = Option<String>, Query, description = "Queued before this instant (RFC 3339)"),
        ("limit" = Option<i64>, Query, description = "Page size, 1–500 (default 50)"),
        ("offset" = Option<i64>, Query, description = "Items to skip"),
    ),
    responses(
        (status = OK, description = "A page of runs", body = Paged<RunSummary>),
        (status = UNPROCESSABLE_ENTITY, description = "A bad filter, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    _who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<RunSummary>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = RunFilter {
        job_id: query.int("job_id", 1, i64::MAX, &mut errors),
        state: query.choice::<RunState>("state", &mut errors),
        since: query.time("since", &mut errors),
        until: query.time("until", &mut errors),
    };
    check(errors)?;
    Ok(Json(runs::list(&state, &filter, page).await?))
}

/// Read a run with its stored output.
#[utoipa::path(get, path = "/runs/{id}", operation_id = "get_run", tag = "runs",
    params(("id" = i64, Path, description = "The run")),
    responses(
        (status = OK, description = "The run", body = RunView),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<AppState>,
    _who: Principal,
    Id(id): Id,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(runs::get(&state, id).await?))
}

/// Cancel a queued or running run (a running one is stopped within a second).
#[utoipa::path(post, path = "/runs/{id}/cancel", operation_id = "cancel_run", tag = "runs",
    params(("id" = i64, Path, description = "The run")),
    responses(
        (status = OK, description = "Cancelled, or asked to stop", body = Cancelled),
        (status = CONFLICT, description = "The run already ended", body = ErrorBody),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn cancel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Cancelled>, ApiError> {
    Ok(Json(runs::cancel(&state, &who, id).await?))
}
