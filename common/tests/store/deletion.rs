//! Foreign keys and the deletion policy.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn deleting_a_trigger_keeps_runs_deleting_a_job_removes_everything(pool: PgPool) {
    let job = make_job(&pool, "doomed", |_| {}).await;
    let other = make_job(&pool, "bystander", |_| {}).await;
    let t1 = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("t1");
    let t2 = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("t2");
    let mut conn = pool.acquire().await.expect("connection");
    let inserted = insert_queued(
        &mut conn,
        &[job.id, job.id, job.id],
        &[t1.id, t1.id, t2.id],
        &[instant(0), instant(60), instant(0)],
    )
    .await
    .expect("fire");
    assert_eq!(inserted, 3);
    drop(conn);
    let manual = runs::queue_now(&pool, job.id).await.expect("run now");
    let bystander = runs::queue_now(&pool, other.id).await.expect("other job's run");

    // Deleting a trigger keeps the history it produced, detached.
    sqlx::query("DELETE FROM triggers WHERE id = $1")
        .bind(t1.id)
        .execute(&pool)
        .await
        .expect("delete trigger");
    let (detached, attached): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE trigger_id IS NULL AND scheduled_at IN ($2, $3)),
                count(*) FILTER (WHERE trigger_id = $4)
         FROM runs WHERE job_id = $1",
    )
    .bind(job.id)
    .bind(instant(0))
    .bind(instant(60))
    .bind(t2.id)
    .fetch_one(&pool)
    .await
    .expect("runs after trigger delete");
    assert_eq!(detached, 2, "t1's runs survive with trigger_id NULL");
    assert_eq!(attached, 1, "t2's run is untouched");
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        4
    );

    // Deleting the job deletes its triggers and its whole run history, and nothing else.
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("delete job");
    assert_eq!(
        count(&pool, "SELECT count(*) FROM triggers WHERE job_id = $1", job.id).await,
        0
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        0
    );
    assert!(runs::get(&pool, manual.id).await.expect("get").is_none());
    assert!(
        runs::get(&pool, bystander.id).await.expect("get").is_some(),
        "another job's run stays"
    );
    assert!(jobs::get(&pool, other.id).await.expect("get").is_some());
}
