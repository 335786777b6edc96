//! Reaping.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn only_dead_executors_runs_are_abandoned_and_retried_once(pool: PgPool) {
    let dead = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    let job = make_job(&pool, "retrying", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
        j.retry_max_attempts = 2;
        j.retry_backoff_secs = 5;
        // Retries, not takeovers (those are tested below).
        j.on_executor_lost = probactr_common::model::OnExecutorLost::Fail;
    })
    .await;
    let dead_run = claimed_run(&pool, job.id, dead).await;
    let started = runs::start(&pool, &start_request(&dead_run, dead, false, true))
        .await
        .expect("start");
    assert!(matches!(started, Start::Started { fence: Some(_) }));
    let live_run = claimed_run(&pool, job.id, live).await;
    runs::start(&pool, &start_request(&live_run, live, false, true))
        .await
        .expect("start");

    // Nothing is abandoned while both are alive, however old their heartbeats (invariant 6).
    sqlx::query("UPDATE runs SET heartbeat_at = now() - interval '1 day'")
        .execute(&pool)
        .await
        .expect("age runs");
    let live_before = run(&pool, live_run.id).await;
    assert!(runs::abandon_orphans(&pool).await.expect("abandon").is_empty());

    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(dead)
        .execute(&pool)
        .await
        .expect("silence");
    assert_eq!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(15))
            .await
            .expect("declare"),
        vec![dead]
    );

    // Two monitors reap at once: the first (in an open transaction) abandons and queues
    // the retry; the second waits for the row, re-checks, and does nothing.
    let mut tx = pool.begin().await.expect("begin");
    let first = runs::abandon_orphans(&mut *tx).await.expect("monitor 1");
    let (second, ()) = tokio::join!(runs::abandon_orphans(&pool), async {
        wait_until_blocked(&pool).await;
        tx.commit().await.expect("commit monitor 1");
    });
    let second = second.expect("monitor 2");
    assert!(second.is_empty(), "the second monitor reaped again: {second:?}");
    assert_eq!(first.len(), 1);
    let reaped = &first[0];
    assert_eq!(reaped.id, dead_run.id);
    assert_eq!(
        (reaped.job_id, reaped.executor_id, reaped.exclusive),
        (job.id, Some(dead), false)
    );
    assert_eq!(
        reaped.lock_token.as_deref(),
        Some("lock-token"),
        "the token to release the permit with"
    );
    let retry_id = reaped.retry_run_id.expect("retry queued");
    let retry = run(&pool, retry_id).await;
    assert_eq!(
        (retry.attempt, retry.first_run_id, retry.state),
        (2, Some(dead_run.id), RunState::Queued)
    );
    let abandoned = run(&pool, dead_run.id).await;
    assert_eq!(abandoned.state, RunState::Abandoned);
    assert_eq!(abandoned.reason.as_deref(), Some("executor lost"));
    assert!(abandoned.finished_at.is_some());
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM runs WHERE first_run_id = $1",
            dead_run.id
        )
        .await,
        1
    );

    // The live executor's run is untouched.
    assert_eq!(run(&pool, live_run.id).await, live_before);

    // Fully concurrent double reap of a second dead executor: still one retry.
    let dead2 = make_executor(&pool).await;
    let r = claimed_run(&pool, job.id, dead2).await;
    runs::start(&pool, &start_request(&r, dead2, false, false))
        .await
        .expect("start");
    assert!(processes::set_state(&pool, dead2, ProcessState::Stopped)
        .await
        .expect("stop"));
    let (x, y) = tokio::join!(runs::abandon_orphans(&pool), runs::abandon_orphans(&pool));
    let ended: Vec<_> = x.expect("x").into_iter().chain(y.expect("y")).collect();
    assert_eq!(
        ended.len(),
        1,
        "a stopped executor's run is reaped once: {ended:?}"
    );
    assert_eq!(ended[0].id, r.id);
    assert!(ended[0].retry_run_id.is_some());
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE first_run_id = $1", r.id).await,
        1
    );
    assert_eq!(run(&pool, live_run.id).await, live_before);
}

