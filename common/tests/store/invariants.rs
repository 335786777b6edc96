//! Invariants 3 and 4 as PostgreSQL enforces them.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn non_parallel_job_cannot_run_twice_parallel_job_can(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;

    // Non-parallel: the second start is refused by runs_one_running_exclusive, and the
    // refused statement changes nothing (the run stays claimed, no fence is spent).
    let solo = make_job(&pool, "solo", |_| {}).await;
    let (first, fence1) = running_exclusive(&pool, solo.id, a).await;
    let second = claimed_run(&pool, solo.id, b).await;
    let refused = runs::start(&pool, &start_request(&second, b, true, true))
        .await
        .expect("start");
    assert_eq!(refused, Start::JobBusy);
    assert_eq!(
        run(&pool, second.id).await.state,
        RunState::Claimed,
        "refused start leaves the claim"
    );
    let job_now = jobs::get(&pool, solo.id).await.expect("get").expect("job");
    assert_eq!(job_now.fence, fence1, "a refused start draws no fence");
    let (running,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'running'")
            .bind(solo.id)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(running, 1);

    // Raw SQL cannot sneak past the guard either.
    let err =
        sqlx::query("UPDATE runs SET state = 'running', exclusive = true, started_at = now() WHERE id = $1")
            .bind(second.id)
            .execute(&pool)
            .await
            .expect_err("second running exclusive row");
    assert_violation(&err, UNIQUE_VIOLATION, "runs_one_running_exclusive");

    // Once the first ends, the second may start, with a newer fence.
    let done = runs::finish(&pool, first.id, a, Some(fence1), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(done.write, Write::Stored);
    let started = runs::start(&pool, &start_request(&second, b, true, true))
        .await
        .expect("start");
    assert_eq!(
        started,
        Start::Started {
            fence: Some(fence1 + 1)
        }
    );

    // Parallel: several attempts run at once (fenced with permits, and unfenced).
    let many = make_job(&pool, "many", |j| {
        j.parallel = true;
        j.max_concurrency = Some(3);
    })
    .await;
    let p1 = claimed_run(&pool, many.id, a).await;
    let p2 = claimed_run(&pool, many.id, b).await;
    let p3 = claimed_run(&pool, many.id, b).await;
    let s1 = runs::start(&pool, &start_request(&p1, a, false, true))
        .await
        .expect("start p1");
    let s2 = runs::start(&pool, &start_request(&p2, b, false, true))
        .await
        .expect("start p2");
    let s3 = runs::start(&pool, &start_request(&p3, b, false, false))
        .await
        .expect("start p3");
    assert_eq!(s1, Start::Started { fence: Some(1) });
    assert_eq!(s2, Start::Started { fence: Some(2) });
    assert_eq!(s3, Start::Started { fence: None });
    let (running,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'running'")
            .bind(many.id)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(running, 3);
    // Each parallel holder's end is still accepted: a newer permit's fence does not fence
    // an older legitimate holder of a parallel job.
    for (r, ex, f) in [(&p1, a, Some(1)), (&p2, b, Some(2)), (&p3, b, None)] {
        let done = runs::finish(&pool, r.id, ex, f, &ended(RunState::Succeeded))
            .await
            .expect("finish");
        assert_eq!(done.write, Write::Stored, "parallel run {} end", r.id);
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn start_of_a_vanished_claim_is_gone(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    let claimed = claimed_run(&pool, job.id, a).await;
    // Another executor cannot start A's claim.
    assert_eq!(
        runs::start(&pool, &start_request(&claimed, b, true, true))
            .await
            .expect("start"),
        Start::Gone
    );
    // A cancelled claim cannot be started.
    let state = runs::request_cancel(&mut pool.acquire().await.unwrap(), claimed.id, "user")
        .await
        .expect("cancel");
    assert_eq!(state, Some(RunState::Cancelled));
    assert_eq!(
        runs::start(&pool, &start_request(&claimed, a, true, true))
            .await
            .expect("start"),
        Start::Gone
    );
    assert_eq!(run(&pool, claimed.id).await.state, RunState::Cancelled);
}

/// A start that finds its claim gone must not draw the job's fencing token: that token
/// belongs to nobody, yet it makes the job's current legitimate holder stale.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn gone_start_does_not_fence_the_current_holder(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    let (holder, fence) = running_exclusive(&pool, job.id, a).await;
    // B claimed a second run (Redis forgot A's lock, say), which is cancelled before B
    // starts it.
    let late = claimed_run(&pool, job.id, b).await;
    runs::request_cancel(&mut pool.acquire().await.unwrap(), late.id, "user")
        .await
        .expect("cancel");
    assert_eq!(
        runs::start(&pool, &start_request(&late, b, true, true))
            .await
            .expect("start"),
        Start::Gone
    );

    let done = runs::finish(&pool, holder.id, a, Some(fence), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(
        done.write,
        Write::Stored,
        "the legitimate holder's end is recorded"
    );
    assert_eq!(
        jobs::get(&pool, job.id).await.expect("get").expect("job").fence,
        fence,
        "no fence drawn"
    );
}
