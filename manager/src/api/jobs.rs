//! `/api/v1/jobs`: list, create, read, edit, delete, pause, resume, run now.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::JobKind;
use serde_json::{json, Value};

use super::Id;
use crate::auth::Principal;
use crate::db::jobs::JobFilter;
use crate::error::{ApiError, FieldErrors};
use crate::input::{check, ApiJson, QueryParams};
use crate::service::jobs::{self, JobView};
use crate::service::Paged;
use crate::state::AppState;

/// `GET /api/v1/jobs?q=&kind=&paused=&limit=&offset=`.
pub async fn list(
    State(state): State<AppState>,
    _who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<JobView>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = JobFilter {
        q: query.text("q").map(str::to_owned),
        kind: query.choice::<JobKind>("kind", &mut errors),
        paused: query.choice::<bool>("paused", &mut errors),
    };
    check(errors)?;
    Ok(Json(jobs::list(&state, &filter, page).await?))
}

/// `POST /api/v1/jobs` → 201.
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    Ok((StatusCode::CREATED, Json(jobs::create(&state, &who, body).await?)))
}

/// `GET /api/v1/jobs/{id}`.
pub async fn get(
    State(state): State<AppState>,
    _who: Principal,
    Id(id): Id,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(jobs::get(&state, id).await?))
}

/// `PATCH /api/v1/jobs/{id}` with `version`; 409 when it is stale.
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(jobs::update(&state, &who, id, body).await?))
}

/// `DELETE /api/v1/jobs/{id}` → 204.
pub async fn delete(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    jobs::delete(&state, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/jobs/{id}/pause`.
pub async fn pause(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(jobs::set_paused(&state, &who, id, true).await?))
}

/// `POST /api/v1/jobs/{id}/resume`.
pub async fn resume(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(jobs::set_paused(&state, &who, id, false).await?))
}

/// `POST /api/v1/jobs/{id}/run` → 202 `{"run_id"}`.
pub async fn run_now(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let run_id = jobs::run_now(&state, &who, id).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"run_id": run_id}))))
}
