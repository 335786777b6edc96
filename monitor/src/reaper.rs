//! One reaping pass: the decisions a monitor takes every `PROBACTR_REAP_INTERVAL`.
//!
//! 1. Declare dead the executors silent for longer than `PROBACTR_HEARTBEAT_TIMEOUT`
//!    (by the database's clock; one conditional UPDATE, so one monitor per executor).
//! 2. Abandon the running runs of dead executors ("executor lost"), queue their retries
//!    where the job's policy allows, and release their locks by their own tokens so the
//!    next owner need not wait for the lease.
//! 3. Return claims that never started to the queue.
//! 4. Housekeeping: ask live executors to stop runs past `timeout + grace`, abandon the
//!    ones still running a grace later, mark missed the queued runs that waited past
//!    their trigger's misfire threshold, prune history older than `PROBACTR_RETENTION`
//!    (runs, then the output chunks of runs gone; at most every [`prune_every`]).
//!
//! Steps 2–4 look at every dead executor, not only the ones this pass declared, so a
//! monitor that died between declaring and reaping leaves nothing behind.

use std::time::Duration;

use probactr_common::lock::Lease;
use probactr_common::store::alerts::notifications;
use probactr_common::store::housekeeping;
use probactr_common::store::idempotency;
use probactr_common::store::retry::retry_transient;
use probactr_common::store::run_inputs;
use probactr_common::store::runs::{self, EndedRun};
use probactr_common::store::{
    archived_outputs, checkpoints, processes, run_output, run_progress, services, StoreError,
};

use crate::Monitor;
use probactr_common::archive::OutputArchive;

