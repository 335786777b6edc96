//! Run parameters and workflows through the API (no executor: steps are read as queued).

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn run_now_takes_params_and_the_run_shows_them(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("with-params")).await;
    let uri = format!("/api/v1/jobs/{}/run", job["id"]);
    let queued = app
        .post(&uri, &admin, json!({"params": {"day": "2030-01-02", "n": 3}}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    let run = app
        .get(&format!("/api/v1/runs/{}", queued.body["run_id"]), &admin)
        .await;
    assert_eq!(run.body["params"], json!({"day": "2030-01-02", "n": 3}));
    let plain = app.call(Method::POST, &uri, Some(&admin), None).await;
    assert_eq!(plain.status, StatusCode::ACCEPTED, "no body: no params");
    let run = app
        .get(&format!("/api/v1/runs/{}", plain.body["run_id"]), &admin)
        .await;
    assert_eq!(run.body["params"], json!({}));
    assert_field(&app.post(&uri, &admin, json!({"params": [1]})).await, "params");
    assert_eq!(app.count("runs").await, 2, "a bad body queues nothing");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn workflows_are_checked_run_cancelled_retried_and_paused(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let a = app.job(&admin, noop("a")).await["id"].as_i64().unwrap();
    let b = app.job(&admin, noop("b")).await["id"].as_i64().unwrap();

    let bad = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "bad", "steps": [
                {"name": "x", "job_id": a, "depends_on": ["y"]},
                {"name": "y", "job_id": a, "depends_on": ["x"]},
                {"name": "z", "job_id": 424242, "depends_on": ["nope"], "when": "maybe"}]}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields = field_errors(&bad);
    for field in [
        "steps[0].depends_on",
        "steps[2].job_id",
        "steps[2].depends_on",
        "steps[2].when",
    ] {
        assert!(fields.contains_key(field), "{field} named: {fields:?}");
    }

    let created = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "pair", "steps": [
                {"name": "first", "job_id": a, "params": {"region": "eu"}},
                {"name": "second", "job_id": b, "depends_on": ["first"], "when": "all_done"}]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_i64().unwrap();
    assert_eq!(created.body["steps"][1]["when"], "all_done");
    let again = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "pair", "steps": [{"name": "s", "job_id": a}]}),
        )
        .await;
    assert_field(&again, "name");

    let started = app
        .post(
            &format!("/api/v1/workflows/{id}/run"),
            &admin,
            json!({"params": {"day": "mon"}}),
        )
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.text);
    let run_id = started.body["workflow_run_id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/workflow-runs/{run_id}"), &admin).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.text);
    assert_eq!(run.body["state"], "running");
    assert_eq!(run.body["workflow_name"], "pair");
    assert_eq!(run.body["steps"][0]["state"], "running");
    assert_eq!(run.body["steps"][1]["state"], "pending");
    let first_run = run.body["steps"][0]["run_id"].as_i64().unwrap();
    let step_run = app.get(&format!("/api/v1/runs/{first_run}"), &admin).await;
    assert_eq!(step_run.body["params"], json!({"day": "mon", "region": "eu"}));

    let early = app
        .post(
            &format!("/api/v1/workflow-runs/{run_id}/steps/first/retry"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(
        early.status,
        StatusCode::CONFLICT,
        "a running step is not retried"
    );
    let cancelled = app
        .post(
            &format!("/api/v1/workflow-runs/{run_id}/cancel"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.body["state"], "cancelled");
    assert_eq!(
        cancelled.body["steps"][0]["state"], "cancelled",
        "its queued run was cancelled"
    );
    assert_eq!(cancelled.body["steps"][1]["state"], "cancelled");
    assert_eq!(
        store::runs::get(app.pool(), first_run)
            .await
            .unwrap()
            .unwrap()
            .state,
        RunState::Cancelled
    );

    let retried = app
        .post(
            &format!("/api/v1/workflow-runs/{run_id}/steps/first/retry"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{}", retried.text);
    let run = app.get(&format!("/api/v1/workflow-runs/{run_id}"), &admin).await;
    assert_eq!(run.body["state"], "running");
    assert_eq!(run.body["steps"][0]["run_ids"].as_array().unwrap().len(), 2);
    assert_eq!(
        run.body["steps"][1]["state"], "pending",
        "waits for the retried step again"
    );
    assert_eq!(
        app.post(
            "/api/v1/workflow-runs/424242/steps/first/retry",
            &admin,
            json!({})
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );

    let paused = app
        .post(&format!("/api/v1/workflows/{id}/pause"), &admin, json!({}))
        .await;
    assert_eq!(paused.body["paused"], true, "{}", paused.text);
    let refused = app
        .post(&format!("/api/v1/workflows/{id}/run"), &admin, json!({}))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    let listed = app.get("/api/v1/workflows", &admin).await;
    assert_eq!(listed.body["total"], 1);
    assert_eq!(listed.body["items"][0]["last_runs"][0]["id"], run_id);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn child_job_lists_are_resolved_checked_and_shown(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let load = app.job(&admin, noop("load")).await["id"].as_i64().unwrap();
    let alert = app.job(&admin, noop("alert")).await["id"].as_i64().unwrap();

    let mut body = noop("extract");
    body["on_success"] = json!(["load", 424242]);
    body["on_failure"] = json!("alert");
    body["timeout_secs"] = json!(0);
    let bad = app.post("/api/v1/jobs", &admin, body).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields = field_errors(&bad);
    for field in ["on_success", "on_failure", "timeout_secs"] {
        assert!(fields.contains_key(field), "{field} named at once: {fields:?}");
    }
    assert!(fields["on_success"].contains("424242"), "{fields:?}");
    assert_eq!(app.count("jobs").await, 2, "nothing created");

    let mut body = noop("extract");
    body["on_success"] = json!(["load"]);
    body["on_failure"] = json!([alert]);
    body["on_finish"] = json!([alert, "alert"]);
    let created = app.post("/api/v1/jobs", &admin, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["on_success"], json!([load]), "names become ids");
    assert_eq!(created.body["on_failure"], json!([alert]));
    assert_eq!(created.body["on_finish"], json!([alert]), "once each");
    let extract = created.body["id"].as_i64().unwrap();

    // load → extract would close a loop: extract → load → extract.
    let looped = app
        .patch(
            &format!("/api/v1/jobs/{load}"),
            &admin,
            json!({"version": 1, "on_finish": ["extract"]}),
        )
        .await;
    assert_field(&looped, "on_finish");
    let own = app
        .patch(
            &format!("/api/v1/jobs/{extract}"),
            &admin,
            json!({"version": created.body["version"], "on_success": [extract]}),
        )
        .await;
    assert_field(&own, "on_success");
    let cleared = app
        .patch(
            &format!("/api/v1/jobs/{extract}"),
            &admin,
            json!({"version": created.body["version"], "on_failure": []}),
        )
        .await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.text);
    assert_eq!(cleared.body["on_failure"], json!([]));
    assert_eq!(
        cleared.body["on_success"],
        json!([load]),
        "unchanged when not given"
    );

    // Deleting a child takes it out of its parents' lists.
    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/v1/jobs/{alert}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    let parent = app.get(&format!("/api/v1/jobs/{extract}"), &admin).await;
    assert_eq!(parent.body["on_finish"], json!([]));
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn trigger_params_are_defaults_under_a_runs_own(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("nightly")).await["id"].as_i64().unwrap();
    let uri = format!("/api/v1/jobs/{job}/triggers");
    let bad = app
        .post(
            &uri,
            &admin,
            json!({"kind": "interval", "interval_secs": 3600, "params": [1]}),
        )
        .await;
    assert_field(&bad, "params");
    assert_eq!(app.count("triggers").await, 0);
    let created = app
        .post(
            &uri,
            &admin,
            json!({"kind": "interval", "interval_secs": 3600, "params": {"region": "eu", "day": "auto"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["params"], json!({"region": "eu", "day": "auto"}));
    let id = created.body["id"].as_i64().unwrap();
    let patched = app
        .patch(
            &format!("/api/v1/triggers/{id}"),
            &admin,
            json!({"version": created.body["version"], "params": {"region": "us", "day": "auto"}}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    let got = app.get(&format!("/api/v1/triggers/{id}"), &admin).await;
    assert_eq!(got.body["params"], json!({"region": "us", "day": "auto"}));
    let listed = app.get(&uri, &admin).await;
    assert_eq!(listed.body["items"][0]["params"]["region"], "us");
    let untouched = app
        .patch(
            &format!("/api/v1/triggers/{id}"),
            &admin,
            json!({"version": patched.body["version"], "paused": true}),
        )
        .await;
    assert_eq!(untouched.body["params"]["region"], "us", "kept when not given");

    // A fired run of the trigger sees the defaults under its own parameters.
    let run_id: i64 = sqlx::query_scalar(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at) VALUES ($1, $2, now()) RETURNING id",
    )
    .bind(job)
    .bind(id)
    .fetch_one(app.pool())
    .await
    .unwrap();
    store::run_inputs::set_params(app.pool(), run_id, &json!({"day": "2030-01-01"}))
        .await
        .unwrap();
    let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
    assert_eq!(run.body["params"], json!({"region": "us", "day": "2030-01-01"}));
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_job_in_a_workflow_is_not_deleted_and_the_workflows_are_named(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("step-job")).await["id"].as_i64().unwrap();
    for name in ["daily", "weekly"] {
        let created = app
            .post(
                "/api/v1/workflows",
                &admin,
                json!({"name": name, "steps": [{"name": "only", "job_id": job}]}),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    }
    let refused = app
        .call(Method::DELETE, &format!("/api/v1/jobs/{job}"), Some(&admin), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("daily, weekly"), "{message}");
    assert_eq!(app.count("jobs").await, 1);

    let b = app.browser("admin").await;
    let flashed = app
        .form(
            &format!("/jobs/{job}/delete"),
            &b.cookie,
            &[("csrf", b.csrf.as_str()), ("confirm", "step-job")],
        )
        .await;
    assert_eq!(flashed.status, StatusCode::SEE_OTHER, "{}", flashed.text);
    assert_eq!(app.count("jobs").await, 1);
    let flash = set_cookie(&flashed, "probactr_flash").expect("a flash");
    let shown = app
        .page(&format!("/jobs/{job}"), &format!("{}; {flash}", b.cookie))
        .await;
    assert!(shown.text.contains("daily, weekly"), "the flash names them");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn workflow_triggers_are_created_listed_and_deleted(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("step")).await["id"].as_i64().unwrap();
    let workflow = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "nightly", "steps": [{"name": "only", "job_id": job}]}),
        )
        .await;
    let id = workflow.body["id"].as_i64().unwrap();
    let uri = format!("/api/v1/workflows/{id}/triggers");
    let bad = app
        .post(
            &uri,
            &admin,
            json!({"kind": "cron", "cron": "0 3 * * *", "params": "x"}),
        )
        .await;
    assert_field(&bad, "params");
    let bad = app
        .post(&uri, &admin, json!({"kind": "cron", "cron": "61 * * * *"}))
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    let fields = field_errors(&bad);
    assert!(fields.keys().any(|field| field.starts_with("cron")), "{fields:?}");
    assert_eq!(app.count("workflow_triggers").await, 0);
    let created = app
        .post(
            &uri,
            &admin,
            json!({"kind": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris", "params": {"region": "eu"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["params"], json!({"region": "eu"}));
    assert!(created.body["next_fire_at"].is_string(), "{}", created.text);
    let trigger = created.body["id"].as_i64().unwrap();
    let listed = app.get(&uri, &admin).await;
    assert_eq!(listed.body["total"], 1);
    assert_eq!(listed.body["items"][0]["id"], trigger);
    assert_eq!(
        app.post(
            "/api/v1/workflows/424242/triggers",
            &admin,
            json!({"kind": "interval", "interval_secs": 60})
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    let deleted = app
        .call(Method::DELETE, &format!("{uri}/{trigger}"), Some(&admin), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    assert_eq!(app.get(&uri, &admin).await.body["total"], 0);
    let again = app
        .call(Method::DELETE, &format!("{uri}/{trigger}"), Some(&admin), None)
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_workflow_page_draws_the_dag_with_step_states_and_runs_with_params(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let a = app.job(&admin, noop("a")).await["id"].as_i64().unwrap();
    let b = app.job(&admin, noop("b")).await["id"].as_i64().unwrap();
    let created = app
        .post(
            "/api/v1/workflows",
            &admin,
            json!({"name": "pair", "steps": [
                {"name": "first", "job_id": a},
                {"name": "second", "job_id": b, "depends_on": ["first"]}]}),
        )
        .await;
    let id = created.body["id"].as_i64().unwrap();
    let browser = app.browser("admin").await;
    let started = app
        .form(
            &format!("/workflows/{id}/run"),
            &browser.cookie,
            &[("csrf", browser.csrf.as_str()), ("params", r#"{"day": "mon"}"#)],
        )
        .await;
    assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.text);
    let listed = app.page("/workflows", &browser.cookie).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert!(
        listed.text.contains(&format!("href=\"/workflows/{id}\"")),
        "{}",
        listed.text
    );
    assert!(listed.text.contains("running"), "its last run: {}", listed.text);

    let page = app.page(&format!("/workflows/{id}"), &browser.cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let first_run: i64 = sqlx::query_scalar("SELECT run_id FROM workflow_run_steps WHERE name = 'first'")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(page.text.contains("<svg class=\"dag\""), "{}", page.text);
    assert!(
        page.text.contains(&format!(
            "<a href=\"/runs/{first_run}\"><g class=\"step state-running\" data-step=\"first\""
        )),
        "the running step links to its run: {}",
        page.text
    );
    assert!(page.text.contains("data-step=\"second\" data-state=\"pending\""));
    assert!(page.text.contains("marker-end"), "an arrow first → second");
    let run = app.page(&format!("/runs/{first_run}"), &browser.cookie).await;
    assert!(
        run.text.contains("&quot;day&quot;") || run.text.contains("\"day\""),
        "the run page shows its params: {}",
        run.text
    );
    let refused = app
        .form(
            &format!("/workflows/{id}/run"),
            &browser.cookie,
            &[("csrf", browser.csrf.as_str()), ("params", "[1]")],
        )
        .await;
    assert_ne!(refused.status, StatusCode::SEE_OTHER, "bad params start nothing");
    assert_eq!(app.count("workflow_runs").await, 1);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn workflow_versions_are_kept_and_restored(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let a = app.job(&admin, noop("a")).await["id"].as_i64().unwrap();
    let b = app.job(&admin, noop("b")).await["id"].as_i64().unwrap();
    let first = json!({"name": "versioned", "description": "one step",
        "steps": [{"name": "only", "job_id": a}]});
    let created = app.post("/api/v1/workflows", &admin, first).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_i64().unwrap();
    let uri = format!("/api/v1/workflows/{id}");
    for (description, steps) in [
        (
            "two steps",
            json!([{"name": "only", "job_id": a}, {"name": "then", "job_id": b, "depends_on": ["only"]}]),
        ),
        (
            "renamed",
            json!([{"name": "start", "job_id": b, "params": {"day": "mon"}}]),
        ),
    ] {
        let body = json!({"name": "versioned", "description": description, "steps": steps});
        let edited = app.call(Method::PUT, &uri, Some(&admin), Some(body)).await;
        assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    }

    let versions = app.get(&format!("{uri}/versions"), &admin).await;
    assert_eq!(versions.status, StatusCode::OK, "{}", versions.text);
    assert_eq!(versions.body["total"], 3, "{}", versions.text);
    let actions: Vec<&str> = versions.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|version| version["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["update", "update", "create"]);
    let v1 = app.get(&format!("{uri}/versions/1"), &admin).await;
    assert_eq!(v1.status, StatusCode::OK, "{}", v1.text);
    assert_eq!(v1.body["definition"]["steps"][0]["name"], "only");
    assert_eq!(
        app.get(&format!("{uri}/versions/99"), &admin).await.status,
        StatusCode::NOT_FOUND
    );

    let restored = app
        .post(&format!("{uri}/versions/1/restore"), &admin, json!({}))
        .await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.text);
    assert_eq!(restored.body["description"], "one step");
    let newest = app.get(&format!("{uri}/versions"), &admin).await;
    let newest = &newest.body["items"][0];
    assert_eq!(
        (newest["action"].as_str(), newest["restored_from"].as_i64()),
        (Some("restore"), Some(1))
    );
    assert_eq!(
        newest["definition"], v1.body["definition"],
        "the restored definition is v1's"
    );
    let now = app.get(&uri, &admin).await;
    assert_eq!(now.body["steps"].as_array().map(Vec::len), Some(1));
    assert_eq!(now.body["steps"][0]["name"], "only");
    assert_eq!(now.body["steps"][0]["job_id"], a);
}
