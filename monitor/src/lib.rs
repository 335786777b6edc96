//! probactr's monitor: finds executors whose heartbeat stopped and reaps them.
//!
//! Any number of monitors can run; they coordinate only through conditional statements
//! in PostgreSQL, so none reaps an executor or re-queues a run twice. Each monitor:
//!
//! - registers and heartbeats like an executor (role `monitor`), so the admin shows it;
//! - every `PROBACTR_REAP_INTERVAL` runs one [`reaper::reap_once`] pass: declare silent
//!   executors dead, abandon their runs, release their locks by token, re-queue retries,
//!   and do the housekeeping (stuck and stale runs, history retention);
//! - every few seconds, apart from the passes, vacuums and analyzes the live runs once
//!   they changed;
//! - turns alert events into notifications and delivers them ([`alerts`]);
//! - records the instants that were due and never fired nor recorded, and feeds
//!   backfills into the queue ([`reconciler`]);
//! - releases the runs waiting for another job once it succeeded, and fails the ones
//!   that waited too long ([`upstream`]).
//!
//! A monitor that cannot reach PostgreSQL backs off with jitter and keeps trying.
//!
//! # Whose clock
//!
//! Deadness is judged by PostgreSQL's clock alone: executors stamp `last_heartbeat_at`
//! with the database's `now()`, and [`reaper::reap_once`] declares dead with
//! `last_heartbeat_at < now() - timeout` in the same database. A monitor's own wall clock
//! never enters the comparison, so monitors and executors with skewed clocks agree on
//! who is dead (the fault suite runs a monitor two hours behind and an executor two
//! hours ahead to check it). The local clock only paces the reap loop (a monotonic
//! sleep), which decides how soon a dead executor is noticed, never whether it is dead.

pub mod alerts;
pub mod reaper;
pub mod reconciler;
pub mod upstream;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use probactr_common::archive::OutputArchive;
use probactr_common::backoff::Backoff;
use probactr_common::config::Config;
use probactr_common::lock::Locks;
use probactr_common::model::{ProcessRole, ProcessState};
use probactr_common::reach;
use probactr_common::store::{self, housekeeping, processes};
use sqlx::PgPool;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// What a monitor's loops share.
pub struct Monitor {
    /// Settings.
    pub config: Config,
    /// PostgreSQL, for the loops but the reap pass.
    pub pool: PgPool,
    /// The reap pass's own connection ([`store::hot_path_pool`]).
    pub reap_pool: PgPool,
    /// Redis, to release dead executors' locks.
    pub locks: Locks,
    /// This monitor's registered id (renewed if it is itself declared dead).
    pub id: Mutex<Uuid>,
    /// The output archive (`PROBACTR_OUTPUT_ARCHIVE`), whose objects retention deletes.
    pub archive: Option<OutputArchive>,
    /// When a reap pass last deleted the history past retention (see `reaper::prune_every`).
    pub pruned_at: std::sync::Mutex<Option<Instant>>,
}

/// Runs a monitor until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    probactr_common::telemetry::install_metrics(config.metrics_listen);
    let keys = config
        .secret_keys
        .clone()
        .context("PROBACTR_SECRET_KEY is not set: monitors open the secrets of alert channels")?;
    let sender = Arc::new(alerts::deliver::Sender::new(&config, keys)?);
    if !reach::postgres(&config.database_url, config.connect_timeout, &shutdown).await?
        || !reach::redis(&config.redis_url, config.connect_timeout, &shutdown).await?
    {
        return Ok(());
    }
    // Vacuuming, heartbeats, alert processing and senders each hold a connection; the
    // reap pass and the release of waiting runs, the loops with the most statements,
    // keep one each beside it.
    let pool = store::pool(&config.database_url, config.db_pool_size.min(8))
        .context("while opening the PostgreSQL pool")?;
    let loop_pool = || {
        store::hot_path_pool(&config.database_url, 1, config.heartbeat_timeout)
            .context("while opening the PostgreSQL pool")
    };
    let reap_pool = loop_pool()?;
    let upstream_pool = loop_pool()?;
    let Some(locks) = Locks::connect_patiently(&config.redis_url, &config.redis_prefix, &shutdown)
        .await
        .context("while connecting to Redis")?
    else {
        return Ok(());
    };
    let archive = config
        .output_archive
        .as_ref()
        .map(OutputArchive::new)
        .transpose()
        .context("PROBACTR_OUTPUT_ARCHIVE")?;
    let monitor = Arc::new(Monitor {
        archive,
        config,
        pool,
        reap_pool,
        locks,
        id: Mutex::new(Uuid::new_v4()),
        pruned_at: std::sync::Mutex::new(None),
    });
    register(&monitor, &shutdown).await;
    let heartbeat = tokio::spawn(heartbeat_loop(monitor.clone(), shutdown.clone()));
    let vacuum = tokio::spawn(vacuum_loop(monitor.clone(), shutdown.clone()));
    let alerting = tokio::spawn(alerts::run(monitor.clone(), sender, shutdown.clone()));
    let reconciling = tokio::spawn(reconciler::run(monitor.pool.clone(), shutdown.clone()));
    let waiting = tokio::spawn(upstream::run(upstream_pool, shutdown.clone()));
    reap_loop(&monitor, &shutdown).await;
    let _ = heartbeat.await;
    let _ = vacuum.await;
    let _ = alerting.await;
    let _ = reconciling.await;
    let _ = waiting.await;
    let id = *monitor.id.lock().await;
    if let Err(err) = processes::set_state(&monitor.pool, id, ProcessState::Stopped).await {
        tracing::warn!(error = %err, "cannot deregister the monitor");
    }
    tracing::info!(monitor.id = %id, "monitor stopped");
    Ok(())
}

