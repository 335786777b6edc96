//! End to end.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_trigger_created_through_the_api_is_fired_by_an_executor(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("e2e")).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 1}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);

    let shutdown = tokio_util::sync::CancellationToken::new();
    let executor = tokio::spawn(probactr_executor::run(
        executor_config(app.pool()),
        shutdown.clone(),
    ));

    let uri = format!("/api/v1/runs?job_id={}&state=succeeded", job["id"]);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut succeeded = 0;
    while tokio::time::Instant::now() < deadline {
        succeeded = app.get(&uri, &admin).await.body["total"].as_i64().unwrap_or(0);
        if succeeded >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    shutdown.cancel();
    executor.await.unwrap().unwrap();
    assert!(
        succeeded >= 2,
        "the executor ran the trigger's instants ({succeeded} succeeded)"
    );
    let executors = app.get("/api/v1/executors", &admin).await;
    assert_eq!(executors.body["total"], 1);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn trigger_and_job_changes_wake_the_executors(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("wake")).await;
    let mut listener = sqlx::postgres::PgListener::connect_with(app.pool())
        .await
        .unwrap();
    listener.listen(store::TRIGGERS_CHANNEL).await.unwrap();
    let wait = std::time::Duration::from_secs(5);

    app.post(
        &format!("/api/v1/jobs/{}/triggers", job["id"]),
        &admin,
        json!({"kind": "interval", "interval_secs": 60}),
    )
    .await;
    tokio::time::timeout(wait, listener.recv())
        .await
        .expect("woken by a new trigger")
        .unwrap();
    app.post(&format!("/api/v1/jobs/{}/pause", job["id"]), &admin, json!({}))
        .await;
    tokio::time::timeout(wait, listener.recv())
        .await
        .expect("woken by a paused job")
        .unwrap();
    app.post(&format!("/api/v1/jobs/{}/resume", job["id"]), &admin, json!({}))
        .await;
    tokio::time::timeout(wait, listener.recv())
        .await
        .expect("woken by a resumed job")
        .unwrap();
}
