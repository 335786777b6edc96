//! Calendars and maintenance windows through the API: a calendar is checked (each bad
//! field named), imported from an iCalendar file, followed by a trigger (which shows
//! it, and whose preview and the forecast mark the days it excludes), and kept while
//! followed (409 naming the trigger); maintenance windows are checked, listed, deleted;
//! the cluster pause is an open-ended window its resume ends.

use super::*;

const HOLIDAYS_ICS: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nSUMMARY:Christmas\r\n\
                            DTSTART;VALUE=DATE:20301225\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_calendar_is_checked_followed_previewed_and_kept_while_followed(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    for (body, field) in [
        (json!({"name": "Bad Name"}), "name"),
        (json!({"name": "x", "timezone": "Mars/Base"}), "timezone"),
        (json!({"name": "x", "dates": ["25 December"]}), "dates"),
        (
            json!({"name": "x", "ranges": [{"from": "2030-12-26", "to": "2030-12-24"}]}),
            "ranges",
        ),
        (json!({"name": "x", "weekdays": ["funday"]}), "weekdays"),
        (json!({"name": "x", "ical": "not a calendar"}), "ical"),
    ] {
        assert_field(&app.post("/api/v1/calendars", &admin, body).await, field);
    }
    let created = app
        .post(
            "/api/v1/calendars",
            &admin,
            json!({"name": "holidays", "timezone": "Europe/Berlin", "ical": HOLIDAYS_ICS,
                   "ranges": [{"from": "2030-12-31", "to": "2031-01-01"}]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["dates"], json!(["2030-12-25"]), "imported");
    let listed = app.get("/api/v1/calendars", &admin).await;
    assert_eq!(listed.body["total"], 1, "{}", listed.text);

    let job = app.job(&admin, noop("nightly")).await;
    let triggers = format!("/api/v1/jobs/{}/triggers", job["id"]);
    let unknown = app
        .post(
            &triggers,
            &admin,
            json!({"kind": "cron", "cron": "0 0 9 * * *", "calendar": "nope"}),
        )
        .await;
    assert_field(&unknown, "calendar");
    let bad_mode = app
        .post(
            &triggers,
            &admin,
            json!({"kind": "cron", "cron": "0 0 9 * * *", "calendar_mode": "sometimes"}),
        )
        .await;
    assert_field(&bad_mode, "calendar_mode");
    for (field, value) in [("jitter_secs", 0), ("jitter_secs", 86_401), ("max_fires", 0)] {
        let bad = app
            .post(
                &triggers,
                &admin,
                json!({"kind": "interval", "interval_secs": 60, field: value}),
            )
            .await;
        assert_field(&bad, field);
    }
    assert_eq!(app.count("triggers").await, 0, "nothing was created");
    let trigger = app
        .post(
            &triggers,
            &admin,
            json!({"kind": "cron", "cron": "0 0 9 * * *", "timezone": "Europe/Berlin",
                   "calendar": "holidays", "jitter_secs": 30, "max_fires": 100}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    assert_eq!(
        (
            trigger.body["calendar"].clone(),
            trigger.body["calendar_mode"].clone(),
            trigger.body["jitter_secs"].clone(),
            trigger.body["max_fires"].clone()
        ),
        (json!("holidays"), json!("exclude"), json!(30), json!(100))
    );

    // The preview marks Christmas Day and New Year's Eve and Day, nothing else.
    let preview = app
        .post(
            "/api/v1/schedule/preview",
            &admin,
            json!({"kind": "cron", "cron": "0 0 9 * * *", "timezone": "Europe/Berlin", "calendar": "holidays",
                   "job_id": job["id"], "after": "2030-12-24T00:00:00Z", "count": 9}),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.text);
    let skipped: Vec<&str> = preview.body["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["instant"].as_str().unwrap())
        .collect();
    assert_eq!(
        skipped,
        [
            "2030-12-25T08:00:00Z",
            "2030-12-31T08:00:00Z",
            "2031-01-01T08:00:00Z"
        ],
        "{}",
        preview.text
    );
    assert_eq!(
        preview.body["skipped"][0]["reason"],
        "calendar holidays excludes it"
    );
    // So does the forecast, with each instant's jitter.
    let forecast = app
        .get(
            &format!(
                "/api/v1/forecast?from=2030-12-24T00:00:00Z&to=2030-12-27T00:00:00Z&job_id={}",
                job["id"]
            ),
            &admin,
        )
        .await;
    assert_eq!(forecast.status, StatusCode::OK, "{}", forecast.text);
    let items = forecast.body["items"].as_array().unwrap();
    let marks: Vec<bool> = items.iter().map(|i| i["skipped"].is_string()).collect();
    assert_eq!(marks, [false, true, false], "{}", forecast.text);
    assert!(items
        .iter()
        .all(|i| (0..=30).contains(&i["jitter_secs"].as_i64().unwrap())));

    // Followed: kept, with the trigger named. Unfollowed: deleted.
    let refused = app
        .call(Method::DELETE, "/api/v1/calendars/holidays", Some(&admin), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(
        refused.text.contains(&trigger.body["id"].to_string()),
        "{}",
        refused.text
    );
    let edited = app
        .patch(
            &format!("/api/v1/triggers/{}", trigger.body["id"]),
            &admin,
            json!({"version": trigger.body["version"], "calendar": null}),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    assert_eq!(edited.body["calendar"], Value::Null);
    assert_eq!(edited.body["jitter_secs"], 30, "left as it was");
    let deleted = app
        .call(Method::DELETE, "/api/v1/calendars/holidays", Some(&admin), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn maintenance_windows_are_checked_and_the_cluster_pause_is_one(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    for (body, field) in [
        (json!({"scope": {"all": false}}), "scope"),
        (json!({"scope": {"jobs": []}}), "scope"),
        (json!({}), "scope"),
        (json!({"scope": {"all": true}, "policy": "later"}), "policy"),
        (json!({"scope": {"all": true}, "policy": "defer"}), "until"),
        (
            json!({"scope": {"all": true}, "from": "2030-01-02T00:00:00Z", "until": "2030-01-01T00:00:00Z"}),
            "until",
        ),
    ] {
        assert_field(&app.post("/api/v1/maintenance", &admin, body).await, field);
    }
    let window = app
        .post(
            "/api/v1/maintenance",
            &admin,
            json!({"from": "2030-01-01T00:00:00Z", "until": "2030-01-01T02:00:00Z",
                   "scope": {"selector": {"namespace": "default"}}, "policy": "defer", "reason": "db upgrade"}),
        )
        .await;
    assert_eq!(window.status, StatusCode::CREATED, "{}", window.text);
    let paused = app.post("/api/v1/cluster/pause", &admin, json!({})).await;
    assert_eq!(paused.status, StatusCode::CREATED, "{}", paused.text);
    assert_eq!(paused.body["until"], Value::Null);
    let listed = app.get("/api/v1/maintenance", &admin).await;
    assert_eq!(listed.body["total"], 2, "{}", listed.text);
    let resumed = app.post("/api/v1/cluster/resume", &admin, json!({})).await;
    assert_eq!(resumed.body["ended"], 1, "{}", resumed.text);
    let listed = app.get("/api/v1/maintenance", &admin).await;
    assert_eq!(
        listed.body["total"], 1,
        "only the future window is left: {}",
        listed.text
    );
    let gone = app
        .call(
            Method::DELETE,
            &format!("/api/v1/maintenance/{}", window.body["id"]),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.text);
    assert_eq!(app.get("/api/v1/maintenance", &admin).await.body["total"], 0);
}
