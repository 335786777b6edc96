//! The executor as users run it: real `probactr-executor` processes on a real PostgreSQL
//! (a fresh database per test) and Redis (a fresh key prefix per test), observed through
//! a witness HTTP server the jobs call.

use probactr_testkit as support;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use probactr_common::model::{JobKind, Misfire, Overlap, RunState, TriggerTiming};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{checkpoints, runs, TEST_MIGRATOR};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::witness::Witness;
use support::{eventually, executor, fast_env, unique_prefix};

/// trigger_id, scheduled_at, state, started_at, queued_at
type RunRow = (i64, DateTime<Utc>, String, Option<DateTime<Utc>>, DateTime<Utc>);

async fn pool_and_url(pool_options: PgPoolOptions, options: PgConnectOptions) -> (PgPool, String) {
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.expect("test database");
    (pool, url)
}

fn http_job(name: &str, url: &str) -> NewJob {
    NewJob::new(name, JobKind::Http, json!({ "method": "GET", "url": url }))
}

async fn count_state(pool: &PgPool, job_id: i64, state: RunState) -> i64 {
    runs::history::count_by_state(pool, Some(job_id))
        .await
        .unwrap()
        .into_iter()
        .find(|(s, _)| *s == state)
        .map(|(_, n)| n)
        .unwrap_or(0)
}

/// Waits until every run of an instant up to `cutoff` ended (on a loaded machine a few
/// may still be queued a moment after: late is not lost).
async fn runs_up_to_ended(pool: &PgPool, cutoff: DateTime<Utc>) {
    eventually(Duration::from_secs(30), "the runs up to the cutoff ended", || {
        let pool = pool.clone();
        async move {
            let unfinished: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM runs WHERE scheduled_at <= $1 AND finished_at IS NULL",
            )
            .bind(cutoff)
            .fetch_one(&pool)
            .await
            .unwrap();
            (unfinished == 0).then_some(())
        }
    })
    .await;
}

fn millis(delta: TimeDelta) -> f64 {
    delta.num_microseconds().unwrap_or(0) as f64 / 1000.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::test]
async fn a_bad_setting_exits_2_naming_the_variable() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_probactr-executor"))
        .env("PROBACTR_HEARTBEAT_INTERVAL", "often")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("PROBACTR_HEARTBEAT_INTERVAL"), "stderr: {stderr}");

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_probactr-executor"))
        .env("PROBACTR_HEARTBEAT_INTERVAL", "10s")
        .env("PROBACTR_HEARTBEAT_TIMEOUT", "5s")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("PROBACTR_HEARTBEAT_TIMEOUT"));

    // No key for job secrets: the executor could open none, so it does not start.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_probactr-executor"))
        .env_remove("PROBACTR_SECRET_KEY")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("PROBACTR_SECRET_KEY is not set"),
        "stderr: {stderr}"
    );

    // A misspelt setting is named with what it likely means (the bad interval then
    // stops the process before it connects anywhere).
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_probactr-executor"))
        .env("PROBACTR_EXECUTOR_CAPACTY", "64")
        .env("PROBACTR_HEARTBEAT_INTERVAL", "often")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown PROBACTR_EXECUTOR_CAPACTY, did you mean PROBACTR_EXECUTOR_CAPACITY?"),
        "stderr: {stderr}"
    );

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_probactr-executor"))
        .env("PROBACTR_HTTP_DENY", "10.0.0.0/33")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("PROBACTR_HTTP_DENY"));

    let version = tokio::process::Command::new(env!("CARGO_BIN_EXE_probactr-executor"))
        .arg("--version")
        .output()
        .await
        .unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("probactr-executor "));
}

