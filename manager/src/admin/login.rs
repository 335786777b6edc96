//! Logging in and out of the web admin.
//!
//! The login form is protected against cross-site submission with a double-submit
//! token: a random value in a short-lived SameSite=Strict cookie and in the form, which
//! must match. A successful login always starts a new session (the old cookie's session,
//! if any, is deleted: the id is rotated); logging out deletes the session.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use minijinja::context;

use super::{check_csrf, render_status, AdminError, AdminUser, FormData};
use crate::auth::ratelimit::{self, ClientAddr};
use crate::auth::{secret, session};
use crate::error::ApiError;
use crate::state::AppState;

/// The login form's double-submit cookie.
const LOGIN_COOKIE: &str = "probactr_login";

fn login_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == LOGIN_COOKIE)
        .map(|(_, value)| value.trim().to_owned())
}

/// Renders the login form with a fresh double-submit token.
fn form(
    state: &AppState,
    status: StatusCode,
    error: Option<String>,
    username: &str,
) -> Result<Response, AdminError> {
    let token = secret::random_hex();
    let cookie = session::cookie_header(LOGIN_COOKIE, &token, "/login", 3600, state.cookie_secure);
    let page = render_status(
        state,
        status,
        "login.html",
        context! { login_csrf => token, error, username },
    )?;
    Ok(([(header::SET_COOKIE, cookie)], page).into_response())
}

/// `GET /login` (home when already signed in).
pub async fn page(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, AdminError> {
    if let Some(cookie) = session::cookie(&headers) {
        if session::principal(&state.handles.pool, &cookie).await?.is_some() {
            return Ok(Redirect::to("/").into_response());
        }
    }
    form(&state, StatusCode::OK, None, "")
}

/// `POST /login`.
pub async fn submit(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    headers: HeaderMap,
    form_data: FormData,
) -> Result<Response, AdminError> {
    let username = form_data.get("username").unwrap_or_default().trim().to_owned();
    let password = form_data.get("password").unwrap_or_default();
    let sent = form_data.get("csrf").unwrap_or_default();
    let expected = login_cookie(&headers).unwrap_or_default();
    if sent.is_empty() || !secret::same(sent, &expected) {
        let message = "The login form expired; please try again.".to_owned();
        return form(&state, StatusCode::FORBIDDEN, Some(message), &username);
    }
    let user = match ratelimit::authenticate(&state, &username, password, &address).await {
        Ok(user) => user,
        Err(ApiError::Unauthorized) => {
            let message = "Wrong user name or password.".to_owned();
            return form(&state, StatusCode::UNAUTHORIZED, Some(message), &username);
        }
        Err(err @ ApiError::TooManyAttempts { .. }) => {
            let message = format!("{err}.");
            return form(&state, StatusCode::TOO_MANY_REQUESTS, Some(message), &username);
        }
        Err(err) => return Err(err.into()),
    };
    if let Some(old) = session::cookie(&headers) {
        session::end(&state.handles.pool, &old).await?;
    }
    let cookie = session::start(&state.handles.pool, user.id).await?;
    crate::service::users::record_admin_login(&state.handles, &user).await?;
    let clear_login = session::cookie_header(LOGIN_COOKIE, "", "/login", 0, state.cookie_secure);
    let headers = AppendHeaders([
        (
            header::SET_COOKIE,
            session::set_cookie(&cookie, state.cookie_secure),
        ),
        (header::SET_COOKIE, clear_login),
    ]);
    Ok((headers, Redirect::to("/")).into_response())
}

/// `POST /logout`.
pub async fn logout(
    State(state): State<AppState>,
    user: AdminUser,
    form_data: FormData,
) -> Result<Response, AdminError> {
    check_csrf(&user, &form_data)?;
    if let crate::auth::Via::Session { cookie, .. } = &user.0.via {
        session::end(&state.handles.pool, cookie).await?;
    }
    tracing::info!(user.id = user.0.user_id, "logout");
    Ok((
        AppendHeaders([(header::SET_COOKIE, session::clear_cookie(state.cookie_secure))]),
        Redirect::to("/login"),
    )
        .into_response())
}
