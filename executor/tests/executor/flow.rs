//! Flow control across jobs with real executors: a trigger's cap, a pool's slots and a
//! rate hold however many executors claim at once, measured from what the jobs
//! themselves saw (or their start times); a slot held by a run of a dead executor is
//! freed by the reap, not before.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use probactr_common::model::{JobKind, OnExecutorLost, Rate};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::pools;
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{runs, TEST_MIGRATOR};
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::{eventually, executor, fast_env, monitor, unique_prefix, SIGKILL};
use uuid::Uuid;

use crate::namespaces::{connect, states};

/// A file the runs of a test append a `start` and an `end` line to (appends are atomic):
/// its order is the order the jobs themselves saw.
pub(crate) struct Marks {
    path: PathBuf,
}

impl Marks {
    pub(crate) fn new() -> Marks {
        Marks {
            path: std::env::temp_dir().join(format!("probactr-flow-{}", Uuid::new_v4())),
        }
    }

    /// A shell script marking its start, sleeping `secs`, marking its end.
    pub(crate) fn script(&self, secs: f64) -> String {
        format!(
            "echo start >> {path}; sleep {secs}; echo end >> {path}",
            path = self.path.display()
        )
    }

    /// What the runs wrote so far.
    pub(crate) fn read(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }

    /// How many runs started, and the most that were between their start and end at once.
    pub(crate) fn starts_and_peak(&self) -> (i32, i32) {
        starts_and_peak(&self.read())
    }
}

/// In marks `text`, how many runs started, and the most between their start and end at
/// once (a last line still being written is left out).
fn starts_and_peak(text: &str) -> (i32, i32) {
    let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
    let (mut now, mut peak, mut starts) = (0i32, 0i32, 0i32);
    for line in complete.lines() {
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
    (starts, peak)
}

impl Drop for Marks {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Waits until `job`'s `count` runs have all ended, and returns their states counted.
pub(crate) async fn all_ended(pool: &PgPool, job: i64, count: i64) -> HashMap<String, i64> {
    eventually(Duration::from_secs(90), "the runs ended", || async {
        let states = states(pool, job).await;
        let ended: i64 = states
            .iter()
            .filter(|(state, _)| !["queued", "claimed", "running"].contains(&state.as_str()))
            .map(|(_, count)| count)
            .sum();
        (ended == count).then_some(states)
    })
    .await
}

/// Three executors race for 20 instants of a trigger allowed 2 runs at once, of a job
/// that needs no lock (the claim starts its runs, the path most claimers take at once):
/// never more than 2 running, every run succeeded, every place given back.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_trigger_cap_holds_with_three_executors_racing(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let marks = Marks::new();
    let mut job = NewJob::new(
        "sleeper",
        JobKind::Shell,
        json!({"program": marks.script(0.3), "shell": true}),
    );
    job.parallel = true;
    let job = jobs::insert(&pool, &job).await.unwrap().id;
    // Paused: its instants are the ones queued below, nothing fires.
    let capped = NewTrigger {
        max_concurrency: Some(2),
        paused: true,
        ..NewTrigger::interval(3600)
    };
    let trigger = triggers::create(&pool, job, &capped, chrono::Utc::now())
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at)
         SELECT $1, $2, now() - make_interval(secs => g) FROM generate_series(1, 20) AS g",
    )
    .bind(job)
    .bind(trigger.id)
    .execute(&pool)
    .await
    .unwrap();
    let env = fast_env(&url, &unique_prefix("trigger-cap"));
    let _executors: Vec<_> = (1..=3)
        .map(|n| executor(&format!("executor-{n}"), &env))
        .collect();

    let done = all_ended(&pool, job, 20).await;
    assert_eq!(done, HashMap::from([("succeeded".to_owned(), 20)]));
    let (starts, peak) = marks.starts_and_peak();
    assert_eq!(starts, 20, "each run started once");
    assert!(
        peak <= 2,
        "{peak} runs of the trigger at once (max_concurrency 2)"
    );
    assert_eq!(peak, 2, "the cap was used, not undercut");
    let running: i32 = sqlx::query_scalar("SELECT running FROM triggers WHERE id = $1")
        .bind(trigger.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(running, 0, "every place given back");
}