/// 3 executors, 200 interval triggers every second: every instant runs exactly once.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn interval_triggers_fire_every_instant_exactly_once(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let seconds: i64 = std::env::var("PROBACTR_TEST_FIRE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let env = fast_env(&url, &unique_prefix("fire"));
    let mut trigger_ids = Vec::new();
    for i in 0..200 {
        // Queue rather than skip: an instant delayed while the executors start may meet
        // the next one, and every instant must still run once.
        let mut job = http_job(&format!("tick-{i}"), &witness.url(&format!("t{i}"), 0));
        job.overlap = Overlap::Queue;
        let job = jobs::insert(&pool, &job).await.unwrap();
        let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(1), Utc::now())
            .await
            .unwrap();
        trigger_ids.push(trigger.id);
    }
    let executors: Vec<_> = (0..3).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    let started = Utc::now();
    tokio::time::sleep(Duration::from_secs(seconds as u64)).await;
    let cutoff = Utc::now() - TimeDelta::seconds(3);
    // Let the runs of instants up to the cutoff finish (on a loaded machine a few may
    // still be queued a moment later: late is not lost, and lost ones show below).
    runs_up_to_ended(&pool, cutoff).await;
    drop(executors);

    let rows: Vec<RunRow> = sqlx::query_as(
        "SELECT trigger_id, scheduled_at, state, started_at, queued_at FROM runs WHERE scheduled_at <= $1 ORDER BY scheduled_at",
    )
    .bind(cutoff)
    .fetch_all(&pool)
    .await
    .unwrap();
    let triggers: Vec<(i64, DateTime<Utc>)> = sqlx::query_as("SELECT id, created_at FROM triggers")
        .fetch_all(&pool)
        .await
        .unwrap();

    // Every expected instant has a run, and every run succeeded.
    let mut per_trigger: HashMap<i64, HashSet<DateTime<Utc>>> = HashMap::new();
    for (trigger_id, scheduled_at, state, _, _) in &rows {
        assert_eq!(
            state, "succeeded",
            "run of trigger {trigger_id} at {scheduled_at}"
        );
        assert!(
            per_trigger.entry(*trigger_id).or_default().insert(*scheduled_at),
            "duplicate run row"
        );
    }
    let mut expected_total = 0;
    for (id, anchor) in &triggers {
        // An interval trigger's first instant is its anchor (the creation time).
        let mut instant = *anchor;
        while instant <= cutoff {
            expected_total += 1;
            assert!(
                per_trigger.get(id).is_some_and(|s| s.contains(&instant)),
                "trigger {id} lost instant {instant}"
            );
            instant += TimeDelta::seconds(1);
        }
    }
    assert_eq!(rows.len(), expected_total, "runs beyond the expected instants");
    // Runs are fired ahead of their instant (PROBACTR_FIRE_AHEAD) but never start early.
    for (trigger_id, scheduled_at, _, started_at, _) in &rows {
        assert!(
            started_at.is_some_and(|started| started >= *scheduled_at),
            "run of trigger {trigger_id} at {scheduled_at} started early: {started_at:?}"
        );
    }

    // The job's own effect happened exactly once per instant.
    let mut effects: HashMap<(String, String), usize> = HashMap::new();
    for hit in witness.hits() {
        let key = (
            hit.header("x-probactr-trigger-id").unwrap_or("").to_owned(),
            hit.header("x-probactr-scheduled-at").unwrap_or("").to_owned(),
        );
        *effects.entry(key).or_default() += 1;
    }
    let duplicated: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicated.is_empty(),
        "instants whose effect happened twice: {duplicated:?}"
    );
    assert!(
        witness.hits().len() >= expected_total,
        "effects {} < runs {expected_total}",
        witness.hits().len()
    );

    // Lag figures leave out the first second: instants due while the executors started.
    let steady = started + TimeDelta::seconds(1);
    let steady_rows: Vec<_> = rows.iter().filter(|row| row.1 >= steady).collect();
    let mut lags: Vec<f64> = steady_rows
        .iter()
        .filter_map(|(_, scheduled, _, started, _)| started.map(|s| millis(s - *scheduled)))
        .collect();
    lags.sort_by(f64::total_cmp);
    let mut fire_lags: Vec<f64> = steady_rows
        .iter()
        .map(|(_, scheduled, _, _, queued)| millis(*queued - *scheduled))
        .collect();
    fire_lags.sort_by(f64::total_cmp);
    let elapsed = (cutoff - started).num_milliseconds() as f64 / 1000.0;
    eprintln!(
        "FIRE FIGURES: {} runs over {elapsed:.1}s = {:.0} fires/s; fire lag ms p50 {:.1} p99 {:.1}; start lag ms p50 {:.1} p99 {:.1} max {:.1}",
        rows.len(),
        rows.len() as f64 / elapsed.max(1.0),
        percentile(&fire_lags, 50.0),
        percentile(&fire_lags, 99.0),
        percentile(&lags, 50.0),
        percentile(&lags, 99.0),
        percentile(&lags, 100.0)
    );
}

/// A non-parallel job slower than its interval never overlaps itself; `skip` records
/// skipped runs, `queue` runs them one after another.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn non_parallel_jobs_never_overlap(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("overlap"));
    let skip = jobs::insert(&pool, &http_job("slow-skip", &witness.url("skip", 2500)))
        .await
        .unwrap();
    let mut queue_job = http_job("slow-queue", &witness.url("queue", 1200));
    queue_job.overlap = Overlap::Queue;
    let queue = jobs::insert(&pool, &queue_job).await.unwrap();
    for job in [&skip, &queue] {
        triggers::create(&pool, job.id, &NewTrigger::interval(1), Utc::now())
            .await
            .unwrap();
    }
    let executors: Vec<_> = (0..3).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    tokio::time::sleep(Duration::from_secs(9)).await;
    sqlx::query("UPDATE triggers SET paused = true")
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(executors);

    assert_eq!(witness.max_in_flight("skip"), 1, "the skip job overlapped itself");
    assert_eq!(
        witness.max_in_flight("queue"),
        1,
        "the queue job overlapped itself"
    );
    assert!(witness.hits_of("skip").len() >= 2, "the skip job barely ran");
    let skipped = count_state(&pool, skip.id, RunState::Skipped).await;
    assert!(skipped >= 2, "overlap=skip recorded {skipped} skipped runs");
    let reason: Option<String> =
        sqlx::query_scalar("SELECT reason FROM runs WHERE job_id = $1 AND state = 'skipped' LIMIT 1")
            .bind(skip.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        reason.unwrap_or_default().contains("busy"),
        "a skipped run says why"
    );
    assert_eq!(
        count_state(&pool, queue.id, RunState::Skipped).await,
        0,
        "overlap=queue never skips"
    );
    let queued_runs = witness.hits_of("queue");
    assert!(
        queued_runs.len() >= 4,
        "overlap=queue ran {} times in 9 s",
        queued_runs.len()
    );
    let mut spans: Vec<_> = queued_runs.iter().map(|hit| (hit.started, hit.ended)).collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "queued runs overlapped");
    }
}

