//! Schema: invariant 1 and the retry chain.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn one_run_chain_per_trigger_instant(pool: PgPool) {
    let job = make_job(&pool, "j", |_| {}).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let at = instant(0);
    let insert = "INSERT INTO runs (job_id, trigger_id, scheduled_at) VALUES ($1, $2, $3) RETURNING id";

    let (first,): (i64,) = sqlx::query_as(insert)
        .bind(job.id)
        .bind(trigger.id)
        .bind(at)
        .fetch_one(&pool)
        .await
        .expect("first run");
    let err = sqlx::query_as::<_, (i64,)>(insert)
        .bind(job.id)
        .bind(trigger.id)
        .bind(at)
        .fetch_one(&pool)
        .await
        .expect_err("a second first attempt of the same instant");
    assert_violation(&err, UNIQUE_VIOLATION, "runs_trigger_instant");

    // The firing path: a duplicate instant is skipped, not an error; duplicates inside one
    // batch are folded too; only the genuinely new instant is inserted.
    let mut conn = pool.acquire().await.expect("connection");
    let again = insert_queued(&mut conn, &[job.id], &[trigger.id], &[at])
        .await
        .expect("insert fired");
    assert_eq!(
        again, 0,
        "ON CONFLICT DO NOTHING: the instant already has its run"
    );
    let next = instant(60);
    let batch = insert_queued(
        &mut conn,
        &[job.id, job.id, job.id],
        &[trigger.id, trigger.id, trigger.id],
        &[at, next, next],
    )
    .await
    .expect("insert fired batch");
    assert_eq!(batch, 1, "only the new instant, once");
    drop(conn);
    let (rows,): (i64,) = sqlx::query_as("SELECT count(*) FROM runs WHERE trigger_id = $1")
        .bind(trigger.id)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 2, "one row per instant");

    // Retries of the instant are further rows of the same chain, one per attempt.
    let retry = "INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id)
                 VALUES ($1, $2, $3, $4, $5) RETURNING id";
    sqlx::query_as::<_, (i64,)>(retry)
        .bind(job.id)
        .bind(trigger.id)
        .bind(at)
        .bind(2_i32)
        .bind(first)
        .fetch_one(&pool)
        .await
        .expect("attempt 2 of the same instant is allowed");
    let err = sqlx::query_as::<_, (i64,)>(retry)
        .bind(job.id)
        .bind(trigger.id)
        .bind(at)
        .bind(2_i32)
        .bind(first)
        .fetch_one(&pool)
        .await
        .expect_err("a second attempt 2 of the chain");
    assert_violation(&err, UNIQUE_VIOLATION, "runs_chain_attempt");

    // A later attempt must name its chain, and a first attempt must not.
    let err = sqlx::query("INSERT INTO runs (job_id, scheduled_at, attempt) VALUES ($1, now(), 2)")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect_err("attempt 2 without first_run_id");
    assert_violation(&err, CHECK_VIOLATION, "runs_attempt_chain");
}
