//! Users and tokens.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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
                ("role.default", "viewer"),
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
                ("role.default", "operator"),
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
            &[("csrf", &b.csrf), ("role.default", "viewer")],
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

/// A login token of `name` (from `POST /api/v1/auth/token`).
async fn login_token(app: &TestApp, name: &str, extra: Value) -> String {
    let mut body = json!({"username": name, "password": password_of(name)});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let reply = app
        .call(Method::POST, "/api/v1/auth/token", None, Some(body))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    reply.body["token"].as_str().unwrap().to_owned()
}

async fn works(app: &TestApp, token: &str) -> bool {
    app.get("/api/v1/me", token).await.status == StatusCode::OK
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn disabling_a_user_ends_their_tokens_for_good(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let personal = app.user("walt", Role::Operator).await;
    let login = login_token(&app, "walt", json!({})).await;
    let walt = store::users::by_name(app.pool(), "walt").await.unwrap().unwrap();
    let uri = format!("/api/v1/users/{}", walt.id);
    let disabled = app.patch(&uri, &admin, json!({"disabled": true})).await;
    assert_eq!(disabled.status, StatusCode::OK, "{}", disabled.text);
    let enabled = app.patch(&uri, &admin, json!({"disabled": false})).await;
    assert_eq!(enabled.status, StatusCode::OK, "{}", enabled.text);
    assert!(
        !works(&app, &personal).await,
        "a personal token came back to life"
    );
    assert!(!works(&app, &login).await, "a login token came back to life");
    assert!(
        works(&app, &login_token(&app, "walt", json!({})).await).await,
        "they may log in again"
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_password_reset_ends_every_token_and_a_change_ends_the_login_ones(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let personal = app.user("walt", Role::Operator).await;
    let login = login_token(&app, "walt", json!({})).await;
    let changed = app
        .post(
            "/api/v1/me/password",
            &personal,
            json!({"current_password": password_of("walt"), "new_password": "a brand new password"}),
        )
        .await;
    assert!(changed.status.is_success(), "{}", changed.text);
    assert!(
        !works(&app, &login).await,
        "a login token outlived the password it came from"
    );
    assert!(
        works(&app, &personal).await,
        "personal tokens survive the user's own change"
    );

    let walt = store::users::by_name(app.pool(), "walt").await.unwrap().unwrap();
    let reset = app
        .patch(
            &format!("/api/v1/users/{}", walt.id),
            &admin,
            json!({"password": "reset by the admin"}),
        )
        .await;
    assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);
    assert!(
        !works(&app, &personal).await,
        "a reset by an admin ends personal tokens too"
    );
    let listed = store::api_tokens::of_user(app.pool(), walt.id).await.unwrap();
    assert!(
        listed.iter().all(|token| token.revoked_at.is_some()),
        "the list shows them ended: {listed:?}"
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn tokens_may_expire(pool: PgPool) {
    let app = TestApp::new(pool);
    let personal = app.user("walt", Role::Operator).await;
    let made = app
        .post(
            "/api/v1/tokens",
            &personal,
            json!({"name": "cron", "expires_in_days": 7}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let short_lived = made.body["token"].as_str().unwrap().to_owned();
    let listed = app.get("/api/v1/tokens", &personal).await;
    let entry = listed.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "cron")
        .cloned()
        .unwrap();
    assert!(entry["expires_at"].is_string(), "{entry}");
    assert_eq!(entry["origin"], "personal");
    assert!(works(&app, &short_lived).await);
    sqlx::query("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'cron'")
        .execute(app.pool())
        .await
        .unwrap();
    assert!(!works(&app, &short_lived).await, "an expired token still worked");
    let bad = app
        .post(
            "/api/v1/tokens",
            &personal,
            json!({"name": "x", "expires_in_days": 0}),
        )
        .await;
    assert_field(&bad, "expires_in_days");
    let huge = app
        .call(
            Method::POST,
            "/api/v1/auth/token",
            None,
            Some(json!({"username": "u".repeat(900_000), "password": "p", "name": "n".repeat(900)})),
        )
        .await;
    assert_eq!(huge.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", huge.text);
    assert_field(&huge, "username");
    assert_field(&huge, "name");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn secrets_go_in_and_never_come_out(pool: PgPool) {
    use probactr_common::secrets::{Keyring, SecretKey};
    let mut app = TestApp::new(pool);
    let admin = app.admin().await;
    let operator = app.user("otto", Role::Operator).await;
    // Without a key the API says secrets are off.
    let off = app
        .post("/api/v1/secrets", &admin, json!({"name": "db", "value": "v"}))
        .await;
    assert_eq!(off.status, StatusCode::CONFLICT, "{}", off.text);
    assert!(off.text.contains("PROBACTR_SECRET_KEY"));

    let key = SecretKey::parse("AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=").unwrap();
    app.state = app.state.clone().with_secret_keys(Some(Keyring::new(key, None)));
    app.app = probactr_manager::app(app.state.clone());
    let value = "hunter2-value-91f";
    let made = app
        .post(
            "/api/v1/secrets",
            &admin,
            json!({"name": "db_password", "value": value}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let replaced = app
        .call(
            Method::PUT,
            "/api/v1/secrets/db_password",
            Some(&admin),
            Some(json!({"value": format!("{value}-2")})),
        )
        .await;
    assert_eq!(replaced.status, StatusCode::NO_CONTENT, "{}", replaced.text);
    let listed = app.get("/api/v1/secrets", &admin).await;
    assert_eq!(listed.body["items"][0]["name"], "db_password");
    let bad = app
        .post(
            "/api/v1/secrets",
            &admin,
            json!({"name": "has space", "value": ""}),
        )
        .await;
    assert_field(&bad, "name");
    assert_field(&bad, "value");
    let forbidden = app.get("/api/v1/secrets", &operator).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    let page = app.get("/api/v1/audit", &admin).await;
    for text in [&listed.text, &page.text] {
        assert!(!text.contains(value), "a value came out: {text}");
    }
    let stored: Vec<Vec<u8>> = sqlx::query_scalar("SELECT ciphertext FROM secrets")
        .fetch_all(app.pool())
        .await
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&stored[0]).contains(value),
        "stored in the clear"
    );
    let rotated = app.post("/api/v1/secrets/rotate", &admin, json!({})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let gone = app
        .call(Method::DELETE, "/api/v1/secrets/db_password", Some(&admin), None)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.call(Method::DELETE, "/api/v1/secrets/db_password", Some(&admin), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}
