//! `/api/v1/users` (admin), `/api/v1/me/password`, `/api/v1/tokens`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::Id;
use crate::auth::Principal;
use crate::db::{sessions::TokenInfo, users::User};
use crate::error::ApiError;
use crate::input::{ApiJson, Input};
use crate::service::{users, Paged};
use crate::state::AppState;

/// `GET /api/v1/users`.
pub async fn list(State(state): State<AppState>, who: Principal) -> Result<Json<Paged<User>>, ApiError> {
    let items = users::list(&state, &who).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// `POST /api/v1/users` → 201.
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<User>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(users::create(&state, &who, body).await?),
    ))
}

/// `PATCH /api/v1/users/{id}` with `role`, `disabled`, `password`.
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<User>, ApiError> {
    Ok(Json(users::update(&state, &who, id, body).await?))
}

/// `POST /api/v1/me/password` → 204; ends the caller's sessions.
pub async fn change_password(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<StatusCode, ApiError> {
    users::change_own_password(&state, &who, body).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/tokens`: the caller's tokens.
pub async fn tokens(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Paged<TokenInfo>>, ApiError> {
    let items = users::tokens(&state, &who).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// `POST /api/v1/tokens` `{"name"}` → 201 `{"id", "token"}` (the secret is shown once).
pub async fn create_token(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut input = Input::new(body)?;
    let name = input.text("name");
    let name = input.not_null("name", name).unwrap_or_default();
    input.finish()?;
    let (id, token) = users::create_token(&state, &who, &name).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": id, "token": token}))))
}

/// `DELETE /api/v1/tokens/{id}` → 204.
pub async fn revoke_token(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    users::revoke_token(&state, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
