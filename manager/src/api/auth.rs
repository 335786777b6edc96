//! `POST /api/v1/auth/token` (a bearer token for scripts, under the login rate limit),
//! `DELETE /api/v1/auth/token` (revoke the token in use), `GET /api/v1/me`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;

use super::bodies::{IssuedToken, LoginBody, Me};

use crate::auth::ratelimit::{self, ClientAddr};
use crate::auth::{Principal, Via};
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input};
use crate::service;
use crate::state::AppState;

/// Trade a user name and password for a bearer token (rate-limited per user and address).
#[utoipa::path(post, path = "/auth/token", operation_id = "create_token", tag = "auth", security(()),
    request_body = LoginBody,
    responses(
        (status = CREATED, description = "The token; send it as `Authorization: Bearer …`", body = IssuedToken),
        (status = UNAUTHORIZED, description = "Wrong user name or password", body = ErrorBody),
        (status = TOO_MANY_REQUESTS, description = "Too many failed attempts; see `Retry-After`", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
    ))]
pub async fn create_token(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    let mut input = Input::new(body)?;
    let username = input.text("username");
    let username = input.required("username", username);
    let password = input.text("password");
    let password = input.required("password", password);
    let name = input.text("name");
    let name = input.not_null("name", name).unwrap_or_default();
    input.finish()?;
    let (Some(username), Some(password)) = (username, password) else {
        return Err(ApiError::field("body", "username and password are required"));
    };
    let user = ratelimit::authenticate(&state, &username, &password, &address).await?;
    let who = Principal {
        user_id: user.id,
        username: user.username.clone(),
        role: user.role(),
        via: Via::Token(0),
    };
    let (token_id, token) = service::users::create_token(&state, &who, &name).await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedToken {
            token,
            token_id,
            role: user.role(),
        }),
    ))
}

/// Revoke the bearer token this request carries.
#[utoipa::path(delete, path = "/auth/token", operation_id = "revoke_current_token", tag = "auth",
    responses(
        (status = NO_CONTENT, description = "Revoked"),
        (status = UNPROCESSABLE_ENTITY, description = "The request was not made with a bearer token", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn revoke_token(State(state): State<AppState>, who: Principal) -> Result<StatusCode, ApiError> {
    let Via::Token(token_id) = who.via else {
        return Err(ApiError::field(
            "authorization",
            "only a bearer token can revoke itself",
        ));
    };
    service::users::revoke_token(&state, &who, token_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who the caller is.
#[utoipa::path(get, path = "/me", operation_id = "me", tag = "auth",
    responses(
        (status = OK, description = "The caller", body = Me),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn me(who: Principal) -> Json<Me> {
    Json(Me {
        id: who.user_id,
        username: who.username,
        role: who.role,
    })
}
