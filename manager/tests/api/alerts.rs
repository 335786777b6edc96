//! `/api/v1/channels`, `/api/v1/alert-rules`, `/api/v1/notifications`: every bad field
//! named at once and nothing stored, secrets write-only, roles, channels in use kept, and
//! a channel test delivered by a real monitor to a real receiver.

use probactr_common::secrets::{Keyring, SecretKey};
use probactr_testkit::receiver::Receiver;
use probactr_testkit::{fast_env, unique_prefix, TEST_SECRET_KEY};

use super::*;

fn with_key(app: &mut TestApp) {
    let key = SecretKey::parse(TEST_SECRET_KEY).unwrap();
    app.state = app.state.clone().with_secret_keys(Some(Keyring::new(key, None)));
    app.app = probactr_manager::app(app.state.clone());
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn bad_channels_and_rules_name_every_field_and_change_nothing(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let bad = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "", "kind": "pager", "config": {}}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert_field(&bad, "name");
    assert_field(&bad, "kind");
    let bad = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "x", "kind": "email", "config": {"to": ["not-an-address"], "cc": 1}}),
        )
        .await;
    assert_field(&bad, "config.to");
    assert_field(&bad, "config.cc");
    let bad = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "x", "kind": "webhook", "config": {"url": "ftp://x", "secret": ""}}),
        )
        .await;
    assert_field(&bad, "config.url");
    assert_field(&bad, "config.secret");
    assert_eq!(app.count("alert_channels").await, 0);

    let bad = app
        .post(
            "/api/v1/alert-rules",
            &admin,
            json!({"name": "r", "events": ["run_failed", "sky_falling"], "channel_ids": [], "throttle_secs": -1}),
        )
        .await;
    assert_field(&bad, "events");
    assert_field(&bad, "channel_ids");
    assert_field(&bad, "throttle_secs");
    let bad = app
        .post(
            "/api/v1/alert-rules",
            &admin,
            json!({"name": "r", "events": ["run_too_long"], "channel_ids": [99], "job_id": 98}),
        )
        .await;
    assert_field(&bad, "duration_secs");
    let bad = app
        .post(
            "/api/v1/alert-rules",
            &admin,
            json!({"name": "r", "events": ["run_failed"], "channel_ids": [99], "job_id": 98}),
        )
        .await;
    assert_field(&bad, "channel_ids");
    assert_field(&bad, "job_id");
    assert_eq!(app.count("alert_rules").await, 0);
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn channel_secrets_are_write_only_and_channels_in_use_stay(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let operator = app.user("otto", Role::Operator).await;
    let secret = "whsec-7f3a9-never-shown";
    let made = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "ops hook", "kind": "webhook", "config": {"url": "https://hooks.example.com/p", "secret": secret}}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    assert_eq!(made.body["has_secret"], true);
    let id = made.body["id"].as_i64().unwrap();
    let renamed = app
        .call(
            Method::PUT,
            &format!("/api/v1/channels/{id}"),
            Some(&admin),
            Some(json!({"name": "ops", "kind": "webhook", "config": {"url": "https://hooks.example.com/q"}})),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.text);
    assert_eq!(renamed.body["has_secret"], true, "absent keeps the secret");
    let listed = app.get("/api/v1/channels", &admin).await;
    let audit = app.get("/api/v1/audit", &admin).await;
    for text in [&made.text, &renamed.text, &listed.text, &audit.text] {
        assert!(!text.contains(secret), "the secret came out: {text}");
    }
    let stored: Vec<u8> = sqlx::query_scalar("SELECT secret_sealed FROM alert_channels")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&stored).contains(secret),
        "stored sealed"
    );
    assert_eq!(
        app.get("/api/v1/channels", &operator).await.status,
        StatusCode::FORBIDDEN
    );

    let rule = app
        .post(
            "/api/v1/alert-rules",
            &operator,
            json!({"name": "failures", "events": ["run_failed", "recovered"], "channel_ids": [id]}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{}", rule.text);
    assert_eq!(rule.body["throttle_secs"], 300);
    assert_eq!(rule.body["job_id"], Value::Null);
    let in_use = app
        .call(
            Method::DELETE,
            &format!("/api/v1/channels/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(in_use.status, StatusCode::CONFLICT, "{}", in_use.text);
    assert!(
        in_use.text.contains("failures"),
        "names the rule: {}",
        in_use.text
    );
    let viewer = app.user("vera", Role::Viewer).await;
    assert_eq!(app.get("/api/v1/alert-rules", &viewer).await.body["total"], 1);
    let refused = app
        .post(
            "/api/v1/alert-rules",
            &viewer,
            json!({"name": "v", "events": ["run_failed"], "channel_ids": [id]}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let rule_id = rule.body["id"].as_i64().unwrap();
    let gone = app
        .call(
            Method::DELETE,
            &format!("/api/v1/alert-rules/{rule_id}"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let deleted = app
        .call(
            Method::DELETE,
            &format!("/api/v1/channels/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
}

/// `POST /api/v1/channels/{id}/test`: a real monitor delivers the test message to a real
/// receiver and the answer reports it; a channel nobody can reach reports its error.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_channel_test_is_delivered_by_a_monitor(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let receiver = Receiver::start().await;
    let made = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "hook", "kind": "webhook", "config": {"url": receiver.url, "secret": "abc"}}),
        )
        .await;
    let id = made.body["id"].as_i64().unwrap();
    let env = fast_env(&database_url_of(app.pool()), &unique_prefix("channel-test"));
    let _monitor = probactr_testkit::monitor("monitor", &env);
    let tested = app
        .post(&format!("/api/v1/channels/{id}/test"), &admin, json!({}))
        .await;
    assert_eq!(tested.status, StatusCode::OK, "{}", tested.text);
    assert_eq!(tested.body["delivered"], true, "{}", tested.text);
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].json()["event"], "test");
    assert!(received[0]
        .header("x-probactr-signature")
        .unwrap()
        .starts_with("sha256="));

    receiver.answer_with(503);
    let failed = app
        .post(&format!("/api/v1/channels/{id}/test"), &admin, json!({}))
        .await;
    assert_eq!(failed.body["delivered"], false, "{}", failed.text);
    assert!(
        failed.body["notification"]["last_error"]
            .as_str()
            .unwrap()
            .contains("503"),
        "{}",
        failed.text
    );
    let chat = Receiver::start().await;
    let slack = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "chat", "kind": "slack", "config": {"url": chat.url}}),
        )
        .await;
    let slack_id = slack.body["id"].as_i64().unwrap();
    let posted = app
        .post(&format!("/api/v1/channels/{slack_id}/test"), &admin, json!({}))
        .await;
    assert_eq!(posted.body["delivered"], true, "{}", posted.text);
    let text = chat.received()[0].json()["text"].as_str().unwrap().to_owned();
    assert!(
        text.contains("Test message from probactr to channel chat"),
        "{text}"
    );
    let log = app.get("/api/v1/notifications", &admin).await;
    assert_eq!(log.body["total"], 3, "{}", log.text);
}

