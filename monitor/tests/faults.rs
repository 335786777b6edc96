//! Fault injection against real processes: executors, monitors, and PostgreSQL and
//! Redis themselves die, pause and lose their links, and the cluster keeps the
//! promises of docs/design.md (its invariants).
//!
//! Every scenario runs real `probactr-executor` and `probactr-monitor` processes with
//! short settings (heartbeat 500 ms, heartbeat timeout 3 s, reap every 1 s, lease 3 s),
//! a workload of interval triggers and non-parallel shell jobs that write their own
//! effects log (see `infra::workload`), and ends with the invariant check: no instant ran
//! twice, none was lost without a recorded reason, no non-parallel job overlapped
//! itself, every run is terminal. Scenarios that need to kill PostgreSQL or Redis start
//! private instances on free loopback ports (`infra::services`); scenarios that cut one
//! executor off put a stallable TCP proxy between it and the server (`infra::proxy`).
//!
//! # Clocks
//!
//! Every time comparison that decides firing or deadness is made by PostgreSQL's clock,
//! never a process's own: firing selects `next_fire_at <= now()` (plus the fire-ahead
//! window) and plans instants against the `now()` of the fire transaction; a monitor declares an executor dead
//! with `last_heartbeat_at < now() - timeout`, where `last_heartbeat_at` was itself set
//! by `now()`; the permit sets in Redis use Redis's `TIME`. Processes use their own
//! clocks only for durations (monotonic: lease renewal, heartbeat silence, sleeping
//! until the next instant, computed from a database-supplied delay). So a process with
//! a skewed wall clock fires nothing early or late and judges nobody dead.
//! `clocks_of_processes_do_not_matter` checks that with libfaketime when it is
//! installed (Debian package `faketime`): an executor two hours ahead and a monitor two
//! hours behind keep the schedule and reap correctly. The manager too computes a new or
//! edited trigger's first instant from PostgreSQL's `now()`, read in the transaction
//! that stores the trigger.
//!
//! The long randomized run (`chaos`) is ignored here; `scripts/chaos SECONDS` runs it.
#![allow(clippy::unwrap_used)]

#[path = "faults/failover.rs"]
mod failover;
mod infra;
#[path = "faults/replica.rs"]
mod replica;
#[path = "faults/routing.rs"]
mod routing;
#[path = "faults/startup.rs"]
mod startup;
#[path = "faults/workflows.rs"]
mod workflows;

use probactr_testkit as support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use infra::cluster::Cluster;
use infra::proxy::Proxy;
use infra::services::{PrivatePostgres, PrivateRedis};
use infra::workload::{db_now, Effect, JobPlan, Workload};
use probactr_common::model::{JobKind, Misfire, Overlap, ProcessState, Run, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{checkpoints, processes, runs, TEST_MIGRATOR};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::witness::Witness;
use support::{eventually, executor, fast_env, group_alive, monitor, unique_prefix};
use uuid::Uuid;

async fn pool_and_url(pool_options: PgPoolOptions, options: PgConnectOptions) -> (PgPool, String) {
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.expect("test database");
    (pool, url)
}

async fn executor_pid_of_run(pool: &PgPool, run_id: i64) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT executors.pid FROM runs JOIN executors ON executors.id = runs.executor_id
         WHERE runs.id = $1 AND runs.state = 'running'",
    )
    .bind(run_id)
    .fetch_optional(pool)
    .await
    .unwrap()
}

/// kill -9 the executor in the middle of a non-parallel job: a monitor reaps it and
/// another executor runs the next attempt within heartbeat timeout + reap interval + 2 s,
/// without the two attempts overlapping.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_killed_executors_run_is_retried_elsewhere(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("kill9"));
    let mut job = NewJob::new(
        "long",
        JobKind::Http,
        json!({ "method": "GET", "url": witness.url("long", 4000) }),
    );
    job.retry_max_attempts = 2;
    job.retry_backoff_secs = 0;
    let job = jobs::insert(&pool, &job).await.unwrap();
    let first = runs::queue_now(&pool, job.id).await.unwrap();
    let executors: Vec<_> = (0..2).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    let _monitor = monitor("monitor", &env);
    let pid = eventually(Duration::from_secs(10), "the first attempt runs", || async {
        executor_pid_of_run(&pool, first.id).await
    })
    .await;
    let victim = executors
        .iter()
        .position(|e| e.pid() == pid)
        .expect("the runner is one of ours");
    executors[victim].signal(support::SIGKILL);
    let killed_at = std::time::Instant::now();

    let retry = eventually(Duration::from_secs(15), "the retry succeeded", || async {
        sqlx::query_as::<_, (i64, String)>("SELECT id, state FROM runs WHERE first_run_id = $1")
            .bind(first.id)
            .fetch_optional(&pool)
            .await
            .unwrap()
            .filter(|(_, state)| state == "succeeded")
    })
    .await;
    let first_after = runs::get(&pool, first.id).await.unwrap().unwrap();
    assert_eq!(first_after.state, RunState::Abandoned);
    assert_eq!(first_after.reason.as_deref(), Some("executor lost"));
    let hits = witness.hits_of("long");
    assert_eq!(hits.len(), 2, "two attempts reached the job's target");
    let (dead, second) = if hits[0].header("x-probactr-run-id") == Some(&first.id.to_string()) {
        (&hits[0], &hits[1])
    } else {
        (&hits[1], &hits[0])
    };
    assert_eq!(
        second.header("x-probactr-run-id"),
        Some(retry.0.to_string().as_str())
    );
    assert!(second.started >= dead.ended, "the attempts overlapped");
    let failover = second.started.duration_since(killed_at);
    eprintln!("FAILOVER: retry started {failover:?} after kill -9");
    assert!(
        failover <= Duration::from_secs(3 + 1 + 2),
        "failover took {failover:?}"
    );
    assert_eq!(witness.max_in_flight("long"), 1);
}