/// A parallel job with max_concurrency 3 never has more than 3 attempts in flight.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn parallel_job_respects_max_concurrency(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("permits"));
    let mut job = http_job("bounded", &witness.url("bounded", 800));
    job.parallel = true;
    job.max_concurrency = Some(3);
    job.overlap = Overlap::Queue;
    let job = jobs::insert(&pool, &job).await.unwrap();
    runs::queue_many_now(&pool, job.id, 12).await.unwrap();
    let _executors: Vec<_> = (0..3).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    eventually(Duration::from_secs(30), "12 runs succeeded", || async {
        (count_state(&pool, job.id, RunState::Succeeded).await == 12).then_some(())
    })
    .await;
    assert_eq!(
        witness.max_in_flight("bounded"),
        3,
        "at most 3 at once, and 3 were reached"
    );
    assert_eq!(witness.hits_of("bounded").len(), 12, "each run called once");
}

/// A trigger created while executors sleep fires on time (the NOTIFY path).
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_new_trigger_wakes_sleeping_executors(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let env = fast_env(&url, &unique_prefix("notify"));
    let job = jobs::insert(&pool, &http_job("wake", &witness.url("wake", 0)))
        .await
        .unwrap();
    let _executors: Vec<_> = (0..2).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    // Nothing is scheduled: the executors sleep for their longest pause.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let at = Utc::now() + TimeDelta::milliseconds(1500);
    let trigger = triggers::create(&pool, job.id, &NewTrigger::once(at), Utc::now())
        .await
        .unwrap();
    let started: DateTime<Utc> = eventually(Duration::from_secs(5), "the one-shot ran", || async {
        sqlx::query_scalar::<_, Option<DateTime<Utc>>>("SELECT started_at FROM runs WHERE trigger_id = $1")
            .bind(trigger.id)
            .fetch_optional(&pool)
            .await
            .unwrap()
            .flatten()
    })
    .await;
    let lag = started - at;
    assert!(lag < TimeDelta::seconds(1), "fired {lag} after its instant");
    let next: Option<DateTime<Utc>> = sqlx::query_scalar("SELECT next_fire_at FROM triggers WHERE id = $1")
        .bind(trigger.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(next, None, "a fired one-shot has no next instant");
}

/// After an outage, each misfire policy runs and records exactly the instants it should.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn misfire_policies_after_an_outage(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("misfire"));
    let mut jobs_by_policy = BTreeMap::new();
    // Instants every 2 s from 20 s ago until the window's end 1 s ago: 10 instants, all
    // older than the 1 s misfire threshold by the time the executor starts.
    let now = Utc::now();
    let outage_start = now - TimeDelta::seconds(20);
    for policy in [Misfire::FireOnce, Misfire::Skip, Misfire::FireAll] {
        let mut job = NewJob::new(format!("misfire-{policy}"), JobKind::Noop, json!({}));
        job.parallel = true;
        let job = jobs::insert(&pool, &job).await.unwrap();
        let mut trigger = NewTrigger::interval(2);
        trigger.timing.misfire = policy;
        trigger.timing.misfire_threshold_secs = 1;
        trigger.timing.start_at = Some(outage_start);
        trigger.timing.end_at = Some(now - TimeDelta::seconds(1));
        let trigger = triggers::create(&pool, job.id, &trigger, Utc::now())
            .await
            .unwrap();
        // The cluster was down: the trigger still waits for its first instant.
        sqlx::query("UPDATE triggers SET next_fire_at = start_at WHERE id = $1")
            .bind(trigger.id)
            .execute(&pool)
            .await
            .unwrap();
        jobs_by_policy.insert(policy.as_str(), (job.id, trigger.id));
    }
    let mut executor = executor("executor", &env);
    tokio::time::sleep(Duration::from_secs(2)).await;
    executor.signal(support::SIGTERM);
    executor.wait_exit(Duration::from_secs(10)).await;

    for (policy, (job_id, trigger_id)) in &jobs_by_policy {
        let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE trigger_id = $1")
            .bind(trigger_id)
            .fetch_one(&pool)
            .await
            .unwrap();
        let missed: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(instants), 0)::bigint FROM misfires WHERE trigger_id = $1",
        )
        .bind(trigger_id)
        .fetch_one(&pool)
        .await
        .unwrap();
        let expected = 10;
        assert_eq!(
            runs + missed,
            expected,
            "{policy}: every instant ran or was recorded missed"
        );
        match *policy {
            "fire_once" => assert_eq!(runs, 1, "fire_once runs one late instant"),
            "skip" => assert_eq!(runs, 0, "skip runs no late instant"),
            _ => assert_eq!(missed, 0, "fire_all runs them all"),
        }
        let done = count_state(&pool, *job_id, RunState::Succeeded).await;
        assert_eq!(done, runs, "{policy}: the fired runs ran");
    }
}

