//! Claiming: taking queued runs, oldest first, up to this executor's free capacity, and
//! runs that need nothing but a slot ahead of it ([`crate::prefetch`]).
//!
//! Capacity is a semaphore of `PROBACTR_EXECUTOR_CAPACITY` permits; each attempt holds
//! one while its job executes (and a bound on ends not yet recorded: see [`Slot`](crate::slot::Slot)). The
//! loop claims when woken (runs queued, capacity freed) or every second (retries whose
//! backoff elapsed raise no notification).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::model::{Job, Overlap, Run};
use probactr_common::run_trace::Timed;
use probactr_common::store::retry::retry_transient;
use probactr_common::store::runs;

use opentelemetry::KeyValue;
use probactr_common::lock::Locks;
use sqlx::PgPool;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::attempt::{self, Attempts};
use crate::job_cache::JobCache;
use crate::prefetch::Prefetched;
use crate::registry::Registry;
use crate::run_traces;
use crate::slot::{Slot, Slots};
use crate::wakeup::Wakeups;

/// What claiming takes.
pub struct Claimer {
    /// PostgreSQL.
    pub pool: PgPool,
    /// Who this executor is now (claims are made under its identity).
    pub registry: Arc<Registry>,
    /// Whether Redis answers (runs that need a lock are claimed only then).
    pub locks: Locks,
    /// The job definitions read last.
    pub job_cache: Arc<JobCache>,
    /// Where claimed runs' slots come from.
    pub slots: Slots,
    /// Free shell processes bound the shell runs a claim takes.
    pub processes: Arc<Semaphore>,
    /// What wakes the loop: runs queued, slots freed.
    pub wakeups: Arc<Wakeups>,
    /// Where claimed runs start.
    pub attempts: Arc<Attempts>,
    /// `PROBACTR_EXECUTOR_CAPACITY`.
    pub capacity: u32,
    /// `PROBACTR_EXECUTOR_PREFETCH`: runs claimed ahead of the free slots
    /// ([`crate::prefetch`]).
    pub prefetch: usize,
    /// `PROBACTR_EXECUTOR_NAMESPACES`: the namespaces whose runs it claims (None: all).
    pub namespaces: Option<Vec<String>>,
    /// How long this executor may go unproven alive and still claim
    /// ([`crate::liveness::give_up_after`]).
    pub give_up_after: Duration,
}

/// How often the loop looks for claimable runs without being woken.
const POLL: Duration = Duration::from_secs(1);
/// How long a claim waits for more slots to free when only a few are free.
const COALESCE: Duration = Duration::from_millis(1);
/// Right after a claim that filled every free slot, a claim of this many runs or more
/// goes at once rather than waiting for more slots to free: below it a claim's statement
/// and commit outweigh the runs' share (measured at 2 × 10), above it waiting would leave
/// free slots idle while runs are queued (measured at 2 × 256 and 2 × 1,024).
const CLAIM_GRANULE: usize = 16;

/// Claims and starts attempts until `stop` is cancelled.
pub async fn claim_loop(claimer: Claimer, stop: CancellationToken) {
    let capacity = &claimer.slots.capacity;
    let backoff = Backoff::FullJitter {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(5),
    };
    let coalesce_below = (claimer.capacity as usize / 2).max(1);
    let refill_below = coalesce_below.min(CLAIM_GRANULE);
    let mut failures = 0u32;
    // Whether claimable runs may be waiting: the last claim filled every free slot, or
    // news came since. A slot freed while the queue is known to be empty is no reason
    // to look (a claim per ended run would find nothing, over and over).
    let mut more_may_wait = true;
    let mut held = Prefetched::new(claimer.prefetch);
    while !stop.is_cancelled() {
        held.start_in_free_slots(&claimer);
        held.give_back_if_overdue(&claimer).await;
        let free = claimer.slots.free();
        // Claiming ahead while every slot is busy only when the last claim brought runs
        // to hold: the held ones start while the next claim is under way.
        let ahead = held.room();
        let pause = if free == 0 && (ahead == 0 || held.is_empty()) {
            POLL
        } else {
            match claim_and_start(&claimer, free, ahead, &mut held).await {
                Ok(claimed) if claimed == free + ahead => Duration::ZERO,
                Ok(claimed) => {
                    failures = 0;
                    // Free slots left unfilled: nothing more is claimable now.
                    more_may_wait &= claimed >= free;
                    POLL
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %err, failures, "claiming failed; backing off");
                    backoff.delay(failures.min(10))
                }
            }
        };
        if pause.is_zero() && held.is_empty() {
            // The claim filled every free slot and more may be queued. Claiming again at
            // once would take only the few slots freed meanwhile by short runs (a
            // statement and a commit for a handful of runs): let more free up first.
            if claimer.slots.free() < refill_below {
                tokio::time::sleep(COALESCE).await;
            }
            continue;
        }
        // Held runs wait for freed slots, and at most until they are overdue.
        let pause = held.until_overdue().map_or(pause, |left| left.min(pause));
        let news = tokio::select! {
            _ = stop.cancelled() => break,
            _ = claimer.wakeups.runs.notified() => true,
            _ = claimer.wakeups.capacity.notified(), if more_may_wait || !held.is_empty() => false,
            _ = tokio::time::sleep(pause) => true,
        };
        more_may_wait |= news;
        // Woken by one freed slot among many busy ones: let a few more free up so one
        // claim statement takes several runs.
        if held.is_empty() && capacity.available_permits() < coalesce_below {
            tokio::time::sleep(COALESCE).await;
        }
    }
    held.give_back_all(&claimer).await;
    tracing::debug!("claim loop stopped");
}