/// A job that allows no retries still does not lose its instant when its executor dies:
/// the run is taken over at once by another executor (`on_executor_lost: rerun`, the
/// default), as the next attempt of the same instant, and finishes once.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_killed_executors_run_is_taken_over_without_retries(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("takeover"));
    let job = NewJob::new(
        "daily",
        JobKind::Http,
        json!({ "method": "GET", "url": witness.url("daily", 3000) }),
    );
    assert_eq!(job.retry_max_attempts, 1, "no retries");
    let job = jobs::insert(&pool, &job).await.unwrap();
    let first = runs::queue_now(&pool, job.id).await.unwrap();
    let executors: Vec<_> = (0..2).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    let _monitor = monitor("monitor", &env);
    // Killed once its request reached the target (running, it may not have been sent yet).
    eventually(Duration::from_secs(20), "the first attempt's request", || async {
        (witness.in_flight("daily") == 1).then_some(())
    })
    .await;
    let pid = eventually(Duration::from_secs(10), "the first attempt runs", || async {
        executor_pid_of_run(&pool, first.id).await
    })
    .await;
    let victim = executors
        .iter()
        .position(|e| e.pid() == pid)
        .expect("one of ours");
    executors[victim].signal(support::SIGKILL);
    let (taken_over, reason) = eventually(Duration::from_secs(20), "the takeover succeeded", || async {
        sqlx::query_as::<_, (i64, String, Option<String>)>(
            "SELECT id, state, reason FROM runs WHERE first_run_id = $1",
        )
        .bind(first.id)
        .fetch_optional(&pool)
        .await
        .unwrap()
        .filter(|(_, state, _)| state == "succeeded")
        .map(|(id, _, reason)| (id, reason))
    })
    .await;
    // Its reason ("takeover 1 of 3: …") is replaced by the end's; with one attempt
    // allowed, a second attempt can only be a takeover.
    assert_eq!(reason, None, "succeeded");
    assert_eq!(
        runs::get(&pool, first.id).await.unwrap().unwrap().state,
        RunState::Abandoned
    );
    let hits = witness.hits_of("daily");
    assert_eq!(
        hits.len(),
        2,
        "the lost attempt and the takeover reached the target"
    );
    assert!(hits
        .iter()
        .any(|h| h.header("x-probactr-run-id") == Some(taken_over.to_string().as_str())));
    assert_eq!(witness.max_in_flight("daily"), 1, "never two at once");
}

/// The long daily job: a shell job that checkpoints its progress loses its executor to
/// kill -9 halfway, and the attempt that takes over on the other executor starts from
/// the last saved checkpoint instead of from the beginning, and finishes once.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_killed_executors_job_resumes_from_its_checkpoint(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("checkpoint"));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    // Each step is written whole (a file renamed over the checkpoint), then logged.
    let script = format!(
        r#"step=$(cat "$PROBACTR_CHECKPOINT_FILE"); step=${{step:-0}}
echo "attempt $PROBACTR_ATTEMPT from $step" >> {log}
while [ "$step" -lt 20 ]; do
  step=$((step + 1))
  echo "step $step" >> {log}
  echo "$step" > "$PROBACTR_CHECKPOINT_FILE.new" && mv "$PROBACTR_CHECKPOINT_FILE.new" "$PROBACTR_CHECKPOINT_FILE"
  sleep 0.4
done
echo done >> {log}"#,
        log = log.display()
    );
    let mut job = NewJob::new(
        "daily",
        JobKind::Shell,
        json!({ "program": script, "shell": true }),
    );
    job.timeout_secs = 300;
    let job = jobs::insert(&pool, &job).await.unwrap();
    let first = runs::queue_now(&pool, job.id).await.unwrap();
    let executors: Vec<_> = (0..2).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    let _monitor = monitor("monitor", &env);
    let saved = eventually(Duration::from_secs(30), "a few steps checkpointed", || async {
        let checkpoint = checkpoints::load(&pool, first.id).await.unwrap()?;
        let step: u32 = String::from_utf8(checkpoint.data).ok()?.trim().parse().ok()?;
        (step >= 4).then_some(step)
    })
    .await;
    let pid = executor_pid_of_run(&pool, first.id)
        .await
        .expect("the first attempt runs");
    let victim = executors
        .iter()
        .position(|e| e.pid() == pid)
        .expect("one of ours");
    executors[victim].signal(support::SIGKILL);
    let taken_over = eventually(Duration::from_secs(60), "the takeover succeeded", || async {
        sqlx::query_as::<_, (i64, String)>("SELECT id, state FROM runs WHERE first_run_id = $1")
            .bind(first.id)
            .fetch_optional(&pool)
            .await
            .unwrap()
            .filter(|(_, state)| state == "succeeded")
            .map(|(id, _)| id)
    })
    .await;
    assert_eq!(
        runs::get(&pool, first.id).await.unwrap().unwrap().state,
        RunState::Abandoned
    );
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines[0], "attempt 1 from 0", "{lines:?}");
    let resumed = lines
        .iter()
        .find_map(|line| line.strip_prefix("attempt 2 from "))
        .unwrap_or_else(|| panic!("no second attempt in {lines:?}"));
    let resumed: u32 = resumed.parse().unwrap();
    assert!(
        resumed >= saved,
        "resumed from {resumed}, {saved} was saved: {lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|line| *line == "step 1").count(),
        1,
        "the takeover did not start over: {lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|line| *line == "done").count(),
        1,
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|line| line.starts_with("attempt")).count(),
        2,
        "{lines:?}"
    );
    let last = checkpoints::load(&pool, first.id).await.unwrap().unwrap();
    assert_eq!((last.data.as_slice(), last.run_id), (&b"20\n"[..], taken_over));
}

