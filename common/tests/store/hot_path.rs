//! The hot-path queries use their partial indexes.

use super::*;

/// The claim queries, as the store runs them.
use probactr_common::store::triggers::CLAIM_DUE_SQL;

use probactr_common::store::runs::CLAIM_QUEUED_SQL;

/// The plan of `EXPLAIN <sql>` with the parameters `bind` gives, as text.
async fn explain<F>(pool: &PgPool, sql: &'static str, bind: F) -> String
where
    F: for<'q> FnOnce(
        sqlx::query::QueryAs<'q, sqlx::Postgres, (String,), sqlx::postgres::PgArguments>,
    )
        -> sqlx::query::QueryAs<'q, sqlx::Postgres, (String,), sqlx::postgres::PgArguments>,
{
    let query = sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")));
    let rows = bind(query).fetch_all(pool).await.expect("explain");
    rows.into_iter()
        .map(|(line,)| line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn claim_queries_use_their_partial_indexes(pool: PgPool) {
    // 50 jobs (5 paused); 5,000 triggers mostly scheduled over the next weeks, some due,
    // some paused; 20,000 runs mostly finished, 100 queued.
    sqlx::query(
        "INSERT INTO jobs (name, kind, paused) SELECT 'job-' || g, 'noop', g % 10 = 0 FROM generate_series(1, 50) AS g",
    )
    .execute(&pool)
    .await
    .expect("jobs");
    sqlx::query(
        "INSERT INTO triggers (job_id, kind, interval_secs, paused, next_fire_at)
         SELECT (SELECT min(id) FROM jobs) + g % 50, 'interval', 60, g % 20 = 0,
                CASE WHEN g % 100 = 1 THEN now() - make_interval(secs => g)
                     ELSE now() + make_interval(secs => g * 300) END
         FROM generate_series(1, 5000) AS g",
    )
    .execute(&pool)
    .await
    .expect("triggers");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at, queued_at, available_at)
         SELECT (SELECT min(id) FROM jobs) + (g / 7) % 50, now() - make_interval(secs => g),
                CASE WHEN g % 200 = 0 THEN 'queued' ELSE 'succeeded' END,
                CASE WHEN g % 200 = 0 THEN NULL ELSE now() END,
                now() - make_interval(secs => g), now() - make_interval(secs => g)
         FROM generate_series(1, 20000) AS g",
    )
    .execute(&pool)
    .await
    .expect("runs");
    // A backlog of a paused job waiting out its backoff (an hour from now): the live runs
    // are many enough for an index to beat reading them all, and none is claimable.
    sqlx::query(
        "WITH held AS (INSERT INTO jobs (name, kind, paused) VALUES ('held', 'noop', true) RETURNING id)
         INSERT INTO runs (job_id, scheduled_at, available_at)
         SELECT held.id, now(), now() + interval '1 hour' FROM held, generate_series(1, 5000)",
    )
    .execute(&pool)
    .await
    .expect("backlog");
    // Pause the job of the oldest queued run, so the claim has runs to pass over.
    sqlx::query("UPDATE jobs SET paused = true WHERE id = (SELECT job_id FROM runs WHERE state = 'queued' ORDER BY id LIMIT 1)")
        .execute(&pool)
        .await
        .expect("pause a job with queued runs");
    sqlx::query("ANALYZE jobs, triggers, runs")
        .execute(&pool)
        .await
        .expect("analyze");

    let due_plan = explain(&pool, CLAIM_DUE_SQL, |q| q.bind(16_i64).bind(0.0_f64)).await;
    println!("EXPLAIN claim_due:\n{due_plan}\n");
    assert!(
        due_plan.contains("triggers_due"),
        "claim_due does not use triggers_due:\n{due_plan}"
    );

    let queued_plan = explain(&pool, CLAIM_QUEUED_SQL, |q| {
        q.bind(Uuid::new_v4()).bind(16_i64).bind(true).bind(16_i64)
    })
    .await;
    println!("EXPLAIN claim_queued:\n{queued_plan}\n");
    assert!(
        queued_plan.contains("runs_queued"),
        "claim_queued does not use runs_queued:\n{queued_plan}"
    );

    // The queries planned are the queries that run: on this data they find what is due.
    let mut tx = pool.begin().await.expect("begin");
    let due = triggers::claim_due(&mut tx, 1000, Duration::ZERO)
        .await
        .expect("claim due");
    assert_eq!(
        due.len(),
        50,
        "the 50 due triggers (g % 100 = 1: unpaused, of an unpaused job)"
    );
    tx.rollback().await.expect("rollback");
    let (claimable,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state = 'queued' AND NOT jobs.paused",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert!(
        claimable > 50 && claimable < 100,
        "some queued runs belong to paused jobs: {claimable}"
    );
    let claimed = runs::claim_queued(&pool, make_executor(&pool).await, 1000)
        .await
        .expect("claim queued");
    assert_eq!(
        i64::try_from(claimed.len()).expect("small"),
        claimable,
        "every queued run of an unpaused job"
    );
}
