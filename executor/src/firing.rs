//! Firing: turning due trigger instants into run rows, exactly once.
//!
//! The loop sleeps until the earliest `next_fire_at` is half the fire-ahead window
//! (`PROBACTR_FIRE_AHEAD`) away (or a notification that triggers changed), then fires in
//! batches everything due within the window. A run fired ahead of its instant is held by
//! the firing executor until it comes, when much of its capacity is free
//! ([`crate::fired_ahead`]); otherwise it waits in the queue, claimable from its instant
//! on, and the firing executor sets itself alarms for those instants and tells its peers
//! of the crowded ones (`probactr_runs_at`), so an aligned storm is already fired when its
//! instant comes and only starting is left.
//! One batch is one transaction:
//!
//! 1. lock a batch of triggers due within the window, earliest first, `SKIP LOCKED` — so
//!    executors firing at once split the work instead of queueing behind each other (a
//!    pass's first batch is half of what the last pass fired, at least [`FIRST_BATCH`];
//!    each full one doubles the next, up to `PROBACTR_FIRE_BATCH`);
//! 2. plan each trigger in Rust ([`plan_trigger`]): which instants run, which are
//!    recorded as missed and why, and the next instant;
//! 3. insert the runs (`ON CONFLICT DO NOTHING` on the trigger's instant: invariant 1),
//!    record the misfires, advance `next_fire_at`; commit.
//!
//! Misfires: an instant fired later than the trigger's `misfire_threshold_secs` is late.
//! Instants within the threshold always run; late ones follow the trigger's policy:
//! `fire_once` runs the latest late instant when no timely one runs, `skip` runs none,
//! `fire_all` runs up to [`FIRE_ALL_CAP`] of them. Every late instant not run is counted
//! in a `misfires` row, so nothing is dropped silently (invariant 2).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use opentelemetry::KeyValue;
use probactr_common::backoff::Backoff;
use probactr_common::model::{Misfire, Run, RunState, Trigger, FIRE_ALL_CAP};
use probactr_common::run_trace::{RunTrace, Timed};
use probactr_common::schedule::TriggerSchedule;
use probactr_common::store::retry::retry_transient;
use probactr_common::store::runs::{self, FiredRuns};
use probactr_common::store::triggers::{self, MissedInstants};
use probactr_common::store::{workflows, StoreError};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::attempt::{self, Attempts};
use crate::fired_ahead::{self, FiringClock};
use crate::holding;
use crate::job_cache::JobCache;
use crate::registry::Registry;
use crate::slot::{Slot, Slots};
use crate::wakeup::{self, Wakeups};

/// What firing takes.
pub struct Firer {
    /// PostgreSQL.
    pub pool: PgPool,
    /// Who this executor is now (the runs it starts itself are inserted as its own).
    pub registry: Arc<Registry>,
    /// The job definitions read last.
    pub job_cache: Arc<JobCache>,
    /// Where the slots of runs started at once come from.
    pub slots: Slots,
    /// What wakes the loop (triggers changed) and what it wakes (runs queued).
    pub wakeups: Arc<Wakeups>,
    /// Where fired runs this executor owns start.
    pub attempts: Arc<Attempts>,
    /// Stops the alarms set for runs fired ahead.
    pub shutdown: CancellationToken,
    /// `PROBACTR_FIRE_BATCH`: triggers per transaction.
    pub batch: i64,
    /// `PROBACTR_FIRE_AHEAD`.
    pub ahead: Duration,
    /// `PROBACTR_EXECUTOR_CAPACITY` (how runs fired ahead are held here:
    /// [`fired_ahead::slot_for`]).
    pub capacity: u32,
    /// `PROBACTR_EXECUTOR_NAMESPACES`: the namespaces whose triggers it fires (None: all).
    pub namespaces: Option<Vec<String>>,
    /// How long this executor may go unproven alive and still start runs itself
    /// ([`crate::liveness::give_up_after`]).
    pub give_up_after: Duration,
}

/// The most instants within the misfire threshold one firing runs for one trigger; more
/// (a one-second interval with an hour's threshold after an outage) are counted as missed.
pub const TIMELY_CAP: usize = 1000;

/// The longest the loop sleeps without looking again (a safety net under notifications).
const MAX_SLEEP: Duration = Duration::from_secs(30);