/// Three monitors at once: each dead executor is declared dead by exactly one of them
/// and each abandoned run is re-queued exactly once. Killing one monitor leaves the
/// others reaping.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn many_monitors_reap_each_executor_once(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("monitors"));
    let mut monitors: Vec<_> = (0..3).map(|i| monitor(&format!("monitor-{i}"), &env)).collect();
    let mut job = NewJob::new(
        "held",
        JobKind::Http,
        json!({ "method": "GET", "url": witness.url("held", 30_000) }),
    );
    job.parallel = true;
    job.retry_max_attempts = 3;
    job.retry_backoff_secs = 60;
    let job = jobs::insert(&pool, &job).await.unwrap();
    runs::queue_many_now(&pool, job.id, 4).await.unwrap();
    let mut victims: Vec<_> = (0..2).map(|i| executor(&format!("victim-{i}"), &env)).collect();
    eventually(Duration::from_secs(10), "both victims registered", || async {
        let registered: i64 = sqlx::query_scalar("SELECT count(*) FROM executors WHERE role = 'executor'")
            .fetch_one(&pool)
            .await
            .unwrap();
        (registered == 2).then_some(())
    })
    .await;
    eventually(Duration::from_secs(10), "4 runs running", || async {
        let running: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'running'")
            .fetch_one(&pool)
            .await
            .unwrap();
        (running == 4).then_some(())
    })
    .await;
    // One monitor dies first; the other two must still reap.
    monitors[0].signal(support::SIGKILL);
    monitors[0].wait_exit(Duration::from_secs(5)).await;
    for victim in &mut victims {
        victim.signal(support::SIGKILL);
    }
    eventually(Duration::from_secs(15), "4 runs abandoned", || async {
        let abandoned: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'abandoned'")
            .fetch_one(&pool)
            .await
            .unwrap();
        (abandoned == 4).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reaped: Vec<(Option<uuid::Uuid>,)> =
        sqlx::query_as("SELECT reaped_by FROM executors WHERE role = 'executor'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(reaped.len(), 2);
    assert!(
        reaped.iter().all(|(by,)| by.is_some()),
        "every victim was declared dead"
    );
    let retries: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE attempt = 2")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(retries, 4, "each abandoned run re-queued exactly once");
    let live_monitors: i64 =
        sqlx::query_scalar("SELECT count(*) FROM executors WHERE role = 'monitor' AND state = 'alive'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(live_monitors >= 2);
}

/// A live executor's runs are never reaped, however long they run (invariant 6).
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_live_executors_runs_are_never_reaped(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("alive"));
    let job = jobs::insert(
        &pool,
        &NewJob::new(
            "steady",
            JobKind::Http,
            json!({ "method": "GET", "url": witness.url("steady", 6000) }),
        ),
    )
    .await
    .unwrap();
    let run = runs::queue_now(&pool, job.id).await.unwrap();
    let _executor = executor("executor", &env);
    let _monitors: Vec<_> = (0..2).map(|i| monitor(&format!("monitor-{i}"), &env)).collect();
    eventually(Duration::from_secs(15), "the run succeeded", || async {
        let state = runs::get(&pool, run.id).await.unwrap().unwrap().state;
        assert_ne!(state, RunState::Abandoned, "a live executor's run was reaped");
        (state == RunState::Succeeded).then_some(())
    })
    .await;
    let dead: i64 = sqlx::query_scalar("SELECT count(*) FROM executors WHERE state = 'dead'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(dead, 0);
}

// ---------------------------------------------------------------------------------------
// Scenarios with the self-witnessing workload (infra::workload).

/// The lock lease of `fast_env`.
const LEASE: Duration = Duration::from_secs(3);
/// The heartbeat timeout of `fast_env`.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);

fn env_with(database_url: &str, redis_url: &str, prefix: &str) -> HashMap<String, String> {
    let mut env = fast_env(database_url, prefix);
    env.insert("REDIS_URL".to_owned(), redis_url.to_owned());
    env
}

async fn get_run(pool: &PgPool, id: i64) -> Run {
    runs::get(pool, id).await.unwrap().unwrap()
}

/// The attempt after `run_id` in its chain, once queued.
async fn retry_of(pool: &PgPool, run_id: i64) -> Option<Run> {
    sqlx::query_as(
        "SELECT retry.* FROM runs AS retry JOIN runs AS failed
             ON retry.first_run_id = coalesce(failed.first_run_id, failed.id)
            AND retry.attempt = failed.attempt + 1
         WHERE failed.id = $1",
    )
    .bind(run_id)
    .fetch_optional(pool)
    .await
    .ok()
    .flatten()
}

/// (pid, executor id) of the executor running `run_id`, while it runs.
async fn running_on(pool: &PgPool, run_id: i64) -> Option<(i32, Uuid)> {
    sqlx::query_as(
        "SELECT executors.pid, executors.id FROM runs JOIN executors ON executors.id = runs.executor_id
         WHERE runs.id = $1 AND runs.state = 'running'",
    )
    .bind(run_id)
    .fetch_optional(pool)
    .await
    .ok()
    .flatten()
}

/// The first line of `kind` the run's job wrote.
async fn effect_of(workload: &Workload, run_id: i64, kind: char) -> Effect {
    eventually(
        Duration::from_secs(15),
        &format!("run {run_id} left a {kind} line"),
        || async { workload.effects_of(run_id).into_iter().find(|e| e.kind == kind) },
    )
    .await
}

/// Waits until no process of the group is left; returns when that was seen.
async fn group_gone(pgid: i32, within: Duration, what: &str) -> Instant {
    eventually(within, what, || async { (!group_alive(pgid)).then(Instant::now) }).await
}

/// Waits until the run (or, for a chain, some attempt of it) succeeded. On a timeout the
/// chain's attempts are printed: what state each reached and why says where it stopped.
async fn chain_succeeded(pool: &PgPool, first: i64, within: Duration) -> Run {
    let chain = || async {
        sqlx::query_as::<_, Run>("SELECT * FROM runs WHERE id = $1 OR first_run_id = $1 ORDER BY attempt")
            .bind(first)
            .fetch_all(pool)
            .await
            .unwrap_or_default()
    };
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let attempts = chain().await;
        if let Some(done) = attempts.iter().find(|run| run.state == RunState::Succeeded) {
            return done.clone();
        }
        if tokio::time::Instant::now() >= deadline {
            for run in &attempts {
                eprintln!(
                    "attempt {} (run {}): {:?} on {:?}, queued {} available {} claimed {:?} started {:?} finished {:?}, reason {:?}, error {:?}",
                    run.attempt, run.id, run.state, run.executor_id, run.queued_at, run.available_at,
                    run.claimed_at, run.started_at, run.finished_at, run.reason, run.error
                );
            }
            panic!("timed out after {within:?} waiting for: an attempt of run {first} succeeded");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One monitor and two executors on `env`, the workload's on-demand `long` job running
/// (its run is returned) and every triggered job succeeding: a cluster under load, ready
/// for a fault.
async fn start_under_load(
    pool: &PgPool,
    cluster: &mut Cluster,
    env: &HashMap<String, String>,
    workload: &Workload,
) -> i64 {
    cluster.add_monitor("monitor", env);
    for i in 0..2 {
        cluster.add_executor(&format!("executor-{i}"), env);
    }
    let long = workload.queue_now(pool, "long").await;
    eventually(Duration::from_secs(15), "the long job runs", || {
        running_on(pool, long)
    })
    .await;
    let started = db_now(pool).await;
    every_trigger_succeeds_after(
        pool,
        workload,
        started - TimeDelta::seconds(5),
        Duration::from_secs(15),
    )
    .await;
    long
}

/// Waits until every triggered job of the workload has a run that started after `after`
/// and succeeded.
async fn every_trigger_succeeds_after(
    pool: &PgPool,
    workload: &Workload,
    after: DateTime<Utc>,
    within: Duration,
) {
    for job in workload.jobs.iter().filter(|job| job.trigger_id.is_some()) {
        eventually(
            within,
            &format!("{} succeeded after {after}", job.plan.name),
            || async {
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'succeeded' AND started_at > $2",
                )
                .bind(job.job_id)
                .bind(after)
                .fetch_one(pool)
                .await
                .ok()?;
                (n > 0).then_some(())
            },
        )
        .await;
    }
}

/// Runs of the executor identity `executor_id` whose job started (by its effects) after
/// a monitor declared that identity dead. A job whose process group is in `frozen` was
/// started before a pause froze it with its executor: if the pause caught it between its
/// start and its first line, that line is written on resume, after the death, by a job
/// the executor started before it.
async fn jobs_started_after_death(
    pool: &PgPool,
    workload: &Workload,
    executor_id: Uuid,
    frozen: &[i32],
) -> Vec<i64> {
    let declared: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT declared_dead_at FROM executors WHERE id = $1")
            .bind(executor_id)
            .fetch_one(pool)
            .await
            .unwrap();
    let Some(declared) = declared else {
        return Vec::new();
    };
    let theirs: Vec<i64> = sqlx::query_scalar("SELECT id FROM runs WHERE executor_id = $1")
        .bind(executor_id)
        .fetch_all(pool)
        .await
        .unwrap();
    workload
        .effects()
        .into_iter()
        .filter(|e| e.kind == 'S' && theirs.contains(&e.run_id) && e.at() > declared)
        .filter(|e| !frozen.contains(&e.pid))
        .map(|e| e.run_id)
        .collect()
}

fn mentions_run(line: &str, run_id: i64) -> bool {
    line.contains(&format!("run.id={run_id} ")) || line.contains(&format!("run.id={run_id}}}"))
}

/// SIGSTOP an executor together with its job's process group (a frozen machine) for
/// longer than the lease, then SIGCONT. Meanwhile the monitor declared it dead and the
/// retry runs on the other executor. On resume the stale job is killed at once (the stop
/// point), the old executor's end write is rejected (fencing: the old run stays
/// abandoned, "executor lost"), and it registers again (a new executors row, same pid).
/// The stale job's lines written between SIGCONT and its death all carry an older fence
/// than the retry's, so a fence-checking resource rejects them.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_paused_executor_is_fenced_off_and_stops_its_job_on_resume(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut cluster = Cluster::new("pause");
    let env = fast_env(&url, &unique_prefix("pause"));
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 300),
            JobPlan::every("tick-c", 2, 500),
            JobPlan::on_demand("long", 8000),
        ],
    )
    .await;
    cluster.add_monitor("monitor", &env);
    for i in 0..2 {
        cluster.add_executor(&format!("executor-{i}"), &env);
    }
    let first = workload.queue_now(&pool, "long").await;
    let (pid, old_id) = eventually(Duration::from_secs(15), "the long job runs", || {
        running_on(&pool, first)
    })
    .await;
    let job_start = effect_of(&workload, first, 'S').await;
    let victim = cluster.executor_with_pid(pid);
    let paused = Instant::now();
    cluster.executors[victim].pause();
    // Every job the executor had started, frozen with it (resuming forgets them).
    let frozen = cluster.executors[victim].paused_groups().to_vec();
    assert!(
        frozen.contains(&job_start.pid),
        "the job's process group was paused with its executor"
    );

    let retry = eventually(
        Duration::from_secs(20),
        "the retry runs on another executor",
        || async {
            retry_of(&pool, first)
                .await
                .filter(|r| r.state == RunState::Running)
        },
    )
    .await;
    assert_ne!(retry.executor_id, Some(old_id));
    let abandoned = get_run(&pool, first).await;
    assert_eq!(
        (abandoned.state, abandoned.reason.as_deref()),
        (RunState::Abandoned, Some("executor lost"))
    );
    let retry_start = effect_of(&workload, retry.id, 'S').await;
    // Frozen for longer than the lease: the length of the fault, not a condition.
    if let Some(rest) = (LEASE + Duration::from_secs(1)).checked_sub(paused.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    let resumed = Instant::now();
    cluster.executors[victim].resume();

    let gone = group_gone(job_start.pid, Duration::from_secs(5), "the stale job was killed").await;
    let stop_latency = gone.duration_since(resumed);
    eprintln!("STOP POINT: the stale job died {stop_latency:?} after SIGCONT");
    assert!(
        stop_latency < Duration::from_millis(1500),
        "the stale job lived {stop_latency:?} after its executor resumed"
    );
    let old_effects = workload.effects_of(first);
    assert!(
        !old_effects.iter().any(|e| e.kind == 'E'),
        "the stale job ran to its end"
    );
    for effect in old_effects.iter().filter(|e| e.at_us >= retry_start.at_us) {
        assert!(
            effect.fence < retry_start.fence,
            "a stale line carries a current fence: {effect:?} vs {retry_start:?}"
        );
    }

    let new_id = eventually(
        Duration::from_secs(10),
        "the old executor registered again",
        || async {
            cluster.executors[victim]
                .current_id(&pool)
                .await
                .filter(|id| *id != old_id)
        },
    )
    .await;
    let old_row = processes::get(&pool, old_id).await.unwrap().unwrap();
    let new_row = processes::get(&pool, new_id).await.unwrap().unwrap();
    assert_eq!(old_row.state, ProcessState::Dead);
    assert_eq!(new_row.pid, old_row.pid, "re-registered from the same process");

    eventually(
        Duration::from_secs(10),
        "the stale end write was rejected by fencing",
        || async {
            let log = cluster.executors[victim].log_text();
            log.lines()
                .any(|l| l.contains("end rejected by fencing") && mentions_run(l, first))
                .then_some(())
        },
    )
    .await;
    let still = get_run(&pool, first).await;
    assert_eq!(
        (still.state, still.reason.as_deref()),
        (RunState::Abandoned, Some("executor lost"))
    );
    chain_succeeded(&pool, first, Duration::from_secs(20)).await;

    // No job started under the dead identity once it was declared dead.
    let late = jobs_started_after_death(&pool, &workload, old_id, &frozen).await;
    assert!(late.is_empty(), "jobs started under a dead identity: {late:?}");

    let cutoff = workload.wind_down(&pool, Duration::from_secs(40)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    for run_id in &report.stale_runs {
        assert_eq!(
            get_run(&pool, *run_id).await.executor_id,
            Some(old_id),
            "stale lines of run {run_id} did not come from the frozen executor"
        );
    }
}

/// Kill Redis with interval triggers and non-parallel jobs running, restart it empty on
/// the same port: no instant runs twice, none is lost without a recorded reason (runs
/// that could not take their lock meanwhile are skipped or queued again, runs whose
/// lease could not be renewed are stopped and retried), no job overlaps itself, and
/// locks work again: every job succeeds after the restart.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn redis_restarted_empty_duplicates_and_loses_nothing(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut redis = PrivateRedis::start().await;
    let mut cluster = Cluster::new("redis-restart");
    let env = env_with(&url, &redis.url(), &unique_prefix("redis-restart"));
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 400),
            JobPlan::every("tick-c", 1, 300).overlap(Overlap::Skip),
            JobPlan::every("slow-a", 2, 2500).overlap(Overlap::Skip),
            JobPlan::every("slow-b", 3, 2000),
            JobPlan::on_demand("long", 6000).attempts(3),
        ],
    )
    .await;
    let long = start_under_load(&pool, &mut cluster, &env, &workload).await;

    redis.kill().await;
    let killed = db_now(&pool).await;
    // The outage: longer than a renewal interval, shorter than the misfire threshold.
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.start_again().await;
    let restarted = db_now(&pool).await;
    eprintln!("Redis down for {:?}", (restarted - killed).to_std().unwrap());

    every_trigger_succeeds_after(&pool, &workload, restarted, Duration::from_secs(20)).await;
    chain_succeeded(&pool, long, Duration::from_secs(30)).await;

    let cutoff = workload.wind_down(&pool, Duration::from_secs(40)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    report.assert_no_stale_effects();
}

