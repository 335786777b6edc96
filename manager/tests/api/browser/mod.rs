//! The browser test: the web admin driven in headless Chromium through WebDriver
//! (chromedriver from Debian's `chromium-driver`), against a real manager served on a
//! local port, a real executor running in-process, the test's own PostgreSQL database
//! and Redis. A person's path through the admin: log in, create a shell job through the
//! form (its kind's fields only shown), add a cron trigger and see its preview (live and with the button), watch a run
//! appear in the runs list and succeed, open its output, follow a running run's output
//! live (stdout and stderr apart, the page showing the end), pause the job, delete one
//! (typing its name). Every bad field of a form is named at once; actions say what they
//! did (flash messages). Screenshots of
//! the pages go to `<target>/browser/` (the dashboard's is the test's artifact).
//!
//! Chromium is required: when it is missing the test fails and says how to install it
//! (`manager/tests/api/browser/install.sh`, which CI runs through `scripts/test`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use probactr_testkit::eventually;

use super::*;

mod forms;
mod layout;
mod workflows;

/// How long a page element may take to appear.
const PAGE_WAIT: Duration = Duration::from_secs(15);

/// How long the executor may take to run the new trigger's first instant.
const RUN_WAIT: Duration = Duration::from_secs(45);

/// What the browser's shell job prints: one line of text and one of HTML, which the run
/// page must show as text.
const GREETING: &str = "hello from headless chromium";
const MARKUP: &str = "<b>not bold</b>";

/// The first of `names` found on `PATH`.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// The program named by the variable `var` (when set), else the first of `names` on
/// `PATH`; None when that is not a file.
fn program(var: &str, names: &[&str]) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(path) => Some(PathBuf::from(path)).filter(|path| path.is_file()),
        None => on_path(names),
    }
}

/// Chromium and chromedriver, or a failure that says how to install them.
fn browser_programs() -> (PathBuf, PathBuf) {
    let chromium = program("CHROMIUM", &["chromium", "chromium-browser"]);
    let driver = program("CHROMEDRIVER", &["chromedriver"]);
    match (chromium, driver) {
        (Some(chromium), Some(driver)) => (chromium, driver),
        (chromium, _) => panic!(
            "the browser test needs headless Chromium and chromedriver, and {} not found \
             (looked at $CHROMIUM / $CHROMEDRIVER, else PATH). Install them with \
             `bash manager/tests/api/browser/install.sh` (as root; it runs `apt-get install -y chromium \
             chromium-driver`), as scripts/test does.",
            if chromium.is_none() {
                "chromium was"
            } else {
                "chromedriver was"
            }
        ),
    }
}

/// Where the screenshots go: `<target>/browser`, next to the test binary's profile
/// directory (`<target>/debug/deps/api-…`).
pub(crate) fn artifact_dir() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|dir| dir.file_name().is_some_and(|name| name == "deps"))
            .and_then(|deps| deps.parent()?.parent().map(Path::to_path_buf))
    });
    from_exe
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("browser")
}

/// A chromedriver on a port of its choosing, killed when dropped.
struct Chromedriver {
    child: Child,
    port: u16,
}

impl Chromedriver {
    async fn start(program: &Path) -> Chromedriver {
        let mut child = Command::new(program)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", program.display()));
        let stdout = child.stdout.take().expect("chromedriver's stdout");
        let mut lines = BufReader::new(stdout).lines();
        let marker = "started successfully on port ";
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await.expect("chromedriver's output") {
                if let Some(rest) = line.split(marker).nth(1) {
                    return rest.trim_end_matches('.').trim().parse::<u16>().ok();
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .expect("chromedriver announces its port");
        // Keep reading so that chromedriver never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Chromedriver { child, port }
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A WebDriver session of headless Chromium with a fresh profile.
async fn open_browser(driver: &Chromedriver, chromium: &Path, profile: &Path) -> Client {
    let options = json!({
        "binary": chromium.to_string_lossy(),
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--lang=en-US",
            "--window-size=1280,1000",
            format!("--user-data-dir={}", profile.display()),
        ],
    });
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("browserName".to_owned(), json!("chrome"));
    capabilities.insert("goog:chromeOptions".to_owned(), options);
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session of headless Chromium")
}

/// The browser's side of the test.
pub(crate) struct Session {
    client: Client,
    base: String,
    shots: PathBuf,
}

impl Session {
    pub(crate) async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|err| panic!("cannot open {path}: {err}"));
    }

    pub(crate) async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    pub(crate) async fn wait_css(&self, css: &str) -> fantoccini::elements::Element {
        match self
            .client
            .wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(err) => panic!("no `{css}` on {}: {err}", self.path().await),
        }
    }