/// SIGTERM drains: a short job finishes and is recorded, a long one is stopped and
/// recorded, its lock is released, the process exits 0.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn sigterm_drains(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let prefix = unique_prefix("drain");
    let env = fast_env(&url, &prefix);
    let short = jobs::insert(&pool, &http_job("short", &witness.url("short", 1000)))
        .await
        .unwrap();
    let long = jobs::insert(&pool, &http_job("long", &witness.url("long", 60_000)))
        .await
        .unwrap();
    let short_run = runs::queue_now(&pool, short.id).await.unwrap();
    let long_run = runs::queue_now(&pool, long.id).await.unwrap();
    let mut executor = executor("executor", &env);
    eventually(Duration::from_secs(10), "both jobs in flight", || async {
        (witness.in_flight("short") == 1 && witness.in_flight("long") == 1).then_some(())
    })
    .await;
    executor.signal(support::SIGTERM);
    let status = executor.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "exit status {status}");

    let short_after = runs::get(&pool, short_run.id).await.unwrap().unwrap();
    assert_eq!(short_after.state, RunState::Succeeded);
    let long_after = runs::get(&pool, long_run.id).await.unwrap().unwrap();
    assert_eq!(long_after.state, RunState::Abandoned);
    assert!(long_after.reason.unwrap_or_default().contains("shut down"));
    let mut redis = redis::Client::open(support::redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let lock: Option<String> = redis::cmd("GET")
        .arg(format!("{prefix}lock:job:{}", long.id))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(lock, None, "the long job's lock was released");
    let state: String = sqlx::query_scalar("SELECT state FROM executors")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "stopped");
}

/// Cancellation requested through the database stops a running job within a second.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn cancel_stops_a_running_job_within_a_second(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("cancel"));
    let job = jobs::insert(
        &pool,
        &NewJob::new(
            "sleeper",
            JobKind::Shell,
            json!({ "program": "sleep", "args": ["60"] }),
        ),
    )
    .await
    .unwrap();
    let run = runs::queue_now(&pool, job.id).await.unwrap();
    let _executor = executor("executor", &env);
    eventually(Duration::from_secs(10), "the run started", || async {
        (runs::get(&pool, run.id).await.unwrap().unwrap().state == RunState::Running).then_some(())
    })
    .await;
    let asked = tokio::time::Instant::now();
    runs::request_cancel(&mut pool.acquire().await.unwrap(), run.id, "cancelled by test")
        .await
        .unwrap();
    eventually(Duration::from_secs(3), "the run cancelled", || async {
        (runs::get(&pool, run.id).await.unwrap().unwrap().state == RunState::Cancelled).then_some(())
    })
    .await;
    assert!(
        asked.elapsed() < Duration::from_millis(1500),
        "cancel took {:?}",
        asked.elapsed()
    );
}

/// A cancelled shell job gets SIGTERM and its grace: a job that traps it writes its last
/// checkpoint and exits 0, and the run ends `cancelled` with that exit code, its output
/// and the checkpoint written in the trap kept.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn cancel_sends_sigterm_and_keeps_the_clean_exit_and_checkpoint(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("sigterm"));
    let script = "trap 'echo got TERM; echo saved-in-trap > \"$PROBACTR_CHECKPOINT_FILE\"; exit 0' TERM; \
                  echo started; echo step-1 > \"$PROBACTR_CHECKPOINT_FILE\"; while :; do sleep 1; done";
    let mut job = NewJob::new(
        "trapper",
        JobKind::Shell,
        json!({ "program": script, "shell": true }),
    );
    job.stop_grace_secs = 60;
    let job = jobs::insert(&pool, &job).await.unwrap();
    let run = runs::queue_now(&pool, job.id).await.unwrap();
    let _executor = executor("executor", &env);
    eventually(Duration::from_secs(20), "the first checkpoint saved", || async {
        checkpoints::load(&pool, run.id)
            .await
            .unwrap()
            .filter(|c| c.data == b"step-1\n")
    })
    .await;
    runs::request_cancel(&mut pool.acquire().await.unwrap(), run.id, "cancelled by test")
        .await
        .unwrap();
    let ended = eventually(Duration::from_secs(30), "the run cancelled", || async {
        runs::get(&pool, run.id)
            .await
            .unwrap()
            .filter(|r| r.state == RunState::Cancelled)
    })
    .await;
    assert_eq!(ended.exit_code, Some(0), "{ended:?}");
    let error = ended.error.unwrap_or_default();
    assert!(error.contains("exited with code 0 after SIGTERM"), "{error}");
    let output = ended.output.unwrap_or_default();
    assert!(
        output.contains("started") && output.contains("got TERM"),
        "{output}"
    );
    let checkpoint = checkpoints::load(&pool, run.id).await.unwrap().unwrap();
    assert_eq!(checkpoint.data, b"saved-in-trap\n");
    assert_eq!(checkpoint.run_id, run.id);
}

