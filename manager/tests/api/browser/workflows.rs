//! Workflows made in the browser: a workflow created with two steps and a dependency
//! through the form (the graph drawn as it is typed), a bad edit answered with every error
//! at once, then an edit adding a step, the steps shown by name on the workflow's page.

use super::*;

/// The jobs the steps run.
const JOBS: [&str; 3] = ["extract-job", "load-job", "report-job"];

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn workflows_are_created_and_edited_in_the_admin(pool: PgPool) {
    let app = TestApp::new(pool);
    let token = app.admin().await;
    for name in JOBS {
        app.job(&token, noop(name)).await;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service =
        probactr_manager::app(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });
    let outcome = in_browser(base, |session| workflow_scenario(session, password_of("admin"))).await;
    server.abort();
    raise(outcome, "the workflow scenario");
}

async fn log_in(session: &Session, password: &str) {
    session.goto("/login").await;
    session.type_into("#username", "admin").await;
    session.type_into("#password", password).await;
    session.press("form[action=\"/login\"]", "Log in").await;
    session.wait_path("the dashboard", |path| path == "/").await;
}

/// Fills step row `row`: its name, its job (by name) and what it depends on.
async fn fill_step(session: &Session, row: usize, name: &str, job: &str, depends_on: &str) {
    session.type_into(&format!("#step-{row}-name"), name).await;
    session
        .wait_css(&format!("#step-{row}-job_id"))
        .await
        .select_by_label(job)
        .await
        .unwrap();
    session
        .type_into(&format!("#step-{row}-depends_on"), depends_on)
        .await;
}

async fn workflow_scenario(session: Session, password: String) {
    log_in(&session, &password).await;
    session.goto("/workflows").await;
    session.click("#new-workflow").await;
    session
        .wait_path("the new workflow form", |path| path == "/workflows/new")
        .await;
    session.type_into("#wf-name", "browser-flow").await;
    fill_step(&session, 0, "extract", "extract-job", "").await;
    fill_step(&session, 1, "load", "load-job", "extract").await;
    // The graph follows the form: both steps, one arrow.
    session.wait_css("#dag-preview g[data-step=\"load\"]").await;
    session.wait_css("#dag-preview line.edge").await;
    session.screenshot("workflow-form").await;
    session.press("form[data-workflow-form]", "Create workflow").await;
    let page = session
        .wait_path("the new workflow's page", |path| {
            path.starts_with("/workflows/") && path != "/workflows/new"
        })
        .await;
    let steps = session.text("#steps").await;
    assert!(
        steps.contains("extract-job") && steps.contains("load-job"),
        "{steps}"
    );
    assert!(!steps.contains('#'), "steps' jobs by name, not id: {steps}");

    // A bad edit: every error at once, each field marked, the summary an alert.
    session.click("#edit-workflow").await;
    session
        .wait_path("the edit form", |path| path.ends_with("/edit"))
        .await;
    session.type_into("#wf-name", " ").await;
    fill_step(&session, 2, "report", "report-job", "nowhere").await;
    session.press("form[data-workflow-form]", "Save").await;
    let summary = session.text(".error-summary[role=alert]").await;
    assert!(
        summary.contains("name") && summary.contains("steps[2].depends_on"),
        "{summary}"
    );
    let name = session.wait_css("#wf-name").await;
    assert_eq!(name.attr("aria-invalid").await.unwrap().as_deref(), Some("true"));

    // Fixed, with the row the script adds left empty (ignored).
    session.type_into("#wf-name", "browser-flow").await;
    session.type_into("#step-2-depends_on", "load").await;
    session.click("#add-step").await;
    session.wait_css("#step-4-name").await;
    session.press("form[data-workflow-form]", "Save").await;
    session
        .wait_path("the workflow's page again", |path| path == page)
        .await;
    let steps = session.text("#steps").await;
    assert!(
        steps.contains("report") && steps.contains("report-job"),
        "{steps}"
    );
    let history = session
        .text("#history + .table-wrap table, #history + table")
        .await;
    assert!(
        history.contains("update") && history.contains("create"),
        "{history}"
    );
    session.screenshot("workflow").await;
}