/// A run whose living executor ignores its stop is abandoned once the grace has passed,
/// but a stop asked again while the monitor waits for the run's row restarts the grace:
/// the monitor checks the run again as the other writer left it.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_stop_asked_again_restarts_the_grace_of_a_stuck_run(pool: PgPool) {
    let executor = make_executor(&pool).await;
    let job = make_job(&pool, "stubborn", |_| {}).await;
    let stuck = claimed_run(&pool, job.id, executor).await;
    runs::start(&pool, &start_request(&stuck, executor, false, true))
        .await
        .expect("start");
    sqlx::query("UPDATE runs SET cancel_requested_at = now() - interval '1 hour', reason = 'cancelled by alice' WHERE id = $1")
        .bind(stuck.id)
        .execute(&pool)
        .await
        .expect("stop asked long ago");

    let mut again = pool.begin().await.expect("begin");
    sqlx::query("UPDATE runs SET cancel_requested_at = now() WHERE id = $1")
        .bind(stuck.id)
        .execute(&mut *again)
        .await
        .expect("stop asked again");
    let (abandoned, ()) = tokio::join!(runs::abandon_stuck(&pool, Duration::from_secs(60)), async {
        wait_until_blocked(&pool).await;
        again.commit().await.expect("commit the second stop");
    });
    assert!(abandoned.expect("monitor").is_empty(), "the grace restarted");
    assert_eq!(run(&pool, stuck.id).await.state, RunState::Running);

    sqlx::query("UPDATE runs SET cancel_requested_at = now() - interval '1 hour' WHERE id = $1")
        .bind(stuck.id)
        .execute(&pool)
        .await
        .expect("the second stop long ago too");
    let abandoned = runs::abandon_stuck(&pool, Duration::from_secs(60))
        .await
        .expect("monitor");
    assert_eq!(abandoned.iter().map(|r| r.id).collect::<Vec<_>>(), vec![stuck.id]);
    let ended = run(&pool, stuck.id).await;
    assert_eq!(ended.state, RunState::Abandoned);
    assert_eq!(
        ended.reason.as_deref(),
        Some("cancelled by alice; abandoned: its executor did not stop it")
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn stale_claims_return_to_the_queue(pool: PgPool) {
    let dead = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    let job = make_job(&pool, "j", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    })
    .await;
    let of_dead = claimed_run(&pool, job.id, dead).await;
    let fresh = claimed_run(&pool, job.id, live).await;
    let old = claimed_run(&pool, job.id, live).await;
    let running = claimed_run(&pool, job.id, live).await;
    runs::start(&pool, &start_request(&running, live, false, false))
        .await
        .expect("start");
    sqlx::query("UPDATE runs SET claimed_at = now() - interval '10 minutes' WHERE id IN ($1, $2)")
        .bind(old.id)
        .bind(running.id)
        .execute(&pool)
        .await
        .expect("age claims");
    sqlx::query("UPDATE executors SET state = 'dead' WHERE id = $1")
        .bind(dead)
        .execute(&pool)
        .await
        .expect("kill");

    let mut requeued = runs::requeue_stale_claims(&pool, Duration::from_secs(60))
        .await
        .expect("requeue");
    requeued.sort_unstable();
    assert_eq!(
        requeued,
        vec![of_dead.id, old.id],
        "the dead executor's claim and the stale one"
    );
    for id in [of_dead.id, old.id] {
        let r = run(&pool, id).await;
        assert_eq!(
            (r.state, r.executor_id, r.claimed_at),
            (RunState::Queued, None, None)
        );
    }
    assert_eq!(run(&pool, fresh.id).await.state, RunState::Claimed);
    assert_eq!(
        run(&pool, running.id).await.state,
        RunState::Running,
        "running runs are not claims"
    );
    // The live executor's stale claim is gone: its start now finds nothing.
    assert_eq!(
        runs::start(&pool, &start_request(&old, live, false, false))
            .await
            .expect("start"),
        Start::Gone
    );
    assert!(runs::requeue_stale_claims(&pool, Duration::from_secs(60))
        .await
        .expect("requeue")
        .is_empty());
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn queued_first_attempts_expire_after_the_misfire_threshold(pool: PgPool) {
    let job = make_job(&pool, "j", |j| j.retry_max_attempts = 3).await;
    let mut new_trigger = NewTrigger::interval(60);
    new_trigger.timing.misfire_threshold_secs = 30;
    let trigger = triggers::create(&pool, job.id, &new_trigger, Utc::now())
        .await
        .expect("trigger");
    let mut conn = pool.acquire().await.expect("connection");
    insert_queued(
        &mut conn,
        &[job.id, job.id],
        &[trigger.id, trigger.id],
        &[instant(0), instant(60)],
    )
    .await
    .expect("fire");
    drop(conn);
    let (stale_id,): (i64,) = sqlx::query_as("SELECT id FROM runs WHERE scheduled_at = $1")
        .bind(instant(0))
        .fetch_one(&pool)
        .await
        .expect("stale");
    let (fresh_id,): (i64,) = sqlx::query_as("SELECT id FROM runs WHERE scheduled_at = $1")
        .bind(instant(60))
        .fetch_one(&pool)
        .await
        .expect("fresh");
    // An old retry of the stale instant (attempt 2) and an old run-now run.
    let (retry_id,): (i64,) = sqlx::query_as(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id, available_at)
         VALUES ($1, $2, $3, 2, $4, now() - interval '1 hour') RETURNING id",
    )
    .bind(job.id)
    .bind(trigger.id)
    .bind(instant(0))
    .bind(stale_id)
    .fetch_one(&pool)
    .await
    .expect("retry");
    let manual = runs::queue_now(&pool, job.id).await.expect("run now");
    sqlx::query(
        "UPDATE runs SET queued_at = now() - interval '31 seconds', available_at = now() - interval '31 seconds'
         WHERE id IN ($1, $2)",
    )
    .bind(stale_id)
    .bind(manual.id)
    .execute(&pool)
    .await
    .expect("age");
    // A run queued as long ago but delayed by its trigger's jitter: it could not be
    // claimed yet, so it is not late.
    let (jittered_id,): (i64,) = sqlx::query_as(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, queued_at, available_at)
         VALUES ($1, $2, $3, now() - interval '31 seconds', now() + interval '10 minutes') RETURNING id",
    )
    .bind(job.id)
    .bind(trigger.id)
    .bind(instant(120))
    .fetch_one(&pool)
    .await
    .expect("jittered");
    sqlx::query(
        "UPDATE runs SET queued_at = now() - interval '29 seconds', available_at = now() - interval '1 hour'
         WHERE id = $1",
    )
    .bind(fresh_id)
    .execute(&pool)
    .await
    .expect("age");

    let expired = runs::expire_stale_queued(&pool).await.expect("expire");
    assert_eq!(expired, vec![stale_id]);
    let missed = run(&pool, stale_id).await;
    assert_eq!(missed.state, RunState::Missed);
    assert!(missed.finished_at.is_some());
    assert!(missed.reason.is_some_and(|r| r.contains("misfire threshold")));
    assert_eq!(
        run(&pool, fresh_id).await.state,
        RunState::Queued,
        "within the threshold"
    );
    assert_eq!(
        run(&pool, retry_id).await.state,
        RunState::Queued,
        "retries are not expired"
    );
    assert_eq!(
        run(&pool, jittered_id).await.state,
        RunState::Queued,
        "a run delayed by jitter is late only from when it could start"
    );
    assert_eq!(
        run(&pool, manual.id).await.state,
        RunState::Queued,
        "run-now runs have no threshold"
    );
    assert!(runs::expire_stale_queued(&pool).await.expect("expire").is_empty());
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn prune_deletes_only_old_finished_runs(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "j", |j| j.retry_max_attempts = 2).await;
    // Old and finished: pruned.
    let (old_done, _, _) = run_to_end(&pool, job.id, ex, RunState::Succeeded).await;
    // Old, failed, with its retry still queued: kept (the retry's chain needs it).
    let (old_failed, _, retry) = run_to_end(&pool, job.id, ex, RunState::Failed).await;
    let retry = retry.retry_run_id.expect("retry");
    // Old and still queued / running: kept.
    let old_queued = runs::queue_now(&pool, job.id).await.expect("queue");
    sqlx::query("UPDATE runs SET available_at = now() + interval '1 hour' WHERE id = $1")
        .bind(old_queued.id)
        .execute(&pool)
        .await
        .expect("postpone");
    let (old_running, _) = running_exclusive(&pool, job.id, ex).await;
    sqlx::query("UPDATE runs SET queued_at = now() - interval '30 days' WHERE id IN ($1, $2, $3, $4)")
        .bind(old_done.id)
        .bind(old_failed.id)
        .bind(old_queued.id)
        .bind(old_running.id)
        .execute(&pool)
        .await
        .expect("age");
    // Recent and finished: kept.
    let recent = make_job(&pool, "recent", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    })
    .await;
    let r = claimed_run(&pool, recent.id, ex).await;
    runs::start(&pool, &start_request(&r, ex, false, false))
        .await
        .expect("start");
    runs::finish(&pool, r.id, ex, None, &ended(RunState::Succeeded))
        .await
        .expect("finish");

    let week = Duration::from_secs(7 * 24 * 3600);
    assert_eq!(
        housekeeping::prune_runs(&pool, week, 100).await.expect("prune"),
        1
    );
    assert!(runs::get(&pool, old_done.id).await.expect("get").is_none());
    for id in [old_failed.id, retry, old_queued.id, old_running.id, r.id] {
        assert!(
            runs::get(&pool, id).await.expect("get").is_some(),
            "run {id} must survive"
        );
    }
    assert_eq!(
        housekeeping::prune_runs(&pool, week, 100).await.expect("prune"),
        0
    );

    // The batch bound holds.
    let bulk = make_job(&pool, "bulk", |_| {}).await;
    runs::queue_many_now(&pool, bulk.id, 5).await.expect("queue");
    sqlx::query(
        "UPDATE runs SET state = 'succeeded', finished_at = now(), queued_at = now() - interval '30 days'
         WHERE job_id = $1",
    )
    .bind(bulk.id)
    .execute(&pool)
    .await
    .expect("finish bulk");
    assert_eq!(housekeeping::prune_runs(&pool, week, 3).await.expect("prune"), 3);
    assert_eq!(housekeeping::prune_runs(&pool, week, 3).await.expect("prune"), 2);
}

