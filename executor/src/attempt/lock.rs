//! The job's Redis lock or permit for one attempt: taken within the start budget,
//! its lease kept while the job runs (the stop point when it cannot be), released by its
//! own token at the end.

use std::time::Duration;

use probactr_common::lock::{Acquire, Lease, Renewal, Want};

use super::Attempt;
use crate::registry::{StopHandle, StopReason};

impl Attempt<'_> {
    fn want(&self) -> Option<Want> {
        match (self.job.parallel, self.job.max_concurrency) {
            (false, _) => Some(Want::Mutex { job_id: self.job.id }),
            (true, Some(max)) => Some(Want::Permit {
                job_id: self.job.id,
                max: max.max(1) as u32,
            }),
            (true, None) => None,
        }
    }

    /// Takes the job's mutex or permit, retrying per `PROBACTR_LOCK_RETRY` (full jitter)
    /// within the start budget.
    pub(super) async fn take_lock(&self) -> Result<Option<Lease>, NoLock> {
        let Some(want) = self.want() else { return Ok(None) };
        if !self.attempts.locks.may_try(REDIS_PROBE_EVERY) {
            // Each call would wait out a response timeout: give the run back at once,
            // so an executor cut off from Redis does not sit on work others can do.
            return Err(NoLock::Unavailable(
                "lock unavailable: Redis does not answer".to_owned(),
            ));
        }
        let waiting = std::time::Instant::now();
        // Boxed: the Redis call's state is kilobytes, and inline it would size the future
        // of every attempt, moved whole as each run is spawned, lock or none.
        let acquired = Box::pin(self.attempts.locks.acquire(
            want,
            self.attempts.lock_lease,
            self.attempts.lock_start_budget,
            &self.attempts.lock_retry,
        ))
        .await;
        metrics::histogram!("probactr_lock_wait_seconds").record(waiting.elapsed().as_secs_f64());
        match acquired {
            Ok(Acquire::Acquired(lease)) => {
                metrics::counter!("probactr_lock_acquisitions_total").increment(1);
                tracing::debug!(lock.token = lease.token(), "lock acquired");
                Ok(Some(lease))
            }
            Ok(Acquire::Busy { attempts }) => {
                metrics::counter!("probactr_lock_busy_total").increment(1);
                tracing::info!(attempts, "lock busy for the whole start budget");
                Err(NoLock::Busy(format!(
                    "job busy: its lock was held for the whole start budget ({attempts} attempts)"
                )))
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot reach Redis to take the lock");
                if err.is_unreachable() {
                    Err(NoLock::Unavailable(format!("lock unavailable: {err}")))
                } else {
                    // Redis answered, with an error (out of memory, no permission): it
                    // will not go away by itself, so the run is not retried at once.
                    Err(NoLock::Busy(format!("lock refused: {err}")))
                }
            }
        }
    }

    pub(super) async fn release(&self, lease: Option<&Lease>) {
        let Some(lease) = lease else { return };
        // Boxed for the reason given in `take_lock`.
        match Box::pin(self.attempts.locks.release(lease)).await {
            Ok(true) => tracing::debug!(lock.token = lease.token(), "lock released"),
            Ok(false) => tracing::info!(lock.token = lease.token(), "lock was no longer ours at release"),
            Err(err) => tracing::warn!(error = %err, "cannot release the lock; it expires with its lease"),
        }
    }
}

/// While Redis does not answer, how often one caller tries it anyway (to notice its
/// return); the others give their runs back without trying, and the claim loop takes
/// only runs that need no lock.
pub const REDIS_PROBE_EVERY: Duration = Duration::from_millis(500);

/// How long a run given back for want of Redis stays out of this executor's and its
/// peers' claims: long enough not to bounce straight back, short enough that an executor
/// that does reach Redis starts it about on time.
pub(super) const LOCKS_UNAVAILABLE_DELAY: Duration = Duration::from_millis(100);

/// Why a run's lock could not be had.
pub(super) enum NoLock {
    /// Another holder kept it for the whole start budget, or Redis refused the call:
    /// the job's overlap policy decides (skip the run, or queue it).
    Busy(String),
    /// Redis did not answer: nothing says the job is busy, so the run goes back to the
    /// queue for an executor that reaches Redis, whatever the overlap policy.
    Unavailable(String),
}

/// Renews the lease every lease/3 until the attempt ends. When renewal finds the lock
/// gone, or cannot confirm it while enough of the lease is left to stop the job in time,
/// it stops the job at once: the stop point. A job never runs past a lease it cannot
/// prove it holds.
///
/// The lease is counted from when the last successful renewal was *sent* (the first from
/// `asked_at`, before the acquisition was sent): Redis extended it at some moment after
/// that, so the lock lives at least until then plus the ttl, by Redis's clock. A renewal
/// that fails is retried after a quarter interval, each try bounded so that its answer
/// comes before that lower bound minus a safety margin (a tenth of the lease, at least
/// 50 ms, for killing the job); once no try fits, the job is stopped — before the lease
/// runs out, not when it does, since another executor may take the lock the moment
/// Redis lets it expire.
pub(super) async fn keep_lease(
    locks: probactr_common::lock::Locks,
    lease: Lease,
    handle: StopHandle,
    asked_at: tokio::time::Instant,
) {
    use tokio::time::Instant;
    let every = lease.renew_every();
    let margin = (lease.ttl() / 10).max(Duration::from_millis(50));
    let stopped = handle.token();
    let mut valid_until = asked_at + lease.ttl();
    let mut next = asked_at + every;
    let stop = |why: &str| {
        tracing::warn!(lock.token = lease.token(), "{why}; stopping the job");
        metrics::counter!("probactr_renewals_lost_total").increment(1);
        handle.stop(StopReason::LockLost);
    };
    loop {
        let deadline = valid_until.checked_sub(margin).unwrap_or(valid_until);
        tokio::select! {
            _ = stopped.cancelled() => return,
            _ = tokio::time::sleep_until(next.min(deadline)) => {}
        }
        let sent = Instant::now();
        if sent >= deadline {
            return stop("cannot renew the lease before it expires");
        }
        let budget = (deadline - sent).min(every / 2);
        match tokio::time::timeout(budget, locks.renew(&lease)).await {
            Ok(Ok(Renewal::Renewed)) => {
                valid_until = sent + lease.ttl();
                next = sent + every;
            }
            Ok(Ok(Renewal::Lost)) => return stop("lock lost: another owner or expired"),
            Ok(Err(_)) | Err(_) => {
                tracing::info!(
                    lock.token = lease.token(),
                    left_ms = valid_until.saturating_duration_since(Instant::now()).as_millis() as u64,
                    "lease renewal failed; will retry before it expires"
                );
                next = Instant::now() + every / 4;
            }
        }
    }
}
