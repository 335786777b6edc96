//! Runs fired ahead of their instants and owned by the executor that fired them: held in
//! memory, each with the slot taken for it, until its instant (rounded up to
//! [`START_GRANULE_MS`]), then started there. Past
//! half the capacity, runs of in-process jobs are booked instead: held without an
//! execution slot, they take one at their instant, at once when one is free, else as
//! slots free, so an aligned instant of many short runs starts from memory.
//!
//! Firing inserts such a run `running` on this executor, started as of its instant
//! ([`runs::insert_fired_runs`]), so it is never queued: no notification, no alarm, no
//! claim. That is most of what a run fired ahead used to cost besides its own insert and
//! end. While held, a run is registered like a running attempt, so a cancellation reaches
//! it (its attempt starts at its instant and records the stop before its job starts), and
//! its end records when its job really started. An executor that stops gives its held runs
//! back to the queue, claimable from their instants; one that dies leaves them to the
//! reaper, like every run it was executing.
//!
//! Waits are measured from PostgreSQL's clock: the instant's distance from the database's
//! `now()` of the firing, on this process's monotonic clock from when the firing answered.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use probactr_common::model::{Job, Run};
use probactr_common::store::runs;
use tokio::time::Instant;
use uuid::Uuid;

use crate::attempt::{self, Attempts};
use crate::prefetch::{HOLD_LIMIT, WAIT_LIMIT};
use crate::registry::StopReason;
use crate::slot::{Slot, Slots};
use crate::wakeup;

/// A free slot is taken for a run fired ahead only while more than this share of the
/// capacity is free: a slot held for a coming instant is one queued work cannot use.
pub const HOLD_WHILE_FREE_ABOVE: f64 = 0.5;
/// Nor for longer than this before its instant (a longer `PROBACTR_FIRE_AHEAD` queues
/// the runs of instants further away).
pub const HOLD_AT_MOST: Duration = Duration::from_secs(1);

/// The slot a run fired `early` before its instant is held here with, if it may be:
/// a whole slot while much of the capacity is free; otherwise, for a job that runs in
/// this process (short, as a rule), a booked one ([`Slot::booked`]) that takes its
/// execution slot at the instant. None: the run waits in the queue for any executor.
pub fn slot_for(slots: &Slots, capacity: u32, early: chrono::TimeDelta, in_process: bool) -> Option<Slot> {
    if !early.to_std().is_ok_and(|early| early <= HOLD_AT_MOST) {
        return None;
    }
    if slots.free() as f64 > f64::from(capacity) * HOLD_WHILE_FREE_ABOVE {
        return Slot::try_take(slots);
    }
    if in_process {
        return Slot::booked(slots);
    }
    None
}

/// Held runs start on multiples of this many milliseconds (from their instants on, never
/// before): runs whose instants are spread over the second start a few at a time, one
/// wake-up of the executor each granule rather than one each millisecond. At 1,000
/// instants a second spread over it, that is a fifth of the executor's CPU a fire for
/// 2-3 ms of lag (BENCHMARKS.md, "Held runs start on 5 ms granules"); instants on whole
/// seconds, or on any multiple of the granule, start on time.
pub const START_GRANULE_MS: i64 = 5;

/// The clock a firing's instants are waited on: PostgreSQL's `now()` as the firing saw it,
/// and when its answer arrived here.
#[derive(Debug, Clone, Copy)]
pub struct FiringClock {
    /// The database's clock during the firing.
    pub db_now: DateTime<Utc>,
    /// When the firing's answer arrived.
    pub answered: Instant,
}

impl FiringClock {
    /// When, on this process's clock, `instant` comes.
    fn local(&self, instant: DateTime<Utc>) -> Instant {
        let wait = (instant - self.db_now).to_std().unwrap_or(Duration::ZERO);
        self.answered + wait
    }

