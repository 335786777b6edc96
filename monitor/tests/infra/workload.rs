//! The workload of the fault suite, its observable effects, and the invariant check.
//!
//! # Jobs that leave their own evidence
//!
//! Every job is a non-parallel `shell` job running a small bash script that appends one
//! line to an effects log when it starts (`S`), every tick while it works (`T`) and when
//! it finishes (`E`): its key, run id, fencing token, attempt, process id (also its
//! process group: the executor makes every job a group leader) and the wall-clock time
//! in microseconds. The log is written by the jobs themselves, so the check below sees
//! what really ran, independently of probactr's tables.
//!
//! # The invariants checked at the end of every scenario
//!
//! - **No instant ran twice**: per trigger instant, at most one first attempt (the
//!   database's unique index), at most one succeeded attempt, and at most one attempt
//!   whose job reached its end (`E`) by the effects log.
//! - **No instant lost without a recorded reason**: every instant of every interval
//!   trigger up to the cutoff has a run chain whose last attempt is terminal (succeeded,
//!   or failed/skipped/missed/abandoned/... with its reason), or lies inside a `misfires`
//!   row of its trigger.
//! - **No overlap of a non-parallel job**: the job's effect intervals (first to last line
//!   of each attempt) never overlap. A paused process resumed after its lease can emit
//!   a line or two before its executor's stop point kills it; those lines carry a stale
//!   fencing token, and a resource that checks fences (as docs/design.md asks of job effects)
//!   rejects them. So overlap is counted on the lines such a resource accepts (a line is
//!   accepted when its fence is at least the highest fence seen for that job), and the
//!   rejected ("stale") lines are counted apart; scenarios without pauses require none.
//! - **Every run terminal** once the triggers are paused and the cluster settles.
//! - Every succeeded run has a start and an end line in the effects log (a run
//!   recorded as succeeded really ran).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use probactr_common::model::{JobKind, Misfire, Overlap, Run, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::runs;
use probactr_common::store::triggers::{self, NewTrigger};
use serde_json::json;
use sqlx::PgPool;

use crate::support::eventually;

/// The job's script: `$1` key, `$2` ticks, `$3` seconds per tick, `$4` the effects log.
const SCRIPT: &str = r#"k=$1; n=$2; tick=$3; log=$4
w() { printf '%s %s %s %s %s %s %s\n' "$1" "$k" "$PROBACTR_RUN_ID" "${PROBACTR_FENCE:--}" "$PROBACTR_ATTEMPT" "$$" "${EPOCHREALTIME/./}" >> "$log"; }
w S
i=0
while [ "$i" -lt "$n" ]; do sleep "$tick"; w T; i=$((i+1)); done
w E
"#;

/// One job of a workload and its trigger.
#[derive(Debug, Clone)]
pub struct JobPlan {
    pub name: String,
    /// Interval trigger period; None: no trigger (runs are queued by the test).
    pub every_secs: Option<i64>,
    /// How long the job works.
    pub work: Duration,
    /// How often it leaves a line while working.
    pub tick: Duration,
    pub overlap: Overlap,
    /// Attempts in all (retry policy), with no backoff.
    pub attempts: i32,
    pub misfire: Misfire,
    pub misfire_threshold_secs: i32,
}

impl JobPlan {
    /// A job fired every `secs` seconds that works for `work_ms`.
    pub fn every(name: &str, secs: i64, work_ms: u64) -> JobPlan {
        JobPlan {
            name: name.to_owned(),
            every_secs: Some(secs),
            work: Duration::from_millis(work_ms),
            tick: Duration::from_millis(100),
            overlap: Overlap::Queue,
            attempts: 2,
            misfire: Misfire::FireOnce,
            misfire_threshold_secs: 60,
        }
    }

    /// A job without a trigger, run when the test queues it.
    pub fn on_demand(name: &str, work_ms: u64) -> JobPlan {
        JobPlan {
            every_secs: None,
            ..JobPlan::every(name, 1, work_ms)
        }
    }

    pub fn overlap(mut self, overlap: Overlap) -> JobPlan {
        self.overlap = overlap;
        self
    }

    pub fn misfire(mut self, policy: Misfire, threshold_secs: i32) -> JobPlan {
        self.misfire = policy;
        self.misfire_threshold_secs = threshold_secs;
        self
    }

    pub fn attempts(mut self, attempts: i32) -> JobPlan {
        self.attempts = attempts;
        self
    }
}

/// A job as created.
#[derive(Debug, Clone)]
pub struct PlannedJob {
    pub plan: JobPlan,
    pub job_id: i64,
    pub trigger_id: Option<i64>,
}

