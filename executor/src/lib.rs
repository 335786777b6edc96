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
pub mod fired_ahead;
pub mod firing;
pub mod hardening;
pub mod holding;
pub mod inputs;
pub mod job;
pub mod job_cache;
pub mod live_output;
pub mod liveness;
pub mod prefetch;
pub mod progress;
pub mod recorder;
pub mod registry;
pub mod run_traces;
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

/// What `connect` opens and makes. No component takes it whole: `run` gives each one the
/// handles it uses (`attempt_handles`, `claimer`, `firer`, `liveness`).
pub struct Shared {
    /// Settings.
    pub config: Config,
    /// PostgreSQL, for attempts and everything but the three loops below.
    pub pool: PgPool,
    /// The fire loop's own connection (see [`store::hot_path_pool`]).
    pub firing_pool: PgPool,
    /// The claim loop's own connection.
    pub claiming_pool: PgPool,
    /// Two connections of its own for registration and heartbeats, so that proving this
    /// executor alive never queues behind its work on `pool`.
    pub liveness_pool: PgPool,
    /// Redis locks and permits.
    pub locks: Locks,
    /// The HTTP client of HTTP jobs, with its address policy.
    pub http: job::HttpRunner,
    /// The job definitions read last, by version.
    pub job_cache: Arc<job_cache::JobCache>,
    /// Records attempts' ends in groups.
    pub recorder: recorder::Recorder,
    /// Writes shell jobs' output while they run.
    pub output: live_output::OutputWriter,
    /// Who this executor is now, and the runs it is executing.
    pub registry: Arc<registry::Registry>,
    /// Wake-ups from PostgreSQL notifications.
    pub wakeups: Arc<wakeup::Wakeups>,
    /// Execution slots (`PROBACTR_EXECUTOR_CAPACITY`) and attempts held until recorded
    /// (see [`slot::Slot`]).
    pub slots: slot::Slots,
    /// One permit per shell job (a process) running at once (`PROBACTR_EXECUTOR_PROCESSES`).
    pub processes: Arc<Semaphore>,
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
    let live = Arc::new(shared.liveness());
    liveness::register_until_done(&live, &shutdown).await;
    let attempts = Arc::new(shared.attempt_handles());
    let background = CancellationToken::new();
    let loops = [
        tokio::spawn(wakeup::listen(
            shared.pool.clone(),
            shared.wakeups.clone(),
            background.clone(),
        )),
        tokio::spawn(liveness::heartbeat_loop(live.clone(), background.clone())),
        tokio::spawn(liveness::cancel_watch_loop(live.clone(), background.clone())),
        tokio::spawn(firing::fire_loop(shared.firer(&attempts), shutdown.clone())),
        tokio::spawn(claiming::claim_loop(shared.claimer(&attempts), shutdown.clone())),
        tokio::spawn(export_lock_stats(shared.locks.clone(), background.clone())),
    ];
    shutdown.cancelled().await;
    drain(&shared, &live).await;
    background.cancel();
    for task in loops {
        let _ = task.await;
    }
    liveness::deregister(&live).await;
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
    // The fire loop, the claim loop and the recorder keep a connection each, beside the
    // `PROBACTR_DB_POOL_SIZE` shared by the rest: each then runs its statements on the
    // session that planned them.
    let hot_pool = |connections: u32| {
        store::hot_path_pool(&config.database_url, connections, config.heartbeat_timeout)
            .context("while opening the PostgreSQL pool")
    };
    let pool = hot_pool(config.db_pool_size)?;
    let firing_pool = hot_pool(1)?;
    let claiming_pool = hot_pool(1)?;
    let recording_pool = hot_pool(1)?;
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
        slots: slot::Slots::new(
            config.executor_capacity as usize,
            config.executor_prefetch as usize,
        ),
        processes: Arc::new(Semaphore::new(config.executor_processes as usize)),
        attempts: TaskTracker::new(),
        shutdown: shutdown.clone(),
        recorder: recorder::Recorder::start(recording_pool),
        output: live_output::OutputWriter::start(pool.clone(), config.output_limit, spool(&config, &pool)?),
        config,
        pool,
        firing_pool,
        claiming_pool,
        locks,
        http,
        registry: Arc::new(registry::Registry::new()),
        job_cache: Arc::default(),
        wakeups: Arc::default(),
    }))
}

