//! Jobs.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn job_lifecycle(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let created = app
        .job(
            &admin,
            json!({
                "name": "backup", "description": "nightly", "kind": "shell",
                "spec": {"program": "/usr/bin/backup", "args": ["--full"]},
                "parallel": true, "max_concurrency": 2, "overlap": "queue", "timeout_secs": 600,
                "retry": {"max_attempts": 3, "backoff_secs": 5}
            }),
        )
        .await;
    let id = created["id"].as_i64().unwrap();
    assert_eq!(created["kind"], "shell");
    assert_eq!(created["spec"]["program"], "/usr/bin/backup");
    assert_eq!(created["retry"]["max_attempts"], 3);
    assert_eq!(created["version"], 1);
    assert_eq!(created["stats"]["runs"], 0);

    let read = app.get(&format!("/api/v1/jobs/{id}"), &admin).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body["name"], "backup");

    let patched = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": 1, "description": "weekly", "max_concurrency": null}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.body["description"], "weekly");
    assert_eq!(patched.body["max_concurrency"], Value::Null);
    assert_eq!(patched.body["name"], "backup", "unsent fields keep their value");
    assert_eq!(patched.body["version"], 2);

    let paused = app
        .post(&format!("/api/v1/jobs/{id}/pause"), &admin, json!({}))
        .await;
    assert_eq!(paused.status, StatusCode::OK);
    assert_eq!(paused.body["paused"], true);
    let resumed = app
        .post(&format!("/api/v1/jobs/{id}/resume"), &admin, json!({}))
        .await;
    assert_eq!(resumed.body["paused"], false);

    // Deleting keeps the history: the queued run is cancelled and stays readable, the
    // job is retired under a name that frees its own, and takes no more changes.
    let queued = app
        .post(&format!("/api/v1/jobs/{id}/run"), &admin, json!({}))
        .await;
    let run_id = queued.body["run_id"].as_i64().unwrap();
    let bad = app
        .call(
            Method::DELETE,
            &format!("/api/v1/jobs/{id}?erase_history=perhaps"),
            Some(&admin),
            None,
        )
        .await;
    assert_field(&bad, "erase_history");
    let deleted = app
        .call(Method::DELETE, &format!("/api/v1/jobs/{id}"), Some(&admin), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let retired = app.get(&format!("/api/v1/jobs/{id}"), &admin).await;
    assert_eq!(retired.status, StatusCode::OK);
    assert_eq!(retired.body["name"], format!("backup (deleted #{id})"));
    assert!(retired.body["deleted_at"].is_string(), "{}", retired.text);
    let listed = app.get("/api/v1/jobs", &admin).await;
    assert_eq!(listed.body["total"], 0, "a deleted job is not listed");
    let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
    assert_eq!(run.body["state"], "cancelled", "{}", run.text);
    let refused = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": retired.body["version"], "description": "x"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    let again = app.job(&admin, json!({"name": "backup", "kind": "noop"})).await;
    assert_ne!(again["id"].as_i64(), Some(id), "the name is free again");

    let erased = app
        .call(
            Method::DELETE,
            &format!("/api/v1/jobs/{id}?erase_history=true"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(erased.status, StatusCode::NO_CONTENT);
    let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
    assert_eq!(run.status, StatusCode::NOT_FOUND, "erased with its job");
    let gone = app.get(&format!("/api/v1/jobs/{id}"), &admin).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.body["error"]["code"], "not_found");
    assert_eq!(
        app.get("/api/v1/jobs/abc", &admin).await.status,
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn job_validation_names_each_field_and_changes_nothing(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let cases = [
        (json!({"name": "a", "kind": "cobol"}), "kind"),
        (json!({"kind": "noop"}), "name"),
        (json!({"name": "", "kind": "noop"}), "name"),
        (json!({"name": "a"}), "kind"),
        (
            json!({"name": "a", "kind": "noop", "timeout_secs": -5}),
            "timeout_secs",
        ),
        (
            json!({"name": "a", "kind": "noop", "timeout_secs": "soon"}),
            "timeout_secs",
        ),
        (json!({"name": "a", "kind": "shell", "spec": {}}), "spec.program"),
        (
            json!({"name": "a", "kind": "http", "spec": {"url": "ftp://x"}}),
            "spec.url",
        ),
        (json!({"name": "a", "kind": "sleep", "spec": {}}), "spec.millis"),
        (
            json!({"name": "a", "kind": "noop", "overlap": "sometimes"}),
            "overlap",
        ),
        (
            json!({"name": "a", "kind": "noop", "max_concurrency": 0}),
            "max_concurrency",
        ),
        (
            json!({"name": "a", "kind": "shell", "spec": {"program": "true"}, "stop_grace_secs": 3601}),
            "stop_grace_secs",
        ),
        (
            json!({"name": "a", "kind": "shell", "spec": {"program": "true"}, "stop_grace_secs": -1}),
            "stop_grace_secs",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"max_attempts": 0}}),
            "retry.max_attempts",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"tries": 2}}),
            "retry.tries",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"initial_secs": -1}}),
            "retry.initial_secs",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"initial_secs": 60, "max_secs": 30}}),
            "retry.max_secs",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"backoff": "linear"}}),
            "retry.backoff",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"jitter": "some"}}),
            "retry.jitter",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"retry_on": {"exit_codes": [75, 300]}}}),
            "retry.retry_on.exit_codes",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"retry_on": {"http_statuses": "503"}}}),
            "retry.retry_on.http_statuses",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"retry_on": {"signals": [9]}}}),
            "retry.retry_on.signals",
        ),
        (
            json!({"name": "a", "kind": "noop", "overlap": "stack"}),
            "overlap",
        ),
        (json!({"name": "a", "kind": "noop", "colour": "red"}), "colour"),
        (json!(["not", "an", "object"]), "body"),
    ];
    for (body, field) in cases {
        let reply = app.post("/api/v1/jobs", &admin, body.clone()).await;
        assert_field(&reply, field);
    }
    let several = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"kind": "noop", "timeout_secs": 0, "paused": "no"}),
        )
        .await;
    let fields = field_errors(&several);
    for field in ["name", "timeout_secs", "paused"] {
        assert!(fields.contains_key(field), "{field} missing from {fields:?}");
    }

    let malformed = app
        .send(
            Request::post("/api/v1/jobs")
                .header(header::AUTHORIZATION, format!("Bearer {admin}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{\"name\": "))
                .unwrap(),
        )
        .await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        malformed.body["error"]["code"], "bad_request",
        "{}",
        malformed.text
    );

    app.job(&admin, noop("taken")).await;
    let duplicate = app.post("/api/v1/jobs", &admin, noop("taken")).await;
    assert_field(&duplicate, "name");
    assert_eq!(app.count("jobs").await, 1, "bad input changed nothing");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn roles_decide_who_may_change_what(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let operator = app.user("olga", Role::Operator).await;
    let viewer = app.user("victor", Role::Viewer).await;
    let shell = json!({"name": "sh", "kind": "shell", "spec": {"program": "true"}});
    let http = json!({"name": "web", "kind": "http", "spec": {"url": "http://example.com/"}});

    let reply = app.post("/api/v1/jobs", &viewer, noop("v")).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    assert_eq!(reply.body["error"]["code"], "forbidden");
    assert_eq!(
        app.post("/api/v1/jobs", &operator, shell.clone()).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.post("/api/v1/jobs", &operator, http).await.status,
        StatusCode::FORBIDDEN
    );
    let own = app.job(&operator, noop("op-noop")).await;

    let shell = app.job(&admin, shell).await;
    let shell_id = shell["id"].as_i64().unwrap();
    let edit = app
        .patch(
            &format!("/api/v1/jobs/{shell_id}"),
            &operator,
            json!({"version": 1, "description": "x"}),
        )
        .await;
    assert_eq!(
        edit.status,
        StatusCode::FORBIDDEN,
        "operators may not edit shell jobs"
    );
    let into_shell = app
        .patch(
            &format!("/api/v1/jobs/{}", own["id"]),
            &operator,
            json!({"version": 1, "kind": "shell", "spec": {"program": "rm"}}),
        )
        .await;
    assert_eq!(
        into_shell.status,
        StatusCode::FORBIDDEN,
        "nor turn a job into one"
    );

    assert_eq!(
        app.post(&format!("/api/v1/jobs/{shell_id}/run"), &operator, json!({}))
            .await
            .status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        app.post(&format!("/api/v1/jobs/{shell_id}/pause"), &operator, json!({}))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.post(&format!("/api/v1/jobs/{shell_id}/resume"), &viewer, json!({}))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.post(&format!("/api/v1/jobs/{shell_id}/run"), &viewer, json!({}))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{shell_id}/triggers"),
            &viewer,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.get("/api/v1/audit", &operator).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get(&format!("/api/v1/jobs/{shell_id}"), &viewer).await.status,
        StatusCode::OK
    );
    assert_eq!(app.count("jobs").await, 2);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn stale_versions_are_409(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("versioned")).await;
    let uri = format!("/api/v1/jobs/{}", job["id"]);
    assert_eq!(
        app.patch(&uri, &admin, json!({"version": 1, "description": "first"}))
            .await
            .status,
        StatusCode::OK
    );
    let lost = app
        .patch(&uri, &admin, json!({"version": 1, "description": "second"}))
        .await;
    assert_eq!(lost.status, StatusCode::CONFLICT, "{}", lost.text);
    assert_eq!(lost.body["error"]["code"], "conflict");
    assert_eq!(app.get(&uri, &admin).await.body["description"], "first");
    assert_field(
        &app.patch(&uri, &admin, json!({"description": "no version"}))
            .await,
        "version",
    );

    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await;
    let turi = format!("/api/v1/triggers/{}", trigger.body["id"]);
    assert_eq!(
        app.patch(&turi, &admin, json!({"version": 1, "interval_secs": 30}))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.patch(&turi, &admin, json!({"version": 1, "interval_secs": 10}))
            .await
            .status,
        StatusCode::CONFLICT
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn job_list_paginates_and_filters(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    for i in 0..7 {
        app.job(&admin, noop(&format!("job-{i}"))).await;
    }
    app.job(
        &admin,
        json!({"name": "sleepy", "kind": "sleep", "spec": {"millis": 10}, "paused": true}),
    )
    .await;
    let page = app.get("/api/v1/jobs?limit=3&offset=3", &admin).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.body["total"], 8);
    let names: Vec<&str> = page.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["job-3", "job-4", "job-5"]);
    let past_end = app.get("/api/v1/jobs?offset=100", &admin).await;
    assert_eq!(past_end.body["items"].as_array().unwrap().len(), 0);
    assert_eq!(past_end.body["total"], 8);
    assert_eq!(app.get("/api/v1/jobs?q=SLEEP", &admin).await.body["total"], 1);
    assert_eq!(
        app.get("/api/v1/jobs?q=%25", &admin).await.body["total"],
        0,
        "wildcards are literal"
    );
    assert_eq!(app.get("/api/v1/jobs?kind=noop", &admin).await.body["total"], 7);
    assert_eq!(app.get("/api/v1/jobs?paused=true", &admin).await.body["total"], 1);
    assert_field(&app.get("/api/v1/jobs?limit=0", &admin).await, "limit");
    assert_field(&app.get("/api/v1/jobs?limit=abc", &admin).await, "limit");
    assert_field(&app.get("/api/v1/jobs?kind=cobol", &admin).await, "kind");
}