/// Starts the one claimable run of the cluster on a fresh executor, declares that
/// executor dead and reaps it; returns the reaped run and its successor, if any.
async fn lose_executor_of_next_run(pool: &PgPool) -> (Run, Option<Run>) {
    let executor = make_executor(pool).await;
    let claimed = runs::claim_queued(pool, executor, 1).await.expect("claim");
    assert_eq!(claimed.len(), 1, "one run is claimable");
    let claimed = claimed[0].clone();
    runs::start(pool, &start_request(&claimed, executor, false, false))
        .await
        .expect("start");
    assert!(processes::set_state(pool, executor, ProcessState::Dead)
        .await
        .expect("dead"));
    let reaped = runs::abandon_orphans(pool).await.expect("reap");
    assert_eq!(reaped.len(), 1);
    let next = match reaped[0].retry_run_id {
        Some(id) => Some(run(pool, id).await),
        None => None,
    };
    (run(pool, claimed.id).await, next)
}

/// A run whose executor died is taken over at once, as the next attempt of its instant,
/// even when the job allows no retries, at most `max_takeovers` times; with
/// `on_executor_lost: fail` only the retry policy applies.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_run_whose_executor_died_is_taken_over_at_most_max_takeovers_times(pool: PgPool) {
    let job = make_job(&pool, "long-daily", |j| {
        j.retry_max_attempts = 1;
        j.max_takeovers = 2;
    })
    .await;
    runs::queue_now(&pool, job.id).await.expect("queue");
    let (first, takeover) = lose_executor_of_next_run(&pool).await;
    assert_eq!(first.state, RunState::Abandoned);
    let takeover = takeover.expect("taken over");
    assert_eq!(
        (takeover.attempt, takeover.first_run_id, takeover.state),
        (2, Some(first.id), RunState::Queued)
    );
    assert!(
        takeover.available_at <= chrono::Utc::now() + chrono::TimeDelta::seconds(1),
        "at once"
    );
    assert!(
        takeover.reason.as_deref().unwrap().starts_with("takeover 1 of 2"),
        "{:?}",
        takeover.reason
    );
    let (_, second) = lose_executor_of_next_run(&pool).await;
    let second = second.expect("taken over again");
    assert_eq!(second.attempt, 3);
    assert!(second.reason.as_deref().unwrap().starts_with("takeover 2 of 2"));
    let (last, none) = lose_executor_of_next_run(&pool).await;
    assert_eq!(last.state, RunState::Abandoned);
    assert!(none.is_none(), "no takeover left and no retry allowed");

    let failing = make_job(&pool, "fail-fast", |j| {
        j.retry_max_attempts = 1;
        j.on_executor_lost = probactr_common::model::OnExecutorLost::Fail;
    })
    .await;
    runs::queue_now(&pool, failing.id).await.expect("queue");
    let (lost, none) = lose_executor_of_next_run(&pool).await;
    assert_eq!(lost.state, RunState::Abandoned);
    assert!(none.is_none(), "fail: not rerun");
}