/// Claims up to `free` runs for the free slots and `ahead` more to hold (see
/// [`crate::prefetch`]), starting held runs in slots that free while the claim is under
/// way. Returns how many runs it claimed.
async fn claim_and_start(
    claimer: &Claimer,
    free: usize,
    ahead: usize,
    held: &mut Prefetched,
) -> anyhow::Result<usize> {
    // Slots first, claim second: the fire loop takes slots too, and a run the claim
    // started (lock-free) can no longer be given back.
    let mut slots: Vec<Slot> = (0..free).map_while(|_| Slot::try_take(&claimer.slots)).collect();
    if slots.is_empty() && (ahead == 0 || held.is_empty()) {
        return Ok(0);
    }
    let executor_id = claimer.registry.id();
    if !claimer.registry.may_act(executor_id, claimer.give_up_after) {
        // Claimed now, the run would be stopped before its job starts and spend an
        // attempt: wait until a heartbeat proves this executor alive again.
        return Ok(0);
    }
    let limits = runs::ClaimLimits {
        runs: (slots.len() + ahead) as i64,
        slots: slots.len() as i64,
        processes: claimer.processes.available_permits() as i64,
        // Runs that need a lock would only be given back: leave them to executors that
        // reach Redis (or to this one once Redis answers again).
        with_locked: claimer.locks.usable(attempt::REDIS_PROBE_EVERY),
    };
    let asked_at = std::time::SystemTime::now();
    let claimed = {
        let claim = claim_recording_ends(claimer, executor_id, &limits);
        tokio::pin!(claim);
        loop {
            tokio::select! {
                claimed = &mut claim => break claimed?,
                _ = claimer.wakeups.capacity.notified(), if !held.is_empty() => {
                    held.start_in_free_slots(claimer);
                }
            }
        }
    };
    if claimed.is_empty() {
        return Ok(0);
    }
    if probactr_common::telemetry::tracing_on() {
        trace_claims(
            &claimer.pool,
            claimed.iter().map(|claimed| &claimed.run),
            asked_at,
        )
        .await;
    }
    let wanted: Vec<(i64, i64)> = claimed
        .iter()
        .map(|claimed| (claimed.run.job_id, claimed.job_version))
        .collect();
    let jobs = match claimer.job_cache.get(&claimer.pool, &wanted).await {
        Ok(jobs) => jobs,
        Err(err) => {
            // Without their definitions the runs cannot start: back to the queue, or
            // they would wait, running in name only, for the reaper.
            let ids: Vec<i64> = claimed.iter().map(|claimed| claimed.run.id).collect();
            if let Err(back) = runs::give_back_unstarted(&claimer.pool, &ids, executor_id).await {
                tracing::warn!(error = %back, runs = ?ids, "cannot give back claimed runs whose jobs could not be read");
            }
            return Err(err.into());
        }
    };
    let count = claimed.len();
    let holding_quota: HashSet<i64> = claimed
        .iter()
        .filter(|claimed| claimed.holds_quota)
        .map(|claimed| claimed.run.id)
        .collect();
    let claimed: Vec<Run> = claimed.into_iter().map(|claimed| claimed.run).collect();
    let claimed = one_per_queueing_job(&claimer.pool, claimed, &jobs, executor_id).await?;
    // In claim order: every run past the free slots is one the claim allowed to be held.
    let mut held_now = 0;
    for run in claimed {
        let Some(job) = jobs.get(&run.job_id).cloned() else {
            // The job was deleted between claim and read; the cascade removed the run.
            continue;
        };
        match slots.pop() {
            Some(slot) => {
                let holds_quota = holding_quota.contains(&run.id);
                attempt::spawn(&claimer.attempts, run, job, executor_id, slot, holds_quota);
            }
            None => {
                held.hold(claimer, run, job);
                held_now += 1;
            }
        }
    }
    held.note_claimed_ahead(ahead, held_now);
    // Slots freed while the claim was answered go to the runs just held.
    drop(slots);
    held.start_in_free_slots(claimer);
    Ok(count)
}