/// Fires until `stop` is cancelled.
pub async fn fire_loop(firer: Firer, stop: CancellationToken) {
    let backoff = Backoff::FullJitter {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(5),
    };
    let mut failures = 0u32;
    let mut window = FireWindow::new(firer.ahead);
    let mut first_batch = first_batch_after(0, firer.batch);
    // When the earliest workflow trigger comes (as last read): passes before it, which
    // fire the jobs' triggers several times a second in a busy cluster, skip the workflow
    // claim's transaction. A change to any trigger wakes the loop and looks again.
    let mut workflows_due_at = tokio::time::Instant::now();
    while !stop.is_cancelled() {
        let began = tokio::time::Instant::now();
        let fired = match fire_due(&firer, window.now, first_batch).await {
            Ok(jobs) => {
                if jobs > 0 {
                    first_batch = first_batch_after(jobs, firer.batch);
                    let took = began.elapsed();
                    tracing::debug!(
                        triggers = jobs,
                        pass_ms = took.as_millis() as u64,
                        "fire pass done"
                    );
                    window.after_pass(took);
                }
                if tokio::time::Instant::now() >= workflows_due_at {
                    crate::workflow_firing::fire_due(&firer.pool, &firer.wakeups, firer.batch)
                        .await
                        .map(|workflows| jobs + workflows)
                } else {
                    Ok(jobs)
                }
            }
            Err(err) => Err(err),
        };
        let pause = match fired {
            Ok(fired) => {
                failures = 0;
                // Due triggers we could not take are being fired by a peer: look again
                // shortly rather than spinning on them.
                time_until_next_fire(&firer, window.lead).await.map(|next| {
                    workflows_due_at = tokio::time::Instant::now() + next.workflows;
                    let pause = next.jobs.min(next.workflows);
                    if pause.is_zero() && fired == 0 {
                        PEER_FIRING_PAUSE
                    } else {
                        pause
                    }
                })
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %err, failures, "firing failed; backing off");
                Ok(backoff.delay(failures.min(10)))
            }
        };
        let pause = pause.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "cannot read the next fire time");
            workflows_due_at = tokio::time::Instant::now();
            backoff.delay(failures.min(10))
        });
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = firer.wakeups.triggers.notified() => workflows_due_at = tokio::time::Instant::now(),
            _ = tokio::time::sleep(pause) => {}
        }
    }
    tracing::debug!("fire loop stopped");
}

/// The fire-ahead window of the next pass: `PROBACTR_FIRE_AHEAD`, widened while passes
/// take long (an aligned instant of thousands of runs) so that a pass, starting twice its
/// own length ahead of the earliest instant, ends well before it, up to [`WIDEST_WINDOW`]
/// (runs fired further ahead would not be held by their firer). It starts at its widest
/// and narrows once a pass proved short: the first instants an executor fires may be a
/// storm (a cluster started with thousands of triggers due at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireWindow {
    configured: Duration,
    /// The window of the next pass.
    pub now: Duration,
    /// How long before the earliest instant the next pass starts: half the window, so
    /// that a pass takes half a window of instants at once, or more once the window is
    /// at its widest and passes still take longer than a quarter of it (10,000 triggers
    /// due at once, fired by two executors in passes of 500–700 ms, started only half a
    /// second ahead: the last batch committed after the instant, and its runs started up
    /// to 200 ms late). At most [`LEAD_AT_MOST`] of the window.
    pub lead: Duration,
}

/// The longest lead, as a share of the window (numerator, denominator). A pass fires
/// nothing beyond the window; and with instants a window apart, a pass starting a whole
/// window ahead would start at the previous instant, its transactions competing with that
/// instant's thousands of starts (10,000 aligned triggers a second: lag p99 of such
/// seconds 80–180 ms, against 30–60 with four fifths).
pub const LEAD_AT_MOST: (u32, u32) = (4, 5);

/// The widest a window is widened to.
pub const WIDEST_WINDOW: Duration = fired_ahead::HOLD_AT_MOST;
/// A widened window is this many times the last pass: the pass starts twice its own
/// length ahead of the earliest instant.
const WINDOW_PER_PASS: u32 = 4;

impl FireWindow {
    /// The window as configured (0: firing at the instants, never widened), at its
    /// widest until a pass fired something.
    pub fn new(configured: Duration) -> FireWindow {
        let widest = if configured.is_zero() {
            configured
        } else {
            configured.max(WIDEST_WINDOW)
        };
        // A configured window this wide is never fitted: its passes start half of it ahead.
        let lead = if configured >= WIDEST_WINDOW {
            configured / 2
        } else {
            longest_lead(widest)
        };
        FireWindow {
            configured,
            now: widest,
            lead,
        }
    }

