//! `alert_events` (the outbox) and `alert_windows` (throttling): events waiting to be
//! matched against rules, and per rule, job and event the window in which repeats are
//! folded into one follow-up.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::model::AlertEvent;
use crate::store::StoreError;

/// An event waiting in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    /// Outbox id.
    pub id: i64,
    /// What happened.
    pub event: AlertEvent,
    /// The one rule it is for (conditions a monitor evaluated per rule), or every rule.
    pub rule_id: Option<i64>,
    /// The job, if any.
    pub job_id: Option<i64>,
    /// The job's name, if it still exists.
    pub job_name: Option<String>,
    /// The job's namespace, if it still exists: only rules of that namespace watch it.
    pub job_namespace: Option<String>,
    /// The trigger, if any.
    pub trigger_id: Option<i64>,
    /// The run, if any.
    pub run_id: Option<i64>,
    /// The executor, if any.
    pub executor_id: Option<Uuid>,
    /// What the event says beyond its ids (state, error, counts).
    pub detail: serde_json::Value,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
}

/// Takes up to `limit` events, oldest first, locked for this transaction; events another
/// monitor holds are skipped, so each is processed once.
pub async fn take(conn: &mut PgConnection, limit: i64) -> Result<Vec<OutboxEvent>, StoreError> {
    Ok(sqlx::query_as!(
        OutboxEvent,
        r#"SELECT alert_events.id, event AS "event: AlertEvent", rule_id, job_id, jobs.name AS "job_name?",
                  jobs.namespace AS "job_namespace?",
                  trigger_id, run_id, executor_id, detail, occurred_at
           FROM alert_events LEFT JOIN jobs ON jobs.id = alert_events.job_id
           ORDER BY alert_events.id LIMIT $1
           FOR UPDATE OF alert_events SKIP LOCKED"#,
        limit
    )
    .fetch_all(conn)
    .await?)
}

/// Removes processed events.
pub async fn remove(conn: &mut PgConnection, ids: &[i64]) -> Result<(), StoreError> {
    sqlx::query!("DELETE FROM alert_events WHERE id = ANY($1)", ids)
        .execute(conn)
        .await?;
    Ok(())
}

/// Puts an event in the outbox.
pub async fn push(
    db: impl PgExecutor<'_>,
    event: AlertEvent,
    rule_id: Option<i64>,
    job_id: Option<i64>,
    detail: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO alert_events (event, rule_id, job_id, detail) VALUES ($1, $2, $3, $4)",
        event as AlertEvent,
        rule_id,
        job_id,
        detail
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Counts an event in its throttle window: true when it opens a new window (it is sent at
/// once), false when it is folded into the window's follow-up. A window whose time is up
/// but whose follow-up has not gone out yet still folds, so the follow-up counts it.
pub async fn open_or_fold(
    conn: &mut PgConnection,
    rule_id: i64,
    job_id: Option<i64>,
    event: AlertEvent,
    throttle_secs: i32,
    described: &serde_json::Value,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"INSERT INTO alert_windows AS w (rule_id, job_id, event, opened_at, closes_at)
           VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp() + make_interval(secs => $4))
           ON CONFLICT (rule_id, job_id, event) DO UPDATE SET
               opened_at = CASE WHEN w.closes_at <= clock_timestamp() AND w.suppressed = 0
                                THEN excluded.opened_at ELSE w.opened_at END,
               closes_at = CASE WHEN w.closes_at <= clock_timestamp() AND w.suppressed = 0
                                THEN excluded.closes_at ELSE w.closes_at END,
               last_event = CASE WHEN w.closes_at <= clock_timestamp() AND w.suppressed = 0
                                 THEN NULL ELSE $5::jsonb END,
               suppressed = CASE WHEN w.closes_at <= clock_timestamp() AND w.suppressed = 0
                                 THEN 0 ELSE w.suppressed + 1 END
           RETURNING last_event IS NULL AND suppressed = 0 AS "opened!""#,
        rule_id,
        job_id.unwrap_or(0),
        event as AlertEvent,
        f64::from(throttle_secs),
        described
    )
    .fetch_one(conn)
    .await?)
}

/// A throttle window that closed with folded events: its follow-up is due.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedWindow {
    /// The rule.
    pub rule_id: i64,
    /// The job (None: a cluster-wide event).
    pub job_id: Option<i64>,
    /// The event.
    pub event: AlertEvent,
    /// When the window opened.
    pub opened_at: DateTime<Utc>,
    /// Events folded since.
    pub suppressed: i32,
    /// The last of them, as described when folded.
    pub last_event: Option<serde_json::Value>,
    /// The rule's throttle, which the next window lasts.
    pub throttle_secs: i32,
}

/// Takes up to `limit` closed windows with folded events, locked for this transaction.
pub async fn take_closed_windows(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<ClosedWindow>, StoreError> {
    Ok(sqlx::query_as!(
        ClosedWindow,
        r#"SELECT w.rule_id, NULLIF(w.job_id, 0) AS job_id, w.event AS "event: AlertEvent", w.opened_at,
                  w.suppressed, w.last_event, alert_rules.throttle_secs
           FROM alert_windows AS w JOIN alert_rules ON alert_rules.id = w.rule_id
           WHERE w.suppressed > 0 AND w.closes_at <= clock_timestamp()
           ORDER BY w.closes_at LIMIT $1
           FOR UPDATE OF w SKIP LOCKED"#,
        limit
    )
    .fetch_all(conn)
    .await?)
}

/// Starts a new window after a follow-up was queued: the follow-up is that window's
/// message, so what arrives in it is folded again.
pub async fn restart_window(conn: &mut PgConnection, window: &ClosedWindow) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE alert_windows SET opened_at = clock_timestamp(),
                closes_at = clock_timestamp() + make_interval(secs => $4), suppressed = 0, last_event = NULL
         WHERE rule_id = $1 AND job_id = $2 AND event = $3",
        window.rule_id,
        window.job_id.unwrap_or(0),
        window.event as AlertEvent,
        f64::from(window.throttle_secs)
    )
    .execute(conn)
    .await?;
    Ok(())
}
