//! Runs and the cluster.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn run_now_list_get_and_cancel(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("runner")).await;
    let other = app.job(&admin, noop("other")).await;
    let queued = app
        .post(&format!("/api/v1/jobs/{}/run", job["id"]), &admin, json!({}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    let run_id = queued.body["run_id"].as_i64().unwrap();
    app.post(&format!("/api/v1/jobs/{}/run", other["id"]), &admin, json!({}))
        .await;
    sqlx::query("UPDATE runs SET output = '<b>hi</b>' WHERE id = $1")
        .bind(run_id)
        .execute(app.pool())
        .await
        .unwrap();

    let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
    assert_eq!(run.status, StatusCode::OK);
    assert_eq!(run.body["state"], "queued");
    assert_eq!(run.body["output"], "<b>hi</b>");
    assert!(run.body.get("lock_token").is_none());

    let all = app.get("/api/v1/runs", &admin).await;
    assert_eq!(all.body["total"], 2);
    assert!(
        all.body["items"][0]["id"].as_i64().unwrap() > all.body["items"][1]["id"].as_i64().unwrap(),
        "newest first"
    );
    let mine = app
        .get(&format!("/api/v1/runs?job_id={}", job["id"]), &admin)
        .await;
    assert_eq!(mine.body["total"], 1);
    assert_eq!(mine.body["items"][0]["has_output"], true);
    assert!(mine.body["items"][0].get("output").is_none());
    assert_eq!(
        app.get("/api/v1/runs?state=running", &admin).await.body["total"],
        0
    );
    assert_eq!(
        app.get(
            "/api/v1/runs?since=2000-01-01T00:00:00Z&until=2001-01-01T00:00:00Z",
            &admin
        )
        .await
        .body["total"],
        0
    );
    assert_field(&app.get("/api/v1/runs?state=sleeping", &admin).await, "state");
    assert_field(&app.get("/api/v1/runs?since=yesterday", &admin).await, "since");

    let cancelled = app
        .post(&format!("/api/v1/runs/{run_id}/cancel"), &admin, json!({}))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.body["state"], "cancelled");
    let stored = store::runs::get(app.pool(), run_id).await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Cancelled);
    let again = app
        .post(&format!("/api/v1/runs/{run_id}/cancel"), &admin, json!({}))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(
        app.post("/api/v1/runs/424242/cancel", &admin, json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.post("/api/v1/jobs/424242/run", &admin, json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn executors_monitors_and_status(pool: PgPool) {
    let app = TestApp::new(pool);
    let viewer = app.user("victor", Role::Viewer).await;
    let executor = store::processes::Registration::this_process(ProcessRole::Executor, 8);
    store::processes::register(app.pool(), &executor).await.unwrap();
    let monitor = store::processes::Registration::this_process(ProcessRole::Monitor, 0);
    store::processes::register(app.pool(), &monitor).await.unwrap();
    let job = store::jobs::insert(
        app.pool(),
        &store::jobs::NewJob::new("j", probactr_common::model::JobKind::Noop, json!({})),
    )
    .await
    .unwrap();
    store::runs::queue_now(app.pool(), job.id).await.unwrap();
    let claimed = store::runs::claim_queued(app.pool(), executor.id, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    for minutes_ago in [30, 120] {
        let run = store::runs::queue_now(app.pool(), job.id).await.unwrap();
        sqlx::query("UPDATE runs SET queued_at = now() - make_interval(mins => $2) WHERE id = $1")
            .bind(run.id)
            .bind(minutes_ago)
            .execute(app.pool())
            .await
            .unwrap();
    }

    let executors = app.get("/api/v1/executors", &viewer).await;
    assert_eq!(executors.status, StatusCode::OK);
    assert_eq!(executors.body["total"], 1);
    assert_eq!(executors.body["items"][0]["running"], 1);
    assert_eq!(executors.body["items"][0]["capacity"], 8);
    assert_eq!(executors.body["items"][0]["state"], "alive");
    let monitors = app.get("/api/v1/monitors", &viewer).await;
    assert_eq!(monitors.body["total"], 1);
    assert!(monitors.body["items"][0].get("capacity").is_none());

    let status = app.get("/api/v1/status", &viewer).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    assert_eq!(status.body["processes"]["executor"]["alive"], 1);
    assert_eq!(status.body["runs_last_hour"]["claimed"], 1);
    assert_eq!(
        status.body["runs_last_hour"]["queued"], 1,
        "the run of two hours ago is not counted"
    );
    let per_minute: Vec<i64> = status.body["runs_per_minute"]
        .as_array()
        .unwrap()
        .iter()
        .map(|count| count.as_i64().unwrap())
        .collect();
    assert_eq!(per_minute.len(), 60);
    assert_eq!(per_minute.iter().sum::<i64>(), 2, "{per_minute:?}");
    // Oldest first: 30 minutes ago is the 30th (the 29th if a minute turned meanwhile).
    let older = per_minute.iter().position(|count| *count == 1).unwrap();
    assert!((28..=29).contains(&older), "{per_minute:?}");
    assert!(
        per_minute[58..].iter().sum::<i64>() >= 1,
        "this minute's run is last: {per_minute:?}"
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn every_change_is_audited(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("audited")).await;
    app.patch(
        &format!("/api/v1/jobs/{}", job["id"]),
        &admin,
        json!({"version": 1, "description": "changed"}),
    )
    .await;
    app.post(&format!("/api/v1/jobs/{}/run", job["id"]), &admin, json!({}))
        .await;
    app.post(&format!("/api/v1/jobs/{}/pause", job["id"]), &admin, json!({}))
        .await;
    let failed = app
        .post("/api/v1/jobs", &admin, json!({"name": "x", "kind": "nope"}))
        .await;
    assert_eq!(failed.status, StatusCode::UNPROCESSABLE_ENTITY);

    let log = app.get("/api/v1/audit?limit=10", &admin).await;
    assert_eq!(log.status, StatusCode::OK);
    assert_eq!(log.body["total"], 4, "{}", log.text);
    let actions: Vec<&str> = log.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["job.pause", "job.run", "job.update", "job.create"]);
    let update = &log.body["items"][2];
    assert_eq!(update["actor"], "admin");
    assert_eq!(update["before"]["description"], "");
    assert_eq!(update["after"]["description"], "changed");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_audit_log_names_objects_filters_and_records_one_entry_per_login(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let operator = app.user("otto", Role::Operator).await;
    let job = app.job(&admin, noop("nightly")).await;
    let other = app.job(&admin, noop("hourly")).await;
    app.post(&format!("/api/v1/jobs/{}/pause", job["id"]), &operator, json!({}))
        .await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", other["id"]),
            &operator,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);

    // Logging in through the API is one entry, not a token's creation as well; so is a
    // login to the web admin.
    let login = app
        .call(
            Method::POST,
            "/api/v1/auth/token",
            None,
            Some(json!({"username": "otto", "password": password_of("otto")})),
        )
        .await;
    assert_eq!(login.status, StatusCode::CREATED, "{}", login.text);
    app.browser("otto").await;
    let logins = app.get("/api/v1/audit?user=otto&action=user.login", &admin).await;
    assert_eq!(logins.status, StatusCode::OK, "{}", logins.text);
    assert_eq!(logins.body["total"], 2, "{}", logins.text);
    let via: Vec<&str> = logins.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["after"]["via"].as_str().unwrap())
        .collect();
    assert_eq!(via, ["admin", "api"]);
    assert_eq!(logins.body["items"][0]["object_name"], "otto");
    let tokens = app.get("/api/v1/audit?action=token", &admin).await;
    assert_eq!(
        tokens.body["total"], 0,
        "a login writes no token entry: {}",
        tokens.text
    );

    // By user: only what otto did.
    let by_otto = app.get("/api/v1/audit?user=otto", &admin).await;
    let actions: Vec<&str> = by_otto.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["user.login", "user.login", "trigger.create", "job.pause"]
    );
    // By object, named: the trigger's entry names its job.
    let hourly = app.get("/api/v1/audit?object=hourly", &admin).await;
    let entries: Vec<(&str, &str)> = hourly.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["object_type"].as_str().unwrap(),
                e["object_name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(entries, [("trigger", "hourly"), ("job", "hourly")]);
    let typed = app
        .get("/api/v1/audit?object_type=job&object=nightly", &admin)
        .await;
    assert_eq!(typed.body["total"], 2, "created and paused: {}", typed.text);
    let by_id = app
        .get(
            &format!("/api/v1/audit?object_type=job&object={}", job["id"]),
            &admin,
        )
        .await;
    assert_eq!(by_id.body["total"], 2, "{}", by_id.text);
    // By action: one, or a whole kind.
    let paused = app.get("/api/v1/audit?action=job.pause", &admin).await;
    assert_eq!(paused.body["total"], 1);
    assert_eq!(paused.body["items"][0]["object_name"], "nightly");
    let job_actions = app.get("/api/v1/audit?action=job", &admin).await;
    assert_eq!(job_actions.body["total"], 3, "{}", job_actions.text);
    // Filters combine, and a bad one is named.
    let none = app.get("/api/v1/audit?user=admin&action=job.pause", &admin).await;
    assert_eq!(none.body["total"], 0);
    let long = "x".repeat(201);
    let bad = app
        .get(&format!("/api/v1/audit?user={long}&action={long}"), &admin)
        .await;
    assert_field(&bad, "user");
    assert_field(&bad, "action");
    // The admin page shows names and offers the same filters.
    let browser = app.browser("admin").await;
    let page = app
        .page("/audit?object_type=job&object=nightly", &browser.cookie)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(">job nightly</a>"), "{}", page.text);
    assert!(!page.text.contains("hourly</a>"), "filtered: {}", page.text);
    assert!(
        page.text.contains(r#"<option value="otto""#),
        "users to filter by"
    );
    let triggers = app.page("/audit?object_type=trigger", &browser.cookie).await;
    assert!(triggers.text.contains(" of hourly"), "{}", triggers.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn cluster_admins_cordon_uncordon_and_drain_executors(pool: PgPool) {
    let app = TestApp::new(pool);
    let viewer = app.user("vera", Role::Viewer).await;
    let operator = app.user("otto", Role::Operator).await;
    let admin = app.admin().await;
    let mut executor = store::processes::Registration::this_process(ProcessRole::Executor, 8);
    executor.labels = probactr_common::labels::parse_labels("zone=a,gpu=1").unwrap();
    store::processes::register(app.pool(), &executor).await.unwrap();
    let monitor = store::processes::Registration::this_process(ProcessRole::Monitor, 0);
    store::processes::register(app.pool(), &monitor).await.unwrap();
    let listed = app.get("/api/v1/executors", &viewer).await;
    assert_eq!(
        listed.body["items"][0]["labels"],
        json!({"gpu": "1", "zone": "a"})
    );
    assert_eq!(listed.body["items"][0]["cordoned"], false);

    let path = |action: &str| format!("/api/v1/executors/{}/{action}", executor.id);
    let refused = app.post(&path("cordon"), &viewer, json!({})).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let refused = app.post(&path("cordon"), &operator, json!({})).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let cordoned = app.post(&path("cordon"), &admin, json!({})).await;
    assert_eq!(cordoned.status, StatusCode::OK, "{}", cordoned.text);
    assert_eq!(cordoned.body["cordoned"], true);
    assert_eq!(cordoned.body["drain_requested"], false);
    let uncordoned = app.post(&path("uncordon"), &admin, json!({})).await;
    assert_eq!(uncordoned.body["cordoned"], false);
    let drained = app.post(&path("drain"), &admin, json!({})).await;
    assert_eq!(drained.status, StatusCode::OK, "{}", drained.text);
    assert_eq!(drained.body["cordoned"], true);
    assert_eq!(drained.body["drain_requested"], true);
    assert_eq!(
        store::processes::heartbeat(app.pool(), executor.id)
            .await
            .unwrap(),
        store::processes::Heartbeat::DrainRequested
    );

    let unknown = app
        .post(
            &format!("/api/v1/executors/{}/cordon", uuid::Uuid::new_v4()),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    let not_an_id = app.post("/api/v1/executors/nope/cordon", &admin, json!({})).await;
    assert_eq!(not_an_id.status, StatusCode::NOT_FOUND, "{}", not_an_id.text);
    let a_monitor = app
        .post(
            &format!("/api/v1/executors/{}/drain", monitor.id),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(a_monitor.status, StatusCode::NOT_FOUND, "{}", a_monitor.text);
    store::processes::set_state(
        app.pool(),
        executor.id,
        probactr_common::model::ProcessState::Stopped,
    )
    .await
    .unwrap();
    let stopped = app.post(&path("uncordon"), &admin, json!({})).await;
    assert_eq!(stopped.status, StatusCode::CONFLICT, "{}", stopped.text);

    let audited: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action LIKE 'executor.%'")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(audited, 3, "cordon, uncordon and drain are audited");
}

/// An ended run of `job_id`, queued at `queued_at`, that ran `took_ms`.
async fn ended_run(
    app: &TestApp,
    job_id: i64,
    trigger_id: Option<i64>,
    executor_id: Option<uuid::Uuid>,
    queued_at: &str,
    took_ms: i64,
) -> i64 {
    let run = store::runs::queue_now(app.pool(), job_id).await.unwrap();
    sqlx::query(
        "UPDATE runs SET state = 'succeeded', trigger_id = $2, executor_id = $3,
                         queued_at = $4::timestamptz, started_at = $4::timestamptz,
                         finished_at = $4::timestamptz + make_interval(secs => $5::float8 / 1000)
         WHERE id = $1",
    )
    .bind(run.id)
    .bind(trigger_id)
    .bind(executor_id)
    .bind(queued_at)
    .bind(took_ms as f64)
    .execute(app.pool())
    .await
    .unwrap();
    run.id
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn runs_filter_by_job_name_trigger_executor_dates_and_duration(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let alpha = app.job(&admin, noop("alpha")).await["id"].as_i64().unwrap();
    let beta = app.job(&admin, noop("beta")).await["id"].as_i64().unwrap();
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{alpha}/triggers"),
            &admin,
            json!({"kind": "interval", "interval_secs": 3600, "paused": true}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let trigger_id = trigger.body["id"].as_i64().unwrap();
    let executor = store::processes::Registration::this_process(ProcessRole::Executor, 8);
    store::processes::register(app.pool(), &executor).await.unwrap();

    let quick = ended_run(&app, alpha, Some(trigger_id), None, "2026-01-01T00:00:00Z", 100).await;
    let slow = ended_run(&app, alpha, None, Some(executor.id), "2026-02-01T00:00:00Z", 5000).await;
    let middling = ended_run(&app, alpha, None, None, "2026-03-01T00:00:00Z", 2000).await;
    let other = ended_run(&app, beta, None, None, "2026-03-02T00:00:00Z", 300).await;
    let ids = |reply: &Reply| -> Vec<i64> {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        reply.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["id"].as_i64().unwrap())
            .collect()
    };

    let by_name = app.get("/api/v1/runs?job=alpha", &admin).await;
    assert_eq!(ids(&by_name), [middling, slow, quick]);
    assert_eq!(by_name.body["total"], 3);
    assert_eq!(
        ids(&app.get("/api/v1/runs?job=nobody", &admin).await),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(&app
            .get(&format!("/api/v1/runs?trigger_id={trigger_id}"), &admin)
            .await),
        [quick]
    );
    assert_eq!(
        ids(&app
            .get(&format!("/api/v1/runs?executor_id={}", executor.id), &admin)
            .await),
        [slow]
    );
    assert_eq!(
        ids(&app
            .get(
                "/api/v1/runs?since=2026-01-15T00:00:00Z&until=2026-02-15T00:00:00Z",
                &admin
            )
            .await),
        [slow]
    );
    let long = app.get("/api/v1/runs?min_duration_ms=1500", &admin).await;
    assert_eq!(ids(&long), [middling, slow]);
    let longest_first = app.get("/api/v1/runs?sort=duration", &admin).await;
    assert_eq!(ids(&longest_first), [slow, middling, other, quick]);
    assert_eq!(longest_first.body["items"][0]["duration_ms"], 5000);
    assert_eq!(
        ids(&app
            .get(
                "/api/v1/runs?job=alpha&sort=duration&min_duration_ms=1000",
                &admin
            )
            .await),
        [slow, middling]
    );

    // Every bad filter is named at once.
    let bad = app
        .get(
            "/api/v1/runs?executor_id=nope&min_duration_ms=-1&sort=fast&since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z",
            &admin,
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields = field_errors(&bad);
    for field in ["executor_id", "min_duration_ms", "sort", "until"] {
        assert!(fields.contains_key(field), "{field} named: {fields:?}");
    }

    // The admin's list takes the same filters, from its form (times without an offset are UTC).
    let browser = app.browser("admin").await;
    let page = app
        .page(
            "/runs?job=alpha&sort=duration&since=2026-01-15T00:00",
            &browser.cookie,
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let slow_at = page.text.find(&format!("/runs/{slow}\"")).expect("the slow run");
    let middling_at = page
        .text
        .find(&format!("/runs/{middling}\""))
        .expect("the middling run");
    assert!(slow_at < middling_at, "longest first");
    assert!(
        !page.text.contains(&format!("/runs/{quick}\"")),
        "before the range"
    );
    assert!(!page.text.contains(&format!("/runs/{other}\"")), "another job's");
    assert!(page.text.contains("5.0 s"), "durations shown");
}

/// A re-run repeats a run's parameters (its trigger's defaults included), records which
/// run it repeats, and is for operators; the run page offers it once the run ended.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_rerun_repeats_the_parameters_of_the_run(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let viewer = app.user("vera", Role::Viewer).await;
    let job = app.job(&admin, noop("report")).await;
    let queued = app
        .post(
            &format!("/api/v1/jobs/{}/run", job["id"]),
            &admin,
            json!({"params": {"region": "eu", "day": "2026-11-25"}}),
        )
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    let first = queued.body["run_id"].as_i64().unwrap();
    sqlx::query("UPDATE runs SET state = 'failed', finished_at = now() WHERE id = $1")
        .bind(first)
        .execute(app.pool())
        .await
        .unwrap();

    let refused = app
        .post(&format!("/api/v1/runs/{first}/rerun"), &viewer, json!({}))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let again = app
        .post(&format!("/api/v1/runs/{first}/rerun"), &admin, json!({}))
        .await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    let second = again.body["run_id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/runs/{second}"), &admin).await;
    assert_eq!(
        run.body["params"],
        json!({"region": "eu", "day": "2026-11-25"}),
        "{}",
        run.text
    );
    assert_eq!(run.body["rerun_of"], first, "{}", run.text);
    assert_eq!(run.body["state"], "queued");
    assert_eq!(
        app.post("/api/v1/runs/999999/rerun", &admin, json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // In the admin: the ended run offers a re-run, which opens the new run's page.
    let browser = app.browser("admin").await;
    let page = app.page(&format!("/runs/{first}"), &browser.cookie).await;
    assert!(
        page.text.contains(&format!("&#x2f;runs&#x2f;{first}&#x2f;rerun")),
        "{}",
        page.text
    );
    let submitted = app
        .form(
            &format!("/runs/{first}/rerun"),
            &browser.cookie,
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(submitted.status, StatusCode::SEE_OTHER, "{}", submitted.text);
    let third = app.get("/api/v1/runs", &admin).await.body["items"][0]["id"]
        .as_i64()
        .unwrap();
    let page = app.page(&format!("/runs/{third}"), &browser.cookie).await;
    assert!(
        page.text
            .contains(&format!("re-run of <a href=\"/runs/{first}\">")),
        "{}",
        page.text
    );
}

/// A retry queues the next attempt of a failed run's chain with its parameters, once: a
/// run that did not fail, or one already retried, is refused; the run page of a failed
/// run offers it beside Re-run.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_retry_is_the_next_attempt_of_the_failed_runs_chain(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("flaky")).await;
    let queued = app
        .post(
            &format!("/api/v1/jobs/{}/run", job["id"]),
            &admin,
            json!({"params": {"day": "2026-11-25"}}),
        )
        .await;
    let first = queued.body["run_id"].as_i64().unwrap();
    let end = |id: i64, state: &'static str| {
        sqlx::query("UPDATE runs SET state = $2, finished_at = now() WHERE id = $1")
            .bind(id)
            .bind(state)
            .execute(app.pool())
    };
    end(first, "failed").await.unwrap();

    let browser = app.browser("admin").await;
    let page = app.page(&format!("/runs/{first}"), &browser.cookie).await;
    assert!(
        page.text.contains(&format!("&#x2f;runs&#x2f;{first}&#x2f;retry")),
        "a Retry button: {}",
        page.text
    );
    let submitted = app
        .form(
            &format!("/runs/{first}/retry"),
            &browser.cookie,
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(submitted.status, StatusCode::SEE_OTHER, "{}", submitted.text);
    let second = app.get("/api/v1/runs", &admin).await.body["items"][0]["id"]
        .as_i64()
        .unwrap();
    let run = app.get(&format!("/api/v1/runs/{second}"), &admin).await;
    assert_eq!(run.body["attempt"], 2, "{}", run.text);
    assert_eq!(run.body["first_run_id"], first, "{}", run.text);
    assert_eq!(run.body["params"], json!({"day": "2026-11-25"}), "{}", run.text);
    assert_eq!(run.body["state"], "queued");

    let again = app
        .post(&format!("/api/v1/runs/{first}/retry"), &admin, json!({}))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "once: {}", again.text);
    end(second, "timed_out").await.unwrap();
    let third = app
        .post(&format!("/api/v1/runs/{second}/retry"), &admin, json!({}))
        .await;
    assert_eq!(third.status, StatusCode::ACCEPTED, "{}", third.text);
    let third = third.body["run_id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/runs/{third}"), &admin).await;
    assert_eq!(
        (run.body["attempt"].clone(), run.body["first_run_id"].clone()),
        (json!(3), json!(first))
    );
    end(third, "succeeded").await.unwrap();
    let refused = app
        .post(&format!("/api/v1/runs/{third}/retry"), &admin, json!({}))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.text.contains("re-run it instead"), "{}", refused.text);
}
