//! The create handler of cluster-wide objects (namespaces, users): the same extractors,
//! the same call into the object's service module and the same answers, each with its
//! own OpenAPI description (their lists: [`super::listing`]).
//!
//! They are macros rather than generic functions because `utoipa::path` documents one
//! handler function at a time.

/// `create`: hands the JSON body to `$service::create`, which reads and checks it; 201
/// with what was created.
macro_rules! create_from_body {
    ($(#[doc = $doc:tt])* $service:ident -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt, body: $body:ident, ok: $ok:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(post, path = $path, operation_id = $op, tag = $tag,
            request_body = $body,
            responses(
                (status = CREATED, description = $ok, body = $item),
                (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
                (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
            ))]
        pub async fn create(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            crate::input::ApiJson(body): crate::input::ApiJson<serde_json::Value>,
        ) -> Result<(axum::http::StatusCode, axum::Json<$item>), crate::error::ApiError> {
            Ok((
                axum::http::StatusCode::CREATED,
                axum::Json($service::create(&state.handles, &who, body).await?),
            ))
        }
    };
}

pub(super) use create_from_body;
