//! `login_failures`: failed logins per (user name, address), the memory of the login
//! rate limit.

use std::time::Duration;

use sqlx::{PgExecutor, PgPool};

use super::StoreError;

/// Failed logins of a key inside `window`, and the seconds until the oldest leaves it.
pub async fn recent(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
    window: Duration,
) -> Result<(i64, u64), StoreError> {
    let found = sqlx::query!(
        r#"SELECT count(*) AS "count!",
                  EXTRACT(EPOCH FROM (min(at) + make_interval(secs => $3) - now()))::float8 AS wait
           FROM login_failures
           WHERE username = $1 AND address = $2 AND at > now() - make_interval(secs => $3)"#,
        username,
        address,
        window.as_secs_f64()
    )
    .fetch_one(db)
    .await?;
    Ok((found.count, found.wait.unwrap_or(0.0).ceil().max(0.0) as u64))
}

/// Records a failed login (and forgets failures older than `window`, of every key).
pub async fn record(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
    window: Duration,
) -> Result<(), StoreError> {
    sqlx::query!(
        "WITH pruned AS (DELETE FROM login_failures WHERE at < now() - make_interval(secs => $3))
         INSERT INTO login_failures (username, address) VALUES ($1, $2)",
        username,
        address,
        window.as_secs_f64()
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Takes one attempt from a key's budget before the password is checked: records a
/// failure in advance (a successful login clears it) when the key has fewer than `max`
/// failures inside `window`. Keys are serialized (an advisory lock per key), so however
/// many attempts arrive at once, at most `max` per window are evaluated. Returns None
/// when the attempt may go on, else the seconds until the oldest failure leaves the
/// window.
pub async fn reserve(
    pool: &PgPool,
    username: &str,
    address: &str,
    window: Duration,
    max: i64,
) -> Result<Option<u64>, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        "SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 0))) AS key",
        username,
        address
    )
    .fetch_one(&mut *tx)
    .await?;
    let (failures, retry_after) = recent(&mut *tx, username, address, window).await?;
    if failures >= max {
        tx.rollback().await?;
        return Ok(Some(retry_after.max(1)));
    }
    record(&mut *tx, username, address, window).await?;
    tx.commit().await?;
    Ok(None)
}

/// Forgets a key's failures after a successful login.
pub async fn clear(db: impl PgExecutor<'_>, username: &str, address: &str) -> Result<(), StoreError> {
    sqlx::query!(
        "DELETE FROM login_failures WHERE username = $1 AND address = $2",
        username,
        address
    )
    .execute(db)
    .await?;
    Ok(())
}
