//! The fire ledger, backfill and forecast, with a real executor and monitor: an outage
//! shows exactly its missed instants, a backfill runs exactly those, a second backfill
//! adds nothing, and the job's own effects show every instant of the span once.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use probactr_testkit::{eventually, fast_env, unique_prefix, SIGTERM};

use super::*;

fn entries(ledger: &Value) -> Vec<Value> {
    ledger["entries"].as_array().unwrap().clone()
}

fn instants_with(ledger: &Value, outcome: &str) -> Vec<String> {
    entries(ledger)
        .into_iter()
        .filter(|e| e["outcome"] == outcome)
        .map(|e| e["instant"].as_str().unwrap().to_owned())
        .collect()
}

fn effects(path: &std::path::Path) -> BTreeMap<DateTime<Utc>, usize> {
    let mut seen = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let instant: DateTime<Utc> = DateTime::parse_from_rfc3339(line.trim())
            .unwrap()
            .with_timezone(&Utc);
        *seen.entry(instant).or_default() += 1;
    }
    seen
}

fn parse(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn an_outage_shows_in_the_ledger_and_a_backfill_fills_exactly_its_gaps(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("effects");
    let job = app
        .job(
            &admin,
            json!({"name": "every-second", "kind": "shell",
                   "spec": {"program": format!("echo \"$PROBACTR_SCHEDULED_AT\" >> {}", log.display()), "shell": true}}),
        )
        .await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 1, "misfire": "skip", "misfire_threshold_secs": 1}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let id = trigger.body["id"].as_i64().unwrap();
    let started = trigger.body["created_at"].as_str().unwrap().to_owned();
    let env = fast_env(&database_url_of(app.pool()), &unique_prefix("ledger"));
    let _monitor = probactr_testkit::monitor("monitor", &env);
    let mut first = probactr_testkit::executor("executor-1", &env);
    eventually(Duration::from_secs(15), "three instants ran", || async {
        (effects(&log).len() >= 3).then_some(())
    })
    .await;
    first.signal(SIGTERM);
    first.wait_exit(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _second = probactr_testkit::executor("executor-2", &env);
    eventually(
        Duration::from_secs(15),
        "instants run again after the outage",
        || async {
            let ledger = app
                .get(&format!("/api/v1/triggers/{id}/ledger?from={started}"), &admin)
                .await;
            let missed = instants_with(&ledger.body, "missed");
            let last_missed = missed.last().map(|m| parse(m))?;
            let ran_after = instants_with(&ledger.body, "ran")
                .iter()
                .filter(|r| parse(r) > last_missed)
                .count();
            (ran_after >= 2).then_some(())
        },
    )
    .await;

    let ledger = app
        .get(&format!("/api/v1/triggers/{id}/ledger?from={started}"), &admin)
        .await;
    assert_eq!(ledger.status, StatusCode::OK, "{}", ledger.text);
    let missed = instants_with(&ledger.body, "missed");
    assert!(
        missed.len() >= 3,
        "the outage's instants are missed: {}",
        ledger.text
    );
    for entry in entries(&ledger.body) {
        let outcome = entry["outcome"].as_str().unwrap();
        assert!(["ran", "missed", "pending"].contains(&outcome), "{entry}");
        assert_eq!(outcome == "ran", entry["run_id"].is_number(), "{entry}");
    }
    let (from, to) = (missed[0].clone(), missed[missed.len() - 1].clone());
    let ran_before: BTreeMap<DateTime<Utc>, usize> = effects(&log);
    for instant in &missed {
        assert!(
            !ran_before.contains_key(&parse(instant)),
            "a missed instant ran: {instant}"
        );
    }

    let dry = app
        .post(
            &format!("/api/v1/triggers/{id}/backfill"),
            &admin,
            json!({"from": from, "to": to, "dry_run": true}),
        )
        .await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.text);
    assert_eq!(
        dry.body["instants"].as_array().unwrap().len(),
        missed.len(),
        "{}",
        dry.text
    );
    let done = app
        .post(
            &format!("/api/v1/triggers/{id}/backfill"),
            &admin,
            json!({"from": from, "to": to, "max_concurrency": 2}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body["backfill"]["max_concurrency"], 2);
    let again = app
        .post(
            &format!("/api/v1/triggers/{id}/backfill"),
            &admin,
            json!({"from": from, "to": to}),
        )
        .await;
    assert_eq!(
        again.body["instants"],
        json!([]),
        "the second backfill adds nothing: {}",
        again.text
    );
    assert_eq!(again.body["backfill"], Value::Null);
    eventually(
        Duration::from_secs(30),
        "every missed instant backfilled",
        || async {
            let seen = effects(&log);
            missed.iter().all(|m| seen.contains_key(&parse(m))).then_some(())
        },
    )
    .await;
    let ledger = app
        .get(&format!("/api/v1/triggers/{id}/ledger?from={started}"), &admin)
        .await;
    let backfilled = instants_with(&ledger.body, "backfilled");
    assert_eq!(backfilled, missed, "{}", ledger.text);
    // Every instant of the whole span ran exactly once, by the job's own account.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = effects(&log);
    assert!(
        seen.values().all(|count| *count == 1),
        "an instant ran twice: {seen:?}"
    );
    let span = app
        .get(&format!("/api/v1/triggers/{id}/ledger?from={started}"), &admin)
        .await;
    for entry in entries(&span.body) {
        if entry["outcome"] == "pending" {
            continue;
        }
        let instant = parse(entry["instant"].as_str().unwrap());
        if entry["state"] == "succeeded" {
            assert_eq!(seen.get(&instant), Some(&1), "{entry}");
        }
    }
    let missed_now = instants_with(&span.body, "missed");
    assert!(missed_now.is_empty(), "no gap is left: {missed_now:?}");
    let status = app.get("/api/v1/status", &admin).await;
    assert!(
        status.body["missed_last_day"].as_i64().unwrap() >= missed.len() as i64,
        "{}",
        status.text
    );
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn bad_ledger_and_backfill_requests_name_the_field_and_the_forecast_flags_dst(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let viewer = app.user("vera", Role::Viewer).await;
    let job = app.job(&admin, noop("nightly")).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "cron", "cron": "0 30 2 * * *", "timezone": "Europe/Berlin"}),
        )
        .await;
    let id = trigger.body["id"].as_i64().unwrap();
    let bad = app
        .get(
            &format!("/api/v1/triggers/{id}/ledger?from=yesterday&limit=0"),
            &admin,
        )
        .await;
    assert_field(&bad, "from");
    assert_field(&bad, "limit");
    let bad = app
        .post(
            &format!("/api/v1/triggers/{id}/backfill"),
            &admin,
            json!({"from": "soon", "max_concurrency": 0}),
        )
        .await;
    assert_field(&bad, "from");
    assert_field(&bad, "to");
    assert_field(&bad, "max_concurrency");
    let future = app
        .post(
            &format!("/api/v1/triggers/{id}/backfill"),
            &admin,
            json!({"from": "2999-01-01T00:00:00Z", "to": "2999-01-02T00:00:00Z"}),
        )
        .await;
    assert_field(&future, "from");
    let refused = app
        .post(
            &format!("/api/v1/triggers/{id}/backfill"),
            &viewer,
            json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(app.count("runs").await, 0, "bad requests change nothing");

    let forecast = app
        .get(
            &format!(
                "/api/v1/forecast?from=2027-03-27T00:00:00Z&to=2027-03-30T00:00:00Z&job_id={}",
                job["id"]
            ),
            &viewer,
        )
        .await;
    assert_eq!(forecast.status, StatusCode::OK, "{}", forecast.text);
    let items = forecast.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{}", forecast.text);
    assert_eq!(items[0]["dst"], Value::Null);
    assert_eq!(
        items[1]["dst"], "skipped",
        "2027-03-28 02:30 does not exist in Berlin: {}",
        forecast.text
    );
    assert_eq!(items[2]["dst"], Value::Null);
    assert_eq!(items[1]["job_name"], "nightly");
}

