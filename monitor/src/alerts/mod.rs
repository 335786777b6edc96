//! Alerts, the monitor's part: every monitor turns outbox events into notifications and
//! delivers them. Any number of monitors share the work through row locks (`SKIP
//! LOCKED`), so each event is processed once and each notification sent by one monitor;
//! a monitor killed while it sends leaves the notification to another, which sends it
//! again under the same delivery id.

pub mod deliver;
pub mod message;
pub mod process;

use std::sync::Arc;
use std::time::Duration;

use probactr_common::store::alerts::{notifications, NOTIFICATIONS_CHANNEL};
use probactr_common::store::StoreError;
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::Monitor;
use deliver::Sender;

/// Pause between two passes over the outbox and the throttle windows.
const TICK: Duration = Duration::from_millis(500);
/// How often the capacity forecast is weighed for `capacity_shortfall` rules: it reads
/// every trigger, and its buckets are five minutes wide.
const FORECAST_EVERY: Duration = Duration::from_secs(60);
/// Notifications one monitor sends at once.
const SENDERS: usize = 3;
/// The longest pause between two attempts of a failing delivery.
const MAX_BACKOFF_SECS: f64 = 300.0;

/// Runs the alert loops until `stop` is cancelled.
pub async fn run(monitor: Arc<Monitor>, sender: Arc<Sender>, stop: CancellationToken) {
    let mut tasks = vec![
        tokio::spawn(process_loop(monitor.clone(), stop.clone())),
        tokio::spawn(conditions_loop(monitor.clone(), stop.clone())),
    ];
    let wake = Arc::new(tokio::sync::Notify::new());
    tasks.push(tokio::spawn(listen_loop(
        monitor.pool.clone(),
        wake.clone(),
        stop.clone(),
    )));
    for sender_index in 0..SENDERS {
        tasks.push(tokio::spawn(delivery_loop(
            monitor.clone(),
            sender.clone(),
            wake.clone(),
            sender_index == 0,
            stop.clone(),
        )));
    }
    for task in tasks {
        let _ = task.await;
    }
}

async fn process_loop(monitor: Arc<Monitor>, stop: CancellationToken) {
    let url = monitor.config.public_url.clone();
    loop {
        let pass = async {
            while process::process_events(&monitor.pool, &url).await? > 0 {}
            process::send_follow_ups(&monitor.pool, &url).await?;
            Ok::<_, StoreError>(())
        };
        if let Err(err) = pass.await {
            tracing::warn!(error = %err, "alert processing failed; retrying");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}

async fn conditions_loop(monitor: Arc<Monitor>, stop: CancellationToken) {
    let mut last_forecast: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(monitor.config.reap_interval) => {}
        }
        let forecast = last_forecast.is_none_or(|at| at.elapsed() >= FORECAST_EVERY);
        if forecast {
            last_forecast = Some(tokio::time::Instant::now());
        }
        match process::evaluate_conditions(&monitor.pool, forecast).await {
            Ok(0) => {}
            Ok(raised) => tracing::info!(raised, "alert conditions raised"),
            Err(err) => tracing::warn!(error = %err, "alert conditions could not be evaluated"),
        }
    }
}

/// Wakes the senders when a notification is queued (a channel test waits for it).
async fn listen_loop(pool: PgPool, wake: Arc<tokio::sync::Notify>, stop: CancellationToken) {
    loop {
        let listener = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(NOTIFICATIONS_CHANNEL).await?;
            loop {
                listener.recv().await?;
                wake.notify_waiters();
            }
            #[allow(unreachable_code)]
            Ok::<(), sqlx::Error>(())
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            result = listener => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "notification listener lost; reconnecting");
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// How often the senders but the first look at the outbox unwoken: should the first be
/// held up by a receiver that does not answer, retries coming due still go out.
const QUIET_SENDER_TICK: Duration = Duration::from_secs(5);

/// One sender: delivers due notifications until none is left, then waits to be woken
/// (a notification queued) or for its tick. Retries coming due (and a wake-up lost with
/// the listener's connection) are found by the ticks: the `polling` sender's every
/// [`TICK`], which wakes the others when it finds one due to share the rest, and the
/// others' every [`QUIET_SENDER_TICK`]. An idle cluster's senders so cost one look a
/// tick, not one each.
async fn delivery_loop(
    monitor: Arc<Monitor>,
    sender: Arc<Sender>,
    wake: Arc<tokio::sync::Notify>,
    polling: bool,
    stop: CancellationToken,
) {
    let retry_for = monitor.config.alert_retry_for.as_secs_f64();
    let tick = if polling { TICK } else { QUIET_SENDER_TICK };
    loop {
        let woken = wake.notified();
        let mut shared = !polling;
        loop {
            match deliver_one(&monitor.pool, &sender, retry_for).await {
                Ok(true) if !shared => {
                    shared = true;
                    wake.notify_waiters();
                }
                Ok(true) => {}
                Ok(false) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "alert delivery pass failed; retrying");
                    break;
                }
            }
            if stop.is_cancelled() {
                return;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = woken => {}
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

/// Sends the oldest due notification, holding it locked until its attempt is recorded;
/// false when none is due.
async fn deliver_one(pool: &PgPool, sender: &Sender, retry_for_secs: f64) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    let Some(delivery) = notifications::take_due(&mut tx).await? else {
        tx.commit().await?;
        return Ok(false);
    };
    match sender.send(&delivery).await {
        Ok(()) => {
            notifications::record_sent(&mut tx, delivery.id).await?;
            tracing::info!(notification.id = delivery.id, delivery.id = %delivery.delivery_id,
                channel = %delivery.channel_name, event = %delivery.event, attempt = delivery.attempts + 1,
                "alert delivered");
        }
        Err(error) => {
            let state =
                notifications::record_failure(&mut tx, delivery.id, &error, retry_for_secs, MAX_BACKOFF_SECS)
                    .await?;
            tracing::warn!(notification.id = delivery.id, delivery.id = %delivery.delivery_id,
                channel = %delivery.channel_name, event = %delivery.event, attempt = delivery.attempts + 1,
                %error, %state, "alert delivery failed");
        }
    }
    tx.commit().await?;
    Ok(true)
}
