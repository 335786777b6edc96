//! probactr's executor: fires due triggers and runs jobs under locks.
//!
//! Any number of executors run side by side without a leader. Each one:
//!
//! 1. keeps one PostgreSQL listener that wakes it when triggers change or runs are
//!    queued ([`wakeup`]);
//! 2. sleeps until the earliest `next_fire_at`, then fires due triggers in batches, one
//!    transaction per batch, skipping rows other executors hold ([`firing`]), holding
//!    back the instants calendars and maintenance windows skip ([`holding`]);
//! 3. claims queued runs up to its capacity ([`claiming`]) and runs each as an attempt
//!    ([`attempt`]): Redis lock or permit, fencing token, the job itself ([`job`]) with
//!    lease renewal and a stop point, its output written as it prints ([`live_output`]),
//!    and a completion write that retries until stored;
//! 4. heartbeats, watches for cancellation requests, and stops its runs when it can no
//!    longer prove it is alive ([`liveness`]).
//!
//! Jobs cannot reach the executor's keys: it scrubs its secret settings from its
//! environment and makes itself non-dumpable before it starts ([`hardening`]), may run
//! jobs under another account ([`job::account`]), and gives each shell attempt a fresh
//! private directory ([`workdir`]).
//!
//! SIGTERM drains: stop claiming, let running attempts finish up to the drain timeout,
//! stop the rest, record them, release locks, deregister. So does a drain requested
//! through the API (`POST /api/v1/executors/{id}/drain`), which the next heartbeat
//! brings; a cordon (the claim checks it) only stops new claims.

pub mod archive;
pub mod attempt;
pub mod checkpoint;
pub mod claiming;
pub mod firing;
pub mod hardening;
pub mod holding;
pub mod inputs;
pub mod job;
pub mod job_cache;
pub mod live_output;
pub mod liveness;
pub mod progress;
pub mod recorder;
pub mod registry;
pub mod secrets;
pub mod slot;
pub mod wakeup;
pub mod workdir;
pub mod workflow_firing;

use std::sync::Arc;

use anyhow::Context;
use probactr_common::config::Config;
use probactr_common::lock::Locks;
use probactr_common::{reach, store};
use sqlx::PgPool;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What every part of an executor shares.
pub struct Shared {
    /// Settings.
    pub config: Config,
    /// PostgreSQL.
    pub pool: PgPool,
    /// Two connections of its own for registration and heartbeats, so that proving this
    /// executor alive never queues behind its work on `pool`.
    pub liveness_pool: PgPool,
    /// Redis locks and permits.
    pub locks: Locks,
    /// The HTTP client of HTTP jobs, with its address policy.
    pub http: job::HttpRunner,
    /// The job definitions read last, by version.
    pub job_cache: job_cache::JobCache,
    /// Records attempts' ends in groups.
    pub recorder: recorder::Recorder,
    /// Writes shell jobs' output while they run.
    pub output: live_output::OutputWriter,
    /// Who this executor is now, and the runs it is executing.
    pub registry: registry::Registry,
    /// Wake-ups from PostgreSQL notifications.
    pub wakeups: wakeup::Wakeups,
    /// One permit per run this executor may execute at once (`PROBACTR_EXECUTOR_CAPACITY`).
    pub capacity: Arc<Semaphore>,
    /// One permit per shell job (a process) running at once (`PROBACTR_EXECUTOR_PROCESSES`).
    pub processes: Arc<Semaphore>,
    /// One permit per attempt held until its end is recorded (see [`slot::Slot`]).
    pub unrecorded: Arc<Semaphore>,
    /// The running attempts, so shutdown can wait for them.
    pub attempts: TaskTracker,
    /// Cancelled when the executor starts shutting down.
    pub shutdown: CancellationToken,
}

/// Runs an executor until `shutdown` is cancelled, then drains and returns.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    probactr_common::telemetry::install_metrics(config.metrics_listen);
    let Some(shared) = connect(config, &shutdown).await? else {
        return Ok(());
    };
    let shared = Arc::new(shared);
    liveness::register_until_done(&shared, &shutdown).await;
    let background = CancellationToken::new();
    let loops = [
        tokio::spawn(wakeup::listen(shared.clone(), background.clone())),
        tokio::spawn(liveness::heartbeat_loop(shared.clone(), background.clone())),
        tokio::spawn(liveness::cancel_watch_loop(shared.clone(), background.clone())),
        tokio::spawn(firing::fire_loop(shared.clone(), shutdown.clone())),
        tokio::spawn(claiming::claim_loop(shared.clone())),
        tokio::spawn(export_lock_stats(shared.clone(), background.clone())),
    ];
    shutdown.cancelled().await;
    drain(&shared).await;
    background.cancel();
    for task in loops {
        let _ = task.await;
    }
    liveness::deregister(&shared).await;
    tracing::info!(executor.id = %shared.registry.id(), "executor stopped");
    Ok(())
}

