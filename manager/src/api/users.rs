//! `/api/v1/users` (cluster admins), `/api/v1/users/{id}/roles`, `/api/v1/me/password`, `/api/v1/tokens`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::TokenOrigin;
use probactr_common::store::api_tokens::TokenInfo;
use serde_json::Value;

use super::bodies::{CreatedToken, NewTokenBody, NewUserBody, PasswordChangeBody, RolesBody, UserPatchBody};
use super::cluster_wide::create_from_body;
use super::listing::list_handler;
use super::Id;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input};
use crate::service::users::{self, RolesView, TokenRequest, UserView};
use crate::service::Paged;
use crate::state::AppState;

list_handler! {
    /// List users (admins).
    users -> UserView { path: "/users", operation_id: "list_users", tag: "users",
        ok: "Every user", otherwise: "Not allowed, not signed in, or a server error" }
}

create_from_body! {
    /// Create a user (admins).
    users -> UserView { path: "/users", operation_id: "create_user", tag: "users",
        body: NewUserBody, ok: "The user" }
}

/// Change a user's role, disabled flag or password (admins).
#[utoipa::path(patch, path = "/users/{id}", operation_id = "update_user", tag = "users",
    params(("id" = i64, Path, description = "The user")),
    request_body = UserPatchBody,
    responses(
        (status = OK, description = "The user as changed", body = UserView),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = NOT_FOUND, description = "No such user", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<UserView>, ApiError> {
    Ok(Json(users::update(&state.handles, &who, id, body).await?))
}

/// Change one's own password; ends one's sessions.
#[utoipa::path(post, path = "/me/password", operation_id = "change_password", tag = "users",
    request_body = PasswordChangeBody,
    responses(
        (status = NO_CONTENT, description = "Changed"),
        (status = UNPROCESSABLE_ENTITY, description = "Wrong current password, or a weak new one", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn change_password(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<StatusCode, ApiError> {
    users::change_own_password(&state.handles, &who, body).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's API tokens (never their secrets).
#[utoipa::path(get, path = "/tokens", operation_id = "list_tokens", tag = "users",
    responses(
        (status = OK, description = "The caller's tokens", body = Paged<TokenInfo>),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn tokens(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Paged<TokenInfo>>, ApiError> {
    Ok(Json(Paged::all(users::tokens(&state.handles, &who).await?)))
}

/// Create an API token for the caller; its secret is shown this once.
#[utoipa::path(post, path = "/tokens", operation_id = "create_api_token", tag = "users",
    request_body = NewTokenBody,
    responses(
        (status = CREATED, description = "The token", body = CreatedToken),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create_token(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    let mut input = Input::new(body)?;
    let name = input.text("name");
    let name = input.not_null("name", name).unwrap_or_default();
    let days = input.int("expires_in_days", 1, users::MAX_TOKEN_DAYS);
    let role = input.choice::<crate::auth::Role>("role").flatten();
    let namespaces = match input.raw("namespaces") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let names: Vec<String> = items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            if names.len() != items.len() {
                input.error("namespaces", "must be a list of namespace names");
            }
            Some(names)
        }
        Some(_) => {
            input.error("namespaces", "must be a list of namespace names");
            None
        }
    };
    input.finish()?;
    let request = TokenRequest {
        name,
        origin: TokenOrigin::Personal,
        expires_in_days: days.flatten(),
        namespaces,
        role,
    };
    let (id, token) = users::create_token(&state.handles, &who, request).await?;
    Ok((StatusCode::CREATED, Json(CreatedToken { id, token })))
}

/// Revoke one of the caller's API tokens (admins: anyone's).
#[utoipa::path(delete, path = "/tokens/{id}", operation_id = "revoke_api_token", tag = "users",
    params(("id" = i64, Path, description = "The token")),
    responses(
        (status = NO_CONTENT, description = "Revoked"),
        (status = NOT_FOUND, description = "No such token of the caller", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn revoke_token(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    users::revoke_token(&state.handles, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A user's roles (cluster admins).
#[utoipa::path(get, path = "/users/{id}/roles", operation_id = "get_user_roles", tag = "users",
    params(("id" = i64, Path, description = "The user")),
    responses(
        (status = OK, description = "The user's roles", body = RolesView),
        (status = NOT_FOUND, description = "No such user", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn roles(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<RolesView>, ApiError> {
    Ok(Json(users::roles(&state.handles, &who, id).await?))
}

/// Replace a user's roles (cluster admins): the cluster admin flag and the whole list of
/// roles by namespace.
#[utoipa::path(put, path = "/users/{id}/roles", operation_id = "set_user_roles", tag = "users",
    params(("id" = i64, Path, description = "The user")),
    request_body = RolesBody,
    responses(
        (status = OK, description = "The user's roles as set", body = RolesView),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field (an unknown namespace), named", body = ErrorBody),
        (status = NOT_FOUND, description = "No such user", body = ErrorBody),
        (status = CONFLICT, description = "The last enabled cluster admin would lose that role", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn set_roles(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<RolesView>, ApiError> {
    Ok(Json(users::set_roles(&state.handles, &who, id, body).await?))
}
