//! `users`: the manager's accounts, looked up by name or id, created, given a role, a
//! password or the disabled flag.

use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;
use crate::model::Role;

/// A user (the password hash is never shown).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct User {
    /// Id.
    pub id: i64,
    /// Login name.
    pub username: String,
    /// argon2 PHC string.
    #[serde(skip)]
    pub password_hash: String,
    /// Role name (see [`Role`]).
    pub role: String,
    /// A disabled user cannot log in and its tokens stop working.
    pub disabled: bool,
    /// When it was created.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl User {
    /// The user's role; an unknown stored value (impossible under the CHECK) is a viewer.
    pub fn role(&self) -> Role {
        self.role.parse().unwrap_or(Role::Viewer)
    }
}

/// One user by name.
pub async fn by_name(db: impl PgExecutor<'_>, username: &str) -> Result<Option<User>, StoreError> {
    sqlx::query_as::<_, User>("SELECT * FROM users WHERE username = $1")
        .bind(username)
        .fetch_optional(db)
        .await
        .map_err(StoreError::from)
}

/// Inserts a user; returns None when the name is taken.
pub async fn create(
    db: impl PgExecutor<'_>,
    username: &str,
    password_hash: &str,
    role: Role,
) -> Result<Option<User>, StoreError> {
    sqlx::query_as::<_, User>(
        "INSERT INTO users (username, password_hash, role) VALUES ($1, $2, $3)
         ON CONFLICT (username) DO NOTHING
         RETURNING *",
    )
    .bind(username)
    .bind(password_hash)
    .bind(role.as_str())
    .fetch_optional(db)
    .await
    .map_err(StoreError::from)
}

/// Whether any user exists.
pub async fn any(db: impl PgExecutor<'_>) -> Result<bool, StoreError> {
    sqlx::query_scalar::<_, bool>("SELECT EXISTS (SELECT 1 FROM users)")
        .fetch_one(db)
        .await
        .map_err(StoreError::from)
}

/// Every user, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<User>, StoreError> {
    sqlx::query_as::<_, User>("SELECT * FROM users ORDER BY username")
        .fetch_all(db)
        .await
        .map_err(StoreError::from)
}

/// One user by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<User>, StoreError> {
    sqlx::query_as::<_, User>("SELECT * FROM users WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await
        .map_err(StoreError::from)
}

/// Sets a user's role and disabled flag; returns the new row.
pub async fn set_access(
    db: impl PgExecutor<'_>,
    id: i64,
    role: Role,
    disabled: bool,
) -> Result<Option<User>, StoreError> {
    sqlx::query_as::<_, User>("UPDATE users SET role = $2, disabled = $3 WHERE id = $1 RETURNING *")
        .bind(id)
        .bind(role.as_str())
        .bind(disabled)
        .fetch_optional(db)
        .await
        .map_err(StoreError::from)
}

/// Replaces a user's password hash.
pub async fn set_password(db: impl PgExecutor<'_>, id: i64, password_hash: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("UPDATE users SET password_hash = $2, password_changed_at = now() WHERE id = $1")
        .bind(id)
        .bind(password_hash)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Enabled admins other than `except`.
pub async fn other_active_admins(db: impl PgExecutor<'_>, except: i64) -> Result<i64, StoreError> {
    sqlx::query_scalar("SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled AND id <> $1")
        .bind(except)
        .fetch_one(db)
        .await
        .map_err(StoreError::from)
}