/// Restart PostgreSQL (an immediate shutdown, as a crash) under load: every process
/// reconnects by itself and continues. Instants due during the outage fire late when the
/// database returns. Asserted: no instant runs twice; for triggers whose misfire
/// threshold (60 s) is longer than the outage every instant still gets a run, so none
/// appears in a misfires row; for triggers with a 2 s threshold the late instants follow
/// the policy (skip: none runs; fire_once: the latest runs) and the others are counted
/// in misfires rows; either way every instant has a terminal run or a misfire record.
/// Running jobs are stopped by their executors, which cannot prove they are alive, and
/// retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_load_duplicates_and_loses_nothing() {
    let postgres = PrivatePostgres::start().await;
    let url = postgres.create_database("probactr").await;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(3))
        .connect(&url)
        .await
        .unwrap();
    let mut cluster = Cluster::new("pg-restart");
    let env = fast_env(&url, &unique_prefix("pg-restart"));
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("late-a", 1, 200),
            JobPlan::every("late-b", 1, 300),
            JobPlan::every("skip-late", 1, 200).misfire(Misfire::Skip, 2),
            JobPlan::every("once-late", 1, 200).misfire(Misfire::FireOnce, 2),
            JobPlan::on_demand("long", 6000).attempts(3),
        ],
    )
    .await;
    let long = start_under_load(&pool, &mut cluster, &env, &workload).await;

    postgres.crash().await;
    let crashed = Utc::now();
    // The outage: longer than the heartbeat timeout and the 2 s misfire threshold.
    tokio::time::sleep(Duration::from_secs(4)).await;
    postgres.start_again().await;
    let restarted = Utc::now();
    eprintln!(
        "PostgreSQL down for {:?}",
        (restarted - crashed).to_std().unwrap()
    );

    every_trigger_succeeds_after(&pool, &workload, restarted, Duration::from_secs(20)).await;
    chain_succeeded(&pool, long, Duration::from_secs(30)).await;
    // Its executor could not heartbeat: it stopped the job before a monitor could have
    // declared it dead, and the retry ran it again.
    let first = get_run(&pool, long).await;
    assert_eq!(first.state, RunState::Abandoned, "{first:?}");
    let last_line = workload.effects_of(long).last().unwrap().at();
    assert!(
        last_line < crashed + TimeDelta::from_std(HEARTBEAT_TIMEOUT).unwrap(),
        "the long job kept running until {last_line}, crash at {crashed}"
    );

    let cutoff = workload.wind_down(&pool, Duration::from_secs(40)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    report.assert_no_stale_effects();
    // The silence was the database's: nobody is declared dead for it.
    assert_eq!(
        report.reaps, 0,
        "live executors were declared dead after the restart"
    );
    for name in ["late-a", "late-b"] {
        let trigger = workload.job(name).trigger_id.unwrap();
        let misfires: i64 = sqlx::query_scalar("SELECT count(*) FROM misfires WHERE trigger_id = $1")
            .bind(trigger)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(misfires, 0, "{name}: instants within the threshold must all run");
        let during: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM runs WHERE trigger_id = $1 AND attempt = 1
               AND scheduled_at BETWEEN $2 AND $3",
        )
        .bind(trigger)
        .bind(crashed)
        .bind(restarted)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(
            during >= 3,
            "{name}: only {during} runs for the instants of the outage"
        );
    }
    for name in ["skip-late", "once-late"] {
        let trigger = workload.job(name).trigger_id.unwrap();
        let missed: Option<i64> =
            sqlx::query_scalar("SELECT sum(instants)::bigint FROM misfires WHERE trigger_id = $1")
                .bind(trigger)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert!(
            missed.unwrap_or(0) >= 1,
            "{name}: the late instants of the outage are recorded as misfired"
        );
    }
}

