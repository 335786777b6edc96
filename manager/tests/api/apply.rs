//! `POST /api/v1/definitions/apply`: all checked first, nothing changed on any error.

use super::*;

impl TestApp {
    async fn apply(&self, token: &str, query: &str, text: &str) -> Reply {
        let request = Request::post(format!("/api/v1/definitions/apply{query}"))
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/yaml")
            .body(Body::from(text.to_owned()))
            .unwrap();
        self.send(request).await
    }
}

/// A file whose third job is invalid: 422 naming it by file, line and field, and the
/// server unchanged (no job, no version bumped, no audit entry). Before issue 28 the
/// valid jobs ahead of it were created.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn one_invalid_object_changes_nothing(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let existing = app.job(&admin, noop("existing")).await;
    let audit_before = app.count("audit_log").await;
    let text = "jobs:
  - name: existing
    kind: noop
    description: changed by the file
  - name: fresh
    kind: noop
    triggers:
      - {kind: interval, interval_secs: 60}
  - name: broken
    kind: noop
    timeout_secs: -5
";
    let refused = app.apply(&admin, "", text).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    let fields = field_errors(&refused);
    assert!(
        fields
            .keys()
            .any(|at| at.starts_with("request:11: ") && at.contains("timeout_secs")),
        "the bad job named by file, line and field: {fields:?}"
    );
    assert_eq!(app.count("jobs").await, 1);
    assert_eq!(app.count("triggers").await, 0);
    assert_eq!(app.count("audit_log").await, audit_before);
    let now = app.get(&format!("/api/v1/jobs/{}", existing["id"]), &admin).await;
    assert_eq!(now.body["version"], existing["version"]);

    // Fixed, a dry run says what would change and changes nothing; then it applies.
    let fixed = text.replace("timeout_secs: -5", "timeout_secs: 5");
    let dry = app.apply(&admin, "?dry_run=true", &fixed).await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.text);
    assert_eq!(dry.body["dry_run"], true);
    assert!(dry.body["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "+ job broken"));
    assert_eq!(app.count("jobs").await, 1);
    let applied = app.apply(&admin, "", &fixed).await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    assert_eq!(app.count("jobs").await, 3);
    assert_eq!(app.count("triggers").await, 1);
}
