//! `sessions`: the admin's login sessions, found by the digest of their cookie. A lookup
//! checks the timeouts and the user's `disabled` flag and touches the last-seen time at
//! most once a minute (so reads stay reads under load). Hashing and cookie handling
//! belong to the manager; this module only ever sees digests.

use std::time::Duration;

use sqlx::PgExecutor;

use super::StoreError;
use crate::model::Role;

/// The user behind a session or an API token.
#[derive(Debug, Clone)]
pub struct Holder {
    /// The user's id.
    pub user_id: i64,
    /// The user's name.
    pub username: String,
    /// The user's role.
    pub role: Role,
    /// The API token's id (tokens only).
    pub secret_id: Option<i64>,
    /// The session's CSRF token (sessions only).
    pub csrf_token: Option<String>,
}

/// The holder of the session whose cookie digests to `id_hash`, if it is still valid
/// (used within `idle` and not past its absolute expiry).
pub async fn holder(
    db: impl PgExecutor<'_>,
    id_hash: &str,
    idle: Duration,
) -> Result<Option<Holder>, StoreError> {
    Ok(sqlx::query_as!(
        Holder,
        r#"WITH found AS (
             SELECT users.id AS user_id, users.username, users.role, NULL::bigint AS secret_id,
                    sessions.csrf_token, sessions.id_hash
             FROM sessions JOIN users ON users.id = sessions.user_id
             WHERE sessions.id_hash = $1 AND NOT users.disabled AND sessions.expires_at > now()
               AND sessions.last_seen_at > now() - make_interval(secs => $2)),
         touched AS (
             UPDATE sessions SET last_seen_at = now()
             WHERE id_hash = (SELECT id_hash FROM found) AND last_seen_at < now() - interval '1 minute')
         SELECT user_id AS "user_id!", username AS "username!", role AS "role!: Role",
                secret_id, csrf_token FROM found"#,
        id_hash,
        idle.as_secs_f64()
    )
    .fetch_optional(db)
    .await?)
}

/// A new session of `user_id` that ends `lifetime` from now whatever its use.
pub async fn create(
    db: impl PgExecutor<'_>,
    id_hash: &str,
    user_id: i64,
    csrf_token: &str,
    lifetime: Duration,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO sessions (id_hash, user_id, csrf_token, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
        id_hash,
        user_id,
        csrf_token,
        lifetime.as_secs_f64()
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Ends a session (logout, or the old one at a new login), and forgets expired ones.
pub async fn delete(db: impl PgExecutor<'_>, id_hash: &str) -> Result<(), StoreError> {
    sqlx::query!(
        "DELETE FROM sessions WHERE id_hash = $1 OR expires_at < now()",
        id_hash
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Ends every session of a user (password change, disabling).
pub async fn delete_of_user(db: impl PgExecutor<'_>, user_id: i64) -> Result<u64, StoreError> {
    let done = sqlx::query!("DELETE FROM sessions WHERE user_id = $1", user_id)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}
