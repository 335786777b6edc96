//! Health, auth.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn readyz_reports_an_unreachable_redis(pool: PgPool) {
    let state = AppState::new(pool, "redis://127.0.0.1:1").unwrap();
    let app = probactr_manager::app(state);
    let request = Request::get("/readyz").body(Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_burst_of_wrong_passwords_is_evaluated_at_most_max_failures_times(pool: PgPool) {
    let app = TestApp::new(pool);
    app.user("alice", Role::Operator).await;
    let bad = json!({"username": "alice", "password": "wrong password!"});
    let burst = (0..40).map(|_| app.call(Method::POST, "/api/v1/auth/token", None, Some(bad.clone())));
    let replies = futures_util::future::join_all(burst).await;
    let evaluated = replies
        .iter()
        .filter(|reply| reply.status == StatusCode::UNAUTHORIZED)
        .count();
    let limited = replies
        .iter()
        .filter(|reply| reply.status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(
        evaluated, 5,
        "MAX_FAILURES attempts evaluated, however they arrive"
    );
    assert_eq!(limited, 35);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn behind_a_trusted_proxy_a_lockout_is_per_client_not_per_proxy(pool: PgPool) {
    let mut app = TestApp::new(pool);
    app.state = app
        .state
        .clone()
        .with_trusted_proxies(&["127.0.0.0/8".parse().unwrap()]);
    app.app = probactr_manager::app(app.state.clone());
    app.user("alice", Role::Operator).await;
    let login = |password: &str, client: &str| {
        let body = json!({"username": "alice", "password": password}).to_string();
        let mut request = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/auth/token")
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-forwarded-for", format!("192.0.2.99, {client}"))
            .body(Body::from(body))
            .unwrap();
        let proxy: std::net::SocketAddr = "127.0.0.1:40000".parse().unwrap();
        request.extensions_mut().insert(axum::extract::ConnectInfo(proxy));
        request
    };
    for _ in 0..5 {
        let reply = app.send(login("wrong password!", "198.51.100.66")).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    let attacker = app.send(login(&password_of("alice"), "198.51.100.66")).await;
    assert_eq!(
        attacker.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        attacker.text
    );
    let real_user = app.send(login(&password_of("alice"), "203.0.113.5")).await;
    assert_eq!(real_user.status, StatusCode::CREATED, "{}", real_user.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn authenticated_answers_are_never_cached(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    for uri in ["/api/v1/me", "/api/v1/jobs", "/api/v1/tokens"] {
        let reply = app.get(uri, &token).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}");
        assert_eq!(reply.headers[header::CACHE_CONTROL], "no-store", "{uri}");
    }
    let style = app.call(Method::GET, "/static/style.css", None, None).await;
    assert_eq!(style.headers[header::CACHE_CONTROL], "public, max-age=3600");
}

/// While the manager listens for changes to access, a token is verified once and
/// remembered. A change made through this manager (a role lowered, the token revoked)
/// holds from the caller's next request; one made elsewhere (another manager, here the
/// store directly) as soon as its notification arrives.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_remembered_token_stops_working_when_revoked_or_its_user_disabled(pool: PgPool) {
    let app = TestApp::new(pool.clone());
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(app.state.tokens.clone().watch(pool, stop.clone()));
    let admin = app.admin().await;
    let alice = app.user("alice", Role::Operator).await;
    let bob = app.user("bob", Role::Operator).await;
    remembered_after_a_request(&app, &alice).await;

    let alice_id = store::users::by_name(app.pool(), "alice")
        .await
        .unwrap()
        .unwrap()
        .id;
    let demoted = app
        .patch(
            &format!("/api/v1/users/{alice_id}"),
            &admin,
            json!({"role": "viewer"}),
        )
        .await;
    assert_eq!(demoted.status, StatusCode::OK, "{}", demoted.text);
    assert_eq!(app.get("/api/v1/me", &alice).await.body["role"], "viewer");

    remembered_after_a_request(&app, &alice).await;
    let revoked = app
        .call(Method::DELETE, "/api/v1/auth/token", Some(&alice), None)
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/api/v1/me", &alice).await.status,
        StatusCode::UNAUTHORIZED
    );

    remembered_after_a_request(&app, &bob).await;
    let bob_id = store::users::by_name(app.pool(), "bob")
        .await
        .unwrap()
        .unwrap()
        .id;
    store::api_tokens::revoke_of_user(app.pool(), bob_id, &[TokenOrigin::Personal])
        .await
        .unwrap();
    eventually(&app, &bob, |me| me.status == StatusCode::UNAUTHORIZED).await;
    stop.cancel();
}

/// Asks for `/api/v1/me` with `token` until the manager remembers the token (it
/// remembers nothing until it listens for changes).
async fn remembered_after_a_request(app: &TestApp, token: &str) {
    let digest = auth::secret::digest(token);
    for _ in 0..200 {
        assert_eq!(app.get("/api/v1/me", token).await.status, StatusCode::OK);
        if app.state.tokens.recall(&digest).is_some() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the token was never remembered");
}

/// Asks for `/api/v1/me` with `token` until `holds` of the answer: a change reaches the
/// manager as a notification, moments after it commits.
async fn eventually(app: &TestApp, token: &str, holds: impl Fn(&Reply) -> bool) {
    for _ in 0..200 {
        let me = app.get("/api/v1/me", token).await;
        if holds(&me) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the change never reached the remembered token");
}
