//! Single sign-on against a real OpenID provider: npm's `oidc-provider` with its
//! development login pages, started by the test (`provider.mjs`, installed by
//! `install.sh` into the target directory, which `scripts/test` runs), behind a proxy
//! of the same script that the test asks to tamper with what the provider says.
//!
//! One headless Chromium session (the harness of [`super::browser`]) clicks "Sign in
//! with …", logs in at the provider and lands in the admin as a new user with the roles
//! of their groups; a later login sets the roles again. Then, through the same browser
//! (the provider now answers at once, its session open): a tampered ID token, a wrong
//! nonce, an ID token of another issuer, a wrong state, a provider error and a disabled
//! user are each refused with a clear message on the login page, and no session is made.
//! Password logins are off but for the break-glass admin, whose form and token logins
//! work while another user's are refused and that user's API token keeps working; and a
//! provider that cannot be reached leaves password logins working.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use probactr_common::config::{LocalLogin, OidcSettings, RoleMap};
use probactr_common::store::user_roles::Grant;
use probactr_manager::auth::oidc::Sso;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::browser::{artifact_dir, in_browser, raise, Session};
use super::*;

const CLIENT_ID: &str = "probactr-test";
const CLIENT_SECRET: &str = "probactr-test-client-secret";
const PROVIDER_NAME: &str = "Test provider";
const ROLE_MAP: &str = "team-pay:payments=operator,readers:*=viewer,ops:cluster_admin,ops:gone=admin";
const BREAK_GLASS: &str = "root";

/// `<target>/oidc-provider/node_modules`, where `install.sh` puts the provider.
fn provider_modules() -> PathBuf {
    let modules = artifact_dir()
        .parent()
        .expect("the target directory")
        .join("oidc-provider/node_modules");
    assert!(
        modules.join("oidc-provider/package.json").is_file(),
        "the single sign-on test needs npm's oidc-provider in {}: run \
         `bash manager/tests/api/oidc/install.sh` (scripts/test does; it needs node and npm)",
        modules.display()
    );
    modules
}

/// Where the provider's messages go: `<target>/browser/oidc-provider.log`.
fn provider_log() -> Stdio {
    let dir = artifact_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::File::create(dir.join("oidc-provider.log"))
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null())
}

/// The provider and its proxy, a node process killed when dropped.
struct Provider {
    _child: Child,
    issuer: String,
}

impl Provider {
    async fn start(redirect_uri: &str) -> Provider {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/api/oidc/provider.mjs");
        let mut child = Command::new("node")
            .arg(&script)
            .env("OIDC_MODULES", provider_modules())
            .env("OIDC_CLIENT_ID", CLIENT_ID)
            .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
            .env("OIDC_REDIRECT_URI", redirect_uri)
            .env(
                "OIDC_GROUPS",
                json!({"alice": ["team-pay", "readers"]}).to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(provider_log())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the test's OpenID provider");
        let stdout = child.stdout.take().expect("the provider's stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the provider starts within 30 s")
            .expect("the provider's output")
            .expect("the provider announces its issuer");
        let ready: Value = serde_json::from_str(&first).expect("the provider's JSON line");
        // Keep reading: the provider prints notices, and must never write to a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Provider {
            _child: child,
            issuer: ready["issuer"].as_str().expect("issuer").to_owned(),
        }
    }

    /// Tells the proxy how to misbehave from now on.
    async fn mode(&self, mode: &str) {
        let answer = reqwest::Client::new()
            .post(format!("{}/__test/mode/{mode}", self.issuer))
            .send()
            .await
            .expect("the proxy answers");
        assert_eq!(answer.status().as_u16(), 204);
    }
}

fn settings(issuer: &str) -> OidcSettings {
    OidcSettings {
        issuer: issuer.to_owned(),
        client_id: CLIENT_ID.to_owned(),
        client_secret: Some(CLIENT_SECRET.to_owned()),
        scopes: vec!["profile".into(), "email".into(), "groups".into()],
        groups_claim: "groups".to_owned(),
        role_map: RoleMap::parse(ROLE_MAP).unwrap(),
        name: PROVIDER_NAME.to_owned(),
    }
}