/// Cut one executor off from Redis only (a stalled proxy): it stops its non-parallel
/// job before its lease runs out (renewal failed: the stop point) and records it
/// abandoned; no other executor starts the job before the lease expired in Redis; the
/// retry runs on the other executor. The cut-off executor is not declared dead (its
/// PostgreSQL link is fine).
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn an_executor_cut_off_from_redis_stops_its_job_before_the_lease_expires(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let redis = PrivateRedis::start().await;
    let proxy = Proxy::start(redis.addr()).await;
    let mut cluster = Cluster::new("redis-cut");
    let prefix = unique_prefix("redis-cut");
    let env = env_with(&url, &redis.url(), &prefix);
    let cut_env = env_with(&url, &format!("redis://127.0.0.1:{}", proxy.port()), &prefix);
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            // Skipped when busy: a run it could not lock for want of Redis must not be.
            JobPlan::every("tick-b", 1, 300).overlap(Overlap::Skip),
            JobPlan::on_demand("long", 6000),
        ],
    )
    .await;
    cluster.add_monitor("monitor", &env);
    let cut_off = cluster.add_executor("cut-off", &cut_env);
    let cut_id = cluster.executors[cut_off]
        .registered(&pool, Duration::from_secs(10))
        .await;
    let first = workload.queue_now(&pool, "long").await;
    eventually(
        Duration::from_secs(15),
        "the long job runs on the cut-off executor",
        || running_on(&pool, first),
    )
    .await;
    let job_start = effect_of(&workload, first, 'S').await;
    let healthy = cluster.add_executor("healthy", &env);
    let healthy_id = cluster.executors[healthy]
        .registered(&pool, Duration::from_secs(10))
        .await;
    let token = get_run(&pool, first).await.lock_token.expect("a locked run");
    let key = probactr_common::lock::mutex_key(&prefix, workload.job("long").job_id);
    let mut redis_conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    proxy.stall();
    let cut = Instant::now();
    // Watch the lock from Redis itself until it is no longer the cut-off holder's.
    let mut stopped: Option<Instant> = None;
    let mut expires_by = cut;
    let mut last_held = Utc::now();
    let lost = loop {
        let (value, pttl): (Option<String>, i64) = redis::pipe()
            .cmd("GET")
            .arg(&key)
            .cmd("PTTL")
            .arg(&key)
            .query_async(&mut redis_conn)
            .await
            .unwrap();
        let now = Instant::now();
        if value.as_deref() != Some(token.as_str()) {
            break now;
        }
        last_held = Utc::now();
        if pttl > 0 {
            expires_by = expires_by.max(now + Duration::from_millis(pttl as u64));
        }
        if stopped.is_none() && !group_alive(job_start.pid) {
            stopped = Some(now);
        }
        assert!(cut.elapsed() < Duration::from_secs(10), "the lock never expired");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let stopped = match stopped {
        Some(at) => at,
        None => group_gone(job_start.pid, Duration::from_secs(10), "the cut-off job stopped").await,
    };
    eprintln!(
        "STOP POINT: job stopped {:?} after the cut; lock expired {:?} after (Redis said by {:?})",
        stopped - cut,
        lost - cut,
        expires_by - cut
    );
    assert!(
        stopped < lost && stopped < expires_by,
        "the job outlived its lease: stopped {:?} after the cut, the lease ran out {:?} after",
        stopped - cut,
        expires_by - cut
    );
    let abandoned = eventually(Duration::from_secs(10), "the cut-off run recorded", || async {
        Some(get_run(&pool, first).await).filter(|run| run.state != RunState::Running)
    })
    .await;
    assert_eq!(abandoned.state, RunState::Abandoned);
    assert!(
        abandoned.reason.as_deref().unwrap_or("").contains("lock lost"),
        "reason: {:?}",
        abandoned.reason
    );
    let retry = chain_succeeded(&pool, first, Duration::from_secs(30)).await;
    assert_eq!(
        retry.executor_id,
        Some(healthy_id),
        "the retry ran on the healthy executor"
    );
    let retry_start = effect_of(&workload, retry.id, 'S').await;
    assert!(
        retry_start.at() > last_held && retry.started_at.unwrap() > last_held,
        "the retry started at {} while the cut-off holder's lease was still in Redis at {last_held}",
        retry_start.at()
    );
    let cut_row = processes::get(&pool, cut_id).await.unwrap().unwrap();
    assert_eq!(
        cut_row.state,
        ProcessState::Alive,
        "cut off from Redis only: not dead"
    );

    proxy.heal();
    let cutoff = workload.wind_down(&pool, Duration::from_secs(40)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    report.assert_no_stale_effects();
    assert_eq!(report.reaps, 0);
    // Not reaching Redis says nothing about the job being busy: the cut-off executor
    // gives such runs back (and stops claiming them) rather than skipping them, and the
    // healthy executor runs them.
    let skipped_for_redis: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, reason FROM runs WHERE state = 'skipped' AND reason LIKE 'lock unavailable%'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        skipped_for_redis.is_empty(),
        "runs skipped because one executor could not reach Redis: {skipped_for_redis:?}"
    );
}

