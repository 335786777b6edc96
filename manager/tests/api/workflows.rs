//! Run parameters and workflows through the API (no executor: steps are read as queued).

use super::*;

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
