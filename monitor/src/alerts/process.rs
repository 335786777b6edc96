//! Turning events into notifications: match each outbox event against the enabled rules,
//! count it in its throttle window, and queue one message per channel when it opens a
//! window; send the follow-ups of windows that closed with folded events; evaluate the
//! conditions that are not one state change.

use probactr_common::capacity;
use probactr_common::model::AlertEvent;
use probactr_common::store::alerts::conditions::{self, DurationWatch};
use probactr_common::store::alerts::notifications::{self, NewNotification};
use probactr_common::store::alerts::outbox::{self, OutboxEvent};
use probactr_common::store::alerts::rules::{self, Rule};
use probactr_common::store::StoreError;
use serde_json::json;
use sqlx::{PgConnection, PgPool};

use super::message;

/// Events taken per transaction.
const BATCH: i64 = 200;
/// Failures in a row that raise `consecutive_failures` when a rule sets no threshold.
const DEFAULT_THRESHOLD: i32 = 3;
/// `run_too_long` when a rule sets no duration.
const DEFAULT_TOO_LONG_SECS: i32 = 3600;
/// `no_success_within` when a rule sets no duration.
const DEFAULT_NO_SUCCESS_SECS: i32 = 86_400;
/// How far ahead `capacity_shortfall` looks when a rule sets no duration.
const DEFAULT_SHORTFALL_AHEAD_SECS: i32 = 3600;

/// Processes one batch of outbox events; returns how many it took.
pub async fn process_events(pool: &PgPool, public_url: &str) -> Result<usize, StoreError> {
    let mut tx = pool.begin().await?;
    let events = outbox::take(&mut tx, BATCH).await?;
    if events.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    let rules = rules::enabled(&mut *tx).await?;
    for event in &events {
        handle(&mut tx, &rules, event, public_url).await?;
    }
    let ids: Vec<i64> = events.iter().map(|event| event.id).collect();
    outbox::remove(&mut tx, &ids).await?;
    tx.commit().await?;
    Ok(events.len())
}

async fn handle(
    conn: &mut PgConnection,
    rules: &[Rule],
    event: &OutboxEvent,
    public_url: &str,
) -> Result<(), StoreError> {
    for rule in rules.iter().filter(|rule| concerns(rule, event)) {
        notify(conn, rule, event, public_url).await?;
    }
    if event.event == AlertEvent::RunFailed {
        if let Some(job_id) = event.job_id {
            for rule in rules.iter().filter(|rule| {
                rule.watches(
                    AlertEvent::ConsecutiveFailures,
                    Some(job_id),
                    event.job_namespace.as_deref(),
                )
            }) {
                raise_failures_in_a_row(conn, rule, event, job_id, public_url).await?;
            }
        }
    }
    Ok(())
}

/// Whether an event concerns a rule: the rule it names, or any rule watching it.
fn concerns(rule: &Rule, event: &OutboxEvent) -> bool {
    match event.rule_id {
        Some(id) => id == rule.id && rule.listens_for(event.event),
        None => rule.watches(event.event, event.job_id, event.job_namespace.as_deref()),
    }
}

async fn raise_failures_in_a_row(
    conn: &mut PgConnection,
    rule: &Rule,
    event: &OutboxEvent,
    job_id: i64,
    public_url: &str,
) -> Result<(), StoreError> {
    let threshold = rule.fields.threshold.unwrap_or(DEFAULT_THRESHOLD);
    let failures = conditions::failures_in_a_row(&mut *conn, job_id).await?;
    if failures < i64::from(threshold) {
        return Ok(());
    }
    if !conditions::raise(
        conn,
        rule.id,
        AlertEvent::ConsecutiveFailures.as_str(),
        job_id,
        event.occurred_at,
    )
    .await?
    {
        return Ok(());
    }
    let mut detail = event.detail.clone();
    detail["failures"] = json!(failures);
    detail["threshold"] = json!(threshold);
    let derived = OutboxEvent {
        event: AlertEvent::ConsecutiveFailures,
        detail,
        ..event.clone()
    };
    notify(conn, rule, &derived, public_url).await
}

/// Counts the event in the rule's window and queues its messages if it opens one; a
/// failure also marks the job failing for the rule's `recovered`.
async fn notify(
    conn: &mut PgConnection,
    rule: &Rule,
    event: &OutboxEvent,
    public_url: &str,
) -> Result<(), StoreError> {
    let payload = message::for_event(event, rule, public_url);
    let opened = outbox::open_or_fold(
        conn,
        rule.id,
        event.job_id,
        event.event,
        rule.fields.throttle_secs,
        &payload,
    )
    .await?;
    if opened {
        let ids = notifications::queue(
            conn,
            &rule.fields.channel_ids,
            &NewNotification {
                rule_id: Some(rule.id),
                event: event.event.as_str(),
                job_id: event.job_id,
                run_id: event.run_id,
                suppressed: 0,
                payload: &payload,
            },
        )
        .await?;
        tracing::info!(rule.id = rule.id, event = %event.event, job.id = ?event.job_id, run.id = ?event.run_id,
            notifications = ?ids, "alert raised");
    } else {
        tracing::debug!(rule.id = rule.id, event = %event.event, job.id = ?event.job_id, run.id = ?event.run_id,
            "alert folded into its throttle window");
    }
    if event.event.is_failure() && rule.listens_for(AlertEvent::Recovered) {
        if let Some(job_id) = event.job_id {
            conditions::raise(conn, rule.id, "failing", job_id, event.occurred_at).await?;
        }
    }
    Ok(())
}

