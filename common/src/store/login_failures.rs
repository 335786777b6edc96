//! `login_failures`: failed logins per (user name, address), the memory of the login
//! rate limit.

use std::time::Duration;

use sqlx::PgExecutor;

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
