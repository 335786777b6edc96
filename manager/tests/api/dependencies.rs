//! Dependencies across schedules (a trigger's `after`), end to end with a real executor
//! and a real monitor: the bad fields named, a dependent run waiting with its reason until
//! the upstream job's run of the same day succeeded and then running once, and one that
//! waited too long failing with the reason.

use std::time::Duration;

use probactr_testkit::{eventually, TEST_SECRET_KEY};
use tokio_util::sync::CancellationToken;

use super::output::start_executor;
use super::*;

/// A monitor running in this process until the returned token is cancelled.
fn start_monitor(pool: &PgPool) -> (CancellationToken, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let config = executor_config_with(
        pool,
        &[
            ("PROBACTR_SECRET_KEY", TEST_SECRET_KEY),
            ("PROBACTR_REAP_INTERVAL", "1s"),
        ],
    );
    let shutdown = CancellationToken::new();
    let monitor = tokio::spawn(probactr_monitor::run(config, shutdown.clone()));
    (shutdown, monitor)
}

/// The runs of a job, as the API lists them.
async fn runs_of(app: &TestApp, token: &str, job: &Value) -> Vec<Value> {
    let listed = app
        .get(&format!("/api/v1/runs?job_id={}", job["id"]), token)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    listed.body["items"].as_array().unwrap().clone()
}

/// A once trigger of `job` a second from now that waits for `upstream` up to `within_secs`.
async fn dependent_trigger(app: &TestApp, token: &str, job: &Value, within_secs: i64) -> Value {
    let at = (chrono::Utc::now() + chrono::TimeDelta::seconds(1)).to_rfc3339();
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            token,
            json!({"kind": "once", "at": at, "after": {"job": "nightly-load", "within_secs": within_secs}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.body
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_dependent_trigger_waits_for_the_days_upstream_run_then_runs_once(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let upstream = app
        .job(&admin, json!({"name": "nightly-load", "kind": "noop"}))
        .await;
    let report = app.job(&admin, json!({"name": "report", "kind": "noop"})).await;
    let late = app
        .job(&admin, json!({"name": "late-report", "kind": "noop"}))
        .await;
    let path = format!("/api/v1/jobs/{}/triggers", report["id"]);
    let unknown = app
        .post(
            &path,
            &admin,
            json!({"kind": "interval", "interval_secs": 60, "after": {"job": "nope", "within_secs": 60}}),
        )
        .await;
    assert_eq!(
        unknown.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        unknown.text
    );
    assert!(unknown.text.contains("after.job"), "{}", unknown.text);
    let never = app
        .post(
            &path,
            &admin,
            json!({"kind": "interval", "interval_secs": 60, "after": {"job": "nightly-load", "within_secs": 0}}),
        )
        .await;
    assert_eq!(never.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", never.text);
    assert!(never.text.contains("after.within_secs"), "{}", never.text);
    assert_eq!(app.count("triggers").await, 0, "bad input changes nothing");

    let waiting = dependent_trigger(&app, &admin, &report, 300).await;
    assert_eq!(
        waiting["after"],
        json!({"job": "nightly-load", "within_secs": 300})
    );
    let shown = app
        .get(&format!("/api/v1/triggers/{}", waiting["id"]), &admin)
        .await;
    assert_eq!(shown.body["after"]["job"], "nightly-load", "{}", shown.text);
    dependent_trigger(&app, &admin, &late, 2).await;

    let (stop_monitor, monitor) = start_monitor(app.pool());
    let (stop_executor, executor) = start_executor(app.pool(), &[]);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let reason = format!("waiting for nightly-load of {today}");
    let run = eventually(Duration::from_secs(15), "the dependent run waits", || async {
        runs_of(&app, &admin, &report).await.pop()
    })
    .await;
    let failed = eventually(Duration::from_secs(20), "the late run fails", || async {
        runs_of(&app, &admin, &late)
            .await
            .pop()
            .filter(|run| run["state"] == "failed")
    })
    .await;
    assert!(
        failed["reason"].as_str().is_some_and(|r| r.starts_with(&reason)),
        "{failed}"
    );
    // Long after the instant, the other still waits, saying for what.
    let still = app.get(&format!("/api/v1/runs/{}", run["id"]), &admin).await;
    assert_eq!(still.body["state"], "queued", "{}", still.text);
    assert_eq!(still.body["reason"], json!(reason), "{}", still.text);

    let upstream_run = app
        .post(&format!("/api/v1/jobs/{}/run", upstream["id"]), &admin, json!({}))
        .await;
    assert_eq!(upstream_run.status, StatusCode::ACCEPTED, "{}", upstream_run.text);
    eventually(Duration::from_secs(15), "the dependent run ran", || async {
        let ran = app.get(&format!("/api/v1/runs/{}", run["id"]), &admin).await;
        (ran.body["state"] == "succeeded").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = runs_of(&app, &admin, &report).await;
    assert_eq!(runs.len(), 1, "it ran once: {runs:?}");
    stop_executor.cancel();
    stop_monitor.cancel();
    executor.await.unwrap().unwrap();
    monitor.await.unwrap().unwrap();
}
