//! `/api/v1/runs`: list (newest first, filtered), read, cancel.

use axum::extract::State;
use axum::Json;
use probactr_common::model::RunState;

use super::Id;
use crate::auth::Principal;
use crate::db::runs::{RunFilter, RunSummary, RunView};
use crate::error::{ApiError, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::runs::{self, Cancelled};
use crate::service::Paged;
use crate::state::AppState;

/// `GET /api/v1/runs?job_id=&state=&since=&until=&limit=&offset=`.
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

/// `GET /api/v1/runs/{id}`, output included.
pub async fn get(
    State(state): State<AppState>,
    _who: Principal,
    Id(id): Id,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(runs::get(&state, id).await?))
}

/// `POST /api/v1/runs/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Cancelled>, ApiError> {
    Ok(Json(runs::cancel(&state, &who, id).await?))
}