/// The admin's alert pages: a channel and a rule made through forms, every bad field of a
/// form shown at once, a channel secret never sent back, and the delivery log.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn alert_pages_create_channels_and_rules_and_show_the_log(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let token = app.admin().await;
    let job = app.job(&token, noop("nightly")).await;
    let b = app.browser("admin").await;
    let secret = "form-secret-4471";
    let bad = app
        .form(
            "/alerts/channels",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("name", ""),
                ("kind", "webhook"),
                ("url", "ftp://x"),
                ("secret", secret),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert!(bad.text.contains("id=\"error-name\""), "{}", bad.text);
    assert!(bad.text.contains("id=\"error-url\""), "{}", bad.text);
    assert!(!bad.text.contains(secret), "the secret came back");
    let made = app
        .form(
            "/alerts/channels",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("name", "ops"),
                ("kind", "email"),
                ("to", "ops@example.com, oncall@example.com"),
            ],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.text);
    let channel: i64 = sqlx::query_scalar("SELECT id FROM alert_channels")
        .fetch_one(app.pool())
        .await
        .unwrap();
    let bad_rule = app
        .form(
            "/alerts/rules",
            &b.cookie,
            &[("csrf", &b.csrf), ("name", "r"), ("throttle_secs", "soon")],
        )
        .await;
    assert_eq!(bad_rule.status, StatusCode::UNPROCESSABLE_ENTITY);
    for field in ["events", "channel_ids", "throttle_secs"] {
        assert!(
            bad_rule.text.contains(&format!("id=\"error-{field}\"")),
            "{field}: {}",
            bad_rule.text
        );
    }
    let channel_field = format!("channel.{channel}");
    let job_id = job["id"].to_string();
    let rule = app
        .form(
            "/alerts/rules",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("name", "nightly failures"),
                ("event.run_failed", "on"),
                ("event.recovered", "on"),
                ("job_id", &job_id),
                (&channel_field, "on"),
                ("throttle_secs", "60"),
            ],
        )
        .await;
    assert_eq!(rule.status, StatusCode::SEE_OTHER, "{}", rule.text);
    let page = app.page("/alerts", &b.cookie).await;
    assert!(page.text.contains("nightly failures"), "{}", page.text);
    assert!(page.text.contains("ops@example.com, oncall@example.com"));
    let listed = app.get("/api/v1/alert-rules", &token).await;
    assert_eq!(
        listed.body["items"][0]["events"],
        json!(["recovered", "run_failed"])
    );
    assert_eq!(listed.body["items"][0]["throttle_secs"], 60);
    let log = app.page("/notifications", &b.cookie).await;
    assert_eq!(log.status, StatusCode::OK);
    assert!(log.text.contains("Nothing delivered yet"));
}