/// `PROBACTR_LOG_FORMAT=json` logs one JSON object per line with the run's ids, and
/// `PROBACTR_METRICS_LISTEN` serves Prometheus metrics counting the run.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn json_logs_and_metrics(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut env = fast_env(&url, &unique_prefix("observe"));
    env.insert("PROBACTR_LOG_FORMAT".into(), "json".into());
    env.insert("PROBACTR_METRICS_LISTEN".into(), format!("127.0.0.1:{port}"));
    let job = jobs::insert(&pool, &NewJob::new("observed", JobKind::Noop, json!({})))
        .await
        .unwrap();
    let run = runs::queue_now(&pool, job.id).await.unwrap();
    let child = tokio::process::Command::new(support::workspace_binary("probactr-executor"))
        .env_clear()
        .envs(&env)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(10), "the run succeeded", || async {
        (runs::get(&pool, run.id).await.unwrap().unwrap().state == RunState::Succeeded).then_some(())
    })
    .await;
    let metrics = eventually(Duration::from_secs(5), "metrics served", || async {
        let body = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        body.contains("probactr_runs_total{outcome=\"succeeded\"} 1")
            .then_some(body)
    })
    .await;
    assert!(metrics.contains("probactr_start_lag_seconds"), "{metrics}");

    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let recorded = lines
        .iter()
        .find(|line| line["message"] == "run recorded")
        .unwrap_or_else(|| panic!("no 'run recorded' line in {stderr}"));
    let text = recorded.to_string();
    assert!(
        text.contains(&run.id.to_string()) && text.contains("executor.id"),
        "{text}"
    );
}

/// A job's secret reaches the job, never the history: its output shows `***`, a job
/// referencing a missing secret fails saying which, a secret whose sealed value was
/// copied from another secret (by someone who can write to the database but has no key)
/// does not open and the run fails naming it, and a dump of the database holds the
/// value nowhere.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn secrets_reach_the_job_and_nothing_else(pool_options: PgPoolOptions, options: PgConnectOptions) {
    use probactr_common::secrets::{Keyring, Owner, SecretKey};
    let (pool, url) = pool_and_url(pool_options, options).await;
    let key_text = support::TEST_SECRET_KEY;
    let keys = Keyring::new(SecretKey::parse(key_text).unwrap(), None);
    let value = "pa55-word-8c1e";
    for (name, value) in [("db_password", value), ("greeting", "hello")] {
        let sealed = keys.seal(&Owner::secret("default", name), value);
        probactr_common::store::secrets::put(&pool, "default", name, &sealed, "test")
            .await
            .unwrap();
    }
    // The password's blob onto the harmless secret a job prints.
    sqlx::query(
        "UPDATE secrets SET key_id = src.key_id, nonce = src.nonce, ciphertext = src.ciphertext
         FROM secrets AS src WHERE secrets.name = 'greeting' AND src.name = 'db_password'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let env = fast_env(&url, &unique_prefix("secrets"));
    let printer = jobs::insert(
        &pool,
        &NewJob::new(
            "printer",
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", "echo \"password=$DB_PASSWORD arg=$1\"", "sh", "{{ secrets.db_password }}"],
                   "env": {"DB_PASSWORD": "{{ secrets.db_password }}"}}),
        ),
    )
    .await
    .unwrap();
    let missing = jobs::insert(
        &pool,
        &NewJob::new(
            "missing",
            JobKind::Shell,
            json!({"program": "true", "env": {"X": "{{ secrets.nope }}"}}),
        ),
    )
    .await
    .unwrap();
    let greeter = jobs::insert(
        &pool,
        &NewJob::new(
            "greeter",
            JobKind::Shell,
            json!({"program": "echo", "args": ["{{ secrets.greeting }}"]}),
        ),
    )
    .await
    .unwrap();
    let printed = runs::queue_now(&pool, printer.id).await.unwrap();
    let refused = runs::queue_now(&pool, missing.id).await.unwrap();
    let swapped = runs::queue_now(&pool, greeter.id).await.unwrap();
    let _executor = executor("executor", &env);
    let ended = |id: i64| {
        let pool = pool.clone();
        async move {
            let run = runs::get(&pool, id).await.unwrap().unwrap();
            run.state.is_terminal().then_some(run)
        }
    };
    let printed = eventually(Duration::from_secs(15), "the printer ran", || ended(printed.id)).await;
    assert_eq!(printed.state, RunState::Succeeded, "{printed:?}");
    assert_eq!(printed.output.as_deref(), Some("password=*** arg=***\n"));
    let refused = eventually(Duration::from_secs(15), "the other one ended", || {
        ended(refused.id)
    })
    .await;
    assert_eq!(refused.state, RunState::Failed);
    assert!(
        refused
            .reason
            .as_deref()
            .or(refused.error.as_deref())
            .unwrap_or_default()
            .contains("secret nope, which does not exist"),
        "{refused:?}"
    );
    let swapped = eventually(Duration::from_secs(15), "the greeter ended", || ended(swapped.id)).await;
    assert_eq!(swapped.state, RunState::Failed, "{swapped:?}");
    let why = swapped
        .reason
        .as_deref()
        .or(swapped.error.as_deref())
        .unwrap_or_default();
    assert!(why.contains("secret greeting does not open"), "{swapped:?}");
    assert!(!swapped.output.unwrap_or_default().contains(value));

    let pg_dump = std::env::var("PROBACTR_PG_BINDIR")
        .map(|dir| format!("{dir}/pg_dump"))
        .unwrap_or_else(|_| "pg_dump".into());
    match std::process::Command::new(&pg_dump)
        .arg("--dbname")
        .arg(&url)
        .output()
    {
        Ok(dump) if dump.status.success() => {
            let text = String::from_utf8_lossy(&dump.stdout);
            assert!(text.contains("db_password"), "the dump holds the secret's name");
            assert!(!text.contains(value), "the dump holds the secret's value");
        }
        other => eprintln!("pg_dump unavailable ({pg_dump}): {other:?}; the dump check is skipped"),
    }
}

