//! Web admin.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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
    let hashed_fields = as_refs(&cron("preview", "H H(0-7) * * *"));
    let hashed_pairs: Vec<(&str, &str)> = hashed_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let hashed = app.form(&trigger_uri, &b.cookie, &hashed_pairs).await;
    assert_eq!(hashed.status, StatusCode::OK, "{}", hashed.text);
    assert!(hashed.text.contains("id=\"resolved-cron\""), "{}", hashed.text);
    let bad_fields = as_refs(&cron("save", "0 99 * * * *"));
    let bad_pairs: Vec<(&str, &str)> = bad_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let bad = app.form(&trigger_uri, &b.cookie, &bad_pairs).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        bad.text.contains("id=\"error-cron\"") && bad.text.contains("minute: 99"),
        "{}",
        bad.text
    );
    let mut good_fields = as_refs(&cron("save", "0 0 12 * * *"));
    good_fields.extend([("jitter_secs", "5".to_owned()), ("max_fires", "3".to_owned())]);
    let good_pairs: Vec<(&str, &str)> = good_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let saved = app.form(&trigger_uri, &b.cookie, &good_pairs).await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text);
    let (trigger_id, jitter_secs, max_fires): (i64, Option<i32>, Option<i64>) =
        sqlx::query_as("SELECT id, jitter_secs, max_fires FROM triggers")
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert_eq!(
        (jitter_secs, max_fires),
        (Some(5), Some(3)),
        "the form's jitter and bound on fires"
    );
    let edit = app.page(&format!("/triggers/{trigger_id}/edit"), &b.cookie).await;
    assert!(edit.text.contains("name=\"max_fires\""), "{}", edit.text);

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

    // The dashboard charts runs per minute by outcome (the cancelled run is one that did
    // not run) with links to each range; a bad range shows the last hour and says why.
    for range in ["1h", "24h", "7d"] {
        let dashboard = app.page(&format!("/?range={range}"), &b.cookie).await;
        assert_eq!(dashboard.status, StatusCode::OK, "{}", dashboard.text);
        let text = &dashboard.text;
        assert!(text.contains("<svg class=\"chart\" id=\"runs-chart\""), "{text}");
        assert!(text.contains(">runs per minute</text>"), "{text}");
        // And the capacity forecast of the next day.
        assert!(
            text.contains("<svg class=\"chart\" id=\"capacity-chart\""),
            "{text}"
        );
        assert!(text.contains("id=\"capacity-summary\""), "{text}");
        assert!(text.contains("<rect class=\"not-run\""), "{range}: {text}");
        for link in ["/?range=1h", "/?range=24h", "/?range=7d"] {
            assert!(text.contains(&format!("href=\"{link}\"")), "{link}: {text}");
        }
        assert!(
            text.contains(&format!("href=\"/?range={range}\" class=\"active\"")),
            "{text}"
        );
        assert!(text.contains("id=\"slowest-jobs\"") && text.contains("id=\"failing-jobs\""));
        assert!(!text.contains("id=\"range-notice\""));
    }
    let bad_range = app.page("/?range=%3Cb%3E", &b.cookie).await;
    assert_eq!(bad_range.status, StatusCode::OK, "{}", bad_range.text);
    assert!(
        bad_range.text.contains("id=\"range-notice\""),
        "{}",
        bad_range.text
    );
    assert!(
        bad_range.text.contains("Unknown range &quot;&lt;b&gt;&quot;"),
        "{}",
        bad_range.text
    );
    assert!(bad_range.text.contains("href=\"/?range=1h\" class=\"active\""));

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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_job_form_warns_of_credentials_typed_in_the_clear(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    // A job may name only secrets that exist in its namespace.
    sqlx::query(
        "INSERT INTO secrets (name, key_id, nonce, ciphertext, updated_by) VALUES ('db', 'k', '\\x00', '\\x00', 'test')",
    )
    .execute(app.pool())
    .await
    .unwrap();
    let job = app
        .job(
            &token,
            json!({"name": "deploy", "kind": "shell",
                   "spec": {"program": "deploy", "env": {"API_TOKEN": "abc", "DB": "{{ secrets.db }}"}}}),
        )
        .await;
    let b = app.browser("admin").await;
    let form = app.page(&format!("/jobs/{}/edit", job["id"]), &b.cookie).await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.text.contains("id=\"credential-warning\""), "{}", form.text);
    assert!(
        form.text.contains("API_TOKEN looks like a credential"),
        "{}",
        form.text
    );
}

