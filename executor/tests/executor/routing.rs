//! Where runs go, with real executors: a selector never lands on an executor without
//! its labels, and waits while none has them; a cordon stops new claims at once; a drain
//! makes an executor finish and exit.

use std::collections::HashMap;
use std::time::Duration;

use probactr_common::model::{JobKind, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::processes::{self, Routing};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{runs, TEST_MIGRATOR};
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::{eventually, executor, fast_env, unique_prefix};
use uuid::Uuid;

async fn connect(pool_options: PgPoolOptions, options: PgConnectOptions) -> (PgPool, String) {
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.expect("test database");
    (pool, url)
}

/// The executor id a process registered under (found by its pid).
pub(crate) async fn registered_id(pool: &PgPool, pid: i32) -> Uuid {
    eventually(Duration::from_secs(20), "the executor registered", || async {
        sqlx::query_scalar::<_, Uuid>("SELECT id FROM executors WHERE pid = $1 AND state = 'alive'")
            .bind(pid)
            .fetch_optional(pool)
            .await
            .unwrap()
    })
    .await
}

fn noop(name: &str) -> NewJob {
    let mut job = NewJob::new(name, JobKind::Noop, json!({}));
    job.parallel = true;
    job
}

/// Executors of each ended run of `job_id`, with how many each ran.
pub(crate) async fn ran_on(pool: &PgPool, job_id: i64) -> HashMap<Uuid, i64> {
    sqlx::query_as::<_, (Uuid, i64)>(
        "SELECT executor_id, count(*) FROM runs WHERE job_id = $1 AND state = 'succeeded' GROUP BY executor_id",
    )
    .bind(job_id)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_selector_runs_only_where_its_labels_are(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = connect(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("selector"));
    let mut gpu_env = env.clone();
    gpu_env.insert("PROBACTR_EXECUTOR_LABELS".into(), "gpu=1,zone=a".into());
    let mut cpu_env = env.clone();
    cpu_env.insert("PROBACTR_EXECUTOR_LABELS".into(), "gpu=0,zone=a".into());
    let gpu = executor("executor-gpu", &gpu_env);
    let cpu = executor("executor-cpu", &cpu_env);
    let plain = executor("executor-plain", &env);
    let gpu_id = registered_id(&pool, gpu.pid()).await;
    registered_id(&pool, cpu.pid()).await;
    registered_id(&pool, plain.pid()).await;

    let mut train = noop("train");
    train.selector = json!({"gpu": "1"});
    let train = jobs::insert(&pool, &train).await.unwrap();
    let mut nowhere = noop("nowhere");
    nowhere.selector = json!({"gpu": "2"});
    let nowhere = jobs::insert(&pool, &nowhere).await.unwrap();
    let anywhere = jobs::insert(&pool, &noop("anywhere")).await.unwrap();
    // Fired by whichever executor fires first, and queued by hand.
    triggers::create(&pool, train.id, &NewTrigger::interval(1), chrono::Utc::now())
        .await
        .unwrap();
    let waiting = runs::queue_now(&pool, nowhere.id).await.unwrap();
    for _ in 0..30 {
        runs::queue_now(&pool, train.id).await.unwrap();
        runs::queue_now(&pool, anywhere.id).await.unwrap();
    }
    eventually(
        Duration::from_secs(60),
        "35 runs of the selector job ran",
        || async { (ran_on(&pool, train.id).await.values().sum::<i64>() >= 35).then_some(()) },
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "the runs without a selector ran",
        || async { (ran_on(&pool, anywhere.id).await.values().sum::<i64>() == 30).then_some(()) },
    )
    .await;

    let train_on = ran_on(&pool, train.id).await;
    assert_eq!(
        train_on.keys().collect::<Vec<_>>(),
        vec![&gpu_id],
        "every run of the selector job ran on the labelled executor: {train_on:?}"
    );
    let waiting = runs::get(&pool, waiting.id).await.unwrap().unwrap();
    assert_eq!(
        waiting.state,
        RunState::Queued,
        "no executor has gpu=2: the run waits"
    );
    assert!(!processes::any_may_claim(&pool, &nowhere.selector).await.unwrap());
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn cordon_stops_claims_at_once_and_drain_exits(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = connect(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("cordon"));
    let mut first = executor("executor-1", &env);
    let second = executor("executor-2", &env);
    let first_id = registered_id(&pool, first.pid()).await;
    let second_id = registered_id(&pool, second.pid()).await;
    let job = jobs::insert(&pool, &noop("work")).await.unwrap();

    processes::route(&pool, first_id, Routing::Cordon)
        .await
        .unwrap()
        .unwrap();
    for _ in 0..40 {
        runs::queue_now(&pool, job.id).await.unwrap();
    }
    eventually(Duration::from_secs(60), "the 40 runs ran", || async {
        (ran_on(&pool, job.id).await.values().sum::<i64>() == 40).then_some(())
    })
    .await;
    let on = ran_on(&pool, job.id).await;
    assert_eq!(
        on.get(&second_id),
        Some(&40),
        "the cordoned executor claimed nothing: {on:?}"
    );

    // Uncordoned, it claims again.
    processes::route(&pool, first_id, Routing::Uncordon)
        .await
        .unwrap()
        .unwrap();
    processes::route(&pool, second_id, Routing::Cordon)
        .await
        .unwrap()
        .unwrap();
    runs::queue_now(&pool, job.id).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the uncordoned executor ran the next run",
        || async { (ran_on(&pool, job.id).await.get(&first_id) == Some(&1)).then_some(()) },
    )
    .await;

    // A drain is a SIGTERM through the database: the executor exits cleanly.
    processes::route(&pool, first_id, Routing::Drain)
        .await
        .unwrap()
        .unwrap();
    let status = first.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "exit status {status}");
    let state: String = sqlx::query_scalar("SELECT state FROM executors WHERE id = $1")
        .bind(first_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "stopped");
}