    /// Fits the window, and how far ahead of its instants a pass starts, to how long the
    /// last pass that fired something took.
    pub fn after_pass(&mut self, took: Duration) {
        if self.configured.is_zero() || self.configured >= WIDEST_WINDOW {
            return;
        }
        let wanted = took.saturating_mul(WINDOW_PER_PASS);
        self.now = wanted.clamp(self.configured, WIDEST_WINDOW);
        self.lead = took
            .saturating_mul(WINDOW_PER_PASS / 2)
            .clamp(self.now / 2, longest_lead(self.now));
    }
}

fn longest_lead(window: Duration) -> Duration {
    let (share, of) = LEAD_AT_MOST;
    window * share / of
}

/// How long until the next passes of each kind of trigger.
struct NextFires {
    /// Jobs' triggers: until the earliest instant is the lead away.
    jobs: Duration,
    /// Workflows' triggers: until the earliest is due.
    workflows: Duration,
}

/// How long until the next passes: for jobs' triggers, until the earliest instant is
/// `lead` away ([`FireWindow::lead`]). Each pass fires everything within the whole window,
/// so a pass takes about half a window of instants at once (waking as soon as one instant
/// entered the window would fire instants spread over the second one or two at a time).
async fn time_until_next_fire(firer: &Firer, lead: Duration) -> Result<NextFires, StoreError> {
    let early = lead.as_secs_f64();
    let jobs = match triggers::seconds_until_earliest_due(&firer.pool).await? {
        Some(secs) if secs > early => Duration::from_secs_f64(secs - early).min(MAX_SLEEP),
        Some(_) => Duration::ZERO,
        None => MAX_SLEEP,
    };
    // Workflow triggers fire when due, not ahead.
    let workflows = match workflows::seconds_until_earliest_trigger(&firer.pool).await? {
        Some(secs) => Duration::from_secs_f64(secs.max(0.0)).min(MAX_SLEEP),
        None => MAX_SLEEP,
    };
    Ok(NextFires { jobs, workflows })
}

/// How long to wait when due triggers are locked by a peer's firing transaction.
const PEER_FIRING_PAUSE: Duration = Duration::from_millis(5);

/// The smallest first batch of a pass. A pass's first batch is half of what the last
/// pass that fired something fired, between this and `PROBACTR_FIRE_BATCH`; each full
/// batch doubles the next. A moderate instant (a thousand triggers) is so shared with
/// the peers firing beside this executor, each taking a batch, where one batch of 2,000
/// left one executor firing and starting all of it (an eighth more CPU a fire); a storm
/// keeps its full batches from one pass to the next (starting each pass small costs the
/// 10,000-a-second storm half again its lag).
pub const FIRST_BATCH: i64 = 500;

/// The first batch of the pass after one that fired `fired` triggers.
fn first_batch_after(fired: usize, largest: i64) -> i64 {
    i64::try_from(fired / 2)
        .unwrap_or(i64::MAX)
        .clamp(FIRST_BATCH.min(largest), largest)
}

/// The batch after `batch` came back full.
fn next_batch(batch: i64, largest: i64) -> i64 {
    batch.saturating_mul(2).min(largest)
}

/// Fires batches of the triggers due within `window`, the first of `first_batch`, until
/// fewer than a full batch was due; returns how many triggers fired.
pub async fn fire_due(firer: &Firer, window: Duration, first_batch: i64) -> Result<usize, StoreError> {
    let mut batch = first_batch;
    let mut fired = 0;
    loop {
        // A batch aborted by a deadlock or a serialization failure was rolled back whole
        // (its slots freed with it): fire it again.
        let report = retry_transient("fire due triggers", || fire_batch(firer, batch, window)).await?;
        fired += report.triggers;
        if report.triggers > 0 {
            tracing::debug!(
                triggers = report.triggers,
                runs = report.runs,
                missed = report.missed,
                "fired"
            );
            firer.wakeups.runs.notify_one();
        }
        if report.triggers < batch as usize {
            return Ok(fired);
        }
        batch = next_batch(batch, firer.batch);
    }
}

/// What one batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FireReport {
    /// Triggers fired.
    pub triggers: usize,
    /// Runs inserted.
    pub runs: u64,
    /// Instants recorded as missed.
    pub missed: i64,
}

