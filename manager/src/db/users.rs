//! Users: lookup by name, creation, and the first-admin bootstrap.

use serde::Serialize;
use sqlx::PgExecutor;

use crate::auth::Role;

/// A row of `users`.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
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
pub async fn by_name(db: impl PgExecutor<'_>, username: &str) -> Result<Option<User>, sqlx::Error> {
    sqlx::query_as::<_, User>("SELECT * FROM users WHERE username = $1")
        .bind(username)
        .fetch_optional(db)
        .await
}

/// Inserts a user; returns None when the name is taken.
pub async fn create(
    db: impl PgExecutor<'_>,
    username: &str,
    password_hash: &str,
    role: Role,
) -> Result<Option<User>, sqlx::Error> {
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
}

/// Whether any user exists.
pub async fn any(db: impl PgExecutor<'_>) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar::<_, bool>("SELECT EXISTS (SELECT 1 FROM users)")
        .fetch_one(db)
        .await
}

/// Every user, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<User>, sqlx::Error> {
    sqlx::query_as::<_, User>("SELECT * FROM users ORDER BY username")
        .fetch_all(db)
        .await
}