/// A Slack (or webhook) URL is a credential: stored sealed and bound to its channel
/// (nowhere in the clear in the database), answered masked (scheme and host), kept when
/// its masked form is sent back, and absent from the admin page, the definitions export
/// and the audit log.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn channel_urls_are_sealed_masked_and_never_exported(pool: PgPool) {
    use probactr_common::secrets::{Owner, Sealed};
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let token = "Xk2s9QwErTy7UiOp3aSdFgHj";
    let url = format!("https://hooks.slack.com/services/T0A1B2C3/B0D4E5F6/{token}");
    let made = app
        .post(
            "/api/v1/channels",
            &admin,
            json!({"name": "chat", "kind": "slack", "config": {"url": url}}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let id = made.body["id"].as_i64().unwrap();
    let shown = made.body["config"]["url"].as_str().unwrap().to_owned();
    assert!(shown.starts_with("https://hooks.slack.com/***"), "{shown}");
    let kept = app
        .call(
            Method::PUT,
            &format!("/api/v1/channels/{id}"),
            Some(&admin),
            Some(json!({"name": "chat room", "kind": "slack", "config": {"url": shown}})),
        )
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.text);
    assert_eq!(kept.body["config"]["url"], shown, "the masked form keeps the URL");

    let b = app.browser("admin").await;
    let page = app.page("/alerts", &b.cookie).await;
    // Masked (the page escapes `/` as `&#x2f;`).
    assert!(page.text.contains("hooks.slack.com&#x2f;*** (#"), "{}", page.text);
    let export = app.page("/definitions.yaml", &b.cookie).await;
    assert!(export.text.contains("chat room"), "{}", export.text);
    assert!(!export.text.contains("hooks.slack.com"), "{}", export.text);
    let listed = app.get("/api/v1/channels", &admin).await;
    let audit = app.get("/api/v1/audit", &admin).await;
    assert!(audit.text.contains("channel.update"), "{}", audit.text);
    let mut texts = vec![
        made.text,
        kept.text,
        page.text,
        export.text,
        listed.text,
        audit.text,
    ];
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT row_to_json(c)::text FROM alert_channels AS c
         UNION ALL SELECT row_to_json(a)::text FROM audit_log AS a",
    )
    .fetch_all(app.pool())
    .await
    .unwrap();
    texts.extend(rows);
    for text in &texts {
        assert!(
            !text.contains(token) && !text.contains("T0A1B2C3"),
            "the URL came out: {text}"
        );
    }

    let (key_id, nonce, ciphertext, bound): (String, Vec<u8>, Vec<u8>, bool) =
        sqlx::query_as("SELECT url_key_id, url_nonce, url_sealed, url_bound FROM alert_channels")
            .fetch_one(app.pool())
            .await
            .unwrap();
    let sealed = Sealed {
        key_id,
        nonce,
        ciphertext,
        bound,
    };
    let keys = app.state.handles.secret_keys.clone().unwrap();
    assert_eq!(
        keys.open(&Owner::ChannelUrl(id), &sealed).as_deref(),
        Ok(url.as_str())
    );
    assert!(
        keys.open(&Owner::ChannelUrl(id + 1), &sealed).is_err(),
        "bound to its channel"
    );
}
