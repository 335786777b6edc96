//! Integration tests of the manager: the whole router, driven with `oneshot`, over a
//! fresh migrated database per test (`#[sqlx::test]`, `DATABASE_URL` names the server)
//! and the Redis of `REDIS_URL` (default `redis://127.0.0.1:6379`). Logs are silent unless
//! `TEST_LOG` is set. The [`browser`] module drives the admin in headless Chromium
//! (installed by `tests/api/browser/install.sh`); its screenshots land in `target/browser/`.
//! The [`openapi`] module checks the generated API document against the API. The
//! [`oidc`] module logs in through a real OpenID provider (npm's `oidc-provider`,
//! installed by `tests/api/oidc/install.sh`), in the same headless Chromium. The
//! [`archive`] module keeps runs' output in moto's S3-compatible server (installed by
//! `tests/api/archive/install.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use probactr_common::config::Config;
use probactr_common::model::TokenOrigin;
use probactr_common::model::{ProcessRole, RunState};
use probactr_common::store;
use probactr_common::store::api_tokens::NewToken;
use probactr_manager::auth;
use probactr_manager::auth::Role;
use probactr_manager::AppState;
use probactr_testkit::redis_url;
use serde_json::{json, Value};
use sqlx::PgPool;
use tower::ServiceExt;

mod browser;
mod oidc;
mod openapi;

mod admin;
mod alerts;
mod apply;
mod archive;
mod calendars;
mod concurrency;
mod dashboard;
mod dependencies;
mod end_to_end;
mod health_auth;
mod jobs;
mod ledger;
mod namespaces;
mod output;
mod pools;
mod runs_cluster;
mod startup;
mod triggers;
mod users;
mod webhooks;
mod workflows;

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
        &self.state.handles.pool
    }

    /// A user of `role` named `name` (password `name` repeated to 12+ characters), and a
    /// bearer token of theirs.
    async fn user(&self, name: &str, role: Role) -> String {
        let hash = self.state.handles.hasher.hash(&password_of(name)).unwrap();
        let user = store::users::create(self.pool(), name, &hash, role)
            .await
            .unwrap()
            .expect("new user");
        let token = NewToken {
            user_id: user.id,
            name: "test",
            origin: TokenOrigin::Personal,
            lifetime: None,
            token_hash: "",
            namespaces: None,
            role: None,
        };
        auth::issue_token(self.pool(), token).await.unwrap().1
    }

    /// A user with a role in each of `roles`' namespaces only (no cluster admin), and a
    /// bearer token of theirs.
    async fn user_in(&self, name: &str, roles: &[(&str, Role)]) -> String {
        let token = self.user(name, Role::Viewer).await;
        let id = store::users::by_name(self.pool(), name)
            .await
            .unwrap()
            .unwrap()
            .id;
        let roles = roles.iter().map(|(ns, role)| ((*ns).to_owned(), *role)).collect();
        let mut conn = self.pool().acquire().await.unwrap();
        store::user_roles::replace(&mut conn, id, false, &roles)
            .await
            .unwrap();
        token
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
            "alert_channels" => "SELECT count(*) FROM alert_channels",
            "alert_rules" => "SELECT count(*) FROM alert_rules",
            "workflow_runs" => "SELECT count(*) FROM workflow_runs",
            "workflow_triggers" => "SELECT count(*) FROM workflow_triggers",
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

// Signed-in admin sessions, shared by the admin, jobs and users tests.

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

/// The configuration of an in-process executor over the test's database, with Redis
/// keys under a prefix of its own.
fn executor_config(pool: &PgPool) -> Config {
    executor_config_with(pool, &[])
}

/// [`executor_config`] with some settings of the test's own.
fn executor_config_with(pool: &PgPool, settings: &[(&str, &str)]) -> Config {
    let prefix = format!("probactr-manager-test-{}:", uuid::Uuid::new_v4());
    let mut map = HashMap::from([
        ("DATABASE_URL".to_owned(), database_url_of(pool)),
        ("REDIS_URL".to_owned(), redis_url()),
        ("PROBACTR_REDIS_PREFIX".to_owned(), prefix),
        ("PROBACTR_DB_POOL_SIZE".to_owned(), "4".to_owned()),
    ]);
    map.extend(settings.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config::from_map(&map).unwrap()
}

/// The URL of the test's own database (the server of `DATABASE_URL`, the pool's database).
fn database_url_of(pool: &PgPool) -> String {
    probactr_testkit::database_url(&pool.connect_options())
}