/// Redis stops answering an executor that is idle, so it does not know yet: the run of
/// a skip-when-busy job it claims cannot be locked, and goes back to the queue rather
/// than being skipped (nothing says the job is busy). Having noticed, the executor stops
/// claiming runs that need a lock instead of claiming and giving them back again and
/// again; when Redis answers again its background ping notices and the run succeeds.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_run_that_cannot_be_locked_for_want_of_redis_waits_for_redis_and_is_not_skipped(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let redis = PrivateRedis::start().await;
    let proxy = Proxy::start(redis.addr()).await;
    let mut cluster = Cluster::new("redis-wait");
    let prefix = unique_prefix("redis-wait");
    let env = env_with(&url, &format!("redis://127.0.0.1:{}", proxy.port()), &prefix);
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[JobPlan::on_demand("once", 100).overlap(Overlap::Skip)],
    )
    .await;
    let executor = cluster.add_executor("executor", &env);
    cluster.executors[executor]
        .registered(&pool, Duration::from_secs(10))
        .await;

    proxy.stall();
    let run_id = workload.queue_now(&pool, "once").await;
    // The first claim finds out: the lock call waits out its response timeout (2 s).
    let put_back = "run put back in the queue";
    eventually(Duration::from_secs(10), "the run given back", || async {
        Some(()).filter(|_| cluster.executors[executor].log_text().contains(put_back))
    })
    .await;
    // From then on it leaves the run alone: watched for 3 s, the run stays queued, never
    // claimed (claiming it would hold it for a lock call's timeout each time).
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(3) {
        let waiting = get_run(&pool, run_id).await;
        assert_eq!(
            waiting.state,
            RunState::Queued,
            "while Redis does not answer the run waits in the queue (reason {:?})",
            waiting.reason
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    proxy.heal();
    let done = chain_succeeded(&pool, run_id, Duration::from_secs(15)).await;
    assert_eq!(done.id, run_id, "the run itself ran, once Redis answered");
    let skipped: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'skipped'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(skipped, 0);
}

/// A Redis that answers, but refuses the lock scripts (here an ACL; in production out of
/// memory, say), has not gone away: the refusal is no reason to give the run back at
/// once and claim it again and again. The job's overlap policy applies, as when the lock
/// is busy: a skip-when-busy job's run is recorded skipped, with Redis's answer.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_lock_refused_by_redis_follows_the_overlap_policy(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let redis = PrivateRedis::start().await;
    let mut admin = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "noscripts",
            "on",
            ">noscripts-password",
            "~*",
            "+@all",
            "-@scripting",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut cluster = Cluster::new("redis-refuses");
    let prefix = unique_prefix("redis-refuses");
    let limited = format!("redis://noscripts:noscripts-password@127.0.0.1:{}", redis.port());
    let env = env_with(&url, &limited, &prefix);
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[JobPlan::on_demand("once", 100).overlap(Overlap::Skip)],
    )
    .await;
    let executor = cluster.add_executor("executor", &env);
    cluster.executors[executor]
        .registered(&pool, Duration::from_secs(10))
        .await;

    let run_id = workload.queue_now(&pool, "once").await;
    let ended = eventually(Duration::from_secs(15), "the run ended", || async {
        Some(get_run(&pool, run_id).await)
            .filter(|run| run.state != RunState::Queued && run.state != RunState::Claimed)
    })
    .await;
    assert_eq!(ended.state, RunState::Skipped, "reason {:?}", ended.reason);
    let reason = ended.reason.unwrap_or_default();
    assert!(
        reason.contains("lock refused") && reason.to_lowercase().contains("noperm"),
        "reason: {reason}"
    );
}