/// The admin's import and export: download every job as YAML, upload YAML, preview what
/// it changes, apply it; a bad upload names the line and field and changes nothing.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn definitions_download_preview_and_apply(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    app.job(&token, noop("existing")).await;
    let b = app.browser("admin").await;
    let download = app.page("/definitions.yaml", &b.cookie).await;
    assert_eq!(download.status, StatusCode::OK);
    assert!(download.text.contains("name: existing"), "{}", download.text);
    let yaml = "jobs:\n  - name: uploaded\n    kind: noop\n    timeout_secs: 60\n    triggers:\n      - {kind: interval, interval_secs: 600}\n";
    let preview = app
        .form(
            "/definitions",
            &b.cookie,
            &[("csrf", &b.csrf), ("yaml", yaml), ("action", "preview")],
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.text);
    assert!(preview.text.contains("+ job uploaded"), "{}", preview.text);
    assert_eq!(app.count("jobs").await, 1, "a preview changes nothing");
    let applied = app
        .form(
            "/definitions",
            &b.cookie,
            &[("csrf", &b.csrf), ("yaml", yaml), ("action", "apply")],
        )
        .await;
    assert!(applied.text.contains("Applied"), "{}", applied.text);
    assert_eq!(app.count("jobs").await, 2);
    assert_eq!(app.count("triggers").await, 1);
    let again = app
        .form(
            "/definitions",
            &b.cookie,
            &[("csrf", &b.csrf), ("yaml", yaml), ("action", "apply")],
        )
        .await;
    assert!(again.text.contains("Nothing to change"), "{}", again.text);
    let bad = app
        .form(
            "/definitions",
            &b.cookie,
            &[
                ("csrf", &b.csrf),
                (
                    "yaml",
                    "jobs:\n  - name: worse\n    kind: noop\n    timeout_secs: 0\n",
                ),
                ("action", "apply"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
    assert!(bad.text.contains("upload:4: timeout_secs"), "{}", bad.text);
    assert_eq!(app.count("jobs").await, 2, "a bad upload changes nothing");
}

/// A YAML document nested 3,000 levels deep (which overflowed the parser's stack and
/// killed the manager) is refused with 422 naming its line, uploaded in the admin or sent
/// to the API's apply (block YAML, or flow/JSON 3,000 deep, which the scanner bounds), and
/// the manager answers on.
/// The app runs on a thread with the stack of a server's worker thread (2 MiB, tokio's
/// default), where the overflow happened.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_deeply_nested_upload_is_refused_and_the_manager_answers_on(pool: PgPool) {
    let options = (*pool.connect_options()).clone();
    let served = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(4)
                    .connect_with(options)
                    .await
                    .unwrap();
                let app = TestApp::new(pool);
                let token = app.admin().await;
                let b = app.browser("admin").await;
                // Block sequences 3,000 deep on one line (flow ones stop at 255 levels
                // in the scanner).
                let deep = format!("jobs:\n  - name: deep\n    spec:\n      {}x\n", "- ".repeat(3000));
                let reply = app
                    .form(
                        "/definitions",
                        &b.cookie,
                        &[("csrf", &b.csrf), ("yaml", &deep), ("action", "preview")],
                    )
                    .await;
                assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.text);
                assert!(
                    reply
                        .text
                        .contains("upload:4: not YAML: nested deeper than 64 levels"),
                    "{}",
                    reply.text
                );
                for (body, line) in [
                    (deep.clone(), "\"request:4\""),
                    (
                        format!("{}{}", "[".repeat(3000), "]".repeat(3000)),
                        "\"request:1\"",
                    ),
                ] {
                    let request = Request::builder()
                        .method(Method::POST)
                        .uri("/api/v1/definitions/apply")
                        .header(header::AUTHORIZATION, format!("Bearer {token}"))
                        .header(header::CONTENT_TYPE, "application/yaml")
                        .body(Body::from(body))
                        .unwrap();
                    let reply = app.send(request).await;
                    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.text);
                    assert!(
                        reply.text.contains(line) && reply.text.contains("not YAML"),
                        "{}",
                        reply.text
                    );
                }
                assert_eq!(app.get("/api/v1/jobs", &token).await.status, StatusCode::OK);
                assert_eq!(app.count("jobs").await, 0);
            })
        })
        .unwrap()
        .join();
    assert!(served.is_ok(), "the manager's thread failed");
}
