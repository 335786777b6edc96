//! `/api/v1/jobs/{id}/triggers`, `/api/v1/triggers/{id}` and the schedule preview.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::Trigger;
use serde_json::Value;

use super::Id;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::input::ApiJson;
use crate::service::triggers::{self, Preview};
use crate::service::Paged;
use crate::state::AppState;

/// `GET /api/v1/jobs/{id}/triggers` → `{"items", "total"}`.
pub async fn list(
    State(state): State<AppState>,
    _who: Principal,
    Id(job_id): Id,
) -> Result<Json<Paged<Trigger>>, ApiError> {
    let items = triggers::list_for_job(&state, job_id).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// `POST /api/v1/jobs/{id}/triggers` → 201.
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    Id(job_id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Trigger>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(triggers::create(&state, &who, job_id, body).await?),
    ))
}

/// `GET /api/v1/triggers/{id}`.
pub async fn get(
    State(state): State<AppState>,
    _who: Principal,
    Id(id): Id,
) -> Result<Json<Trigger>, ApiError> {
    Ok(Json(triggers::get(&state, id).await?))
}

/// `PATCH /api/v1/triggers/{id}` with `version`; 409 when it is stale.
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Trigger>, ApiError> {
    Ok(Json(triggers::update(&state, &who, id, body).await?))
}

/// `DELETE /api/v1/triggers/{id}` → 204.
pub async fn delete(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    triggers::delete(&state, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/triggers/{id}/pause`.
pub async fn pause(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Trigger>, ApiError> {
    Ok(Json(triggers::set_paused(&state, &who, id, true).await?))
}

/// `POST /api/v1/triggers/{id}/resume`.
pub async fn resume(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Trigger>, ApiError> {
    Ok(Json(triggers::set_paused(&state, &who, id, false).await?))
}

/// `POST /api/v1/schedule/preview` → `{"instants": [...]}`.
pub async fn preview(_who: Principal, ApiJson(body): ApiJson<Value>) -> Result<Json<Preview>, ApiError> {
    Ok(Json(triggers::preview(body)?))
}