/// Cut one executor off from PostgreSQL only (a stalled proxy): it cannot prove it is
/// alive, so it stops its running jobs before its heartbeat timeout expires; one of two
/// monitors declares it dead and reaps it once (one retry per abandoned run); the retry
/// runs on the other executor, after the stopped job's last effect. When the link heals
/// the executor learns it was declared dead, its end write is rejected (fencing) and it
/// registers again.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn an_executor_cut_off_from_postgres_stops_its_jobs_and_is_reaped_once(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let host = options.get_host().to_owned();
    let port = options.get_port();
    let user = options.get_username().to_owned();
    let database = options.get_database().unwrap().to_owned();
    let (pool, url) = pool_and_url(pool_options, options).await;
    let upstream: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .unwrap()
        .next()
        .unwrap();
    let proxy = Proxy::start(upstream).await;
    let cut_url = format!("postgres://{user}@127.0.0.1:{}/{database}", proxy.port());
    let mut cluster = Cluster::new("pg-cut");
    let prefix = unique_prefix("pg-cut");
    let env = fast_env(&url, &prefix);
    let cut_env = fast_env(&cut_url, &prefix);
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 300),
            JobPlan::on_demand("long", 6000),
        ],
    )
    .await;
    for i in 0..2 {
        cluster.add_monitor(&format!("monitor-{i}"), &env);
    }
    let cut_off = cluster.add_executor("cut-off", &cut_env);
    let cut_id = cluster.executors[cut_off]
        .registered(&pool, Duration::from_secs(10))
        .await;
    let first = workload.queue_now(&pool, "long").await;
    eventually(
        Duration::from_secs(15),
        "the long job runs on the cut-off executor",
        || running_on(&pool, first),
    )
    .await;
    let job_start = effect_of(&workload, first, 'S').await;
    let healthy = cluster.add_executor("healthy", &env);
    let healthy_id = cluster.executors[healthy]
        .registered(&pool, Duration::from_secs(10))
        .await;

    proxy.stall();
    let cut = Instant::now();
    let stopped = group_gone(job_start.pid, Duration::from_secs(10), "the cut-off job stopped").await;
    let stopped_wall = Utc::now();
    eprintln!("STOP POINT: job stopped {:?} after the cut", stopped - cut);
    let dead = eventually(
        Duration::from_secs(15),
        "the cut-off executor declared dead",
        || async {
            processes::get(&pool, cut_id)
                .await
                .unwrap()
                .filter(|row| row.state == ProcessState::Dead)
        },
    )
    .await;
    let declared = dead.declared_dead_at.unwrap();
    let deadline = dead.last_heartbeat_at + TimeDelta::from_std(HEARTBEAT_TIMEOUT).unwrap();
    assert!(
        stopped_wall < deadline && stopped_wall < declared,
        "the job stopped at {stopped_wall}, after its executor's heartbeat timeout ({deadline}) \
         or its declaration as dead ({declared})"
    );
    // Declaring dead and abandoning the dead executor's runs are two statements of the
    // reap pass: the run follows a moment after, or, when the cut caught the executor
    // inside a transaction ending runs, once PostgreSQL has ended that idle session (its
    // timeout is the heartbeat timeout).
    let abandoned = eventually(Duration::from_secs(8), "the cut-off run abandoned", || async {
        Some(get_run(&pool, first).await).filter(|run| run.state != RunState::Running)
    })
    .await;
    assert_eq!(
        (abandoned.state, abandoned.reason.as_deref()),
        (RunState::Abandoned, Some("executor lost"))
    );
    let retry = chain_succeeded(&pool, first, Duration::from_secs(30)).await;
    assert_eq!(retry.executor_id, Some(healthy_id));
    let retry_start = effect_of(&workload, retry.id, 'S').await;
    let last_stale = workload.effects_of(first).last().unwrap().clone();
    assert!(
        retry_start.at_us > last_stale.at_us,
        "the retry started before the cut-off job's last effect"
    );
    // Reaped once: one monitor declared it, each of its runs was re-queued once.
    let declarations = cluster.log_lines("executor declared dead");
    let of_cut: Vec<&String> = declarations
        .iter()
        .filter(|l| l.contains(&cut_id.to_string()))
        .collect();
    assert_eq!(of_cut.len(), 1, "declared dead once: {of_cut:#?}");
    let requeued_twice: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT first_run_id, attempt FROM runs WHERE first_run_id IS NOT NULL
                               GROUP BY 1, 2 HAVING count(*) > 1) AS twice",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(requeued_twice, 0);

    proxy.heal();
    let new_id = eventually(
        Duration::from_secs(15),
        "the cut-off executor registered again",
        || async {
            cluster.executors[cut_off]
                .current_id(&pool)
                .await
                .filter(|id| *id != cut_id)
        },
    )
    .await;
    assert_ne!(new_id, cut_id);
    eventually(
        Duration::from_secs(15),
        "the cut-off executor's end write was rejected by fencing",
        || async {
            let log = cluster.executors[cut_off].log_text();
            log.lines()
                .any(|l| l.contains("end rejected by fencing") && mentions_run(l, first))
                .then_some(())
        },
    )
    .await;
    assert_eq!(get_run(&pool, first).await.state, RunState::Abandoned);
    let late = jobs_started_after_death(&pool, &workload, cut_id, &[]).await;
    assert!(late.is_empty(), "jobs started under a dead identity: {late:?}");

    let cutoff = workload.wind_down(&pool, Duration::from_secs(40)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    report.assert_no_stale_effects();
}

fn libfaketime() -> Option<String> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ]
    .into_iter()
    .find(|path| std::path::Path::new(path).exists())
    .map(str::to_owned)
}

