//! The run state machine: each transition moves a run only out of the states it names,
//! and every move the store makes is one `RunState::may_become` allows.

use super::*;

/// Every transition an executor or a user can ask for, tried on a run in `state`;
/// returns the states the run went through, in order.
async fn try_every_transition(
    pool: &PgPool,
    run_id: i64,
    executor: Uuid,
    fence: Option<i64>,
) -> Vec<RunState> {
    let mut seen = vec![run(pool, run_id).await.state];
    let mut note = |state: RunState| {
        if seen.last() != Some(&state) {
            seen.push(state);
        }
    };
    let request = StartRequest {
        run_id,
        job_id: run(pool, run_id).await.job_id,
        executor_id: executor,
        exclusive: true,
        fenced: true,
        lock_token: Some("lock-token"),
    };
    let _ = runs::start(pool, &request).await.expect("start");
    note(run(pool, run_id).await.state);
    let _ = runs::unclaim(pool, run_id, executor, Duration::ZERO)
        .await
        .expect("unclaim");
    note(run(pool, run_id).await.state);
    let _ = runs::end_claim(pool, run_id, executor, RunState::Skipped, "busy")
        .await
        .expect("end claim");
    note(run(pool, run_id).await.state);
    let _ = runs::finish(pool, run_id, executor, fence, &ended(RunState::Succeeded))
        .await
        .expect("finish");
    note(run(pool, run_id).await.state);
    seen
}

fn assert_allowed(path: &[RunState]) {
    for pair in path.windows(2) {
        assert!(pair[0].may_become(pair[1]), "{} became {}", pair[0], pair[1]);
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn transitions_move_runs_only_out_of_the_states_they_name(pool: PgPool) {
    let executor = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;

    // Queued: only a claim (not a start, an unclaim, an end of claim or a finish) moves it.
    let queued = runs::queue_now(&pool, job.id).await.expect("queue");
    let path = try_every_transition(&pool, queued.id, executor, None).await;
    assert_eq!(path, [RunState::Queued], "a queued run is claimed first");
    runs::request_cancel(&mut pool.acquire().await.unwrap(), queued.id, "test")
        .await
        .expect("cancel");
    assert_eq!(run(&pool, queued.id).await.state, RunState::Cancelled);

    // Claimed: the start takes it; the unclaim and the finish then find it running.
    let claimed = claimed_run(&pool, job.id, executor).await;
    let path = try_every_transition(&pool, claimed.id, executor, Some(job.fence + 1)).await;
    assert_eq!(path, [RunState::Claimed, RunState::Running, RunState::Succeeded]);
    assert_allowed(&path);

    // Ended: nothing moves it, a cancel included.
    let path = try_every_transition(&pool, claimed.id, executor, Some(job.fence + 1)).await;
    assert_eq!(path, [RunState::Succeeded]);
    let after_cancel = runs::request_cancel(&mut pool.acquire().await.unwrap(), claimed.id, "late")
        .await
        .expect("cancel");
    assert_eq!(after_cancel, Some(RunState::Succeeded));
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn another_executors_claim_is_neither_started_nor_ended(pool: PgPool) {
    let owner = make_executor(&pool).await;
    let other = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    let claimed = claimed_run(&pool, job.id, owner).await;
    let path = try_every_transition(&pool, claimed.id, other, None).await;
    assert_eq!(
        path,
        [RunState::Claimed],
        "only the claiming executor moves its claim"
    );
    assert!(runs::unclaim(&pool, claimed.id, owner, Duration::ZERO)
        .await
        .expect("unclaim"));
    assert_eq!(run(&pool, claimed.id).await.state, RunState::Queued);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn overdue_runs_are_flagged_once_and_their_executor_sees_the_flag(pool: PgPool) {
    let executor = make_executor(&pool).await;
    let job = make_job(&pool, "j", |job| job.timeout_secs = 1).await;
    let (running, _) = running_exclusive(&pool, job.id, executor).await;
    assert!(runs::flag_overdue(&pool, Duration::ZERO)
        .await
        .expect("flag")
        .is_empty());
    assert!(runs::cancel_requested(&pool, executor)
        .await
        .expect("read")
        .is_empty());

    sqlx::query("UPDATE runs SET started_at = now() - interval '1 minute' WHERE id = $1")
        .bind(running.id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        runs::flag_overdue(&pool, Duration::ZERO).await.expect("flag"),
        [running.id]
    );
    assert!(
        runs::flag_overdue(&pool, Duration::ZERO)
            .await
            .expect("again")
            .is_empty(),
        "a run is flagged once"
    );
    assert_eq!(
        runs::cancel_requested(&pool, executor).await.expect("read"),
        [running.id]
    );
    let flagged = run(&pool, running.id).await;
    assert_eq!(
        flagged.state,
        RunState::Running,
        "the flag asks; the executor stops it"
    );
    assert!(flagged.reason.is_some_and(|reason| reason.starts_with("overdue")));
}
