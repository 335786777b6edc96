//! `notifications`: the delivery log. One row per message to one channel, delivered by a
//! monitor that holds the row locked while it sends (a monitor killed mid-delivery
//! releases it, and another sends it again under the same delivery id), retried with
//! backoff until `PROBACTR_ALERT_RETRY_FOR` has passed since it was queued.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::model::NotificationState;
use crate::store::alerts::channels::SealedParts;
use crate::store::{rows_written, Page, StoreError};

/// A notification as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Notification {
    /// Id.
    pub id: i64,
    /// Sent as `X-Probactr-Delivery`, the same on every attempt.
    pub delivery_id: Uuid,
    /// The rule that raised it (None: a channel test, or a deleted rule).
    pub rule_id: Option<i64>,
    /// Its rule's name.
    pub rule_name: Option<String>,
    /// The channel.
    pub channel_id: Option<i64>,
    /// The channel's name.
    pub channel_name: Option<String>,
    /// The event (or `test`).
    pub event: String,
    /// The job, if any.
    pub job_id: Option<i64>,
    /// The job's name, if it still exists.
    pub job_name: Option<String>,
    /// The run, if any.
    pub run_id: Option<i64>,
    /// Events folded into this message beyond its own.
    pub suppressed: i32,
    /// Delivery state.
    pub state: NotificationState,
    /// Attempts made.
    pub attempts: i32,
    /// When the next attempt is due (pending ones).
    pub next_attempt_at: DateTime<Utc>,
    /// The last attempt's error.
    pub last_error: Option<String>,
    /// Queued.
    pub created_at: DateTime<Utc>,
    /// Delivered.
    pub sent_at: Option<DateTime<Utc>>,
    /// What the message says (the webhook body without its delivery id).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payload: serde_json::Value,
}

/// A message to queue for every channel of a rule.
#[derive(Debug, Clone)]
pub struct NewNotification<'a> {
    /// The rule (None: a channel test).
    pub rule_id: Option<i64>,
    /// The event.
    pub event: &'a str,
    /// The job.
    pub job_id: Option<i64>,
    /// The run.
    pub run_id: Option<i64>,
    /// Events it stands for beyond its own.
    pub suppressed: i32,
    /// What it says.
    pub payload: &'a serde_json::Value,
}

/// Queues one notification per channel; returns their ids.
pub async fn queue(
    conn: &mut PgConnection,
    channel_ids: &[i64],
    new: &NewNotification<'_>,
) -> Result<Vec<i64>, StoreError> {
    let ids = sqlx::query_scalar!(
        "INSERT INTO notifications (rule_id, channel_id, event, job_id, run_id, suppressed, payload)
         SELECT $1, channel_id, $3, $4, $5, $6, $7 FROM unnest($2::bigint[]) AS channel_id
         RETURNING id",
        new.rule_id,
        channel_ids,
        new.event,
        new.job_id,
        new.run_id,
        new.suppressed,
        new.payload
    )
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query!("SELECT pg_notify($1, '')", super::NOTIFICATIONS_CHANNEL)
        .execute(&mut *conn)
        .await?;
    Ok(ids)
}

/// A due notification with what its channel needs to send it.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The notification.
    pub id: i64,
    /// Its delivery id.
    pub delivery_id: Uuid,
    /// Its event.
    pub event: String,
    /// What it says.
    pub payload: serde_json::Value,
    /// Attempts made before this one.
    pub attempts: i32,
    /// The channel's name.
    pub channel_name: String,
    /// The channel: its kind, public configuration and sealed secret and URL (bound to
    /// its id). Its URL is None for a channel of a release before sealed URLs (the URL
    /// still in `config`) and for an email channel.
    pub channel: SealedParts,
}