/// Clock sanity (see the module doc): an executor whose wall clock runs two hours ahead
/// and a monitor whose clock runs two hours behind (libfaketime) keep the schedule, by
/// the database's clock: no instant fires early or late, a one-shot fires at its
/// instant, nobody live is declared dead, and a killed executor is declared dead after
/// its heartbeat timeout, not before. Skipped (with a note) without libfaketime.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn clocks_of_processes_do_not_matter(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let Some(lib) = libfaketime() else {
        eprintln!("SKIPPED: libfaketime is not installed (Debian: apt-get install faketime)");
        return;
    };
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut cluster = Cluster::new("clocks");
    let env = fast_env(&url, &unique_prefix("clocks"));
    let skewed = |offset: &str| {
        let mut env = env.clone();
        env.insert("LD_PRELOAD".to_owned(), lib.clone());
        env.insert("FAKETIME".to_owned(), offset.to_owned());
        env.insert("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned());
        env
    };
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[JobPlan::every("tick", 1, 100), JobPlan::on_demand("once", 100)],
    )
    .await;
    let at = db_now(&pool).await + TimeDelta::seconds(4);
    let once = triggers::create(
        &pool,
        workload.job("once").job_id,
        &NewTrigger::once(at),
        db_now(&pool).await,
    )
    .await
    .unwrap();
    cluster.add_monitor("monitor-behind", &skewed("-2h"));
    let ahead = cluster.add_executor("executor-ahead", &skewed("+2h"));
    let ahead_id = cluster.executors[ahead]
        .registered(&pool, Duration::from_secs(10))
        .await;
    // The fake clocks took: each process stamps its log two hours off.
    for (node, hours) in [(&cluster.executors[ahead], 2), (&cluster.monitors[0], -2)] {
        let stamp = eventually(Duration::from_secs(10), "a log line", || async {
            node.log_text()
                .lines()
                .find_map(|line| line.split_whitespace().next()?.parse::<DateTime<Utc>>().ok())
        })
        .await;
        let skew = (stamp - Utc::now()).num_minutes();
        assert!(
            (skew - hours * 60).abs() < 10,
            "{} logs {skew} minutes off, not {hours} h: is libfaketime working?",
            node.name
        );
    }

    let once_run: Run = eventually(Duration::from_secs(15), "the one-shot fired", || async {
        sqlx::query_as("SELECT * FROM runs WHERE trigger_id = $1 AND state = 'succeeded'")
            .bind(once.id)
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(once_run.scheduled_at, at);
    let lag = once_run.queued_at - at;
    assert!(
        lag >= TimeDelta::zero() && lag < TimeDelta::milliseconds(1500),
        "the one-shot was queued {lag} after its instant"
    );
    eventually(
        Duration::from_secs(15),
        "the interval trigger ran 5 times",
        || async {
            let n: i64 =
                sqlx::query_scalar("SELECT count(*) FROM runs WHERE trigger_id = $1 AND state = 'succeeded'")
                    .bind(workload.job("tick").trigger_id.unwrap())
                    .fetch_one(&pool)
                    .await
                    .ok()?;
            (n >= 5).then_some(())
        },
    )
    .await;
    let lags: Vec<(DateTime<Utc>, DateTime<Utc>)> =
        sqlx::query_as("SELECT scheduled_at, queued_at FROM runs WHERE trigger_id IS NOT NULL")
            .fetch_all(&pool)
            .await
            .unwrap();
    for (scheduled, queued) in &lags {
        let lag = *queued - *scheduled;
        assert!(
            lag >= TimeDelta::zero() && lag < TimeDelta::seconds(1),
            "instant {scheduled} queued at {queued}"
        );
    }
    let dead: i64 = sqlx::query_scalar("SELECT count(*) FROM executors WHERE state = 'dead'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(dead, 0, "a monitor two hours behind declared a live process dead");

    cluster.executors[ahead].kill9().await;
    let killed = db_now(&pool).await;
    let row = eventually(
        Duration::from_secs(15),
        "the killed executor declared dead",
        || async {
            processes::get(&pool, ahead_id)
                .await
                .unwrap()
                .filter(|row| row.state == ProcessState::Dead)
        },
    )
    .await;
    let declared = row.declared_dead_at.unwrap();
    assert!(declared - row.last_heartbeat_at >= TimeDelta::from_std(HEARTBEAT_TIMEOUT).unwrap());
    assert!(
        declared - killed < TimeDelta::seconds(3 + 1 + 2),
        "declared dead {} after the kill",
        declared - killed
    );
    cluster.executors[ahead].start();
    let cutoff = workload.wind_down(&pool, Duration::from_secs(30)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
}

/// The long randomized fault run (see `infra::chaos`): `scripts/chaos SECONDS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long randomized run; use scripts/chaos SECONDS"]
async fn chaos() {
    infra::chaos::run().await;
}

/// The ambiguous outcome, repeatedly: an executor's PostgreSQL link delivers its
/// statements but loses the answers for a moment, then every connection breaks. Its
/// claims, starts, ends and heartbeats may have been committed without it knowing.
/// Nothing may stay stuck because of it: once the link is sound again every run ends
/// within the ordinary bounds (not only after the job's timeout), and the invariants hold.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn lost_replies_leave_nothing_stuck(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let host = options.get_host().to_owned();
    let port = options.get_port();
    let user = options.get_username().to_owned();
    let database = options.get_database().unwrap().to_owned();
    let (pool, url) = pool_and_url(pool_options, options).await;
    let upstream: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .unwrap()
        .next()
        .unwrap();
    let proxy = Proxy::start(upstream).await;
    let lossy_url = format!("postgres://{user}@127.0.0.1:{}/{database}", proxy.port());
    let mut cluster = Cluster::new("lost-replies");
    let prefix = unique_prefix("lost-replies");
    let env = fast_env(&url, &prefix);
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 300),
            JobPlan::every("tick-c", 1, 100).overlap(Overlap::Skip),
            JobPlan::every("slow", 2, 1500),
        ],
    )
    .await;
    cluster.add_monitor("monitor", &env);
    let lossy = cluster.add_executor("lossy", &fast_env(&lossy_url, &prefix));
    cluster.executors[lossy]
        .registered(&pool, Duration::from_secs(10))
        .await;
    let started = db_now(&pool).await;
    every_trigger_succeeds_after(
        &pool,
        &workload,
        started - TimeDelta::seconds(5),
        Duration::from_secs(15),
    )
    .await;
    // Lose the answers just after instants fire, when claims, starts and ends are sent.
    let anchor = triggers::get(&pool, workload.job("tick-a").trigger_id.unwrap())
        .await
        .unwrap()
        .unwrap()
        .created_at;
    for _ in 0..6 {
        let now = Utc::now();
        let into_second = (now - anchor).num_microseconds().unwrap().rem_euclid(1_000_000);
        let wait = (1_000_000 - into_second + 20_000) as u64;
        tokio::time::sleep(Duration::from_micros(wait)).await;
        proxy.lose_replies();
        tokio::time::sleep(Duration::from_millis(450)).await;
        proxy.reset();
        proxy.heal();
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    // A claim committed while its answer was lost is returned by a monitor after the
    // stale-claim time (10 s with these settings); everything else continues at once.
    let healed = db_now(&pool).await;
    every_trigger_succeeds_after(&pool, &workload, healed, Duration::from_secs(30)).await;
    let cutoff = workload.wind_down(&pool, Duration::from_secs(30)).await;
    let report = workload.check(&pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    report.assert_no_stale_effects();
}
