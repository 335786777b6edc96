//! Staying alive in the cluster's eyes: registration (with this executor's labels),
//! heartbeats (which also bring an operator's drain request), cancellation requests.
//!
//! An executor that cannot prove it is alive must not act as if it were: when its
//! heartbeats have failed for two thirds of the heartbeat timeout it stops its running
//! attempts, because a monitor may be about to declare it dead and re-queue them
//! elsewhere; and an attempt whose start is answered after that point does not run its
//! job ([`crate::registry::Registry::may_act`]). Silence is counted from when the last
//! stored heartbeat was sent, and every liveness statement is bounded by a timeout, so a
//! connection that hangs (a partition, a stalled proxy) counts as silence rather than
//! holding the loop. When a heartbeat finds it already declared dead, it stops everything
//! started under that identity (those runs were reaped; their writes are fenced off) and
//! registers again under a new id.

use std::sync::Arc;
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::labels::Labels;
use probactr_common::model::{ProcessRole, ProcessState};
use probactr_common::store::processes::{self, Heartbeat, Registration};
use probactr_common::store::runs;
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::registry::{Registry, StopReason};
use crate::wakeup::Wakeups;

/// What staying alive takes.
pub struct Liveness {
    /// Two connections of its own for registration and heartbeats, so that proving this
    /// executor alive never queues behind its work on `pool`.
    pub liveness_pool: PgPool,
    /// Cancellation requests and the executor's state (draining, stopped).
    pub pool: PgPool,
    /// Who this executor is now, and the runs it is executing.
    pub registry: Arc<Registry>,
    /// The claim loop waits for a proof of life after silence.
    pub wakeups: Arc<Wakeups>,
    /// Cancelled to drain when an operator asks for it.
    pub shutdown: CancellationToken,
    /// `PROBACTR_HEARTBEAT_INTERVAL`.
    pub heartbeat_interval: Duration,
    /// `PROBACTR_HEARTBEAT_TIMEOUT`.
    pub heartbeat_timeout: Duration,
    /// `PROBACTR_EXECUTOR_CAPACITY`, registered.
    pub capacity: u32,
    /// `PROBACTR_EXECUTOR_LABELS`, registered.
    pub labels: Labels,
}

/// How often running attempts are checked for cancellation requests (cancel within 1 s).
const CANCEL_POLL: Duration = Duration::from_millis(400);

/// How long one liveness statement (register, heartbeat, touch) may take: a stalled
/// connection (a partition, a hung proxy) must fail the call, not hold the loop, or the
/// executor could not notice that it can no longer prove it is alive.
fn call_timeout(live: &Liveness) -> Duration {
    live.heartbeat_interval
        .min(live.heartbeat_timeout / 3)
        .max(Duration::from_millis(100))
}

/// Registers the current identity, retrying with jitter while PostgreSQL is unreachable.
pub async fn register_until_done(live: &Liveness, stop: &CancellationToken) {
    let backoff = Backoff::FullJitter {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(5),
    };
    let mut failures = 0u32;
    loop {
        let who = registration(live, live.registry.id());
        let sent = Instant::now();
        let error = match tokio::time::timeout(
            call_timeout(live),
            processes::register(&live.liveness_pool, &who),
        )
        .await
        {
            Ok(Ok(())) => {
                live.registry.proved_alive(who.id, sent);
                tracing::info!(executor.id = %who.id, host = %who.host, pid = who.pid, capacity = who.capacity, "executor registered");
                return;
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => "timed out".to_owned(),
        };
        failures = failures.saturating_add(1);
        tracing::warn!(error, failures, "cannot register yet; retrying");
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff.delay(failures.min(10))) => {}
        }
    }
}

fn registration(live: &Liveness, id: Uuid) -> Registration {
    let mut who = Registration::this_process(ProcessRole::Executor, live.capacity as i32);
    who.id = id;
    who.labels = live.labels.clone();
    who
}

/// How long an executor may go without proving it is alive before it stops its jobs
/// and starts no more: two thirds of the heartbeat timeout, so it stops before a
/// monitor may declare it dead and re-queue its runs elsewhere.
pub fn give_up_after(heartbeat_timeout: Duration) -> Duration {
    heartbeat_timeout * 2 / 3
}