    /// When, on this process's clock, the first multiple of `granule_ms` milliseconds
    /// from `instant` on comes: runs whose instants are dense start together, one wake-up
    /// each granule rather than one each millisecond.
    fn local_after(&self, instant: DateTime<Utc>, granule_ms: i64) -> Instant {
        let millis = wakeup::round_up(instant.timestamp_millis(), granule_ms);
        let rounded = DateTime::<Utc>::from_timestamp_millis(millis)
            .unwrap_or(instant)
            .max(instant);
        self.local(rounded)
    }

    /// The database's clock now, as far as this process can tell.
    fn db_time_now(&self) -> DateTime<Utc> {
        self.db_now + self.answered.elapsed()
    }
}

/// One held run.
struct Held {
    run: Run,
    job: Arc<Job>,
    slot: Slot,
    starts: Instant,
}

/// Holds `runs` (owned, fired ahead; each with its job and slot) until their instants,
/// then starts them on `executor_id` (booked ones as execution slots free); gives them
/// back if the executor stops first.
pub fn hold(
    attempts: &Arc<Attempts>,
    slots: &Slots,
    runs: Vec<(Run, Arc<Job>, Slot)>,
    executor_id: Uuid,
    clock: FiringClock,
) {
    if runs.is_empty() {
        return;
    }
    let mut held: Vec<Held> = runs
        .into_iter()
        .map(|(run, job, slot)| {
            attempts
                .registry
                .track(run.id, executor_id, attempt::stop_grace_of(&job));
            Held {
                starts: clock.local_after(run.scheduled_at, START_GRANULE_MS),
                run,
                job,
                slot,
            }
        })
        .collect();
    held.sort_by_key(|held| held.starts);
    tracing::debug!(runs = held.len(), executor.id = %executor_id, "holding runs fired ahead until their instants");
    let task = attempts.clone();
    let slots = slots.clone();
    attempts.tracker.spawn(async move {
        start_at_instants(&task, &slots, held, executor_id, clock).await;
    });
}

async fn start_at_instants(
    attempts: &Arc<Attempts>,
    slots: &Slots,
    held: Vec<Held>,
    executor_id: Uuid,
    clock: FiringClock,
) {
    let mut held = held.into_iter().peekable();
    while let Some(next) = held.peek() {
        tokio::select! {
            _ = attempts.shutdown.cancelled() => {
                give_back(attempts, held.collect(), executor_id).await;
                return;
            }
            _ = tokio::time::sleep_until(next.starts) => {}
        }
        // Every run whose instant has come starts now, in one go: an aligned instant's
        // runs are not spread over the time the attempts already started take to run.
        let now = Instant::now();
        let started_at = clock.db_time_now();
        // Booked runs too, as far as execution slots are free; the others wait for one.
        let mut booked = Vec::new();
        while let Some(mut due) = held.next_if(|held| held.starts <= now) {
            if due.slot.try_take_execution(slots) {
                start(attempts, due, executor_id, started_at);
            } else {
                booked.push(due);
            }
        }
        if !booked.is_empty() {
            let task = attempts.clone();
            let slots = slots.clone();
            attempts.tracker.spawn(async move {
                start_booked(&task, &slots, booked, executor_id, clock).await;
            });
        }
    }
}

/// Starts booked runs whose instant came, in order, each as an execution slot frees.
/// Booking is for short jobs: when no slot freed for [`HOLD_LIMIT`], or a run waited
/// [`WAIT_LIMIT`] past its instant, the rest go back to the queue for any executor.
async fn start_booked(
    attempts: &Arc<Attempts>,
    slots: &Slots,
    booked: Vec<Held>,
    executor_id: Uuid,
    clock: FiringClock,
) {
    let mut booked = booked.into_iter();
    while let Some(mut next) = booked.next() {
        let waited_enough = (next.starts + WAIT_LIMIT).min(Instant::now() + HOLD_LIMIT);
        let slot_taken = tokio::select! {
            taken = next.slot.take_execution(slots) => taken,
            _ = tokio::time::sleep_until(waited_enough) => false,
            _ = attempts.shutdown.cancelled() => false,
        };
        if !slot_taken {
            let rest: Vec<Held> = std::iter::once(next).chain(booked).collect();
            tracing::info!(runs = rest.len(), executor.id = %executor_id,
                "booked runs found no free slot in time; given back to the queue");
            give_back(attempts, rest, executor_id).await;
            return;
        }
        start(attempts, next, executor_id, clock.db_time_now());
    }
}

