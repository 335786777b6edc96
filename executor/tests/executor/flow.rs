//! Flow control across jobs with real executors: a trigger's cap holds however many
//! executors claim at once, measured from what the jobs themselves saw.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use probactr_common::model::JobKind;
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::TEST_MIGRATOR;
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::{eventually, executor, fast_env, unique_prefix};
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

    /// How many runs started, and the most that were between their start and end at once.
    pub(crate) fn starts_and_peak(&self) -> (i32, i32) {
        let lines = std::fs::read_to_string(&self.path).unwrap_or_default();
        let (mut now, mut peak, mut starts) = (0i32, 0i32, 0i32);
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
        (starts, peak)
    }
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
    assert!(peak <= 2, "{peak} runs of the trigger at once (max_concurrency 2)");
    assert_eq!(peak, 2, "the cap was used, not undercut");
    let running: i32 = sqlx::query_scalar("SELECT running FROM triggers WHERE id = $1")
        .bind(trigger.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(running, 0, "every place given back");
}
