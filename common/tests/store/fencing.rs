//! Fencing.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn stale_holder_is_fenced_current_holder_is_stored(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    // B runs a new run of the job, not a takeover of A's (those are tested in reaping).
    let job = make_job(&pool, "j", |j| {
        j.on_executor_lost = probactr_common::model::OnExecutorLost::Fail;
    })
    .await;
    let (run1, fence1) = running_exclusive(&pool, job.id, a).await;
    assert_eq!(fence1, 1);
    let before = run(&pool, run1.id).await;

    // A's lease expired during a pause; a newer holder drew the next token.
    let fence2: i64 = sqlx::query_scalar("UPDATE jobs SET fence = fence + 1 WHERE id = $1 RETURNING fence")
        .bind(job.id)
        .fetch_one(&pool)
        .await
        .expect("issue");
    assert_eq!(fence2, 2);
    let stale = runs::finish(&pool, run1.id, a, Some(fence1), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(
        stale,
        runs::Finished {
            write: Write::Fenced,
            retry_run_id: None
        }
    );
    assert_eq!(
        run(&pool, run1.id).await,
        before,
        "a fenced write changes nothing"
    );

    // The monitor reaps A's run (A is declared dead); B then runs the job under fence 3.
    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1")
        .bind(a)
        .execute(&pool)
        .await
        .expect("silence A");
    let monitor = Uuid::new_v4();
    assert_eq!(
        processes::declare_dead(&pool, monitor, Duration::from_secs(15))
            .await
            .expect("declare"),
        vec![a]
    );
    let reaped = runs::abandon_orphans(&pool).await.expect("abandon");
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].id, run1.id);
    let (run2, fence3) = running_exclusive(&pool, job.id, b).await;
    assert_eq!(fence3, 3);

    // A wakes up and retries its end: still fenced, and B's run is not touched.
    let late = runs::finish(&pool, run1.id, a, Some(fence1), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(late.write, Write::Fenced);
    assert_eq!(run(&pool, run1.id).await.state, RunState::Abandoned);
    assert_eq!(run(&pool, run2.id).await.state, RunState::Running);

    // The current holder's end is stored, with its details.
    let current = runs::finish(&pool, run2.id, b, Some(fence3), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(
        current,
        runs::Finished {
            write: Write::Stored,
            retry_run_id: None
        }
    );
    let stored = run(&pool, run2.id).await;
    assert_eq!(stored.state, RunState::Succeeded);
    assert_eq!(stored.exit_code, Some(0));
    assert_eq!(stored.output.as_deref(), Some("out"));
    assert!(stored.finished_at.is_some());

    // A second end of the same run (a retried write that did land) is fenced: the run is
    // no longer running.
    let twice = runs::finish(&pool, run2.id, b, Some(fence3), &ended(RunState::Failed))
        .await
        .expect("finish");
    assert_eq!(twice.write, Write::Fenced);
    assert_eq!(run(&pool, run2.id).await.state, RunState::Succeeded);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn wrong_executor_wrong_fence_and_reaped_runs_are_fenced(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    let (run1, fence1) = running_exclusive(&pool, job.id, a).await;
    let before = run(&pool, run1.id).await;

    let wrong_executor = runs::finish(&pool, run1.id, b, Some(fence1), &ended(RunState::Failed))
        .await
        .expect("finish");
    assert_eq!(
        wrong_executor.write,
        Write::Fenced,
        "another executor cannot end A's run"
    );
    let wrong_fence = runs::finish(&pool, run1.id, a, Some(fence1 + 1), &ended(RunState::Failed))
        .await
        .expect("finish");
    assert_eq!(wrong_fence.write, Write::Fenced, "a token the run does not carry");
    let no_fence = runs::finish(&pool, run1.id, a, None, &ended(RunState::Failed))
        .await
        .expect("finish");
    assert_eq!(no_fence.write, Write::Fenced, "an exclusive run needs its token");
    assert_eq!(run(&pool, run1.id).await, before, "nothing was written");

    // The monitor reaps the run while A is paused (A was declared dead).
    sqlx::query("UPDATE executors SET state = 'dead', declared_dead_at = now() WHERE id = $1")
        .bind(a)
        .execute(&pool)
        .await
        .expect("declare A dead");
    let reaped = runs::abandon_orphans(&pool).await.expect("abandon");
    assert_eq!(reaped.iter().map(|r| r.id).collect::<Vec<_>>(), vec![run1.id]);
    let abandoned = run(&pool, run1.id).await;
    assert_eq!(abandoned.state, RunState::Abandoned);
    let after_reap = runs::finish(&pool, run1.id, a, Some(fence1), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(after_reap.write, Write::Fenced, "a reaped run's end is refused");
    assert_eq!(run(&pool, run1.id).await, abandoned);
}

/// A checkpoint is saved only by the running attempt under its fence, belongs to the
/// chain of its instant (the takeover reads and replaces it), and a reaped attempt's
/// late save changes nothing.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn checkpoints_are_fenced_and_follow_the_takeover(pool: PgPool) {
    use probactr_common::store::checkpoints;
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "daily", |_| {}).await;
    let (first, fence1) = running_exclusive(&pool, job.id, a).await;
    assert_eq!(checkpoints::load(&pool, first.id).await.unwrap(), None);

    let save = |run_id, executor, fence, data: &'static [u8]| {
        let pool = pool.clone();
        async move {
            checkpoints::save(&pool, run_id, executor, fence, data)
                .await
                .unwrap()
        }
    };
    assert_eq!(save(first.id, a, Some(fence1), b"step 3").await, Write::Stored);
    assert_eq!(save(first.id, b, Some(fence1), b"not b's").await, Write::Fenced);
    assert_eq!(
        save(first.id, a, Some(fence1 + 1), b"wrong fence").await,
        Write::Fenced
    );
    assert_eq!(save(first.id, a, Some(fence1), b"step 4").await, Write::Stored);
    let info = checkpoints::info(&pool, first.id).await.unwrap().unwrap();
    assert_eq!((info.bytes, info.run_id), (6, first.id));

    // The executor dies: the run is abandoned and taken over by the next attempt.
    assert!(processes::set_state(&pool, a, ProcessState::Dead).await.unwrap());
    let reaped = runs::abandon_orphans(&pool).await.unwrap();
    let takeover = reaped[0].retry_run_id.expect("taken over");
    assert_eq!(save(first.id, a, Some(fence1), b"too late").await, Write::Fenced);
    let claimed = runs::claim_queued(&pool, b, 1).await.unwrap();
    assert_eq!(claimed[0].id, takeover);
    let Start::Started { fence: Some(fence2) } =
        runs::start(&pool, &start_request(&claimed[0], b, true, true))
            .await
            .unwrap()
    else {
        panic!("the takeover starts")
    };
    let restored = checkpoints::load(&pool, first.id).await.unwrap().unwrap();
    assert_eq!(
        (restored.data.as_slice(), restored.run_id),
        (&b"step 4"[..], first.id)
    );
    assert_eq!(save(takeover, b, Some(fence2), b"step 9").await, Write::Stored);
    let last = checkpoints::load(&pool, first.id).await.unwrap().unwrap();
    assert_eq!((last.data.as_slice(), last.run_id), (&b"step 9"[..], takeover));

    // Kept after the chain ends, until retention.
    runs::finish(&pool, takeover, b, Some(fence2), &ended(RunState::Succeeded))
        .await
        .unwrap();
    assert_eq!(
        checkpoints::prune(&pool, Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    assert!(checkpoints::info(&pool, first.id).await.unwrap().is_some());
    assert_eq!(checkpoints::prune(&pool, Duration::ZERO).await.unwrap(), 1);
}
