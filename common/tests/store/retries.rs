//! Retry policy.

use super::*;
use probactr_common::model::{RetryBackoff, RetryJitter, RetryOn};

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

/// The delay `probactr_next_attempt` gives the next attempt of `job_id` after attempt
/// `attempt` failed, in seconds (its own statement: jitter drawn anew each call).
async fn retry_delay(pool: &PgPool, job_id: i64, attempt: i32) -> f64 {
    sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM available_at - now())::float8
         FROM probactr_next_attempt(0, NULL, $2, 'failed', 1, NULL, NULL, $1, false)",
    )
    .bind(job_id)
    .bind(attempt)
    .fetch_one(pool)
    .await
    .expect("a retry")
}

/// The next attempt's delay: `fixed` repeats `initial_secs`, `exponential` doubles it
/// up to `max_secs`, and full jitter draws it between zero and that (spread, not fixed).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_retry_delay_is_fixed_or_doubling_up_to_its_bound_and_jittered(pool: PgPool) {
    let policy = |backoff, max_secs, jitter| {
        move |j: &mut NewJob| {
            j.retry_max_attempts = 10;
            j.retry_backoff_secs = 10;
            j.retry_backoff = backoff;
            j.retry_max_secs = max_secs;
            j.retry_jitter = jitter;
        }
    };
    let fixed = make_job(
        &pool,
        "fixed",
        policy(RetryBackoff::Fixed, None, RetryJitter::None),
    )
    .await;
    let doubling = make_job(
        &pool,
        "doubling",
        policy(RetryBackoff::Exponential, Some(25), RetryJitter::None),
    )
    .await;
    let jittered = make_job(
        &pool,
        "jittered",
        policy(RetryBackoff::Exponential, None, RetryJitter::Full),
    )
    .await;

    for attempt in 1..=4 {
        let wait = retry_delay(&pool, fixed.id, attempt).await;
        assert!(
            (9.9..=10.0).contains(&wait),
            "fixed after attempt {attempt}: {wait}"
        );
    }
    for (attempt, expected) in [(1, 10.0), (2, 20.0), (3, 25.0), (4, 25.0)] {
        let wait = retry_delay(&pool, doubling.id, attempt).await;
        assert!(
            (expected - 0.1..=expected).contains(&wait),
            "exponential after attempt {attempt}: {wait}, expected {expected} (max_secs 25)"
        );
    }
    // Attempt 3 failed: up to 40 s. 40 draws all in one half: 2^-39.
    let mut draws = Vec::new();
    for _ in 0..40 {
        draws.push(retry_delay(&pool, jittered.id, 3).await);
    }
    assert!(
        draws.iter().all(|d| (-0.1..=40.0).contains(d)),
        "within [0, 40]: {draws:?}"
    );
    assert!(draws.iter().any(|d| *d < 20.0), "some short: {draws:?}");
    assert!(draws.iter().any(|d| *d > 20.0), "some long: {draws:?}");
}

/// `retry_on` names the failures retried: exit 75 and HTTP 503 are, exit 1 and a timeout
/// are not; a run abandoned by its executor is, whatever it names. Without one, every
/// failure is (see `failures_queue_retries_up_to_the_limit_with_backoff`).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn retry_on_retries_only_the_failures_it_names(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "picky", |j| {
        j.retry_max_attempts = 3;
        j.retry_on = Some(RetryOn {
            exit_codes: vec![75],
            http_statuses: vec![503],
            timeouts: false,
        });
    })
    .await;
    let ends = [
        (RunState::Failed, Some(75), None, true),
        (RunState::Failed, Some(1), None, false),
        (RunState::Failed, None, Some(503), true),
        (RunState::Failed, None, Some(500), false),
        (RunState::TimedOut, None, None, false),
    ];
    for (state, exit_code, http_status, retried) in ends {
        let (run, fence) = running_exclusive(&pool, job.id, ex).await;
        let finish = Finish {
            exit_code,
            http_status,
            ..ended(state)
        };
        let done = runs::finish(&pool, run.id, ex, Some(fence), &finish)
            .await
            .expect("finish");
        assert_eq!(
            done.retry_run_id.is_some(),
            retried,
            "{state} exit {exit_code:?} http {http_status:?}"
        );
    }
    let abandoned: Option<(Option<chrono::DateTime<chrono::Utc>>,)> = sqlx::query_as(
        "SELECT available_at FROM probactr_next_attempt(0, NULL, 1, 'abandoned', NULL, NULL, NULL, $1, false)",
    )
    .bind(job.id)
    .fetch_optional(&pool)
    .await
    .expect("next attempt");
    assert!(abandoned.is_some(), "an abandoned run is retried");
}
