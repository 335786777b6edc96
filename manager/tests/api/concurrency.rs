//! The API under concurrency (issue 28): no 500 while writers and partition maintenance
//! meet, a retried request acts once (`Idempotency-Key`), a stale `If-Match` changes
//! nothing (412).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use probactr_testkit::{database_url, eventually, fast_env, unique_prefix};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::*;

impl TestApp {
    /// A request with extra headers.
    async fn with_headers(
        &self,
        method: Method,
        uri: &str,
        token: &str,
        headers: &[(&str, &str)],
        body: Value,
    ) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::from(body.to_string())).unwrap())
            .await
    }
}

/// The whole cluster under churn: 16 writers make over 5,000 calls (create, patch and
/// delete jobs, triggers and workflows; run jobs and workflows now; backfill; apply
/// definitions) while three real executors and two real monitors run with 1 s heartbeats
/// and reap passes, and the run partitions of yesterday, today and tomorrow are dropped
/// and created again and again: the API never answers 500 (before issue 28, deleting a
/// job deadlocked against the partition DDL, which locked `triggers` for the history's
/// foreign keys), nor any other error. Afterwards no run is left claimed or running and
/// no trigger instant ran twice.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn churn_never_answers_500(_pool_options: PgPoolOptions, connect: PgConnectOptions) {
    // Its own pool: 16 writers need more connections than a test's pool lends.
    let pool = PgPoolOptions::new()
        .max_connections(24)
        .connect_with(connect.clone())
        .await
        .unwrap();
    let app = Arc::new(TestApp::new(pool.clone()));
    let admin = Arc::new(app.admin().await);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));

    let mut env = fast_env(&database_url(&connect), &unique_prefix("churn"));
    env.insert("PROBACTR_HEARTBEAT_INTERVAL".into(), "1s".into());
    env.insert("PROBACTR_DB_POOL_SIZE".into(), "4".into());
    let _cluster: Vec<_> = (1..=3)
        .map(|i| probactr_testkit::executor(&format!("executor-{i}"), &env))
        .chain((1..=2).map(|i| probactr_testkit::monitor(&format!("monitor-{i}"), &env)))
        .collect();

    // Maintenance with a retention in the future: every pass drops the days up to
    // tomorrow and creates them again (today's stays in the default partition once its
    // ended runs land there). A pass a second, like the monitors' own: each waits for
    // every statement on the runs, and every statement after it waits for the pass.
    let maintenance = {
        let pool = pool.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let partitions = "SELECT string_agg(inhrelid::regclass::text, ',' ORDER BY inhrelid)
                              FROM pg_inherits WHERE inhparent = 'runs_done'::regclass";
            let (mut passes, mut changed) = (0u32, 0u32);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let before: Option<String> = sqlx::query_scalar(partitions).fetch_one(&pool).await.unwrap();
                let pass =
                    sqlx::query_scalar::<_, i64>("SELECT probactr_maintain_run_partitions('-3 days', 7)")
                        .fetch_one(&pool)
                        .await;
                let after: Option<String> = sqlx::query_scalar(partitions).fetch_one(&pool).await.unwrap();
                passes += 1;
                changed += u32::from(pass.is_ok() && before != after);
                tokio::time::sleep(Duration::from_millis(1000)).await;
            }
            (passes, changed)
        })
    };

    let started = Instant::now();
    let mut writers = Vec::new();
    for writer in 0..16 {
        let (app, admin) = (app.clone(), admin.clone());
        writers.push(tokio::spawn(async move { churn(&app, &admin, writer).await }));
    }
    let mut calls = 0;
    let mut failed = Vec::new();
    for writer in writers {
        for (what, status) in writer.await.unwrap() {
            calls += 1;
            if status.is_server_error() || status.is_client_error() {
                failed.push(format!("{what}: {status}"));
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (passes, changed) = maintenance.await.unwrap();
    let elapsed = started.elapsed();
    eprintln!("{calls} calls in {elapsed:?}; {passes} maintenance passes, {changed} changed the partitions");
    assert!(calls >= 5000, "{calls} calls");
    assert!(
        changed >= 5,
        "partitions changed in {changed} of {passes} maintenance passes"
    );
    assert!(
        failed.is_empty(),
        "{} of {calls} calls failed: {failed:?}",
        failed.len()
    );

    let ran: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE executor_id IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(ran > 0, "the executors ran runs during the churn");
    let busy = "SELECT count(*) FROM runs WHERE state IN ('claimed', 'running')";
    eventually(
        Duration::from_secs(20),
        "no run is left claimed or running",
        || async {
            let left: i64 = sqlx::query_scalar(busy).fetch_one(&pool).await.unwrap();
            (left == 0).then_some(())
        },
    )
    .await;
    let twice: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM runs WHERE trigger_id IS NOT NULL AND attempt = 1
                               GROUP BY trigger_id, scheduled_at, coalesce(shard, -1)
                               HAVING count(*) > 1) AS twice",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(twice, 0, "trigger instants that ran twice");
    pool.close().await;
}

/// One writer's rounds: every call's name and status.
async fn churn(app: &TestApp, admin: &str, writer: usize) -> Vec<(&'static str, StatusCode)> {
    let mut statuses = Vec::new();
    for round in 0..20 {
        // Applies are serialized: the writers take turns.
        if (round + writer).is_multiple_of(4) {
            let applied = app.apply(admin, "", &applied_definitions(writer, round)).await;
            statuses.push(("apply", applied.status));
        }
        let name = format!("churn-{writer}-{round}");
        let job = app.post("/api/v1/jobs", admin, noop(&name)).await;
        statuses.push(("create job", job.status));
        let Some(id) = job.body["id"].as_i64() else {
            continue;
        };
        let triggers = format!("/api/v1/jobs/{id}/triggers");
        let trigger = app
            .post(
                &triggers,
                admin,
                json!({"kind": "interval", "interval_secs": 3600}),
            )
            .await;
        statuses.push(("create trigger", trigger.status));
        let cron = app
            .post(&triggers, admin, json!({"kind": "cron", "cron": "0 * * * * *"}))
            .await;
        statuses.push(("create cron trigger", cron.status));
        if let (Some(cron_id), 1) = (cron.body["id"].as_i64(), round % 2) {
            let now = Utc::now();
            let backfill = app
                .post(
                    &format!("/api/v1/triggers/{cron_id}/backfill"),
                    admin,
                    json!({"from": (now - TimeDelta::minutes(3)).to_rfc3339(), "to": now.to_rfc3339(),
                           "max_concurrency": 2}),
                )
                .await;
            statuses.push(("backfill", backfill.status));
        }
        for _ in 0..3 {
            let run = app
                .post(&format!("/api/v1/jobs/{id}/run"), admin, json!({}))
                .await;
            statuses.push(("run now", run.status));
        }
        let patched = app
            .patch(
                &format!("/api/v1/jobs/{id}"),
                admin,
                json!({"version": 1, "description": "churned"}),
            )
            .await;
        statuses.push(("patch job", patched.status));
        if let Some(trigger_id) = trigger.body["id"].as_i64() {
            let patched = app
                .patch(
                    &format!("/api/v1/triggers/{trigger_id}"),
                    admin,
                    json!({"version": 1, "interval_secs": 1800}),
                )
                .await;
            statuses.push(("patch trigger", patched.status));
            if round % 3 == 0 {
                let deleted = app
                    .call(
                        Method::DELETE,
                        &format!("/api/v1/triggers/{trigger_id}"),
                        Some(admin),
                        None,
                    )
                    .await;
                statuses.push(("delete trigger", deleted.status));
            }
        }
        let flow = json!({"name": name, "steps": [{"name": "only", "job_id": id}]});
        let workflow = app.post("/api/v1/workflows", admin, flow.clone()).await;
        statuses.push(("create workflow", workflow.status));
        if let Some(flow_id) = workflow.body["id"].as_i64() {
            let uri = format!("/api/v1/workflows/{flow_id}");
            let run = app.post(&format!("{uri}/run"), admin, json!({})).await;
            statuses.push(("run workflow", run.status));
            let mut replaced = flow;
            replaced["description"] = json!("churned");
            let replaced = app.call(Method::PUT, &uri, Some(admin), Some(replaced)).await;
            statuses.push(("replace workflow", replaced.status));
            let deleted = app.call(Method::DELETE, &uri, Some(admin), None).await;
            statuses.push(("delete workflow", deleted.status));
        }
        let paused = app
            .post(&format!("/api/v1/jobs/{id}/pause"), admin, json!({}))
            .await;
        statuses.push(("pause job", paused.status));
        let read = app.get(&format!("/api/v1/jobs/{id}"), admin).await;
        statuses.push(("read job", read.status));
        let erase = if round % 2 == 0 { "?erase_history=true" } else { "" };
        let deleted = app
            .call(
                Method::DELETE,
                &format!("/api/v1/jobs/{id}{erase}"),
                Some(admin),
                None,
            )
            .await;
        statuses.push(("delete job", deleted.status));
    }
    statuses
}

/// A writer's definitions file: a job with a trigger and a workflow running it, its
/// description changed every time (so that each apply edits them).
fn applied_definitions(writer: usize, round: usize) -> String {
    format!(
        "jobs:
  - name: applied-{writer}
    kind: noop
    description: round {round}
    triggers:
      - {{kind: interval, interval_secs: 3600}}
workflows:
  - name: applied-{writer}
    description: round {round}
    steps:
      - {{name: only, job: applied-{writer}}}
"
    )
}

/// A run-now sent twice with one key queues one run and answers its id twice; the same
/// key with another body is refused.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn run_now_with_an_idempotency_key_acts_once(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let id = app.job(&admin, noop("once")).await["id"].as_i64().unwrap();
    let uri = format!("/api/v1/jobs/{id}/run");
    let key = [("idempotency-key", "run-once-1")];
    let first = app
        .with_headers(Method::POST, &uri, &admin, &key, json!({}))
        .await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    let again = app
        .with_headers(Method::POST, &uri, &admin, &key, json!({}))
        .await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert_eq!(again.body["run_id"], first.body["run_id"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(app.count("runs").await, 1);

    let other = app
        .with_headers(
            Method::POST,
            &uri,
            &admin,
            &key,
            json!({"params": {"day": "monday"}}),
        )
        .await;
    assert_field(&other, "Idempotency-Key");
    assert_eq!(app.count("runs").await, 1);

    // Another key is another request.
    let second = app
        .with_headers(
            Method::POST,
            &uri,
            &admin,
            &[("idempotency-key", "run-once-2")],
            json!({}),
        )
        .await;
    assert_eq!(second.status, StatusCode::ACCEPTED);
    assert_ne!(second.body["run_id"], first.body["run_id"]);
    assert_eq!(app.count("runs").await, 2);
}

/// Two edits made from the same read: the first applies, the second is refused (412) and
/// changes nothing. Objects answer with their version as `ETag`.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_stale_if_match_is_refused(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let id = app.job(&admin, noop("edited")).await["id"].as_i64().unwrap();
    let uri = format!("/api/v1/jobs/{id}");
    let read = app.get(&uri, &admin).await;
    let etag = read.headers[header::ETAG].to_str().unwrap().to_owned();
    assert_eq!(etag, "\"1\"");
    let if_match = [("if-match", etag.as_str())];
    let first = app
        .with_headers(
            Method::PATCH,
            &uri,
            &admin,
            &if_match,
            json!({"description": "first"}),
        )
        .await;
    let second = app
        .with_headers(
            Method::PATCH,
            &uri,
            &admin,
            &if_match,
            json!({"description": "second"}),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.headers[header::ETAG], "\"2\"");
    assert_eq!(second.status, StatusCode::PRECONDITION_FAILED, "{}", second.text);
    assert_eq!(second.body["error"]["code"], "precondition_failed");
    // Who won and when, so that an admin form can say it instead of overwriting.
    let message = second.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("changed by admin at "), "{message}");
    let now = app.get(&uri, &admin).await;
    assert_eq!(now.body["description"], "first");
    assert_eq!(now.body["version"], 2);
}
