//! The list handler every kind of object shares (namespaces, users, calendars, pools,
//! secrets): the caller's principal, one call into the object's service module and one
//! page of what it may see; a namespace's named objects also read `?namespace=`.
//!
//! It is a macro rather than a generic function because `utoipa::path` documents one
//! handler function at a time; each object still gets its own handler, under its own
//! operation id and words.

/// `list`: every object the caller may see, from `$service::list`, in one page. Given
/// `namespace: "..."` (the parameter's description), `?namespace=` narrows it and is
/// passed on as the service's third argument.
macro_rules! list_handler {
    (@call $service:ident, $handles:expr, $who:expr, $query:expr) => {{
        // A cluster-wide object has no namespace: its list reads no parameter.
        let _ = &$query;
        $service::list($handles, $who)
    }};
    (@call $service:ident, $handles:expr, $who:expr, $query:expr, $scope:tt) => {
        $service::list($handles, $who, $query.text("namespace"))
    };
    ($(#[doc = $doc:tt])* $service:ident -> $item:ident {
        path: $path:tt, operation_id: $op:tt, tag: $tag:tt,
        $(namespace: $scope:tt,)? ok: $ok:tt, otherwise: $otherwise:tt $(,)?
    }) => {
        $(#[doc = $doc])*
        #[utoipa::path(get, path = $path, operation_id = $op, tag = $tag,
            $(params(("namespace" = Option<String>, Query, description = $scope)),)?
            responses(
                (status = OK, description = $ok, body = Paged<$item>),
                (status = "default", description = $otherwise, body = ErrorBody),
            ))]
        pub async fn list(
            axum::extract::State(state): axum::extract::State<crate::state::AppState>,
            who: crate::auth::Principal,
            query: crate::input::QueryParams,
        ) -> Result<axum::Json<crate::service::Paged<$item>>, crate::error::ApiError> {
            let listed = list_handler!(@call $service, &state.handles, &who, query $(, $scope)?).await?;
            Ok(axum::Json(crate::service::Paged::all(listed)))
        }
    };
}

pub(super) use list_handler;
