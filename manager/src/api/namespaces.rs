//! `/api/v1/namespaces`: list (the caller's), get; create, change, delete (cluster admins).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use probactr_common::store::namespaces::Namespace;
use serde_json::Value;

use super::bodies::NamespaceBody;
use super::cluster_wide::create_from_body;
use super::listing::list_handler;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::input::ApiJson;
use crate::service::{namespaces, Paged};
use crate::state::AppState;

list_handler! {
    /// List the namespaces: every one for a cluster admin, else those where the caller has
    /// a role.
    namespaces -> Namespace { path: "/namespaces", operation_id: "list_namespaces", tag: "namespaces",
        ok: "The namespaces the caller sees", otherwise: "Not signed in, or a server error" }
}

create_from_body! {
    /// Create a namespace (cluster admins).
    namespaces -> Namespace { path: "/namespaces", operation_id: "create_namespace", tag: "namespaces",
        body: NamespaceBody, ok: "The namespace" }
}

/// One namespace the caller sees.
#[utoipa::path(get, path = "/namespaces/{name}", operation_id = "get_namespace", tag = "namespaces",
    params(("name" = String, Path, description = "The namespace")),
    responses(
        (status = OK, description = "The namespace", body = Namespace),
        (status = NOT_FOUND, description = "No such namespace the caller sees", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
) -> Result<Json<Namespace>, ApiError> {
    Ok(Json(namespaces::get(&state.handles, &who, &name).await?))
}

/// Change a namespace's description or quotas; null removes a quota (cluster admins).
#[utoipa::path(patch, path = "/namespaces/{name}", operation_id = "update_namespace", tag = "namespaces",
    params(("name" = String, Path, description = "The namespace")),
    request_body = NamespaceBody,
    responses(
        (status = OK, description = "The namespace as changed", body = Namespace),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = NOT_FOUND, description = "No such namespace", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn update(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Namespace>, ApiError> {
    Ok(Json(namespaces::update(&state.handles, &who, &name, body).await?))
}

/// Delete an empty namespace (cluster admins).
#[utoipa::path(delete, path = "/namespaces/{name}", operation_id = "delete_namespace", tag = "namespaces",
    params(("name" = String, Path, description = "The namespace")),
    responses(
        (status = NO_CONTENT, description = "Deleted"),
        (status = NOT_FOUND, description = "No such namespace", body = ErrorBody),
        (status = CONFLICT, description = "It still holds objects (named)", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    namespaces::delete(&state.handles, &who, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
