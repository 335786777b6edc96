//! `secrets`: sealed values by name (see [`crate::secrets`]), each bound to its name;
//! this module never sees a value in the clear.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;
use crate::secrets::Sealed;

/// A secret as lists show it: never its value.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretInfo {
    /// Its name, as jobs reference it: `{{ secrets.NAME }}`.
    pub name: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its value last changed.
    pub updated_at: DateTime<Utc>,
    /// Who last set its value.
    pub updated_by: String,
    /// The id of the key its value is sealed under.
    pub key_id: String,
}

/// Stores a sealed value under `name`, creating or replacing it; true when it was new.
pub async fn put(
    db: impl PgExecutor<'_>,
    name: &str,
    sealed: &Sealed,
    actor: &str,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"INSERT INTO secrets (name, key_id, nonce, ciphertext, bound, updated_by) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (namespace, name) DO UPDATE
               SET key_id = $2, nonce = $3, ciphertext = $4, bound = $5, updated_by = $6, updated_at = now()
           RETURNING (xmax = 0) AS "created!""#,
        name,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext,
        sealed.bound,
        actor
    )
    .fetch_one(db)
    .await?)
}

/// Whether a secret of this name exists.
pub async fn exists(db: impl PgExecutor<'_>, name: &str) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM secrets WHERE name = $1) AS "exists!""#,
        name
    )
    .fetch_one(db)
    .await?)
}

/// Every secret, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<SecretInfo>, StoreError> {
    Ok(sqlx::query_as!(
        SecretInfo,
        "SELECT name, created_at, updated_at, updated_by, key_id FROM secrets ORDER BY name"
    )
    .fetch_all(db)
    .await?)
}

/// Deletes a secret; true when it existed.
pub async fn delete(db: impl PgExecutor<'_>, name: &str) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM secrets WHERE name = $1", name)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The sealed values of the named secrets that exist.
pub async fn sealed(db: impl PgExecutor<'_>, names: &[String]) -> Result<Vec<(String, Sealed)>, StoreError> {
    let rows = sqlx::query!(
        "SELECT name, key_id, nonce, ciphertext, bound FROM secrets WHERE name = ANY($1)",
        names
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| named(row.name, row.key_id, row.nonce, row.ciphertext, row.bound))
        .collect())
}

/// The secrets sealed before values were bound to their names, locked until the
/// transaction ends (to re-seal them; a value set meanwhile is bound and not listed).
pub async fn unbound(conn: &mut sqlx::PgConnection) -> Result<Vec<(String, Sealed)>, StoreError> {
    let rows = sqlx::query!(
        "SELECT name, key_id, nonce, ciphertext FROM secrets WHERE NOT bound ORDER BY name FOR UPDATE"
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| named(row.name, row.key_id, row.nonce, row.ciphertext, false))
        .collect())
}

/// A secret's name with its sealed value, from its columns.
fn named(name: String, key_id: String, nonce: Vec<u8>, ciphertext: Vec<u8>, bound: bool) -> (String, Sealed) {
    let sealed = Sealed {
        key_id,
        nonce,
        ciphertext,
        bound,
    };
    (name, sealed)
}

/// The names of the secrets sealed under another key than `key_id` (to rotate).
pub async fn sealed_under_other_keys(
    db: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT name FROM secrets WHERE key_id <> $1 ORDER BY name",
        key_id
    )
    .fetch_all(db)
    .await?)
}

/// Replaces a secret's sealed value without touching who set it (a key rotation, or
/// binding a value sealed before binding).
pub async fn reseal(db: impl PgExecutor<'_>, name: &str, sealed: &Sealed) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE secrets SET key_id = $2, nonce = $3, ciphertext = $4, bound = $5 WHERE name = $1",
        name,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext,
        sealed.bound
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
