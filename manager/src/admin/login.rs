//! Logging in and out of the web admin: with a password, or through the single sign-on
//! provider (`/auth/oidc/login` and its callback; the protocol is `auth::oidc`).
//!
//! The login form is protected against cross-site submission with a double-submit
//! token: a random value in a short-lived SameSite=Strict cookie and in the form, which
//! must match. A successful login always starts a new session (the old cookie's session,
//! if any, is deleted: the id is rotated); logging out deletes the session. A single
//! sign-on login that is refused shows why on the login page, and makes no session.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{AppendHeaders, Html, IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::store;
use serde_json::json;

use super::{render_status, AdminError, FormData, FormPost};
use crate::auth::oidc::accounts::{self, Denial};
use crate::auth::oidc::{self, Callback, Refusal};
use crate::auth::ratelimit::{self, ClientAddr};
use crate::auth::{secret, session};
use crate::error::ApiError;
use crate::state::AppState;

/// The login form's double-submit cookie.
const LOGIN_COOKIE: &str = "probactr_login";

fn login_cookie(headers: &HeaderMap) -> Option<String> {
    session::cookie_named(headers, LOGIN_COOKIE)
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
    let sso_name = state.sso.as_ref().map(|sso| sso.name().to_owned());
    let local_login_open = state.local_login == probactr_common::config::LocalLogin::Open;
    let page = render_status(
        state,
        status,
        "login.html",
        context! { login_csrf => token, error, username, sso_name, local_login_open },
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
        Err(ApiError::Forbidden(message)) => {
            return form(&state, StatusCode::FORBIDDEN, Some(sentence(&message)), &username);
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
    FormPost(user, (), _): FormPost,
) -> Result<Response, AdminError> {
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

/// A message as a sentence: capitalized, with a full stop.
fn sentence(message: &str) -> String {
    let mut chars = message.chars();
    let mut text: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if !text.ends_with('.') {
        text.push('.');
    }
    text
}

/// The single sign-on flow's cookie: SameSite=Lax, since the provider's redirect back is
/// a navigation from another site, which Strict cookies do not follow; only sent under
/// `/auth/oidc`, and gone after the login's time.
fn flow_cookie(value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!(
        "{}={value}; Path=/auth/oidc; HttpOnly; SameSite=Lax{secure}; Max-Age={max_age}",
        oidc::FLOW_COOKIE
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// The login page saying why single sign-on refused, with the flow's cookie cleared;
/// logged with the reason's kind.
fn refuse(state: &AppState, denial: Denial) -> Result<Response, AdminError> {
    let status = match &denial {
        Denial::Disabled { .. } | Denial::NoRole { .. } => StatusCode::FORBIDDEN,
        Denial::Refused(Refusal::Store(_)) => StatusCode::INTERNAL_SERVER_ERROR,
        Denial::Refused(Refusal::Unavailable { .. }) => StatusCode::SERVICE_UNAVAILABLE,
        Denial::Refused(Refusal::Exchange { .. } | Refusal::Groups(_)) => StatusCode::BAD_GATEWAY,
        Denial::Refused(Refusal::NoLoginUnderWay | Refusal::StateMismatch | Refusal::NoCode) => {
            StatusCode::BAD_REQUEST
        }
        Denial::Refused(_) => StatusCode::UNAUTHORIZED,
    };
    let kind = match &denial {
        Denial::Disabled { .. } => "disabled",
        Denial::NoRole { .. } => "no_role",
        Denial::Refused(refusal) => refusal.kind(),
    };
    tracing::warn!(reason = kind, error = %denial, "single sign-on login refused");
    let message = format!("Single sign-on failed: {}", sentence(&denial.to_string()));
    let page = form(state, status, Some(message), "")?;
    let clear = flow_cookie("", 0, state.cookie_secure);
    Ok((AppendHeaders([(header::SET_COOKIE, clear)]), page).into_response())
}

/// `GET /auth/oidc/login`: off to the provider.
pub async fn sso_start(State(state): State<AppState>) -> Result<Response, AdminError> {
    let Some(sso) = state.sso.clone() else {
        return Err(ApiError::not_found("page", "single sign-on (not configured)").into());
    };
    match sso.begin(&state.handles.pool).await {
        Ok((url, binding)) => {
            let max_age = oidc::LOGIN_MAX_AGE.as_secs();
            let cookie = flow_cookie(&binding, max_age, state.cookie_secure);
            Ok(([(header::SET_COOKIE, cookie)], Redirect::to(&url)).into_response())
        }
        Err(refusal) => refuse(&state, refusal.into()),
    }
}

/// `GET /auth/oidc/callback`: back from the provider; a session when everything checks.
pub async fn sso_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<Callback>, QueryRejection>,
) -> Result<Response, AdminError> {
    let Some(sso) = state.sso.clone() else {
        return Err(ApiError::not_found("page", "single sign-on (not configured)").into());
    };
    // A query that does not parse (a field twice) answers like one without a login.
    let callback = query.map(|Query(callback)| callback).unwrap_or_default();
    let binding = session::cookie_named(&headers, oidc::FLOW_COOKIE);
    let identity = match sso
        .finish(&state.handles.pool, binding.as_deref(), &callback)
        .await
    {
        Ok(identity) => identity,
        Err(refusal) => return refuse(&state, refusal.into()),
    };
    let user = match accounts::sign_in(&state.handles, &sso.settings().role_map, &identity).await {
        Ok(user) => user,
        Err(denial) => return refuse(&state, denial),
    };
    if let Some(old) = session::cookie(&headers) {
        session::end(&state.handles.pool, &old).await?;
    }
    let cookie = session::start(&state.handles.pool, user.id).await?;
    let who = store::audit::Actor {
        id: user.id,
        name: &user.username,
    };
    let change = store::audit::Change {
        action: "user.login",
        object_type: "user",
        object_id: Some(user.id),
        before: None,
        after: Some(json!({"via": "oidc", "username": user.username, "issuer": identity.issuer})),
    };
    store::audit::record(&state.handles.pool, who, change).await?;
    tracing::info!(user.id = user.id, username = %user.username, "login through single sign-on");
    let headers = AppendHeaders([
        (
            header::SET_COOKIE,
            session::set_cookie(&cookie, state.cookie_secure),
        ),
        (header::SET_COOKIE, flow_cookie("", 0, state.cookie_secure)),
    ]);
    // A page that moves on by itself rather than a redirect: the session cookie is
    // SameSite=Strict, and browsers leave it off every request of a redirect chain that
    // began at another site (the provider).
    Ok((headers, Html(SIGNED_IN)).into_response())
}

/// What the callback answers once signed in.
const SIGNED_IN: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"refresh\" content=\"0;url=/\"><title>Signed in · probactr</title></head>\
<body><p>Signed in. <a href=\"/\">Continue to probactr</a></p></body></html>";