/// Values others give cannot change what a job does, and secrets do not leak through the
/// gaps of output: a URL parameter `../../x?y=` reaches a witness server as one encoded
/// path segment; a parameter with spaces, `;`, `$(…)` and `*` is one argument of a
/// shell job, as it was written; a secret printed in two writes across the 4,096-byte boundary is masked
/// in the live output's chunks, its base64 form in the stored output, and a step output
/// holding it is masked before it is stored; a secret printed across a cut of a long
/// output (the live output's head and tail, the run's stored tail) leaves no piece of it
/// on either side.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn run_inputs_are_encoded_and_secrets_masked_without_gaps(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    use probactr_common::secrets::{Keyring, Owner, SecretKey, MASK};
    use probactr_common::store::{run_inputs, run_output};
    let (pool, url) = pool_and_url(pool_options, options).await;
    let keys = Keyring::new(SecretKey::parse(support::TEST_SECRET_KEY).unwrap(), None);
    let secret = "Zq7pW3xK9vB2nM5tR8yL4cH6";
    probactr_common::store::secrets::put(
        &pool,
        "default",
        "token",
        &keys.seal(&Owner::secret("default", "token"), secret),
        "test",
    )
    .await
    .unwrap();
    let witness = Witness::start().await;
    let caller = jobs::insert(
        &pool,
        &NewJob::new(
            "caller",
            JobKind::Http,
            json!({"url": format!("{}/hit/{{{{ params.id }}}}?hold_ms=0", witness.base_url)}),
        ),
    )
    .await
    .unwrap();
    // 4,086 bytes, the secret's first 10 bytes (ending at byte 4,096), a pause longer
    // than the live output's flush, the rest; then the secret in base64.
    let printer = jobs::insert(
        &pool,
        &NewJob::new(
            "printer",
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", r#"printf '%4086s' x; printf %s "$S" | head -c 10; sleep 1; printf '%s\n' "$S" | tail -c +11; printf %s "$S" | base64"#],
                   "env": {"S": "{{ secrets.token }}"}}),
        ),
    )
    .await
    .unwrap();
    // 4,091 bytes, the secret across byte 4,096 (the end of the live output's head at
    // 8 KiB); 1,000 bytes, the secret again, and 65,522 bytes: the last 64 KiB the run
    // keeps would start 10 bytes into the second secret had it not been masked first.
    let long = jobs::insert(
        &pool,
        &NewJob::new(
            "long",
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", r#"printf '%4091s' x; printf %s "$S"; printf '%1000s' y; printf %s "$S"; printf '%65521s\n' y"#],
                   "env": {"S": "{{ secrets.token }}"}}),
        ),
    )
    .await
    .unwrap();
    let step = jobs::insert(
        &pool,
        &NewJob::new(
            "step",
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", r#"printf '{"token": "%s", "n": 1}' "$S" > "$PROBACTR_OUTPUT_FILE""#],
                   "env": {"S": "{{ secrets.token }}"}}),
        ),
    )
    .await
    .unwrap();
    let arguments = jobs::insert(
        &pool,
        &NewJob::new(
            "arguments",
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", r#"printf '%s|' "$#" "$@""#, "sh", "{{ params.x }}"]}),
        ),
    )
    .await
    .unwrap();
    let called = runs::queue_now(&pool, caller.id).await.unwrap();
    run_inputs::set_params(&pool, called.id, &json!({"id": "../../x?y="}))
        .await
        .unwrap();
    let argued = runs::queue_now(&pool, arguments.id).await.unwrap();
    let argument = "a b; $(id) * \"c\" 'd'";
    run_inputs::set_params(&pool, argued.id, &json!({"x": argument}))
        .await
        .unwrap();
    let printed = runs::queue_now(&pool, printer.id).await.unwrap();
    let stepped = runs::queue_now(&pool, step.id).await.unwrap();
    let longer = runs::queue_now(&pool, long.id).await.unwrap();
    let mut env = fast_env(&url, &unique_prefix("inputs-masking"));
    env.insert("PROBACTR_OUTPUT_LIMIT".into(), "8KiB".into());
    let _executor = executor("executor", &env);
    let ended = |id: i64| {
        let pool = pool.clone();
        async move {
            let run = runs::get(&pool, id).await.unwrap().unwrap();
            run.state.is_terminal().then_some(run)
        }
    };

    let called = eventually(Duration::from_secs(20), "the caller ran", || ended(called.id)).await;
    assert_eq!(called.state, RunState::Succeeded, "{called:?}");
    let keys: Vec<String> = witness.hits().into_iter().map(|hit| hit.key).collect();
    assert_eq!(keys, ["..%2F..%2Fx%3Fy%3D"], "one encoded path segment");

    let argued = eventually(Duration::from_secs(20), "the arguments ran", || ended(argued.id)).await;
    assert_eq!(argued.state, RunState::Succeeded, "{argued:?}");
    assert_eq!(
        argued.output.as_deref(),
        Some(format!("1|{argument}|").as_str()),
        "one template, one argument, as written"
    );

    let printed = eventually(Duration::from_secs(20), "the printer ran", || ended(printed.id)).await;
    assert_eq!(printed.state, RunState::Succeeded, "{printed:?}");
    let chunks = run_output::read(&pool, printed.id, 0, 1000).await.unwrap();
    assert!(
        chunks.len() >= 2,
        "the pause splits the output into chunks: {chunks:?}"
    );
    let live: String = chunks.iter().map(|chunk| chunk.content.as_str()).collect();
    assert!(
        !live.contains(&secret[..10]) && !live.contains(&secret[10..]),
        "{live}"
    );
    assert_eq!(live.matches(MASK).count(), 2, "{live}");
    let stored = printed.output.unwrap_or_default();
    assert!(
        !stored.contains(&secret[..10]) && !stored.contains(&secret[10..]),
        "{stored}"
    );
    assert!(stored.ends_with(&format!("{MASK}\n{MASK}\n")), "{stored:?}");

    let longer = eventually(Duration::from_secs(20), "the long one ran", || ended(longer.id)).await;
    assert_eq!(longer.state, RunState::Succeeded, "{longer:?}");
    let stored = longer.output.unwrap_or_default();
    let live: String = run_output::read(&pool, longer.id, 0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|chunk| chunk.content.clone())
        .collect();
    assert!(
        live.len() < 9000,
        "the live output's middle is cut ({} bytes)",
        live.len()
    );
    assert!(stored.starts_with("[… "), "the stored output is a tail");
    for (what, text) in [("stored", &stored), ("live", &live)] {
        assert!(text.contains(MASK), "{what}: {text}");
        for piece in secret.as_bytes().windows(5) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(!text.contains(piece), "{what} holds {piece:?} of the secret");
        }
    }

    let stepped = eventually(Duration::from_secs(20), "the step ran", || ended(stepped.id)).await;
    assert_eq!(stepped.state, RunState::Succeeded, "{stepped:?}");
    let output = run_inputs::output_of(&pool, stepped.id).await.unwrap();
    assert_eq!(output, Some(json!({"token": MASK, "n": 1})));
}

