//! Sessions, API tokens and login failures. Secrets are looked up by their digest
//! ([`crate::auth::secret::digest`]); a lookup also checks the timeouts, the token's
//! revocation and the user's `disabled` flag, and touches the last-use time at most once
//! a minute (so reads stay reads under load).

use std::time::Duration;

use sqlx::PgExecutor;

use crate::auth::session::{ABSOLUTE_TIMEOUT, IDLE_TIMEOUT};
use crate::auth::{secret, Principal, Role, Via};

#[derive(sqlx::FromRow)]
struct Found {
    user_id: i64,
    username: String,
    role: String,
    secret_id: Option<i64>,
    csrf_token: Option<String>,
}

impl Found {
    fn role(&self) -> Role {
        self.role.parse().unwrap_or(Role::Viewer)
    }
}

/// The caller behind a bearer token, if the token is valid.
pub async fn principal_for_token(
    db: impl PgExecutor<'_>,
    token: &str,
) -> Result<Option<Principal>, sqlx::Error> {
    let found = sqlx::query_as::<_, Found>(
        "WITH found AS (
             SELECT users.id AS user_id, users.username, users.role, api_tokens.id AS secret_id,
                    NULL::text AS csrf_token, api_tokens.last_used_at
             FROM api_tokens JOIN users ON users.id = api_tokens.user_id
             WHERE api_tokens.token_hash = $1 AND NOT users.disabled AND api_tokens.revoked_at IS NULL
               AND (api_tokens.expires_at IS NULL OR api_tokens.expires_at > now())),
         touched AS (
             UPDATE api_tokens SET last_used_at = now()
             WHERE id = (SELECT secret_id FROM found)
               AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute'))
         SELECT user_id, username, role, secret_id, csrf_token FROM found",
    )
    .bind(secret::digest(token))
    .fetch_optional(db)
    .await?;
    Ok(found.map(|f| Principal {
        user_id: f.user_id,
        role: f.role(),
        via: Via::Token(f.secret_id.unwrap_or_default()),
        username: f.username,
    }))
}

/// The caller behind a session cookie, if the session is valid.
pub async fn principal_for_session(
    db: impl PgExecutor<'_>,
    cookie: &str,
) -> Result<Option<Principal>, sqlx::Error> {
    let found = sqlx::query_as::<_, Found>(
        "WITH found AS (
             SELECT users.id AS user_id, users.username, users.role, NULL::bigint AS secret_id,
                    sessions.csrf_token, sessions.id_hash
             FROM sessions JOIN users ON users.id = sessions.user_id
             WHERE sessions.id_hash = $1 AND NOT users.disabled AND sessions.expires_at > now()
               AND sessions.last_seen_at > now() - make_interval(secs => $2)),
         touched AS (
             UPDATE sessions SET last_seen_at = now()
             WHERE id_hash = (SELECT id_hash FROM found) AND last_seen_at < now() - interval '1 minute')
         SELECT user_id, username, role, secret_id, csrf_token FROM found",
    )
    .bind(secret::digest(cookie))
    .bind(IDLE_TIMEOUT.as_secs_f64())
    .fetch_optional(db)
    .await?;
    Ok(found.map(|f| Principal {
        user_id: f.user_id,
        role: f.role(),
        via: Via::Session {
            csrf: f.csrf_token.clone().unwrap_or_default(),
            cookie: cookie.to_owned(),
        },
        username: f.username,
    }))
}

/// A new session of `user_id`; returns the cookie value (the only copy of the secret).
pub async fn create_session(db: impl PgExecutor<'_>, user_id: i64) -> Result<String, sqlx::Error> {
    let cookie = secret::random_hex();
    sqlx::query(
        "INSERT INTO sessions (id_hash, user_id, csrf_token, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
    )
    .bind(secret::digest(&cookie))
    .bind(user_id)
    .bind(secret::random_hex())
    .bind(ABSOLUTE_TIMEOUT.as_secs_f64())
    .execute(db)
    .await?;
    Ok(cookie)
}

/// Ends a session (logout, or the old one at a new login).
pub async fn delete_session(db: impl PgExecutor<'_>, cookie: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM sessions WHERE id_hash = $1 OR expires_at < now()")
        .bind(secret::digest(cookie))
        .execute(db)
        .await?;
    Ok(())
}

/// A new API token of `user_id`; returns the token (the only copy of the secret).
pub async fn create_token(
    db: impl PgExecutor<'_>,
    user_id: i64,
    name: &str,
) -> Result<(i64, String), sqlx::Error> {
    let token = secret::new_api_token();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO api_tokens (user_id, name, token_hash) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(user_id)
    .bind(name)
    .bind(secret::digest(&token))
    .fetch_one(db)
    .await?;
    Ok((id, token))
}

/// Revokes a token; returns whether it was live.
pub async fn revoke_token(db: impl PgExecutor<'_>, token_id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL")
        .bind(token_id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Failed logins of a key inside `window`, and the seconds until the oldest leaves it.
pub async fn recent_failures(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
    window: Duration,
) -> Result<(i64, u64), sqlx::Error> {
    let (count, wait): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*), EXTRACT(EPOCH FROM (min(at) + make_interval(secs => $3) - now()))::float8
         FROM login_failures
         WHERE username = $1 AND address = $2 AND at > now() - make_interval(secs => $3)",
    )
    .bind(username)
    .bind(address)
    .bind(window.as_secs_f64())
    .fetch_one(db)
    .await?;
    Ok((count, wait.unwrap_or(0.0).ceil().max(0.0) as u64))
}

/// Records a failed login (and forgets failures older than `window`, of every key).
pub async fn record_failure(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
    window: Duration,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH pruned AS (DELETE FROM login_failures WHERE at < now() - make_interval(secs => $3))
         INSERT INTO login_failures (username, address) VALUES ($1, $2)",
    )
    .bind(username)
    .bind(address)
    .bind(window.as_secs_f64())
    .execute(db)
    .await?;
    Ok(())
}

/// Forgets a key's failures after a successful login.
pub async fn clear_failures(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM login_failures WHERE username = $1 AND address = $2")
        .bind(username)
        .bind(address)
        .execute(db)
        .await?;
    Ok(())
}

/// Ends every session of a user (password change, disabling).
pub async fn delete_sessions_of(db: impl PgExecutor<'_>, user_id: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query("DELETE FROM sessions WHERE user_id = $1")
        .bind(user_id)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// An API token as its owner sees it (never the secret).
#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct TokenInfo {
    /// Id.
    pub id: i64,
    /// Its owner.
    pub user_id: i64,
    /// A label chosen at creation.
    pub name: String,
    /// When it was made.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it was last used (to the minute).
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A user's tokens, newest first.
pub async fn tokens_of(db: impl PgExecutor<'_>, user_id: i64) -> Result<Vec<TokenInfo>, sqlx::Error> {
    sqlx::query_as::<_, TokenInfo>(
        "SELECT id, user_id, name, created_at, last_used_at, revoked_at FROM api_tokens
         WHERE user_id = $1 ORDER BY id DESC",
    )
    .bind(user_id)
    .fetch_all(db)
    .await
}

/// One token's metadata.
pub async fn token(db: impl PgExecutor<'_>, id: i64) -> Result<Option<TokenInfo>, sqlx::Error> {
    sqlx::query_as::<_, TokenInfo>(
        "SELECT id, user_id, name, created_at, last_used_at, revoked_at FROM api_tokens WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await
}