/// Waits for PostgreSQL and Redis to answer (within `PROBACTR_CONNECT_TIMEOUT`), then
/// opens both; None when shutdown came first.
async fn connect(config: Config, shutdown: &CancellationToken) -> anyhow::Result<Option<Shared>> {
    if !reach::postgres(&config.database_url, config.connect_timeout, shutdown).await?
        || !reach::redis(&config.redis_url, config.connect_timeout, shutdown).await?
    {
        return Ok(None);
    }
    let pool = store::hot_path_pool(&config.database_url, config.db_pool_size)
        .context("while opening the PostgreSQL pool")?;
    let Some(locks) = Locks::connect_patiently(&config.redis_url, &config.redis_prefix, shutdown)
        .await
        .context("while connecting to Redis")?
    else {
        return Ok(None);
    };
    let policy = job::HttpPolicy::from_lists(&config.http_allow, &config.http_deny)
        .map_err(|err| anyhow::anyhow!("PROBACTR_HTTP_ALLOW/PROBACTR_HTTP_DENY: {err}"))?;
    let http = job::HttpRunner::new(policy).context("while building the HTTP client")?;
    let liveness_pool =
        store::pool(&config.database_url, 2).context("while opening the heartbeat connections")?;
    Ok(Some(Shared {
        liveness_pool,
        capacity: Arc::new(Semaphore::new(config.executor_capacity as usize)),
        processes: Arc::new(Semaphore::new(config.executor_processes as usize)),
        unrecorded: Arc::new(Semaphore::new(
            config.executor_capacity as usize * slot::UNRECORDED_PER_SLOT,
        )),
        attempts: TaskTracker::new(),
        shutdown: shutdown.clone(),
        recorder: recorder::Recorder::start(pool.clone()),
        output: live_output::OutputWriter::start(pool.clone(), config.output_limit, spool(&config, &pool)?),
        config,
        pool,
        locks,
        http,
        registry: registry::Registry::new(),
        job_cache: job_cache::JobCache::default(),
        wakeups: wakeup::Wakeups::default(),
    }))
}

/// The output archive's spool and uploader, when `PROBACTR_OUTPUT_ARCHIVE` is set.
fn spool(config: &Config, pool: &sqlx::PgPool) -> anyhow::Result<Option<archive::Spool>> {
    let Some(location) = &config.output_archive else {
        return Ok(None);
    };
    let client = probactr_common::archive::OutputArchive::new(location).context("PROBACTR_OUTPUT_ARCHIVE")?;
    let spool =
        archive::Spool::start(config.output_spool.clone(), client, pool.clone()).with_context(|| {
            format!(
                "PROBACTR_OUTPUT_SPOOL: cannot create {}",
                config.output_spool.display()
            )
        })?;
    tracing::info!(bucket = %location.bucket, prefix = %location.prefix, "archiving runs' output");
    Ok(Some(spool))
}

/// Publishes the Redis lock counters as metrics once a second (attempts per acquisition
/// is the figure that shows whether retries collide).
async fn export_lock_stats(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
        let stats = shared.locks.stats();
        metrics::counter!("probactr_lock_attempts_total").absolute(stats.attempts);
        metrics::counter!("probactr_lock_renewals_total").absolute(stats.renewals);
    }
}

/// Lets running attempts finish up to the drain timeout, then stops the rest (SIGTERM,
/// their grace, SIGKILL) and waits for them to record their end.
async fn drain(shared: &Shared) {
    let tracker = &shared.attempts;
    tracker.close();
    liveness::mark_draining(shared).await;
    let running = shared.registry.running_count();
    tracing::info!(running, timeout = ?shared.config.drain_timeout, "draining");
    if tokio::time::timeout(shared.config.drain_timeout, tracker.wait())
        .await
        .is_err()
    {
        let grace = shared.registry.longest_grace();
        let stopped = shared.registry.stop_all(registry::StopReason::Shutdown);
        tracing::warn!(stopped, grace = ?grace, "drain timeout reached; stopping running jobs");
        if tokio::time::timeout(grace + std::time::Duration::from_secs(15), tracker.wait())
            .await
            .is_err()
        {
            tracing::error!("attempts did not record their end in time after being stopped");
        }
    }
}