/// Three jobs share a pool of 3 slots; a fourth takes one of its slots on an executor that
/// is then killed (`kill -9`). Until the monitor reaps that run, its slot stays held: the
/// three jobs' runs, over three executors, never weigh more than the 2 slots left. After
/// the reap the pool is theirs: 30 runs, never more than 3 at once, and 3 reached.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_pool_holds_across_executors_and_a_dead_holders_slot_waits_for_the_reap(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    pools::create(&pool, "default", "licence-server", 3, None)
        .await
        .unwrap();
    let marks = Marks::new();
    let in_pool = |name: &str, script: String| {
        let mut job = NewJob::new(name, JobKind::Shell, json!({"program": script, "shell": true}));
        job.parallel = true;
        job.pool = Some("licence-server".to_owned());
        job
    };
    let mut holder = in_pool("holder", "sleep 30".to_owned());
    holder.on_executor_lost = OnExecutorLost::Fail;
    let holder = jobs::insert(&pool, &holder).await.unwrap().id;
    let mut sharing = Vec::new();
    for name in ["export-a", "export-b", "export-c"] {
        sharing.push(
            jobs::insert(&pool, &in_pool(name, marks.script(0.3)))
                .await
                .unwrap()
                .id,
        );
    }
    let env = fast_env(&url, &unique_prefix("pool"));

    // The holder takes a slot on an executor that dies with it.
    let held = runs::queue_now(&pool, holder).await.unwrap();
    let victim = executor("victim", &env);
    eventually(Duration::from_secs(30), "the holder runs", || async {
        let state: String = sqlx::query_scalar("SELECT state FROM runs WHERE id = $1")
            .bind(held.id)
            .fetch_one(&pool)
            .await
            .unwrap();
        (state == "running").then_some(())
    })
    .await;
    victim.signal(SIGKILL);

    for &job in &sharing {
        runs::queue_many_now(&pool, job, 10).await.unwrap();
    }
    let _executors: Vec<_> = (1..=3)
        .map(|n| executor(&format!("executor-{n}"), &env))
        .collect();
    // Eight of the 30 started, with nobody to reap the dead executor's run yet.
    eventually(
        Duration::from_secs(60),
        "eight runs started before the reap",
        || async {
            let (starts, _) = starts_and_peak(&marks.read());
            (starts >= 8).then_some(())
        },
    )
    .await;
    let before_reap = marks.read();
    let pool_now = pools::get(&pool, "default", "licence-server")
        .await
        .unwrap()
        .unwrap();
    let holders = pools::holders(&pool, "default", "licence-server").await.unwrap();
    assert!(
        holders.iter().any(|h| h.run_id == held.id),
        "the dead executor's run still holds its slot: {holders:?} ({pool_now:?})"
    );
    let (_, peak_before) = starts_and_peak(&before_reap);
    assert!(
        peak_before <= 2,
        "{peak_before} runs at once while a dead executor's run held a slot"
    );

    let _monitor = monitor("monitor", &env);
    for &job in &sharing {
        let done = all_ended(&pool, job, 10).await;
        assert_eq!(done, HashMap::from([("succeeded".to_owned(), 10)]));
    }
    let (starts, peak) = marks.starts_and_peak();
    assert_eq!(starts, 30, "each run started once");
    assert!(peak <= 3, "{peak} runs of the pool at once (3 slots)");
    assert_eq!(
        peak, 3,
        "the pool was used, not undercut, once the dead holder was reaped"
    );
    let after = pools::get(&pool, "default", "licence-server")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.used, 0, "every slot given back: {after:?}");
}

/// A job's rate of 5 starts per 2 s, two executors claiming at once: from the runs' own
/// start times, no 2 s holds more than 5 of the 20, and they start in four windows
/// (about 6 s), not much later: the claim is woken when a window opens.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_rate_holds_across_executors(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = connect(pool_options, options).await;
    let mut job = NewJob::new("partner-api", JobKind::Noop, json!({}));
    job.parallel = true;
    job.rate = Some(Rate {
        limit: 5,
        per_secs: 2,
    });
    let job = jobs::insert(&pool, &job).await.unwrap().id;
    let env = fast_env(&url, &unique_prefix("rate"));
    let _executors: Vec<_> = (1..=2)
        .map(|n| executor(&format!("executor-{n}"), &env))
        .collect();
    runs::queue_many_now(&pool, job, 20).await.unwrap();
    let done = all_ended(&pool, job, 20).await;
    assert_eq!(done, HashMap::from([("succeeded".to_owned(), 20)]));

    let starts: Vec<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT started_at FROM runs WHERE job_id = $1 ORDER BY started_at")
            .bind(job)
            .fetch_all(&pool)
            .await
            .unwrap();
    for six in starts.windows(6) {
        assert!(
            six[5] - six[0] >= chrono::TimeDelta::seconds(2),
            "6 starts within 2 s: {six:?}"
        );
    }
    let span = starts[19] - starts[0];
    assert!(
        span < chrono::TimeDelta::seconds(8),
        "20 starts at 5 per 2 s took {span} (the windows were not used)"
    );
}
