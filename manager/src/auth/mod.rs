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
//! Roles ([`Role`]) are held per namespace ([`access`]); a cluster admin is an admin in
//! every namespace and the only one who manages users, namespaces, executors (cordon,
//! drain) and cluster-wide settings. In a namespace:
//!
//! | role | may |
//! |---|---|
//! | `viewer` | read the namespace's jobs, triggers, runs and their output, workflows, alert rules, secret names |
//! | `operator` | + pause, resume, run now, cancel; manage triggers; create and edit `noop` and `sleep` jobs, workflows and alert rules |
//! | `admin` | + create and edit `shell` and `http` jobs (code execution and network access from executors), secrets and alert channels; read the namespace's audit log |
//!
//! Whatever is in a namespace where the caller has no role answers 404 and is never
//! listed or counted. An API token may be scoped to some namespaces and capped at a role
//! ([`access::TokenScope`]): it then acts with the lower of its user's role (read at each
//! request) and its own, and is never a cluster admin.

pub mod access;
pub mod oidc;
pub mod password;
pub mod ratelimit;
pub mod secret;
pub mod session;
pub mod tokens;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use chrono::{DateTime, Utc};
use probactr_common::model::JobKind;
use probactr_common::store::api_tokens::NewToken;
use probactr_common::store::{self, audit::Actor, StoreError};
use sqlx::PgPool;
use tokens::TokenCache;

pub use access::Access;
use access::TokenScope;
use probactr_common::store::user_roles::Grant;

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
    /// What the caller may do, namespace by namespace.
    pub access: Access,
    /// Token or session.
    pub via: Via,
    /// Whether the request may change something (any method but `GET`, `HEAD`,
    /// `OPTIONS`): its reads go to the primary, never to the read replica.
    pub changing: bool,
}

impl Principal {
    /// The caller as the audit log records them.
    pub fn actor(&self) -> Actor<'_> {
        Actor {
            id: self.user_id,
            name: &self.username,
        }
    }

    /// The caller's role in `namespace`, or a 404 for the object `what` `id` in it.
    pub fn role_for(&self, namespace: &str, what: &'static str, id: impl ToString) -> Result<Role, ApiError> {
        self.access.role_for(namespace, what, id)
    }

    /// 403 unless the caller may operate jobs in `namespace` (pause, resume, run now,
    /// cancel, triggers); 404 for `what` `id` when the namespace is invisible to them.
    pub fn require_operator(&self, namespace: &str, what: &str) -> Result<(), ApiError> {
        let role = self.role_or_forbidden(namespace, what)?;
        access::require(role, namespace, role.can_operate(), what)
    }

    /// 403 unless the caller is an admin of `namespace`.
    pub fn require_admin(&self, namespace: &str, what: &str) -> Result<(), ApiError> {
        let role = self.role_or_forbidden(namespace, what)?;
        access::require(role, namespace, role.is_admin(), what)
    }

    /// 403 unless the caller may define jobs of `kind` in `namespace`.
    pub fn require_job_kind(&self, namespace: &str, kind: JobKind) -> Result<(), ApiError> {
        let what = format!("create, edit or delete {kind} jobs");
        let role = self.role_or_forbidden(namespace, &what)?;
        access::require(role, namespace, role.can_edit_job(kind), &what)
    }

    /// 403 unless the caller is a cluster admin.
    pub fn require_cluster_admin(&self, what: &str) -> Result<(), ApiError> {
        self.access.require_cluster_admin(what)
    }

    /// Whether the caller may define jobs of `kind` in `namespace`.
    pub fn can_edit_job(&self, namespace: &str, kind: JobKind) -> bool {
        self.access
            .role_in(namespace)
            .is_some_and(|role| role.can_edit_job(kind))
    }

    /// The role in a namespace the caller was already found to see (callers look the
    /// object up first and answer 404 with [`Principal::role_for`]); a 403 otherwise.
    fn role_or_forbidden(&self, namespace: &str, what: &str) -> Result<Role, ApiError> {
        self.access.role_in(namespace).ok_or_else(|| {
            ApiError::Forbidden(format!("you have no role in namespace {namespace} to {what}"))
        })
    }
}

