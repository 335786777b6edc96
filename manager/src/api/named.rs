//! The get and delete handlers of a namespace's named objects (calendars, pools,
//! secrets): the same extractors, the same calls into the object's service module and
//! the same answers, each with its own OpenAPI description (their lists:
//! [`super::listing`]).
//!
//! They are macros rather than generic functions because `utoipa::path` documents one
//! handler function at a time; each object still gets its own handlers, under its own
//! operation ids and words.

/// `get`: one object by the path's name and the query's namespace (default: default),
/// from `$service::get`.
macro_rules! get_named {
    ($(#[doc = $doc:tt])* $service:ident -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt,
        name: $name:tt, missing: $missing:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(get, path = $path, operation_id = $op, tag = $tag,
            params(("name" = String, Path, description = $name),
                   ("namespace" = Option<String>, Query, description = "Its namespace (default: default)")),
            responses(
                (status = OK, description = $name, body = $item),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn get(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            axum::extract::Path(name): axum::extract::Path<String>,
            query: crate::input::QueryParams,
        ) -> Result<axum::Json<$item>, crate::error::ApiError> {
            let namespace = query.namespace();
            Ok(axum::Json($service::get(&state.handles, &who, namespace, &name).await?))
        }
    };
}

/// `delete`: removes one object by the path's name and the query's namespace, through
/// `$service::delete`; a `conflict` names what the service refuses to orphan.
macro_rules! delete_named {
    ($(#[doc = $doc:tt])* $service:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt,
        name: $name:tt, missing: $missing:tt $(, conflict: $conflict:tt)? $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(delete, path = $path, operation_id = $op, tag = $tag,
            params(("name" = String, Path, description = $name),
                   ("namespace" = Option<String>, Query, description = "Its namespace (default: default)")),
            responses(
                (status = NO_CONTENT, description = "Deleted"),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                $((status = CONFLICT, description = $conflict, body = ErrorBody),)?
                (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn delete(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            axum::extract::Path(name): axum::extract::Path<String>,
            query: crate::input::QueryParams,
        ) -> Result<axum::http::StatusCode, crate::error::ApiError> {
            let namespace = query.namespace();
            $service::delete(&state.handles, &who, namespace, &name).await?;
            Ok(axum::http::StatusCode::NO_CONTENT)
        }
    };
}

pub(super) use {delete_named, get_named};
