//! The get, update, delete, pause and resume handlers of the objects a path names by number
//! (jobs, triggers, workflows): the same extractors, the same call into the object's
//! service module and the same answers, each with its own OpenAPI description.
//!
//! They are macros rather than generic functions because `utoipa::path` documents one
//! handler function at a time. `via VIEW` passes what the service answers through
//! `$service::VIEW` first, for objects whose answer is a fuller view of the stored row.

/// `get`: one object, tagged with its version for `If-Match`, from `$service::get`.
macro_rules! get_by_id {
    ($(#[doc = $doc:tt])* $service:ident $(via $view:ident)? -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt,
        id: $id:tt, ok: $ok:tt, missing: $missing:tt, otherwise: $otherwise:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(get, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id)),
            responses(
                (status = OK, description = $ok, body = $item),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = $otherwise, body = ErrorBody),
            ))]
        pub async fn get(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            super::Id(id): super::Id,
        ) -> Result<super::precondition::Tagged<$item>, crate::error::ApiError> {
            let found = $service::get(&state.handles, &who, id).await?;
            $(let found = $service::$view(&state.handles, found).await?;)?
            Ok(super::precondition::Tagged(found))
        }
    };
}

/// A pause (`$paused` true) or a resume handler named `$handler`, answering with the
/// object as it became, from `$service::set_paused`.
macro_rules! set_paused_by_id {
    ($(#[doc = $doc:tt])* $handler:ident = $paused:tt,
        $service:ident $(via $view:ident)? -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt,
        id: $id:tt, ok: $ok:tt, missing: $missing:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(post, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id)),
            responses(
                (status = OK, description = $ok, body = $item),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn $handler(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            super::Id(id): super::Id,
        ) -> Result<super::precondition::Tagged<$item>, crate::error::ApiError> {
            let became = $service::set_paused(&state.handles, &who, id, $paused).await?;
            $(let became = $service::$view(&state.handles, became).await?;)?
            Ok(super::precondition::Tagged(became))
        }
    };
}

/// `update`: applies the body as a `$patch` (also its schema) through `$service::update`,
/// the version the caller read given as `If-Match` (412 when stale) or as the body's
/// `version` (409).
macro_rules! update_by_id {
    ($(#[doc = $doc:tt])* $service:ident $(via $view:ident)? -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt, id: $id:tt,
        patch: $patch:ident, ok: $ok:tt, stale_version: $stale:tt, stale_if_match: $stale_if_match:tt,
        missing: $missing:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(patch, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id)),
            request_body = $patch,
            responses(
                (status = OK, description = $ok, body = $item),
                (status = CONFLICT, description = $stale, body = ErrorBody),
                (status = PRECONDITION_FAILED, description = $stale_if_match, body = ErrorBody),
                (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named; nothing was changed", body = ErrorBody),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn update(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            super::Id(id): super::Id,
            if_match: super::precondition::IfMatch,
            crate::input::ApiJson(body): crate::input::ApiJson<serde_json::Value>,
        ) -> Result<super::precondition::Tagged<$item>, crate::error::ApiError> {
            let patch = $patch::from_json(if_match.into_patch(body));
            let changed = if_match.judge($service::update(&state.handles, &who, id, patch).await)?;
            $(let changed = $service::$view(&state.handles, changed).await?;)?
            Ok(super::precondition::Tagged(changed))
        }
    };
}

/// `delete`: removes one object through `$service::delete`; 204 with no body.
macro_rules! delete_by_id {
    ($(#[doc = $doc:tt])* $service:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt, id: $id:tt, missing: $missing:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(delete, path = $path, operation_id = $op, tag = $tag,
            params(("id" = i64, Path, description = $id)),
            responses(
                (status = NO_CONTENT, description = "Deleted"),
                (status = NOT_FOUND, description = $missing, body = ErrorBody),
                (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn delete(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            super::Id(id): super::Id,
        ) -> Result<axum::http::StatusCode, crate::error::ApiError> {
            $service::delete(&state.handles, &who, id).await?;
            Ok(axum::http::StatusCode::NO_CONTENT)
        }
    };
}

pub(super) use {delete_by_id, get_by_id, set_paused_by_id, update_by_id};
