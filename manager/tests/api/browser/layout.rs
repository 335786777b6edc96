//! The admin's layout in the real browser: no page scrolls sideways at 1280 or 360 px
//! (screenshots of each kept as `<page>-1280` and `<page>-360`), the keyboard reaches the
//! navigation (folded into a menu button when narrow) and a job's Run button, 20+ runs
//! fit a 1280×800 screen, and a sorted runs list keeps its sort across a filter and a
//! page. Each test runs on the same seeded cluster: two jobs, 25 ended runs of distinct
//! durations, an executor, a trigger.

use std::net::SocketAddr;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::Locator;

use super::super::*;
use super::{eventually, in_browser, raise, Session, PAGE_WAIT};

/// The seeded cluster's facts the tests look for.
#[derive(Clone)]
struct Seeded {
    job_id: i64,
    trigger_id: i64,
    run_id: i64,
}

/// Two jobs (the first with a paused cron trigger), an executor, and 25 ended runs of
/// distinct durations: 18 of `layout-alpha`, 7 of `layout-beta`.
async fn seed(app: &TestApp) -> Seeded {
    let admin = app.admin().await;
    let alpha = app.job(&admin, noop("layout-alpha")).await["id"]
        .as_i64()
        .unwrap();
    let beta = app.job(&admin, noop("layout-beta")).await["id"].as_i64().unwrap();
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{alpha}/triggers"),
            &admin,
            json!({"kind": "cron", "cron": "0 */5 * * * *", "timezone": "Europe/Paris", "paused": true}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let executor = store::processes::Registration::this_process(ProcessRole::Executor, 4);
    store::processes::register(app.pool(), &executor).await.unwrap();
    let mut run_id = 0;
    for i in 0..25_i64 {
        let job = if i < 18 { alpha } else { beta };
        run_id = store::runs::queue_now(app.pool(), job).await.unwrap().id;
        // Distinct durations in a scrambled order: 100 ms to 2.5 s.
        let took_ms = ((i * 7) % 25 + 1) * 100;
        sqlx::query(
            "UPDATE runs SET state = CASE WHEN $3 % 4 = 0 THEN 'failed' ELSE 'succeeded' END,
                             executor_id = $2, exit_code = CASE WHEN $3 % 4 = 0 THEN 1 ELSE 0 END,
                             started_at = now() - interval '1 hour',
                             finished_at = now() - interval '1 hour' + make_interval(secs => $3::float8 / 1000)
             WHERE id = $1",
        )
        .bind(run_id)
        .bind(executor.id)
        .bind(took_ms)
        .execute(app.pool())
        .await
        .unwrap();
    }
    Seeded {
        job_id: alpha,
        trigger_id: trigger.body["id"].as_i64().unwrap(),
        run_id,
    }
}

/// Runs `check` logged in as the admin, in the browser, against the seeded cluster.
async fn on_seeded_cluster<F, Fut>(pool: PgPool, check: F)
where
    F: FnOnce(Session, TestApp, Seeded) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let app = TestApp::new(pool);
    let seeded = seed(&app).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service =
        probactr_manager::app(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });
    let outcome = in_browser(base, |session| async move {
        log_in(&session).await;
        check(session, app, seeded).await;
    })
    .await;
    server.abort();
    raise(outcome, "the layout check");
}

async fn log_in(session: &Session) {
    session.goto("/login").await;
    session.type_into("#username", "admin").await;
    session.type_into("#password", &password_of("admin")).await;
    session.press("form[action=\"/login\"]", "Log in").await;
    session.wait_path("the dashboard", |path| path == "/").await;
}

/// DevTools' `Emulation.setDeviceMetricsOverride` through chromedriver: a viewport of
/// exactly `width`×`height` CSS pixels (a headless window is at least 500 px wide).
#[derive(Debug)]
struct DeviceMetrics {
    width: u32,
    height: u32,
}

