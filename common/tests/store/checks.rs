//! CHECK constraints.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn check_constraints_reject_bad_values(pool: PgPool) {
    let job = make_job(&pool, "base", |_| {}).await;
    make_executor(&pool).await;
    // Each statement is valid but for one value; `$1` is an existing job's id.
    let cases: &[(&'static str, &str)] = &[
        ("INSERT INTO jobs (name, kind) SELECT 'a' || $1, 'python'", "jobs_kind_valid"),
        ("INSERT INTO jobs (name, kind, overlap) SELECT 'b' || $1, 'noop', 'maybe'", "jobs_overlap_valid"),
        ("INSERT INTO jobs (name, kind, timeout_secs) SELECT 'c' || $1, 'noop', 0", "jobs_timeout_positive"),
        (
            "INSERT INTO jobs (name, kind, parallel, max_concurrency) SELECT 'd' || $1, 'noop', true, 0",
            "jobs_max_concurrency_positive",
        ),
        ("INSERT INTO jobs (name, kind, retry_max_attempts) SELECT 'e' || $1, 'noop', 0", "jobs_retry_attempts_positive"),
        ("INSERT INTO jobs (name, kind, spec) SELECT 'f' || $1, 'noop', '[]'::jsonb", "jobs_spec_object"),
        // Constraints are checked in name order, so an unknown kind is reported by
        // triggers_kind_fields (no branch of it matches); triggers_kind_valid is shown below.
        ("INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'weekly', 60)", "triggers_kind_fields"),
        (
            "INSERT INTO triggers (job_id, kind, interval_secs, misfire) VALUES ($1, 'interval', 60, 'sometimes')",
            "triggers_misfire_valid",
        ),
        ("INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'interval', 0)", "triggers_interval_positive"),
        (
            "INSERT INTO triggers (job_id, kind, interval_secs, start_at, end_at)
             VALUES ($1, 'interval', 60, '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z')",
            "triggers_window_ordered",
        ),
        (
            "INSERT INTO triggers (job_id, kind, interval_secs, start_at, end_at)
             VALUES ($1, 'interval', 60, '2030-01-02T00:00:00Z', '2030-01-01T00:00:00Z')",
            "triggers_window_ordered",
        ),
        ("INSERT INTO triggers (job_id, kind, cron, interval_secs) VALUES ($1, 'cron', '* * * * *', 60)", "triggers_kind_fields"),
        (
            "INSERT INTO runs (job_id, scheduled_at, state, finished_at) VALUES ($1, now(), 'done', now())",
            "runs_state_valid",
        ),
        ("INSERT INTO runs (job_id, scheduled_at, state) VALUES ($1, now(), 'running')", "runs_owned_when_active"),
        ("INSERT INTO runs (job_id, scheduled_at, state) VALUES ($1, now(), 'succeeded')", "runs_finished_when_terminal"),
        (
            "INSERT INTO executors (id, host, pid, version, state) SELECT gen_random_uuid(), 'h', $1::int, 'v', 'zombie'",
            "executors_state_valid",
        ),
    ];
    for (sql, constraint) in cases {
        let err = sqlx::query(*sql)
            .bind(job.id)
            .execute(&pool)
            .await
            .expect_err(sql);
        assert_violation(&err, CHECK_VIOLATION, constraint);
    }
    // triggers_kind_valid on its own (this test's database is throwaway).
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("ALTER TABLE triggers DROP CONSTRAINT triggers_kind_fields")
        .execute(&mut *tx)
        .await
        .expect("drop");
    let err = sqlx::query("INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'weekly', 60)")
        .bind(job.id)
        .execute(&mut *tx)
        .await
        .expect_err("kind weekly");
    assert_violation(&err, CHECK_VIOLATION, "triggers_kind_valid");
    tx.rollback().await.expect("rollback");

    // Nothing of the above was stored.
    let (jobs_n, triggers_n, runs_n, executors_n): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM triggers),
                (SELECT count(*) FROM runs), (SELECT count(*) FROM executors)",
    )
    .fetch_one(&pool)
    .await
    .expect("counts");
    assert_eq!((jobs_n, triggers_n, runs_n, executors_n), (1, 0, 0, 1));
}