/// The admin's ledger page: a strip per day with the gaps marked, and the backfill form
/// that lists the instants before it queues them.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn the_ledger_page_shows_gaps_and_backfills_them(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    let job = app.job(&token, noop("minutely")).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &token,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await;
    let id = trigger.body["id"].as_i64().unwrap();
    // Six instants went by and the trigger moved past them, with nothing recorded.
    sqlx::query(
        "UPDATE triggers SET created_at = now() - interval '5 minutes 30 seconds',
                next_fire_at = now() + interval '30 seconds' WHERE id = $1",
    )
    .bind(id)
    .execute(app.pool())
    .await
    .unwrap();
    let b = app.browser("admin").await;
    let page = app.page(&format!("/triggers/{id}/ledger"), &b.cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert_eq!(
        page.text.matches("class=\"cell missed\" data-at=").count(),
        6,
        "{}",
        page.text
    );
    let from = (Utc::now() - chrono::TimeDelta::minutes(10))
        .format("%Y-%m-%dT%H:%M")
        .to_string();
    let to = Utc::now().format("%Y-%m-%dT%H:%M:%S").to_string();
    let listed = app
        .form(
            &format!("/triggers/{id}/backfill"),
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("from", &from),
                ("to", &to),
                ("action", "list"),
            ],
        )
        .await;
    assert!(
        listed.text.contains("6 instant(s) without a run"),
        "{}",
        listed.text
    );
    let bad = app
        .form(
            &format!("/triggers/{id}/backfill"),
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("from", "yesterday"),
                ("to", ""),
                ("max_concurrency", "0"),
                ("action", "queue"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    for field in ["from", "to", "max_concurrency"] {
        assert!(
            bad.text.contains(&format!("id=\"error-{field}\"")),
            "{field}: {}",
            bad.text
        );
    }
    let queued = app
        .form(
            &format!("/triggers/{id}/backfill"),
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("from", &from),
                ("to", &to),
                ("max_concurrency", "2"),
                ("action", "queue"),
            ],
        )
        .await;
    assert!(
        queued
            .text
            .contains("Backfill queued: 6 instant(s), at most 2 at a time"),
        "{}",
        queued.text
    );
    let waiting: i32 = sqlx::query_scalar("SELECT cardinality(instants) FROM backfills")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(waiting, 6);
}