impl Shared {
    /// What attempts run with.
    fn attempt_handles(&self) -> attempt::Attempts {
        let config = &self.config;
        attempt::Attempts {
            pool: self.pool.clone(),
            locks: self.locks.clone(),
            http: self.http.clone(),
            recorder: self.recorder.clone(),
            output: self.output.clone(),
            registry: self.registry.clone(),
            wakeups: self.wakeups.clone(),
            processes: self.processes.clone(),
            tracker: self.attempts.clone(),
            shutdown: self.shutdown.clone(),
            secret_keys: config.secret_keys.clone(),
            heartbeat_interval: config.heartbeat_interval,
            give_up_after: liveness::give_up_after(config.heartbeat_timeout),
            lock_lease: config.lock_lease,
            lock_start_budget: config.lock_start_budget,
            lock_retry: config.lock_retry,
        }
    }

    /// What the claim loop takes.
    fn claimer(&self, attempts: &Arc<attempt::Attempts>) -> claiming::Claimer {
        claiming::Claimer {
            pool: self.claiming_pool.clone(),
            registry: self.registry.clone(),
            locks: self.locks.clone(),
            job_cache: self.job_cache.clone(),
            slots: self.slots.clone(),
            processes: self.processes.clone(),
            wakeups: self.wakeups.clone(),
            attempts: attempts.clone(),
            capacity: self.config.executor_capacity,
            prefetch: self.config.executor_prefetch as usize,
            namespaces: self.config.executor_namespaces.clone(),
            give_up_after: liveness::give_up_after(self.config.heartbeat_timeout),
        }
    }

    /// What the fire loop takes.
    fn firer(&self, attempts: &Arc<attempt::Attempts>) -> firing::Firer {
        firing::Firer {
            pool: self.firing_pool.clone(),
            registry: self.registry.clone(),
            job_cache: self.job_cache.clone(),
            slots: self.slots.clone(),
            wakeups: self.wakeups.clone(),
            attempts: attempts.clone(),
            shutdown: self.shutdown.clone(),
            batch: i64::from(self.config.fire_batch),
            ahead: self.config.fire_ahead,
            capacity: self.config.executor_capacity,
            namespaces: self.config.executor_namespaces.clone(),
            give_up_after: liveness::give_up_after(self.config.heartbeat_timeout),
        }
    }

    /// What registration, heartbeats and the cancellation watch take.
    fn liveness(&self) -> liveness::Liveness {
        liveness::Liveness {
            liveness_pool: self.liveness_pool.clone(),
            pool: self.pool.clone(),
            registry: self.registry.clone(),
            wakeups: self.wakeups.clone(),
            shutdown: self.shutdown.clone(),
            heartbeat_interval: self.config.heartbeat_interval,
            heartbeat_timeout: self.config.heartbeat_timeout,
            capacity: self.config.executor_capacity,
            labels: self.config.executor_labels.clone(),
        }
    }
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
async fn export_lock_stats(locks: Locks, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
        let stats = locks.stats();
        metrics::counter!("probactr_lock_attempts_total").absolute(stats.attempts);
        metrics::counter!("probactr_lock_renewals_total").absolute(stats.renewals);
    }
}

/// Lets running attempts finish up to the drain timeout, then stops the rest (SIGTERM,
/// their grace, SIGKILL) and waits for them to record their end.
async fn drain(shared: &Shared, live: &liveness::Liveness) {
    let tracker = &shared.attempts;
    tracker.close();
    liveness::mark_draining(live).await;
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
