//! Triggers and the preview.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn trigger_lifecycle(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("triggered")).await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "cron", "cron": "0 0 3 * * *", "timezone": "Europe/Berlin", "misfire": "skip"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_i64().unwrap();
    let first_next = created.body["next_fire_at"].as_str().unwrap().to_owned();
    assert_eq!(created.body["timezone"], "Europe/Berlin");

    let list = app
        .get(&format!("/api/v1/jobs/{}/triggers", job["id"]), &admin)
        .await;
    assert_eq!(list.body["total"], 1);
    assert_eq!(
        app.get(&format!("/api/v1/triggers/{id}"), &admin).await.body["cron"],
        "0 0 3 * * *"
    );

    let edited = app
        .patch(
            &format!("/api/v1/triggers/{id}"),
            &admin,
            json!({"version": 1, "kind": "interval", "interval_secs": 3600}),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    assert_eq!(edited.body["kind"], "interval");
    assert_eq!(
        edited.body["cron"],
        Value::Null,
        "the old kind's field is dropped"
    );
    assert_ne!(
        edited.body["next_fire_at"].as_str().unwrap(),
        first_next,
        "next_fire_at recomputed"
    );

    let paused = app
        .post(&format!("/api/v1/triggers/{id}/pause"), &admin, json!({}))
        .await;
    assert_eq!(paused.body["paused"], true);
    let resumed = app
        .post(&format!("/api/v1/triggers/{id}/resume"), &admin, json!({}))
        .await;
    assert_eq!(resumed.body["paused"], false);
    assert_eq!(
        resumed.body["next_fire_at"], edited.body["next_fire_at"],
        "resuming keeps next_fire_at"
    );

    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/v1/triggers/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get(&format!("/api/v1/triggers/{id}"), &admin).await.status,
        StatusCode::NOT_FOUND
    );
    let no_job = app
        .post(
            "/api/v1/jobs/999999/triggers",
            &admin,
            json!({"kind": "interval", "interval_secs": 5}),
        )
        .await;
    assert_eq!(no_job.status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn trigger_validation_names_each_field(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("t")).await;
    let uri = format!("/api/v1/jobs/{}/triggers", job["id"]);
    let cases = [
        (json!({"kind": "hourly"}), "kind"),
        (json!({"cron": "* * * * *"}), "kind"),
        (json!({"kind": "cron", "cron": "0 61 * * * *"}), "cron.minute"),
        (json!({"kind": "cron", "cron": "0 0 25 * * *"}), "cron.hour"),
        (json!({"kind": "cron", "cron": "* * *"}), "cron"),
        (
            json!({"kind": "cron", "cron": "0 * * * * *", "timezone": "Mars/Olympus"}),
            "timezone",
        ),
        (json!({"kind": "interval", "interval_secs": -1}), "interval_secs"),
        (json!({"kind": "interval"}), "interval_secs"),
        (json!({"kind": "once", "at": "tomorrow"}), "at"),
        (
            json!({"kind": "interval", "interval_secs": 5, "misfire": "maybe"}),
            "misfire",
        ),
        (
            json!({"kind": "interval", "interval_secs": 5, "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}),
            "end_at",
        ),
    ];
    for (body, field) in cases {
        assert_field(&app.post(&uri, &admin, body).await, field);
    }
    assert_eq!(app.count("triggers").await, 0);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn schedule_preview_lists_instants(pool: PgPool) {
    let app = TestApp::new(pool);
    let viewer = app.user("victor", Role::Viewer).await;
    let reply = app
        .post(
            "/api/v1/schedule/preview",
            &viewer,
            json!({"kind": "cron", "cron": "0 30 2 * * *", "timezone": "Europe/Berlin", "after": "2026-03-28T12:00:00Z", "count": 3}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    // 02:30 does not exist on 29 March in Berlin: it runs at 03:30 CEST (01:30 UTC).
    assert_eq!(
        reply.body["instants"],
        json!([
            "2026-03-29T01:30:00Z",
            "2026-03-30T00:30:00Z",
            "2026-03-31T00:30:00Z"
        ])
    );
    let interval = app
        .post(
            "/api/v1/schedule/preview",
            &viewer,
            json!({"kind": "interval", "interval_secs": 60, "after": "2026-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(interval.body["instants"].as_array().unwrap().len(), 5);
    assert_field(
        &app.post(
            "/api/v1/schedule/preview",
            &viewer,
            json!({"kind": "cron", "cron": "x * * * * *"}),
        )
        .await,
        "cron.second",
    );
    assert_field(
        &app.post(
            "/api/v1/schedule/preview",
            &viewer,
            json!({"kind": "interval", "interval_secs": 5, "count": 1000}),
        )
        .await,
        "count",
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_hashed_trigger_fires_at_the_instants_its_preview_showed(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("hashed")).await;
    let cron = "H H(0-7) * * *";
    let unseeded = json!({"kind": "cron", "cron": cron});
    assert_field(
        &app.post("/api/v1/schedule/preview", &admin, unseeded).await,
        "job_id",
    );
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "cron", "cron": cron, "timezone": "Europe/Berlin"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["cron"], cron, "the text is stored as written");
    let preview = app
        .post(
            "/api/v1/schedule/preview",
            &admin,
            json!({"kind": "cron", "cron": cron, "timezone": "Europe/Berlin", "job_id": job["id"],
                   "after": created.body["created_at"], "count": 3}),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.text);
    let instants = preview.body["instants"].as_array().unwrap().clone();
    assert_eq!(created.body["next_fire_at"], instants[0], "{}", preview.text);
    let resolved = preview.body["resolved_cron"]
        .as_str()
        .expect("H resolved")
        .to_owned();
    let hour: u32 = resolved.split(' ').nth(2).unwrap().parse().expect("an hour");
    assert!(hour <= 7, "{resolved}");

    let (from, to) = (instants[0].as_str().unwrap(), instants[2].as_str().unwrap());
    let forecast = app
        .get(
            &format!("/api/v1/forecast?from={from}&to={to}&job_id={}", job["id"]).replace('+', "%2B"),
            &admin,
        )
        .await;
    assert_eq!(forecast.status, StatusCode::OK, "{}", forecast.text);
    let items = forecast.body["items"].as_array().unwrap();
    let forecast_instants: Vec<&Value> = items.iter().map(|item| &item["instant"]).collect();
    assert_eq!(forecast_instants, instants[..2].iter().collect::<Vec<_>>());
    assert!(items
        .iter()
        .all(|item| item["resolved_cron"] == resolved.as_str()));
}
