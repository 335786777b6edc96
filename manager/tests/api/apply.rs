//! `POST /api/v1/definitions/apply`: all checked first, nothing changed on any error.

use super::*;

impl TestApp {
    pub(super) async fn apply(&self, token: &str, query: &str, text: &str) -> Reply {
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
    // A dry run checks pools as the apply does: a job created or edited to take a pool
    // the namespace lacks is refused on `pool`.
    let poolless = fixed
        .replace("description: changed by the file", "pool: nowhere")
        .replace("name: fresh\n", "name: fresh\n    pool: nowhere\n");
    let dry = app.apply(&admin, "?dry_run=true", &poolless).await;
    assert_eq!(dry.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", dry.text);
    let fields = field_errors(&dry);
    assert_eq!(
        fields.keys().filter(|at| at.ends_with("pool")).count(),
        2,
        "both jobs refused on pool: {fields:?}"
    );
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

/// One number from the test's database.
async fn scalar(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// A file the check passes but whose last object the database refuses when it is written
/// (a trigger of the test's making refuses the workflow `doomed`): the writes before it
/// (a job edited, a job and its trigger created) are rolled back with it, and the answer
/// is a 422 naming it. Then a file whose write is twice aborted as a deadlock (SQLSTATE
/// 40P01, also of the test's making) is applied whole at the third attempt, once. Before,
/// each object was written in its own transaction: the jobs stayed, and the deadlock
/// answered 422.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_write_refused_at_the_end_rolls_back_the_whole_apply(pool: PgPool) {
    let app = TestApp::new(pool.clone());
    let admin = app.admin().await;
    let existing = app.job(&admin, noop("existing")).await;
    sqlx::raw_sql(
        "CREATE SEQUENCE test_aborts;
         CREATE FUNCTION test_refuse_workflow() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.name = 'doomed' THEN
                 RAISE EXCEPTION 'refused by the test';
             END IF;
             IF NEW.name = 'flaky' AND nextval('test_aborts') <= 2 THEN
                 RAISE EXCEPTION 'deadlock made by the test' USING ERRCODE = '40P01';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER test_refuse_workflow BEFORE INSERT ON workflows
             FOR EACH ROW EXECUTE FUNCTION test_refuse_workflow();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let audit_before = app.count("audit_log").await;
    let text = "jobs:
  - name: existing
    kind: noop
    description: changed by the file
  - name: fresh
    kind: noop
    triggers:
      - {kind: interval, interval_secs: 60}
workflows:
  - name: doomed
    steps:
      - {name: only, job: fresh}
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
        fields.keys().any(|at| at.starts_with("request:10")),
        "the refused workflow named by file and line: {fields:?}"
    );
    assert_eq!(app.count("jobs").await, 1);
    assert_eq!(app.count("triggers").await, 0);
    assert_eq!(scalar(&pool, "SELECT count(*) FROM workflows").await, 0);
    assert_eq!(app.count("audit_log").await, audit_before);
    let now = app.get(&format!("/api/v1/jobs/{}", existing["id"]), &admin).await;
    assert_eq!(now.body["version"], existing["version"]);
    assert_eq!(now.body["description"], existing["description"]);

    let applied = app.apply(&admin, "", &text.replace("doomed", "flaky")).await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    assert_eq!(
        scalar(&pool, "SELECT last_value FROM test_aborts").await,
        3,
        "two attempts aborted, the third applied"
    );
    assert_eq!(app.count("jobs").await, 2);
    assert_eq!(app.count("triggers").await, 1);
    assert_eq!(scalar(&pool, "SELECT count(*) FROM workflows").await, 1);
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM audit_log WHERE action = 'job.create'"
        )
        .await,
        2,
        "each object written once: {}",
        applied.text
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM audit_log WHERE action = 'workflow.create'"
        )
        .await,
        1
    );
}
