//! Creating triggers.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn create_trigger_sets_next_fire_at_or_names_the_bad_field(pool: PgPool) {
    let job = make_job(&pool, "j", |_| {}).await;
    let now = Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 30).single().expect("now");

    // Interval: first instant at the window's start.
    let mut every_minute = NewTrigger::interval(60);
    every_minute.timing.start_at = Some(now + TimeDelta::seconds(100));
    let t = triggers::create(&pool, job.id, &every_minute, now)
        .await
        .expect("interval trigger");
    assert_eq!(
        (t.timing.kind, t.timing.interval_secs, t.job_id),
        (TriggerKind::Interval, Some(60), job.id)
    );
    assert_eq!(t.next_fire_at, Some(now + TimeDelta::seconds(100)));
    // Interval without a window: the first instant is within one interval of now.
    let t = triggers::create(&pool, job.id, &NewTrigger::interval(60), now)
        .await
        .expect("interval trigger");
    let next = t.next_fire_at.expect("next_fire_at");
    assert!(
        next >= now && next <= now + TimeDelta::seconds(60),
        "next_fire_at {next}"
    );
    // Cron, with seconds: the next quarter hour.
    let t = triggers::create(&pool, job.id, &NewTrigger::cron("0 */15 * * * *", "UTC"), now)
        .await
        .expect("cron");
    assert_eq!(
        t.next_fire_at,
        Some(
            Utc.with_ymd_and_hms(2030, 6, 1, 12, 15, 0)
                .single()
                .expect("instant")
        )
    );
    assert_eq!(triggers::get(&pool, t.id).await.expect("get").expect("stored"), t);

    let before = count(&pool, "SELECT count(*) FROM triggers WHERE job_id = $1", job.id).await;
    let bad: Vec<(NewTrigger, &str)> = vec![
        (NewTrigger::cron("0 61 * * * *", "UTC"), "cron.minute"),
        (NewTrigger::cron("0 0 25 * * *", "UTC"), "cron.hour"),
        (NewTrigger::cron("every day", "UTC"), "cron"),
        (NewTrigger::cron("0 0 * * *", "Mars/Olympus"), "timezone"),
        (NewTrigger::interval(0), "interval_secs"),
        (
            NewTrigger::with(TriggerTiming {
                end_at: Some(now),
                start_at: Some(now),
                ..NewTrigger::interval(60).timing
            }),
            "end_at",
        ),
    ];
    for (definition, field) in bad {
        match triggers::create(&pool, job.id, &definition, now).await {
            Err(CreateTriggerError::Invalid(err)) => assert_eq!(err.field, field, "{definition:?}: {err}"),
            other => panic!("{definition:?}: expected Invalid naming {field}, got {other:?}"),
        }
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM triggers WHERE job_id = $1", job.id).await,
        before,
        "invalid definitions insert nothing"
    );

    // A database refusal is a Store error, not Invalid (a trigger of a missing job).
    match triggers::create(&pool, job.id + 1000, &NewTrigger::interval(60), now).await {
        Err(CreateTriggerError::Store(err)) => {
            assert_eq!(db_error(&err).constraint(), Some("triggers_job_id_fkey"));
        }
        other => panic!("expected a Store error, got {other:?}"),
    }
}

/// Runs that need no lock (parallel, unbounded) are started by the claim itself, and a
/// non-parallel `overlap = queue` job's queued runs wait unclaimed while it is active.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn claim_starts_lock_free_runs_and_holds_back_busy_queue_jobs(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let free = make_job(&pool, "free", |j| j.parallel = true).await;
    let queued = runs::queue_now(&pool, free.id).await.expect("queue");
    let claimed = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, queued.id);
    assert_eq!(
        claimed[0].state,
        RunState::Running,
        "a lock-free run starts at claim"
    );
    assert!(claimed[0].started_at.is_some());
    let done = runs::finish(
        &pool,
        queued.id,
        ex,
        None,
        &Finish {
            state: RunState::Succeeded,
            reason: None,
            exit_code: None,
            http_status: None,
            error: None,
            output: None,
            output_truncated: false,
        },
    )
    .await
    .expect("finish");
    assert_eq!(done.write, Write::Stored);

    let serial = make_job(&pool, "serial", |j| j.overlap = Overlap::Queue).await;
    let first = claimed_run(&pool, serial.id, ex).await;
    let second = runs::queue_now(&pool, serial.id).await.expect("queue second");
    assert!(
        runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty(),
        "the second run waits while the first is active"
    );
    runs::end_claim(&pool, first.id, ex, RunState::Skipped, "test")
        .await
        .expect("end");
    let next = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(next.iter().map(|r| r.id).collect::<Vec<_>>(), vec![second.id]);
}

/// A process declared dead is handed no run and can start none of its claims, even
/// before it notices (a resumed executor racing its own reaping).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_dead_executor_can_neither_claim_nor_start(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "guarded", |_| {}).await;
    let claimed = claimed_run(&pool, job.id, ex).await;
    runs::queue_now(&pool, job.id).await.expect("queue another");
    sqlx::query("UPDATE executors SET state = 'dead' WHERE id = $1")
        .bind(ex)
        .execute(&pool)
        .await
        .expect("declare dead");
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    let start = runs::start(&pool, &start_request(&claimed, ex, true, true))
        .await
        .expect("start");
    assert_eq!(start, Start::Gone);
    let fence: i64 = sqlx::query_scalar("SELECT fence FROM jobs WHERE id = $1")
        .bind(job.id)
        .fetch_one(&pool)
        .await
        .expect("fence");
    assert_eq!(fence, 0, "a refused start draws no fence");
}
