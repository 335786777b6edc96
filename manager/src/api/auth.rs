//! `POST /api/v1/auth/token` (a bearer token for scripts, under the login rate limit),
//! `DELETE /api/v1/auth/token` (revoke the token in use), `GET /api/v1/me`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::TokenOrigin;
use serde_json::Value;

use super::bodies::{IssuedToken, LoginBody, Me};

use crate::auth::ratelimit::{self, ClientAddr};
use crate::auth::{Principal, Via};
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input};
use crate::service::users::{self, TokenRequest};
use crate::state::AppState;

/// The longest user name a login may name (names are at most 100 characters).
const MAX_USERNAME_CHARS: usize = 100;
/// The longest password a login may send.
const MAX_PASSWORD_BYTES: usize = 1024;

/// Trade a user name and password for a bearer token (rate-limited per user and address).
#[utoipa::path(post, path = "/auth/token", operation_id = "create_token", tag = "auth", security(()),
    request_body = LoginBody,
    responses(
        (status = CREATED, description = "The token; send it as `Authorization: Bearer …`", body = IssuedToken),
        (status = UNAUTHORIZED, description = "Wrong user name or password", body = ErrorBody),
        (status = FORBIDDEN, description = "Password logins are off (`PROBACTR_LOCAL_LOGIN=false`) for all but the break-glass admin", body = ErrorBody),
        (status = TOO_MANY_REQUESTS, description = "Too many failed attempts; see `Retry-After`", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
    ))]
pub async fn create_token(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    let mut input = Input::new(body)?;
    let username = input.required_text("username");
    let password = input.required_text("password");
    let name = input.text("name");
    let name = input.not_null("name", name).unwrap_or_default();
    let days = input.int("expires_in_days", 1, users::MAX_TOKEN_DAYS);
    // Bounded before anything is looked up: a huge name is a bad field, not a server error.
    if username
        .as_ref()
        .is_some_and(|u| u.chars().count() > MAX_USERNAME_CHARS)
    {
        input.error(
            "username",
            format!("must be at most {MAX_USERNAME_CHARS} characters"),
        );
    }
    if password.as_ref().is_some_and(|p| p.len() > MAX_PASSWORD_BYTES) {
        input.error("password", format!("must be at most {MAX_PASSWORD_BYTES} bytes"));
    }
    if name.chars().count() > users::MAX_TOKEN_NAME_CHARS {
        input.error(
            "name",
            format!("must be at most {} characters", users::MAX_TOKEN_NAME_CHARS),
        );
    }
    input.finish()?;
    let (Some(username), Some(password)) = (username, password) else {
        return Err(ApiError::field("body", "username and password are required"));
    };
    let user = ratelimit::authenticate(&state, &username, &password, &address).await?;
    let access = crate::auth::session_access(&state.handles.pool, user.id).await?;
    let best = access.best_role();
    let who = Principal {
        user_id: user.id,
        username: user.username.clone(),
        access,
        via: Via::Token(0),
        changing: true,
    };
    let request = TokenRequest {
        name,
        origin: TokenOrigin::Login,
        expires_in_days: days.flatten(),
        namespaces: None,
        role: None,
    };
    let (token_id, token) = users::create_token(&state.handles, &who, request).await?;
    Ok((
        StatusCode::CREATED,
        Json(IssuedToken {
            token,
            token_id,
            role: best,
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
    users::revoke_token(&state.handles, &who, token_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who the caller is.
#[utoipa::path(get, path = "/me", operation_id = "me", tag = "auth",
    responses(
        (status = OK, description = "The caller", body = Me),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn me(State(state): State<AppState>, who: Principal) -> Result<Json<Me>, ApiError> {
    let namespaces = if who.access.cluster_admin {
        probactr_common::store::namespaces::names(&state.handles.pool)
            .await?
            .into_iter()
            .map(|name| (name, crate::auth::Role::Admin))
            .collect()
    } else {
        who.access.roles.clone()
    };
    Ok(Json(Me {
        id: who.user_id,
        role: who.access.best_role(),
        cluster_admin: who.access.cluster_admin,
        namespaces,
        username: who.username,
    }))
}
