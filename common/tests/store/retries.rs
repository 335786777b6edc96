//! Retry policy.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn failures_queue_retries_up_to_the_limit_with_backoff(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "flaky", |j| {
        j.retry_max_attempts = 3;
        j.retry_backoff_secs = 10;
    })
    .await;

    // Attempt 1 fails: attempt 2 is queued, waiting out the base backoff.
    let (run1, _, done) = run_to_end(&pool, job.id, ex, RunState::Failed).await;
    assert_eq!(done.write, Write::Stored);
    let run2_id = done.retry_run_id.expect("attempt 2 queued");
    let run2 = run(&pool, run2_id).await;
    assert_eq!(
        (run2.attempt, run2.first_run_id, run2.state),
        (2, Some(run1.id), RunState::Queued)
    );
    assert_eq!(
        (run2.job_id, run2.trigger_id, run2.scheduled_at),
        (run1.job_id, run1.trigger_id, run1.scheduled_at)
    );
    let wait = seconds_until_available(&pool, run2_id).await;
    assert!(
        (9.0..=10.0).contains(&wait),
        "attempt 2 waits the 10 s backoff, waits {wait}"
    );
    assert!(
        runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty(),
        "not claimable during backoff"
    );

    // Attempt 2 fails: attempt 3 waits twice as long, and stays in the chain of run 1.
    sqlx::query("UPDATE runs SET available_at = now() WHERE id = $1")
        .bind(run2_id)
        .execute(&pool)
        .await
        .expect("skip wait");
    let claimed = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(claimed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![run2_id]);
    let f2 = match runs::start(&pool, &start_request(&claimed[0], ex, true, true))
        .await
        .expect("start 2")
    {
        Start::Started { fence: Some(f) } => f,
        other => panic!("start 2: {other:?}"),
    };
    let done = runs::finish(&pool, run2_id, ex, Some(f2), &ended(RunState::TimedOut))
        .await
        .expect("finish 2");
    let run3_id = done.retry_run_id.expect("attempt 3 queued after a timeout");
    let run3 = run(&pool, run3_id).await;
    assert_eq!((run3.attempt, run3.first_run_id), (3, Some(run1.id)));
    let wait = seconds_until_available(&pool, run3_id).await;
    assert!(
        (19.0..=20.0).contains(&wait),
        "attempt 3 waits 2 x 10 s, waits {wait}"
    );

    // Attempt 3 fails: the policy is exhausted, nothing more is queued.
    sqlx::query("UPDATE runs SET available_at = now() WHERE id = $1")
        .bind(run3_id)
        .execute(&pool)
        .await
        .expect("skip wait");
    let claimed = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    let f3 = match runs::start(&pool, &start_request(&claimed[0], ex, true, true))
        .await
        .expect("start 3")
    {
        Start::Started { fence: Some(f) } => f,
        other => panic!("start 3: {other:?}"),
    };
    let done = runs::finish(&pool, run3_id, ex, Some(f3), &ended(RunState::Failed))
        .await
        .expect("finish 3");
    assert_eq!(
        done,
        runs::Finished {
            write: Write::Stored,
            retry_run_id: None
        }
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        3
    );

    // Success and cancellation queue nothing.
    for state in [RunState::Succeeded, RunState::Cancelled] {
        let (_, _, done) = run_to_end(&pool, job.id, ex, state).await;
        assert_eq!(
            done,
            runs::Finished {
                write: Write::Stored,
                retry_run_id: None
            },
            "{state}"
        );
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        5
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'queued'",
            job.id
        )
        .await,
        0
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn default_policy_does_not_retry(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "once", |_| {}).await;
    assert_eq!(job.retry_max_attempts, 1);
    let (_, _, done) = run_to_end(&pool, job.id, ex, RunState::Failed).await;
    assert_eq!(
        done,
        runs::Finished {
            write: Write::Stored,
            retry_run_id: None
        }
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        1
    );
}
