//! A run that cannot start because its job is busy: the job's overlap policy, and the
//! weak-start writes that end a claim or put it back in the queue.

use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::model::{Overlap, RunState};
use probactr_common::store::runs;

use super::Attempt;

impl Attempt<'_> {
    /// The job's lock or permit could not be had: apply its overlap policy.
    pub(super) async fn give_way(&self, why: &str) {
        match self.job.overlap {
            Overlap::Skip => self.end_before_start(RunState::Skipped, why).await,
            Overlap::Queue => self.put_back(requeue_delay(), why).await,
            Overlap::BufferOne => self.buffer_or_skip(why).await,
            Overlap::Replace if !self.job.parallel => self.replace_running(why).await,
            // A parallel job's attempts are not one "running attempt" to replace: the run
            // waits for a permit, as with `queue`.
            Overlap::Replace => self.put_back(requeue_delay(), why).await,
        }
    }

    /// `buffer_one`: the earliest waiting run of the job stays queued behind the running
    /// one; any later one is skipped, naming the run it gave way to.
    async fn buffer_or_skip(&self, why: &str) {
        match runs::waiting_beside(&self.attempts.pool, self.job.id, self.run.id).await {
            Ok(waiting) => match waiting.earlier {
                Some(buffered) => {
                    let reason = format!("overlap: buffer_one: run {buffered} already waits ({why})");
                    self.end_before_start(RunState::Skipped, &reason).await;
                }
                None => self.put_back(requeue_delay(), why).await,
            },
            // Unsure whether another run waits: waiting is the safe side (never lost).
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the job's waiting runs; re-queued");
                self.put_back(requeue_delay(), why).await;
            }
        }
    }

    /// `replace`: asks the job's running attempt to stop (its executor gives it SIGTERM,
    /// the job's grace, then SIGKILL) and waits in the queue for the lock it frees. A run
    /// that a later instant already follows, waiting or running, is skipped: the newest
    /// instant replaces, whatever order the runs were born in.
    async fn replace_running(&self, why: &str) {
        let pool = &self.attempts.pool;
        match runs::waiting_beside(pool, self.job.id, self.run.id).await {
            Ok(runs::Waiting {
                later: Some(later), ..
            }) => {
                let reason = format!("overlap: replace: run {later} of a later instant replaces it");
                return self.end_before_start(RunState::Skipped, &reason).await;
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "cannot read the job's waiting runs"),
        }
        match runs::request_replace(pool, self.job.id, self.run.id).await {
            Ok(runs::Replacement {
                newer: Some(newer), ..
            }) => {
                let reason = format!("overlap: replace: running run {newer} is of a later instant");
                return self.end_before_start(RunState::Skipped, &reason).await;
            }
            Ok(replacement) if !replacement.stopping.is_empty() => {
                tracing::info!(stopping = ?replacement.stopping, "overlap replace: the running attempt was asked to stop")
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "cannot ask the running attempt to stop; retrying"),
        }
        // Short: the lock frees as soon as the stopped attempt is recorded.
        self.put_back(Duration::from_millis(200), why).await;
    }

    pub(super) async fn end_before_start(&self, state: RunState, reason: &str) {
        let result = retry_small_write(|| {
            runs::end_claim(&self.attempts.pool, self.run.id, self.executor_id, state, reason)
        })
        .await;
        metrics::counter!("probactr_runs_total", "outcome" => state.as_str()).increment(1);
        tracing::info!(state = %state, reason, recorded = result, "run ended before it started");
    }

    pub(super) async fn put_back(&self, delay: Duration, why: &str) {
        let result =
            retry_small_write(|| runs::unclaim(&self.attempts.pool, self.run.id, self.executor_id, delay))
                .await;
        tracing::info!(
            reason = why,
            delay_ms = delay.as_millis() as u64,
            requeued = result,
            "run put back in the queue"
        );
    }
}

/// How long a run given way to waits before its next claim (jittered, so that several
/// waiting runs do not retry in step).
fn requeue_delay() -> Duration {
    Backoff::FullJitter {
        base: Duration::from_millis(250),
        cap: Duration::from_secs(2),
    }
    .delay(2)
}

/// Retries a small state change a few times (weak start: giving up is acceptable, the
/// monitor returns stale claims to the queue). Returns whether it was applied.
async fn retry_small_write<F, Fut>(mut write: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, probactr_common::store::StoreError>>,
{
    let backoff = Backoff::FullJitter {
        base: Duration::from_millis(50),
        cap: Duration::from_secs(2),
    };
    for attempt in 0..8 {
        match write().await {
            Ok(applied) => return applied,
            Err(err) => {
                tracing::warn!(error = %err, attempt, "state change failed; retrying");
                tokio::time::sleep(backoff.delay(attempt)).await;
            }
        }
    }
    false
}
