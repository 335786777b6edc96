//! Idempotency keys (migration `2026112801000002`): the first answer to a request sent
//! with `Idempotency-Key`, kept 24 hours so that the same request sent again gets it
//! back instead of acting twice.

use std::time::Duration;

use sqlx::PgExecutor;

use super::{rows_written, StoreError};

/// How long a key and its answer are kept.
pub const KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// A key claimed longer ago than this and still without an answer belongs to a request
/// that died with its manager: the next request with it takes it over. Longer than any
/// request may take (the manager's request timeout).
pub const ABANDONED_AFTER: Duration = Duration::from_secs(120);

/// A stored answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type`, if there was one.
    pub content_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

/// What a request carrying a key may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or expired, or abandoned): the request runs, then completes or
    /// releases it.
    Claimed,
    /// The same request was answered already: answer the same.
    Answered(Answer),
    /// The same request is running now.
    InProgress,
    /// The key was used for another request.
    Mismatch,
}

/// Claims `key` of `owner` for the request whose digest is `fingerprint`.
pub async fn claim(
    db: impl PgExecutor<'_> + Copy,
    owner: &str,
    key: &str,
    fingerprint: &str,
) -> Result<Claim, StoreError> {
    let claimed = sqlx::query_scalar!(
        r#"INSERT INTO idempotency_keys (owner, key, fingerprint) VALUES ($1, $2, $3)
           ON CONFLICT (owner, key) DO UPDATE
               SET fingerprint = EXCLUDED.fingerprint, status = NULL, content_type = NULL,
                   body = NULL, created_at = now()
               WHERE idempotency_keys.created_at < now() - make_interval(secs => $4)
                  OR (idempotency_keys.status IS NULL
                      AND idempotency_keys.created_at < now() - make_interval(secs => $5))
           RETURNING true AS "claimed!""#,
        owner,
        key,
        fingerprint,
        KEPT_FOR.as_secs_f64(),
        ABANDONED_AFTER.as_secs_f64()
    )
    .fetch_optional(db)
    .await?;
    if claimed.is_some() {
        return Ok(Claim::Claimed);
    }
    let existing = sqlx::query!(
        "SELECT fingerprint, status, content_type, body FROM idempotency_keys WHERE owner = $1 AND key = $2",
        owner,
        key
    )
    .fetch_optional(db)
    .await?;
    Ok(match existing {
        // Released between the two statements: its request failed; the client retries.
        None => Claim::InProgress,
        Some(row) if row.fingerprint != fingerprint => Claim::Mismatch,
        Some(row) => match row.status {
            None => Claim::InProgress,
            Some(status) => Claim::Answered(Answer {
                status: u16::try_from(status).unwrap_or(500),
                content_type: row.content_type,
                body: row.body.unwrap_or_default(),
            }),
        },
    })
}

/// Stores the answer of a claimed key.
pub async fn complete(
    db: impl PgExecutor<'_>,
    owner: &str,
    key: &str,
    answer: &Answer,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE idempotency_keys SET status = $3, content_type = $4, body = $5
         WHERE owner = $1 AND key = $2 AND status IS NULL",
        owner,
        key,
        i32::from(answer.status),
        answer.content_type,
        answer.body
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Gives a claimed key back (its request failed in a way worth retrying).
pub async fn release(db: impl PgExecutor<'_>, owner: &str, key: &str) -> Result<(), StoreError> {
    sqlx::query!(
        "DELETE FROM idempotency_keys WHERE owner = $1 AND key = $2 AND status IS NULL",
        owner,
        key
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Deletes up to `batch` keys older than [`KEPT_FOR`]; returns how many.
pub async fn purge(db: impl PgExecutor<'_>, batch: i64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "DELETE FROM idempotency_keys WHERE (owner, key) IN (
             SELECT owner, key FROM idempotency_keys
             WHERE created_at < now() - make_interval(secs => $1)
             ORDER BY created_at LIMIT $2)",
        KEPT_FOR.as_secs_f64(),
        batch
    );
    rows_written(db, statement).await
}
