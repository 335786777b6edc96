//! `secrets`: sealed values by namespace and name (see [`crate::secrets`]), each bound to
//! its name (and, outside `default`, its namespace); this module never sees a value in
//! the clear. A job's `{{ secrets.NAME }}` is looked up in the job's own namespace only.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;
use crate::secrets::Sealed;

/// A secret as lists show it: never its value.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretInfo {
    /// The namespace it belongs to (the jobs of that namespace may use it).
    pub namespace: String,
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

/// A stored secret's identity with its sealed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSecret {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its value, sealed.
    pub sealed: Sealed,
}

/// A stored secret's columns.
struct SealedRow {
    namespace: String,
    name: String,
    key_id: String,
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
    bound: bool,
}

impl From<SealedRow> for StoredSecret {
    fn from(row: SealedRow) -> Self {
        StoredSecret {
            namespace: row.namespace,
            name: row.name,
            sealed: Sealed::from_columns(row.key_id, row.nonce, row.ciphertext, row.bound),
        }
    }
}

/// Stores a sealed value under `name` in `namespace`, creating or replacing it; true when
/// it was new.
pub async fn put(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    sealed: &Sealed,
    actor: &str,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"INSERT INTO secrets (namespace, name, key_id, nonce, ciphertext, bound, updated_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (namespace, name) DO UPDATE
               SET key_id = $3, nonce = $4, ciphertext = $5, bound = $6, updated_by = $7, updated_at = now()
           RETURNING (xmax = 0) AS "created!""#,
        namespace,
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

/// Whether `namespace` has a secret of this name.
pub async fn exists(db: impl PgExecutor<'_>, namespace: &str, name: &str) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM secrets WHERE namespace = $1 AND name = $2) AS "exists!""#,
        namespace,
        name
    )
    .fetch_one(db)
    .await?)
}

/// The secrets of `namespace` (None: of every namespace), by namespace and name.
pub async fn list(db: impl PgExecutor<'_>, namespace: Option<&str>) -> Result<Vec<SecretInfo>, StoreError> {
    Ok(sqlx::query_as!(
        SecretInfo,
        "SELECT namespace, name, created_at, updated_at, updated_by, key_id FROM secrets
         WHERE $1::text IS NULL OR namespace = $1 ORDER BY namespace, name",
        namespace
    )
    .fetch_all(db)
    .await?)
}

/// Deletes a secret of `namespace`; true when it existed.
pub async fn delete(db: impl PgExecutor<'_>, namespace: &str, name: &str) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "DELETE FROM secrets WHERE namespace = $1 AND name = $2",
        namespace,
        name
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The sealed values of the named secrets that exist in `namespace` (a job's: those of
/// other namespaces are not found).
pub async fn sealed(
    db: impl PgExecutor<'_>,
    namespace: &str,
    names: &[String],
) -> Result<Vec<(String, Sealed)>, StoreError> {
    let rows = sqlx::query!(
        "SELECT name, key_id, nonce, ciphertext, bound FROM secrets WHERE namespace = $1 AND name = ANY($2)",
        namespace,
        names
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                row.name,
                Sealed::from_columns(row.key_id, row.nonce, row.ciphertext, row.bound),
            )
        })
        .collect())
}

/// The sealed values of the named secrets of job `job_id`'s namespace (what its
/// `{{ secrets.NAME }}` resolve to; a name existing only in another namespace is not
/// found), with that namespace, which the values are bound to.
pub async fn sealed_for_job(
    db: impl PgExecutor<'_>,
    job_id: i64,
    names: &[String],
) -> Result<Vec<StoredSecret>, StoreError> {
    let rows = sqlx::query_as!(
        SealedRow,
        "SELECT secrets.namespace, secrets.name, secrets.key_id, secrets.nonce, secrets.ciphertext, secrets.bound
         FROM jobs JOIN secrets ON secrets.namespace = jobs.namespace
         WHERE jobs.id = $1 AND secrets.name = ANY($2)",
        job_id,
        names
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(StoredSecret::from).collect())
}

/// The secrets sealed before values were bound to their names, locked until the
/// transaction ends (to re-seal them; a value set meanwhile is bound and not listed).
pub async fn unbound(conn: &mut sqlx::PgConnection) -> Result<Vec<StoredSecret>, StoreError> {
    let rows = sqlx::query!(
        "SELECT namespace, name, key_id, nonce, ciphertext FROM secrets WHERE NOT bound
         ORDER BY namespace, name FOR UPDATE"
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            // Selected for not being bound.
            let bound = false;
            StoredSecret::from(SealedRow {
                namespace: row.namespace,
                name: row.name,
                key_id: row.key_id,
                nonce: row.nonce,
                ciphertext: row.ciphertext,
                bound,
            })
        })
        .collect())
}

/// The secrets sealed under another key than `key_id` (to rotate), with their values.
pub async fn sealed_under_other_keys(
    db: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<StoredSecret>, StoreError> {
    let rows = sqlx::query_as!(
        SealedRow,
        "SELECT namespace, name, key_id, nonce, ciphertext, bound FROM secrets
         WHERE key_id <> $1 ORDER BY namespace, name",
        key_id
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(StoredSecret::from).collect())
}

/// Replaces a secret's sealed value without touching who set it (a key rotation, or
/// binding a value sealed before binding).
pub async fn reseal(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    sealed: &Sealed,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE secrets SET key_id = $3, nonce = $4, ciphertext = $5, bound = $6
         WHERE namespace = $1 AND name = $2",
        namespace,
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
