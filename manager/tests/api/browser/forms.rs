//! Time and forms in the real browser: every time shown in one named zone with its
//! relative form, the user's zone preference changing what is shown and how the runs
//! filter reads its times, a trigger's instants in its own zone too; a bad job form
//! naming every error at once (each field marked, the summary focused), a job created
//! with its schedule; an alert rule and a channel edited.

use std::net::SocketAddr;

use chrono::{DateTime, Duration as Span, Utc};
use fantoccini::Locator;

use super::super::*;
use super::{in_browser, raise, Session, PAGE_WAIT};
use probactr_testkit::eventually;

/// The zone the user picks: far from UTC and without daylight saving time.
const ZONE: &str = "Asia/Tokyo";

async fn log_in(session: &Session, password: &str) {
    session.goto("/login").await;
    session.type_into("#username", "admin").await;
    session.type_into("#password", password).await;
    session.press("form[action=\"/login\"]", "Log in").await;
    session.wait_path("the dashboard", |path| path == "/").await;
}

/// An attribute of the element `css`.
async fn attr(session: &Session, css: &str, name: &str) -> Option<String> {
    session.wait_css(css).await.attr(name).await.unwrap()
}

/// `when` as the page writes it in `zone`, without the zone's short name.
fn in_zone(when: &str, zone: &str) -> String {
    let tz: chrono_tz::Tz = zone.parse().unwrap();
    DateTime::parse_from_rfc3339(when)
        .unwrap()
        .with_timezone(&tz)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A time is shown in the browser's zone, named in the header and on hover with the
/// relative form; choosing a zone shows it there; a bad zone is refused at its field.
async fn times_in_the_chosen_zone(session: &Session, job_id: i64) {
    session.goto(&format!("/jobs/{job_id}")).await;
    let css = "main time[datetime]";
    let browser_zone = session.text("#time-zone").await;
    assert!(browser_zone.starts_with("Times in "), "{browser_zone}");
    let when = attr(session, css, "datetime").await.expect("a datetime");
    let title = attr(session, css, "title").await.unwrap_or_default();
    assert!(title.starts_with(&browser_zone), "the zone on hover: {title}");
    let relative = attr(session, css, "data-relative").await.unwrap_or_default();
    assert!(
        relative.starts_with("in ") || relative.ends_with(" ago") || relative == "now",
        "relative form: {relative}"
    );
    assert!(title.ends_with(&relative), "the relative form on hover: {title}");

    session.goto("/account").await;
    session.type_into("#f-time_zone", "Mars/Olympus").await;
    session.press("#time-zone-form", "Save time zone").await;
    session.wait_css("#f-time_zone[aria-invalid=\"true\"]").await;
    assert!(session.text("#error-time_zone").await.contains("not a time zone"));
    session.type_into("#f-time_zone", ZONE).await;
    session.press("#time-zone-form", "Save time zone").await;
    assert_eq!(session.text(".flash").await, format!("Times are shown in {ZONE}"));

    session.goto(&format!("/jobs/{job_id}")).await;
    assert_eq!(session.text("#time-zone").await, format!("Times in {ZONE}"));
    let shown = session.text(css).await;
    assert!(
        shown.starts_with(&in_zone(&when, ZONE)),
        "{when} in {ZONE}: {shown}"
    );
    session.screenshot("times-in-chosen-zone").await;
}

/// The runs filter reads its times in the shown zone: a run queued now is found from
/// five minutes ago there, and not from five minutes ahead (read as UTC, both would be
/// hours away).
async fn runs_filter_in_the_shown_zone(session: &Session, app: &TestApp, job_id: i64) {
    let run = store::runs::queue_now(app.pool(), job_id).await.unwrap().id;
    let link = format!("a[href=\"/runs/{run}\"]");
    let local =
        |shift: i64| in_zone(&(Utc::now() + Span::minutes(shift)).to_rfc3339(), ZONE)[..16].replace(' ', "T");
    for (shift, found) in [(-5, true), (5, false)] {
        session.goto("/runs").await;
        assert_eq!(
            attr(session, "form.filters input[name=tz]", "value")
                .await
                .as_deref(),
            Some(ZONE),
            "the filter sends the shown zone"
        );
        let since = local(shift);
        session
            .client
            .execute(
                "document.querySelector('form.filters input[name=since]').value = arguments[0];",
                vec![json!(since)],
            )
            .await
            .unwrap();
        session.press("form.filters", "Filter").await;
        session
            .wait_path("the filtered runs", |path| path == "/runs")
            .await;
        eventually(PAGE_WAIT, "the filtered list", || async {
            let url = session.client.current_url().await.ok()?;
            url.query()?.contains("since=").then_some(())
        })
        .await;
        session.wait_css("#runs-live table").await;
        let listed = session.client.find(Locator::Css(&link)).await.is_ok();
        assert_eq!(listed, found, "since {since} in {ZONE}");
    }
}

/// A bad job form names every error at once, next to its field (marked aria-invalid and
/// described by its error), the advanced part open for its own; the summary holds the
/// focus; nothing is created. Then a job with a cron schedule gets its trigger, whose
/// instants show in its zone and the viewer's.
async fn job_form_with_schedule(session: &Session, app: &TestApp) {
    session.goto("/jobs/new").await;
    session
        .wait_css("#f-kind")
        .await
        .select_by_value("shell")
        .await
        .unwrap();
    assert!(
        !session
            .wait_css("#f-timeout_secs")
            .await
            .is_displayed()
            .await
            .unwrap(),
        "the limits are in the folded advanced part"
    );
    session.click("details#advanced summary").await;
    session.type_into("#f-timeout_secs", "99999999").await;
    session
        .wait_css("#f-schedule\\.kind")
        .await
        .select_by_value("cron")
        .await
        .unwrap();
    session.type_into("#f-schedule\\.cron", "61 * * * *").await;
    session.type_into("#f-schedule\\.timezone", "Mars/Olympus").await;
    session.press("main form", "Save").await;
    let fields = [
        "name",
        "spec.program",
        "timeout_secs",
        "schedule.cron",
        "schedule.timezone",
    ];
    let listed_errors = session.text("#form-errors").await;
    for field in fields {
        let css = format!("#f-{}", field.replace('.', "\\."));
        assert_eq!(
            attr(session, &css, "aria-invalid").await.as_deref(),
            Some("true"),
            "{field}: {listed_errors}"
        );
        assert_eq!(
            attr(session, &css, "aria-describedby").await,
            Some(format!("error-{field}")),
            "{field}"
        );
    }
    let timeout_error = session.text("#error-timeout_secs").await;
    assert!(timeout_error.contains("at most 24 days"), "{timeout_error}");
    let summary = session.wait_css("#form-errors").await;
    assert_eq!(summary.attr("role").await.unwrap().as_deref(), Some("alert"));
    let listed = summary.find_all(Locator::Css("li")).await.unwrap();
    assert_eq!(listed.len(), fields.len(), "{}", summary.text().await.unwrap());
    let focused = session
        .client
        .execute("return document.activeElement.id;", vec![])
        .await
        .unwrap();
    assert_eq!(focused, json!("form-errors"), "the summary has the focus");
    assert!(session
        .wait_css("details#advanced")
        .await
        .attr("open")
        .await
        .unwrap()
        .is_some());
    assert_eq!(app.count("jobs").await, 0, "a bad form creates nothing");
    session.screenshot("job-form-every-error").await;

    session.type_into("#f-name", "scheduled-by-form").await;
    session
        .wait_css("#f-kind")
        .await
        .select_by_value("noop")
        .await
        .unwrap();
    session.type_into("#f-timeout_secs", "60").await;
    session.type_into("#f-schedule\\.cron", "0 30 2 * * *").await;
    session.type_into("#f-schedule\\.timezone", "Europe/Paris").await;
    session.press("main form", "Save").await;
    let job_path = session
        .wait_path("the new job's page", |path| {
            path.strip_prefix("/jobs/")
                .is_some_and(|id| id.parse::<i64>().is_ok())
        })
        .await;
    let job_id: i64 = job_path["/jobs/".len()..].parse().unwrap();
    let (trigger_id, cron, zone): (i64, Option<String>, String) =
        sqlx::query_as("SELECT id, cron, timezone FROM triggers WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(app.pool())
            .await
            .expect("the job's one trigger");
    assert_eq!(
        (cron.as_deref(), zone.as_str()),
        (Some("0 30 2 * * *"), "Europe/Paris")
    );

    // The trigger's instants: in its zone, then the viewer's.
    session.goto(&format!("/triggers/{trigger_id}/edit")).await;
    let first = session.text("#current ol.instants li time").await;
    assert!(
        first.contains(":30:00") && first.contains("(Europe/Paris) · "),
        "in the trigger's zone and the viewer's: {first}"
    );
    assert!(first.contains(" 02:30:00 "), "02:30 in Paris: {first}");
}

/// An alert rule and a channel edited from the alerts page.
async fn alerts_edited(session: &Session, app: &TestApp, token: &str) {
    let channel = app
        .post(
            "/api/v1/channels",
            token,
            json!({"name": "ops-mail", "kind": "email", "config": {"to": ["ops@example.com"]}}),
        )
        .await;
    assert_eq!(channel.status, StatusCode::CREATED, "{}", channel.text);
    let rule = app
        .post(
            "/api/v1/alert-rules",
            token,
            json!({"name": "failures", "events": ["run_failed"], "channel_ids": [channel.body["id"]]}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{}", rule.text);
    let rule_id = rule.body["id"].as_i64().unwrap();
    session.goto("/alerts").await;
    session
        .click(&format!("a[href=\"/alerts/rules/{rule_id}#rule-form\"]"))
        .await;
    session
        .wait_path("the rule's form", |path| {
            path == format!("/alerts/rules/{rule_id}")
        })
        .await;
    assert!(session.text("main").await.contains("Edit rule failures"));
    session
        .type_into("#rule-form #f-name", "failures-and-timeouts")
        .await;
    session
        .click("#rule-form input[name=\"event.run_timed_out\"]")
        .await;
    session.type_into("#rule-form #f-throttle_secs", "-1").await;
    session.press("#rule-form", "Save rule").await;
    assert!(session.text("#error-throttle_secs").await.contains("at least"));
    session.type_into("#rule-form #f-throttle_secs", "600").await;
    session.press("#rule-form", "Save rule").await;
    session
        .wait_path("the alerts page", |path| path == "/alerts")
        .await;
    let saved = app.get(&format!("/api/v1/alert-rules/{rule_id}"), token).await;
    assert_eq!(saved.body["name"], "failures-and-timeouts", "{}", saved.text);
    assert_eq!(saved.body["events"], json!(["run_failed", "run_timed_out"]));
    assert_eq!(saved.body["throttle_secs"], 600);
    assert_eq!(saved.body["enabled"], true);

    let channel_id = channel.body["id"].as_i64().unwrap();
    session
        .click(&format!("a[href=\"/alerts/channels/{channel_id}#channel-form\"]"))
        .await;
    session
        .type_into("#channel-form #f-to", "ops@example.com, oncall@example.com")
        .await;
    session.press("#channel-form", "Save channel").await;
    session
        .wait_path("the alerts page", |path| path == "/alerts")
        .await;
    let saved = app.get(&format!("/api/v1/channels/{channel_id}"), token).await;
    assert_eq!(
        saved.body["config"]["to"],
        json!(["ops@example.com", "oncall@example.com"]),
        "{}",
        saved.text
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn times_forms_and_alerts_in_headless_chromium(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service =
        probactr_manager::app(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });

    let outcome = in_browser(base, |session| async move {
        log_in(&session, &password_of("admin")).await;
        job_form_with_schedule(&session, &app).await;
        let job_id: i64 = sqlx::query_scalar("SELECT id FROM jobs WHERE name = 'scheduled-by-form'")
            .fetch_one(app.pool())
            .await
            .unwrap();
        times_in_the_chosen_zone(&session, job_id).await;
        runs_filter_in_the_shown_zone(&session, &app, job_id).await;
        alerts_edited(&session, &app, &token).await;
    })
    .await;
    server.abort();
    raise(outcome, "the forms scenario");
}