/// Queues the follow-ups of throttle windows that closed with folded events; returns how
/// many windows it handled.
pub async fn send_follow_ups(pool: &PgPool, public_url: &str) -> Result<usize, StoreError> {
    let mut tx = pool.begin().await?;
    let windows = outbox::take_closed_windows(&mut tx, BATCH).await?;
    if windows.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    let rules = rules::list(&mut *tx).await?;
    for window in &windows {
        // A disabled rule's window is restarted without a message: it raises nothing.
        if let Some(rule) = rules
            .iter()
            .find(|rule| rule.id == window.rule_id && rule.fields.enabled)
        {
            let payload = message::for_follow_up(window, rule, public_url);
            let ids = notifications::queue(
                &mut tx,
                &rule.fields.channel_ids,
                &NewNotification {
                    rule_id: Some(rule.id),
                    event: window.event.as_str(),
                    job_id: window.job_id,
                    run_id: payload.pointer("/run/id").and_then(serde_json::Value::as_i64),
                    suppressed: window.suppressed,
                    payload: &payload,
                },
            )
            .await?;
            tracing::info!(rule.id = rule.id, event = %window.event, job.id = ?window.job_id,
                suppressed = window.suppressed, notifications = ?ids, "alert follow-up raised");
        }
        outbox::restart_window(&mut tx, window).await?;
    }
    tx.commit().await?;
    Ok(windows.len())
}

/// Evaluates the conditions of every enabled rule, then ends what successes and live
/// executors ended; returns how many occurrences it raised. The capacity forecast is
/// weighed only when `forecast` is true (it reads every trigger: the caller spaces it).
pub async fn evaluate_conditions(pool: &PgPool, forecast: bool) -> Result<u64, StoreError> {
    let mut raised = 0;
    for rule in rules::enabled(pool).await? {
        for &event in &rule.fields.events {
            raised += match event {
                AlertEvent::RunTooLong => {
                    conditions::raise_runs_too_long(pool, duration_watch(&rule, DEFAULT_TOO_LONG_SECS))
                        .await?
                }
                AlertEvent::NoSuccessWithin => {
                    let watch = duration_watch(&rule, DEFAULT_NO_SUCCESS_SECS);
                    conditions::raise_no_success_within(pool, watch).await?
                }
                AlertEvent::NoExecutor => conditions::raise_no_executor(pool, rule.id).await?,
                AlertEvent::CapacityShortfall if forecast => capacity_shortfall(pool, &rule).await?,
                _ => 0,
            };
        }
    }
    raised += conditions::recover(pool).await?;
    conditions::clear_ended(pool).await?;
    Ok(raised)
}

/// What `rule` watches for a duration condition, `default_secs` when it names none.
fn duration_watch(rule: &Rule, default_secs: i32) -> DurationWatch {
    DurationWatch {
        rule_id: rule.id,
        job_id: rule.fields.job_id,
        duration_secs: rule.fields.duration_secs.unwrap_or(default_secs),
    }
}

/// Raises the rule's `capacity_shortfall` when the forecast of its namespace's jobs sees a
/// bucket over capacity within `duration_secs` ahead, and ends it when none is.
async fn capacity_shortfall(pool: &PgPool, rule: &Rule) -> Result<u64, StoreError> {
    let ahead = chrono::TimeDelta::seconds(i64::from(
        rule.fields.duration_secs.unwrap_or(DEFAULT_SHORTFALL_AHEAD_SECS),
    ));
    let now = probactr_common::store::db_now(pool).await?;
    let from = capacity::bucket_start(now);
    // Whole hours covering the look-ahead from the current bucket's start.
    let hours = ((now + ahead - from).num_seconds() + 3599) / 3600;
    let only = [rule.namespace.clone()];
    let forecast = capacity::forecast(pool, Some(&only), from, hours).await?;
    match forecast.first_shortfall(now + ahead) {
        Some(shortfall) => {
            let detail = serde_json::to_value(&shortfall).unwrap_or_default();
            let raised = conditions::raise_capacity_shortfall(pool, rule.id, &detail).await?;
            if raised > 0 {
                tracing::info!(rule.id = rule.id, start = %shortfall.start, demand = shortfall.demand,
                    capacity = shortfall.capacity, "capacity shortfall ahead");
            }
            Ok(raised)
        }
        None => {
            conditions::end_capacity_shortfall(pool, rule.id).await?;
            Ok(0)
        }
    }
}
