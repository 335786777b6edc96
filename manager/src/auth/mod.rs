//! Who is calling and what they may do.
//!
//! Two ways in: a bearer API token (`Authorization: Bearer pat_…`, made by
//! `POST /api/v1/auth/token`) for scripts, and the web admin's session cookie for
//! browsers. A session is opened by a password login or by single sign-on through an
//! OpenID Connect provider ([`oidc`]); `PROBACTR_LOCAL_LOGIN=false` leaves password
//! logins to the break-glass admin alone ([`ratelimit::authenticate`]). A cookie-authenticated API call that changes state must also carry the
//! session's CSRF token in `X-CSRF-Token`, since a browser attaches cookies to requests
//! other sites make it send.
//!
//! Roles ([`Role`]):
//!
//! | role | may |
//! |---|---|
//! | `viewer` | read everything except users and the audit log |
//! | `operator` | + pause, resume, run now, cancel; manage triggers; create and edit `noop` and `sleep` jobs |
//! | `admin` | + create and edit `shell` and `http` jobs (code execution and network access from executors), users, audit log |

pub mod oidc;
pub mod password;
pub mod ratelimit;
pub mod secret;
pub mod session;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use probactr_common::model::JobKind;
use probactr_common::store::api_tokens::NewToken;
use probactr_common::store::{self, audit::Actor, StoreError};
use sqlx::PgExecutor;

use crate::error::ApiError;
use crate::state::AppState;

/// Header carrying the CSRF token on cookie-authenticated API calls.
pub const CSRF_HEADER: &str = "x-csrf-token";

pub use probactr_common::model::Role;

/// How the caller authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// A bearer API token (its id).
    Token(i64),
    /// The admin session cookie, with the session's CSRF token.
    Session {
        /// The session's CSRF token.
        csrf: String,
        /// The cookie's value (to log out).
        cookie: String,
    },
}

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user's id.
    pub user_id: i64,
    /// The user's name (as recorded in the audit log).
    pub username: String,
    /// The user's role.
    pub role: Role,
    /// Token or session.
    pub via: Via,
}

impl Principal {
    /// The caller as the audit log records them.
    pub fn actor(&self) -> Actor<'_> {
        Actor {
            id: self.user_id,
            name: &self.username,
        }
    }

    /// Ok when `allowed`, else a 403 saying what the role may not do.
    pub fn require(&self, allowed: bool, what: &str) -> Result<(), ApiError> {
        if allowed {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "the {} role may not {what}",
                self.role
            )))
        }
    }

    /// 403 unless the caller may operate jobs.
    pub fn require_operator(&self, what: &str) -> Result<(), ApiError> {
        self.require(self.role.can_operate(), what)
    }

    /// 403 unless the caller may define jobs of `kind`.
    pub fn require_job_kind(&self, kind: JobKind) -> Result<(), ApiError> {
        self.require(
            self.role.can_edit_job(kind),
            &format!("create, edit or delete {kind} jobs"),
        )
    }
}

/// The caller behind a bearer token, if the token is valid.
pub async fn principal_for_token(
    db: impl PgExecutor<'_>,
    token: &str,
) -> Result<Option<Principal>, StoreError> {
    let holder = store::api_tokens::holder(db, &secret::digest(token)).await?;
    Ok(holder.map(|h| Principal {
        user_id: h.user_id,
        role: h.role,
        via: Via::Token(h.secret_id.unwrap_or_default()),
        username: h.username,
    }))
}

/// A new API token (`token_hash` is ignored: the secret is made here); returns its id and
/// the token (the only copy of the secret).
pub async fn issue_token(
    db: impl PgExecutor<'_>,
    request: NewToken<'_>,
) -> Result<(i64, String), StoreError> {
    let token = secret::new_api_token();
    let digest = secret::digest(&token);
    let id = store::api_tokens::create(
        db,
        &NewToken {
            token_hash: &digest,
            ..request
        },
    )
    .await?;
    Ok((id, token))
}

/// The bearer token of a request, if it has one.
pub fn bearer(parts: &Parts) -> Option<&str> {
    bearer_in(&parts.headers)
}

fn bearer_in(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether the session or token `principal` came with (in the request's `headers`)
/// still opens the API, for the same user. Responses that last (live output streams) ask
/// again while they are open, so that a logout, a revoked or expired token or a
/// disabled user ends them.
pub async fn still_valid(
    db: impl PgExecutor<'_>,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<bool, StoreError> {
    let again = match &principal.via {
        Via::Session { cookie, .. } => session::principal(db, cookie).await?,
        Via::Token(_) => match bearer_in(headers) {
            Some(token) => principal_for_token(db, token).await?,
            None => None,
        },
    };
    Ok(again.is_some_and(|again| again.user_id == principal.user_id))
}

/// Methods that never change state.
pub fn is_safe_method(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(token) = bearer(parts) {
            return principal_for_token(&state.handles.pool, token)
                .await?
                .ok_or(ApiError::Unauthorized);
        }
        let Some(cookie) = session::cookie(&parts.headers) else {
            return Err(ApiError::Unauthorized);
        };
        let principal = session::principal(&state.handles.pool, &cookie)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        if !is_safe_method(&parts.method) {
            let sent = parts
                .headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let Via::Session { csrf, .. } = &principal.via else {
                return Err(ApiError::Unauthorized);
            };
            if !secret::same(sent, csrf) {
                return Err(ApiError::Forbidden(
                    "cookie-authenticated API calls that change state need the X-CSRF-Token header".into(),
                ));
            }
        }
        Ok(principal)
    }
}