fn start(attempts: &Arc<Attempts>, held: Held, executor_id: Uuid, started_at: DateTime<Utc>) {
    let Held {
        mut run, job, slot, ..
    } = held;
    if attempts.registry.id() != executor_id {
        // Reaped with the identity it was fired under: its row is no longer this executor's.
        attempts.registry.untrack(run.id);
        tracing::info!(run.id = run.id, executor.id = %executor_id,
            "a run fired ahead was held under this executor's former identity; dropped");
        return;
    }
    run.started_at = run.started_at.map(|stored| stored.max(started_at));
    tracing::debug!(
        run.id = run.id,
        job.id = job.id,
        "a run fired ahead starts at its instant"
    );
    // Its end is written by the recorder alone, like every fired run's.
    attempt::spawn(attempts, run, job, executor_id, slot, true);
}

/// Gives held runs back to the queue (the executor is stopping). Those asked to stop
/// meanwhile are not given back: their attempts start at once and record the stop.
/// Those a failed give-back leaves are left to the reaper, like any run of an executor
/// that is gone.
async fn give_back(attempts: &Arc<Attempts>, held: Vec<Held>, executor_id: Uuid) {
    let ids: Vec<i64> = held.iter().map(|held| held.run.id).collect();
    let given_back = match runs::give_back_unstarted(&attempts.pool, &ids, executor_id).await {
        Ok(given_back) => given_back,
        Err(err) => {
            tracing::warn!(error = %err, executor.id = %executor_id, runs = ?ids,
                "cannot give back the runs fired ahead at stop; the reaper will");
            for held in held {
                attempts.registry.untrack(held.run.id);
            }
            return;
        }
    };
    tracing::info!(executor.id = %executor_id, runs = ?given_back, "runs fired ahead given back to the queue at stop");
    for held in held {
        if given_back.contains(&held.run.id) {
            attempts.registry.untrack(held.run.id);
        } else {
            stopped_before_start(attempts, held, executor_id);
        }
    }
}

fn stopped_before_start(attempts: &Arc<Attempts>, held: Held, executor_id: Uuid) {
    let handle = attempts
        .registry
        .track(held.run.id, executor_id, attempt::stop_grace_of(&held.job));
    if handle.reason().is_none() {
        handle.stop(StopReason::Cancelled);
    }
    attempt::spawn(attempts, held.run, held.job, executor_id, held.slot, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> FiringClock {
        FiringClock {
            db_now: DateTime::from_timestamp(1_700_000_000, 0).expect("a valid time"),
            answered: Instant::now(),
        }
    }

    #[test]
    fn held_runs_start_on_the_granule_after_their_instant_never_before() {
        let clock = clock();
        let at = |millis: i64| clock.db_now + chrono::TimeDelta::milliseconds(millis);
        let starts = |millis: i64| clock.local_after(at(millis), START_GRANULE_MS) - clock.answered;
        assert_eq!(starts(1), Duration::from_millis(5));
        assert_eq!(starts(4), Duration::from_millis(5));
        assert_eq!(starts(6), Duration::from_millis(10));
        // Instants on the granule (a whole second, say) start on time.
        assert_eq!(starts(1000), Duration::from_millis(1000));
        // One a fraction of a millisecond past the granule starts at its instant, not before.
        let just_after = at(5) + chrono::TimeDelta::microseconds(300);
        assert_eq!(
            clock.local_after(just_after, START_GRANULE_MS) - clock.answered,
            Duration::from_micros(5300)
        );
    }
}