/// The jobs of a scenario and where their effects go.
pub struct Workload {
    pub log: PathBuf,
    pub jobs: Vec<PlannedJob>,
}

impl Workload {
    /// Creates the jobs and their triggers (non-parallel, effects into `log`).
    pub async fn create(pool: &PgPool, log: &Path, plans: &[JobPlan]) -> Workload {
        std::fs::write(log, "").expect("create the effects log");
        let mut jobs = Vec::new();
        for plan in plans {
            let ticks = (plan.work.as_millis() / plan.tick.as_millis().max(1)).max(1);
            let spec = json!({
                "program": "bash",
                "args": ["-c", SCRIPT, "bash", plan.name, ticks.to_string(),
                         format!("{:.3}", plan.tick.as_secs_f64()), log.display().to_string()],
                // A process with a faked clock (the clock test) must not fake the job's.
                "env": { "LD_PRELOAD": "", "FAKETIME": "" },
            });
            let mut job = NewJob::new(&plan.name, JobKind::Shell, spec);
            job.overlap = plan.overlap;
            job.retry_max_attempts = plan.attempts;
            job.retry_backoff_secs = 0;
            job.timeout_secs = 120;
            let job = jobs::insert(pool, &job).await.expect("insert job");
            let trigger_id = match plan.every_secs {
                Some(secs) => {
                    let mut trigger = NewTrigger::interval(secs);
                    trigger.timing.misfire = plan.misfire;
                    trigger.timing.misfire_threshold_secs = plan.misfire_threshold_secs;
                    let created = triggers::create(pool, job.id, &trigger, db_now(pool).await)
                        .await
                        .expect("create trigger");
                    Some(created.id)
                }
                None => None,
            };
            jobs.push(PlannedJob {
                plan: plan.clone(),
                job_id: job.id,
                trigger_id,
            });
        }
        Workload {
            log: log.to_owned(),
            jobs,
        }
    }

    pub fn job(&self, name: &str) -> &PlannedJob {
        self.jobs
            .iter()
            .find(|job| job.plan.name == name)
            .unwrap_or_else(|| panic!("no job {name}"))
    }

    /// Queues a run of `name` now; returns its id.
    pub async fn queue_now(&self, pool: &PgPool, name: &str) -> i64 {
        runs::queue_now(pool, self.job(name).job_id)
            .await
            .expect("queue a run")
            .id
    }

    pub fn effects(&self) -> Vec<Effect> {
        read_effects(&self.log)
    }

    /// The effects of one run.
    pub fn effects_of(&self, run_id: i64) -> Vec<Effect> {
        self.effects()
            .into_iter()
            .filter(|e| e.run_id == run_id)
            .collect()
    }

    /// Waits until every trigger has fired its instants up to a cutoff (now − 1 s by the
    /// database's clock), pauses the triggers, and waits until every run is terminal.
    /// Returns the cutoff.
    pub async fn wind_down(&self, pool: &PgPool, within: Duration) -> DateTime<Utc> {
        let cutoff = db_now(pool).await - TimeDelta::seconds(1);
        eventually(
            Duration::from_secs(30),
            "every trigger fired its instants up to the cutoff",
            || async {
                let behind: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM triggers WHERE NOT paused AND next_fire_at <= $1",
                )
                .bind(cutoff)
                .fetch_one(pool)
                .await
                .ok()?;
                (behind == 0).then_some(())
            },
        )
        .await;
        for job in &self.jobs {
            if let Some(trigger_id) = job.trigger_id {
                triggers::set_paused(pool, trigger_id, true)
                    .await
                    .expect("pause trigger");
            }
        }
        eventually(within, "every run terminal", || async {
            let active: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM runs WHERE state IN ('queued', 'claimed', 'running')",
            )
            .fetch_one(pool)
            .await
            .ok()?;
            (active == 0).then_some(())
        })
        .await;
        cutoff
    }

    /// Checks the invariants over everything the scenario did.
    pub async fn check(&self, pool: &PgPool, cutoff: DateTime<Utc>) -> Report {
        let all_runs: Vec<Run> = sqlx::query_as("SELECT * FROM runs ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("read runs");
        let trigger_rows: Vec<(i64, DateTime<Utc>, i64)> =
            sqlx::query_as("SELECT id, created_at, interval_secs FROM triggers WHERE kind = 'interval'")
                .fetch_all(pool)
                .await
                .expect("read triggers");
        let misfires: Vec<(i64, DateTime<Utc>, DateTime<Utc>, i64)> =
            sqlx::query_as("SELECT trigger_id, first_instant, last_instant, instants FROM misfires")
                .fetch_all(pool)
                .await
                .expect("read misfires");
        let reaps: i64 =
            sqlx::query_scalar("SELECT count(*) FROM executors WHERE role = 'executor' AND state = 'dead'")
                .fetch_one(pool)
                .await
                .expect("count reaps");
        let effects = self.effects();
        let mut report = analyse(&all_runs, &trigger_rows, &misfires, &effects, cutoff);
        report.reaps = reaps;
        report
    }
}