/// An executor cut off from the database in the middle of a transaction (a stalled
/// network: no reset, so PostgreSQL keeps the session) holds the row locks of the runs it
/// was ending. Its hot-path session is ended after the idle-in-transaction timeout, so the
/// reaper's abandon of its runs waits that long and no longer.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_dead_executors_stalled_transaction_cannot_hold_its_runs_from_the_reaper(
    pool_options: sqlx::postgres::PgPoolOptions,
    options: sqlx::postgres::PgConnectOptions,
) {
    let pool = pool_options.connect_with(options.clone()).await.expect("pool");
    let executor = make_executor(&pool).await;
    let job = make_job(&pool, "cut-off", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    })
    .await;
    let claimed = claimed_run(&pool, job.id, executor).await;
    runs::start(&pool, &start_request(&claimed, executor, false, true))
        .await
        .expect("start");
    let url = probactr_testkit::database_url(&options);
    let executor_pool =
        probactr_common::store::hot_path_pool(&url, 1, Duration::from_millis(500)).expect("pool");
    let mut stalled = executor_pool.begin().await.expect("begin");
    sqlx::query("UPDATE runs SET heartbeat_at = now() WHERE id = $1")
        .bind(claimed.id)
        .execute(&mut *stalled)
        .await
        .expect("lock the run's row");

    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(executor)
        .execute(&pool)
        .await
        .expect("silence");
    processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(15))
        .await
        .expect("declare");
    let abandoned = tokio::time::timeout(Duration::from_secs(20), runs::abandon_orphans(&pool))
        .await
        .expect("the reaper waited on the stalled session's locks")
        .expect("abandon");
    assert_eq!(
        abandoned.iter().map(|run| run.id).collect::<Vec<_>>(),
        vec![claimed.id]
    );
    assert!(
        stalled.commit().await.is_err(),
        "PostgreSQL ended the stalled session"
    );
}
