//! The CSRF defence of the admin's forms: every state-changing form carries the
//! session's token ([`AdminUser::csrf`]), and a form without it is refused with 403.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};

use super::{AdminError, AdminUser, FormData};
use crate::auth::secret;
use crate::error::ApiError;
use crate::state::AppState;

/// A state-changing form post: the signed-in user, the path's parameters `P` (`()` when
/// there are none), and the form, checked to carry the session's CSRF token.
///
/// They are read in that order, so a post is refused for its session first (a redirect
/// to the login page), then for its path, then for a malformed body, and only then for
/// its token (403).
pub struct FormPost<P = ()>(pub AdminUser, pub P, pub FormData);

impl<P> FromRequest<AppState> for FormPost<P>
where
    P: FromRequestParts<AppState> + Send,
    P::Rejection: IntoResponse,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let user = AdminUser::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let path = P::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let form = FormData::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        check_csrf(&user, &form).map_err(IntoResponse::into_response)?;
        Ok(FormPost(user, path, form))
    }
}

/// 403 unless the form carries the session's CSRF token (for a form checked only after
/// what it is about is found; any other takes a [`FormPost`]).
pub fn check_csrf(user: &AdminUser, form: &FormData) -> Result<(), AdminError> {
    let sent = form.get("csrf").unwrap_or_default();
    if !sent.is_empty() && secret::same(sent, user.csrf()) {
        Ok(())
    } else {
        tracing::warn!(
            user.id = user.0.user_id,
            "form without a valid CSRF token rejected"
        );
        Err(AdminError::Api(ApiError::Forbidden(
            "this form has expired or did not come from this site (CSRF token missing or wrong); reload the page and try again"
                .into(),
        )))
    }
}