/// PostgreSQL's clock.
pub async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(pool)
        .await
        .expect("read the database clock")
}

/// One line of the effects log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// `S`tart, `T`ick or `E`nd.
    pub kind: char,
    pub key: String,
    pub run_id: i64,
    pub fence: Option<i64>,
    pub attempt: i32,
    /// The job's process id, which is also its process group id.
    pub pid: i32,
    /// Wall clock, microseconds since the epoch.
    pub at_us: i64,
}

impl Effect {
    pub fn at(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.at_us).expect("a valid timestamp")
    }
}

pub fn read_effects(log: &Path) -> Vec<Effect> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut effects: Vec<Effect> = text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() != 7 {
                return None;
            }
            Some(Effect {
                kind: fields[0].chars().next()?,
                key: fields[1].to_owned(),
                run_id: fields[2].parse().ok()?,
                fence: fields[3].parse().ok(),
                attempt: fields[4].parse().ok()?,
                pid: fields[5].parse().ok()?,
                at_us: fields[6].parse().ok()?,
            })
        })
        .collect();
    effects.sort_by_key(|effect| effect.at_us);
    effects
}

/// Microseconds since the epoch of a timestamp.
pub fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// What the effects log says about one attempt.
#[derive(Debug, Clone, Default)]
pub struct AttemptEffects {
    pub key: String,
    pub pid: i32,
    pub fence: Option<i64>,
    pub first_us: i64,
    pub last_us: i64,
    pub started: bool,
    pub ended: bool,
    /// The same, counting only the lines a fence-checking resource accepts.
    pub accepted_first_us: Option<i64>,
    pub accepted_last_us: Option<i64>,
    pub accepted_end: bool,
    pub stale_lines: usize,
}

/// Folds the effects log into one summary per run id, applying the fencing model.
pub fn per_attempt(effects: &[Effect]) -> BTreeMap<i64, AttemptEffects> {
    let mut highest_fence: HashMap<&str, i64> = HashMap::new();
    let mut attempts: BTreeMap<i64, AttemptEffects> = BTreeMap::new();
    for effect in effects {
        let accepted = match effect.fence {
            Some(fence) => {
                let highest = highest_fence.entry(&effect.key).or_insert(fence);
                if fence >= *highest {
                    *highest = fence;
                    true
                } else {
                    false
                }
            }
            None => true,
        };
        let entry = attempts.entry(effect.run_id).or_insert_with(|| AttemptEffects {
            key: effect.key.clone(),
            pid: effect.pid,
            fence: effect.fence,
            first_us: effect.at_us,
            ..AttemptEffects::default()
        });
        entry.last_us = effect.at_us;
        entry.started |= effect.kind == 'S';
        entry.ended |= effect.kind == 'E';
        if accepted {
            entry.accepted_first_us.get_or_insert(effect.at_us);
            entry.accepted_last_us = Some(effect.at_us);
            entry.accepted_end |= effect.kind == 'E';
        } else {
            entry.stale_lines += 1;
        }
    }
    attempts
}

/// The most intervals that cover one instant (touching ends do not overlap).
pub fn max_overlap(intervals: &[(i64, i64)]) -> usize {
    let mut events: Vec<(i64, i32)> = intervals
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    events.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        max = max.max(now);
    }
    max as usize
}

/// The outcome of the invariant check, and the figures of the chaos summary.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub instants_expected: usize,
    /// Instants with a succeeded attempt.
    pub instants_succeeded: usize,
    /// Instants that did not succeed but have a recorded reason (a terminal run or a
    /// misfire record).
    pub instants_recorded: usize,
    /// Instants inside misfire records (a subset of the recorded ones).
    pub instants_misfired: usize,
    /// Attempts whose job started (a start line in the effects log).
    pub runs_executed: usize,
    pub duplicates: Vec<String>,
    /// Instants whose job completed twice because the first completion was never
    /// recorded (its executor was reaped first) and the retry policy ran it again.
    pub reexecuted: usize,
    pub losses: Vec<String>,
    pub not_terminal: Vec<String>,
    pub unwitnessed: Vec<String>,
    pub unexpected: Vec<String>,
    /// Overlap of a job's attempts as a fence-checking resource sees it.
    pub max_overlap: usize,
    /// Overlap counting every line, stale ones included.
    pub max_overlap_raw: usize,
    pub stale_lines: usize,
    pub stale_runs: BTreeSet<i64>,
    pub reaps: i64,
    /// The longest time from an abandoned attempt's last sign of life to its retry's start.
    pub longest_failover: Option<Duration>,
    pub states: BTreeMap<String, usize>,
}

