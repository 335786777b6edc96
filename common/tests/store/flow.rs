//! Flow control in the store: `replace` by instant, the bound of a rated job's queue, a
//! calendar deleted while a trigger takes it, and runs waiting for another job.

use probactr_common::calendar::{CalendarMode, Days};
use probactr_common::model::Rate;
use probactr_common::store::calendars;

use super::*;

/// Moves a live run's instant.
async fn set_instant(pool: &PgPool, run_id: i64, at: DateTime<Utc>) {
    sqlx::query("UPDATE runs_live SET scheduled_at = $2 WHERE id = $1")
        .bind(run_id)
        .bind(at)
        .execute(pool)
        .await
        .expect("move the instant");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn replace_stops_only_runs_of_earlier_instants(pool: PgPool) {
    let executor = make_executor(&pool).await;
    let job = make_job(&pool, "replaced", |j| j.overlap = Overlap::Replace).await;
    let (running, _) = running_exclusive(&pool, job.id, executor).await;
    set_instant(&pool, running.id, instant(100)).await;
    // Born after the running run, of an older instant (as a retry of one is).
    let older = runs::queue_now(&pool, job.id).await.expect("queue");
    set_instant(&pool, older.id, instant(50)).await;
    let replacement = runs::request_replace(&pool, job.id, older.id)
        .await
        .expect("replace");
    assert_eq!(replacement.newer, Some(running.id), "the running run is newer");
    assert!(replacement.stopping.is_empty());
    assert!(run(&pool, running.id).await.cancel_requested_at.is_none());

    let newer = runs::queue_now(&pool, job.id).await.expect("queue");
    set_instant(&pool, newer.id, instant(200)).await;
    // A retry of an older instant, born last: the newer instant's run is still the later.
    let retry = runs::queue_now(&pool, job.id).await.expect("queue");
    set_instant(&pool, retry.id, instant(60)).await;
    let beside = runs::waiting_beside(&pool, job.id, newer.id)
        .await
        .expect("waiting");
    assert_eq!(beside.later, None, "no waiting run is of a later instant");
    let beside = runs::waiting_beside(&pool, job.id, retry.id)
        .await
        .expect("waiting");
    assert_eq!(beside.later, Some(newer.id));

    let replacement = runs::request_replace(&pool, job.id, newer.id)
        .await
        .expect("replace");
    assert_eq!(replacement.newer, None);
    assert_eq!(replacement.stopping, vec![running.id]);
    let stopped = run(&pool, running.id).await;
    assert!(stopped.cancel_requested_at.is_some());
    assert!(stopped.reason.is_some_and(|r| r.contains(&newer.id.to_string())));
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_rated_jobs_queue_holds_what_its_rate_starts_within_the_threshold(pool: PgPool) {
    let job = make_job(&pool, "rated", |j| {
        j.rate = Some(Rate {
            limit: 1,
            per_secs: 3600,
        })
    })
    .await;
    let mut new_trigger = NewTrigger::interval(1);
    new_trigger.timing.misfire_threshold_secs = 60;
    let trigger = triggers::create(&pool, job.id, &new_trigger, Utc::now())
        .await
        .expect("trigger");
    let mut conn = pool.acquire().await.expect("connection");
    let instants: Vec<DateTime<Utc>> = (0..5).map(instant).collect();
    insert_queued(&mut conn, &[job.id; 5], &[trigger.id; 5], &instants)
        .await
        .expect("fire");
    drop(conn);
    // A job with a rate only as generous is not bounded by this one's.
    let roomy = make_job(&pool, "roomy", |j| {
        j.rate = Some(Rate {
            limit: 10,
            per_secs: 1,
        })
    })
    .await;
    let roomy_trigger = triggers::create(&pool, roomy.id, &new_trigger, Utc::now())
        .await
        .expect("trigger");
    let mut conn = pool.acquire().await.expect("connection");
    insert_queued(&mut conn, &[roomy.id; 5], &[roomy_trigger.id; 5], &instants)
        .await
        .expect("fire");
    drop(conn);

    let skipped = runs::skip_beyond_rate(&pool).await.expect("bound");
    assert_eq!(
        skipped.len(),
        4,
        "one run an hour: one waits within a minute's threshold"
    );
    let (kept,): (i64,) = sqlx::query_as("SELECT id FROM runs WHERE job_id = $1 AND state = 'queued'")
        .bind(job.id)
        .fetch_one(&pool)
        .await
        .expect("the oldest waits");
    assert_eq!(run(&pool, kept).await.scheduled_at, instant(0));
    let dropped = run(&pool, skipped[0]).await;
    assert_eq!(dropped.state, RunState::Skipped);
    assert!(dropped.reason.is_some_and(|r| r.contains("rate")));
    assert!(runs::skip_beyond_rate(&pool).await.expect("bound").is_empty());
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_calendar_deleted_while_a_trigger_takes_it_is_refused_with_the_trigger(pool: PgPool) {
    let job = make_job(&pool, "follower", |_| {}).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let calendar = calendars::create(&pool, "default", "holidays", "UTC", &Days::default())
        .await
        .expect("create")
        .expect("new calendar");
    let mut editing = pool.begin().await.expect("begin");
    let followed = calendars::get_to_follow(&mut editing, "default", "holidays")
        .await
        .expect("read")
        .expect("found");
    triggers::set_extras(
        &mut *editing,
        trigger.id,
        Some((followed.id, CalendarMode::Exclude)),
        None,
        None,
    )
    .await
    .expect("follow");
    let deleting = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.expect("begin");
            let outcome = calendars::delete(&mut tx, "default", "holidays").await;
            tx.commit().await.expect("commit");
            outcome
        }
    });
    wait_until_blocked(&pool).await;
    editing.commit().await.expect("commit the edit");
    let outcome = deleting.await.expect("join").expect("no foreign key failure");
    assert_eq!(outcome, Err(vec![trigger.id]));
    assert!(calendars::get(&pool, "default", "holidays")
        .await
        .expect("read")
        .is_some_and(|kept| kept.id == calendar.id));
}