/// Editing a trigger shows its next instants now and after the change, side by side.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn editing_a_trigger_previews_its_instants_before_and_after(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    let job = app.job(&token, noop("daily")).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &token,
            json!({"kind": "cron", "cron": "0 0 6 * * *", "timezone": "UTC"}),
        )
        .await;
    let id = trigger.body["id"].as_i64().unwrap();
    let b = app.browser("admin").await;
    let edit = app.page(&format!("/triggers/{id}/edit"), &b.cookie).await;
    assert!(edit.text.contains("id=\"current\""), "{}", edit.text);
    let preview = app
        .form(
            &format!("/triggers/{id}/edit"),
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("kind", "cron"),
                ("cron", "0 0 18 * * *"),
                ("timezone", "UTC"),
                ("misfire", "fire_once"),
                ("misfire_threshold_secs", "60"),
                ("version", "1"),
                ("action", "preview"),
            ],
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.text);
    assert!(preview.text.contains("id=\"current\""), "{}", preview.text);
    assert!(preview.text.contains("after the change"), "{}", preview.text);
    assert!(
        preview.text.contains("06:00:00"),
        "the saved instants: {}",
        preview.text
    );
    assert!(
        preview.text.contains("18:00:00"),
        "the edited instants: {}",
        preview.text
    );
}