/// Takes the oldest due notification, locked until the transaction ends (its attempt is
/// recorded in the same transaction); None when nothing is due or every due one is being
/// sent by another monitor.
pub async fn take_due(conn: &mut PgConnection) -> Result<Option<Delivery>, StoreError> {
    let row = sqlx::query!(
        r#"SELECT n.id, n.delivery_id, n.event, n.payload, n.attempts, c.id AS channel_id, c.name AS channel_name
           FROM notifications AS n JOIN alert_channels AS c ON c.id = n.channel_id
           WHERE n.state = 'pending' AND n.next_attempt_at <= now()
           ORDER BY n.next_attempt_at, n.id LIMIT 1
           FOR UPDATE OF n SKIP LOCKED"#
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    // The notification's row lock keeps its channel readable: a channel's deletion
    // cascades to its notifications, so it waits for this transaction, and until it
    // commits the channel reads as it was.
    let channel = super::channels::sealed_parts(&mut *conn, row.channel_id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok(Some(Delivery {
        id: row.id,
        delivery_id: row.delivery_id,
        event: row.event,
        payload: row.payload,
        attempts: row.attempts,
        channel_name: row.channel_name,
        channel,
    }))
}

/// Records a delivered notification.
pub async fn record_sent(conn: &mut PgConnection, id: i64) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE notifications SET state = 'sent', attempts = attempts + 1, sent_at = now(), updated_at = now(),
                last_error = NULL
         WHERE id = $1 AND state = 'pending'",
        id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Records a failed attempt: retried after a backoff doubling per attempt (from 1 s, at
/// most `max_backoff_secs`) while `retry_for_secs` since it was queued allows, failed for
/// good otherwise. Returns the state it is left in.
pub async fn record_failure(
    conn: &mut PgConnection,
    id: i64,
    error: &str,
    retry_for_secs: f64,
    max_backoff_secs: f64,
) -> Result<NotificationState, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"UPDATE notifications SET attempts = attempts + 1, last_error = $2, updated_at = now(),
                next_attempt_at = now() + make_interval(secs => least($4, power(2, attempts))),
                state = CASE WHEN now() + make_interval(secs => least($4, power(2, attempts)))
                                  > created_at + make_interval(secs => $3)
                             THEN 'failed' ELSE 'pending' END
           WHERE id = $1
           RETURNING state AS "state: NotificationState""#,
        id,
        error,
        retry_for_secs,
        max_backoff_secs
    )
    .fetch_one(conn)
    .await?)
}

/// What to list of the delivery log.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this one.
    pub id: Option<i64>,
    /// Only this job's.
    pub job_id: Option<i64>,
    /// Only in this state.
    pub state: Option<NotificationState>,
    /// Only messages sent through channels of these namespaces (None: every message,
    /// those of deleted channels included).
    pub namespaces: Option<Vec<String>>,
}

/// The delivery log, newest first.
pub async fn list(
    db: impl PgExecutor<'_>,
    filter: &Filter,
    page: Page,
) -> Result<Vec<Notification>, StoreError> {
    Ok(sqlx::query_as!(
        Notification,
        r#"SELECT id AS "id!", delivery_id AS "delivery_id!", rule_id, rule_name, channel_id, channel_name,
                  event AS "event!", job_id, job_name, run_id, suppressed AS "suppressed!",
                  state AS "state!: NotificationState", attempts AS "attempts!",
                  next_attempt_at AS "next_attempt_at!", last_error, created_at AS "created_at!", sent_at,
                  payload AS "payload!"
           FROM notification_log
           WHERE ($1::bigint IS NULL OR id = $1) AND ($2::bigint IS NULL OR job_id = $2)
             AND ($3::text IS NULL OR state = $3)
             AND ($6::text[] IS NULL
                  OR channel_id IN (SELECT id FROM alert_channels WHERE namespace = ANY($6)))
           ORDER BY id DESC LIMIT $4 OFFSET $5"#,
        filter.id,
        filter.job_id,
        filter.state.map(|s| s.as_str()),
        page.limit,
        page.offset,
        filter.namespaces.as_deref()
    )
    .fetch_all(db)
    .await?)
}

/// One notification.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Notification>, StoreError> {
    let filter = Filter {
        id: Some(id),
        ..Filter::default()
    };
    Ok(list(db, &filter, Page { limit: 1, offset: 0 }).await?.pop())
}

/// Deletes delivered and failed notifications queued more than `older_than_secs` ago
/// (history retention).
pub async fn purge(db: impl PgExecutor<'_>, older_than_secs: f64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "DELETE FROM notifications WHERE state <> 'pending' AND created_at < now() - make_interval(secs => $1)",
        older_than_secs
    );
    rows_written(db, statement).await
}