/// Runs claimed ahead of the free slots (`PROBACTR_EXECUTOR_PREFETCH`) that wait too long
/// for a slot go back to the queue, for any executor to take, and still run once each.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn prefetched_runs_that_wait_too_long_go_back_to_the_queue(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut env = fast_env(&url, &unique_prefix("prefetch"));
    env.insert("PROBACTR_EXECUTOR_CAPACITY".into(), "1".into());
    env.insert("PROBACTR_EXECUTOR_PREFETCH".into(), "4".into());
    let mut job = NewJob::new("nap", JobKind::Sleep, json!({ "millis": 1500 }));
    job.parallel = true;
    let job = jobs::insert(&pool, &job).await.unwrap();
    runs::queue_many_now(&pool, job.id, 3).await.unwrap();
    let log = std::env::temp_dir().join(format!("{}.log", unique_prefix("prefetch-executor")));
    let _executor = support::spawn_workspace_logged("probactr-executor", "executor", &env, &log);
    eventually(
        Duration::from_secs(10),
        "one run running, two given back",
        || async {
            let running = count_state(&pool, job.id, RunState::Running).await;
            let queued = count_state(&pool, job.id, RunState::Queued).await;
            (running == 1 && queued == 2).then_some(())
        },
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("prefetched runs given back to the queue"),
        "the held runs were claimed ahead and given back: {text}"
    );
    eventually(Duration::from_secs(30), "3 runs succeeded", || async {
        (count_state(&pool, job.id, RunState::Succeeded).await == 3).then_some(())
    })
    .await;
    let attempts: Vec<i32> = sqlx::query_scalar("SELECT attempt FROM runs WHERE job_id = $1")
        .bind(job.id)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(attempts, vec![1, 1, 1], "each run once, in its first attempt");
    let _ = std::fs::remove_file(&log);
}