/// Heartbeats every `PROBACTR_HEARTBEAT_INTERVAL` until `stop` is cancelled.
///
/// Silence is counted from when the last heartbeat PostgreSQL stored was *sent* (the
/// database stamped it later, so a monitor cannot see it as older than that), and every
/// heartbeat is bounded by [`call_timeout`], so the running jobs are stopped at two
/// thirds of the heartbeat timeout even when the connection hangs instead of failing.
pub async fn heartbeat_loop(live: Arc<Liveness>, stop: CancellationToken) {
    let interval = live.heartbeat_interval;
    let give_up_after = give_up_after(live.heartbeat_timeout);
    let bound = call_timeout(&live);
    let mut stopped_for_silence = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let id = live.registry.id();
        let sent = Instant::now();
        let error = match tokio::time::timeout(bound, processes::heartbeat(&live.liveness_pool, id)).await {
            Ok(Ok(Heartbeat::Alive)) => {
                live.registry.proved_alive(id, sent);
                if stopped_for_silence {
                    // Claims waited for this proof; runs queued meanwhile need no poll.
                    live.wakeups.runs.notify_one();
                }
                stopped_for_silence = false;
                continue;
            }
            Ok(Ok(Heartbeat::DrainRequested)) => {
                live.registry.proved_alive(id, sent);
                stopped_for_silence = false;
                if !live.shutdown.is_cancelled() {
                    tracing::info!(executor.id = %id, "drain requested; finishing running jobs, then exiting");
                    // The same path as SIGTERM: stop claiming, let running attempts
                    // finish up to the drain timeout, stop and record the rest, exit.
                    live.shutdown.cancel();
                }
                continue;
            }
            Ok(Ok(Heartbeat::DeclaredDead)) => {
                let stopped = live.registry.stop_identity(id, StopReason::ExecutorLost);
                let new = live.registry.renew_identity();
                tracing::warn!(executor.id = %id, new_executor.id = %new.id, stopped,
                    "declared dead by a monitor; stopped its runs and registering again");
                register_until_done(&live, &stop).await;
                stopped_for_silence = false;
                continue;
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {} ms", bound.as_millis()),
        };
        let silent_for = live.registry.silent_for().unwrap_or(give_up_after);
        tracing::warn!(
            error,
            silent_ms = silent_for.as_millis() as u64,
            "heartbeat failed"
        );
        if silent_for >= give_up_after {
            // Again at every failure: an attempt started meanwhile must not run either.
            let stopped = live.registry.stop_identity(id, StopReason::ExecutorLost);
            if !stopped_for_silence {
                tracing::warn!(executor.id = %id, stopped,
                    "cannot prove this executor is alive; stopped its running jobs");
            }
            stopped_for_silence = true;
        }
    }
}

/// Stops attempts whose cancellation was requested, until `stop` is cancelled.
pub async fn cancel_watch_loop(live: Arc<Liveness>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(CANCEL_POLL) => {}
        }
        if live.registry.running_count() == 0 {
            continue;
        }
        match runs::cancel_requested(&live.pool, live.registry.id()).await {
            Ok(ids) => {
                for run_id in ids {
                    if live.registry.stop(run_id, StopReason::Cancelled) {
                        tracing::info!(run.id = run_id, "cancellation requested; stopping the job");
                    }
                }
            }
            Err(err) => tracing::debug!(error = %err, "cannot read cancellation requests"),
        }
    }
}

/// Tells the cluster this executor takes no new work.
pub async fn mark_draining(live: &Liveness) {
    if let Err(err) = processes::set_state(&live.pool, live.registry.id(), ProcessState::Draining).await {
        tracing::warn!(error = %err, "cannot mark the executor draining");
    }
}

/// Marks the executor stopped at the end of a clean shutdown.
pub async fn deregister(live: &Liveness) {
    if let Err(err) = processes::set_state(&live.pool, live.registry.id(), ProcessState::Stopped).await {
        tracing::warn!(error = %err, "cannot deregister the executor");
    }
}