/// Fires one batch in one transaction. Runs of lock-free jobs that fit in this
/// executor's free capacity are inserted already running here and start at once (no
/// notification, no claim); the others are queued for any executor.
pub async fn fire_batch(firer: &Firer, batch: i64, ahead: Duration) -> Result<FireReport, StoreError> {
    let executor_id = firer.registry.id();
    let mut tx = firer.pool.begin().await?;
    let namespaces = firer.namespaces.as_deref();
    let due = triggers::claim_due_for(&mut tx, batch, ahead, namespaces).await?;
    let answered = tokio::time::Instant::now();
    let Some(now) = due.first().map(|due| due.db_now) else {
        tx.commit().await?;
        return Ok(FireReport::default());
    };
    // Instants up to the fire-ahead horizon are fired now and wait in the queue until
    // they come; lateness is judged as of the horizon.
    let horizon = now + TimeDelta::from_std(ahead).unwrap_or_default();
    let mut plans: Vec<TriggerPlan> = due
        .iter()
        .map(|due| plan_stored_trigger(&due.trigger, horizon))
        .collect();
    // Calendars, maintenance windows and `max_fires` hold instants back (skipped).
    let holds = holding::read(&mut tx, &due, horizon).await?;
    let mut skipped = Vec::new();
    for (due, plan) in due.iter().zip(plans.iter_mut()) {
        skipped.extend(holds.apply(due, plan, horizon));
    }
    // Unproven liveness (right after an outage): queue every run rather than start one
    // here that the start would stop at once, spending an attempt.
    let may_start_here = firer.registry.may_act(executor_id, firer.give_up_after);
    let mut slots = HashMap::new();
    let mut fired = FiredRuns::default();
    for (due, plan) in due.iter().zip(&plans) {
        for instant in &plan.fire {
            // A jittered run waits for its delay in the queue, a dependent one for its job.
            let waits = due.jitter_secs.is_some() || due.after_job_id.is_some();
            // A run fired ahead is held here until its instant when this executor can
            // take it; otherwise it waits in the queue for any executor.
            let ownable = may_start_here && due.lock_free && !waits && !due.fan_out;
            let slot = match (ownable, *instant > now) {
                (false, _) => None,
                (true, false) => Slot::try_take(&firer.slots),
                (true, true) => {
                    fired_ahead::slot_for(&firer.slots, firer.capacity, *instant - now, due.in_process)
                }
            };
            if due.fan_out {
                fired.push_fanned_out(due, *instant);
            } else {
                fired.push(due, *instant, slot.is_some());
            }
            if let Some(slot) = slot {
                slots.insert((due.trigger.id, *instant), slot);
            }
        }
    }
    let inserted = runs::insert_fired_runs(&mut tx, &fired, executor_id).await?;
    // Queued runs fired ahead need waking at their instants (a run meant to be held here
    // was queued instead when this executor is cordoned).
    let mut ahead_of_time: Vec<DateTime<Utc>> = inserted
        .iter()
        .filter(|run| run.state == RunState::Queued && run.scheduled_at > now)
        .map(|run| run.scheduled_at)
        .collect();
    ahead_of_time.extend(delay_jittered_runs(&mut tx, &due, &inserted).await?);
    hold_dependent_runs(&mut tx, &due, &inserted).await?;
    let missed: Vec<MissedInstants> = plans.iter().filter_map(|plan| plan.missed.clone()).collect();
    triggers::record_misfires(&mut tx, &missed).await?;
    triggers::record_misfires(&mut tx, &skipped).await?;
    count_fires(&mut tx, &due, &plans).await?;
    let ids: Vec<i64> = due.iter().map(|due| due.trigger.id).collect();
    let nexts: Vec<Option<DateTime<Utc>>> = plans.iter().map(|plan| plan.next).collect();
    triggers::advance(&mut tx, &ids, &nexts, now).await?;
    triggers::announce_runs_at(&mut tx, &crowded_instants(&ahead_of_time)).await?;
    tx.commit().await?;
    let ahead_millis: Vec<i64> = ahead_of_time.iter().map(DateTime::timestamp_millis).collect();
    wakeup::wake_runs_at(&firer.wakeups, &firer.shutdown, &ahead_millis);

    metrics::counter!("probactr_fires_total").increment(inserted.len() as u64);
    metrics::counter!("probactr_missed_instants_total")
        .increment(missed.iter().map(|m| m.count as u64).sum());
    for missed in &missed {
        tracing::info!(trigger.id = missed.trigger_id, job.id = missed.job_id, count = missed.count,
            policy = %missed.policy, reason = %missed.reason, "instants missed");
    }
    for skipped in &skipped {
        tracing::info!(trigger.id = skipped.trigger_id, job.id = skipped.job_id, count = skipped.count,
            reason = %skipped.reason, "instants skipped");
    }
    if probactr_common::telemetry::tracing_on() {
        trace_fires(&inserted);
    }
    let runs = inserted.len() as u64;
    let versions: HashMap<i64, i64> = due
        .iter()
        .map(|due| (due.trigger.job_id, due.job_version))
        .collect();
    let clock = FiringClock {
        db_now: now,
        answered,
    };
    start_owned_runs(firer, inserted, &versions, slots, executor_id, clock).await;
    Ok(FireReport {
        triggers: due.len(),
        runs,
        missed: missed.iter().map(|m| m.count).sum(),
    })
}

