//! `/api/v1/secrets` (admins): named values jobs reference as `{{ secrets.NAME }}`.
//! Values go in and never come out.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use probactr_common::store::secrets::SecretInfo;
use serde_json::Value;

use super::bodies::{NewSecretBody, SecretValueBody};
use super::listing::list_handler;
use super::named::delete_named;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input, QueryParams};
use crate::service::secrets::{self, Rotated};
use crate::service::Paged;
use crate::state::AppState;

list_handler! {
    /// Every secret: names, when and by whom they were set; never values.
    secrets -> SecretInfo { path: "/secrets", operation_id: "list_secrets", tag: "secrets",
        namespace: "Only this namespace's secrets (default: every namespace where the caller is an admin)",
        ok: "The secrets", otherwise: "Not an admin, not signed in, or a server error" }
}

/// Create (or replace) a secret.
#[utoipa::path(post, path = "/secrets", operation_id = "create_secret", tag = "secrets",
    request_body = NewSecretBody,
    responses(
        (status = CREATED, description = "Created"),
        (status = NO_CONTENT, description = "Replaced"),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = CONFLICT, description = "The manager has no PROBACTR_SECRET_KEY", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<StatusCode, ApiError> {
    let mut input = Input::new(body)?;
    let name = input.required_text("name");
    let namespace = input.namespace();
    let value = input.required_text("value");
    input.finish()?;
    let created = secrets::set(
        &state.handles,
        &who,
        &namespace,
        &name.unwrap_or_default(),
        value.as_deref(),
        false,
    )
    .await?;
    Ok(if created {
        StatusCode::CREATED
    } else {
        StatusCode::NO_CONTENT
    })
}

/// Replace a secret's value.
#[utoipa::path(put, path = "/secrets/{name}", operation_id = "update_secret", tag = "secrets",
    params(("name" = String, Path, description = "The secret"),
           ("namespace" = Option<String>, Query, description = "Its namespace (default: default)")),
    request_body = SecretValueBody,
    responses(
        (status = NO_CONTENT, description = "Replaced"),
        (status = NOT_FOUND, description = "No such secret", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    query: QueryParams,
    ApiJson(body): ApiJson<Value>,
) -> Result<StatusCode, ApiError> {
    let mut input = Input::new(body)?;
    let value = input.required_text("value");
    input.finish()?;
    let namespace = query.namespace();
    secrets::set(&state.handles, &who, namespace, &name, value.as_deref(), true).await?;
    Ok(StatusCode::NO_CONTENT)
}

delete_named! {
    /// Delete a secret (jobs that reference it then fail, saying so).
    secrets { path: "/secrets/{name}", operation_id: "delete_secret", tag: "secrets",
        name: "The secret", missing: "No such secret" }
}

/// Re-seal every secret under the current key (after a key rotation).
#[utoipa::path(post, path = "/secrets/rotate", operation_id = "rotate_secrets", tag = "secrets",
    responses(
        (status = OK, description = "What moved", body = Rotated),
        (status = CONFLICT, description = "No key, or a secret no key opens", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn rotate(State(state): State<AppState>, who: Principal) -> Result<Json<Rotated>, ApiError> {
    Ok(Json(secrets::rotate(&state.handles, &who).await?))
}
