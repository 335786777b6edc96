//! Webhook triggers: `POST /hooks/{token}` signed (GitHub's form) or not, a bad
//! signature refused and a good one accepted, a repeated delivery id answered with the
//! first run, the body's values reaching the run as parameters (checked against the
//! job's schema), the rate, a rotated token retiring the old URL, and every delivery
//! listed.

use hmac::{Hmac, Mac};
use probactr_common::secrets::{Keyring, SecretKey};
use probactr_testkit::TEST_SECRET_KEY;
use sha2::Sha256;

use super::*;

const SECRET: &str = "hook-signing-secret";

fn with_key(app: &mut TestApp) {
    let key = SecretKey::parse(TEST_SECRET_KEY).unwrap();
    app.state = app.state.clone().with_secret_keys(Some(Keyring::new(key, None)));
    app.app = probactr_manager::app(app.state.clone());
}

fn github_signature(body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

impl TestApp {
    /// Posts `body` to a webhook path with `headers`, without any credential.
    async fn deliver(&self, path: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::from(body.to_owned())).unwrap())
            .await
    }
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn signed_deliveries_start_runs_with_the_body_as_parameters_once(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let schema = json!({
        "ref": {"type": "string", "required": true},
        "sha": {"type": "string", "pattern": "[0-9a-f]+"}
    });
    let job = app
        .job(
            &admin,
            json!({"name": "build", "kind": "noop", "params_schema": schema}),
        )
        .await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({
                "kind": "webhook",
                "signature": {"header": "X-Hub-Signature-256", "secret": SECRET, "algorithm": "hmac-sha256", "prefix": "sha256="},
                "params_from": {"ref": "$.ref", "sha": "$.head_commit.id"},
                "dedup_header": "X-GitHub-Delivery"
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert!(created.body["next_fire_at"].is_null(), "a webhook has no instant");
    assert!(!created.text.contains(SECRET), "the secret is never shown");
    let path = created.body["webhook_url"]["path"].as_str().unwrap().to_owned();
    assert!(path.starts_with("/hooks/whk_") && path.len() > 60, "{path}");
    let trigger = format!("/api/v1/triggers/{}", created.body["id"]);
    let read = app.get(&trigger, &admin).await;
    assert!(
        read.body["webhook_url"].is_null(),
        "the URL is shown once: {}",
        read.text
    );
    assert_eq!(read.body["webhook"]["has_secret"], true);

    let push = r#"{"ref": "main", "head_commit": {"id": "abc123"}}"#;
    let forged = app
        .deliver(
            &path,
            push,
            &[
                ("X-Hub-Signature-256", "sha256=00ff"),
                ("X-GitHub-Delivery", "d-1"),
            ],
        )
        .await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED, "{}", forged.text);
    let unsigned = app.deliver(&path, push, &[("X-GitHub-Delivery", "d-1")]).await;
    assert_eq!(unsigned.status, StatusCode::UNAUTHORIZED, "{}", unsigned.text);
    assert_eq!(app.count("runs").await, 0, "a bad signature starts nothing");

    let signature = github_signature(push);
    let signed = [
        ("X-Hub-Signature-256", signature.as_str()),
        ("X-GitHub-Delivery", "d-1"),
    ];
    let accepted = app.deliver(&path, push, &signed).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let run_id = accepted.body["run_id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
    assert_eq!(
        run.body["params"],
        json!({"ref": "main", "sha": "abc123"}),
        "{}",
        run.text
    );
    assert_eq!(run.body["trigger_id"], created.body["id"]);

    let replay = app.deliver(&path, push, &signed).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.text);
    assert_eq!(
        replay.body["run_id"], run_id,
        "a repeat answers with the first run"
    );
    assert_eq!(replay.body["duplicate"], true);
    assert_eq!(app.count("runs").await, 1, "a repeat starts nothing");

    let no_ref = r#"{"head_commit": {"id": "abc123"}}"#;
    let no_ref_signature = github_signature(no_ref);
    let invalid = app
        .deliver(
            &path,
            no_ref,
            &[
                ("X-Hub-Signature-256", no_ref_signature.as_str()),
                ("X-GitHub-Delivery", "d-2"),
            ],
        )
        .await;
    assert_eq!(
        invalid.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        invalid.text
    );
    assert!(
        invalid.text.contains("params.ref"),
        "names the parameter: {}",
        invalid.text
    );
    assert_eq!(app.count("runs").await, 1);

    let deliveries = app.get(&format!("{trigger}/deliveries"), &admin).await;
    assert_eq!(deliveries.body["total"], 5, "{}", deliveries.text);
    let outcomes: Vec<(&str, i64)> = deliveries.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["outcome"].as_str().unwrap(), d["status"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("refused", 422),
            ("duplicate", 200),
            ("accepted", 202),
            ("refused", 401),
            ("refused", 401)
        ]
    );
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_rotated_token_retires_the_old_url_and_deliveries_are_rate_limited(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("hooked")).await;
    let triggers = format!("/api/v1/jobs/{}/triggers", job["id"]);
    let bad = app
        .post(
            &triggers,
            &admin,
            json!({"kind": "webhook", "params_from": {"ref": "ref"}, "dedup_header": "not a header"}),
        )
        .await;
    assert_field(&bad, "params_from.ref");
    assert_field(&bad, "dedup_header");
    let cron_with_hook = app
        .post(
            &triggers,
            &admin,
            json!({"kind": "cron", "cron": "0 * * * * *", "rate_per_minute": 5}),
        )
        .await;
    assert_field(&cron_with_hook, "rate_per_minute");

    let created = app
        .post(
            &triggers,
            &admin,
            json!({"kind": "webhook", "rate_per_minute": 2}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let old = created.body["webhook_url"]["path"].as_str().unwrap().to_owned();
    assert_eq!(app.deliver(&old, "{}", &[]).await.status, StatusCode::ACCEPTED);

    let rotate = format!("/api/v1/triggers/{}/rotate-token", created.body["id"]);
    let rotated = app.post(&rotate, &admin, json!({})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new = rotated.body["path"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(app.deliver(&old, "{}", &[]).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.deliver(&new, "{}", &[]).await.status, StatusCode::ACCEPTED);
    let limited = app.deliver(&new, "{}", &[]).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS, "{}", limited.text);
    assert_eq!(app.count("runs").await, 2);
    assert_eq!(
        app.deliver("/hooks/whk_unknown", "{}", &[]).await.status,
        StatusCode::NOT_FOUND
    );
}

fn stripe_signature(time: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{time}.{body}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_stripe_delivery_replayed_without_its_time_and_unsigned_ones_neither_start_nor_count(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("stripe")).await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({
                "kind": "webhook",
                "signature": {"header": "Stripe-Signature", "secret": SECRET, "algorithm": "hmac-sha256", "prefix": "v1="},
                "rate_per_minute": 1
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let path = created.body["webhook_url"]["path"].as_str().unwrap().to_owned();

    // A capture of `t=T,v1=M` over `T.body`, sent again as `v1=M` with the body `T.body`.
    let captured = stripe_signature(1_700_000_000, "{}");
    let replay = app
        .deliver(
            &path,
            "1700000000.{}",
            &[("Stripe-Signature", &format!("v1={captured}"))],
        )
        .await;
    assert_eq!(replay.status, StatusCode::UNAUTHORIZED, "{}", replay.text);
    for _ in 0..2 {
        let unsigned = app.deliver(&path, "{}", &[]).await;
        assert_eq!(unsigned.status, StatusCode::UNAUTHORIZED, "{}", unsigned.text);
    }

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let header = format!("t={now},v1={}", stripe_signature(now, "{}"));
    let signed = app.deliver(&path, "{}", &[("Stripe-Signature", &header)]).await;
    assert_eq!(
        signed.status,
        StatusCode::ACCEPTED,
        "refused deliveries do not use up the rate: {}",
        signed.text
    );
    assert_eq!(app.count("runs").await, 1);
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_delivery_runs_with_its_body_over_the_trigger_params(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let schema = json!({
        "env": {"type": "string", "default": "dev"},
        "region": {"type": "string", "required": true},
        "ref": {"type": "string"}
    });
    let job = app
        .job(
            &admin,
            json!({"name": "deploy", "kind": "noop", "params_schema": schema}),
        )
        .await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({
                "kind": "webhook",
                "params": {"env": "prod", "region": "eu", "ref": "stable"},
                "params_from": {"ref": "$.ref"}
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let path = created.body["webhook_url"]["path"].as_str().unwrap().to_owned();

    let accepted = app.deliver(&path, r#"{"ref": "main"}"#, &[]).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let run_id = accepted.body["run_id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/runs/{run_id}"), &admin).await;
    assert_eq!(run.body["params"]["env"], "prod", "{}", run.text);
    assert_eq!(run.body["params"]["region"], "eu", "{}", run.text);
    assert_eq!(run.body["params"]["ref"], "main", "the body's over the trigger's");
}

#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_delivery_waits_for_an_edit_of_its_trigger_instead_of_deadlocking(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let job = app.job(&admin, noop("edited")).await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "webhook"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_i64().unwrap();
    let path = created.body["webhook_url"]["path"].as_str().unwrap().to_owned();

    // An edit's order: the trigger's row, then its webhook's.
    let mut edit = app.pool().begin().await.unwrap();
    // Were there a deadlock, the edit would see it first and be its victim (the delivery
    // is run again, unseen, by the retry of aborted requests).
    sqlx::query("SET LOCAL deadlock_timeout = '10ms'")
        .execute(&mut *edit)
        .await
        .unwrap();
    store::triggers::get_for_update(&mut *edit, id)
        .await
        .unwrap()
        .unwrap();
    let editing = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let updated = sqlx::query("UPDATE trigger_webhooks SET rate_per_minute = 5 WHERE trigger_id = $1")
            .bind(id)
            .execute(&mut *edit)
            .await;
        edit.commit().await.unwrap();
        updated
    };
    let (delivered, updated) = tokio::join!(app.deliver(&path, "{}", &[]), editing);
    assert!(
        updated.is_ok(),
        "the edit is not a deadlock's victim: {updated:?}"
    );
    assert_eq!(delivered.status, StatusCode::ACCEPTED, "{}", delivered.text);
}

/// A key rotation re-seals a webhook's signature secret under the new key; deliveries
/// signed with the same secret are still accepted after it, and listed on the trigger's
/// admin page.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn a_key_rotation_reseals_the_signature_secret(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let job = app.job(&admin, json!({"name": "build", "kind": "noop"})).await;
    let created = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({
                "kind": "webhook",
                "signature": {"header": "X-Hub-Signature-256", "secret": SECRET, "prefix": "sha256="}
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let path = created.body["webhook_url"]["path"].as_str().unwrap().to_owned();
    async fn key_id(pool: &PgPool) -> String {
        sqlx::query_scalar("SELECT secret_key_id FROM trigger_webhooks")
            .fetch_one(pool)
            .await
            .unwrap()
    }
    let before = key_id(app.pool()).await;

    let new_key = SecretKey::parse("AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=").unwrap();
    let old_key = SecretKey::parse(TEST_SECRET_KEY).unwrap();
    let keys = Keyring::new(new_key, Some(old_key));
    let new_id = keys.current_id().to_owned();
    app.state = app.state.clone().with_secret_keys(Some(keys));
    app.app = probactr_manager::app(app.state.clone());
    let rotated = app.post("/api/v1/secrets/rotate", &admin, json!({})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    assert_eq!(key_id(app.pool()).await, new_id, "moved from {before}");

    // Only the new key now: the re-sealed secret still checks signatures.
    let only_new = SecretKey::parse("AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=").unwrap();
    app.state = app
        .state
        .clone()
        .with_secret_keys(Some(Keyring::new(only_new, None)));
    app.app = probactr_manager::app(app.state.clone());
    let push = r#"{"ref": "main"}"#;
    let signature = github_signature(push);
    let accepted = app
        .deliver(&path, push, &[("X-Hub-Signature-256", signature.as_str())])
        .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);

    // The trigger's admin page lists its deliveries, with the run each started.
    let run_id = accepted.body["run_id"].as_i64().unwrap();
    let browser = app.browser("admin").await;
    let page = app
        .page(&format!("/triggers/{}/edit", created.body["id"]), &browser.cookie)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text.contains("Deliveries") && page.text.contains(&format!("/runs/{run_id}")),
        "{}",
        page.text
    );
}

/// Definitions carry a webhook trigger's fields and a job's rate: a changed webhook field
/// edits the trigger in place (its id and URL stay; the dry run says so, masking the
/// secret), the same file again changes nothing.
#[sqlx::test(migrator = "store::TEST_MIGRATOR")]
async fn definitions_edit_a_webhook_in_place_and_carry_a_rate(pool: PgPool) {
    let mut app = TestApp::new(pool);
    with_key(&mut app);
    let admin = app.admin().await;
    let file = format!(
        "jobs:
  - name: build
    kind: noop
    rate: {{limit: 20, per_secs: 10}}
    triggers:
      - kind: webhook
        signature: {{header: X-Hub-Signature-256, secret: {SECRET}, prefix: sha256=}}
        params_from: {{ref: $.ref}}
        dedup_header: X-GitHub-Delivery
"
    );
    let applied = app.apply(&admin, "", &file).await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    let id: i64 = sqlx::query_scalar("SELECT id FROM jobs WHERE name = 'build'")
        .fetch_one(app.pool())
        .await
        .unwrap();
    let job = app.get(&format!("/api/v1/jobs/{id}"), &admin).await.body;
    assert_eq!(job["rate"], json!({"limit": 20, "per_secs": 10}));
    let listed = app
        .get(&format!("/api/v1/jobs/{}/triggers", job["id"]), &admin)
        .await;
    let trigger = listed.body["items"][0].clone();
    assert_eq!(trigger["webhook"]["has_secret"], true, "{}", listed.text);
    async fn digest(pool: &PgPool) -> String {
        sqlx::query_scalar("SELECT token_digest FROM trigger_webhooks")
            .fetch_one(pool)
            .await
            .unwrap()
    }
    let token = digest(app.pool()).await;

    let again = app.apply(&admin, "?dry_run=true", &file).await;
    assert_eq!(again.body["changes"], json!([]), "{}", again.text);
    let changed = file.replace("$.ref", "$.after");
    let dry = app.apply(&admin, "?dry_run=true", &changed).await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.text);
    assert!(
        dry.text
            .contains(&format!("~ trigger {} of build", trigger["id"]))
            && !dry.text.contains(SECRET),
        "{}",
        dry.text
    );
    let applied = app.apply(&admin, "", &changed).await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    let listed = app
        .get(&format!("/api/v1/jobs/{}/triggers", job["id"]), &admin)
        .await;
    assert_eq!(listed.body["total"], 1, "{}", listed.text);
    assert_eq!(
        listed.body["items"][0]["id"], trigger["id"],
        "edited, not recreated"
    );
    assert_eq!(
        listed.body["items"][0]["webhook"]["params_from"],
        json!({"ref": "$.after"})
    );
    assert_eq!(digest(app.pool()).await, token, "the URL stays");
}
