//! Integration tests of the manager: the whole router, driven with `oneshot`, over a
//! fresh migrated database per test (`#[sqlx::test]`, `DATABASE_URL` names the server)
//! and the Redis of `REDIS_URL` (default `redis://127.0.0.1:6379`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use probactr_common::config::Config;
use probactr_common::model::{ProcessRole, RunState};
use probactr_common::store;
use probactr_manager::auth::Role;
use probactr_manager::db;
use probactr_manager::AppState;
use serde_json::{json, Value};
use sqlx::PgPool;
use tower::ServiceExt;

/// The app over a test database, and helpers to call it.
struct TestApp {
    app: Router,
    state: AppState,
}

/// A response: status, headers and the body (JSON when it parses, else a string).
struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
    text: String,
}

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

impl TestApp {
    fn new(pool: PgPool) -> TestApp {
        let state = AppState::new(pool, &redis_url())
            .expect("state")
            .with_fast_hashing();
        TestApp {
            app: probactr_manager::app(state.clone()),
            state,
        }
    }

    fn pool(&self) -> &PgPool {
        &self.state.pool
    }

    /// A user of `role` named `name` (password `name` repeated to 12+ characters), and a
    /// bearer token of theirs.
    async fn user(&self, name: &str, role: Role) -> String {
        let hash = self.state.hasher.hash(&password_of(name)).unwrap();
        let user = db::users::create(self.pool(), name, &hash, role)
            .await
            .unwrap()
            .expect("new user");
        db::sessions::create_token(self.pool(), user.id, "test")
            .await
            .unwrap()
            .1
    }

    async fn admin(&self) -> String {
        self.user("admin", Role::Admin).await
    }

    async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    async fn call(&self, method: Method, uri: &str, token: Option<&str>, body: Option<Value>) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some(body) => request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
            None => request.body(Body::empty()).unwrap(),
        };
        self.send(request).await
    }

    async fn get(&self, uri: &str, token: &str) -> Reply {
        self.call(Method::GET, uri, Some(token), None).await
    }

    async fn post(&self, uri: &str, token: &str, body: Value) -> Reply {
        self.call(Method::POST, uri, Some(token), Some(body)).await
    }

    async fn patch(&self, uri: &str, token: &str, body: Value) -> Reply {
        self.call(Method::PATCH, uri, Some(token), Some(body)).await
    }

    /// Creates a job as `token` and returns its JSON.
    async fn job(&self, token: &str, body: Value) -> Value {
        let reply = self.post("/api/v1/jobs", token, body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.body
    }

    async fn count(&self, table: &str) -> i64 {
        let sql = match table {
            "jobs" => "SELECT count(*) FROM jobs",
            "triggers" => "SELECT count(*) FROM triggers",
            "runs" => "SELECT count(*) FROM runs",
            "audit_log" => "SELECT count(*) FROM audit_log",
            other => panic!("no count for {other}"),
        };
        sqlx::query_scalar(sql).fetch_one(self.pool()).await.unwrap()
    }
}

fn password_of(name: &str) -> String {
    format!("{name}-password-123")
}

fn noop(name: &str) -> Value {
    json!({"name": name, "kind": "noop"})
}

fn field_errors(reply: &Reply) -> HashMap<String, String> {
    serde_json::from_value(reply.body["error"]["fields"].clone()).unwrap_or_default()
}

fn assert_field(reply: &Reply, field: &str) {
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.text);
    assert_eq!(reply.body["error"]["code"], "invalid_input", "{}", reply.text);
    assert!(
        field_errors(reply).contains_key(field),
        "expected an error on {field}: {}",
        reply.text
    );
}

