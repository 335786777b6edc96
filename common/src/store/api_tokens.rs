//! `api_tokens`: bearer tokens for scripts, found by the digest of the token. A lookup
//! checks revocation, expiry and the user's `disabled` flag, and touches the last-use
//! time at most once a minute.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{rows_written, StoreError};
use crate::model::{Role, TokenOrigin};

/// An API token as its owner sees it (never the secret).
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    /// Id.
    pub id: i64,
    /// Its owner.
    pub user_id: i64,
    /// A label chosen at creation.
    pub name: String,
    /// How it was made, which decides what ends it.
    pub origin: TokenOrigin,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was last used (to the minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it stops working by itself, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// The namespaces it acts in (null: every one its owner may see).
    pub namespaces: Option<Vec<String>>,
    /// The most it may do there (null: its owner's role).
    pub role: Option<Role>,
}

/// Everything a request carrying a token needs to know of its caller, read in one
/// statement: the holder, the token's scope, and the holder's grant.
#[derive(Debug, Clone)]
pub struct Bearer {
    /// The token's owner.
    pub user_id: i64,
    /// The owner's name.
    pub username: String,
    /// The token's id.
    pub token_id: i64,
    /// The namespaces the token is scoped to (None: every one its owner sees).
    pub token_namespaces: Option<Vec<String>>,
    /// The most the token may do (None: its owner's role).
    pub token_role: Option<Role>,
    /// Whether the owner is a cluster admin.
    pub cluster_admin: bool,
    /// The owner's roles: namespaces, and the role in each, in the same order.
    pub role_namespaces: Vec<String>,
    /// See `role_namespaces`.
    pub role_kinds: Vec<Role>,
    /// Every namespace, when a scoped token's owner is a cluster admin (the scope narrows
    /// them); empty otherwise.
    pub all_namespaces: Vec<String>,
    /// When the token stops working (None: when revoked).
    pub expires_at: Option<DateTime<Utc>>,
}

/// The caller behind the live token whose digest is `token_hash`; touches its last-use
/// time at most once a minute.
pub async fn bearer(db: impl PgExecutor<'_>, token_hash: &str) -> Result<Option<Bearer>, StoreError> {
    Ok(sqlx::query_as!(
        Bearer,
        r#"WITH found AS (
             SELECT users.id AS user_id, users.username, users.cluster_admin, api_tokens.id AS token_id,
                    api_tokens.namespaces AS token_namespaces, api_tokens.role AS token_role,
                    api_tokens.expires_at
             FROM api_tokens JOIN users ON users.id = api_tokens.user_id
             WHERE api_tokens.token_hash = $1 AND NOT users.disabled AND api_tokens.revoked_at IS NULL
               AND (api_tokens.expires_at IS NULL OR api_tokens.expires_at > now())),
         touched AS (
             UPDATE api_tokens SET last_used_at = now()
             WHERE id = (SELECT token_id FROM found)
               AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute'))
         SELECT user_id AS "user_id!", username AS "username!", token_id AS "token_id!",
                token_namespaces, token_role AS "token_role: Role", cluster_admin AS "cluster_admin!", expires_at,
                ARRAY(SELECT namespace FROM user_roles WHERE user_roles.user_id = found.user_id
                      ORDER BY namespace) AS "role_namespaces!",
                ARRAY(SELECT role FROM user_roles WHERE user_roles.user_id = found.user_id
                      ORDER BY namespace) AS "role_kinds!: Vec<Role>",
                CASE WHEN cluster_admin AND (token_namespaces IS NOT NULL OR token_role IS NOT NULL)
                     THEN ARRAY(SELECT name FROM namespaces ORDER BY name)
                     ELSE ARRAY[]::text[] END AS "all_namespaces!"
         FROM found"#,
        token_hash
    )
    .fetch_optional(db)
    .await?)
}

/// A token to store: its owner, label, origin and lifetime, and the digest of its secret.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    /// Its owner.
    pub user_id: i64,
    /// A label.
    pub name: &'a str,
    /// How it is made.
    pub origin: TokenOrigin,
    /// How long it works (None: until revoked).
    pub lifetime: Option<Duration>,
    /// The digest of the secret.
    pub token_hash: &'a str,
    /// Its scope's namespaces (None: unscoped).
    pub namespaces: Option<Vec<String>>,
    /// Its scope's role (None: unscoped).
    pub role: Option<Role>,
}

/// Stores a new token; returns its id.
pub async fn create(db: impl PgExecutor<'_>, token: &NewToken<'_>) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO api_tokens (user_id, name, token_hash, origin, expires_at, namespaces, role)
         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5), $6, $7)
         RETURNING id",
        token.user_id,
        token.name,
        token.token_hash,
        token.origin as TokenOrigin,
        token.lifetime.map(|lifetime| lifetime.as_secs_f64()),
        token.namespaces.as_deref(),
        token.role.map(|role| role.as_str())
    )
    .fetch_one(db)
    .await?)
}

/// Revokes every live token of a user made in one of `origins`; returns how many.
pub async fn revoke_of_user(
    db: impl PgExecutor<'_>,
    user_id: i64,
    origins: &[TokenOrigin],
) -> Result<u64, StoreError> {
    let origins: Vec<&str> = origins.iter().map(|origin| origin.as_str()).collect();
    let statement = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now()
         WHERE user_id = $1 AND revoked_at IS NULL AND origin = ANY($2::text[])",
        user_id,
        &origins as &[&str]
    );
    rows_written(db, statement).await
}

/// Revokes a token; returns whether it was live.
pub async fn revoke(db: impl PgExecutor<'_>, token_id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
        token_id
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A user's tokens, newest first.
pub async fn of_user(db: impl PgExecutor<'_>, user_id: i64) -> Result<Vec<TokenInfo>, StoreError> {
    Ok(sqlx::query_as!(
        TokenInfo,
        r#"SELECT id, user_id, name, origin AS "origin: TokenOrigin", created_at, last_used_at, expires_at, revoked_at,
                  namespaces, role AS "role: Role" FROM api_tokens
           WHERE user_id = $1 ORDER BY id DESC"#,
        user_id
    )
    .fetch_all(db)
    .await?)
}

/// One token's metadata.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<TokenInfo>, StoreError> {
    Ok(sqlx::query_as!(
        TokenInfo,
        r#"SELECT id, user_id, name, origin AS "origin: TokenOrigin", created_at, last_used_at, expires_at, revoked_at,
                  namespaces, role AS "role: Role" FROM api_tokens WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?)
}
