//! Namespaces with real executors: a namespace's `max_running` holds however many
//! executors claim at once, an executor dedicated to namespaces takes nothing else, and
//! a job's secrets are looked up in its own namespace only.

use std::collections::HashMap;
use std::time::Duration;

use probactr_common::model::{JobKind, RunState};
use probactr_common::secrets::{Keyring, Owner, SecretKey};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{runs, secrets, TEST_MIGRATOR};
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::{eventually, executor, fast_env, unique_prefix};
use uuid::Uuid;

use crate::routing::{ran_on, registered_id};

pub(crate) async fn connect(pool_options: PgPoolOptions, options: PgConnectOptions) -> (PgPool, String) {
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.expect("test database");
    (pool, url)
}

pub(crate) async fn make_namespace(pool: &PgPool, name: &str, max_running: Option<i32>) {
    sqlx::query("INSERT INTO namespaces (name, max_running) VALUES ($1, $2)")
        .bind(name)
        .bind(max_running)
        .execute(pool)
        .await
        .unwrap();
}

/// Inserts `job` into `namespace`.
pub(crate) async fn job_in(pool: &PgPool, namespace: &str, job: &NewJob) -> i64 {
    let job = jobs::insert(pool, job).await.unwrap();
    sqlx::query("UPDATE jobs SET namespace = $2 WHERE id = $1")
        .bind(job.id)
        .bind(namespace)
        .execute(pool)
        .await
        .unwrap();
    job.id
}

/// The states of `job_id`'s runs, counted.
pub(crate) async fn states(pool: &PgPool, job_id: i64) -> HashMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>("SELECT state, count(*) FROM runs WHERE job_id = $1 GROUP BY state")
        .bind(job_id)
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Three executors race for 30 runs of a namespace allowed 3 at once; each run writes a
/// start and an end line to a shared file (appends are atomic), so the file's order is
/// the order the jobs themselves saw: never more than 3 between starts and ends, every
/// run succeeded, none lost.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn max_running_holds_with_three_executors_racing(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    make_namespace(&pool, "capped", Some(3)).await;
    let marks = std::env::temp_dir().join(format!("probactr-quota-{}", Uuid::new_v4()));
    let script = format!(
        "echo start >> {path}; sleep 0.3; echo end >> {path}",
        path = marks.display()
    );
    let mut job = NewJob::new(
        "sleeper",
        JobKind::Shell,
        json!({"program": script, "shell": true}),
    );
    // Needs no lock: the claim starts it, the path most claimers take at once.
    job.parallel = true;
    let job = job_in(&pool, "capped", &job).await;
    for _ in 0..30 {
        runs::queue_now(&pool, job).await.unwrap();
    }
    let env = fast_env(&url, &unique_prefix("quota"));
    let _executors: Vec<_> = (1..=3)
        .map(|n| executor(&format!("executor-{n}"), &env))
        .collect();

    let done = eventually(Duration::from_secs(90), "the 30 runs ended", || async {
        let states = states(&pool, job).await;
        let ended: i64 = states
            .iter()
            .filter(|(state, _)| !["queued", "claimed", "running"].contains(&state.as_str()))
            .map(|(_, count)| count)
            .sum();
        (ended == 30).then_some(states)
    })
    .await;
    assert_eq!(done, HashMap::from([("succeeded".to_owned(), 30)]));
    let lines = std::fs::read_to_string(&marks).unwrap();
    let _ = std::fs::remove_file(&marks);
    let (mut now, mut peak, mut starts) = (0i32, 0i32, 0);
    for line in lines.lines() {
        match line {
            "start" => {
                now += 1;
                starts += 1;
            }
            "end" => now -= 1,
            other => panic!("unexpected line {other:?}"),
        }
        peak = peak.max(now);
    }
    assert_eq!(starts, 30, "each run started once");
    assert!(peak <= 3, "{peak} runs of the namespace at once (max_running 3)");
    assert_eq!(peak, 3, "the quota was used, not undercut");
    let running: i32 = sqlx::query_scalar("SELECT running FROM namespaces WHERE name = 'capped'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(running, 0, "every place given back");
}