impl Report {
    /// Panics, with the details, if an invariant does not hold.
    pub fn assert_invariants(&self) {
        let mut problems = String::new();
        let mut note = |what: &str, list: &[String]| {
            if !list.is_empty() {
                let shown: Vec<&String> = list.iter().take(20).collect();
                let _ = writeln!(problems, "{} {what}: {shown:#?}", list.len());
            }
        };
        note("duplicated instants", &self.duplicates);
        note("lost instants", &self.losses);
        note("runs not terminal", &self.not_terminal);
        note("succeeded runs the effects log does not show", &self.unwitnessed);
        note("runs off the triggers' schedules", &self.unexpected);
        if self.max_overlap > 1 {
            let _ = writeln!(
                problems,
                "a non-parallel job ran {} attempts at once",
                self.max_overlap
            );
        }
        assert!(self.instants_expected > 0, "the workload had no instants");
        assert!(
            problems.is_empty(),
            "invariants broken:\n{problems}\n{}",
            self.table()
        );
    }

    /// Panics if any job line came from a stale holder (scenarios without pauses).
    pub fn assert_no_stale_effects(&self) {
        assert_eq!(
            (self.stale_lines, self.max_overlap_raw.max(1)),
            (0, 1),
            "stale effects from runs {:?}\n{}",
            self.stale_runs,
            self.table()
        );
    }

    pub fn table(&self) -> String {
        let failover = self
            .longest_failover
            .map(|d| format!("{:.2}s", d.as_secs_f64()))
            .unwrap_or_else(|| "-".to_owned());
        let rows = [
            ("instants expected", self.instants_expected.to_string()),
            ("  succeeded", self.instants_succeeded.to_string()),
            (
                "  not run, reason recorded",
                format!(
                    "{} ({} in misfire records)",
                    self.instants_recorded, self.instants_misfired
                ),
            ),
            ("runs executed (attempts started)", self.runs_executed.to_string()),
            ("duplicates", self.duplicates.len().to_string()),
            ("re-run after an unrecorded end", self.reexecuted.to_string()),
            ("losses", self.losses.len().to_string()),
            ("runs not terminal", self.not_terminal.len().to_string()),
            ("max overlap (fenced effects)", self.max_overlap.to_string()),
            ("max overlap (raw effects)", self.max_overlap_raw.to_string()),
            (
                "stale effect lines (fenced off)",
                format!("{} from {} runs", self.stale_lines, self.stale_runs.len()),
            ),
            ("executors reaped", self.reaps.to_string()),
            ("longest failover", failover),
            ("run states", format!("{:?}", self.states)),
        ];
        let mut table =
            String::from("+----------------------------------+----------------------------------------+\n");
        for (name, value) in rows {
            let _ = writeln!(table, "| {name:<32} | {value:<38} |");
        }
        table.push_str("+----------------------------------+----------------------------------------+");
        table
    }
}

fn terminal(state: RunState) -> bool {
    !matches!(state, RunState::Queued | RunState::Claimed | RunState::Running)
}

