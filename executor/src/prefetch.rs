//! Prefetching: runs claimed ahead of the free slots, held in memory until one frees.
//!
//! At small capacities a claim's statement and commit cost more than the few runs it
//! takes. So the claim may take, past its free slots, up to `PROBACTR_EXECUTOR_PREFETCH`
//! more runs of the kind that needs nothing but a slot (in-process, lock-free, bound by
//! no quota, trigger cap, pool or rate: the claim statement gives no other kind past the
//! free slots), and the executor starts them as slots free, while its next claim is
//! under way. The claim made them `running`; their jobs start when a slot frees, and
//! their ends record when that was.
//!
//! Held runs are registered like running attempts, so a cancellation reaches them: one
//! asked to stop starts at once, without an execution slot, and its attempt records it
//! stopped before its job started.
//!
//! Holding is for short jobs only: when no held run could start for [`HOLD_LIMIT`] (the
//! slots are taken by jobs that are not short), or one waited [`WAIT_LIMIT`] all told,
//! every held run goes back to the queue, in its place, for any executor to take, and
//! prefetching pauses for [`PAUSE`]. It pauses too when a claim found few runs to hold
//! (the queue holds other kinds, or little): claiming ahead would only lock rows it
//! cannot take. Long jobs are never kept from an idle executor.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use probactr_common::model::{Job, Run};
use probactr_common::store::runs;
use tokio::time::Instant;

use crate::attempt;
use crate::claiming::Claimer;
use crate::registry::{StopHandle, StopReason};
use crate::slot::Slot;

/// How long held runs may wait with none of them starting before they are given back.
pub const HOLD_LIMIT: Duration = Duration::from_millis(100);
/// How long one run may be held, however steadily the others start.
pub const WAIT_LIMIT: Duration = Duration::from_secs(1);
/// How long prefetching pauses after held runs had to be given back, or a claim found
/// few runs to hold.
pub const PAUSE: Duration = Duration::from_secs(10);
/// A claim that found this many runs to hold found enough, however deep the prefetch:
/// a queue of a few hundred short runs is worth holding from, and a deeper prefetch must
/// not pause where a shallower one would not.
pub const ENOUGH_TO_HOLD: usize = 128;
/// How long to wait before trying again a give-back that failed.
const GIVE_BACK_RETRY: Duration = Duration::from_secs(1);
/// How often an executor that stops tries to give its held runs back.
const GIVE_BACK_TRIES_AT_STOP: u32 = 3;

/// The runs claimed ahead of the free slots, oldest first.
pub struct Prefetched {
    depth: usize,
    held: VecDeque<Held>,
    /// When a held run last started, or the first of those held now was held.
    progress_at: Instant,
    paused_until: Option<Instant>,
    /// Set after a give-back failed: it may have been stored, so no held run starts its
    /// job until a give-back answers which runs are still this executor's.
    next_give_back: Option<Instant>,
}

struct Held {
    run: Run,
    job: Arc<Job>,
    since: Instant,
    /// The run's registration: a cancellation stops it while it is held.
    handle: StopHandle,
}

impl Held {
    fn asked_to_stop(&self) -> bool {
        self.handle.reason().is_some()
    }
}

impl Prefetched {
    /// Holds up to `depth` runs (0: prefetching off).
    pub fn new(depth: usize) -> Prefetched {
        Prefetched {
            depth,
            held: VecDeque::new(),
            progress_at: Instant::now(),
            paused_until: None,
            next_give_back: None,
        }
    }

    /// Whether no run is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// How many runs the next claim may take past its free slots: none while more than
    /// a quarter of the depth is still held (the claim then takes at least three quarters
    /// of it at once), nor while prefetching is paused.
    pub fn room(&self) -> usize {
        let paused = self.paused_until.is_some_and(|until| Instant::now() < until);
        if paused || self.held.len() > self.depth / 4 {
            return 0;
        }
        self.depth - self.held.len()
    }

    /// Holds a run claimed past the free slots until a slot frees, registered so that a
    /// cancellation reaches it.
    pub fn hold(&mut self, claimer: &Claimer, run: Run, job: Arc<Job>) {
        if self.held.is_empty() {
            self.progress_at = Instant::now();
        }
        let executor_id = run.executor_id.unwrap_or_else(|| claimer.registry.id());
        let handle = claimer
            .registry
            .track(run.id, executor_id, attempt::stop_grace_of(&job));
        self.held.push_back(Held {
            run,
            job,
            since: Instant::now(),
            handle,
        });
        self.publish();
    }

    /// After a claim that could take `ahead` runs past its free slots and took `held`:
    /// few (under half of `ahead`, or under [`ENOUGH_TO_HOLD`]) means the queue holds
    /// other kinds of runs, or little, and claiming ahead would only lock rows the claim
    /// cannot take. Prefetching pauses.
    pub fn note_claimed_ahead(&mut self, ahead: usize, held: usize) {
        if ahead > 0 && held < (ahead / 2).min(ENOUGH_TO_HOLD) {
            self.paused_until = Some(Instant::now() + PAUSE);
        }
    }

    /// The runs held now, as the `probactr_runs_prefetched` gauge.
    fn publish(&self) {
        metrics::gauge!("probactr_runs_prefetched").set(self.held.len() as f64);
    }

