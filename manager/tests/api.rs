//! Integration tests of the manager: the whole router, driven with `oneshot`, over a
//! fresh migrated database per test (`#[sqlx::test]`, `DATABASE_URL` names the server)
//! and the Redis of `REDIS_URL` (default `redis://127.0.0.1:6379`). Logs are silent unless
//! `TEST_LOG` is set. The [`browser`] module drives the admin in headless Chromium
//! (installed by `tests/browser/install.sh`); its screenshots land in `target/browser/`.
//! The [`openapi`] module checks the generated API document against the API.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use probactr_common::config::Config;
use probactr_common::model::{ProcessRole, RunState};
use probactr_common::store;
use probactr_manager::auth;
use probactr_manager::auth::Role;
use probactr_manager::AppState;
use serde_json::{json, Value};
use sqlx::PgPool;
use tower::ServiceExt;

mod browser;
mod openapi;

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
        if std::env::var_os("TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_test_writer()
                .with_env_filter("info")
                .try_init();
        }
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
        let user = store::users::create(self.pool(), name, &hash, role)
            .await
            .unwrap()
            .expect("new user");
        auth::issue_token(self.pool(), user.id, "test").await.unwrap().1
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
async fn html_is_never_compressed(pool: PgPool) {
    let app = TestApp::new(pool);
    let fetch = |uri: &str| {
        Request::get(uri)
            .header(header::ACCEPT_ENCODING, "gzip")
            .body(Body::empty())
            .unwrap()
    };
    let login = app.send(fetch("/login")).await;
    assert_eq!(login.status, StatusCode::OK);
    assert!(
        login.headers.get(header::CONTENT_ENCODING).is_none(),
        "HTML with a CSRF token is not compressed (BREACH)"
    );
    for uri in ["/static/style.css", "/api/v1/openapi.json"] {
        let reply = app.send(fetch(uri)).await;
        assert_eq!(
            reply
                .headers
                .get(header::CONTENT_ENCODING)
                .map(|v| v.to_str().unwrap()),
            Some("gzip"),
            "{uri}"
        );
    }
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

/// Inserts `count` ended runs of `job_id`, oldest first, one second apart, each having run
/// 1.5 s: every tenth failed, the rest succeeded.
async fn insert_history(pool: &PgPool, job_id: i64, count: i64) {
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, queued_at, started_at, finished_at)
         SELECT $1, t, CASE WHEN n % 10 = 0 THEN 'failed' ELSE 'succeeded' END, t,
                t - interval '1.5 seconds', t
         FROM generate_series(1, $2) AS n, LATERAL (SELECT now() - make_interval(secs => $2 - n) AS t) AS at
         ORDER BY n",
    )
    .bind(job_id)
    .bind(count)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn job_statistics_count_every_ended_run(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let busy = app.job(&admin, noop("busy")).await;
    let quiet = app.job(&admin, noop("quiet")).await;
    let busy_id = busy["id"].as_i64().unwrap();
    // More than the 1,000 runs the statistics used to be capped at: all are counted.
    insert_history(app.pool(), busy_id, 1005).await;
    insert_history(app.pool(), quiet["id"].as_i64().unwrap(), 20).await;
    // A run that has not ended is not counted (yet).
    let queued = app
        .post(&format!("/api/v1/jobs/{busy_id}/run"), &admin, json!({}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);

    let list = app.get("/api/v1/jobs", &admin).await;
    let stats_of = |name: &str| {
        list.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .unwrap()["stats"]
            .clone()
    };
    let busy_stats = stats_of("busy");
    assert_eq!(busy_stats["runs"], 1005, "{busy_stats}");
    // n = 10, 20, …, 1000 failed.
    assert_eq!(busy_stats["failures"], 100);
    assert_eq!(busy_stats["successes"], 905);
    assert_eq!(
        (busy_stats["cancelled"].clone(), busy_stats["not_run"].clone()),
        (json!(0), json!(0))
    );
    assert!(busy_stats.get("capped").is_none() && busy_stats.get("window").is_none());
    // The latest end is n = 1005, which succeeded, and the latest failure n = 1000.
    let latest: i64 = sqlx::query_scalar("SELECT max(id) FROM runs WHERE job_id = $1 AND state <> 'queued'")
        .bind(busy_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(busy_stats["last_run_id"], latest);
    assert_eq!(busy_stats["last_state"], "succeeded");
    assert_eq!(busy_stats["last_duration_ms"], 1500);
    let at = |field: &str| {
        busy_stats[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {busy_stats}"))
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    assert_eq!(at("last_success_at"), at("last_run_at"));
    assert_eq!(
        at("last_run_at") - at("last_failure_at"),
        chrono::TimeDelta::seconds(5)
    );
    let quiet_stats = stats_of("quiet");
    assert_eq!(quiet_stats["runs"], 20);
    assert_eq!(
        (quiet_stats["successes"].clone(), quiet_stats["failures"].clone()),
        (json!(18), json!(2))
    );
    assert_eq!(quiet_stats["last_state"], "failed", "n = 20 ended last");
    assert_eq!(quiet_stats["last_run_at"], quiet_stats["last_failure_at"]);

    // Cancelling the queued run counts it, as the latest end; pruning history lowers nothing.
    let run_id = queued.body["run_id"].as_i64().unwrap();
    let cancelled = app
        .post(&format!("/api/v1/runs/{run_id}/cancel"), &admin, json!({}))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    sqlx::query("DELETE FROM runs WHERE job_id = $1 AND id <> $2")
        .bind(busy_id)
        .bind(run_id)
        .execute(app.pool())
        .await
        .unwrap();
    let one = app.get(&format!("/api/v1/jobs/{busy_id}"), &admin).await;
    let stats = &one.body["stats"];
    assert_eq!(
        (
            stats["runs"].clone(),
            stats["successes"].clone(),
            stats["failures"].clone(),
            stats["cancelled"].clone()
        ),
        (json!(1006), json!(905), json!(100), json!(1)),
        "{stats}"
    );
    assert_eq!(
        (stats["last_run_id"].clone(), stats["last_state"].clone()),
        (json!(run_id), json!("cancelled"))
    );
    assert!(
        stats["last_duration_ms"].is_null(),
        "a run cancelled in the queue never ran"
    );

    // A job without runs shows zeros.
    let fresh = app.job(&admin, noop("fresh")).await;
    assert_eq!(fresh["stats"]["runs"], 0);
    assert!(fresh["stats"]["last_state"].is_null());

    // A paused job has no next instant, though its trigger keeps one.
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", quiet["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 3600}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let uri = format!("/api/v1/jobs/{}", quiet["id"]);
    assert!(app.get(&uri, &admin).await.body["stats"]["next_fire_at"].is_string());
    app.post(&format!("{uri}/pause"), &admin, json!({})).await;
    assert!(app.get(&uri, &admin).await.body["stats"]["next_fire_at"].is_null());

    // The pages show the latest end's state.
    let browser = app.browser("admin").await;
    let page = app.page("/jobs", &browser.cookie).await;
    assert!(
        page.text.contains(&format!("href=\"/runs/{run_id}\"")),
        "{}",
        page.text
    );
    assert!(page.text.contains("badge cancelled"), "{}", page.text);
    let page = app.page(&format!("/jobs/{busy_id}"), &browser.cookie).await;
    assert!(page.text.contains("1006"), "{}", page.text);
    assert!(page.text.contains("badge cancelled"), "{}", page.text);
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
    let user = store::users::by_name(app.pool(), "root").await.unwrap().unwrap();
    assert_eq!(user.role(), Role::Admin);
    assert!(user.password_hash.starts_with("$argon2id$"));
    let again = bootstrap_admin(&app.state, &config_with(None)).await.unwrap();
    assert_eq!(
        again,
        Ok(Bootstrap::UsersExist),
        "a second start needs no password"
    );
}

// ----------------------------------------------------------------------------------------
// Web admin
// ----------------------------------------------------------------------------------------

/// A signed-in browser: the session cookie and the CSRF token of its forms.
struct Browser {
    cookie: String,
    csrf: String,
}

/// The value of the first `name="csrf" value="…"` in a page.
fn csrf_in(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a csrf field") + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

/// `name=value` of a `Set-Cookie` header named `name`.
fn set_cookie(reply: &Reply, name: &str) -> Option<String> {
    reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_owned())
}

fn encode_form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                probactr_manager::admin::encode_component(k),
                probactr_manager::admin::encode_component(v)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

impl TestApp {
    async fn page(&self, uri: &str, cookie: &str) -> Reply {
        self.send(
            Request::get(uri)
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    async fn form(&self, uri: &str, cookie: &str, pairs: &[(&str, &str)]) -> Reply {
        let request = Request::post(uri)
            .header(header::COOKIE, cookie)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(encode_form(pairs)))
            .unwrap();
        self.send(request).await
    }

    /// Submits the login form as a browser would; returns the reply.
    async fn submit_login(&self, name: &str, password: &str, extra_cookie: Option<&str>) -> Reply {
        let login = self.call(Method::GET, "/login", None, None).await;
        assert_eq!(login.status, StatusCode::OK);
        let login_cookie = set_cookie(&login, "probactr_login").expect("login cookie");
        let cookie = match extra_cookie {
            Some(extra) => format!("{login_cookie}; {extra}"),
            None => login_cookie,
        };
        let csrf = csrf_in(&login.text);
        self.form(
            "/login",
            &cookie,
            &[("csrf", &csrf), ("username", name), ("password", password)],
        )
        .await
    }

    /// Logs `name` in through the form.
    async fn browser(&self, name: &str) -> Browser {
        let reply = self.submit_login(name, &password_of(name), None).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
        let cookie = set_cookie(&reply, "probactr_session").expect("session cookie");
        let home = self.page("/", &cookie).await;
        assert_eq!(home.status, StatusCode::OK, "{}", home.text);
        Browser {
            csrf: csrf_in(&home.text),
            cookie,
        }
    }
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn login_rotates_and_logout_revokes_the_session(pool: PgPool) {
    let app = TestApp::new(pool);
    app.admin().await;
    let anonymous = app.call(Method::GET, "/", None, None).await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(anonymous.headers[header::LOCATION], "/login");

    let reply = app.submit_login("admin", &password_of("admin"), None).await;
    let flags = reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with("probactr_session="))
        .unwrap();
    assert!(
        flags.contains("HttpOnly") && flags.contains("SameSite=Strict"),
        "{flags}"
    );
    let first = set_cookie(&reply, "probactr_session").unwrap();

    let again = app
        .submit_login("admin", &password_of("admin"), Some(&first))
        .await;
    let second = set_cookie(&again, "probactr_session").unwrap();
    assert_ne!(first, second, "a new id at every login");
    assert_eq!(
        app.page("/", &first).await.status,
        StatusCode::SEE_OTHER,
        "the old session is gone"
    );
    let home = app.page("/", &second).await;
    assert_eq!(home.status, StatusCode::OK);

    let wrong = app.submit_login("admin", "not the password", None).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.text.contains("Wrong user name or password"));

    let no_csrf = app.form("/logout", &second, &[]).await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    let logout = app
        .form("/logout", &second, &[("csrf", &csrf_in(&home.text))])
        .await;
    assert_eq!(logout.status, StatusCode::SEE_OTHER);
    assert_eq!(
        app.page("/", &second).await.status,
        StatusCode::SEE_OTHER,
        "logged out"
    );
}

/// Every `Set-Cookie` of a reply, whole.
fn set_cookies(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn cookies_are_secure_when_configured(pool: PgPool) {
    // Off by default (a manager reached over plain HTTP on localhost).
    let plain = TestApp::new(pool.clone());
    plain.admin().await;
    let reply = plain.submit_login("admin", &password_of("admin"), None).await;
    let cookies = set_cookies(&reply);
    assert!(cookies.iter().all(|c| !c.contains("Secure")), "{cookies:?}");

    // PROBACTR_COOKIE_SECURE=true: every cookie the admin sets or clears is Secure.
    let config = Config::from_map(&HashMap::from([(
        "PROBACTR_COOKIE_SECURE".to_owned(),
        "true".to_owned(),
    )]))
    .unwrap();
    let state = AppState::new(pool, &redis_url())
        .unwrap()
        .with_fast_hashing()
        .with_cookie_secure(config.cookie_secure);
    let app = TestApp {
        app: probactr_manager::app(state.clone()),
        state,
    };
    let login_page = app.call(Method::GET, "/login", None, None).await;
    let login_cookie = set_cookies(&login_page);
    assert!(
        login_cookie.iter().all(|c| c.contains("; Secure")),
        "{login_cookie:?}"
    );
    let reply = app.submit_login("admin", &password_of("admin"), None).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    let cookies = set_cookies(&reply);
    assert_eq!(
        cookies.len(),
        2,
        "the session, and the login cookie cleared: {cookies:?}"
    );
    for cookie in &cookies {
        assert!(
            cookie.contains("; Secure") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
    }
    let session = set_cookie(&reply, "probactr_session").unwrap();
    let home = app.page("/", &session).await;
    let logout = app
        .form("/logout", &session, &[("csrf", &csrf_in(&home.text))])
        .await;
    let cleared = set_cookies(&logout);
    assert!(
        cleared
            .iter()
            .any(|c| c.starts_with("probactr_session=;") && c.contains("; Secure")),
        "{cleared:?}"
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn login_form_needs_its_token_and_is_rate_limited(pool: PgPool) {
    let app = TestApp::new(pool);
    app.user("carol", Role::Viewer).await;
    let forged = app
        .form(
            "/login",
            "",
            &[("username", "carol"), ("password", &password_of("carol"))],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(set_cookie(&forged, "probactr_session").is_none());
    for _ in 0..5 {
        assert_eq!(
            app.submit_login("carol", "wrong-password", None).await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    let limited = app.submit_login("carol", &password_of("carol"), None).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        limited.text.contains("too many failed logins"),
        "{}",
        limited.text
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn forms_without_csrf_token_are_rejected(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let browser = app.browser("admin").await;
    let job = app.job(&admin, noop("target")).await;
    let fields = [("name", "forged"), ("kind", "noop"), ("timeout_secs", "60")];
    assert_eq!(
        app.form("/jobs/new", &browser.cookie, &fields).await.status,
        StatusCode::FORBIDDEN
    );
    let mut wrong = fields.to_vec();
    wrong.push(("csrf", "0000"));
    assert_eq!(
        app.form("/jobs/new", &browser.cookie, &wrong).await.status,
        StatusCode::FORBIDDEN
    );
    let pause = app
        .form(&format!("/jobs/{}/pause", job["id"]), &browser.cookie, &[])
        .await;
    assert_eq!(pause.status, StatusCode::FORBIDDEN);
    assert_eq!(app.count("jobs").await, 1);
    assert_eq!(
        app.get(&format!("/api/v1/jobs/{}", job["id"]), &admin).await.body["paused"],
        false
    );

    // The session cookie also works on the API, with the token in a header for changes.
    let cookie_call = |with_header: bool| {
        let mut request = Request::post(format!("/api/v1/jobs/{}/pause", job["id"]))
            .header(header::COOKIE, &browser.cookie);
        if with_header {
            request = request.header("x-csrf-token", &browser.csrf);
        }
        request.body(Body::empty()).unwrap()
    };
    assert_eq!(app.send(cookie_call(false)).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.send(cookie_call(true)).await.status, StatusCode::OK);
    let read = app
        .send(
            Request::get("/api/v1/jobs")
                .header(header::COOKIE, &browser.cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(read.status, StatusCode::OK);
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn html_pages_escape_what_users_wrote(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let browser = app.browser("admin").await;
    let evil = "<script>alert(1)</script>";
    let job = app
        .job(
            &admin,
            json!({"name": evil, "description": "<img src=x onerror=alert(2)>", "kind": "noop"}),
        )
        .await;
    let run = app
        .post(&format!("/api/v1/jobs/{}/run", job["id"]), &admin, json!({}))
        .await;
    let run_id = run.body["run_id"].as_i64().unwrap();
    sqlx::query("UPDATE runs SET output = '<b>bold</b><script>x()</script>' WHERE id = $1")
        .bind(run_id)
        .execute(app.pool())
        .await
        .unwrap();
    for uri in [
        "/jobs".to_owned(),
        format!("/jobs/{}", job["id"]),
        format!("/runs/{run_id}"),
        "/runs".to_owned(),
        "/audit".to_owned(),
    ] {
        let page = app.page(&uri, &browser.cookie).await;
        assert_eq!(page.status, StatusCode::OK, "{uri}: {}", page.text);
        assert!(!page.text.contains(evil), "{uri} shows the name unescaped");
        assert!(
            !page.text.contains("<img src=x"),
            "{uri} shows the description unescaped"
        );
        assert!(
            !page.text.contains("<script>x()"),
            "{uri} shows the output unescaped"
        );
    }
    let job_page = app.page(&format!("/jobs/{}", job["id"]), &browser.cookie).await;
    assert!(
        job_page.text.contains("&lt;script&gt;alert(1)&lt;"),
        "the name shows as text"
    );
    let run_page = app.page(&format!("/runs/{run_id}"), &browser.cookie).await;
    assert!(
        run_page.text.contains("&lt;b&gt;bold&lt;"),
        "the output shows as text"
    );
    let csp = run_page.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.contains("default-src 'none'") && !csp.contains("unsafe-inline"));
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn admin_pages_render_and_forms_work(pool: PgPool) {
    let app = TestApp::new(pool);
    app.admin().await;
    let b = app.browser("admin").await;

    // Create a job through the form: first with errors shown inline, then valid.
    let bad = app
        .form(
            "/jobs/new",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("name", "nightly"),
                ("kind", "shell"),
                ("spec.program", ""),
                ("spec.millis", "not sent: sleep is not the kind"),
                ("timeout_secs", "-1"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.text.contains("id=\"error-spec.program\""), "{}", bad.text);
    assert!(!bad.text.contains("id=\"error-spec.millis\""), "{}", bad.text);
    assert!(bad.text.contains("must be at least 1"));
    assert!(bad.text.contains("value=\"nightly\""), "typed values are kept");
    assert_eq!(app.count("jobs").await, 0);

    // The shell fields: a malformed line, then a reserved variable, are errors on their
    // field and save nothing; then a valid job, stored with one argument per line.
    let shell = |env: &'static str| {
        vec![
            ("csrf", b.csrf.as_str()),
            ("name", "backup"),
            ("kind", "shell"),
            ("spec.program", "backup-tool"),
            ("spec.args", "--full\r\n--label=nightly run\r\n"),
            ("spec.env", env),
            ("spec.shell", "on"),
            ("timeout_secs", "60"),
        ]
    };
    let bad_line = app.form("/jobs/new", &b.cookie, &shell("LANG=C\r\nOOPS")).await;
    assert_eq!(bad_line.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        bad_line
            .text
            .contains("id=\"error-spec.env\">line 2: expected KEY=VALUE"),
        "{}",
        bad_line.text
    );
    assert!(
        bad_line.text.contains("LANG=C\r\nOOPS</textarea>") && bad_line.text.contains("--label=nightly run"),
        "typed lines are kept: {}",
        bad_line.text
    );
    let reserved = app
        .form("/jobs/new", &b.cookie, &shell("PROBACTR_RUN_ID=1"))
        .await;
    assert_eq!(reserved.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        reserved.text.contains("id=\"error-spec.env\">PROBACTR_RUN_ID: "),
        "the service's error lands on the env field: {}",
        reserved.text
    );
    assert_eq!(app.count("jobs").await, 0);
    let backup = app.form("/jobs/new", &b.cookie, &shell("LANG=C\r\nTZ=UTC")).await;
    assert_eq!(backup.status, StatusCode::SEE_OTHER, "{}", backup.text);
    let backup_uri = backup.headers[header::LOCATION].to_str().unwrap().to_owned();
    let spec: Value = sqlx::query_scalar("SELECT spec FROM jobs WHERE name = 'backup'")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(
        spec,
        json!({"program": "backup-tool", "args": ["--full", "--label=nightly run"],
               "env": {"LANG": "C", "TZ": "UTC"}, "shell": true})
    );
    let backup_edit = app.page(&format!("{backup_uri}/edit"), &b.cookie).await;
    assert!(
        backup_edit
            .text
            .contains(">\n--full\n--label=nightly run</textarea>")
            && backup_edit.text.contains(">\nLANG=C\nTZ=UTC</textarea>"),
        "the edit form shows the spec one item per line: {}",
        backup_edit.text
    );
    let backup_page = app.page(&backup_uri, &b.cookie).await;
    assert!(backup_page.text.contains("<code>--label=nightly run</code>"));

    let created = app
        .form(
            "/jobs/new",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("name", "nightly"),
                ("kind", "sleep"),
                ("spec.millis", "10"),
                ("timeout_secs", "60"),
                ("retry.max_attempts", "2"),
                ("retry.backoff_secs", "5"),
                ("overlap", "skip"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.text);
    let location = created.headers[header::LOCATION].to_str().unwrap().to_owned();
    let job_id: i64 = location.trim_start_matches("/jobs/").parse().unwrap();

    // A cron trigger: preview, a bad field, then save.
    let trigger_uri = format!("/jobs/{job_id}/triggers/new");
    let cron = |action: &'static str, text: &'static str| {
        vec![
            ("csrf", b.csrf.clone()),
            ("kind", "cron".into()),
            ("cron", text.into()),
            ("timezone", "UTC".into()),
            ("misfire", "fire_once".into()),
            ("misfire_threshold_secs", "60".into()),
            ("action", action.into()),
        ]
    };
    let as_refs =
        |v: &Vec<(&'static str, String)>| v.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>();
    let preview_fields = as_refs(&cron("preview", "0 0 12 * * *"));
    let preview_pairs: Vec<(&str, &str)> = preview_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let preview = app.form(&trigger_uri, &b.cookie, &preview_pairs).await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.text);
    assert!(preview.text.contains("Next instants") && preview.text.contains("12:00:00"));
    assert_eq!(app.count("triggers").await, 0, "a preview saves nothing");
    let bad_fields = as_refs(&cron("save", "0 99 * * * *"));
    let bad_pairs: Vec<(&str, &str)> = bad_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let bad = app.form(&trigger_uri, &b.cookie, &bad_pairs).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        bad.text.contains("id=\"error-cron\"") && bad.text.contains("minute: 99"),
        "{}",
        bad.text
    );
    let good_fields = as_refs(&cron("save", "0 0 12 * * *"));
    let good_pairs: Vec<(&str, &str)> = good_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let saved = app.form(&trigger_uri, &b.cookie, &good_pairs).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text);
    let trigger_id: i64 = sqlx::query_scalar("SELECT id FROM triggers")
        .fetch_one(app.pool())
        .await
        .unwrap();

    // Actions.
    let pause = app
        .form(
            &format!("/jobs/{job_id}/pause"),
            &b.cookie,
            &[("csrf", &b.csrf), ("next", "/jobs")],
        )
        .await;
    assert_eq!(pause.status, StatusCode::SEE_OTHER);
    assert_eq!(pause.headers[header::LOCATION], "/jobs");
    let evil_next = app
        .form(
            &format!("/jobs/{job_id}/resume"),
            &b.cookie,
            &[("csrf", &b.csrf), ("next", "//evil.example")],
        )
        .await;
    assert_eq!(
        evil_next.headers[header::LOCATION],
        format!("/jobs/{job_id}"),
        "no open redirect"
    );
    let run = app
        .form(&format!("/jobs/{job_id}/run"), &b.cookie, &[("csrf", &b.csrf)])
        .await;
    let run_location = run.headers[header::LOCATION].to_str().unwrap().to_owned();
    assert!(run_location.starts_with("/runs/"));
    let cancel = app
        .form(&format!("{run_location}/cancel"), &b.cookie, &[("csrf", &b.csrf)])
        .await;
    assert_eq!(cancel.status, StatusCode::SEE_OTHER);

    for uri in [
        "/".to_owned(),
        "/jobs".to_owned(),
        "/jobs?q=night".to_owned(),
        "/jobs/new".to_owned(),
        format!("/jobs/{job_id}"),
        format!("/jobs/{job_id}/edit"),
        trigger_uri.clone(),
        format!("/triggers/{trigger_id}/edit"),
        "/runs".to_owned(),
        format!("/runs?job_id={job_id}&state=cancelled"),
        run_location.clone(),
        "/executors".to_owned(),
        "/audit".to_owned(),
        "/static/style.css".to_owned(),
        "/static/app.js".to_owned(),
    ] {
        let page = app.page(&uri, &b.cookie).await;
        assert_eq!(page.status, StatusCode::OK, "{uri}: {}", page.text);
    }
    assert_eq!(
        app.page("/jobs/999999", &b.cookie).await.status,
        StatusCode::NOT_FOUND
    );

    // Edit through the form with a stale version: the page says so.
    let edit = app.page(&format!("/jobs/{job_id}/edit"), &b.cookie).await;
    assert!(edit.text.contains("name=\"version\""));
    let stale = app
        .form(
            &format!("/jobs/{job_id}/edit"),
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("version", "1"),
                ("name", "nightly"),
                ("kind", "sleep"),
                ("spec.millis", "10"),
                ("timeout_secs", "60"),
            ],
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.text);
    let delete = app
        .form(
            &format!("/triggers/{trigger_id}/delete"),
            &b.cookie,
            &[("csrf", &b.csrf)],
        )
        .await;
    assert_eq!(delete.status, StatusCode::SEE_OTHER);
    assert_eq!(app.count("triggers").await, 0);
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn viewers_see_pages_but_cannot_change_anything(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    app.user("victor", Role::Viewer).await;
    let job = app.job(&admin, noop("watched")).await;
    let b = app.browser("victor").await;
    let page = app.page(&format!("/jobs/{}", job["id"]), &b.cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.text.contains("Run now"), "no buttons a viewer cannot use");
    assert_eq!(app.page("/audit", &b.cookie).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.page("/jobs/new", &b.cookie).await.status,
        StatusCode::FORBIDDEN
    );
    let run = app
        .form(
            &format!("/jobs/{}/run", job["id"]),
            &b.cookie,
            &[("csrf", &b.csrf)],
        )
        .await;
    assert_eq!(run.status, StatusCode::FORBIDDEN);
    assert_eq!(app.count("runs").await, 0);
}

// ----------------------------------------------------------------------------------------
// Users and tokens
// ----------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn admins_manage_users(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let operator = app.user("olga", Role::Operator).await;
    let body = json!({"username": "dave", "password": "long enough password", "role": "viewer"});
    assert_eq!(
        app.post("/api/v1/users", &operator, body.clone()).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get("/api/v1/users", &operator).await.status,
        StatusCode::FORBIDDEN
    );
    let created = app.post("/api/v1/users", &admin, body.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert!(created.body.get("password_hash").is_none());
    let dave_id = created.body["id"].as_i64().unwrap();
    assert_field(&app.post("/api/v1/users", &admin, body).await, "username");
    assert_field(
        &app.post(
            "/api/v1/users",
            &admin,
            json!({"username": "eve", "password": "short", "role": "viewer"}),
        )
        .await,
        "password",
    );
    assert_field(
        &app.post(
            "/api/v1/users",
            &admin,
            json!({"username": "eve", "password": "long enough password", "role": "root"}),
        )
        .await,
        "role",
    );
    assert_eq!(app.get("/api/v1/users", &admin).await.body["total"], 3);

    // Disabling a user stops their tokens.
    let dave = app
        .call(
            Method::POST,
            "/api/v1/auth/token",
            None,
            Some(json!({"username": "dave", "password": "long enough password"})),
        )
        .await
        .body["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(app.get("/api/v1/me", &dave).await.status, StatusCode::OK);
    let disabled = app
        .patch(
            &format!("/api/v1/users/{dave_id}"),
            &admin,
            json!({"disabled": true}),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::OK, "{}", disabled.text);
    assert_eq!(
        app.get("/api/v1/me", &dave).await.status,
        StatusCode::UNAUTHORIZED
    );

    // The last admin stays an admin.
    let me = app.get("/api/v1/me", &admin).await.body["id"].as_i64().unwrap();
    let demote = app
        .patch(&format!("/api/v1/users/{me}"), &admin, json!({"role": "viewer"}))
        .await;
    assert_eq!(demote.status, StatusCode::CONFLICT, "{}", demote.text);
    assert_eq!(
        app.patch("/api/v1/users/999999", &admin, json!({"role": "viewer"}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn tokens_are_listed_and_revoked_by_their_owner(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let viewer = app.user("victor", Role::Viewer).await;
    let made = app
        .post("/api/v1/tokens", &viewer, json!({"name": "script"}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let (id, token) = (
        made.body["id"].as_i64().unwrap(),
        made.body["token"].as_str().unwrap().to_owned(),
    );
    let list = app.get("/api/v1/tokens", &viewer).await;
    assert_eq!(list.body["total"], 2);
    assert!(!list.text.contains(&token), "the secret is never listed");
    assert_eq!(
        app.call(
            Method::DELETE,
            &format!("/api/v1/tokens/{id}"),
            Some(&app.user("olga", Role::Operator).await),
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND,
        "not someone else's"
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            &format!("/api/v1/tokens/{id}"),
            Some(&viewer),
            None
        )
        .await
        .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/api/v1/me", &token).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(app.get("/api/v1/me", &viewer).await.status, StatusCode::OK);
    assert_eq!(app.get("/api/v1/me", &admin).await.status, StatusCode::OK);
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn changing_a_password_ends_the_sessions(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.user("alice", Role::Operator).await;
    let browser = app.browser("alice").await;
    let wrong = app
        .post(
            "/api/v1/me/password",
            &token,
            json!({"current_password": "nope", "new_password": "brand new password"}),
        )
        .await;
    assert_field(&wrong, "current_password");
    let short = app
        .post(
            "/api/v1/me/password",
            &token,
            json!({"current_password": password_of("alice"), "new_password": "short"}),
        )
        .await;
    assert_field(&short, "new_password");
    let changed = app
        .post(
            "/api/v1/me/password",
            &token,
            json!({"current_password": password_of("alice"), "new_password": "brand new password"}),
        )
        .await;
    assert_eq!(changed.status, StatusCode::NO_CONTENT, "{}", changed.text);
    assert_eq!(
        app.page("/", &browser.cookie).await.status,
        StatusCode::SEE_OTHER,
        "the session ended"
    );
    assert_eq!(
        app.submit_login("alice", "brand new password", None).await.status,
        StatusCode::SEE_OTHER
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn users_and_account_pages(pool: PgPool) {
    let app = TestApp::new(pool);
    app.admin().await;
    let b = app.browser("admin").await;
    assert_eq!(app.page("/users", &b.cookie).await.status, StatusCode::OK);
    let bad = app
        .form(
            "/users",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("username", "<i>x</i>"),
                ("password", "short"),
                ("role", "viewer"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.text.contains("at least 12 characters") && !bad.text.contains("<i>x</i>"));
    let made = app
        .form(
            "/users",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                ("username", "walt"),
                ("password", "long enough password"),
                ("role", "operator"),
            ],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.text);
    let walt = store::users::by_name(app.pool(), "walt").await.unwrap().unwrap();
    assert_eq!(walt.role(), Role::Operator);
    let demoted = app
        .form(
            &format!("/users/{}", walt.id),
            &b.cookie,
            &[("csrf", &b.csrf), ("role", "viewer")],
        )
        .await;
    assert_eq!(demoted.status, StatusCode::SEE_OTHER);
    assert_eq!(
        store::users::by_name(app.pool(), "walt")
            .await
            .unwrap()
            .unwrap()
            .role(),
        Role::Viewer
    );

    assert_eq!(app.page("/account", &b.cookie).await.status, StatusCode::OK);
    let token_page = app
        .form("/account/tokens", &b.cookie, &[("csrf", &b.csrf), ("name", "ci")])
        .await;
    assert_eq!(token_page.status, StatusCode::OK);
    let marker = "<code>pat_";
    let start = token_page.text.find(marker).expect("the new token is shown") + "<code>".len();
    let token: String = token_page.text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    assert_eq!(app.get("/api/v1/me", &token).await.body["username"], "admin");
}

// ----------------------------------------------------------------------------------------
// End to end
// ----------------------------------------------------------------------------------------

/// The URL of the test's own database (the server of `DATABASE_URL`, the pool's database).
fn database_url_of(pool: &PgPool) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL names the test server");
    let base = base.split('?').next().unwrap_or_default();
    let (server, _) = base.rsplit_once('/').expect("a URL with a database path");
    let database = pool
        .connect_options()
        .get_database()
        .expect("the test database")
        .to_owned();
    format!("{server}/{database}")
}

/// The configuration of an in-process executor over the test's database, with Redis
/// keys under a prefix of its own.
fn executor_config(pool: &PgPool) -> Config {
    let prefix = format!("probactr-manager-test-{}:", uuid::Uuid::new_v4());
    Config::from_map(&HashMap::from([
        ("DATABASE_URL".to_owned(), database_url_of(pool)),
        ("REDIS_URL".to_owned(), redis_url()),
        ("PROBACTR_REDIS_PREFIX".to_owned(), prefix),
        ("PROBACTR_DB_POOL_SIZE".to_owned(), "4".to_owned()),
    ]))
    .unwrap()
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