    /// The text of the element `css`, read again when the page replaced it meanwhile.
    pub(crate) async fn text(&self, css: &str) -> String {
        eventually(PAGE_WAIT, &format!("the text of `{css}`"), || async {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            element.text().await.ok()
        })
        .await
    }

    /// Clicks the element `css`, found again if the page was refreshed meanwhile.
    pub(crate) async fn click(&self, css: &str) {
        eventually(PAGE_WAIT, &format!("a click on `{css}`"), || async {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            element.click().await.ok()
        })
        .await
    }

    /// Waits for the browser to arrive at a page whose path `arrived` accepts (after a
    /// click that navigates, the old page may still be showing).
    pub(crate) async fn wait_path(&self, what: &str, arrived: impl Fn(&str) -> bool) -> String {
        eventually(PAGE_WAIT, what, || async {
            let path = self.path().await;
            arrived(&path).then_some(path)
        })
        .await
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let field = self.wait_css(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Clicks the submit button labelled `label` inside the element `scope`, looked for
    /// again while the page showing is not yet the one that has it (a page being
    /// replaced leaves its buttons stale).
    pub(crate) async fn press(&self, scope: &str, label: &str) {
        let css = format!("{scope} button");
        eventually(
            PAGE_WAIT,
            &format!("a click on {label:?} in `{scope}`"),
            || async {
                for button in self.client.find_all(Locator::Css(&css)).await.ok()? {
                    if button.text().await.ok()?.trim() == label {
                        return button.click().await.ok();
                    }
                }
                None
            },
        )
        .await
    }

    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
        path
    }
}

/// Jobs made through the API so that the dashboard has something to show besides the
/// browser's own job: one scheduled for later, one that fails.
async fn background_jobs(app: &TestApp, token: &str) {
    let nightly = app
        .job(
            token,
            json!({"name": "nightly-report", "kind": "noop", "description": "Summarises the day"}),
        )
        .await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", nightly["id"]),
            token,
            json!({"kind": "cron", "cron": "0 30 2 * * *", "timezone": "Europe/Berlin"}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let failing = app
        .job(
            token,
            json!({"name": "disk-check", "kind": "shell", "description": "Fails on purpose",
                   "spec": {"program": "/bin/sh", "args": ["-c", "echo 'disk almost full' >&2; exit 3"]}}),
        )
        .await;
    let run = app
        .post(&format!("/api/v1/jobs/{}/run", failing["id"]), token, json!({}))
        .await;
    assert_eq!(run.status, StatusCode::ACCEPTED, "{}", run.text);
}

async fn scenario(session: Session, app: TestApp, password: String) {
    // Log in: an unauthenticated visit lands on the login form.
    session.goto("/").await;
    assert_eq!(session.path().await, "/login");
    session.screenshot("login").await;
    session.type_into("#username", "admin").await;
    session.type_into("#password", &password).await;
    session.press("form[action=\"/login\"]", "Log in").await;
    session
        .wait_path("the dashboard after logging in", |path| path == "/")
        .await;
    assert_eq!(session.text("main h1").await, "Dashboard");

    // Create a shell job through the form.
    session.goto("/jobs").await;
    session
        .wait_css("a[href=\"/jobs/new\"]")
        .await
        .click()
        .await
        .unwrap();
    session.type_into("#f-name", "browser-greeting").await;
    session
        .type_into("#f-description", "Made by the browser test")
        .await;
    session
        .wait_css("#f-kind")
        .await
        .select_by_value("shell")
        .await
        .unwrap();
    // The script shows the chosen kind's spec fields only, switching as the kind changes.
    for (kind, shown) in [
        ("shell", true),
        ("http", false),
        ("sleep", false),
        ("noop", false),
    ] {
        let fieldset = session.wait_css(&format!("fieldset[data-kind=\"{kind}\"]")).await;
        let displayed = fieldset.is_displayed().await.unwrap();
        assert_eq!(displayed, shown, "the {kind} fieldset after choosing shell");
    }
    // A form with several bad fields names all of them at once.
    session.wait_css("#f-name").await.clear().await.unwrap();
    session.click("details#advanced summary").await;
    session.type_into("#f-timeout_secs", "0").await;
    session.press("main form", "Save").await;
    for field in ["name", "timeout_secs", "spec\\.program"] {
        session.wait_css(&format!("#error-{field}")).await;
    }
    session.screenshot("job-form-errors").await;
    session.type_into("#f-name", "browser-greeting").await;
    session.type_into("#f-spec\\.program", "/bin/sh").await;
    let script = format!("echo '{GREETING}'; echo '{MARKUP}'");
    session
        .type_into("[name='spec.args']", &format!("-c\n{script}"))
        .await;
    session.type_into("#f-spec\\.env", "GREETING_FROM=browser").await;
    session.type_into("#f-timeout_secs", "30").await;
    session.screenshot("job-form").await;
    session.press("main form", "Save").await;
    let job_path = session
        .wait_path("the new job's page", |path| {
            path.strip_prefix("/jobs/")
                .is_some_and(|id| id.parse::<i64>().is_ok())
        })
        .await;
    let job_id: i64 = job_path["/jobs/".len()..].parse().unwrap();
    assert!(session.text("main h1").await.contains("browser-greeting"));
    assert_eq!(session.text(".flash").await, "Job browser-greeting created");
    let spec: Value = sqlx::query_scalar("SELECT spec FROM jobs WHERE id = $1")
        .bind(job_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(
        spec["args"],
        json!(["-c", script]),
        "one argument per line: {spec}"
    );
    assert_eq!(spec["env"], json!({"GREETING_FROM": "browser"}));
    let shown = session.text("#spec").await;
    assert!(
        shown.contains("GREETING_FROM=browser"),
        "the job page shows the spec: {shown}"
    );

    // Add a cron trigger; the form previews its next instants as one types.
    session
        .click(&format!("a[href=\"/jobs/{job_id}/triggers/new\"]"))
        .await;
    session.type_into("#f-cron", "*/2 * * * * *").await;
    session.type_into("#f-timezone", "Europe/Berlin").await;
    // The script redraws the list after each keystroke: read it whole or try again.
    eventually(PAGE_WAIT, "the live preview's 5 instants", || async {
        let items = session
            .client
            .find_all(Locator::Css("#live-preview ol.instants li time"))
            .await
            .ok()?;
        let first = items.first()?.text().await.ok()?;
        (items.len() == 5 && !first.is_empty()).then_some(())
    })
    .await;
    // The same preview without JavaScript: the Preview button.
    session.press("main form", "Preview next 5").await;
    let previewed = session
        .client
        .wait()
        .at_most(PAGE_WAIT)
        .for_element(Locator::Css("#preview ol.instants"))
        .await
        .unwrap();
    let instants = previewed.find_all(Locator::Css("li")).await.unwrap();
    assert_eq!(instants.len(), 5, "the preview lists 5 instants");
    // Each time carries its relative form (the instants are seconds away, so it may
    // already have passed when the script runs).
    let relative = instants[0]
        .find(Locator::Css("time"))
        .await
        .unwrap()
        .attr("data-relative")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(
        relative.starts_with("in ") || relative.ends_with(" ago") || relative == "now",
        "relative form: {relative}"
    );
    session.screenshot("trigger-preview").await;
    session.press("main form", "Save").await;
    session
        .wait_path("the job page after saving the trigger", |path| path == job_path)
        .await;
    let schedule = session.text("table tbody tr td code").await;
    assert_eq!(schedule, "*/2 * * * * *");

    // Watch a run appear in the runs list and succeed.
    session.goto(&format!("/runs?job_id={job_id}")).await;
    let run_link = eventually(RUN_WAIT, "a succeeded run in the runs list", || async {
        session.client.refresh().await.ok()?;
        let xpath = "//tbody/tr[td/span[contains(@class, 'badge') and contains(@class, 'succeeded')]]\
                     /td[1]/a";
        let link = session.client.find(Locator::XPath(xpath)).await.ok()?;
        link.attr("href").await.ok().flatten()
    })
    .await;
    session.screenshot("runs").await;

    // The list updates in place: a filter being typed survives the update.
    session
        .type_into("form.filters input[name=job]", "half-typed")
        .await;
    eventually(
        Duration::from_secs(15),
        "a live update of the runs list",
        || async {
            let body = session.client.find(Locator::Css("body")).await.ok()?;
            let updates = body.attr("data-live-updates").await.ok()??;
            (updates.parse::<u32>().ok()? >= 1).then_some(())
        },
    )
    .await;
    let typed = session
        .client
        .find(Locator::Css("form.filters input[name=job]"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(
        typed.as_deref(),
        Some("half-typed"),
        "the filter being typed is kept"
    );
    assert_eq!(session.path().await, "/runs", "no reload");

    // Open its output: the run page shows it, HTML as text.
    let row_output = format!("a[href=\"{run_link}#output\"]");
    session.click(&row_output).await;
    session
        .wait_path("the run's page", |path| path == run_link.as_str())
        .await;
    assert!(session.text("main h1").await.starts_with("Run #"));
    assert_eq!(session.text("main h1 .badge").await, "succeeded");
    let output = session.text("pre.output").await;
    assert!(output.contains(GREETING), "the run's output: {output:?}");
    assert!(output.contains(MARKUP), "markup shown as text: {output:?}");
    let injected = session
        .client
        .find_all(Locator::Css("pre.output b"))
        .await
        .unwrap();
    assert!(injected.is_empty(), "the output's HTML must not be rendered");
    session.screenshot("run").await;

    live_output(&session, &app).await;

    // Pause the job from its page.
    session.goto(&job_path).await;
    session.press("main .toolbar", "Pause").await;
    eventually(PAGE_WAIT, "the paused badge", || async {
        let badge = session.client.find(Locator::Css("main h1 .badge")).await.ok()?;
        (badge.text().await.ok()? == "paused").then_some(())
    })
    .await;
    assert!(session
        .client
        .find(Locator::XPath(
            "//div[contains(@class, 'toolbar')]//button[normalize-space() = 'Resume']"
        ))
        .await
        .is_ok());
    let paused: bool = sqlx::query_scalar("SELECT paused FROM jobs WHERE id = $1")
        .bind(job_id)
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert!(paused, "the job is paused in the database");
    assert_eq!(session.text(".flash").await, "Job browser-greeting paused");
    session.screenshot("job").await;
    // Said once: the next page does not repeat it.
    session.client.refresh().await.unwrap();
    session.wait_css("main h1 .badge").await;
    assert!(
        session.client.find(Locator::Css(".flash")).await.is_err(),
        "the flash shows once"
    );

    delete_with_confirmation(&session, &app).await;

    // The other pages, kept as artifacts with the dashboard.
    for (page, name) in [
        ("/jobs", "jobs"),
        ("/executors", "cluster"),
        ("/audit", "audit"),
        ("/users", "users"),
    ] {
        session.goto(page).await;
        session.wait_css("main table").await;
        session.screenshot(name).await;
    }
    session.goto("/").await;
    assert_eq!(session.text("main h1").await, "Dashboard");
    let failures = session.text("#recent-failures").await;
    assert!(failures.contains("disk-check"), "recent failures: {failures}");
    let dashboard = session.screenshot("dashboard").await;
    println!("dashboard screenshot: {}", dashboard.display());
}

/// Deleting a job asks for its name: a wrong one deletes nothing and says so, the right
/// one deletes it and says so, keeping its history readable; erasing the history of
/// the deleted job removes it for good.
async fn delete_with_confirmation(session: &Session, app: &TestApp) {
    let job = store::jobs::insert(
        app.pool(),
        &store::jobs::NewJob::new(
            "doomed-by-browser",
            probactr_common::model::JobKind::Noop,
            json!({}),
        ),
    )
    .await
    .unwrap();
    session.goto(&format!("/jobs/{}", job.id)).await;
    session.click("details.delete-job summary").await;
    session.type_into("#confirm-delete", "doomed").await;
    session.press("form.confirm-delete", "Delete job").await;
    eventually(PAGE_WAIT, "the refusal", || async {
        let flash = session.client.find(Locator::Css(".flash")).await.ok()?;
        flash.text().await.ok()?.contains("was not deleted").then_some(())
    })
    .await;
    assert!(
        store::jobs::get(app.pool(), job.id).await.unwrap().is_some(),
        "still there"
    );
    session.click("details.delete-job summary").await;
    session.type_into("#confirm-delete", "doomed-by-browser").await;
    session.press("form.confirm-delete", "Delete job").await;
    session.wait_path("the jobs list", |path| path == "/jobs").await;
    assert_eq!(
        session.text(".flash").await,
        "Job doomed-by-browser deleted; its history is kept"
    );
    let kept = store::jobs::get(app.pool(), job.id).await.unwrap().expect("kept");
    assert!(kept.deleted_at.is_some(), "retired");
    assert_eq!(kept.name, format!("doomed-by-browser (deleted #{})", job.id));
    session.goto(&format!("/jobs/{}", job.id)).await;
    session.click("details.delete-job summary").await;
    session.type_into("#confirm-delete", &kept.name).await;
    session.press("form.confirm-delete", "Erase its history").await;
    session.wait_path("the jobs list", |path| path == "/jobs").await;
    assert!(
        store::jobs::get(app.pool(), job.id).await.unwrap().is_none(),
        "erased"
    );
}

/// The page of a running run shows its output as the run prints it, stderr apart from
/// stdout, and how the run ended once it has.
async fn live_output(session: &Session, app: &TestApp) {
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("gate");
    let script = format!(
        "echo started live; while [ ! -e '{}' ]; do sleep 0.05; done; echo went wrong >&2",
        gate.display()
    );
    let spec = json!({"program": script, "shell": true});
    let job = store::jobs::insert(
        app.pool(),
        &store::jobs::NewJob::new("browser-live", probactr_common::model::JobKind::Shell, spec),
    )
    .await
    .unwrap();
    let run_id = store::runs::queue_now(app.pool(), job.id).await.unwrap().id;
    session.goto(&format!("/runs/{run_id}")).await;
    eventually(RUN_WAIT, "the first line on the run's page", || async {
        let line = session
            .client
            .find(Locator::Css("#run-output span.stdout"))
            .await
            .ok()?;
        line.text().await.ok()?.contains("started live").then_some(())
    })
    .await;
    let run = store::runs::get(app.pool(), run_id).await.unwrap().unwrap();
    assert_eq!(
        run.state,
        RunState::Running,
        "the line came while the run was running"
    );
    let download = session.wait_css("a[href$=\"/output.txt\"]").await;
    assert_eq!(
        download.attr("href").await.unwrap().as_deref(),
        Some(format!("/runs/{run_id}/output.txt").as_str())
    );
    session.screenshot("run-live").await;

    std::fs::write(&gate, b"").unwrap();
    eventually(RUN_WAIT, "the stderr line on the run's page", || async {
        let line = session
            .client
            .find(Locator::Css("#run-output span.stderr"))
            .await
            .ok()?;
        line.text().await.ok()?.contains("went wrong").then_some(())
    })
    .await;
    eventually(RUN_WAIT, "the ended run's badge", || async {
        let badge = session.client.find(Locator::Css("main h1 .badge")).await.ok()?;
        (badge.text().await.ok()? == "succeeded").then_some(())
    })
    .await;
    let output = session.text("#run-output").await;
    assert!(
        output.contains("started live") && output.contains("went wrong"),
        "{output:?}"
    );
}

/// Runs `scenario` in a fresh headless Chromium (its own profile and chromedriver) on
/// the site at `base`. The browser is gone when this returns; the scenario runs in a
/// task of its own so that a failed assertion still lets everything be shut down, and
/// its outcome is for [`raise`] once the caller has stopped what it started.
pub(crate) async fn in_browser<F, Fut>(base: String, scenario: F) -> Result<(), tokio::task::JoinError>
where
    F: FnOnce(Session) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (chromium, chromedriver) = browser_programs();
    let shots = artifact_dir();
    std::fs::create_dir_all(&shots).unwrap();
    let profile = std::env::temp_dir().join(format!("probactr-chromium-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&profile).unwrap();
    let driver = Chromedriver::start(&chromedriver).await;
    let client = open_browser(&driver, &chromium, &profile).await;
    let session = Session {
        client: client.clone(),
        base,
        shots,
    };
    let outcome = tokio::spawn(scenario(session)).await;
    let _ = client.close().await;
    driver.stop().await;
    let _ = std::fs::remove_dir_all(&profile);
    outcome
}

/// Fails the test as the scenario `what` of [`in_browser`] failed, if it did.
pub(crate) fn raise(outcome: Result<(), tokio::task::JoinError>, what: &str) {
    match outcome {
        Ok(()) => {}
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("{what} did not finish: {err}"),
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_admin_works_in_headless_chromium(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    background_jobs(&app, &token).await;

    // The manager on a local port, as a browser reaches it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service =
        probactr_manager::app(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });

    // A real executor fires the trigger the browser creates.
    let shutdown = tokio_util::sync::CancellationToken::new();
    let executor = tokio::spawn(probactr_executor::run(
        executor_config(app.pool()),
        shutdown.clone(),
    ));

    let outcome = in_browser(base, |session| scenario(session, app, password_of("admin"))).await;
    shutdown.cancel();
    let stopped = executor.await;
    server.abort();
    raise(outcome, "the browser scenario");
    stopped.unwrap().unwrap();
}