/// Delays the inserted runs of jittered triggers (see [`holding::jitter_of`]); returns
/// the instants they become claimable at.
async fn delay_jittered_runs(
    conn: &mut sqlx::PgConnection,
    due: &[triggers::DueTrigger],
    inserted: &[Run],
) -> Result<Vec<DateTime<Utc>>, StoreError> {
    if due.iter().all(|due| due.jitter_secs.is_none()) {
        return Ok(Vec::new());
    }
    let jittered: HashMap<i64, &triggers::DueTrigger> = due
        .iter()
        .filter(|due| due.jitter_secs.is_some())
        .map(|due| (due.trigger.id, due))
        .collect();
    let mut ids = Vec::new();
    let mut delays = Vec::new();
    let mut claimable = Vec::new();
    for run in inserted.iter().filter(|run| run.state == RunState::Queued) {
        let Some(due) = run.trigger_id.and_then(|id| jittered.get(&id)) else {
            continue;
        };
        let Some(delay) = holding::jitter_of(due, run.scheduled_at) else {
            continue;
        };
        ids.push(run.id);
        delays.push(delay.num_seconds());
        claimable.push(run.scheduled_at + delay);
    }
    runs::delay_by_jitter(conn, &ids, &delays).await?;
    Ok(claimable)
}

/// Holds the inserted runs of triggers with `after` until the job they wait for has
/// succeeded (see `runs::upstream`). Without such a trigger in the batch, nothing is done.
async fn hold_dependent_runs(
    conn: &mut sqlx::PgConnection,
    due: &[triggers::DueTrigger],
    inserted: &[Run],
) -> Result<(), StoreError> {
    if due.iter().all(|due| due.after_job_id.is_none()) {
        return Ok(());
    }
    let dependent: Vec<i64> = due
        .iter()
        .filter(|due| due.after_job_id.is_some())
        .map(|due| due.trigger.id)
        .collect();
    let held: Vec<i64> = inserted
        .iter()
        .filter(|run| run.state == RunState::Queued)
        .filter(|run| run.trigger_id.is_some_and(|id| dependent.contains(&id)))
        .map(|run| run.id)
        .collect();
    runs::hold_for_upstream(conn, &held).await
}

/// Counts the instants fired by the triggers that end after a number of them.
async fn count_fires(
    conn: &mut sqlx::PgConnection,
    due: &[triggers::DueTrigger],
    plans: &[TriggerPlan],
) -> Result<(), StoreError> {
    let mut ids = Vec::new();
    let mut fired = Vec::new();
    let mut last = Vec::new();
    for (due, plan) in due.iter().zip(plans) {
        if let (Some(_), Some(latest)) = (due.max_fires, plan.fire.last()) {
            ids.push(due.trigger.id);
            fired.push(plan.fire.len() as i64);
            last.push(*latest);
        }
    }
    triggers::count_fires(conn, &ids, &fired, &last).await
}

/// The fire of each inserted run: the root span of its trace, at its insertion.
fn trace_fires(inserted: &[Run]) {
    let fired_at = std::time::SystemTime::now();
    for run in inserted {
        if let Some(trace) = RunTrace::of(run) {
            let attributes = vec![
                KeyValue::new("run.id", run.id),
                KeyValue::new("job.id", run.job_id),
                KeyValue::new("trigger.id", run.trigger_id.unwrap_or_default()),
                KeyValue::new("scheduled_at", run.scheduled_at.to_rfc3339()),
            ];
            let fire = Timed {
                start: run.queued_at.into(),
                end: fired_at,
                attributes,
            };
            trace.root_span("fire", fire);
        }
    }
}