/// Claims within `limits`, writing in the same transaction the ends waiting to be
/// recorded (one commit per cycle: see [`crate::recorder`]). When that transaction
/// fails, the ends go back to the recorder and the claim is tried alone.
async fn claim_recording_ends(
    claimer: &Claimer,
    executor_id: Uuid,
    limits: &runs::ClaimLimits,
) -> Result<Vec<runs::ClaimedRun>, probactr_common::store::StoreError> {
    let namespaces = claimer.namespaces.as_deref();
    let recorder = &claimer.attempts.recorder;
    let ends = recorder.take_for_claim();
    if !ends.is_empty() {
        match runs::finish_and_claim(&claimer.pool, ends.endings(), executor_id, limits, namespaces).await {
            Ok((finished, claimed)) => {
                ends.answer(finished);
                return Ok(claimed);
            }
            Err(err) => {
                tracing::warn!(error = %err, runs = ends.endings().len(),
                    "recording ends with the claim failed; the recorder writes them alone");
                recorder.give_back(ends);
            }
        }
    }
    retry_transient("claim queued runs", || {
        runs::claim_in_namespaces(&claimer.pool, executor_id, limits, namespaces)
    })
    .await
}
/// The queue wait (queued to claimed) and the claim (the statement) of each claimed run,
/// as spans of its trace.
async fn trace_claims<'a>(
    pool: &PgPool,
    claimed: impl Iterator<Item = &'a Run>,
    asked_at: std::time::SystemTime,
) {
    let answered_at = std::time::SystemTime::now();
    let claimed: Vec<&Run> = claimed.collect();
    let traces = run_traces::of_runs(pool, claimed.iter().copied()).await;
    for run in claimed {
        let Some(trace) = traces.get(&run.id).map(|traced| traced.trace) else {
            continue;
        };
        let attributes = || {
            vec![
                KeyValue::new("run.id", run.id),
                KeyValue::new("attempt", i64::from(run.attempt)),
            ]
        };
        let claimed_at = run.claimed_at.map_or(answered_at, Into::into);
        let queued = Timed {
            start: run.queued_at.into(),
            end: claimed_at,
            attributes: attributes(),
        };
        trace.child_span("queue wait", queued);
        let claim = Timed {
            start: asked_at,
            end: answered_at,
            attributes: attributes(),
        };
        trace.child_span("claim", claim);
    }
}

/// A non-parallel `overlap = queue` job runs one attempt at a time: of several of its runs
/// claimed together, keep the oldest and return the others to the queue at once (the
/// claim leaves them there while the kept one is active). A `buffer_one` job's runs are
/// all kept: those behind a waiting one are claimed to be skipped.
async fn one_per_queueing_job(
    pool: &PgPool,
    claimed: Vec<Run>,
    jobs: &HashMap<i64, Arc<Job>>,
    executor_id: Uuid,
) -> anyhow::Result<Vec<Run>> {
    let queueing = |job_id: i64| {
        jobs.get(&job_id)
            .is_some_and(|job| !job.parallel && job.overlap == Overlap::Queue)
    };
    let mut seen = HashSet::new();
    let mut kept = Vec::with_capacity(claimed.len());
    for run in claimed {
        if queueing(run.job_id) && !seen.insert(run.job_id) {
            runs::unclaim(pool, run.id, executor_id, Duration::ZERO).await?;
        } else {
            kept.push(run);
        }
    }
    Ok(kept)
}