/// Runs fired ahead of their instants (`PROBACTR_FIRE_AHEAD`) of jobs that need no lock
/// are held by the executor that fired them and start at their instants, never before,
/// past its free slots too (booked: they start as slots free); an executor that stops
/// gives back those it still holds, and another runs each once.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn runs_fired_ahead_start_at_their_instants_and_go_back_at_stop(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let witness = Witness::start().await;
    let mut env = fast_env(&url, &unique_prefix("ahead"));
    env.insert("PROBACTR_FIRE_AHEAD".to_owned(), "900ms".to_owned());
    // 20 runs an instant, 4 slots: most are booked past the slots.
    env.insert("PROBACTR_EXECUTOR_CAPACITY".to_owned(), "4".to_owned());
    // The witness stamps arrivals on the monotonic clock; this maps them to the wall clock
    // PostgreSQL shares on this host.
    let (wall, monotonic) = (Utc::now(), std::time::Instant::now());
    // Every second on the second: the 20 runs of an instant are fired together.
    let aligned = DateTime::from_timestamp(Utc::now().timestamp() + 1, 0).expect("a time");
    for i in 0..20 {
        let mut job = http_job(&format!("ahead-{i}"), &witness.url(&format!("a{i}"), 0));
        job.parallel = true;
        let job = jobs::insert(&pool, &job).await.unwrap();
        let every_second = NewTrigger::with(TriggerTiming {
            start_at: Some(aligned),
            ..TriggerTiming::interval(1)
        });
        triggers::create(&pool, job.id, &every_second, Utc::now())
            .await
            .unwrap();
    }
    let mut first = executor("executor-a", &env);
    tokio::time::sleep(Duration::from_secs(4)).await;
    // It holds the runs of the coming second now: stopping gives them back.
    first.signal(support::SIGTERM);
    first.wait_exit(Duration::from_secs(30)).await;
    let _second = executor("executor-b", &env);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cutoff = Utc::now() - TimeDelta::seconds(1);
    runs_up_to_ended(&pool, cutoff).await;

    type Row = (
        i64,
        DateTime<Utc>,
        String,
        Option<DateTime<Utc>>,
        Option<DateTime<Utc>>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT trigger_id, scheduled_at, state, started_at, claimed_at FROM runs WHERE scheduled_at <= $1",
    )
    .bind(cutoff)
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut instants = HashSet::new();
    for (trigger_id, scheduled_at, state, started_at, _) in &rows {
        assert_eq!(
            state, "succeeded",
            "run of trigger {trigger_id} at {scheduled_at}"
        );
        assert!(instants.insert((*trigger_id, *scheduled_at)), "duplicate run row");
        assert!(
            started_at.is_some_and(|started| started >= *scheduled_at),
            "run of trigger {trigger_id} at {scheduled_at} recorded as started early: {started_at:?}"
        );
    }
    let mut held: HashMap<DateTime<Utc>, usize> = HashMap::new();
    for (_, scheduled_at, _, _, claimed_at) in &rows {
        if claimed_at.is_some_and(|claimed| claimed < *scheduled_at) {
            *held.entry(*scheduled_at).or_default() += 1;
        }
    }
    assert!(
        !held.is_empty(),
        "no run was held by its firer ahead of its instant"
    );
    let most = held.values().max().copied().unwrap_or(0);
    assert!(
        most > 2,
        "at most {most} runs of an instant held: none booked past the free slots"
    );

    let mut effects: HashMap<(String, String), usize> = HashMap::new();
    for hit in witness.hits() {
        let scheduled = hit.header("x-probactr-scheduled-at").unwrap_or("").to_owned();
        let at = DateTime::parse_from_rfc3339(&scheduled).expect("the instant header is a time");
        let arrived = wall + TimeDelta::from_std(hit.started.duration_since(monotonic)).unwrap();
        assert!(
            arrived + TimeDelta::milliseconds(1) >= at,
            "the job of the instant {scheduled} ran early, at {arrived}"
        );
        let trigger = hit.header("x-probactr-trigger-id").unwrap_or("").to_owned();
        *effects.entry((trigger, scheduled)).or_default() += 1;
    }
    let twice: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "instants whose effect happened twice: {twice:?}"
    );
    assert!(
        effects.len() >= rows.len(),
        "effects {} < runs {}",
        effects.len(),
        rows.len()
    );
}