impl fantoccini::wd::WebDriverCompatibleCommand for DeviceMetrics {
    fn endpoint(&self, base_url: &url::Url, session_id: Option<&str>) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (axum::http::Method, Option<String>) {
        let body = json!({
            "cmd": "Emulation.setDeviceMetricsOverride",
            "params": {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": false},
        });
        (axum::http::Method::POST, Some(body.to_string()))
    }
}

/// Makes the page's viewport `width`×`height` CSS pixels, for this page and the next.
async fn viewport(session: &Session, width: u32, height: u32) {
    session
        .client
        .issue_cmd(DeviceMetrics { width, height })
        .await
        .unwrap_or_else(|err| panic!("a {width}×{height} viewport: {err}"));
    let inner = session
        .client
        .execute("return [window.innerWidth, window.innerHeight];", vec![])
        .await
        .unwrap();
    assert_eq!(inner, json!([width, height]), "the viewport");
}

/// The page's width beyond the viewport's, in CSS pixels (0 when it does not scroll
/// sideways).
async fn sideways(session: &Session) -> i64 {
    let overflow = session
        .client
        .execute(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            vec![],
        )
        .await
        .unwrap();
    overflow.as_i64().unwrap()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn no_page_scrolls_sideways_at_1280_or_360_px(pool: PgPool) {
    on_seeded_cluster(pool, |session, _app, seeded| async move {
        let pages = [
            ("dashboard", "/".to_owned()),
            ("jobs", "/jobs".to_owned()),
            ("job", format!("/jobs/{}", seeded.job_id)),
            ("runs", "/runs".to_owned()),
            ("run", format!("/runs/{}", seeded.run_id)),
            ("executors", "/executors".to_owned()),
            ("ledger", format!("/triggers/{}/ledger", seeded.trigger_id)),
            ("alerts", "/alerts".to_owned()),
            ("pools", "/pools".to_owned()),
            ("workflows", "/workflows".to_owned()),
        ];
        let mut wide = Vec::new();
        for (width, height) in [(1280, 800), (360, 740)] {
            viewport(&session, width, height).await;
            for (name, path) in &pages {
                session.goto(path).await;
                let heading = session.text("main h1").await;
                assert!(!heading.contains("Error"), "{path} at {width} px: {heading}");
                session.screenshot(&format!("{name}-{width}")).await;
                let overflow = sideways(&session).await;
                if overflow > 0 {
                    wide.push(format!("{path} at {width} px: {overflow} px too wide"));
                }
            }
        }
        assert!(wide.is_empty(), "pages scroll sideways: {wide:?}");
    })
    .await;
}

/// Presses `key` on whatever has the focus.
async fn press_key(session: &Session, key: Key) {
    let key = char::from(key);
    let actions = KeyActions::new("keyboard".to_owned())
        .then(KeyAction::Down { value: key })
        .then(KeyAction::Up { value: key });
    session.client.perform_actions(actions).await.unwrap();
}

/// The focused element's tag, text and `href`, as `a /runs Runs` or `button  Run now`.
async fn focused(session: &Session) -> String {
    let described = session
        .client
        .execute(
            "var e = document.activeElement; \
             return e.tagName.toLowerCase() + ' ' + (e.getAttribute('href') || '') + ' ' + e.textContent.trim();",
            vec![],
        )
        .await
        .unwrap();
    described.as_str().unwrap_or_default().to_owned()
}

/// Tabs from the current focus until `wanted` accepts the focused element (at most 80
/// presses); every element passed, in order.
async fn tab_until(session: &Session, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let mut passed = Vec::new();
    for _ in 0..80 {
        press_key(session, Key::Tab).await;
        let now = focused(session).await;
        passed.push(now.clone());
        if wanted(&now) {
            return passed;
        }
    }
    panic!("never reached by Tab; focused in turn: {passed:?}");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_keyboard_alone_reaches_the_navigation_and_a_jobs_run_button(pool: PgPool) {
    on_seeded_cluster(pool, |session, _app, seeded| async move {
        viewport(&session, 1280, 800).await;
        let job_path = format!("/jobs/{}", seeded.job_id);
        session.goto(&job_path).await;
        session.wait_css("main h1").await;
        // The first stop skips the navigation; then the navigation, then the job's actions.
        let first = tab_until(&session, |_| true).await;
        assert!(first[0].ends_with("Skip to content"), "first stop: {first:?}");
        let passed = tab_until(&session, |now| {
            now.starts_with("button") && now.ends_with("Run now")
        })
        .await;
        assert!(
            passed.iter().any(|stop| stop.starts_with("a /runs ")),
            "the main navigation on the way: {passed:?}"
        );
        // Enter follows a link: back to the top, to the navigation's Runs.
        session.goto(&job_path).await;
        session.wait_css("main h1").await;
        tab_until(&session, |now| now.starts_with("a /runs ")).await;
        press_key(&session, Key::Enter).await;
        session.wait_path("the runs list", |path| path == "/runs").await;

        // Narrow, the navigation hides behind a menu button that Enter opens.
        viewport(&session, 360, 740).await;
        session.goto(&job_path).await;
        session.wait_css("main h1").await;
        let nav = session.wait_css("header.top nav").await;
        assert!(!nav.is_displayed().await.unwrap(), "folded at 360 px");
        tab_until(&session, |now| now.starts_with("button") && now.ends_with("Menu")).await;
        press_key(&session, Key::Enter).await;
        assert!(nav.is_displayed().await.unwrap(), "unfolded by Enter");
        let toggle = session.wait_css("header.top .menu-toggle").await;
        assert_eq!(
            toggle.attr("aria-expanded").await.unwrap().as_deref(),
            Some("true")
        );
        tab_until(&session, |now| now.starts_with("a /runs ")).await;
        press_key(&session, Key::Enter).await;
        session.wait_path("the runs list", |path| path == "/runs").await;
    })
    .await;
}

/// The run ids the runs list shows, in order.
async fn listed_runs(session: &Session) -> Vec<i64> {
    let ids = session
        .client
        .execute(
            "return Array.from(document.querySelectorAll('table.runs tbody tr td:first-child a'))\
                    .map(function (a) { return Number(a.getAttribute('href').split('/').pop()); });",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(ids).unwrap()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn twenty_runs_fit_a_1280_by_800_screen(pool: PgPool) {
    on_seeded_cluster(pool, |session, _app, _seeded| async move {
        viewport(&session, 1280, 800).await;
        session.goto("/runs").await;
        session.wait_css("table.runs").await;
        let visible = session
            .client
            .execute(
                "return Array.from(document.querySelectorAll('table.runs tbody tr'))\
                        .filter(function (row) { return row.getBoundingClientRect().bottom <= window.innerHeight; })\
                        .length;",
                vec![],
            )
            .await
            .unwrap();
        session.screenshot("runs-dense-1280x800").await;
        assert!(
            visible.as_u64().unwrap() >= 20,
            "rows visible without scrolling: {visible}"
        );
    })
    .await;
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_sorted_runs_list_keeps_its_sort_across_a_filter_and_a_page(pool: PgPool) {
    on_seeded_cluster(pool, |session, app, _seeded| async move {
        viewport(&session, 1280, 800).await;
        session.goto("/runs?limit=10").await;
        // Longest first, by the column's header.
        session.click("th a.sort[href*='sort=duration']").await;
        eventually(PAGE_WAIT, "the sort in the address", || async {
            let url = session.client.current_url().await.ok()?;
            url.query()?.contains("sort=duration&dir=desc").then_some(())
        })
        .await;
        let header = session.wait_css("th[aria-sort='descending'] a.sort").await;
        // (Headers are shown upper-case.)
        assert_eq!(header.text().await.unwrap().trim().to_lowercase(), "took");
        // A filter by job name keeps it.
        session
            .type_into("form.filters input[name=job]", "layout-alpha")
            .await;
        session.press("form.filters", "Filter").await;
        eventually(PAGE_WAIT, "the filter in the address", || async {
            let url = session.client.current_url().await.ok()?;
            url.query()?.contains("job=layout-alpha").then_some(())
        })
        .await;
        let longest: Vec<i64> = sqlx::query_scalar(
            "SELECT runs.id FROM runs JOIN jobs ON jobs.id = runs.job_id WHERE jobs.name = 'layout-alpha'
             ORDER BY finished_at - started_at DESC, runs.id DESC",
        )
        .fetch_all(app.pool())
        .await
        .unwrap();
        assert_eq!(
            listed_runs(&session).await,
            longest[..10],
            "page 1, longest first"
        );
        // The next page keeps both.
        session.click(".pager a[href*='offset=10']").await;
        eventually(PAGE_WAIT, "the second page", || async {
            let url = session.client.current_url().await.ok()?;
            url.query()?.contains("offset=10").then_some(())
        })
        .await;
        let query = session
            .client
            .current_url()
            .await
            .unwrap()
            .query()
            .unwrap_or_default()
            .to_owned();
        for kept in ["job=layout-alpha", "sort=duration", "dir=desc", "limit=10"] {
            assert!(query.contains(kept), "{kept} kept: {query}");
        }
        assert_eq!(
            listed_runs(&session).await,
            longest[10..],
            "page 2, longest first"
        );
        // An unknown column is named, not a server error.
        session.goto("/runs?sort=colour").await;
        let body = session.text("main .alert").await;
        assert!(body.contains("sort"), "the bad parameter named: {body}");
        let found = session.client.find(Locator::Css("table.runs")).await;
        assert!(found.is_err(), "no list for a bad sort");
    })
    .await;
}