/// Rows deleted per retention statement.
const PRUNE_BATCH: i64 = 1000;
/// How long a run may stay claimed before it is returned to the queue. A claim moves
/// on within the lock start budget (plus a round trip or two); one that stays is an
/// orphan — typically a claim committed while its answer was lost, so its executor
/// never learnt of it — and it blocks its job's queue. Returning a claim whose executor
/// is still about to start it is safe: the start is conditional on the claim and finds
/// it gone.
fn stale_claim(config: &probactr_common::config::Config) -> Duration {
    (config.lock_start_budget * 4 + config.heartbeat_timeout * 2).max(Duration::from_secs(10))
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReapReport {
    /// Executors declared dead by this monitor.
    pub declared_dead: usize,
    /// Runs abandoned (dead executor, or stuck past their timeout).
    pub abandoned: usize,
    /// Retries queued for them.
    pub requeued: usize,
    /// Locks and permits released by token.
    pub locks_released: usize,
    /// Claims returned to the queue.
    pub claims_returned: usize,
    /// Overdue runs whose executor was asked to stop them.
    pub overdue_flagged: usize,
    /// Queued runs marked missed (past their misfire threshold), or skipped (beyond
    /// what their job's rate starts in time).
    pub expired: usize,
    /// History rows deleted.
    pub pruned: u64,
}

impl ReapReport {
    /// True when the pass changed nothing.
    pub fn is_quiet(&self) -> bool {
        *self == ReapReport::default()
    }
}

/// Runs one pass; executors are declared dead only when `declare` (see the reap loop in
/// the crate root: not until this monitor has heard the database for a heartbeat timeout).
pub async fn reap_once(monitor: &Monitor, declare: bool) -> Result<ReapReport, StoreError> {
    let config = &monitor.config;
    let monitor_id = *monitor.id.lock().await;
    let mut report = ReapReport::default();

    let dead = if declare {
        retry_transient("declare dead executors", || {
            processes::declare_dead(&monitor.reap_pool, monitor_id, config.heartbeat_timeout)
        })
        .await?
    } else {
        Vec::new()
    };
    for executor_id in &dead {
        tracing::warn!(executor.id = %executor_id, monitor.id = %monitor_id, "executor declared dead: heartbeat silent");
    }
    report.declared_dead = dead.len();

    let orphans = retry_transient("abandon orphans", || runs::abandon_orphans(&monitor.reap_pool)).await?;
    settle(monitor, &orphans, "executor lost", &mut report).await;

    let returned = retry_transient("requeue stale claims", || {
        runs::requeue_stale_claims(&monitor.reap_pool, stale_claim(config))
    })
    .await?;
    for run_id in &returned {
        tracing::info!(run.id = run_id, "claim that never started returned to the queue");
    }
    report.claims_returned = returned.len();

    let grace = config.heartbeat_timeout + config.reap_interval;
    let overdue = retry_transient("flag overdue runs", || {
        runs::flag_overdue(&monitor.reap_pool, grace)
    })
    .await?;
    for run_id in &overdue {
        tracing::warn!(
            run.id = run_id,
            "run overdue past its timeout; asked its executor to stop it"
        );
    }
    report.overdue_flagged = overdue.len();
    let stuck = retry_transient("abandon stuck runs", || {
        runs::abandon_stuck(&monitor.reap_pool, grace)
    })
    .await?;
    settle(monitor, &stuck, "stuck past its timeout", &mut report).await;

    let expired = retry_transient("expire stale queued runs", || {
        runs::expire_stale_queued(&monitor.reap_pool)
    })
    .await?;
    for run_id in &expired {
        tracing::info!(
            run.id = run_id,
            "queued run missed: waited past its trigger's misfire threshold"
        );
    }
    report.expired = expired.len();
    let skipped = retry_transient("bound rated queues", || {
        runs::skip_beyond_rate(&monitor.reap_pool)
    })
    .await?;
    for run_id in &skipped {
        tracing::info!(
            run.id = run_id,
            "queued run skipped: more runs wait ahead than its job's rate starts in time"
        );
    }
    report.expired += skipped.len();

    reroute(monitor).await?;
    keep_services(monitor).await?;

    if prune_due(monitor) {
        report.pruned = prune(monitor).await?;
        if let Ok(mut pruned_at) = monitor.pruned_at.lock() {
            *pruned_at = Some(tokio::time::Instant::now());
        }
    }
    count(&report);
    Ok(report)
}

/// Runs pinned to executors that left: broadcasts skipped, shards freed for any executor.
async fn reroute(monitor: &Monitor) -> Result<(), StoreError> {
    let rerouted = retry_transient("reroute stranded runs", || {
        runs::reroute_stranded(&monitor.reap_pool)
    })
    .await?;
    for run_id in &rerouted.skipped {
        tracing::info!(
            run.id = run_id,
            "broadcast run skipped: its executor left before it started"
        );
    }
    for run_id in &rerouted.unpinned {
        tracing::info!(
            run.id = run_id,
            "shard unpinned: its executor left or was cordoned"
        );
    }
    Ok(())
}

/// Services: starts the instances that are missing, stops the surplus.
async fn keep_services(monitor: &Monitor) -> Result<(), StoreError> {
    for started in runs::queue_missing_service_instances(&monitor.reap_pool).await? {
        tracing::info!(run.id = started.run_id, job.id = started.job_id, replica = started.replica,
            available_at = %started.available_at, "service instance queued");
    }
    let surplus = services::surplus(&monitor.reap_pool).await?;
    if surplus.is_empty() {
        return Ok(());
    }
    let mut conn = monitor.reap_pool.acquire().await?;
    for surplus in surplus {
        let state = runs::request_cancel(&mut conn, surplus.run_id, &surplus.reason).await?;
        tracing::info!(run.id = surplus.run_id, job.id = surplus.job_id, reason = %surplus.reason,
            state = ?state, "service instance stopped");
    }
    Ok(())
}

fn count(report: &ReapReport) {
    let counts = [
        (
            "probactr_executors_declared_dead_total",
            report.declared_dead as u64,
        ),
        ("probactr_runs_abandoned_total", report.abandoned as u64),
        ("probactr_runs_requeued_total", report.requeued as u64),
        ("probactr_locks_released_total", report.locks_released as u64),
        ("probactr_claims_returned_total", report.claims_returned as u64),
        ("probactr_runs_overdue_total", report.overdue_flagged as u64),
        ("probactr_queued_runs_expired_total", report.expired as u64),
        ("probactr_runs_pruned_total", report.pruned),
    ];
    for (name, value) in counts {
        metrics::counter!(name).increment(value);
    }
    metrics::counter!("probactr_reap_passes_total").increment(1);
}

/// Logs ended runs and releases their locks by their own tokens.
async fn settle(monitor: &Monitor, ended: &[EndedRun], why: &str, report: &mut ReapReport) {
    for run in ended {
        tracing::warn!(run.id = run.id, job.id = run.job_id, executor.id = ?run.executor_id,
            retry.run_id = run.retry_run_id, reason = why, "run abandoned");
        report.abandoned += 1;
        report.requeued += usize::from(run.retry_run_id.is_some());
        let Some(token) = run.lock_token.clone() else {
            continue;
        };
        let lease = Lease::from_parts(
            &monitor.config.redis_prefix,
            run.job_id,
            run.exclusive,
            token,
            monitor.config.lock_lease,
        );
        match monitor.locks.release(&lease).await {
            Ok(true) => {
                report.locks_released += 1;
                tracing::info!(
                    run.id = run.id,
                    job.id = run.job_id,
                    lock.token = lease.token(),
                    "released the dead owner's lock"
                );
            }
            Ok(false) => tracing::debug!(run.id = run.id, "lock already gone"),
            Err(err) => {
                tracing::warn!(run.id = run.id, error = %err, "cannot release the lock; it expires with its lease")
            }
        }
    }
}

/// Deletes the archived output of runs gone, a batch at a time. An archive that does not
/// answer keeps its objects (and their rows) until the next round.
async fn prune_archive(monitor: &Monitor, archive: &OutputArchive) -> Result<u64, StoreError> {
    let mut deleted = 0;
    loop {
        let orphans = archived_outputs::orphans(&monitor.reap_pool, PRUNE_BATCH).await?;
        let mut gone = Vec::with_capacity(orphans.len());
        for run_id in &orphans {
            match archive.delete(*run_id).await {
                Ok(()) => gone.push(*run_id),
                Err(err) => {
                    tracing::warn!(run.id = run_id, error = %err, "cannot delete the run's archived output; trying again later");
                    break;
                }
            }
        }
        deleted += archived_outputs::forget(&monitor.reap_pool, &gone).await?;
        if gone.len() < orphans.len() || orphans.len() < PRUNE_BATCH as usize {
            return Ok(deleted);
        }
    }
}

/// How often the history past retention is deleted: a sixtieth of the retention, at most
/// a minute. What is kept overshoots the retention by at most that much, and a reap pass,
/// every few seconds, does not spend a dozen statements (the partitions' upkeep among
/// them) finding nothing to delete.
pub fn prune_every(retention: Duration) -> Duration {
    (retention / 60).min(Duration::from_secs(60))
}

/// Whether this pass deletes the history past retention: the first pass, and then one
/// each [`prune_every`] (a failed deletion is tried again the next pass).
fn prune_due(monitor: &Monitor) -> bool {
    let every = prune_every(monitor.config.retention);
    match monitor.pruned_at.lock() {
        Ok(pruned_at) => pruned_at.is_none_or(|at| at.elapsed() >= every),
        Err(_) => true,
    }
}

async fn prune(monitor: &Monitor) -> Result<u64, StoreError> {
    let retention = monitor.config.retention;
    let mut pruned = retry_transient("maintain run partitions", || {
        housekeeping::maintain_history(&monitor.reap_pool, retention)
    })
    .await?;
    loop {
        let deleted = retry_transient("prune runs", || {
            housekeeping::prune_runs(&monitor.reap_pool, retention, PRUNE_BATCH)
        })
        .await?;
        pruned += deleted;
        if deleted < PRUNE_BATCH as u64 {
            break;
        }
    }
    loop {
        let deleted = run_output::purge(&monitor.reap_pool, retention, PRUNE_BATCH).await?;
        pruned += deleted;
        if deleted < PRUNE_BATCH as u64 {
            break;
        }
    }
    pruned += run_progress::purge(&monitor.reap_pool, PRUNE_BATCH).await?;
    if let Some(archive) = &monitor.archive {
        pruned += prune_archive(monitor, archive).await?;
    }
    // Idempotency keys are kept 24 hours whatever the retention (a promise to clients).
    loop {
        let deleted = idempotency::purge(&monitor.reap_pool, PRUNE_BATCH).await?;
        pruned += deleted;
        if deleted < PRUNE_BATCH as u64 {
            break;
        }
    }
    pruned += housekeeping::prune_records(&monitor.reap_pool, retention).await?;
    pruned += notifications::purge(&monitor.reap_pool, retention.as_secs_f64()).await?;
    pruned += checkpoints::prune(&monitor.reap_pool, retention).await?;
    pruned += run_inputs::prune(&monitor.reap_pool, retention.as_secs_f64()).await?;
    if pruned > 0 {
        tracing::info!(pruned, "history past retention deleted");
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_pruned_a_sixtieth_of_its_retention_apart_at_most_a_minute() {
        let secs = Duration::from_secs;
        assert_eq!(prune_every(secs(30 * 86_400)), secs(60), "the default retention");
        assert_eq!(prune_every(secs(600)), secs(10));
        assert_eq!(prune_every(secs(60)), secs(1));
    }
}
