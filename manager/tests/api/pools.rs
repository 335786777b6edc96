//! Pools through the API: created and resized by a namespace's admins, taken by jobs of
//! that namespace only (checked, named in the error), kept while a job takes them, the
//! reason a run waits for one, and the admin's pools page.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn pools_are_checked_taken_by_jobs_and_kept_while_taken(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let created = app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "licence-server", "slots": 3}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(
        (created.body["slots"].clone(), created.body["used"].clone()),
        (json!(3), json!(0))
    );
    let again = app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "licence-server", "slots": 1}),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    let bad = app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "licence-server", "slots": 0}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.text.contains("slots"), "{}", bad.text);

    // A job takes an existing pool of its namespace, within its slots.
    let unknown = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "export", "kind": "noop", "pool": "nope"}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(unknown.text.contains("no pool nope"), "{}", unknown.text);
    let heavy = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "export", "kind": "noop", "pool": "licence-server", "pool_slots": 4}),
        )
        .await;
    assert_eq!(heavy.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(heavy.text.contains("pool_slots"), "{}", heavy.text);
    let job = app
        .job(
            &admin,
            json!({"name": "export", "kind": "noop", "pool": "licence-server", "pool_slots": 2}),
        )
        .await;
    assert_eq!(
        (job["pool"].clone(), job["pool_slots"].clone()),
        (json!("licence-server"), json!(2))
    );

    // Kept while a job takes it; the answer names the job.
    let refused = app
        .call(Method::DELETE, "/api/v1/pools/licence-server", Some(&admin), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(refused.text.contains("export"), "{}", refused.text);

    // Not shrunk below a job's weight (its runs could never be claimed): the answer names
    // the job and its pool_slots, and the pool keeps its slots.
    let shrunk = app
        .patch("/api/v1/pools/licence-server", &admin, json!({"slots": 1}))
        .await;
    assert_eq!(shrunk.status, StatusCode::CONFLICT, "{}", shrunk.text);
    assert!(shrunk.text.contains("export (pool_slots 2)"), "{}", shrunk.text);
    let kept = app.get("/api/v1/pools/licence-server", &admin).await;
    assert_eq!(kept.body["slots"], json!(3));

    // A queued run that does not fit waits, saying why.
    let run = store::runs::queue_now(app.pool(), job["id"].as_i64().unwrap())
        .await
        .unwrap();
    sqlx::query("UPDATE pools SET used = 2")
        .execute(app.pool())
        .await
        .unwrap();
    assert_eq!(
        store::pools::queued_reason(app.pool(), run.id)
            .await
            .unwrap()
            .as_deref(),
        Some("pool licence-server 2/3")
    );
    let resized = app
        .patch("/api/v1/pools/licence-server", &admin, json!({"slots": 4}))
        .await;
    assert_eq!(resized.status, StatusCode::OK, "{}", resized.text);
    assert_eq!(
        store::pools::queued_reason(app.pool(), run.id).await.unwrap(),
        None
    );
    let shown = app.get("/api/v1/pools/licence-server", &admin).await;
    assert_eq!(
        (shown.body["slots"].clone(), shown.body["waiting"].clone()),
        (json!(4), json!(1))
    );

    let browser = app.browser("admin").await;
    let page = app.page("/pools", &browser.cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text.contains("licence-server") && page.text.contains("2/4"),
        "{}",
        page.text
    );

    // Without the job, it goes.
    let job_id = job["id"].as_i64().unwrap();
    let patched = app
        .patch(
            &format!("/api/v1/jobs/{job_id}"),
            &admin,
            json!({"version": job["version"], "pool": null}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    let deleted = app
        .call(Method::DELETE, "/api/v1/pools/licence-server", Some(&admin), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
}

/// Rates of pools and jobs: checked (a 422 naming `rate.limit` or `rate.per_secs`, and
/// nothing changed), shown by the API and the admin's pages, removed with null, and the
/// reason a run waits for one.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn rates_are_checked_shown_and_say_why_a_run_waits(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let bad = app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "partner-api", "slots": 3, "rate": {"limit": 0, "per_secs": 10}}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.text.contains("rate.limit"), "{}", bad.text);
    assert_eq!(
        app.get("/api/v1/pools/partner-api", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    let created = app
        .post(
            "/api/v1/pools",
            &admin,
            json!({"name": "partner-api", "slots": 3, "rate": {"limit": 20, "per_secs": 10}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["rate"], json!({"limit": 20, "per_secs": 10}));
    let browser = app.browser("admin").await;
    let page = app.page("/pools", &browser.cookie).await;
    assert!(page.text.contains("20 per 10 s"), "{}", page.text);

    let job = app
        .job(
            &admin,
            json!({"name": "nightly-api", "kind": "noop", "rate": {"limit": 20, "per_secs": 10}}),
        )
        .await;
    assert_eq!(job["rate"], json!({"limit": 20, "per_secs": 10}));
    let id = job["id"].as_i64().unwrap();
    let refused = app
        .patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": job["version"], "rate": {"limit": 5, "per_secs": "soon"}}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.text.contains("rate.per_secs"), "{}", refused.text);
    let page = app.page(&format!("/jobs/{id}"), &browser.cookie).await;
    assert!(
        page.text.contains("at most 20 start(s) in any 10 s"),
        "{}",
        page.text
    );

    // A full window: its queued runs wait, saying why.
    let run = store::runs::queue_now(app.pool(), id).await.unwrap();
    sqlx::query("UPDATE job_rate_windows SET starts = array_fill(now(), ARRAY[20])")
        .execute(app.pool())
        .await
        .unwrap();
    assert_eq!(
        store::rates::queued_reason(app.pool(), run.id)
            .await
            .unwrap()
            .as_deref(),
        Some("rate nightly-api 20/10s")
    );

    let removed = app
        .patch("/api/v1/pools/partner-api", &admin, json!({"rate": null}))
        .await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.text);
    assert_eq!(
        (removed.body["rate"].clone(), removed.body["slots"].clone()),
        (Value::Null, json!(3))
    );
}
