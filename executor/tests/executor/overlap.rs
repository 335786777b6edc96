//! The overlap policies that act on a busy job, with a real executor and shell jobs,
//! measured from what the jobs themselves wrote: `replace` stops the running attempt
//! (which ignores SIGTERM, so it is killed after its grace) before the new one starts;
//! `buffer_one` keeps one run waiting behind the running one and skips the rest.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use probactr_common::model::{JobKind, Overlap};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::{runs, TEST_MIGRATOR};
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::{eventually, executor, fast_env, unique_prefix};
use uuid::Uuid;

use crate::flow::{all_ended, Marks};
use crate::namespaces::{connect, states};

/// A file each run appends `RUN_ID NANOS` to every 50 ms while it lives.
struct Ticks {
    path: PathBuf,
}

impl Ticks {
    fn new() -> Ticks {
        Ticks {
            path: std::env::temp_dir().join(format!("probactr-overlap-{}", Uuid::new_v4())),
        }
    }

    /// A script that ignores SIGTERM (its `sleep`s inherit that) and ticks for `secs`.
    fn script(&self, secs: u32) -> String {
        format!(
            "trap '' TERM; i=0; while [ $i -lt {n} ]; do echo \"$PROBACTR_RUN_ID $(date +%s%N)\" >> {path}; sleep 0.05; i=$((i+1)); done",
            n = secs * 20,
            path = self.path.display()
        )
    }

    /// Each run's first and last tick, in nanoseconds since the epoch.
    fn spans(&self) -> HashMap<i64, (i128, i128)> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let mut spans: HashMap<i64, (i128, i128)> = HashMap::new();
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(Ok(run)), Some(Ok(at))) = (
                parts.next().map(str::parse::<i64>),
                parts.next().map(str::parse::<i128>),
            ) else {
                continue;
            };
            let span = spans.entry(run).or_insert((at, at));
            span.0 = span.0.min(at);
            span.1 = span.1.max(at);
        }
        spans
    }
}

impl Drop for Ticks {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn queue_one(pool: &PgPool, job: i64) -> i64 {
    runs::queue_now(pool, job).await.unwrap().id
}

/// `replace`: a new run stops the running attempt, which ignores SIGTERM, so it is
/// killed after its 1 s grace; the new run starts only then (its first tick comes after
/// the old one's last), and the old one is recorded cancelled.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn replace_stops_the_running_attempt_after_its_grace_then_starts(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let ticks = Ticks::new();
    let mut job = NewJob::new(
        "stubborn",
        JobKind::Shell,
        json!({"program": ticks.script(6), "shell": true}),
    );
    job.overlap = Overlap::Replace;
    job.stop_grace_secs = 1;
    let job = jobs::insert(&pool, &job).await.unwrap().id;
    let env = fast_env(&url, &unique_prefix("replace"));
    let _executor = executor("executor-1", &env);

    let old = queue_one(&pool, job).await;
    eventually(Duration::from_secs(20), "the first run ticks", || async {
        ticks.spans().contains_key(&old).then_some(())
    })
    .await;
    let replaced_at = chrono::Utc::now().timestamp_nanos_opt().unwrap() as i128;
    let new = queue_one(&pool, job).await;
    eventually(Duration::from_secs(20), "the new run ticks", || async {
        ticks.spans().contains_key(&new).then_some(())
    })
    .await;

    let spans = ticks.spans();
    let (old_span, new_span) = (spans[&old], spans[&new]);
    assert!(
        old_span.1 < new_span.0,
        "the runs overlapped: old ticked until {}, new from {}",
        old_span.1,
        new_span.0
    );
    let kept_on = (old_span.1 - replaced_at) as f64 / 1e9;
    assert!(
        kept_on >= 0.8,
        "the old run ignores SIGTERM: it lives through its 1 s grace, lived {kept_on:.2} s"
    );
    assert!(
        kept_on < 4.0,
        "the old run was killed after its grace, lived {kept_on:.2} s"
    );
    let ended = eventually(Duration::from_secs(10), "the old run is recorded", || async {
        let run = runs::get(&pool, old).await.unwrap().unwrap();
        (run.state != probactr_common::model::RunState::Running).then_some(run)
    })
    .await;
    assert_eq!(ended.state, probactr_common::model::RunState::Cancelled);
    assert_eq!(states(&pool, job).await.get("skipped"), None, "nothing skipped");
}

/// `buffer_one` under a burst: while one run runs, five more arrive at once; one waits
/// and runs after it, the four others are skipped naming the one that waits, and never
/// two run at once.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn buffer_one_keeps_one_waiting_and_skips_the_rest_of_a_burst(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let marks = Marks::new();
    let mut job = NewJob::new(
        "buffered",
        JobKind::Shell,
        json!({"program": marks.script(3.0), "shell": true}),
    );
    job.overlap = Overlap::BufferOne;
    let job = jobs::insert(&pool, &job).await.unwrap().id;
    let env = fast_env(&url, &unique_prefix("buffer-one"));
    let _executors: Vec<_> = (1..=2)
        .map(|n| executor(&format!("executor-{n}"), &env))
        .collect();

    queue_one(&pool, job).await;
    eventually(Duration::from_secs(20), "the first run starts", || async {
        marks.read().contains("start").then_some(())
    })
    .await;
    runs::queue_many_now(&pool, job, 5).await.unwrap();

    let done = all_ended(&pool, job, 6).await;
    assert_eq!(
        done,
        HashMap::from([("succeeded".to_owned(), 2), ("skipped".to_owned(), 4)])
    );
    let (starts, peak) = marks.starts_and_peak();
    assert_eq!((starts, peak), (2, 1), "two runs, one at a time");
    let reasons: Vec<String> =
        sqlx::query_scalar("SELECT reason FROM runs WHERE job_id = $1 AND state = 'skipped'")
            .bind(job)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(
        reasons.iter().all(|r| r.contains("buffer_one")),
        "each skip says why: {reasons:?}"
    );
}