/// An executor dedicated to namespace `a` runs `a`'s runs and none of `b`'s, even those
/// it fires itself; `b`'s wait queued until an executor that takes `b` comes.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_dedicated_executor_takes_only_its_namespace(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    make_namespace(&pool, "a", None).await;
    make_namespace(&pool, "b", None).await;
    let mut noop = NewJob::new("work", JobKind::Noop, json!({}));
    noop.parallel = true;
    let of_a = job_in(&pool, "a", &noop).await;
    let of_b = job_in(&pool, "b", &noop).await;
    // Fired by the only executor there is, which may start as it fires only a's.
    for job in [of_a, of_b] {
        triggers::create(&pool, job, &NewTrigger::interval(1), chrono::Utc::now())
            .await
            .unwrap();
    }
    for _ in 0..10 {
        runs::queue_now(&pool, of_a).await.unwrap();
        runs::queue_now(&pool, of_b).await.unwrap();
    }
    let env = fast_env(&url, &unique_prefix("dedicated"));
    let mut a_env = env.clone();
    a_env.insert("PROBACTR_EXECUTOR_NAMESPACES".into(), "a".into());
    let for_a = executor("executor-a", &a_env);
    let a_id = registered_id(&pool, for_a.pid()).await;
    eventually(Duration::from_secs(30), "a's runs ran", || async {
        (ran_on(&pool, of_a).await.values().sum::<i64>() >= 12).then_some(())
    })
    .await;
    let b_states = states(&pool, of_b).await;
    assert_eq!(
        b_states.keys().collect::<Vec<_>>(),
        vec!["queued"],
        "b's runs wait: {b_states:?}"
    );
    assert!(b_states["queued"] >= 11, "queued by hand and fired: {b_states:?}");

    let mut b_env = env.clone();
    b_env.insert("PROBACTR_EXECUTOR_NAMESPACES".into(), "b".into());
    let for_b = executor("executor-b", &b_env);
    let b_id = registered_id(&pool, for_b.pid()).await;
    eventually(Duration::from_secs(30), "b's runs ran", || async {
        (ran_on(&pool, of_b).await.values().sum::<i64>() >= 11).then_some(())
    })
    .await;
    assert_eq!(ran_on(&pool, of_a).await.keys().collect::<Vec<_>>(), vec![&a_id]);
    assert_eq!(ran_on(&pool, of_b).await.keys().collect::<Vec<_>>(), vec![&b_id]);
}

/// A job resolves `{{ secrets.NAME }}` in its own namespace: a name existing only in
/// another namespace is missing, and a value copied from another namespace's row of the
/// same name does not open.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn secrets_are_looked_up_in_the_jobs_namespace_only(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    make_namespace(&pool, "a", None).await;
    make_namespace(&pool, "b", None).await;
    let keys = Keyring::new(SecretKey::parse(support::TEST_SECRET_KEY).unwrap(), None);
    for name in ["token", "shared"] {
        let sealed = keys.seal(&Owner::secret("a", name), "value-of-a-91f3");
        secrets::put(&pool, "a", name, &sealed, "test").await.unwrap();
    }
    // b's `shared` holds a's blob: someone with database access but no key copied it.
    sqlx::query(
        "INSERT INTO secrets (namespace, name, key_id, nonce, ciphertext, bound, updated_by)
         SELECT 'b', name, key_id, nonce, ciphertext, bound, 'test' FROM secrets
         WHERE namespace = 'a' AND name = 'shared'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let echo = |name: &str| {
        NewJob::new(
            "echo",
            JobKind::Shell,
            json!({"program": "echo", "args": [format!("{{{{ secrets.{name} }}}}")]}),
        )
    };
    let in_a = job_in(&pool, "a", &echo("token")).await;
    let in_b = job_in(&pool, "b", &echo("token")).await;
    let copied = job_in(&pool, "b", &{
        let mut job = echo("shared");
        job.name = "copied".into();
        job
    })
    .await;
    let runs_of = [in_a, in_b, copied].map(|job| {
        let pool = pool.clone();
        async move { runs::queue_now(&pool, job).await.unwrap().id }
    });
    let mut ids = Vec::new();
    for run in runs_of {
        ids.push(run.await);
    }
    let _executor = executor("executor", &fast_env(&url, &unique_prefix("ns-secrets")));
    let mut ended = Vec::new();
    for id in ids {
        ended.push(
            eventually(Duration::from_secs(20), "the run ended", || async {
                let run = runs::get(&pool, id).await.unwrap().unwrap();
                run.state.is_terminal().then_some(run)
            })
            .await,
        );
    }
    assert_eq!(ended[0].state, RunState::Succeeded, "{:?}", ended[0]);
    assert_eq!(ended[0].output.as_deref(), Some("***\n"));
    let why =
        |run: &probactr_common::model::Run| run.reason.clone().or(run.error.clone()).unwrap_or_default();
    assert_eq!(ended[1].state, RunState::Failed);
    assert!(
        why(&ended[1]).contains("secret token, which does not exist"),
        "{:?}",
        ended[1]
    );
    assert_eq!(ended[2].state, RunState::Failed);
    assert!(
        why(&ended[2]).contains("secret shared of namespace b does not open"),
        "{:?}",
        ended[2]
    );
}