/// The database's clock.
async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()").fetch_one(pool).await.unwrap()
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn resuming_a_paused_job_fires_nothing_for_the_paused_instants_which_the_ledger_shows_skipped(
    pool: PgPool,
) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("every-second")).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 1}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let id = trigger.body["id"].as_i64().unwrap();
    let env = fast_env(&database_url_of(app.pool()), &unique_prefix("resume"));
    let _executor = probactr_testkit::executor("executor", &env);
    let ran = format!("/api/v1/runs?job_id={}&state=succeeded", job["id"]);
    eventually(Duration::from_secs(15), "two instants ran", || async {
        (app.get(&ran, &admin).await.body["total"].as_i64() >= Some(2)).then_some(())
    })
    .await;

    let pause = app
        .post(&format!("/api/v1/jobs/{}/pause", job["id"]), &admin, json!({}))
        .await;
    assert_eq!(pause.status, StatusCode::OK, "{}", pause.text);
    let paused_at = db_now(app.pool()).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let resumed_at = db_now(app.pool()).await;
    let resume = app
        .post(&format!("/api/v1/jobs/{}/resume", job["id"]), &admin, json!({}))
        .await;
    assert_eq!(resume.status, StatusCode::OK, "{}", resume.text);
    eventually(
        Duration::from_secs(15),
        "instants run again after the resume",
        || async {
            let after: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'succeeded' AND scheduled_at > $2",
            )
            .bind(job["id"].as_i64().unwrap())
            .bind(resumed_at)
            .fetch_one(app.pool())
            .await
            .unwrap();
            (after >= 2).then_some(())
        },
    )
    .await;

    // Instants fired ahead before the pause may run; none of the paused ones do.
    let window = (paused_at + chrono::TimeDelta::seconds(1), resumed_at);
    let in_window: Vec<(DateTime<Utc>, String)> = sqlx::query_as(
        "SELECT scheduled_at, state FROM runs WHERE job_id = $1 AND scheduled_at >= $2 AND scheduled_at < $3",
    )
    .bind(job["id"].as_i64().unwrap())
    .bind(window.0)
    .bind(window.1)
    .fetch_all(app.pool())
    .await
    .unwrap();
    assert!(in_window.is_empty(), "no run for a paused instant: {in_window:?}");
    let skipped: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'skipped'")
            .bind(job["id"].as_i64().unwrap())
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert_eq!(skipped, 0, "no burst of skipped runs");

    let ledger = app
        .get(
            &format!(
                "/api/v1/triggers/{id}/ledger?from={}&to={}",
                window
                    .0
                    .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                    .replace('+', "%2B"),
                window
                    .1
                    .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                    .replace('+', "%2B"),
            ),
            &admin,
        )
        .await;
    assert_eq!(ledger.status, StatusCode::OK, "{}", ledger.text);
    let paused: Vec<Value> = entries(&ledger.body);
    assert!(
        paused.len() >= 3,
        "the paused seconds are listed: {}",
        ledger.text
    );
    for entry in &paused {
        assert_eq!(entry["outcome"], "skipped", "{entry}");
        assert_eq!(entry["reason"], "paused", "{entry}");
    }
    let status = app.get("/api/v1/status", &admin).await;
    assert_eq!(
        status.body["missed_last_day"], 0,
        "paused instants are not missed ones"
    );
}

/// A job firing every 15 s from 03:00 to 03:59 UTC that takes a minute keeps four runs
/// going all that hour: twice what one executor of capacity 2 takes. The forecast flags
/// that hour's buckets and none of the hours around it.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn the_capacity_forecast_flags_the_hour_demand_exceeds_capacity(pool: PgPool) {
    let app = TestApp::new(pool.clone());
    let admin = app.admin().await;
    let mut executor =
        store::processes::Registration::this_process(probactr_common::model::ProcessRole::Executor, 2);
    executor.labels = BTreeMap::new();
    store::processes::register(&pool, &executor).await.unwrap();
    let job = app.job(&admin, noop("three-oclock-rush")).await;
    let created = Utc::now();
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "cron", "cron": "*/15 * 3 * * *", "timezone": "UTC"}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    // Its history: five runs of a minute each.
    for ago in 1..=5 {
        sqlx::query(
            "INSERT INTO runs (job_id, scheduled_at, state, queued_at, started_at, finished_at)
             SELECT $1, t - interval '61 seconds', 'succeeded', t - interval '61 seconds',
                    t - interval '60 seconds', t
             FROM (SELECT now() - make_interval(hours => $2) AS t) AS at",
        )
        .bind(job["id"].as_i64().unwrap())
        .bind(ago)
        .execute(&pool)
        .await
        .unwrap();
    }

    let bad = app.get("/api/v1/forecast/capacity?hours=0", &admin).await;
    assert_field(&bad, "hours");
    let forecast = app.get("/api/v1/forecast/capacity?hours=24", &admin).await;
    assert_eq!(forecast.status, StatusCode::OK, "{}", forecast.text);
    let cluster = &forecast.body["groups"][0];
    assert_eq!(cluster["capacity"], 2, "{}", forecast.text);
    assert_eq!(cluster["peak"], 4, "{}", forecast.text);
    let buckets = cluster["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 24 * 12);
    for bucket in buckets {
        let start: DateTime<Utc> = bucket["start"].as_str().unwrap().parse().unwrap();
        let hour = start.format("%H").to_string();
        let minute: u32 = start.format("%M").to_string().parse().unwrap();
        match hour.as_str() {
            // Run during three o'clock, the window opens with a bucket the trigger did not
            // yet exist for: its instants start when it was made.
            "03" if start < created => {}
            "03" => {
                assert_eq!(bucket["demand"], 4, "{bucket}");
                assert_eq!(bucket["shortfall"], true, "{bucket}");
            }
            // The runs of 03:59 end within the first bucket of four o'clock.
            "04" if minute == 0 => {}
            _ => assert_eq!(bucket["shortfall"], false, "{bucket}"),
        }
    }
    assert!(forecast.body["estimated_jobs"].as_array().unwrap().is_empty());
}
