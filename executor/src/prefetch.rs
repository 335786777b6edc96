//! Prefetching: runs claimed ahead of the free slots, held in memory until one frees.
//!
//! At small capacities a claim's statement and commit cost more than the few runs it
//! takes. So the claim may take, past its free slots, up to `PROBACTR_EXECUTOR_PREFETCH`
//! more runs of the kind that needs nothing but a slot (in-process, lock-free, bound by
//! no quota, trigger cap, pool or rate: the claim statement gives no other kind past the
//! free slots), and the executor starts them as slots free, while its next claim is
//! under way. The claim made them `running`; their jobs start when a slot frees.
//!
//! Holding is for short jobs only: when no held run could start for [`HOLD_LIMIT`] (the
//! slots are taken by jobs that are not short), or one waited [`WAIT_LIMIT`] all told,
//! every held run goes back to the queue, in its place, for any executor to take, and
//! prefetching pauses for [`PAUSE`]. Long jobs are never kept from an idle executor.

use std::collections::VecDeque;
use std::time::Duration;

use probactr_common::model::{Job, Run};
use probactr_common::store::runs;
use tokio::time::Instant;

use crate::attempt;
use crate::claiming::Claimer;
use crate::slot::Slot;

/// How long held runs may wait with none of them starting before they are given back.
pub const HOLD_LIMIT: Duration = Duration::from_millis(100);
/// How long one run may be held, however steadily the others start.
pub const WAIT_LIMIT: Duration = Duration::from_secs(1);
/// How long prefetching pauses after held runs had to be given back.
pub const PAUSE: Duration = Duration::from_secs(10);
/// How long to wait before trying again a give-back that failed.
const GIVE_BACK_RETRY: Duration = Duration::from_secs(1);

/// The runs claimed ahead of the free slots, oldest first.
pub struct Prefetched {
    depth: usize,
    held: VecDeque<Held>,
    /// When a held run last started, or the first of those held now was held.
    progress_at: Instant,
    paused_until: Option<Instant>,
    next_give_back: Option<Instant>,
}

struct Held {
    run: Run,
    job: Job,
    since: Instant,
    /// Asked to stop while held, so not given back: started when a slot frees, however
    /// long that takes, for its attempt to end it.
    kept: bool,
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

    /// Holds a run claimed past the free slots until a slot frees.
    pub fn hold(&mut self, run: Run, job: Job) {
        if self.held.iter().all(|held| held.kept) {
            self.progress_at = Instant::now();
        }
        self.held.push_back(Held {
            run,
            job,
            since: Instant::now(),
            kept: false,
        });
        self.publish();
    }

    /// The runs held now, as the `probactr_runs_prefetched` gauge.
    fn publish(&self) {
        metrics::gauge!("probactr_runs_prefetched").set(self.held.len() as f64);
    }

    /// Starts held runs, oldest first, in the slots free now. A run claimed under an
    /// identity this executor no longer has was reaped with it and is dropped; none
    /// starts while the executor cannot prove it is alive.
    pub fn start_in_free_slots(&mut self, claimer: &Claimer) {
        let executor_id = claimer.registry.id();
        while let Some(held) = self.held.front() {
            if held.run.executor_id != Some(executor_id) {
                if let Some(dropped) = self.held.pop_front() {
                    tracing::info!(run.id = dropped.run.id, executor.id = %executor_id,
                        "a prefetched run was claimed under this executor's former identity; dropped");
                }
                self.publish();
                continue;
            }
            if !claimer.registry.may_act(executor_id, claimer.give_up_after) {
                return;
            }
            let Some(slot) = Slot::try_take(&claimer.slots) else {
                return;
            };
            if let Some(held) = self.held.pop_front() {
                attempt::spawn(&claimer.attempts, held.run, held.job, executor_id, slot, false);
                self.progress_at = Instant::now();
                self.publish();
            }
        }
    }

    /// How long until the held runs are overdue (zero when they are), if any may be
    /// given back.
    pub fn until_overdue(&self) -> Option<Duration> {
        let oldest = self.held.iter().find(|held| !held.kept)?;
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

    /// Gives every held run back to the queue (the executor is stopping).
    pub async fn give_back_all(&mut self, claimer: &Claimer) {
        if !self.held.is_empty() {
            self.give_back(claimer).await;
        }
    }

    async fn give_back(&mut self, claimer: &Claimer) {
        let executor_id = claimer.registry.id();
        let ids: Vec<i64> = self.held.iter().map(|held| held.run.id).collect();
        match runs::give_back_unstarted(&claimer.pool, &ids, executor_id).await {
            Ok(given_back) => {
                tracing::info!(executor.id = %executor_id, runs = ?given_back,
                    "prefetched runs given back to the queue");
                metrics::counter!("probactr_prefetched_given_back_total").increment(given_back.len() as u64);
                // Those not given back were asked to stop meanwhile (or reaped): they
                // start when a slot frees, and their attempts end them.
                self.held.retain(|held| !given_back.contains(&held.run.id));
                for held in &mut self.held {
                    held.kept = true;
                }
                self.publish();
                self.next_give_back = None;
            }
            Err(err) => {
                tracing::warn!(error = %err, executor.id = %executor_id, runs = ids.len(),
                    "giving prefetched runs back failed; trying again");
                self.next_give_back = Some(Instant::now() + GIVE_BACK_RETRY);
            }
        }
    }
}