/// The check itself, over rows already read.
pub fn analyse(
    all_runs: &[Run],
    triggers: &[(i64, DateTime<Utc>, i64)],
    misfires: &[(i64, DateTime<Utc>, DateTime<Utc>, i64)],
    effects: &[Effect],
    cutoff: DateTime<Utc>,
) -> Report {
    let mut report = Report::default();
    let attempts = per_attempt(effects);
    for run in all_runs {
        *report.states.entry(run.state.to_string()).or_default() += 1;
        if !terminal(run.state) {
            report
                .not_terminal
                .push(format!("run {} ({}) is {}", run.id, run.job_id, run.state));
        }
        if run.state == RunState::Succeeded {
            let seen = attempts.get(&run.id);
            if !seen.is_some_and(|a| a.started && a.ended) {
                report
                    .unwitnessed
                    .push(format!("run {} succeeded; effects: {seen:?}", run.id));
            }
        }
    }
    report.runs_executed = attempts.values().filter(|a| a.started).count();

    // Instants, trigger by trigger.
    let mut chains: HashMap<(i64, DateTime<Utc>), Vec<&Run>> = HashMap::new();
    for run in all_runs {
        if let Some(trigger_id) = run.trigger_id {
            chains
                .entry((trigger_id, run.scheduled_at))
                .or_default()
                .push(run);
        }
    }
    let mut expected: BTreeSet<(i64, DateTime<Utc>)> = BTreeSet::new();
    for &(trigger_id, anchor, every) in triggers {
        let mut instant = anchor;
        while instant <= cutoff {
            expected.insert((trigger_id, instant));
            instant += TimeDelta::seconds(every);
        }
    }
    report.instants_expected = expected.len();
    for &(trigger_id, instant) in &expected {
        let chain = chains.get(&(trigger_id, instant)).cloned().unwrap_or_default();
        let misfired = misfires
            .iter()
            .any(|&(t, first, last, _)| t == trigger_id && first <= instant && instant <= last);
        if chain.is_empty() {
            if misfired {
                report.instants_recorded += 1;
                report.instants_misfired += 1;
            } else {
                report.losses.push(format!(
                    "trigger {trigger_id} instant {instant}: no run, no misfire record"
                ));
            }
            continue;
        }
        let first_attempts = chain.iter().filter(|run| run.attempt == 1).count();
        let succeeded = chain
            .iter()
            .filter(|run| run.state == RunState::Succeeded)
            .count();
        let completed: Vec<&&Run> = chain
            .iter()
            .filter(|run| attempts.get(&run.id).is_some_and(|a| a.accepted_end))
            .collect();
        // A completed attempt recorded as succeeded is one execution the cluster knew of;
        // one recorded otherwise (its executor was reaped before it could record the end)
        // was retried by policy: the at-least-once cost of losing an executor, counted
        // apart. Two first attempts or two successes are duplicates.
        let known_completions = completed
            .iter()
            .filter(|run| run.state == RunState::Succeeded)
            .count();
        if first_attempts > 1 || succeeded > 1 || known_completions > 1 {
            report.duplicates.push(format!(
                "trigger {trigger_id} instant {instant}: {first_attempts} first attempts, \
                 {succeeded} succeeded, {} completed by the effects log (runs {:?})",
                completed.len(),
                chain.iter().map(|run| run.id).collect::<Vec<_>>()
            ));
        } else if completed.len() > 1 {
            report.reexecuted += 1;
        }
        if succeeded > 0 {
            report.instants_succeeded += 1;
        } else if chain.iter().all(|run| terminal(run.state)) {
            report.instants_recorded += 1;
        }
    }
    let interval_triggers: BTreeSet<i64> = triggers.iter().map(|&(id, _, _)| id).collect();
    for (&(trigger_id, instant), chain) in &chains {
        if instant <= cutoff
            && interval_triggers.contains(&trigger_id)
            && !expected.contains(&(trigger_id, instant))
        {
            report.unexpected.push(format!(
                "trigger {trigger_id} instant {instant}: runs {:?}",
                chain.iter().map(|run| run.id).collect::<Vec<_>>()
            ));
        }
    }

    // Overlap per job, on accepted and on raw lines.
    let mut accepted: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    let mut raw: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    for (run_id, attempt) in &attempts {
        raw.entry(&attempt.key)
            .or_default()
            .push((attempt.first_us, attempt.last_us));
        if let (Some(first), Some(last)) = (attempt.accepted_first_us, attempt.accepted_last_us) {
            accepted.entry(&attempt.key).or_default().push((first, last));
        }
        if attempt.stale_lines > 0 {
            report.stale_lines += attempt.stale_lines;
            report.stale_runs.insert(*run_id);
        }
    }
    report.max_overlap = accepted.values().map(|v| max_overlap(v)).max().unwrap_or(0);
    report.max_overlap_raw = raw.values().map(|v| max_overlap(v)).max().unwrap_or(0);

    // Failover: an abandoned attempt's last sign of life to its retry's first line.
    for run in all_runs.iter().filter(|run| run.state == RunState::Abandoned) {
        let chain_id = run.first_run_id.unwrap_or(run.id);
        let retry = all_runs
            .iter()
            .find(|r| r.first_run_id == Some(chain_id) && r.attempt == run.attempt + 1);
        let (Some(retry), Some(dead)) = (retry, attempts.get(&run.id)) else {
            continue;
        };
        if let Some(next) = attempts.get(&retry.id) {
            // Lines a stale holder wrote after its retry began are no sign of life.
            let last_alive = dead.accepted_last_us.unwrap_or(dead.last_us);
            let gap = Duration::from_micros(next.first_us.saturating_sub(last_alive).max(0) as u64);
            report.longest_failover = report.longest_failover.max(Some(gap));
        }
    }
    report
}
