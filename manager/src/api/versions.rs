//! The handlers of an object's kept versions (jobs, triggers, workflows): list them, read
//! one, restore one. Each object's service module answers; the handlers are the same
//! extractors and answers, each with its own OpenAPI description.
//!
//! They are macros rather than generic functions because `utoipa::path` documents one
//! handler function at a time.

use crate::error::ApiError;

/// An object's id and one of its versions, from the path; `what` names them in a 404
/// (`job`, `job version`).
pub(super) fn id_and_version(
    what: (&'static str, &'static str),
    id: &str,
    version: &str,
) -> Result<(i64, i64), ApiError> {
    let id = id.parse::<i64>().map_err(|_| ApiError::not_found(what.0, id))?;
    let version = version
        .parse::<i64>()
        .map_err(|_| ApiError::not_found(what.1, version))?;
    Ok((id, version))
}

/// `list`: every kept version of the object, newest first, from `$service::list`.
macro_rules! list_versions {
    ($(#[doc = $doc:tt])* $service:ident -> $version:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt, id: $id:tt, missing: $missing:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(get, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id)),
            responses(
                (status = OK, description = "Its versions, newest first", body = Paged<$version>),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn list(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            super::Id(id): super::Id,
        ) -> Result<axum::Json<crate::service::Paged<$version>>, crate::error::ApiError> {
            let items = $service::list(&state.handles, &who, id).await?;
            let total = items.len() as i64;
            Ok(axum::Json(crate::service::Paged { items, total }))
        }
    };
}

/// `get`: one kept version, from `$service::get`; `what` names the object and its
/// version in a 404 for a path that is not a number.
macro_rules! get_version {
    ($(#[doc = $doc:tt])* $service:ident -> $version:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt, id: $id:tt, missing: $missing:tt,
        what: $what:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(get, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id), ("version" = i64, Path, description = "Its version")),
            responses(
                (status = OK, description = "The version", body = $version),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn get(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            axum::extract::Path((id, version)): axum::extract::Path<(String, String)>,
        ) -> Result<axum::Json<$version>, crate::error::ApiError> {
            let (id, version) = super::versions::id_and_version($what, &id, &version)?;
            Ok(axum::Json($service::get(&state.handles, &who, id, version).await?))
        }
    };
}

/// `restore`: makes a kept version the object's definition again, through
/// `$service::restore`; `refused` is the documented answer when the service refuses.
macro_rules! restore_version {
    ($(#[doc = $doc:tt])* $service:ident -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt, id: $id:tt, ok: $ok:tt, missing: $missing:tt,
        refused: $refused:tt, what: $what:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(post, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id), ("version" = i64, Path, description = "The version to restore")),
            responses(
                (status = OK, description = $ok, body = $item),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                $refused,
                (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn restore(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            axum::extract::Path((id, version)): axum::extract::Path<(String, String)>,
        ) -> Result<axum::Json<$item>, crate::error::ApiError> {
            let (id, version) = super::versions::id_and_version($what, &id, &version)?;
            Ok(axum::Json($service::restore(&state.handles, &who, id, version).await?))
        }
    };
}

pub(super) use {get_version, list_versions, restore_version};