/// Inserts `count` ended runs of `job_id`, oldest first, one second apart, each having run
/// 1.5 s: every tenth failed, the rest succeeded.
async fn insert_history(pool: &PgPool, job_id: i64, count: i64) {
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, queued_at, started_at, finished_at)
         SELECT $1, t, CASE WHEN n % 10 = 0 THEN 'failed' ELSE 'succeeded' END, t,
                t - interval '1.5 seconds', t
         FROM generate_series(1, $2) AS n, LATERAL (SELECT now() - make_interval(secs => $2 - n) AS t) AS at
         ORDER BY n",
    )
    .bind(job_id)
    .bind(count)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn job_statistics_count_every_ended_run(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let busy = app.job(&admin, noop("busy")).await;
    let quiet = app.job(&admin, noop("quiet")).await;
    let busy_id = busy["id"].as_i64().unwrap();
    // More than the 1,000 runs the statistics used to be capped at: all are counted.
    insert_history(app.pool(), busy_id, 1005).await;
    insert_history(app.pool(), quiet["id"].as_i64().unwrap(), 20).await;
    // A run that has not ended is not counted (yet).
    let queued = app
        .post(&format!("/api/v1/jobs/{busy_id}/run"), &admin, json!({}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);

    let list = app.get("/api/v1/jobs", &admin).await;
    let stats_of = |name: &str| {
        list.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .unwrap()["stats"]
            .clone()
    };
    let busy_stats = stats_of("busy");
    assert_eq!(busy_stats["runs"], 1005, "{busy_stats}");
    // n = 10, 20, …, 1000 failed.
    assert_eq!(busy_stats["failures"], 100);
    assert_eq!(busy_stats["successes"], 905);
    assert_eq!(
        (busy_stats["cancelled"].clone(), busy_stats["not_run"].clone()),
        (json!(0), json!(0))
    );
    assert!(busy_stats.get("capped").is_none() && busy_stats.get("window").is_none());
    // The latest end is n = 1005, which succeeded, and the latest failure n = 1000.
    let latest: i64 = sqlx::query_scalar("SELECT max(id) FROM runs WHERE job_id = $1 AND state <> 'queued'")
        .bind(busy_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(busy_stats["last_run_id"], latest);
    assert_eq!(busy_stats["last_state"], "succeeded");
    assert_eq!(busy_stats["last_duration_ms"], 1500);
    let at = |field: &str| {
        busy_stats[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {busy_stats}"))
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    assert_eq!(at("last_success_at"), at("last_run_at"));
    assert_eq!(
        at("last_run_at") - at("last_failure_at"),
        chrono::TimeDelta::seconds(5)
    );
    let quiet_stats = stats_of("quiet");
    assert_eq!(quiet_stats["runs"], 20);
    assert_eq!(
        (quiet_stats["successes"].clone(), quiet_stats["failures"].clone()),
        (json!(18), json!(2))
    );
    assert_eq!(quiet_stats["last_state"], "failed", "n = 20 ended last");
    assert_eq!(quiet_stats["last_run_at"], quiet_stats["last_failure_at"]);

    // Cancelling the queued run counts it, as the latest end; pruning history lowers nothing.
    let run_id = queued.body["run_id"].as_i64().unwrap();
    let cancelled = app
        .post(&format!("/api/v1/runs/{run_id}/cancel"), &admin, json!({}))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    sqlx::query("DELETE FROM runs WHERE job_id = $1 AND id <> $2")
        .bind(busy_id)
        .bind(run_id)
        .execute(app.pool())
        .await
        .unwrap();
    let one = app.get(&format!("/api/v1/jobs/{busy_id}"), &admin).await;
    let stats = &one.body["stats"];
    assert_eq!(
        (
            stats["runs"].clone(),
            stats["successes"].clone(),
            stats["failures"].clone(),
            stats["cancelled"].clone()
        ),
        (json!(1006), json!(905), json!(100), json!(1)),
        "{stats}"
    );
    assert_eq!(
        (stats["last_run_id"].clone(), stats["last_state"].clone()),
        (json!(run_id), json!("cancelled"))
    );
    assert!(
        stats["last_duration_ms"].is_null(),
        "a run cancelled in the queue never ran"
    );

    // A job without runs shows zeros.
    let fresh = app.job(&admin, noop("fresh")).await;
    assert_eq!(fresh["stats"]["runs"], 0);
    assert!(fresh["stats"]["last_state"].is_null());

    // A paused job has no next instant, though its trigger keeps one.
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", quiet["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 3600}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let uri = format!("/api/v1/jobs/{}", quiet["id"]);
    assert!(app.get(&uri, &admin).await.body["stats"]["next_fire_at"].is_string());
    app.post(&format!("{uri}/pause"), &admin, json!({})).await;
    assert!(app.get(&uri, &admin).await.body["stats"]["next_fire_at"].is_null());

    // The pages show the latest end's state.
    let browser = app.browser("admin").await;
    let page = app.page("/jobs", &browser.cookie).await;
    assert!(
        page.text.contains(&format!("href=\"/runs/{run_id}\"")),
        "{}",
        page.text
    );
    assert!(page.text.contains("badge cancelled"), "{}", page.text);
    let page = app.page(&format!("/jobs/{busy_id}"), &browser.cookie).await;
    assert!(page.text.contains("1006"), "{}", page.text);
    assert!(page.text.contains("badge cancelled"), "{}", page.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn job_secrets_are_shown_only_to_who_may_edit_the_job_and_never_audited(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let viewer = app.user("vera", Role::Viewer).await;
    let operator = app.user("otto", Role::Operator).await;
    let job = app
        .job(
            &admin,
            json!({"name": "deploy", "kind": "shell",
                   "spec": {"program": "deploy", "env": {"API_TOKEN": "s3cret-token"}}}),
        )
        .await;
    let hook = app
        .job(
            &admin,
            json!({"name": "hook", "kind": "http",
                   "spec": {"url": "https://hooks.example/x", "headers": {"X-Api-Key": "k3y-value"}}}),
        )
        .await;
    for (who, token) in [("viewer", &viewer), ("operator", &operator)] {
        for id in [&job["id"], &hook["id"]] {
            let one = app.get(&format!("/api/v1/jobs/{id}"), token).await;
            assert_eq!(one.status, StatusCode::OK);
            assert!(
                !one.text.contains("s3cret") && !one.text.contains("k3y"),
                "{who}: {}",
                one.text
            );
        }
        let list = app.get("/api/v1/jobs", token).await;
        assert!(
            !list.text.contains("s3cret") && !list.text.contains("k3y"),
            "{who}: {}",
            list.text
        );
        let page = app.get(&format!("/api/v1/jobs/{}", job["id"]), token).await;
        assert_eq!(page.body["spec"]["env"]["API_TOKEN"], "***", "{who}");
    }
    let as_admin = app.get(&format!("/api/v1/jobs/{}", job["id"]), &admin).await;
    assert_eq!(as_admin.body["spec"]["env"]["API_TOKEN"], "s3cret-token");
    let audit = app.get("/api/v1/audit", &admin).await;
    assert_eq!(audit.status, StatusCode::OK);
    assert!(
        !audit.text.contains("s3cret") && !audit.text.contains("k3y"),
        "{}",
        audit.text
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn run_now_on_a_paused_job_says_why_not_and_queues_nothing(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app
        .job(&admin, json!({"name": "nightly", "kind": "noop", "paused": true}))
        .await;
    let reply = app
        .post(&format!("/api/v1/jobs/{}/run", job["id"]), &admin, json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
    assert!(reply.text.contains("nightly is paused"), "{}", reply.text);
    assert_eq!(app.count("runs").await, 0);
}

/// A job's stop grace defaults to 10 s and can be changed; a run answers with the size
/// and age of its instant's last checkpoint (null while none was saved), for every
/// attempt of the chain.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn stop_grace_and_the_checkpoint_of_a_run(pool: PgPool) {
    use probactr_common::store::{checkpoints, processes, runs};
    let app = TestApp::new(pool.clone());
    let admin = app.admin().await;
    let created = app
        .job(
            &admin,
            json!({"name": "daily", "kind": "shell", "spec": {"program": "true"}}),
        )
        .await;
    assert_eq!(created["stop_grace_secs"], 10);
    let id = created["id"].as_i64().unwrap();
    let patched = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": 1, "stop_grace_secs": 120}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.body["stop_grace_secs"], 120);

    let queued = runs::queue_now(&pool, id).await.unwrap();
    let read = app.get(&format!("/api/v1/runs/{}", queued.id), &admin).await;
    assert_eq!(read.body["checkpoint"], Value::Null, "{}", read.text);

    let mut who = processes::Registration::this_process(ProcessRole::Executor, 4);
    who.id = uuid::Uuid::new_v4();
    processes::register(&pool, &who).await.unwrap();
    let claimed = runs::claim_queued(&pool, who.id, 1).await.unwrap();
    let request = runs::StartRequest {
        run_id: claimed[0].id,
        job_id: id,
        executor_id: who.id,
        exclusive: true,
        fenced: true,
        lock_token: Some("token"),
    };
    let runs::Start::Started { fence } = runs::start(&pool, &request).await.unwrap() else {
        panic!("started")
    };
    let saved = checkpoints::save(&pool, queued.id, who.id, fence, b"step 12 of 40")
        .await
        .unwrap();
    assert_eq!(saved, probactr_common::fence::Write::Stored);
    let read = app.get(&format!("/api/v1/runs/{}", queued.id), &admin).await;
    let checkpoint = &read.body["checkpoint"];
    assert_eq!(checkpoint["bytes"], 13, "{}", read.text);
    assert_eq!(checkpoint["run_id"], queued.id);
    assert!(checkpoint["age_secs"].as_i64().unwrap() >= 0);
    assert!(checkpoint["saved_at"].is_string());
    let browser = app.browser("admin").await;
    let page = app.page(&format!("/runs/{}", queued.id), &browser.cookie).await;
    assert!(page.text.contains("13 bytes, saved"), "{}", page.text);
    let job_page = app.page(&format!("/jobs/{id}"), &browser.cookie).await;
    assert!(job_page.text.contains("120 s between SIGTERM and SIGKILL"));
}

/// Routes and services through the API: bad combinations name their field and store
/// nothing; run-now of a sharded job queues one run per shard; a service takes neither
/// run-now nor triggers, and a job with triggers cannot become one.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn routes_and_services_are_validated_and_fan_out(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let bad = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "web", "kind": "noop", "mode": "service", "route": "broadcast",
                   "replicas": 0, "shards": 5000, "max_concurrency": 2}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields = field_errors(&bad);
    for field in ["replicas", "shards"] {
        assert!(fields.contains_key(field), "{field} missing from {fields:?}");
    }
    let bad = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "web", "kind": "noop", "mode": "service", "route": "shard", "max_concurrency": 2}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields = field_errors(&bad);
    for field in ["route", "max_concurrency"] {
        assert!(fields.contains_key(field), "{field} missing from {fields:?}");
    }
    let bad = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "web", "kind": "noop", "route": "everywhere"}),
        )
        .await;
    assert_field(&bad, "route");
    assert_eq!(app.count("jobs").await, 0);

    let split = app
        .job(
            &admin,
            json!({"name": "split", "kind": "noop", "route": "shard", "shards": 3}),
        )
        .await;
    assert_eq!(
        (split["route"].as_str(), split["shards"].as_i64()),
        (Some("shard"), Some(3))
    );
    let queued = app
        .post(&format!("/api/v1/jobs/{}/run", split["id"]), &admin, json!({}))
        .await;
    assert!(queued.status.is_success(), "{}", queued.text);
    let shards: Vec<(i32, i32)> =
        sqlx::query_as("SELECT shard, shard_total FROM runs WHERE job_id = $1 ORDER BY shard")
            .bind(split["id"].as_i64().unwrap())
            .fetch_all(&app.state.handles.pool)
            .await
            .unwrap();
    assert_eq!(shards, vec![(0, 3), (1, 3), (2, 3)]);

    let web = app
        .job(
            &admin,
            json!({"name": "web", "kind": "noop", "mode": "service", "replicas": 2}),
        )
        .await;
    assert_eq!(
        (web["mode"].as_str(), web["replicas"].as_i64()),
        (Some("service"), Some(2))
    );
    assert_eq!(web["parallel"], true, "a service's instances run side by side");
    let run = app
        .post(&format!("/api/v1/jobs/{}/run", web["id"]), &admin, json!({}))
        .await;
    assert_eq!(run.status, StatusCode::CONFLICT, "{}", run.text);
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", web["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await;
    assert_field(&trigger, "job_id");
    let replicas = app
        .get(&format!("/api/v1/jobs/{}/replicas", web["id"]), &admin)
        .await;
    assert_eq!(replicas.status, StatusCode::OK, "{}", replicas.text);
    assert_eq!(
        replicas.body,
        json!([]),
        "no monitor runs here: nothing started yet"
    );

    let nightly = app.job(&admin, json!({"name": "nightly", "kind": "noop"})).await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", nightly["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await;
    assert!(created.status.is_success(), "{}", created.text);
    let to_service = app
        .patch(
            &format!("/api/v1/jobs/{}", nightly["id"]),
            &admin,
            json!({"version": nightly["version"], "mode": "service"}),
        )
        .await;
    assert_field(&to_service, "mode");
}

/// A job that declares its parameters: the schema is checked when written, run-now and
/// trigger parameters are checked against it (a 422 names each parameter), defaults fill
/// the optional ones, and the admin's run-now form is drawn from it.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn declared_params_are_checked_defaulted_and_drawn(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let bad = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "bad", "kind": "noop", "params_schema": {
                "day": {"type": "date"}, "env": {"type": "enum"}, "n": {"type": "integer", "min": 3, "max": 1}}}),
        )
        .await;
    for field in [
        "params_schema.day.type",
        "params_schema.env.values",
        "params_schema.n.max",
    ] {
        assert_field(&bad, field);
    }
    assert_eq!(app.count("jobs").await, 0, "a bad schema stores nothing");
    let schema = json!({
        "day": {"type": "string", "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}", "required": true},
        "rows": {"type": "integer", "min": 1, "max": 10, "default": 5},
        "env": {"type": "enum", "values": ["dev", "prod"], "default": "dev"},
        "dry": {"type": "boolean"}
    });
    let job = app
        .job(
            &admin,
            json!({"name": "report", "kind": "noop", "params_schema": schema}),
        )
        .await;
    assert_eq!(job["params_schema"]["rows"]["default"], 5);
    assert_eq!(job["params_schema"]["day"]["required"], true);
    let uri = format!("/api/v1/jobs/{}/run", job["id"]);
    let missing = app.post(&uri, &admin, json!({"params": {}})).await;
    assert_field(&missing, "params.day");
    let wrong = app
        .post(
            &uri,
            &admin,
            json!({"params": {"day": "monday", "rows": "5", "env": "qa", "dry": 1, "who": "me"}}),
        )
        .await;
    for field in [
        "params.day",
        "params.rows",
        "params.env",
        "params.dry",
        "params.who",
    ] {
        assert_field(&wrong, field);
    }
    assert_field(
        &app.post(&uri, &admin, json!({"params": {"day": "2030-01-02", "rows": 11}}))
            .await,
        "params.rows",
    );
    assert_eq!(app.count("runs").await, 0, "bad parameters queue nothing");
    let queued = app
        .post(&uri, &admin, json!({"params": {"day": "2030-01-02"}}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    let run = app
        .get(&format!("/api/v1/runs/{}", queued.body["run_id"]), &admin)
        .await;
    assert_eq!(
        run.body["params"],
        json!({"day": "2030-01-02", "rows": 5, "env": "dev"}),
        "defaults fill the optional parameters"
    );

    // Trigger parameters: checked whole (its runs get nothing else), stored as given.
    let triggers = format!("/api/v1/jobs/{}/triggers", job["id"]);
    let interval = |params: Value| json!({"kind": "interval", "interval_secs": 3600, "params": params});
    assert_field(
        &app.post(
            &triggers,
            &admin,
            json!({"kind": "interval", "interval_secs": 3600}),
        )
        .await,
        "params.day",
    );
    assert_field(
        &app.post(
            &triggers,
            &admin,
            interval(json!({"day": "2030-01-02", "env": "qa"})),
        )
        .await,
        "params.env",
    );
    assert_eq!(app.count("triggers").await, 0);
    let trigger = app
        .post(&triggers, &admin, interval(json!({"day": "2030-01-02"})))
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let patched = app
        .patch(
            &format!("/api/v1/triggers/{}", trigger.body["id"]),
            &admin,
            json!({"version": trigger.body["version"], "params": {"day": "x"}}),
        )
        .await;
    assert_field(&patched, "params.day");

    // Workflows: a step's params are checked against its job's schema (none required
    // there), the workflow's own schema checks its runs' params.
    let step = |params: Value| json!([{"name": "s", "job_id": job["id"], "params": params}]);
    let bad_step = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "wf", "steps": step(json!({"rows": 0}))}),
        )
        .await;
    assert_field(&bad_step, "steps[0].params.rows");
    let workflow = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "wf", "steps": step(json!({"rows": 2})),
                   "params_schema": {"day": {"type": "string", "required": true}}}),
        )
        .await;
    assert_eq!(workflow.status, StatusCode::CREATED, "{}", workflow.text);
    assert_eq!(workflow.body["params_schema"]["day"]["required"], true);
    let wf_run = format!("/api/v1/workflows/{}/run", workflow.body["id"]);
    assert_field(
        &app.post(&wf_run, &admin, json!({"params": {"days": 1}})).await,
        "params.day",
    );

    // The admin's run-now form: typed fields, the enum as a select, defaults filled in,
    // and the server's verdict next to the field.
    let browser = app.browser("admin").await;
    let page = app.page(&format!("/jobs/{}", job["id"]), &browser.cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text
            .contains(r#"<select id="f-params.env" name="params.env""#),
        "{}",
        page.text
    );
    assert!(
        page.text.contains(r#"<option value="dev" selected>"#),
        "the default is chosen"
    );
    assert!(page
        .text
        .contains(r#"<input type="number" id="f-params.rows" name="params.rows" value="5""#));
    assert!(page.text.contains(r#"<input type="checkbox" id="f-params.dry""#));
    assert!(
        page.text.contains(r#"title="required""#),
        "day is marked required"
    );
    let refused = app
        .form(
            &format!("/jobs/{}/run", job["id"]),
            &browser.cookie,
            &[
                ("csrf", browser.csrf.as_str()),
                ("params.day", "tomorrow"),
                ("params.rows", "5"),
            ],
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains(r#"id="error-params.day""#),
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains(r#"value="tomorrow""#),
        "the typed value is kept"
    );
    let ran = app
        .form(
            &format!("/jobs/{}/run", job["id"]),
            &browser.cookie,
            &[
                ("csrf", browser.csrf.as_str()),
                ("params.day", "2030-01-03"),
                ("params.env", "prod"),
                ("params.dry", "on"),
            ],
        )
        .await;
    assert_eq!(ran.status, StatusCode::SEE_OTHER, "{}", ran.text);
    let last: Value = sqlx::query_scalar("SELECT params FROM run_inputs ORDER BY run_id DESC LIMIT 1")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(
        last,
        json!({"day": "2030-01-03", "rows": 5, "env": "prod", "dry": true})
    );
}

/// A `secret: true` parameter reaches the job in the clear and nothing else: the stored
/// input holds it sealed, the API shows `***`, the run's output masks it.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_secret_param_reaches_the_job_and_is_masked_everywhere_else(pool: PgPool) {
    use probactr_common::secrets::{Keyring, SecretKey};
    let mut app = TestApp::new(pool);
    let key = SecretKey::parse(probactr_testkit::TEST_SECRET_KEY).unwrap();
    app.state = app.state.clone().with_secret_keys(Some(Keyring::new(key, None)));
    app.app = probactr_manager::app(app.state.clone());
    let admin = app.admin().await;
    let value = "tok-3f9a-clear";
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let job = app
        .job(
            &admin,
            json!({"name": "secretive", "kind": "shell",
                   "spec": {"program": format!("printf %s \"$PROBACTR_PARAM_TOKEN\" > '{}'; echo \"got $PROBACTR_PARAM_TOKEN\"", seen.display()), "shell": true},
                   "params_schema": {"token": {"type": "string", "secret": true, "required": true}}}),
        )
        .await;
    let queued = app
        .post(
            &format!("/api/v1/jobs/{}/run", job["id"]),
            &admin,
            json!({"params": {"token": value}}),
        )
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    let run_id = queued.body["run_id"].as_i64().unwrap();
    let stored: String = sqlx::query_scalar("SELECT params::text FROM run_inputs WHERE run_id = $1")
        .bind(run_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(
        !stored.contains(value) && stored.contains("$sealed"),
        "stored sealed: {stored}"
    );
    let audit: String =
        sqlx::query_scalar("SELECT coalesce(string_agg(after::text, ' '), '') FROM audit_log")
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert!(!audit.contains(value), "the audit log holds no clear value");

    let shutdown = tokio_util::sync::CancellationToken::new();
    let settings = [("PROBACTR_SECRET_KEY", probactr_testkit::TEST_SECRET_KEY)];
    let executor = tokio::spawn(probactr_executor::run(
        executor_config_with(app.pool(), &settings),
        shutdown.clone(),
    ));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let run = loop {
        let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
        if run.body["finished_at"].is_string() {
            break run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never ended: {}",
            run.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    shutdown.cancel();
    executor.await.unwrap().unwrap();
    assert_eq!(run.body["state"], "succeeded", "{}", run.text);
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        value,
        "the job got the value in the clear"
    );
    assert_eq!(run.body["output"], "got ***\n");
    assert_eq!(run.body["params"], json!({"token": "***"}));
    assert!(!run.text.contains(value));
    let output = app.get(&format!("/api/v1/runs/{run_id}/output"), &admin).await;
    assert!(
        !output.text.contains(value) && output.text.contains("got ***"),
        "{}",
        output.text
    );
    let browser = app.browser("admin").await;
    let page = app.page(&format!("/runs/{run_id}"), &browser.cookie).await;
    assert!(
        page.text.contains("***") && !page.text.contains(value),
        "{}",
        page.text
    );

    // A trigger's secret parameter: sealed, shown masked, kept when sent back masked.
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 3600, "params": {"token": value}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let trigger = format!("/api/v1/triggers/{}", created.body["id"]);
    async fn sealed(pool: &PgPool) -> String {
        sqlx::query_scalar("SELECT params::text FROM triggers")
            .fetch_one(pool)
            .await
            .unwrap()
    }
    let before = sealed(app.pool()).await;
    assert!(before.contains("$sealed") && !before.contains(value), "{before}");
    let shown = app.get(&trigger, &admin).await;
    assert_eq!(shown.body["params"], json!({"token": "***"}));
    let edited = app
        .patch(
            &trigger,
            &admin,
            json!({"version": shown.body["version"], "params": {"token": "***"}}),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    assert_eq!(sealed(app.pool()).await, before, "the sealed value is kept");

    // A key rotation moves it to the new key.
    let new_key = SecretKey::parse("AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=").unwrap();
    let old_key = SecretKey::parse(probactr_testkit::TEST_SECRET_KEY).unwrap();
    let keys = Keyring::new(new_key, Some(old_key));
    let new_id = keys.current_id().to_owned();
    app.state = app.state.clone().with_secret_keys(Some(keys));
    app.app = probactr_manager::app(app.state.clone());
    let rotated = app.post("/api/v1/secrets/rotate", &admin, json!({})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let after = sealed(app.pool()).await;
    assert!(
        after.contains(&new_id) && !before.contains(&new_id),
        "{before} → {after}"
    );
}

/// Every change keeps the job's whole definition as a version; restoring one brings that
/// definition back exactly, as a new version.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_restored_version_brings_back_the_exact_definition(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let viewer = app.user("vera", Role::Viewer).await;
    let job = app
        .job(
            &admin,
            json!({"name": "sleeper", "kind": "sleep", "spec": {"millis": 100}, "description": "first",
                   "timeout_secs": 60}),
        )
        .await;
    let id = job["id"].as_i64().unwrap();
    let edited = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": job["version"], "description": "second", "spec": {"millis": 900},
                   "timeout_secs": 30}),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);

    let versions = app.get(&format!("/api/v1/jobs/{id}/versions"), &viewer).await;
    assert_eq!(versions.status, StatusCode::OK, "{}", versions.text);
    assert_eq!(versions.body["total"], 2, "{}", versions.text);
    let newest = &versions.body["items"][0];
    assert_eq!(
        (newest["action"].as_str(), newest["actor"].as_str()),
        (Some("update"), Some("admin"))
    );
    assert_eq!(newest["definition"]["description"], "second");
    let first = app.get(&format!("/api/v1/jobs/{id}/versions/1"), &viewer).await;
    assert_eq!(first.body["definition"]["spec"]["millis"], 100, "{}", first.text);

    let refused = app
        .post(
            &format!("/api/v1/jobs/{id}/versions/1/restore"),
            &viewer,
            json!({}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let restored = app
        .post(
            &format!("/api/v1/jobs/{id}/versions/1/restore"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.text);
    let now = app.get(&format!("/api/v1/jobs/{id}"), &admin).await.body;
    assert_eq!(now["description"], "first");
    assert_eq!(now["spec"], job["spec"]);
    assert_eq!(now["timeout_secs"], job["timeout_secs"]);
    let versions = app.get(&format!("/api/v1/jobs/{id}/versions"), &admin).await;
    assert_eq!(versions.body["total"], 3, "{}", versions.text);
    assert_eq!(versions.body["items"][0]["action"], "restore");
    assert_eq!(versions.body["items"][0]["restored_from"], 1);
    let missing = app
        .post(
            &format!("/api/v1/jobs/{id}/versions/99/restore"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);

    // The job's page lists the history with what each version changed, and restores.
    let browser = app.browser("admin").await;
    let page = app.page(&format!("/jobs/{id}"), &browser.cookie).await;
    assert!(page.text.contains("id=\"history\""), "{}", page.text);
    assert!(
        page.text
            .contains("<b>description</b>: <code>&quot;first&quot;</code> → <code>&quot;second&quot;</code>"),
        "{}",
        page.text
    );
    let submitted = app
        .form(
            &format!("/jobs/{id}/versions/2/restore"),
            &browser.cookie,
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(submitted.status, StatusCode::SEE_OTHER, "{}", submitted.text);
    let now = app.get(&format!("/api/v1/jobs/{id}"), &admin).await.body;
    assert_eq!(now["description"], "second");

    // A restore keeps the job's current pause: one paused during an incident stays paused.
    let paused = app
        .post(&format!("/api/v1/jobs/{id}/pause"), &admin, json!({}))
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.text);
    let restored = app
        .post(
            &format!("/api/v1/jobs/{id}/versions/1/restore"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.text);
    assert_eq!(restored.body["paused"], true, "{}", restored.text);

    // A restore is checked as an edit is: a version naming a since-deleted pool is refused
    // on `pool`, and the job is left as it was.
    let created = app
        .post("/api/v1/pools", &admin, json!({"name": "scratch", "slots": 2}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let pooled = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": restored.body["version"], "pool": "scratch"}),
        )
        .await;
    assert_eq!(pooled.status, StatusCode::OK, "{}", pooled.text);
    let unpooled = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": pooled.body["version"], "pool": null}),
        )
        .await;
    assert_eq!(unpooled.status, StatusCode::OK, "{}", unpooled.text);
    let deleted = app
        .call(Method::DELETE, "/api/v1/pools/scratch", Some(&admin), None)
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.text);
    let gone = app
        .post(
            &format!("/api/v1/jobs/{id}/versions/{}/restore", pooled.body["version"]),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(gone.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", gone.text);
    assert!(gone.text.contains("pool"), "{}", gone.text);
    let now = app.get(&format!("/api/v1/jobs/{id}"), &admin).await.body;
    assert_eq!(now["version"], unpooled.body["version"]);
}

/// A trigger's versions are kept as a job's are: each edit is listed, a restore brings
/// the exact definition back, and a version that would be invalid today (its calendar
/// deleted since) is a 422 naming the field that changes nothing.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_triggers_versions_are_kept_and_restored_when_still_valid(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let created = app
        .post(
            "/api/v1/calendars",
            &admin,
            json!({"name": "holidays", "dates": ["2030-12-25"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let job = app.job(&admin, noop("nightly")).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "cron", "cron": "0 0 9 * * *", "calendar": "holidays", "jitter_secs": 5}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let uri = format!("/api/v1/triggers/{}", trigger.body["id"]);
    let first = app
        .patch(
            &uri,
            &admin,
            json!({"version": 1, "cron": "0 30 9 * * *", "calendar": null}),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let second = app
        .patch(
            &uri,
            &admin,
            json!({"version": 2, "kind": "interval", "interval_secs": 60}),
        )
        .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);

    let versions = app.get(&format!("{uri}/versions"), &admin).await;
    assert_eq!(versions.status, StatusCode::OK, "{}", versions.text);
    assert_eq!(versions.body["total"], 3, "{}", versions.text);
    let actions: Vec<&str> = versions.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["update", "update", "create"]);
    let v2 = app.get(&format!("{uri}/versions/2"), &admin).await;
    assert_eq!(v2.body["definition"]["cron"], "0 30 9 * * *", "{}", v2.text);
    assert_eq!(
        app.get(&format!("{uri}/versions/99"), &admin).await.status,
        StatusCode::NOT_FOUND
    );

    let restored = app
        .post(&format!("{uri}/versions/2/restore"), &admin, json!({}))
        .await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.text);
    assert_eq!(restored.body["version"], 4, "{}", restored.text);
    let v4 = app.get(&format!("{uri}/versions/4"), &admin).await;
    assert_eq!(v4.body["action"], "restore", "{}", v4.text);
    assert_eq!(v4.body["restored_from"], 2, "{}", v4.text);
    assert_eq!(
        v4.body["definition"], v2.body["definition"],
        "the exact definition is back"
    );

    // The trigger's form lists its history, and restores from it.
    let browser = app.browser("admin").await;
    let id = uri.rsplit('/').next().unwrap();
    let page = app.page(&format!("/triggers/{id}/edit"), &browser.cookie).await;
    assert!(page.text.contains("id=\"history\""), "{}", page.text);
    assert!(
        page.text.contains(&format!(
            "&#x2f;triggers&#x2f;{id}&#x2f;versions&#x2f;3&#x2f;restore"
        )),
        "{}",
        page.text
    );
    let previewed = app
        .form(
            &format!("/triggers/{id}/edit"),
            &browser.cookie,
            &[
                ("csrf", &browser.csrf),
                ("action", "preview"),
                ("kind", "interval"),
                ("interval_secs", "120"),
            ],
        )
        .await;
    assert!(
        previewed.text.contains("id=\"history\""),
        "a preview keeps the history: {}",
        previewed.text
    );
    let forged = app
        .form(
            &format!("/triggers/{id}/versions/3/restore"),
            &browser.cookie,
            &[("csrf", "forged")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.text);
    let submitted = app
        .form(
            &format!("/triggers/{id}/versions/3/restore"),
            &browser.cookie,
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(submitted.status, StatusCode::SEE_OTHER, "{}", submitted.text);
    let now = app.get(&uri, &admin).await.body;
    assert_eq!(now["version"], 5, "{now}");
    assert_eq!(now["kind"], "interval", "{now}");

    let deleted = app
        .call(Method::DELETE, "/api/v1/calendars/holidays", Some(&admin), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    assert_field(
        &app.post(&format!("{uri}/versions/1/restore"), &admin, json!({}))
            .await,
        "calendar",
    );
    let after = app.get(&uri, &admin).await;
    assert_eq!(
        after.body["version"], 5,
        "a refused restore changes nothing: {}",
        after.text
    );
    assert_eq!(after.body["kind"], "interval", "{}", after.text);
}

/// The retry policy's shape: given in full it is shown back as given; a new job's
/// jitter is full unless given, an edit keeps it, and an empty `retry_on` is none.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_retry_policy_and_overlap_are_stored_and_shown(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let policy = json!({"max_attempts": 4, "backoff": "fixed", "initial_secs": 30, "max_secs": 30,
                        "jitter": "none", "retry_on": {"exit_codes": [75], "http_statuses": [], "timeouts": true}});
    let created = app
        .job(
            &admin,
            json!({"name": "picky", "kind": "noop", "overlap": "replace", "retry": policy}),
        )
        .await;
    assert_eq!(created["overlap"], "replace");
    let retry = &created["retry"];
    for field in [
        "max_attempts",
        "backoff",
        "initial_secs",
        "max_secs",
        "jitter",
        "retry_on",
    ] {
        assert_eq!(retry[field], policy[field], "{field}");
    }
    assert_eq!(retry["backoff_secs"], 30, "the older name shows the same");

    let plain = app
        .job(
            &admin,
            json!({"name": "plain", "kind": "noop", "overlap": "buffer_one"}),
        )
        .await;
    assert_eq!(plain["overlap"], "buffer_one");
    assert_eq!(plain["retry"]["jitter"], "full", "a new job's default");
    assert_eq!(plain["retry"]["backoff"], "exponential");
    assert_eq!(plain["retry"]["retry_on"], Value::Null);
    let id = plain["id"].as_i64().unwrap();
    let patched = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": 1, "retry": {"backoff_secs": 5, "retry_on": {}}}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.body["retry"]["initial_secs"], 5);
    assert_eq!(patched.body["retry"]["jitter"], "full", "an edit keeps it");
    assert_eq!(
        patched.body["retry"]["retry_on"],
        Value::Null,
        "empty: every failure"
    );
}