// ----------------------------------------------------------------------------------------
// Health, auth
// ----------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn health_ready_metrics_and_openapi(pool: PgPool) {
    let app = TestApp::new(pool);
    let health = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
    assert_eq!(ready.body["postgres"], "ok");
    assert_eq!(ready.body["redis"], "ok");
    let metrics = app.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(metrics.text.contains("probactr_jobs 0"), "{}", metrics.text);
    let openapi = app.call(Method::GET, "/api/v1/openapi.json", None, None).await;
    assert_eq!(openapi.status, StatusCode::OK);
    assert!(openapi.body["paths"]["/api/v1/jobs/{id}"]["patch"].is_object());
    let csp = health
        .headers
        .get(header::CONTENT_SECURITY_POLICY)
        .expect("CSP on every response");
    assert!(csp.to_str().unwrap().contains("default-src 'none'"));
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn readyz_reports_an_unreachable_redis(pool: PgPool) {
    let state = AppState::new(pool, "redis://127.0.0.1:1").unwrap();
    let app = probactr_manager::app(state);
    let request = Request::get("/readyz").body(Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn requests_without_valid_credentials_are_401(pool: PgPool) {
    let app = TestApp::new(pool);
    for uri in [
        "/api/v1/jobs",
        "/api/v1/runs",
        "/api/v1/status",
        "/api/v1/executors",
    ] {
        let reply = app.call(Method::GET, uri, None, None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{uri}");
        assert_eq!(reply.body["error"]["code"], "unauthorized");
        let reply = app.call(Method::GET, uri, Some("pat_not-a-token"), None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    let reply = app
        .call(Method::POST, "/api/v1/jobs", None, Some(noop("x")))
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.count("jobs").await, 0);
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn token_endpoint_issues_tokens_and_rate_limits(pool: PgPool) {
    let app = TestApp::new(pool);
    app.user("alice", Role::Operator).await;
    let good = json!({"username": "alice", "password": password_of("alice")});
    let reply = app
        .call(Method::POST, "/api/v1/auth/token", None, Some(good.clone()))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let token = reply.body["token"].as_str().unwrap().to_owned();
    let me = app.get("/api/v1/me", &token).await;
    assert_eq!(me.body["username"], "alice");
    assert_eq!(me.body["role"], "operator");

    let missing = app
        .call(
            Method::POST,
            "/api/v1/auth/token",
            None,
            Some(json!({"username": "alice"})),
        )
        .await;
    assert_field(&missing, "password");

    let bad = json!({"username": "alice", "password": "wrong password!"});
    for _ in 0..5 {
        let reply = app
            .call(Method::POST, "/api/v1/auth/token", None, Some(bad.clone()))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    let limited = app
        .call(Method::POST, "/api/v1/auth/token", None, Some(good))
        .await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS, "{}", limited.text);
    assert!(limited.headers.contains_key(header::RETRY_AFTER));

    let revoke = app
        .call(Method::DELETE, "/api/v1/auth/token", Some(&token), None)
        .await;
    assert_eq!(revoke.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/api/v1/me", &token).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn unknown_user_and_wrong_password_answer_alike(pool: PgPool) {
    let app = TestApp::new(pool);
    app.user("bob", Role::Viewer).await;
    let wrong = app
        .call(
            Method::POST,
            "/api/v1/auth/token",
            None,
            Some(json!({"username": "bob", "password": "nope"})),
        )
        .await;
    let unknown = app
        .call(
            Method::POST,
            "/api/v1/auth/token",
            None,
            Some(json!({"username": "nobody", "password": "nope"})),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong.text, unknown.text);
}

// ----------------------------------------------------------------------------------------
// Jobs
// ----------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

    let deleted = app
        .call(Method::DELETE, &format!("/api/v1/jobs/{id}"), Some(&admin), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = app.get(&format!("/api/v1/jobs/{id}"), &admin).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.body["error"]["code"], "not_found");
    assert_eq!(
        app.get("/api/v1/jobs/abc", &admin).await.status,
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
            json!({"name": "a", "kind": "noop", "retry": {"max_attempts": 0}}),
            "retry.max_attempts",
        ),
        (
            json!({"name": "a", "kind": "noop", "retry": {"tries": 2}}),
            "retry.tries",
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
        app.post(&format!("/api/v1/jobs/{shell_id}/pause"), &operator, json!({}))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.post(&format!("/api/v1/jobs/{shell_id}/run"), &operator, json!({}))
            .await
            .status,
        StatusCode::ACCEPTED
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

// ----------------------------------------------------------------------------------------
// Triggers and the preview
// ----------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

// ----------------------------------------------------------------------------------------
// Runs and the cluster
// ----------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
    assert_eq!(status.body["runs_per_minute"].as_array().unwrap().len(), 60);
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
    app.post(&format!("/api/v1/jobs/{}/pause", job["id"]), &admin, json!({}))
        .await;
    app.post(&format!("/api/v1/jobs/{}/run", job["id"]), &admin, json!({}))
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
    assert_eq!(actions, ["job.run", "job.pause", "job.update", "job.create"]);
    let update = &log.body["items"][2];
    assert_eq!(update["actor"], "admin");
    assert_eq!(update["before"]["description"], "");
    assert_eq!(update["after"]["description"], "changed");
}

// ----------------------------------------------------------------------------------------
// Start-up
// ----------------------------------------------------------------------------------------

fn config_with(password: Option<&str>) -> Config {
    let mut map = HashMap::from([("PROBACTR_ADMIN_USER".to_owned(), "root".to_owned())]);
    if let Some(password) = password {
        map.insert("PROBACTR_ADMIN_PASSWORD".to_owned(), password.to_owned());
    }
    Config::from_map(&map).unwrap()
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn first_admin_comes_from_configuration(pool: PgPool) {
    use probactr_manager::startup::{bootstrap_admin, Bootstrap, BootstrapError};
    let app = TestApp::new(pool);
    let missing = bootstrap_admin(&app.state, &config_with(None)).await.unwrap();
    assert!(matches!(missing, Err(BootstrapError::MissingPassword { .. })));
    let short = bootstrap_admin(&app.state, &config_with(Some("short")))
        .await
        .unwrap();
    assert_eq!(short, Err(BootstrapError::WeakPassword));
    assert!(short.unwrap_err().to_string().contains("PROBACTR_ADMIN_PASSWORD"));
    let created = bootstrap_admin(&app.state, &config_with(Some("a long enough password")))
        .await
        .unwrap();
    assert_eq!(created, Ok(Bootstrap::Created));
    let user = db::users::by_name(app.pool(), "root").await.unwrap().unwrap();
    assert_eq!(user.role(), Role::Admin);
    assert!(user.password_hash.starts_with("$argon2id$"));
    let again = bootstrap_admin(&app.state, &config_with(None)).await.unwrap();
    assert_eq!(
        again,
        Ok(Bootstrap::UsersExist),
        "a second start needs no password"
    );
}
