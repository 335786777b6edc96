//! Fault injection against real processes: executors and monitors die, and the cluster
//! keeps the promises of DESIGN.md (invariants 3, 5 and 6).
#![allow(clippy::unwrap_used)]

#[path = "../../executor/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use probactr_common::model::{JobKind, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::{runs, MIGRATOR};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::witness::Witness;
use support::{eventually, executor, fast_env, monitor, unique_prefix};

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
#[sqlx::test(migrator = "MIGRATOR")]
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

/// Three monitors at once: each dead executor is declared dead by exactly one of them
/// and each abandoned run is re-queued exactly once. Killing one monitor leaves the
/// others reaping.
#[sqlx::test(migrator = "MIGRATOR")]
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
#[sqlx::test(migrator = "MIGRATOR")]
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