/// A trigger of `job` waiting for `upstream` up to `within_secs`, in Paris.
async fn dependent_trigger(pool: &PgPool, job: &Job, upstream: &Job, within_secs: i32) -> i64 {
    let mut new_trigger = NewTrigger::interval(86_400);
    new_trigger.timing.timezone = "Europe/Paris".to_owned();
    let trigger = triggers::create(pool, job.id, &new_trigger, Utc::now())
        .await
        .expect("trigger");
    triggers::set_after(pool, trigger.id, Some((upstream.id, within_secs)))
        .await
        .expect("after");
    trigger.id
}

/// Fires `trigger_id`'s instant `at` and holds it as the firing does.
async fn fire_held(pool: &PgPool, job_id: i64, trigger_id: i64, at: DateTime<Utc>) -> i64 {
    let mut tx = pool.begin().await.expect("begin");
    insert_queued(&mut tx, &[job_id], &[trigger_id], &[at])
        .await
        .expect("fire");
    let (id,): (i64,) =
        sqlx::query_as("SELECT id FROM runs_live WHERE trigger_id = $1 AND scheduled_at = $2")
            .bind(trigger_id)
            .bind(at)
            .fetch_one(&mut *tx)
            .await
            .expect("fired");
    runs::hold_for_upstream(&mut tx, &[id]).await.expect("hold");
    tx.commit().await.expect("commit");
    id
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_dependent_run_waits_for_the_same_days_success_then_runs(pool: PgPool) {
    let executor = make_executor(&pool).await;
    let upstream = make_job(&pool, "nightly-load", |_| {}).await;
    let job = make_job(&pool, "report", |j| j.parallel = true).await;
    let trigger = dependent_trigger(&pool, &job, &upstream, 3600).await;
    // 23:30 UTC on 2026-11-25 is 00:30 on the 26th in Paris.
    let at = Utc
        .with_ymd_and_hms(2026, 11, 25, 23, 30, 0)
        .single()
        .expect("instant");
    let held = fire_held(&pool, job.id, trigger, at).await;
    let waiting = run(&pool, held).await;
    assert_eq!(waiting.state, RunState::Queued);
    assert_eq!(
        waiting.reason.as_deref(),
        Some("waiting for nightly-load of 2026-11-26")
    );
    assert!(runs::claim_queued(&pool, executor, 10)
        .await
        .expect("claim")
        .is_empty());

    // The upstream run of the day before (in Paris) does not release it.
    let before = runs::queue_now(&pool, upstream.id).await.expect("queue");
    set_instant(&pool, before.id, at - TimeDelta::minutes(31)).await;
    finish_queued(&pool, executor, before.id).await;
    assert!(runs::release_ready(&mut pool.acquire().await.expect("conn"))
        .await
        .expect("release")
        .is_empty());

    let same_day = runs::queue_now(&pool, upstream.id).await.expect("queue");
    set_instant(&pool, same_day.id, at + TimeDelta::hours(2)).await;
    finish_queued(&pool, executor, same_day.id).await;
    let released = runs::release_ready(&mut pool.acquire().await.expect("conn"))
        .await
        .expect("release");
    assert_eq!(released, vec![held]);
    let claimed = runs::claim_queued(&pool, executor, 10).await.expect("claim");
    assert_eq!(claimed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![held]);
    assert!(runs::fail_overdue(&pool).await.expect("fail").is_empty());
}

/// Claims, starts and finishes `succeeded` the queued run `run_id` (the only claimable one).
async fn finish_queued(pool: &PgPool, executor: Uuid, run_id: i64) {
    let claimed = runs::claim_queued(pool, executor, 10).await.expect("claim");
    assert_eq!(claimed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![run_id]);
    let fence = match runs::start(pool, &start_request(&claimed[0], executor, true, true))
        .await
        .expect("start")
    {
        Start::Started { fence } => fence,
        other => panic!("expected a start, got {other:?}"),
    };
    runs::finish(pool, run_id, executor, fence, &ended(RunState::Succeeded))
        .await
        .expect("finish");
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_dependent_run_past_its_deadline_fails_with_the_reason(pool: PgPool) {
    let upstream = make_job(&pool, "nightly-load", |_| {}).await;
    let job = make_job(&pool, "report", |_| {}).await;
    let trigger = dependent_trigger(&pool, &job, &upstream, 60).await;
    sqlx::query("INSERT INTO alert_rules (name, events) VALUES ('failures', '{run_failed}')")
        .execute(&pool)
        .await
        .expect("rule");
    let at = Utc::now() - TimeDelta::minutes(2);
    let held = fire_held(&pool, job.id, trigger, at).await;
    assert_eq!(runs::fail_overdue(&pool).await.expect("fail"), vec![held]);
    let failed = run(&pool, held).await;
    assert_eq!(failed.state, RunState::Failed);
    let reason = failed.reason.expect("a reason");
    assert!(reason.starts_with("waiting for nightly-load of "), "{reason}");
    assert!(failed.finished_at.is_some());
    let (events,): (Vec<String>,) =
        sqlx::query_as("SELECT array_agg(event) FROM alert_events WHERE run_id = $1")
            .bind(held)
            .fetch_one(&pool)
            .await
            .expect("events");
    assert_eq!(
        events,
        vec!["run_failed".to_owned()],
        "it raises the failure alert"
    );
    assert!(runs::release_ready(&mut pool.acquire().await.expect("conn"))
        .await
        .expect("release")
        .is_empty());
}