/// An app over `pool` with single sign-on through `issuer` (called back at `public`)
/// and password logins for the break-glass admin only.
fn sso_app(pool: PgPool, issuer: &str, public: &str) -> TestApp {
    let sso = Sso::new(settings(issuer), public).unwrap();
    let state = AppState::new(pool, &redis_url())
        .unwrap()
        .with_fast_hashing()
        .with_sso(Some(sso))
        .with_local_login(LocalLogin::BreakGlassOnly(BREAK_GLASS.to_owned()));
    TestApp {
        app: probactr_manager::app(state.clone()),
        state,
    }
}

async fn sessions_of(pool: &PgPool, username: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM sessions JOIN users ON users.id = sessions.user_id WHERE username = $1",
    )
    .bind(username)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn user_id(pool: &PgPool, username: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
        .bind(username)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn grant_of(pool: &PgPool, username: &str) -> Grant {
    let id = user_id(pool, username).await;
    let mut conn = pool.acquire().await.unwrap();
    store::user_roles::get(&mut conn, id).await.unwrap()
}

async fn set_grant(pool: &PgPool, username: &str, cluster_admin: bool, roles: &[(&str, Role)]) {
    let id = user_id(pool, username).await;
    let roles: BTreeMap<String, Role> = roles.iter().map(|(n, r)| (n.to_string(), *r)).collect();
    let mut conn = pool.acquire().await.unwrap();
    store::user_roles::replace(&mut conn, id, cluster_admin, &roles)
        .await
        .unwrap();
}

/// Starts a login in the browser and waits for the login page's error.
async fn refused(session: &Session, provider: &Provider, mode: &str, says: &str) {
    provider.mode(mode).await;
    session.goto("/auth/oidc/login").await;
    let error = session.text("#login-error").await;
    assert!(
        error.starts_with("Single sign-on failed") && error.contains(says),
        "{mode}: {error:?} should say {says:?}"
    );
    assert_eq!(session.path().await, "/auth/oidc/callback", "{mode}");
}

async fn scenario(session: Session, app: TestApp, provider: Provider) {
    let pool = app.pool().clone();

    // The login page offers the provider; the password form is for the break-glass admin.
    session.goto("/").await;
    assert_eq!(session.path().await, "/login");
    let button = session.text("#sso-login").await;
    assert_eq!(button, format!("Sign in with {PROVIDER_NAME}"));
    session.screenshot("sso-login").await;

    // Sign in at the provider (its development login takes any password), consent.
    session.click("#sso-login").await;
    session.type_into("input[name=login]", "alice").await;
    session.type_into("input[name=password]", "anything").await;
    session.click("button[type=submit]").await;
    session
        .wait_path("the provider's consent page", |path| {
            path.starts_with("/interaction/")
        })
        .await;
    session.wait_css("button.login-submit").await;
    session.press("form", "Continue").await;
    session
        .wait_path("the dashboard after single sign-on", |path| path == "/")
        .await;
    assert_eq!(session.text("main h1").await, "Dashboard");
    assert_eq!(session.text(".who a").await, "alice (operator)");
    session.screenshot("sso-dashboard").await;

    // A new user, found again by the provider's subject, with the roles of the groups.
    let (issuer, subject): (String, String) =
        sqlx::query_as("SELECT oidc_issuer, oidc_subject FROM users WHERE username = 'alice'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (issuer.as_str(), subject.as_str()),
        (provider.issuer.as_str(), "alice")
    );
    let login: Value = sqlx::query_scalar(
        "SELECT after FROM audit_log WHERE action = 'user.login' AND object_name = 'alice'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(login["via"], "oidc", "{login}");

    let groups_give = Grant {
        cluster_admin: false,
        roles: BTreeMap::from([
            ("default".to_owned(), Role::Viewer),
            ("payments".to_owned(), Role::Operator),
        ]),
    };
    assert_eq!(grant_of(&pool, "alice").await, groups_give);

    // Roles follow the groups at every login: what was given by hand is taken back.
    set_grant(&pool, "alice", true, &[("default", Role::Admin)]).await;
    session.press(".who form", "Log out").await;
    session.wait_path("the login page", |path| path == "/login").await;
    session.click("#sso-login").await;
    session
        .wait_path("the dashboard after a second login", |path| path == "/")
        .await;
    assert_eq!(grant_of(&pool, "alice").await, groups_give);
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users WHERE username LIKE 'alice%'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(users, 1, "the same user again");
    session.press(".who form", "Log out").await;
    session.wait_path("the login page", |path| path == "/login").await;
    assert_eq!(sessions_of(&pool, "alice").await, 0);

    // Refusals: each says why on the login page and makes no session.
    refused(&session, &provider, "tamper", "signature does not verify").await;
    session.screenshot("sso-refused").await;
    refused(&session, &provider, "nonce", "nonce mismatch").await;
    refused(&session, &provider, "issuer", "issuer mismatch").await;
    refused(&session, &provider, "state", "state mismatch").await;
    refused(&session, &provider, "deny", "refused the login: login_required").await;
    sqlx::query("UPDATE users SET disabled = true WHERE username = 'alice'")
        .execute(&pool)
        .await
        .unwrap();
    refused(&session, &provider, "pass", "alice is disabled").await;
    assert_eq!(sessions_of(&pool, "alice").await, 0);
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM users WHERE username LIKE '%mallory%'")
            .fetch_one(&pool)
            .await
            .unwrap(),
        0
    );
    // A callback without the flow's cookie (another browser) is refused too.
    let stray = app
        .call(Method::GET, "/auth/oidc/callback?code=x&state=y", None, None)
        .await;
    assert_eq!(stray.status, StatusCode::BAD_REQUEST);
    assert!(
        stray.text.contains("started in another browser"),
        "{}",
        stray.text
    );
}

async fn local_login_off(app: &TestApp, bob_token: &str) {
    // The form: refused for a normal user, open for the break-glass admin.
    let bob = app.submit_login("bob", &password_of("bob"), None).await;
    assert_eq!(bob.status, StatusCode::FORBIDDEN, "{}", bob.text);
    assert!(bob.text.contains("Password login is turned off"), "{}", bob.text);
    assert!(set_cookie(&bob, "probactr_session").is_none());
    let root = app
        .submit_login(BREAK_GLASS, &password_of(BREAK_GLASS), None)
        .await;
    assert_eq!(root.status, StatusCode::SEE_OTHER, "{}", root.text);
    // The API's password login likewise.
    let token = |name: &str| json!({"username": name, "password": password_of(name)});
    let bob = app
        .call(Method::POST, "/api/v1/auth/token", None, Some(token("bob")))
        .await;
    assert_eq!(bob.status, StatusCode::FORBIDDEN, "{}", bob.text);
    let root = app
        .call(Method::POST, "/api/v1/auth/token", None, Some(token(BREAK_GLASS)))
        .await;
    assert_eq!(root.status, StatusCode::CREATED, "{}", root.text);
    // Tokens made before keep working.
    let jobs = app.get("/api/v1/jobs", bob_token).await;
    assert_eq!(jobs.status, StatusCode::OK, "{}", jobs.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn single_sign_on_with_a_real_provider(pool: PgPool) {
    // The manager's address first: the provider must know where to send people back.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let provider = Provider::start(&format!("{base}/auth/oidc/callback")).await;
    let app = sso_app(pool.clone(), &provider.issuer, &base);
    sqlx::query("INSERT INTO namespaces (name) VALUES ('payments')")
        .execute(&pool)
        .await
        .unwrap();
    app.user(BREAK_GLASS, Role::Admin).await;
    set_grant(&pool, BREAK_GLASS, true, &[("default", Role::Admin)]).await;
    let bob_token = app.user("bob", Role::Viewer).await;
    let service =
        probactr_manager::app(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });

    local_login_off(&app, &bob_token).await;

    let outcome = in_browser(base, |session| scenario(session, app, provider)).await;
    server.abort();
    raise(outcome, "the single sign-on scenario");

    // A provider that cannot be reached: single sign-on says so, passwords still work.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nobody = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let app = sso_app(pool, &nobody, "http://127.0.0.1:8080");
    let page = app.call(Method::GET, "/auth/oidc/login", None, None).await;
    assert_eq!(page.status, StatusCode::SERVICE_UNAVAILABLE, "{}", page.text);
    assert!(page.text.contains("cannot be reached"), "{}", page.text);
    let root = app
        .submit_login(BREAK_GLASS, &password_of(BREAK_GLASS), None)
        .await;
    assert_eq!(root.status, StatusCode::SEE_OTHER, "{}", root.text);
}