fn jitter() -> Backoff {
    Backoff::FullJitter {
        base: Duration::from_millis(200),
        cap: Duration::from_secs(10),
    }
}

async fn register(monitor: &Monitor, stop: &CancellationToken) {
    let mut failures = 0u32;
    loop {
        let mut who = processes::Registration::this_process(ProcessRole::Monitor, 0);
        who.id = *monitor.id.lock().await;
        match processes::register(&monitor.pool, &who).await {
            Ok(()) => {
                tracing::info!(monitor.id = %who.id, host = %who.host, pid = who.pid, "monitor registered");
                return;
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %err, failures, "cannot register yet; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(jitter().delay(failures.min(10))) => {}
                }
            }
        }
    }
}

async fn heartbeat_loop(monitor: Arc<Monitor>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(monitor.config.heartbeat_interval) => {}
        }
        let id = *monitor.id.lock().await;
        match processes::heartbeat(&monitor.pool, id).await {
            // Only executors are asked to drain.
            Ok(processes::Heartbeat::Alive | processes::Heartbeat::DrainRequested) => {}
            Ok(processes::Heartbeat::DeclaredDead) => {
                let new = Uuid::new_v4();
                *monitor.id.lock().await = new;
                tracing::warn!(monitor.id = %id, new_monitor.id = %new, "declared dead; registering again");
                register(&monitor, &stop).await;
            }
            Err(err) => tracing::warn!(error = %err, "heartbeat failed"),
        }
    }
}

/// Runs reap passes until `stop` is cancelled.
///
/// Silence is only evidence against an executor if the database was there to hear it:
/// after PostgreSQL was unreachable (a restart, a failover, this monitor's own network)
/// every heartbeat looks old, and declaring on that evidence would reap every live
/// executor at once. So a monitor declares executors dead only once it has been in
/// steady contact with PostgreSQL for a whole heartbeat timeout (since it started, or
/// since a pass failed or took that long), which gives every live executor the time to
/// heartbeat again first. Everything else a pass does runs at once.
async fn reap_loop(monitor: &Monitor, stop: &CancellationToken) {
    let timeout = monitor.config.heartbeat_timeout;
    let mut failures = 0u32;
    let mut contact_since: Option<Instant> = None;
    loop {
        let started = Instant::now();
        let may_declare = contact_since.is_some_and(|since| since.elapsed() >= timeout);
        let pause =
            match reaper::reap_once(monitor, may_declare).await {
                Ok(report) => {
                    failures = 0;
                    if !report.is_quiet() {
                        tracing::info!(?report, "reap pass");
                    }
                    if contact_since.is_none() || started.elapsed() >= timeout {
                        if contact_since.is_some() {
                            tracing::warn!(took_ms = started.elapsed().as_millis() as u64,
                            "reap pass was slow; waiting a heartbeat timeout before declaring anyone dead");
                        }
                        contact_since = Some(Instant::now());
                    }
                    monitor.config.reap_interval
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    contact_since = None;
                    tracing::warn!(error = %err, failures, "reap pass failed; backing off");
                    jitter().delay(failures.min(10)).max(Duration::from_millis(100))
                }
            };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Pause between two vacuums of the live runs.
const VACUUM_EVERY: Duration = Duration::from_secs(5);

/// Vacuums and analyzes the live runs every few seconds once they changed, and analyzes
/// today's ended runs when they have grown (see `housekeeping::vacuum_live_runs` and
/// `housekeeping::analyze_todays_history`), apart from the reap passes: on a large backlog a vacuum
/// takes seconds, and a reap pass that slow would hold off declaring executors dead.
async fn vacuum_loop(monitor: Arc<Monitor>, stop: CancellationToken) {
    let mut warned = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(VACUUM_EVERY) => {}
        }
        let started = Instant::now();
        match housekeeping::vacuum_live_runs(&monitor.pool).await {
            Ok(true) => tracing::debug!(
                took_ms = started.elapsed().as_millis() as u64,
                "live runs vacuumed"
            ),
            Ok(false) => {}
            // Not owning the table (a monitor under another role) only costs speed.
            Err(err) if !warned => {
                warned = true;
                tracing::warn!(error = %err, "cannot vacuum the live runs; autovacuum alone will");
            }
            Err(_) => {}
        }
        match housekeeping::analyze_todays_history(&monitor.pool).await {
            Ok(Some(partition)) => tracing::debug!(%partition, "today's ended runs analyzed"),
            Ok(None) => {}
            Err(err) => tracing::debug!(error = %err, "cannot analyze today's ended runs"),
        }
    }
}
