//! `users`: the manager's accounts, looked up by name or id, created, given a role, a
//! password or the disabled flag.

use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;
use crate::model::Role;

/// A user (the password hash is never shown).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct User {
    /// Id.
    pub id: i64,
    /// Login name.
    pub username: String,
    /// argon2 PHC string.
    #[serde(skip)]
    pub password_hash: String,
    /// What the user may do.
    pub role: Role,
    /// A disabled user cannot log in and its tokens stop working.
    pub disabled: bool,
    /// When it was created.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl User {
    /// The user's role.
    pub fn role(&self) -> Role {
        self.role
    }
}

/// One user by name.
pub async fn by_name(db: impl PgExecutor<'_>, username: &str) -> Result<Option<User>, StoreError> {
    Ok(sqlx::query_as!(
        User,
        r#"SELECT id, username, password_hash, role AS "role: Role", disabled, created_at
           FROM users WHERE username = $1"#,
        username
    )
    .fetch_optional(db)
    .await?)
}

/// Inserts a user with the grant `role` meant before namespaces (the role in `default`,
/// and cluster admin for `admin`; see `user_roles::replace` for another); returns None
/// when the name is taken.
pub async fn create(
    db: impl PgExecutor<'_>,
    username: &str,
    password_hash: &str,
    role: Role,
) -> Result<Option<User>, StoreError> {
    Ok(sqlx::query_as!(
        User,
        r#"WITH made AS (
               INSERT INTO users (username, password_hash, role, cluster_admin) VALUES ($1, $2, $3, $3 = 'admin')
               ON CONFLICT (username) DO NOTHING
               RETURNING id, username, password_hash, role, disabled, created_at),
           granted AS (
               INSERT INTO user_roles (user_id, namespace, role) SELECT id, 'default', role FROM made)
           SELECT id AS "id!", username AS "username!", password_hash AS "password_hash!", role AS "role!: Role",
                  disabled AS "disabled!", created_at AS "created_at!" FROM made"#,
        username,
        password_hash,
        role as Role
    )
    .fetch_optional(db)
    .await?)
}

/// Whether any user exists.
pub async fn any(db: impl PgExecutor<'_>) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM users) AS "any!""#)
            .fetch_one(db)
            .await?,
    )
}

/// Every user, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<User>, StoreError> {
    Ok(sqlx::query_as!(
        User,
        r#"SELECT id, username, password_hash, role AS "role: Role", disabled, created_at
           FROM users ORDER BY username"#
    )
    .fetch_all(db)
    .await?)
}

/// One user by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<User>, StoreError> {
    Ok(sqlx::query_as!(
        User,
        r#"SELECT id, username, password_hash, role AS "role: Role", disabled, created_at
           FROM users WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Sets a user's role and disabled flag; returns the new row.
pub async fn set_access(
    db: impl PgExecutor<'_>,
    id: i64,
    role: Role,
    disabled: bool,
) -> Result<Option<User>, StoreError> {
    Ok(sqlx::query_as!(
        User,
        r#"UPDATE users SET role = $2, disabled = $3 WHERE id = $1
           RETURNING id, username, password_hash, role AS "role: Role", disabled, created_at"#,
        id,
        role as Role,
        disabled
    )
    .fetch_optional(db)
    .await?)
}

/// Replaces a user's password hash.
pub async fn set_password(db: impl PgExecutor<'_>, id: i64, password_hash: &str) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE users SET password_hash = $2, password_changed_at = now() WHERE id = $1",
        id,
        password_hash
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The zone a user reads times in (None: the browser's own).
pub async fn time_zone(db: impl PgExecutor<'_>, id: i64) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar!("SELECT time_zone FROM users WHERE id = $1", id)
            .fetch_optional(db)
            .await?
            .flatten(),
    )
}

/// Sets (or, with None, clears) the zone a user reads times in.
pub async fn set_time_zone(db: impl PgExecutor<'_>, id: i64, zone: Option<&str>) -> Result<bool, StoreError> {
    let done = sqlx::query!("UPDATE users SET time_zone = $2 WHERE id = $1", id, zone)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Enabled admins other than `except`.
pub async fn other_active_admins(db: impl PgExecutor<'_>, except: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM users WHERE role = 'admin' AND NOT disabled AND id <> $1"#,
        except
    )
    .fetch_one(db)
    .await?)
}

/// A user who logs in through single sign-on, as that login needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcUser {
    /// Id.
    pub id: i64,
    /// Login name.
    pub username: String,
    /// A disabled user cannot log in.
    pub disabled: bool,
}

/// The user the provider `issuer` knows as `subject`, if they logged in before.
pub async fn by_oidc_identity(
    db: impl PgExecutor<'_>,
    issuer: &str,
    subject: &str,
) -> Result<Option<OidcUser>, StoreError> {
    Ok(sqlx::query_as!(
        OidcUser,
        "SELECT id, username, disabled FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2",
        issuer,
        subject
    )
    .fetch_optional(db)
    .await?)
}

/// Creates the user of a first single sign-on login, with no role yet (the login's
/// grant sets them) and a password hash nobody has the password of; None when the name
/// or the identity is taken (the caller tries another name, or finds the identity).
pub async fn create_oidc(
    db: impl PgExecutor<'_>,
    username: &str,
    password_hash: &str,
    issuer: &str,
    subject: &str,
) -> Result<Option<OidcUser>, StoreError> {
    Ok(sqlx::query_as!(
        OidcUser,
        "INSERT INTO users (username, password_hash, role, oidc_issuer, oidc_subject)
         VALUES ($1, $2, 'viewer', $3, $4)
         ON CONFLICT DO NOTHING
         RETURNING id, username, disabled",
        username,
        password_hash,
        issuer,
        subject
    )
    .fetch_optional(db)
    .await?)
}

/// Enabled cluster admins other than `except`.
pub async fn other_active_cluster_admins(db: impl PgExecutor<'_>, except: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM users WHERE cluster_admin AND NOT disabled AND id <> $1"#,
        except
    )
    .fetch_one(db)
    .await?)
}
