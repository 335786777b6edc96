//! `webhook_deliveries`: every request to a webhook trigger's URL, accepted (with the run
//! it started), a repeat of an accepted one, or refused (with the reason); the window its
//! rate is counted over; the 24 h lookup of repeats; pruning by age.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::{rows_written, StoreError};

/// How long a delivery id is remembered: a repeat within it starts nothing.
pub const DEDUP_WINDOW_SECS: f64 = 24.0 * 3600.0;

/// A recorded delivery.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Delivery {
    /// Id.
    pub id: i64,
    /// Its trigger.
    pub trigger_id: i64,
    /// When it arrived.
    pub received_at: DateTime<Utc>,
    /// The value of the trigger's `dedup_header`, when given.
    pub delivery_id: Option<String>,
    /// `accepted`, `duplicate` or `refused`.
    pub outcome: String,
    /// The HTTP status answered.
    pub status: i32,
    /// Why it was refused.
    pub reason: Option<String>,
    /// The run it started (a duplicate: the first delivery's).
    pub run_id: Option<i64>,
}

/// A delivery to record.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    /// Its trigger.
    pub trigger_id: i64,
    /// The value of the trigger's `dedup_header`, when given.
    pub delivery_id: Option<&'a str>,
    /// `accepted`, `duplicate` or `refused`.
    pub outcome: &'a str,
    /// The HTTP status answered.
    pub status: i32,
    /// Why it was refused.
    pub reason: Option<&'a str>,
    /// The run it started.
    pub run_id: Option<i64>,
}

/// Records a delivery.
pub async fn record(db: impl PgExecutor<'_>, delivery: &NewDelivery<'_>) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO webhook_deliveries (trigger_id, delivery_id, outcome, status, reason, run_id)
         VALUES ($1, $2, $3, $4, $5, $6)",
        delivery.trigger_id,
        delivery.delivery_id,
        delivery.outcome,
        delivery.status,
        delivery.reason,
        delivery.run_id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The run of the delivery of this id accepted within the last 24 h, if any.
pub async fn accepted_run(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    delivery_id: &str,
) -> Result<Option<Option<i64>>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT run_id FROM webhook_deliveries
         WHERE trigger_id = $1 AND delivery_id = $2 AND outcome = 'accepted'
           AND received_at > now() - make_interval(secs => $3)
         ORDER BY received_at LIMIT 1",
        trigger_id,
        delivery_id,
        DEDUP_WINDOW_SECS
    )
    .fetch_optional(db)
    .await?)
}

/// Deliveries of a trigger counted against its rate in the last minute: all but those
/// refused for the rate itself (a sender retrying too fast does not lock itself out) and
/// those refused for their signature (401: anyone with the URL but not the secret must
/// not exhaust the rate of the legitimate sender).
pub async fn counted_last_minute(db: impl PgExecutor<'_>, trigger_id: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar::<_, i64>(
        "SELECT count(*) FROM webhook_deliveries
         WHERE trigger_id = $1 AND received_at > now() - interval '1 minute' AND status NOT IN (401, 429)",
    )
    .bind(trigger_id)
    .fetch_one(db)
    .await?)
}

/// A trigger's deliveries, newest first, and how many it has.
pub async fn list(
    db: impl PgExecutor<'_> + Copy,
    trigger_id: i64,
    limit: i64,
    offset: i64,
) -> Result<(Vec<Delivery>, i64), StoreError> {
    let items = sqlx::query_as!(
        Delivery,
        "SELECT id, trigger_id, received_at, delivery_id, outcome, status, reason, run_id
         FROM webhook_deliveries WHERE trigger_id = $1
         ORDER BY received_at DESC, id DESC LIMIT $2 OFFSET $3",
        trigger_id,
        limit,
        offset
    )
    .fetch_all(db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM webhook_deliveries WHERE trigger_id = $1"#,
        trigger_id
    )
    .fetch_one(db)
    .await?;
    Ok((items, total))
}

/// Deletes deliveries older than `retention_secs`; returns how many.
pub async fn prune(db: impl PgExecutor<'_>, retention_secs: f64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "DELETE FROM webhook_deliveries WHERE received_at < now() - make_interval(secs => $1)",
        retention_secs
    );
    rows_written(db, statement).await
}