/// Instants that get more runs than this executor alone should start: peers are told
/// of those (an aligned storm); this executor claims the runs of the others itself,
/// sparing its peers a wake-up that would find nothing.
const CROWDED: usize = 32;

fn crowded_instants(instants: &[DateTime<Utc>]) -> Vec<DateTime<Utc>> {
    let mut counts: HashMap<DateTime<Utc>, usize> = HashMap::new();
    for instant in instants {
        *counts.entry(*instant).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|(_, count)| *count >= CROWDED)
        .map(|(instant, _)| instant)
        .collect()
}

/// Starts the fired runs this executor owns, each with the slot taken for its instant
/// (slots left over, for instants that already had a run, are given back): at once, or
/// at its instant for a run fired ahead ([`fired_ahead`]).
async fn start_owned_runs(
    firer: &Firer,
    inserted: Vec<Run>,
    versions: &HashMap<i64, i64>,
    mut slots: HashMap<(i64, DateTime<Utc>), Slot>,
    executor_id: Uuid,
    clock: FiringClock,
) {
    let owned: Vec<Run> = inserted
        .into_iter()
        .filter(|run| run.state == RunState::Running)
        .collect();
    if owned.is_empty() {
        return;
    }
    let wanted: Vec<(i64, i64)> = owned
        .iter()
        .filter_map(|run| Some((run.job_id, *versions.get(&run.job_id)?)))
        .collect();
    let jobs = match firer.job_cache.get(&firer.pool, &wanted).await {
        Ok(jobs) => jobs,
        Err(err) => {
            // The runs stay running without an attempt; the monitor treats them as stuck.
            tracing::error!(error = %err, runs = owned.len(), "cannot read the jobs of fired runs");
            return;
        }
    };
    let mut held = Vec::new();
    for run in owned {
        let slot = run
            .trigger_id
            .and_then(|trigger_id| slots.remove(&(trigger_id, run.scheduled_at)));
        let (Some(job), Some(slot)) = (jobs.get(&run.job_id).cloned(), slot) else {
            continue;
        };
        if run.scheduled_at > clock.db_now {
            held.push((run, job, slot));
            continue;
        }
        // A fired run's end is written by the recorder alone (whatever quota it holds).
        attempt::spawn(&firer.attempts, run, job, executor_id, slot, true);
    }
    fired_ahead::hold(&firer.attempts, &firer.slots, held, executor_id, clock);
}

/// What firing does with one due trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerPlan {
    /// Instants that get a run.
    pub fire: Vec<DateTime<Utc>>,
    /// Instants that do not, counted, with the reason.
    pub missed: Option<MissedInstants>,
    /// The trigger's next instant (None: it has none left).
    pub next: Option<DateTime<Utc>>,
}

fn plan_stored_trigger(trigger: &Trigger, now: DateTime<Utc>) -> TriggerPlan {
    match TriggerSchedule::from_trigger(trigger) {
        Ok(schedule) => plan_trigger(trigger, &schedule, now),
        Err(err) => {
            tracing::error!(trigger.id = trigger.id, error = %err, "stored trigger has an invalid schedule; it stops firing");
            let instant = trigger.next_fire_at.unwrap_or(now);
            TriggerPlan {
                fire: Vec::new(),
                missed: Some(MissedInstants::of(
                    trigger,
                    instant,
                    instant,
                    1,
                    format!("invalid schedule: {err}"),
                )),
                next: None,
            }
        }
    }
}