    /// Starts held runs: those asked to stop at once (their attempts record that), the
    /// others, oldest first, in the slots free now. A run claimed under an identity this
    /// executor no longer has was reaped with it and is dropped; no job starts while the
    /// executor cannot prove it is alive, or while a failed give-back leaves unsure
    /// which held runs are still this executor's.
    pub fn start_in_free_slots(&mut self, claimer: &Claimer) {
        let executor_id = claimer.registry.id();
        self.drop_former_identity(claimer, executor_id);
        self.end_those_asked_to_stop(claimer, executor_id);
        if self.next_give_back.is_some() {
            return;
        }
        while !self.held.is_empty() {
            if !claimer.registry.may_act(executor_id, claimer.give_up_after) {
                break;
            }
            let Some(slot) = Slot::try_take(&claimer.slots) else {
                break;
            };
            if let Some(mut held) = self.held.pop_front() {
                held.run.started_at = held.run.started_at.map(|claimed| claimed + held.since.elapsed());
                attempt::spawn(&claimer.attempts, held.run, held.job, executor_id, slot, false);
                self.progress_at = Instant::now();
            }
        }
        self.publish();
    }

    fn drop_former_identity(&mut self, claimer: &Claimer, executor_id: uuid::Uuid) {
        self.held.retain(|held| {
            let mine = held.run.executor_id == Some(executor_id);
            if !mine {
                claimer.registry.untrack(held.run.id);
                tracing::info!(run.id = held.run.id, executor.id = %executor_id,
                    "a prefetched run was claimed under this executor's former identity; dropped");
            }
            mine
        });
    }

    fn end_those_asked_to_stop(&mut self, claimer: &Claimer, executor_id: uuid::Uuid) {
        let mut kept = VecDeque::with_capacity(self.held.len());
        for held in self.held.drain(..) {
            if !held.asked_to_stop() {
                kept.push_back(held);
                continue;
            }
            match Slot::for_ending(&claimer.slots) {
                Some(slot) => {
                    tracing::info!(
                        run.id = held.run.id,
                        "a prefetched run was asked to stop before it started"
                    );
                    attempt::spawn(&claimer.attempts, held.run, held.job, executor_id, slot, false);
                }
                None => kept.push_back(held),
            }
        }
        self.held = kept;
    }

    /// How long until the held runs are overdue (zero when they are), if any may be
    /// given back.
    pub fn until_overdue(&self) -> Option<Duration> {
        let oldest = self.held.iter().find(|held| !held.asked_to_stop())?;
        let due = (self.progress_at + HOLD_LIMIT).min(oldest.since + WAIT_LIMIT);
        let due = self.next_give_back.map_or(due, |retry| retry.max(due));
        Some(due.saturating_duration_since(Instant::now()))
    }

    /// Gives every held run back to the queue when none could start for [`HOLD_LIMIT`]
    /// or one waited [`WAIT_LIMIT`], and pauses prefetching: the jobs are not short
    /// enough for it.
    pub async fn give_back_if_overdue(&mut self, claimer: &Claimer) {
        if self.until_overdue() != Some(Duration::ZERO) {
            return;
        }
        self.paused_until = Some(Instant::now() + PAUSE);
        tracing::info!(
            runs = self.held.len(),
            pause_secs = PAUSE.as_secs(),
            "no prefetched run could start for a while; giving them back and pausing prefetching"
        );
        self.give_back(claimer).await;
    }

    /// Gives every held run back to the queue (the executor is stopping), trying a few
    /// times; runs still held after that are left to the reaper, like any run of an
    /// executor that is gone.
    pub async fn give_back_all(&mut self, claimer: &Claimer) {
        for _ in 0..GIVE_BACK_TRIES_AT_STOP {
            if self.held.is_empty() || self.give_back(claimer).await {
                break;
            }
            tokio::time::sleep(GIVE_BACK_RETRY).await;
        }
        // Those not given back were asked to stop: their attempts record it.
        self.start_in_free_slots(claimer);
    }

    /// Gives the held runs back; true when PostgreSQL answered.
    async fn give_back(&mut self, claimer: &Claimer) -> bool {
        let executor_id = claimer.registry.id();
        let ids: Vec<i64> = self.held.iter().map(|held| held.run.id).collect();
        match runs::give_back_unstarted(&claimer.pool, &ids, executor_id).await {
            Ok(given_back) => {
                tracing::info!(executor.id = %executor_id, runs = ?given_back,
                    "prefetched runs given back to the queue");
                metrics::counter!("probactr_prefetched_given_back_total").increment(given_back.len() as u64);
                for id in &given_back {
                    claimer.registry.untrack(*id);
                }
                self.held.retain(|held| !given_back.contains(&held.run.id));
                // Those not given back were asked to stop meanwhile, or given back by an
                // earlier try whose answer was lost: either way their jobs must not run.
                // Their attempts start at once and record the stop, or are fenced off.
                for held in &self.held {
                    held.handle.stop(StopReason::Cancelled);
                }
                self.next_give_back = None;
                self.publish();
                true
            }
            Err(err) => {
                tracing::warn!(error = %err, executor.id = %executor_id, runs = ids.len(),
                    "giving prefetched runs back failed; trying again");
                self.next_give_back = Some(Instant::now() + GIVE_BACK_RETRY);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_claim_that_found_enough_to_hold_keeps_prefetching_however_deep() {
        let mut deep = Prefetched::new(1024);
        deep.note_claimed_ahead(1024, ENOUGH_TO_HOLD);
        assert_eq!(
            deep.room(),
            1024,
            "a few hundred runs found are worth holding from"
        );

        deep.note_claimed_ahead(1024, ENOUGH_TO_HOLD - 1);
        assert_eq!(deep.room(), 0, "a claim that found few pauses prefetching");

        let mut shallow = Prefetched::new(64);
        shallow.note_claimed_ahead(64, 31);
        assert_eq!(shallow.room(), 0, "under half of a shallow depth is few");
    }
}