/// The rights of user `user_id` narrowed by `scope`.
async fn access_of(pool: &PgPool, user_id: i64, scope: &TokenScope) -> Result<Access, StoreError> {
    let mut conn = pool.acquire().await?;
    let grant = store::user_roles::get(&mut conn, user_id).await?;
    let all = if grant.cluster_admin && scope.is_scoped() {
        store::namespaces::names(&mut *conn).await?
    } else {
        Vec::new()
    };
    Ok(Access::new(grant, scope, &all))
}

/// The caller behind a bearer token, if the token is valid: remembered from a recent
/// request when `tokens` has it, else read in one statement (tokens carry every request
/// of scripts and the CLI).
pub async fn principal_for_token(
    pool: &PgPool,
    tokens: &TokenCache,
    token: &str,
) -> Result<Option<Principal>, StoreError> {
    let digest = secret::digest(token);
    if let Some(principal) = tokens.recall(&digest) {
        return Ok(Some(principal));
    }
    let generation = tokens.generation();
    let Some((principal, expires_at)) = looked_up(pool, &digest).await? else {
        return Ok(None);
    };
    tokens.remember(generation, digest, &principal, expires_at);
    Ok(Some(principal))
}

/// The caller behind the token of digest `digest`, read from the database, and when
/// the token expires.
async fn looked_up(
    pool: &PgPool,
    digest: &str,
) -> Result<Option<(Principal, Option<DateTime<Utc>>)>, StoreError> {
    let Some(bearer) = store::api_tokens::bearer(pool, digest).await? else {
        return Ok(None);
    };
    let scope = TokenScope {
        namespaces: bearer.token_namespaces,
        role: bearer.token_role,
    };
    let grant = Grant {
        cluster_admin: bearer.cluster_admin,
        roles: bearer
            .role_namespaces
            .into_iter()
            .zip(bearer.role_kinds)
            .collect(),
    };
    let principal = Principal {
        user_id: bearer.user_id,
        access: Access::new(grant, &scope, &bearer.all_namespaces),
        via: Via::Token(bearer.token_id),
        username: bearer.username,
        changing: false,
    };
    Ok(Some((principal, bearer.expires_at)))
}

/// The rights of a user signed in with a session (no token scope).
pub async fn session_access(pool: &PgPool, user_id: i64) -> Result<Access, StoreError> {
    access_of(pool, user_id, &TokenScope::default()).await
}

/// A new API token (`token_hash` is ignored: the secret is made here); returns its id and
/// the token (the only copy of the secret).
pub async fn issue_token(
    db: impl sqlx::PgExecutor<'_>,
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

/// Marks `principal` as making a changing request: its reads go to the primary, and it
/// is told to the read router ([`crate::service::reads::note_writes`]), so that the user
/// reads from the primary until the read replica has the change.
pub fn note_writer(parts: &Parts, principal: &mut Principal) {
    principal.changing = true;
    if let Some(writer) = parts.extensions.get::<crate::service::reads::Writer>() {
        writer.set(principal.user_id);
    }
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
/// disabled user ends them. Answers the caller as they are now (their roles may have
/// changed), or None when they no longer hold.
pub async fn still_valid(
    db: &PgPool,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<Option<Principal>, StoreError> {
    let again = match &principal.via {
        Via::Session { cookie, .. } => session::principal(db, cookie).await?,
        Via::Token(_) => match bearer_in(headers) {
            // From the database, not from memory: a long stream re-checks its caller.
            Some(token) => looked_up(db, &secret::digest(token))
                .await?
                .map(|(principal, _)| principal),
            None => None,
        },
    };
    Ok(again.filter(|again| again.user_id == principal.user_id))
}

/// Methods that never change state.
pub fn is_safe_method(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(token) = bearer(parts) {
            let mut principal = principal_for_token(&state.handles.pool, &state.tokens, token)
                .await?
                .ok_or(ApiError::Unauthorized)?;
            if !is_safe_method(&parts.method) {
                note_writer(parts, &mut principal);
            }
            return Ok(principal);
        }
        let Some(cookie) = session::cookie(&parts.headers) else {
            return Err(ApiError::Unauthorized);
        };
        let mut principal = session::principal(&state.handles.pool, &cookie)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        if !is_safe_method(&parts.method) {
            note_writer(parts, &mut principal);
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