/// Decides which of a due trigger's instants run (see the module doc for the rules).
pub fn plan_trigger(trigger: &Trigger, schedule: &TriggerSchedule, now: DateTime<Utc>) -> TriggerPlan {
    let next = schedule.next_after(now);
    let Some(first) = trigger.next_fire_at.filter(|first| *first <= now) else {
        return TriggerPlan {
            fire: Vec::new(),
            missed: None,
            next: trigger.next_fire_at.or(next),
        };
    };
    let threshold = now - TimeDelta::seconds(i64::from(trigger.timing.misfire_threshold_secs));
    // Instants in [first, threshold) are late; those in [threshold, now] are timely.
    let just_before_threshold = threshold - TimeDelta::microseconds(1);
    let (late, late_total) = if first < threshold {
        let rest = schedule.between(first, just_before_threshold, FIRE_ALL_CAP);
        (prepend(first, rest.instants), rest.total + 1)
    } else {
        (Vec::new(), 0)
    };
    let timely = if first >= threshold {
        let rest = schedule.between(first, now, TIMELY_CAP - 1);
        Instants {
            total: rest.total + 1,
            instants: prepend(first, rest.instants),
        }
    } else {
        let rest = schedule.between(just_before_threshold, now, TIMELY_CAP);
        Instants {
            total: rest.total,
            instants: rest.instants,
        }
    };
    let mut fire = timely.instants;
    let mut missed_count = timely.total.saturating_sub(fire.len() as u64);
    let mut reason = String::from("more instants due at once than one firing runs");
    if late_total > 0 {
        let run_late: Vec<DateTime<Utc>> = match trigger.timing.misfire {
            Misfire::FireOnce if fire.is_empty() => late.last().copied().into_iter().collect(),
            Misfire::FireOnce | Misfire::Skip => Vec::new(),
            Misfire::FireAll => late.iter().copied().take(FIRE_ALL_CAP).collect(),
        };
        missed_count += late_total - run_late.len() as u64;
        reason = format!(
            "misfired: later than {}s after their instant (policy {})",
            trigger.timing.misfire_threshold_secs, trigger.timing.misfire
        );
        fire.splice(0..0, run_late);
    }
    let missed = (missed_count > 0).then(|| {
        let last_missed = late.last().copied().unwrap_or(first);
        MissedInstants::of(trigger, first, last_missed, missed_count as i64, reason)
    });
    TriggerPlan { fire, missed, next }
}

struct Instants {
    instants: Vec<DateTime<Utc>>,
    total: u64,
}

