//! What holds instants back, with a real executor: a calendar and a skip window record
//! their instants skipped (the ledger says so, nothing runs), jitter delays each run by
//! its fixed amount, `max_fires` ends a trigger, and a `defer` window fires each trigger
//! once at its end.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use probactr_common::calendar::{CalendarMode, Days};
use probactr_common::ledger::{self, Outcome};
use probactr_common::maintenance::{Policy, Scope, WindowPlan};
use probactr_common::model::JobKind;
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{calendars, db_now, maintenance, TEST_MIGRATOR};
use probactr_testkit::{eventually, executor, fast_env, unique_prefix};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::namespaces::connect;

/// A job whose runs need no lock (nothing moves a run's `available_at` but its jitter).
async fn job(pool: &PgPool, name: &str) -> i64 {
    let mut job = NewJob::new(name, JobKind::Noop, json!({}));
    job.parallel = true;
    jobs::insert(pool, &job).await.unwrap().id
}

async fn every_second(pool: &PgPool, job: i64) -> i64 {
    let mut trigger = NewTrigger::interval(1);
    trigger.timing.misfire = probactr_common::model::Misfire::Skip;
    triggers::create(pool, job, &trigger, db_now(pool).await.unwrap())
        .await
        .unwrap()
        .id
}

/// (reason, instants) of a trigger's recorded misfires.
async fn skipped(pool: &PgPool, trigger: i64) -> Vec<(String, i64)> {
    sqlx::query_as("SELECT reason, instants FROM misfires WHERE trigger_id = $1 ORDER BY first_instant")
        .bind(trigger)
        .fetch_all(pool)
        .await
        .unwrap()
}