fn prepend(first: DateTime<Utc>, mut rest: Vec<DateTime<Utc>>) -> Vec<DateTime<Utc>> {
    rest.insert(0, first);
    rest
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use probactr_common::model::TriggerTiming;

    use super::*;

    #[test]
    fn a_pass_starts_with_half_the_last_one_and_doubles_its_batches_up_to_the_configured_one() {
        let mut batches = vec![first_batch_after(0, 2000)];
        while batches.len() < 5 {
            batches.push(next_batch(*batches.last().unwrap_or(&0), 2000));
        }
        assert_eq!(batches, [500, 1000, 2000, 2000, 2000]);
        assert_eq!(first_batch_after(1000, 2000), 500, "a moderate instant is shared");
        assert_eq!(first_batch_after(3000, 2000), 1500);
        assert_eq!(
            first_batch_after(9000, 2000),
            2000,
            "a storm keeps its full batches"
        );
        assert_eq!(
            first_batch_after(9000, 100),
            100,
            "a smaller configured batch is kept"
        );
        assert_eq!(next_batch(100, 100), 100);
    }

    #[test]
    fn the_window_widens_while_passes_take_long_up_to_a_second() {
        let ms = Duration::from_millis;
        let mut window = FireWindow::new(ms(500));
        assert_eq!(window.now, WIDEST_WINDOW, "wide until a pass fired something");
        assert_eq!(window.lead, ms(800), "and starting passes as early as it may");
        window.after_pass(ms(30));
        assert_eq!(window.now, ms(500), "a short pass keeps the configured window");
        window.after_pass(ms(200));
        assert_eq!(window.now, ms(800), "four times a long pass");
        assert_eq!(window.lead, ms(400), "a pass starts twice its length ahead");
        window.after_pass(ms(400));
        assert_eq!(window.now, WIDEST_WINDOW);
        assert_eq!(window.lead, ms(800), "still twice the pass at the widest window");
        window.after_pass(ms(700));
        assert_eq!(window.lead, ms(800), "never beyond four fifths of the window");
        window.after_pass(ms(10));
        assert_eq!(window.now, ms(500), "back once passes are short again");
        assert_eq!(window.lead, ms(250), "half the window");
        let mut at_instants = FireWindow::new(Duration::ZERO);
        assert_eq!(at_instants.now, Duration::ZERO);
        at_instants.after_pass(ms(600));
        assert_eq!(at_instants.now, Duration::ZERO, "firing at the instants stays so");
        assert_eq!(at_instants.lead, Duration::ZERO);
        let mut wide = FireWindow::new(Duration::from_secs(5));
        wide.after_pass(ms(600));
        assert_eq!(wide.now, Duration::from_secs(5));
        assert_eq!(wide.lead, ms(2500));
    }

    /// An interval trigger every `every` seconds from the epoch second 0, whose next
    /// instant is `next` and whose misfire threshold is `threshold` seconds.
    fn every(every: i64, next: i64, threshold: i32, misfire: Misfire) -> (Trigger, TriggerSchedule) {
        let timing = TriggerTiming {
            start_at: Some(at(0)),
            misfire,
            misfire_threshold_secs: threshold,
            ..TriggerTiming::interval(every)
        };
        let trigger = Trigger {
            next_fire_at: Some(at(next)),
            ..Trigger::created(7, 3, timing, at(0))
        };
        let schedule = TriggerSchedule::from_trigger(&trigger).expect("valid schedule");
        (trigger, schedule)
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0)
            .single()
            .expect("valid instant")
    }

    #[test]
    fn a_due_instant_fires_once_and_the_next_one_follows() {
        let (trigger, schedule) = every(10, 100, 60, Misfire::FireOnce);
        let plan = plan_trigger(&trigger, &schedule, at(100));
        assert_eq!(plan.fire, [at(100)]);
        assert_eq!(plan.missed, None);
        assert_eq!(plan.next, Some(at(110)));
    }

    #[test]
    fn an_instant_not_yet_due_does_not_fire() {
        let (trigger, schedule) = every(10, 100, 60, Misfire::FireOnce);
        let plan = plan_trigger(&trigger, &schedule, at(99));
        assert!(plan.fire.is_empty() && plan.missed.is_none());
        assert_eq!(plan.next, Some(at(100)), "the stored next instant stays");
    }

    #[test]
    fn timely_instants_after_a_pause_all_fire() {
        // Due since 100, now 130, threshold 60: 100..=130 are all within the threshold.
        let (trigger, schedule) = every(10, 100, 60, Misfire::Skip);
        let plan = plan_trigger(&trigger, &schedule, at(130));
        assert_eq!(plan.fire, [at(100), at(110), at(120), at(130)]);
        assert_eq!(plan.missed, None);
        assert_eq!(plan.next, Some(at(140)));
    }

    #[test]
    fn late_instants_follow_the_misfire_policy_and_are_counted() {
        // Due since 0, now 100, threshold 30: 0..=60 are late (7), 70..=100 timely (4).
        let timely = [at(70), at(80), at(90), at(100)];
        for (policy, late_run) in [
            (Misfire::Skip, vec![]),
            (Misfire::FireOnce, vec![]),
            (Misfire::FireAll, (0..=6).map(|k| at(10 * k)).collect::<Vec<_>>()),
        ] {
            let (trigger, schedule) = every(10, 0, 30, policy);
            let plan = plan_trigger(&trigger, &schedule, at(100));
            let expected: Vec<DateTime<Utc>> = late_run.iter().copied().chain(timely).collect();
            assert_eq!(plan.fire, expected, "{policy}");
            let missed = 7 - late_run.len() as i64;
            match plan.missed {
                Some(m) => {
                    assert_eq!((m.count, m.first, m.policy), (missed, at(0), policy), "{policy}");
                    assert!(m.reason.contains("misfired"), "{}", m.reason);
                }
                None => assert_eq!(missed, 0, "{policy}"),
            }
            assert_eq!(plan.next, Some(at(110)));
        }
    }

    #[test]
    fn fire_once_runs_the_latest_late_instant_when_nothing_is_timely() {
        // Due since 0, now 95, threshold 3: every instant up to 90 is late, none timely.
        let (trigger, schedule) = every(10, 0, 3, Misfire::FireOnce);
        let plan = plan_trigger(&trigger, &schedule, at(95));
        assert_eq!(plan.fire, [at(90)]);
        let missed = plan.missed.expect("the others are counted");
        assert_eq!((missed.count, missed.first, missed.last), (9, at(0), at(90)));
    }

    #[test]
    fn more_timely_instants_than_one_firing_runs_are_counted_as_missed() {
        let (trigger, schedule) = every(1, 0, 100_000, Misfire::FireAll);
        let plan = plan_trigger(&trigger, &schedule, at(TIMELY_CAP as i64 + 9));
        assert_eq!(plan.fire.len(), TIMELY_CAP);
        assert_eq!(plan.missed.map(|m| m.count), Some(10));
    }
}