async fn run_count(pool: &PgPool, trigger: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM runs WHERE trigger_id = $1")
        .bind(trigger)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn calendars_windows_jitter_and_max_fires_hold_back_instants_as_said(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let everyday = Days {
        weekdays: ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
            .map(String::from)
            .to_vec(),
        ..Days::default()
    };
    let calendar = calendars::create(&pool, "default", "everyday", "UTC", &everyday)
        .await
        .unwrap()
        .unwrap();
    let excluded = every_second(&pool, job(&pool, "excluded").await).await;
    triggers::set_extras(
        &pool,
        excluded,
        Some((calendar.id, CalendarMode::Exclude)),
        None,
        None,
    )
    .await
    .unwrap();
    let kept = every_second(&pool, job(&pool, "kept").await).await;
    triggers::set_extras(&pool, kept, Some((calendar.id, CalendarMode::Only)), None, None)
        .await
        .unwrap();
    let maintained = every_second(&pool, job(&pool, "maintained").await).await;
    let now = db_now(&pool).await.unwrap();
    let window = WindowPlan {
        from: now - TimeDelta::seconds(5),
        until: Some(now + TimeDelta::hours(1)),
        scope: Scope::Jobs {
            jobs: vec!["maintained".into()],
        },
        policy: Policy::Skip,
        reason: "db upgrade".into(),
        stop_running: false,
    };
    maintenance::create(&pool, &window, "admin").await.unwrap();
    let jittered = every_second(&pool, job(&pool, "jittered").await).await;
    triggers::set_extras(&pool, jittered, None, Some(2), None)
        .await
        .unwrap();
    let limited = every_second(&pool, job(&pool, "limited").await).await;
    triggers::set_extras(&pool, limited, None, None, Some(3))
        .await
        .unwrap();

    let _executor = executor("executor", &fast_env(&url, &unique_prefix("holds")));
    eventually(Duration::from_secs(30), "instants fired and skipped", || async {
        let excluded_seen: i64 = skipped(&pool, excluded).await.iter().map(|(_, n)| n).sum();
        let maintained_seen: i64 = skipped(&pool, maintained).await.iter().map(|(_, n)| n).sum();
        (excluded_seen >= 3
            && maintained_seen >= 3
            && run_count(&pool, kept).await >= 3
            && run_count(&pool, jittered).await >= 3
            && run_count(&pool, limited).await >= 3)
            .then_some(())
    })
    .await;

    // Skipped with the reason naming the calendar or window; nothing ran.
    for (reason, _) in skipped(&pool, excluded).await {
        assert_eq!(reason, "calendar everyday excludes it");
    }
    for (reason, _) in skipped(&pool, maintained).await {
        assert_eq!(reason, "maintenance: db upgrade");
    }
    assert_eq!(run_count(&pool, excluded).await, 0);
    assert_eq!(run_count(&pool, maintained).await, 0);
    assert!(
        skipped(&pool, kept).await.is_empty(),
        "only: every day is one of its days"
    );
    // The ledger shows them skipped, not missed.
    let trigger = triggers::get(&pool, excluded).await.unwrap().unwrap();
    let to = trigger.next_fire_at.unwrap();
    let page = ledger::read(&pool, &trigger, false, trigger.created_at, to, 100)
        .await
        .unwrap();
    assert!(page.entries.len() >= 3);
    assert!(
        page.entries.iter().all(|e| e.outcome == Outcome::Skipped),
        "{:?}",
        page.entries
    );

    // Each jittered run waits its instant's fixed delay, within the bound (from when it
    // was queued, for an instant fired late).
    let delays: Vec<(DateTime<Utc>, DateTime<Utc>, DateTime<Utc>)> =
        sqlx::query_as("SELECT scheduled_at, queued_at, available_at FROM runs WHERE trigger_id = $1")
            .bind(jittered)
            .fetch_all(&pool)
            .await
            .unwrap();
    for (scheduled_at, queued_at, available_at) in delays {
        let expected = probactr_common::schedule::jitter(jittered, scheduled_at, 2);
        assert!(expected <= TimeDelta::seconds(2));
        assert_eq!(
            available_at,
            queued_at.max(scheduled_at + expected),
            "{scheduled_at}"
        );
    }

    // max_fires 3: three runs, then the trigger has ended.
    let limited_trigger = triggers::get(&pool, limited).await.unwrap().unwrap();
    assert_eq!(limited_trigger.next_fire_at, None);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(run_count(&pool, limited).await, 3);
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_defer_window_fires_each_trigger_once_after_it(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let first = every_second(&pool, job(&pool, "first").await).await;
    let second = every_second(&pool, job(&pool, "second").await).await;
    let now = db_now(&pool).await.unwrap();
    let until = now + TimeDelta::seconds(4);
    let window = WindowPlan {
        from: now - TimeDelta::seconds(5),
        until: Some(until),
        scope: Scope::All { all: true },
        policy: Policy::Defer,
        reason: "upgrade".into(),
        stop_running: false,
    };
    maintenance::create(&pool, &window, "admin").await.unwrap();
    let _executor = executor("executor", &fast_env(&url, &unique_prefix("defer")));
    for trigger in [first, second] {
        eventually(
            Duration::from_secs(30),
            "the trigger fires after the window",
            || async {
                let after: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM runs WHERE trigger_id = $1 AND scheduled_at > $2",
                )
                .bind(trigger)
                .bind(until)
                .fetch_one(&pool)
                .await
                .unwrap();
                (after >= 1).then_some(())
            },
        )
        .await;
        let instants: Vec<DateTime<Utc>> =
            sqlx::query_scalar("SELECT scheduled_at FROM runs WHERE trigger_id = $1 AND scheduled_at <= $2")
                .bind(trigger)
                .bind(until)
                .fetch_all(&pool)
                .await
                .unwrap();
        assert_eq!(instants, [until], "once, at the window's end; nothing inside it");
        let deferred = skipped(&pool, trigger).await;
        assert!(
            !deferred.is_empty()
                && deferred
                    .iter()
                    .all(|(reason, _)| reason == "maintenance (deferred to its end): upgrade"),
            "{deferred:?}"
        );
    }
}
