//! The storage layer against a real PostgreSQL (`DATABASE_URL`, e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`).
//!
//! Every test gets its own freshly migrated database from `#[sqlx::test]`, so the tests
//! run in parallel without seeing each other's rows. Races are staged deterministically
//! where the property depends on one: the first party runs inside an open transaction
//! (holding its row locks), the second is started and observed waiting on a lock in
//! `pg_stat_activity`, then the first commits.
//!
//! Constraint violations are asserted by constraint name and SQLSTATE, so a test fails if
//! the constraint is dropped or renamed, not merely if "something" went wrong.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use probactr_common::fence::{self, Write};
use probactr_common::model::{Job, JobKind, Overlap, ProcessRole, ProcessState, Run, RunState, TriggerKind};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::processes::{self, Heartbeat, Registration};
use probactr_common::store::runs::{self, Finish, Start, StartRequest};
use probactr_common::store::triggers::{self, CreateTriggerError, NewTrigger};
use probactr_common::store::{reaping, StoreError};
use sqlx::PgPool;
use uuid::Uuid;

const CHECK_VIOLATION: &str = "23514";
const UNIQUE_VIOLATION: &str = "23505";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// A job with the schema's defaults, adjusted by `edit`.
async fn make_job(pool: &PgPool, name: &str, edit: impl FnOnce(&mut NewJob)) -> Job {
    let mut job = NewJob::new(name, JobKind::Noop, serde_json::json!({}));
    edit(&mut job);
    jobs::insert(pool, &job).await.expect("insert job")
}

/// A registered, alive executor.
async fn make_executor(pool: &PgPool) -> Uuid {
    let who = Registration {
        id: Uuid::new_v4(),
        role: ProcessRole::Executor,
        host: "test-host".to_owned(),
        pid: 4242,
        version: "test".to_owned(),
        capacity: 4,
    };
    processes::register(pool, &who).await.expect("register executor");
    who.id
}

/// Queues a run-now run of `job_id` and claims exactly that run for `executor`.
/// Callers keep at most this one run claimable, so `claim_queued` must return it.
async fn claimed_run(pool: &PgPool, job_id: i64, executor: Uuid) -> Run {
    let queued = runs::queue_now(pool, job_id).await.expect("queue run");
    let claimed = runs::claim_queued(pool, executor, 1).await.expect("claim");
    assert_eq!(claimed.len(), 1, "the run just queued is claimable");
    assert_eq!(claimed[0].id, queued.id, "claimed the run just queued");
    assert_eq!(claimed[0].state, RunState::Claimed);
    claimed[0].clone()
}

fn start_request(run: &Run, executor: Uuid, exclusive: bool, fenced: bool) -> StartRequest<'static> {
    StartRequest {
        run_id: run.id,
        job_id: run.job_id,
        executor_id: executor,
        exclusive,
        fenced,
        lock_token: if fenced { Some("lock-token") } else { None },
    }
}

/// Queues, claims and starts a run as an executor holding the job's mutex would
/// (exclusive and fenced); returns the run and its fence.
async fn running_exclusive(pool: &PgPool, job_id: i64, executor: Uuid) -> (Run, i64) {
    let run = claimed_run(pool, job_id, executor).await;
    match runs::start(pool, &start_request(&run, executor, true, true))
        .await
        .expect("start")
    {
        Start::Started { fence: Some(fence) } => (run, fence),
        other => panic!("expected a fenced start, got {other:?}"),
    }
}

/// Runs one attempt of `job_id` on `executor` through a fenced start and a stored
/// finish in `state`: the run, its fence and what the finish answered.
async fn run_to_end(
    pool: &PgPool,
    job_id: i64,
    executor: Uuid,
    state: RunState,
) -> (Run, i64, runs::Finished) {
    let (run, fence) = running_exclusive(pool, job_id, executor).await;
    let done = runs::finish(pool, run.id, executor, Some(fence), &ended(state))
        .await
        .expect("finish");
    (run, fence, done)
}

fn ended(state: RunState) -> Finish {
    Finish {
        state,
        reason: None,
        exit_code: Some(if state == RunState::Succeeded { 0 } else { 1 }),
        http_status: None,
        error: None,
        output: Some("out".to_owned()),
        output_truncated: false,
    }
}

async fn run(pool: &PgPool, id: i64) -> Run {
    runs::get(pool, id).await.expect("get run").expect("run exists")
}

async fn count(pool: &PgPool, sql: &'static str, id: i64) -> i64 {
    let (n,): (i64,) = sqlx::query_as(sql).bind(id).fetch_one(pool).await.expect("count");
    n
}

/// The database error inside a store error.
fn db_error(err: &StoreError) -> &dyn sqlx::error::DatabaseError {
    match err {
        StoreError::Database(err) => err.as_database_error().expect("a database error"),
        other => panic!("expected a database error, got {other}"),
    }
}

/// Asserts that `err` is the violation of `constraint` with SQLSTATE `code`.
fn assert_violation(err: &sqlx::Error, code: &str, constraint: &str) {
    let db = err
        .as_database_error()
        .unwrap_or_else(|| panic!("expected a database error, got {err}"));
    assert_eq!(db.constraint(), Some(constraint), "violated constraint of: {db}");
    assert_eq!(db.code().as_deref(), Some(code), "SQLSTATE of: {db}");
}

/// Waits until some session of this test's database waits on a lock (the staged second
/// party of a race is blocked behind the first).
async fn wait_until_blocked(pool: &PgPool) {
    for _ in 0..500 {
        let (waiting,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the second party never waited on a lock");
}

/// Seconds from the database's clock to a run's `available_at`.
async fn seconds_until_available(pool: &PgPool, run_id: i64) -> f64 {
    let (secs,): (f64,) =
        sqlx::query_as("SELECT EXTRACT(EPOCH FROM available_at - now())::float8 FROM runs WHERE id = $1")
            .bind(run_id)
            .fetch_one(pool)
            .await
            .expect("available_at");
    secs
}

fn instant(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_900_000_000 + secs, 0)
        .single()
        .expect("valid instant")
}

// ---------------------------------------------------------------------------------------
// 1. Schema: invariant 1 and the retry chain
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

// ---------------------------------------------------------------------------------------
// 2. CHECK constraints
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn check_constraints_reject_bad_values(pool: PgPool) {
    let job = make_job(&pool, "base", |_| {}).await;
    make_executor(&pool).await;
    // Each statement is valid but for one value; `$1` is an existing job's id.
    let cases: &[(&'static str, &str)] = &[
        ("INSERT INTO jobs (name, kind) SELECT 'a' || $1, 'python'", "jobs_kind_valid"),
        ("INSERT INTO jobs (name, kind, overlap) SELECT 'b' || $1, 'noop', 'maybe'", "jobs_overlap_valid"),
        ("INSERT INTO jobs (name, kind, timeout_secs) SELECT 'c' || $1, 'noop', 0", "jobs_timeout_positive"),
        (
            "INSERT INTO jobs (name, kind, parallel, max_concurrency) SELECT 'd' || $1, 'noop', true, 0",
            "jobs_max_concurrency_positive",
        ),
        ("INSERT INTO jobs (name, kind, retry_max_attempts) SELECT 'e' || $1, 'noop', 0", "jobs_retry_attempts_positive"),
        ("INSERT INTO jobs (name, kind, spec) SELECT 'f' || $1, 'noop', '[]'::jsonb", "jobs_spec_object"),
        // Constraints are checked in name order, so an unknown kind is reported by
        // triggers_kind_fields (no branch of it matches); triggers_kind_valid is shown below.
        ("INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'weekly', 60)", "triggers_kind_fields"),
        (
            "INSERT INTO triggers (job_id, kind, interval_secs, misfire) VALUES ($1, 'interval', 60, 'sometimes')",
            "triggers_misfire_valid",
        ),
        ("INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'interval', 0)", "triggers_interval_positive"),
        (
            "INSERT INTO triggers (job_id, kind, interval_secs, start_at, end_at)
             VALUES ($1, 'interval', 60, '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z')",
            "triggers_window_ordered",
        ),
        (
            "INSERT INTO triggers (job_id, kind, interval_secs, start_at, end_at)
             VALUES ($1, 'interval', 60, '2030-01-02T00:00:00Z', '2030-01-01T00:00:00Z')",
            "triggers_window_ordered",
        ),
        ("INSERT INTO triggers (job_id, kind, cron, interval_secs) VALUES ($1, 'cron', '* * * * *', 60)", "triggers_kind_fields"),
        (
            "INSERT INTO runs (job_id, scheduled_at, state, finished_at) VALUES ($1, now(), 'done', now())",
            "runs_state_valid",
        ),
        ("INSERT INTO runs (job_id, scheduled_at, state) VALUES ($1, now(), 'running')", "runs_owned_when_active"),
        ("INSERT INTO runs (job_id, scheduled_at, state) VALUES ($1, now(), 'succeeded')", "runs_finished_when_terminal"),
        (
            "INSERT INTO executors (id, host, pid, version, state) SELECT gen_random_uuid(), 'h', $1::int, 'v', 'zombie'",
            "executors_state_valid",
        ),
    ];
    for (sql, constraint) in cases {
        let err = sqlx::query(*sql)
            .bind(job.id)
            .execute(&pool)
            .await
            .expect_err(sql);
        assert_violation(&err, CHECK_VIOLATION, constraint);
    }
    // triggers_kind_valid on its own (this test's database is throwaway).
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("ALTER TABLE triggers DROP CONSTRAINT triggers_kind_fields")
        .execute(&mut *tx)
        .await
        .expect("drop");
    let err = sqlx::query("INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'weekly', 60)")
        .bind(job.id)
        .execute(&mut *tx)
        .await
        .expect_err("kind weekly");
    assert_violation(&err, CHECK_VIOLATION, "triggers_kind_valid");
    tx.rollback().await.expect("rollback");

    // Nothing of the above was stored.
    let (jobs_n, triggers_n, runs_n, executors_n): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM triggers),
                (SELECT count(*) FROM runs), (SELECT count(*) FROM executors)",
    )
    .fetch_one(&pool)
    .await
    .expect("counts");
    assert_eq!((jobs_n, triggers_n, runs_n, executors_n), (1, 0, 0, 1));
}

// ---------------------------------------------------------------------------------------
// 3. Foreign keys and the deletion policy
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

// ---------------------------------------------------------------------------------------
// 4. Invariants 3 and 4 as PostgreSQL enforces them
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
    let state = runs::request_cancel(&pool, claimed.id, "user")
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
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn gone_start_does_not_fence_the_current_holder(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    let (holder, fence) = running_exclusive(&pool, job.id, a).await;
    // B claimed a second run (Redis forgot A's lock, say), which is cancelled before B
    // starts it.
    let late = claimed_run(&pool, job.id, b).await;
    runs::request_cancel(&pool, late.id, "user")
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

// ---------------------------------------------------------------------------------------
// 5. Fencing
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn stale_holder_is_fenced_current_holder_is_stored(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    let (run1, fence1) = running_exclusive(&pool, job.id, a).await;
    assert_eq!(fence1, 1);
    let before = run(&pool, run1.id).await;

    // A's lease expired during a pause; a newer holder drew the next token.
    let fence2 = fence::issue(&pool, job.id).await.expect("issue");
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
    let reaped = reaping::abandon_orphans(&pool).await.expect("abandon");
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
    let reaped = reaping::abandon_orphans(&pool).await.expect("abandon");
    assert_eq!(reaped.iter().map(|r| r.id).collect::<Vec<_>>(), vec![run1.id]);
    let abandoned = run(&pool, run1.id).await;
    assert_eq!(abandoned.state, RunState::Abandoned);
    let after_reap = runs::finish(&pool, run1.id, a, Some(fence1), &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(after_reap.write, Write::Fenced, "a reaped run's end is refused");
    assert_eq!(run(&pool, run1.id).await, abandoned);
}

// ---------------------------------------------------------------------------------------
// 6. Retry policy
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

// ---------------------------------------------------------------------------------------
// 7. Claiming queued runs
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn claim_takes_oldest_available_runs_of_unpaused_jobs(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "live", |_| {}).await;
    let paused = make_job(&pool, "paused", |j| j.paused = true).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(runs::queue_now(&pool, job.id).await.expect("queue").id);
    }
    // Age by available_at, deliberately not in id order: oldest are ids[3], ids[1], ids[4].
    for (id, minutes) in [(ids[0], 1), (ids[1], 4), (ids[2], 2), (ids[3], 5), (ids[4], 3)] {
        sqlx::query("UPDATE runs SET available_at = now() - make_interval(mins => $2) WHERE id = $1")
            .bind(id)
            .bind(minutes)
            .execute(&pool)
            .await
            .expect("age");
    }
    let of_paused = runs::queue_now(&pool, paused.id).await.expect("queue paused");
    sqlx::query("UPDATE runs SET available_at = now() - interval '1 day' WHERE id = $1")
        .bind(of_paused.id)
        .execute(&pool)
        .await
        .expect("age");
    let future = runs::queue_now(&pool, job.id).await.expect("queue future");
    sqlx::query("UPDATE runs SET available_at = now() + interval '1 hour' WHERE id = $1")
        .bind(future.id)
        .execute(&pool)
        .await
        .expect("postpone");

    let first = runs::claim_queued(&pool, ex, 3).await.expect("claim");
    let first_ids: BTreeSet<i64> = first.iter().map(|r| r.id).collect();
    assert_eq!(
        first_ids,
        BTreeSet::from([ids[3], ids[1], ids[4]]),
        "the three oldest by available_at"
    );
    for r in &first {
        assert_eq!((r.state, r.executor_id), (RunState::Claimed, Some(ex)));
        assert!(r.claimed_at.is_some());
    }
    let rest = runs::claim_queued(&pool, ex, 10).await.expect("claim rest");
    let rest_ids: BTreeSet<i64> = rest.iter().map(|r| r.id).collect();
    assert_eq!(
        rest_ids,
        BTreeSet::from([ids[2], ids[0]]),
        "never the paused job's, never the postponed"
    );
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    assert_eq!(run(&pool, of_paused.id).await.state, RunState::Queued);
    assert_eq!(run(&pool, future.id).await.state, RunState::Queued);

    // Resuming the job makes its run claimable.
    jobs::set_paused(&pool, paused.id, false).await.expect("resume");
    let resumed = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(
        resumed.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![of_paused.id]
    );
}

/// The executor starts claimed runs in the order `claim_queued` returns them, so for two
/// queued runs of one job the older must come first.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn claim_returns_runs_oldest_first(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    runs::queue_many_now(&pool, job.id, 20).await.expect("queue");
    // Older by available_at the higher the id, so id order and age order disagree.
    sqlx::query("UPDATE runs SET available_at = now() - make_interval(secs => id)")
        .execute(&pool)
        .await
        .expect("age");
    let claimed = runs::claim_queued(&pool, ex, 20).await.expect("claim");
    let order: Vec<i64> = claimed.iter().map(|r| r.id).collect();
    let mut oldest_first = order.clone();
    oldest_first.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(
        order, oldest_first,
        "claimed runs in the order they were returned"
    );
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn concurrent_claimers_never_share_a_run(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    assert_eq!(runs::queue_many_now(&pool, job.id, 10).await.expect("queue"), 10);

    // A claims inside an open transaction (its rows stay locked); B, on another
    // connection, skips them instead of waiting, and takes the rest.
    let mut tx_a = pool.begin().await.expect("begin");
    let claimed_a = runs::claim_queued(&mut *tx_a, a, 4).await.expect("claim A");
    assert_eq!(claimed_a.len(), 4);
    let claimed_b = tokio::time::timeout(Duration::from_secs(5), runs::claim_queued(&pool, b, 100))
        .await
        .expect("B does not wait for A's locks")
        .expect("claim B");
    assert_eq!(claimed_b.len(), 6);
    tx_a.commit().await.expect("commit A");
    let set_a: BTreeSet<i64> = claimed_a.iter().map(|r| r.id).collect();
    let set_b: BTreeSet<i64> = claimed_b.iter().map(|r| r.id).collect();
    assert!(set_a.is_disjoint(&set_b), "A {set_a:?} and B {set_b:?} overlap");
    let (mine_a, mine_b): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE executor_id = $1), count(*) FILTER (WHERE executor_id = $2)
         FROM runs WHERE state = 'claimed'",
    )
    .bind(a)
    .bind(b)
    .fetch_one(&pool)
    .await
    .expect("owners");
    assert_eq!((mine_a, mine_b), (4, 6));

    // Truly concurrent claimers over a larger queue: every run claimed exactly once.
    let more = make_job(&pool, "more", |_| {}).await;
    runs::queue_many_now(&pool, more.id, 200).await.expect("queue");
    let mut sets = Vec::new();
    for _ in 0..4 {
        let (x, y) = tokio::join!(runs::claim_queued(&pool, a, 30), runs::claim_queued(&pool, b, 30));
        sets.push(x.expect("claim x"));
        sets.push(y.expect("claim y"));
    }
    let all: Vec<i64> = sets.iter().flatten().map(|r| r.id).collect();
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "a run was returned to two claimers");
    assert_eq!(all.len(), 200);
}

// ---------------------------------------------------------------------------------------
// 8. Processes: registration, heartbeats, declaring dead exactly once
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn a_silent_executor_is_declared_dead_by_exactly_one_monitor(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    let row = processes::get(&pool, ex).await.expect("get").expect("registered");
    assert_eq!(
        (row.role, row.state, row.host.as_str()),
        (ProcessRole::Executor, ProcessState::Alive, "test-host")
    );
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::Alive
    );
    assert!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(60))
            .await
            .expect("declare")
            .is_empty()
    );

    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(ex)
        .execute(&pool)
        .await
        .expect("silence");
    let (m1, m2) = (Uuid::new_v4(), Uuid::new_v4());
    let (r1, r2) = tokio::join!(
        processes::declare_dead(&pool, m1, Duration::from_millis(100)),
        processes::declare_dead(&pool, m2, Duration::from_millis(100)),
    );
    let (r1, r2) = (r1.expect("monitor 1"), r2.expect("monitor 2"));
    let mut declared: Vec<Uuid> = r1.iter().chain(r2.iter()).copied().collect();
    declared.sort();
    // `live` heartbeated at registration, but 100 ms may have passed: only count `ex`.
    assert_eq!(
        declared.iter().filter(|id| **id == ex).count(),
        1,
        "declared by exactly one: {r1:?} {r2:?}"
    );
    let row = processes::get(&pool, ex).await.expect("get").expect("row");
    assert_eq!(row.state, ProcessState::Dead);
    assert!(row.declared_dead_at.is_some());
    let winner = if r1.contains(&ex) { m1 } else { m2 };
    assert_eq!(
        row.reaped_by,
        Some(winner),
        "reaped_by names the monitor that declared it"
    );

    // The dead process learns it at its next heartbeat, and cannot revive itself.
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::DeclaredDead
    );
    assert!(!processes::set_state(&pool, ex, ProcessState::Alive)
        .await
        .expect("set state"));
    assert_eq!(
        processes::get(&pool, ex).await.expect("get").expect("row").state,
        ProcessState::Dead
    );
    let _ = live;
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn declaring_dead_is_conditional_under_a_staged_race(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(ex)
        .execute(&pool)
        .await
        .expect("silence");

    // Monitor 1 declares inside an open transaction; monitor 2 blocks on the row and, once
    // monitor 1 commits, re-checks the condition and declares nothing.
    let mut tx = pool.begin().await.expect("begin");
    let first = processes::declare_dead(&mut *tx, Uuid::new_v4(), Duration::from_secs(15))
        .await
        .expect("monitor 1");
    assert_eq!(first, vec![ex]);
    let (second, ()) = tokio::join!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(15)),
        async {
            wait_until_blocked(&pool).await;
            tx.commit().await.expect("commit monitor 1");
        }
    );
    assert_eq!(second.expect("monitor 2"), Vec::<Uuid>::new());

    // A process that heartbeats in time is never declared; a draining one can be.
    assert_eq!(
        processes::heartbeat(&pool, live).await.expect("heartbeat"),
        Heartbeat::Alive
    );
    assert!(processes::set_state(&pool, live, ProcessState::Draining)
        .await
        .expect("drain"));
    assert_eq!(
        processes::heartbeat(&pool, live).await.expect("heartbeat"),
        Heartbeat::Alive,
        "draining still beats"
    );
    assert!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(15))
            .await
            .expect("declare")
            .is_empty()
    );
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::DeclaredDead
    );
}

// ---------------------------------------------------------------------------------------
// 9. Reaping
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn only_dead_executors_runs_are_abandoned_and_retried_once(pool: PgPool) {
    let dead = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    let job = make_job(&pool, "retrying", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
        j.retry_max_attempts = 2;
        j.retry_backoff_secs = 5;
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
    assert!(reaping::abandon_orphans(&pool).await.expect("abandon").is_empty());

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
    let first = reaping::abandon_orphans(&mut *tx).await.expect("monitor 1");
    let (second, ()) = tokio::join!(reaping::abandon_orphans(&pool), async {
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
    let (x, y) = tokio::join!(reaping::abandon_orphans(&pool), reaping::abandon_orphans(&pool));
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

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

    let mut requeued = reaping::requeue_stale_claims(&pool, Duration::from_secs(60))
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
    assert!(reaping::requeue_stale_claims(&pool, Duration::from_secs(60))
        .await
        .expect("requeue")
        .is_empty());
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn queued_first_attempts_expire_after_the_misfire_threshold(pool: PgPool) {
    let job = make_job(&pool, "j", |j| j.retry_max_attempts = 3).await;
    let mut new_trigger = NewTrigger::interval(60);
    new_trigger.misfire_threshold_secs = 30;
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
    sqlx::query("UPDATE runs SET queued_at = now() - interval '31 seconds' WHERE id IN ($1, $2)")
        .bind(stale_id)
        .bind(manual.id)
        .execute(&pool)
        .await
        .expect("age");
    sqlx::query(
        "UPDATE runs SET queued_at = now() - interval '29 seconds', available_at = now() - interval '1 hour'
         WHERE id = $1",
    )
    .bind(fresh_id)
    .execute(&pool)
    .await
    .expect("age");

    let expired = reaping::expire_stale_queued(&pool).await.expect("expire");
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
        run(&pool, manual.id).await.state,
        RunState::Queued,
        "run-now runs have no threshold"
    );
    assert!(reaping::expire_stale_queued(&pool)
        .await
        .expect("expire")
        .is_empty());
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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
    assert_eq!(reaping::prune_runs(&pool, week, 100).await.expect("prune"), 1);
    assert!(runs::get(&pool, old_done.id).await.expect("get").is_none());
    for id in [old_failed.id, retry, old_queued.id, old_running.id, r.id] {
        assert!(
            runs::get(&pool, id).await.expect("get").is_some(),
            "run {id} must survive"
        );
    }
    assert_eq!(reaping::prune_runs(&pool, week, 100).await.expect("prune"), 0);

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
    assert_eq!(reaping::prune_runs(&pool, week, 3).await.expect("prune"), 3);
    assert_eq!(reaping::prune_runs(&pool, week, 3).await.expect("prune"), 2);
}

// ---------------------------------------------------------------------------------------
// 10. The hot-path queries use their partial indexes
// ---------------------------------------------------------------------------------------

/// The claim queries, as the store runs them.
use probactr_common::store::triggers::CLAIM_DUE_SQL;

use probactr_common::store::runs::CLAIM_QUEUED_SQL;

/// The plan of `EXPLAIN <sql>` with the parameters `bind` gives, as text.
async fn explain<F>(pool: &PgPool, sql: &'static str, bind: F) -> String
where
    F: for<'q> FnOnce(
        sqlx::query::QueryAs<'q, sqlx::Postgres, (String,), sqlx::postgres::PgArguments>,
    )
        -> sqlx::query::QueryAs<'q, sqlx::Postgres, (String,), sqlx::postgres::PgArguments>,
{
    let query = sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")));
    let rows = bind(query).fetch_all(pool).await.expect("explain");
    rows.into_iter()
        .map(|(line,)| line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn claim_queries_use_their_partial_indexes(pool: PgPool) {
    // 50 jobs (5 paused); 5,000 triggers mostly scheduled over the next weeks, some due,
    // some paused; 20,000 runs mostly finished, 100 queued.
    sqlx::query(
        "INSERT INTO jobs (name, kind, paused) SELECT 'job-' || g, 'noop', g % 10 = 0 FROM generate_series(1, 50) AS g",
    )
    .execute(&pool)
    .await
    .expect("jobs");
    sqlx::query(
        "INSERT INTO triggers (job_id, kind, interval_secs, paused, next_fire_at)
         SELECT (SELECT min(id) FROM jobs) + g % 50, 'interval', 60, g % 20 = 0,
                CASE WHEN g % 100 = 1 THEN now() - make_interval(secs => g)
                     ELSE now() + make_interval(secs => g * 300) END
         FROM generate_series(1, 5000) AS g",
    )
    .execute(&pool)
    .await
    .expect("triggers");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at, queued_at, available_at)
         SELECT (SELECT min(id) FROM jobs) + (g / 7) % 50, now() - make_interval(secs => g),
                CASE WHEN g % 200 = 0 THEN 'queued' ELSE 'succeeded' END,
                CASE WHEN g % 200 = 0 THEN NULL ELSE now() END,
                now() - make_interval(secs => g), now() - make_interval(secs => g)
         FROM generate_series(1, 20000) AS g",
    )
    .execute(&pool)
    .await
    .expect("runs");
    // A backlog of a paused job waiting out its backoff (an hour from now): the live runs
    // are many enough for an index to beat reading them all, and none is claimable.
    sqlx::query(
        "WITH held AS (INSERT INTO jobs (name, kind, paused) VALUES ('held', 'noop', true) RETURNING id)
         INSERT INTO runs (job_id, scheduled_at, available_at)
         SELECT held.id, now(), now() + interval '1 hour' FROM held, generate_series(1, 5000)",
    )
    .execute(&pool)
    .await
    .expect("backlog");
    // Pause the job of the oldest queued run, so the claim has runs to pass over.
    sqlx::query("UPDATE jobs SET paused = true WHERE id = (SELECT job_id FROM runs WHERE state = 'queued' ORDER BY id LIMIT 1)")
        .execute(&pool)
        .await
        .expect("pause a job with queued runs");
    sqlx::query("ANALYZE jobs, triggers, runs")
        .execute(&pool)
        .await
        .expect("analyze");

    let due_plan = explain(&pool, CLAIM_DUE_SQL, |q| q.bind(16_i64).bind(0.0_f64)).await;
    println!("EXPLAIN claim_due:\n{due_plan}\n");
    assert!(
        due_plan.contains("triggers_due"),
        "claim_due does not use triggers_due:\n{due_plan}"
    );

    let queued_plan = explain(&pool, CLAIM_QUEUED_SQL, |q| {
        q.bind(Uuid::new_v4()).bind(16_i64).bind(true).bind(16_i64)
    })
    .await;
    println!("EXPLAIN claim_queued:\n{queued_plan}\n");
    assert!(
        queued_plan.contains("runs_queued"),
        "claim_queued does not use runs_queued:\n{queued_plan}"
    );

    // The queries planned are the queries that run: on this data they find what is due.
    let mut tx = pool.begin().await.expect("begin");
    let due = triggers::claim_due(&mut tx, 1000, Duration::ZERO)
        .await
        .expect("claim due");
    assert_eq!(
        due.len(),
        50,
        "the 50 due triggers (g % 100 = 1: unpaused, of an unpaused job)"
    );
    tx.rollback().await.expect("rollback");
    let (claimable,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state = 'queued' AND NOT jobs.paused",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert!(
        claimable > 50 && claimable < 100,
        "some queued runs belong to paused jobs: {claimable}"
    );
    let claimed = runs::claim_queued(&pool, make_executor(&pool).await, 1000)
        .await
        .expect("claim queued");
    assert_eq!(
        i64::try_from(claimed.len()).expect("small"),
        claimable,
        "every queued run of an unpaused job"
    );
}

// ---------------------------------------------------------------------------------------
// 11. Creating triggers
// ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn create_trigger_sets_next_fire_at_or_names_the_bad_field(pool: PgPool) {
    let job = make_job(&pool, "j", |_| {}).await;
    let now = Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 30).single().expect("now");

    // Interval: first instant at the window's start.
    let mut every_minute = NewTrigger::interval(60);
    every_minute.start_at = Some(now + TimeDelta::seconds(100));
    let t = triggers::create(&pool, job.id, &every_minute, now)
        .await
        .expect("interval trigger");
    assert_eq!(
        (t.kind, t.interval_secs, t.job_id),
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
            NewTrigger {
                end_at: Some(now),
                start_at: Some(now),
                ..NewTrigger::interval(60)
            },
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
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

/// Inserts fired first attempts, all queued (the firing path without owned runs);
/// returns how many were new.
async fn insert_queued(
    conn: &mut sqlx::PgConnection,
    job_ids: &[i64],
    trigger_ids: &[i64],
    instants: &[DateTime<Utc>],
) -> Result<usize, StoreError> {
    let mut fired = triggers::FiredRuns::default();
    for ((job_id, trigger_id), instant) in job_ids.iter().zip(trigger_ids).zip(instants) {
        fired.push(*job_id, *trigger_id, *instant, false);
    }
    Ok(triggers::insert_fired_runs(conn, &fired, Uuid::nil())
        .await?
        .len())
}

/// A process declared dead is handed no run and can start none of its claims, even
/// before it notices (a resumed executor racing its own reaping).
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
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

// ---------------------------------------------------------------------------------------
// 12. Job statistics: all-time counters kept by statement-level triggers on runs
// ---------------------------------------------------------------------------------------

/// A row of `job_stats`, as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
struct JobStats {
    runs: i64,
    successes: i64,
    failures: i64,
    cancelled: i64,
    not_run: i64,
    last_run_id: Option<i64>,
    last_state: Option<String>,
}

impl JobStats {
    /// Counts as (runs, successes, failures, cancelled, not_run).
    fn counts(&self) -> (i64, i64, i64, i64, i64) {
        (
            self.runs,
            self.successes,
            self.failures,
            self.cancelled,
            self.not_run,
        )
    }
}

async fn job_stats(pool: &PgPool, job_id: i64) -> Option<JobStats> {
    sqlx::query_as(
        "SELECT runs, successes, failures, cancelled, not_run, last_run_id, last_state
         FROM job_stats WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_optional(pool)
    .await
    .expect("job_stats")
}

/// The counts of a job's row, which must exist.
async fn stats_counts(pool: &PgPool, job_id: i64) -> (i64, i64, i64, i64, i64) {
    job_stats(pool, job_id).await.expect("a job_stats row").counts()
}

/// Asserts that every job's counters equal a count over its runs (valid while no run has
/// been deleted), and that its latest end is the run that ended last.
async fn assert_stats_match_runs(pool: &PgPool) {
    let mismatched: Vec<(i64, String)> = sqlx::query_as(
        "WITH counted AS (
             SELECT jobs.id AS job_id,
                    count(runs.id) AS runs,
                    count(*) FILTER (WHERE runs.state = 'succeeded') AS successes,
                    count(*) FILTER (WHERE runs.state IN ('failed', 'timed_out', 'abandoned')) AS failures,
                    count(*) FILTER (WHERE runs.state = 'cancelled') AS cancelled,
                    count(*) FILTER (WHERE runs.state IN ('skipped', 'missed')) AS not_run,
                    (array_agg(runs.id ORDER BY runs.finished_at DESC, runs.id DESC))[1] AS last_run_id
             FROM jobs LEFT JOIN runs ON runs.job_id = jobs.id
                                     AND runs.state NOT IN ('queued', 'claimed', 'running')
             GROUP BY jobs.id)
         SELECT counted.job_id, format('counted %s, stored %s', counted, stats)
         FROM counted LEFT JOIN job_stats AS stats USING (job_id)
         WHERE (counted.runs, counted.successes, counted.failures, counted.cancelled, counted.not_run)
               IS DISTINCT FROM (stats.runs, stats.successes, stats.failures, stats.cancelled, stats.not_run)
            OR counted.last_run_id IS DISTINCT FROM stats.last_run_id",
    )
    .fetch_all(pool)
    .await
    .expect("compare");
    assert!(
        mismatched.is_empty(),
        "job_stats disagree with runs: {mismatched:?}"
    );
}

/// Every path of the store that ends a run counts it once; rewriting an ended run, a
/// fenced-off write and the losing monitor of a reaping race count nothing.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn every_way_a_run_ends_is_counted_once(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "single", |j| j.retry_max_attempts = 2).await;
    assert_eq!(
        stats_counts(&pool, job.id).await,
        (0, 0, 0, 0, 0),
        "a new job has its row"
    );

    // finish: a success, then a failure that queues a retry (queued: not counted).
    let (ok, _, _) = run_to_end(&pool, job.id, ex, RunState::Succeeded).await;
    let (bad, f, retry) = run_to_end(&pool, job.id, ex, RunState::Failed).await;
    let retry = retry.retry_run_id.expect("a retry");
    assert_eq!(stats_counts(&pool, job.id).await, (2, 1, 1, 0, 0));
    let stats = job_stats(&pool, job.id).await.expect("row");
    assert_eq!(
        (stats.last_run_id, stats.last_state.as_deref()),
        (Some(bad.id), Some("failed"))
    );

    // The same finish again is fenced (the run is no longer running): nothing counted.
    let again = runs::finish(&pool, bad.id, ex, Some(f), &ended(RunState::Succeeded))
        .await
        .expect("finish again");
    assert_eq!(again.write, Write::Fenced);
    // A cancel request on an ended run rewrites the row, terminal to terminal: nothing.
    assert_eq!(
        runs::request_cancel(&pool, ok.id, "too late")
            .await
            .expect("cancel"),
        Some(RunState::Succeeded)
    );
    // Statements that end nothing: a cancel request on a running run only flags it.
    let (flagged, f) = running_exclusive(&pool, job.id, ex).await;
    assert_eq!(
        runs::request_cancel(&pool, flagged.id, "stop")
            .await
            .expect("cancel"),
        Some(RunState::Running)
    );
    assert_eq!(stats_counts(&pool, job.id).await, (2, 1, 1, 0, 0));
    // ... its executor then records it cancelled; the queued retry is cancelled at once.
    runs::finish(&pool, flagged.id, ex, Some(f), &ended(RunState::Cancelled))
        .await
        .expect("finish");
    assert_eq!(
        runs::request_cancel(&pool, retry, "not wanted")
            .await
            .expect("cancel"),
        Some(RunState::Cancelled)
    );
    assert_eq!(stats_counts(&pool, job.id).await, (4, 1, 1, 2, 0));
    let stats = job_stats(&pool, job.id).await.expect("row");
    assert_eq!(
        (stats.last_run_id, stats.last_state.as_deref()),
        (Some(retry), Some("cancelled"))
    );

    // end_claim: skipped by the overlap policy.
    let skipped = claimed_run(&pool, job.id, ex).await;
    assert!(runs::end_claim(&pool, skipped.id, ex, RunState::Skipped, "busy")
        .await
        .expect("end claim"));
    assert!(!runs::end_claim(&pool, skipped.id, ex, RunState::Skipped, "busy")
        .await
        .expect("end claim again"));
    assert_eq!(stats_counts(&pool, job.id).await, (5, 1, 1, 2, 1));

    // Grouped finish over runs of two jobs, with one fenced-off ending in the group.
    let p = make_job(&pool, "p", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    })
    .await;
    let q = make_job(&pool, "q", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    })
    .await;
    let mut endings = Vec::new();
    for (job_id, state) in [
        (q.id, RunState::Succeeded),
        (p.id, RunState::Succeeded),
        (q.id, RunState::TimedOut),
        (p.id, RunState::Failed),
        (p.id, RunState::Succeeded),
    ] {
        let r = claimed_run(&pool, job_id, ex).await;
        runs::start(&pool, &start_request(&r, ex, false, false))
            .await
            .expect("start");
        endings.push(runs::RunEnd {
            run_id: r.id,
            executor_id: ex,
            fence: None,
            finish: ended(state),
        });
    }
    let mut stale = endings[0].clone();
    stale.executor_id = Uuid::new_v4();
    let mut group = vec![stale];
    group.extend(endings[1..].iter().cloned());
    let finished = runs::finish_many(&pool, &group).await.expect("finish many");
    assert_eq!(finished[0].write, Write::Fenced);
    assert_eq!(stats_counts(&pool, p.id).await, (3, 2, 1, 0, 0));
    assert_eq!(stats_counts(&pool, q.id).await, (1, 0, 1, 0, 0));
    runs::finish_many(&pool, &endings).await.expect("finish the rest");
    assert_eq!(
        stats_counts(&pool, p.id).await,
        (3, 2, 1, 0, 0),
        "p's runs are counted once"
    );
    assert_eq!(stats_counts(&pool, q.id).await, (2, 1, 1, 0, 0));

    // Reaping: two monitors abandon a dead executor's run at once (staged as in section
    // 9); the run is counted once.
    let dead = make_executor(&pool).await;
    let orphan = claimed_run(&pool, p.id, dead).await;
    runs::start(&pool, &start_request(&orphan, dead, false, false))
        .await
        .expect("start");
    assert!(processes::set_state(&pool, dead, ProcessState::Dead)
        .await
        .expect("declare dead"));
    let mut tx = pool.begin().await.expect("begin");
    let first = reaping::abandon_orphans(&mut *tx).await.expect("monitor 1");
    let (second, ()) = tokio::join!(reaping::abandon_orphans(&pool), async {
        wait_until_blocked(&pool).await;
        tx.commit().await.expect("commit monitor 1");
    });
    assert_eq!((first.len(), second.expect("monitor 2").len()), (1, 0));
    assert_eq!(stats_counts(&pool, p.id).await, (4, 2, 2, 0, 0));
    // abandon_stuck: a run whose executor does not stop it.
    let stuck = claimed_run(&pool, q.id, ex).await;
    runs::start(&pool, &start_request(&stuck, ex, false, false))
        .await
        .expect("start");
    sqlx::query("UPDATE runs SET cancel_requested_at = now() - interval '1 hour' WHERE id = $1")
        .bind(stuck.id)
        .execute(&pool)
        .await
        .expect("flag long ago");
    let abandoned = reaping::abandon_stuck(&pool, Duration::from_secs(60))
        .await
        .expect("abandon stuck");
    assert_eq!(abandoned.len(), 1);
    assert_eq!(stats_counts(&pool, q.id).await, (3, 1, 2, 0, 0));

    // expire_stale_queued: a fired instant that waited past its misfire threshold.
    let trigger = triggers::create(&pool, q.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let mut conn = pool.acquire().await.expect("connection");
    insert_queued(&mut conn, &[q.id], &[trigger.id], &[instant(0)])
        .await
        .expect("fire");
    drop(conn);
    sqlx::query(
        "UPDATE runs SET queued_at = now() - interval '1 hour' WHERE state = 'queued' AND job_id = $1",
    )
    .bind(q.id)
    .execute(&pool)
    .await
    .expect("age");
    assert_eq!(
        reaping::expire_stale_queued(&pool).await.expect("expire").len(),
        1
    );
    assert_eq!(stats_counts(&pool, q.id).await, (4, 1, 2, 0, 1));

    // Runs inserted already ended count at once; one inserted queued beside them does not.
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, reason, finished_at)
         VALUES ($1, now(), 'skipped', 'job paused', now()), ($2, now(), 'missed', 'late', now()),
                ($1, now(), 'queued', NULL, NULL)",
    )
    .bind(p.id)
    .bind(q.id)
    .execute(&pool)
    .await
    .expect("insert ended runs");
    assert_eq!(stats_counts(&pool, p.id).await, (5, 2, 2, 0, 1));
    assert_eq!(stats_counts(&pool, q.id).await, (5, 1, 2, 0, 2));

    // Claims, starts and returns to the queue end nothing; the totals match the runs.
    let requeued = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    for r in &requeued {
        runs::unclaim(&pool, r.id, ex, Duration::ZERO)
            .await
            .expect("unclaim");
    }
    assert_stats_match_runs(&pool).await;
}

/// The counters are all-time: pruning runs leaves them, and deleting the job removes its
/// row.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn job_stats_outlive_pruned_runs_and_go_with_their_job(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "pruned", |_| {}).await;
    for state in [RunState::Succeeded, RunState::Failed, RunState::Succeeded] {
        run_to_end(&pool, job.id, ex, state).await;
    }
    let before = job_stats(&pool, job.id).await.expect("row");
    assert_eq!(before.counts(), (3, 2, 1, 0, 0));
    sqlx::query("UPDATE runs SET queued_at = now() - interval '30 days' WHERE job_id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("age");
    let week = Duration::from_secs(7 * 24 * 3600);
    assert_eq!(reaping::prune_runs(&pool, week, 100).await.expect("prune"), 3);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        0
    );
    assert_eq!(
        job_stats(&pool, job.id).await,
        Some(before),
        "pruning lowers nothing"
    );

    // A run ending after the pruning adds to the all-time counts.
    run_to_end(&pool, job.id, ex, RunState::TimedOut).await;
    assert_eq!(stats_counts(&pool, job.id).await, (4, 2, 2, 0, 0));

    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("delete job");
    assert_eq!(
        job_stats(&pool, job.id).await,
        None,
        "deleting the job deletes its row"
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM job_stats WHERE job_id = $1", job.id).await,
        0
    );
}

/// Two transactions finishing runs of the same two jobs, each group listing them in the
/// opposite order, both commit: the counters' rows are locked in job_id order whatever
/// the order of the group. Staged so that a trigger locking in the group's order would
/// deadlock: a third transaction holds the first job's row; the first group waits for it
/// first; the second group (second job first) arrives next; then the holder commits.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn opposite_grouped_finishes_of_the_same_jobs_do_not_deadlock(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let parallel = |j: &mut NewJob| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    };
    let a = make_job(&pool, "a", parallel).await;
    let b = make_job(&pool, "b", parallel).await;
    assert!(a.id < b.id);
    let mut running = Vec::new();
    for job_id in [a.id, a.id, b.id, b.id] {
        let r = claimed_run(&pool, job_id, ex).await;
        runs::start(&pool, &start_request(&r, ex, false, false))
            .await
            .expect("start");
        running.push(runs::RunEnd {
            run_id: r.id,
            executor_id: ex,
            fence: None,
            finish: ended(RunState::Succeeded),
        });
    }
    let a_then_b = vec![running[0].clone(), running[2].clone()];
    let b_then_a = vec![running[3].clone(), running[1].clone()];

    // a's counters are split over shards (one per group of sessions): hold every one.
    let mut holder = pool.begin().await.expect("begin holder");
    sqlx::query(
        "INSERT INTO job_stat_shards (job_id, shard) SELECT $1, g FROM generate_series(0, 7) AS g
         ON CONFLICT DO NOTHING",
    )
    .bind(a.id)
    .execute(&mut *holder)
    .await
    .expect("every shard of a");
    sqlx::query("SELECT 1 FROM job_stat_shards WHERE job_id = $1 FOR UPDATE")
        .bind(a.id)
        .execute(&mut *holder)
        .await
        .expect("hold a's rows");
    let waiting_sessions = || async {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&pool)
        .await
        .expect("pg_stat_activity");
        n
    };
    let finish_in_tx = |group: Vec<runs::RunEnd>| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await?;
            let finished = runs::finish_many(&mut *tx, &group).await.map_err(|e| match e {
                StoreError::Database(e) => e,
                other => panic!("{other}"),
            })?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(finished)
        }
    };
    let first = tokio::spawn(finish_in_tx(a_then_b));
    for _ in 0..500 {
        if waiting_sessions().await >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting_sessions().await, 1, "the first group waits for a's row");
    let second = tokio::spawn(finish_in_tx(b_then_a));
    for _ in 0..500 {
        if waiting_sessions().await >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting_sessions().await, 2, "the second group waits too");
    holder.commit().await.expect("release a's row");

    for (name, task) in [("a then b", first), ("b then a", second)] {
        let finished = task
            .await
            .expect("task")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            finished.iter().all(|f| f.write == Write::Stored),
            "{name}: {finished:?}"
        );
    }
    assert_eq!(stats_counts(&pool, a.id).await, (2, 2, 0, 0, 0));
    assert_eq!(stats_counts(&pool, b.id).await, (2, 2, 0, 0, 0));
    assert_stats_match_runs(&pool).await;
}

/// The migration counts the runs that ended before it: a database holding history is
/// migrated up to the schema before `job_stats`, then the rest of the way.
#[sqlx::test(migrations = false)]
async fn the_migration_backfills_job_stats_from_existing_runs(pool: PgPool) {
    const BEFORE_JOB_STATS: i64 = 20261121000003;
    let migrator = &probactr_common::store::MIGRATOR;
    assert!(
        migrator.iter().any(|m| m.version > BEFORE_JOB_STATS),
        "job_stats comes later"
    );
    migrator
        .run_to(BEFORE_JOB_STATS, &pool)
        .await
        .expect("migrate before job_stats");
    sqlx::query("INSERT INTO jobs (name, kind) SELECT 'job-' || g, 'noop' FROM generate_series(1, 4) AS g")
        .execute(&pool)
        .await
        .expect("jobs");
    // The fourth job has no runs; every state appears, with ties on finished_at.
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at)
         SELECT (SELECT min(id) FROM jobs) + g % 3, now(), state,
                CASE WHEN state IN ('queued', 'claimed', 'running') THEN NULL
                     ELSE now() - make_interval(secs => (g / 4) % 50) END
         FROM generate_series(1, 3000) AS g,
              LATERAL (SELECT (ARRAY['succeeded', 'failed', 'timed_out', 'cancelled', 'skipped',
                                     'missed', 'abandoned', 'queued'])[1 + g % 8] AS state) AS s",
    )
    .execute(&pool)
    .await
    .expect("history");
    migrator.run(&pool).await.expect("migrate the rest");
    assert_stats_match_runs(&pool).await;
    let (rows, jobs): (i64, i64) =
        sqlx::query_as("SELECT (SELECT count(*) FROM job_stats), (SELECT count(*) FROM jobs)")
            .fetch_one(&pool)
            .await
            .expect("rows");
    assert_eq!(rows, jobs, "every job has its row, with or without runs");
}

/// An executor that cannot reach Redis claims only runs that need no lock: the others
/// stay queued for executors that can take their locks.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn a_lock_free_claim_leaves_runs_that_need_a_lock(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let exclusive = make_job(&pool, "exclusive", |_| {}).await;
    let bounded = make_job(&pool, "bounded", |j| {
        j.parallel = true;
        j.max_concurrency = Some(2);
    })
    .await;
    let free = make_job(&pool, "free", |j| j.parallel = true).await;
    let mut queued = Vec::new();
    for job in [&exclusive, &bounded, &free] {
        queued.push(runs::queue_now(&pool, job.id).await.expect("queue").id);
    }

    let claimed = runs::claim_queued_lock_free(&pool, ex, 10).await.expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        vec![free.id]
    );
    assert_eq!(
        claimed[0].state,
        RunState::Running,
        "a lock-free run starts in the claim"
    );
    for id in &queued[..2] {
        assert_eq!(
            run(&pool, *id).await.state,
            RunState::Queued,
            "run {id} is left queued"
        );
    }

    let rest = runs::claim_queued(&pool, ex, 10).await.expect("claim the rest");
    let mut jobs: Vec<i64> = rest.iter().map(|r| r.job_id).collect();
    jobs.sort_unstable();
    assert_eq!(jobs, vec![exclusive.id, bounded.id]);
    assert!(rest.iter().all(|r| r.state == RunState::Claimed));
}

/// Splitting `runs` into live and ended partitions keeps every run where it belongs: a
/// database holding runs of every state under the former schema is migrated in place; its
/// runs keep their ids and columns, live ones land in `runs_live`, ended ones in the
/// daily partitions (or the default one, when older than the days given partitions),
/// new ids continue after the old ones, and invariant 1 still holds for old instants.
#[sqlx::test(migrations = false)]
async fn the_partitioning_migration_moves_a_populated_history_in_place(pool: PgPool) {
    const BEFORE_PARTITIONS: i64 = 20261121000004;
    let migrator = &probactr_common::store::MIGRATOR;
    migrator
        .run_to(BEFORE_PARTITIONS, &pool)
        .await
        .expect("migrate before partitioning");
    let job: i64 = sqlx::query_scalar("INSERT INTO jobs (name, kind) VALUES ('old', 'noop') RETURNING id")
        .fetch_one(&pool)
        .await
        .expect("job");
    let trigger: i64 = sqlx::query_scalar(
        "INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'interval', 60) RETURNING id",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .expect("trigger");
    // 1,000 ended first attempts, one a minute back from now, plus one a year old; 50
    // queued runs; one running attempt 2 of the newest instant.
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at, output)
         SELECT $1, $2, date_trunc('minute', now()) - make_interval(mins => g),
                CASE WHEN g % 3 = 0 THEN 'failed' ELSE 'succeeded' END, now(), 'out ' || g
         FROM generate_series(1, 1000) AS g
         UNION ALL SELECT $1, $2, now() - interval '1 year', 'missed', now(), NULL",
    )
    .bind(job)
    .bind(trigger)
    .execute(&pool)
    .await
    .expect("history");
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, 50)")
        .bind(job)
        .execute(&pool)
        .await
        .expect("queued");
    let executor: Uuid = sqlx::query_scalar(
        "INSERT INTO executors (id, host, pid, version) VALUES (gen_random_uuid(), 'h', 1, 'v') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .expect("executor");
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id, state, executor_id, started_at)
         SELECT job_id, trigger_id, scheduled_at, 2, id, 'running', $1, now() FROM runs
         WHERE state = 'failed' ORDER BY scheduled_at DESC LIMIT 1",
    )
    .bind(executor)
    .execute(&pool)
    .await
    .expect("running retry");
    let before: Vec<(i64, String, Option<String>)> =
        sqlx::query_as("SELECT id, state, output FROM runs ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("before");

    migrator.run(&pool).await.expect("migrate the rest");

    let after: Vec<(i64, String, Option<String>)> =
        sqlx::query_as("SELECT id, state, output FROM runs ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("after");
    assert_eq!(after, before, "every run kept, with its id and columns");
    let placed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT CASE WHEN tableoid = 'runs_live'::regclass THEN 'live'
                     WHEN tableoid = 'runs_done_default'::regclass THEN 'default'
                     ELSE 'day' END, count(*)
         FROM runs GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("placement");
    assert_eq!(
        placed,
        vec![("day".into(), 1000), ("default".into(), 1), ("live".into(), 51)],
        "live runs apart, ended ones in their days (the year-old one in the default)"
    );
    let newest: i64 =
        sqlx::query_scalar("INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now()) RETURNING id")
            .bind(job)
            .fetch_one(&pool)
            .await
            .expect("a new run");
    assert!(newest > before.iter().map(|(id, _, _)| *id).max().unwrap_or(0));
    // An ended instant cannot get a second first attempt, in the live partition or not.
    let fired = sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at)
         SELECT job_id, trigger_id, scheduled_at, 'skipped', now() FROM runs
         WHERE state = 'succeeded' ORDER BY id LIMIT 1",
    )
    .execute(&pool)
    .await
    .expect_err("a second ended first attempt of an instant");
    let violated = fired.as_database_error().expect("a database error");
    assert_eq!(violated.code().as_deref(), Some(UNIQUE_VIOLATION), "{violated}");
    assert!(
        violated.constraint().is_some_and(|c| c.starts_with("runs_done_")),
        "the day's runs_done_trigger_instant: {violated}"
    );
    let ended_instant: DateTime<Utc> =
        sqlx::query_scalar("SELECT scheduled_at FROM runs WHERE state = 'succeeded' ORDER BY id LIMIT 1")
            .fetch_one(&pool)
            .await
            .expect("an ended instant");
    let mut conn = pool.acquire().await.expect("connection");
    let refired = insert_queued(&mut conn, &[job], &[trigger], &[ended_instant])
        .await
        .expect("fire an ended instant again");
    assert_eq!(refired, 0, "the firing insert sees the ended first attempt");
}

/// A claim takes no more shell runs (processes) than it is allowed; the shell runs it
/// passes over stay queued, and the other kinds fill the rest of the claim.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn a_claim_takes_no_more_shell_runs_than_processes_to_spare(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let shell = make_job(&pool, "shell", |j| {
        j.kind = JobKind::Shell;
        j.spec = serde_json::json!({"program": "true"});
        j.parallel = true;
    })
    .await;
    let noop = make_job(&pool, "noop", |j| j.parallel = true).await;
    runs::queue_many_now(&pool, shell.id, 5)
        .await
        .expect("queue shell");
    runs::queue_many_now(&pool, noop.id, 5).await.expect("queue noop");
    let limits = runs::ClaimLimits {
        runs: 10,
        processes: 2,
        with_locked: true,
    };
    let claimed = runs::claim_within(&pool, ex, &limits).await.expect("claim");
    let of = |job: i64| claimed.iter().filter(|claimed| claimed.run.job_id == job).count();
    assert_eq!((of(shell.id), of(noop.id)), (2, 5), "2 processes, the rest noop");
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'queued'",
            shell.id
        )
        .await,
        3,
        "the shell runs passed over are still queued"
    );
}

/// Retention drops a whole day of ended runs once every run in it was queued before the
/// cutoff, keeps a day holding a run queued later (a late retry or backfill of an old
/// instant), and creates the days ahead.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn retention_drops_whole_days_of_ended_runs(pool: PgPool) {
    let job = make_job(&pool, "old", |_| {}).await;
    sqlx::query(
        "SELECT probactr_create_run_partitions((now() AT TIME ZONE 'UTC')::date - 40,
                                               (now() AT TIME ZONE 'UTC')::date - 39)",
    )
    .execute(&pool)
    .await
    .expect("old days");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, queued_at, state, finished_at)
         VALUES ($1, date_trunc('day', now() - interval '40 days') + interval '1 hour',
                 now() - interval '40 days', 'succeeded', now() - interval '40 days'),
                ($1, date_trunc('day', now() - interval '39 days') + interval '1 hour',
                 now(), 'succeeded', now())",
    )
    .bind(job.id)
    .execute(&pool)
    .await
    .expect("old runs");
    let day_exists = |pool: PgPool, days_ago: i32| async move {
        sqlx::query_scalar::<_, bool>(
            "SELECT to_regclass('runs_done_' || to_char((now() AT TIME ZONE 'UTC')::date - $1, 'YYYYMMDD')) IS NOT NULL",
        )
        .bind(days_ago)
        .fetch_one(&pool)
        .await
        .expect("partition")
    };
    let month = Duration::from_secs(30 * 24 * 3600);
    assert_eq!(
        reaping::maintain_history(&pool, month).await.expect("maintain"),
        1
    );
    assert!(
        !day_exists(pool.clone(), 40).await,
        "the day past retention is dropped"
    );
    assert!(
        day_exists(pool.clone(), 39).await,
        "the day with a recent run is kept"
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        1,
        "the day holding a recently queued run is kept"
    );
    let ahead: bool = sqlx::query_scalar(
        "SELECT to_regclass('runs_done_' || to_char((now() AT TIME ZONE 'UTC')::date + $1, 'YYYYMMDD')) IS NOT NULL",
    )
    .bind(reaping::PARTITION_DAYS_AHEAD)
    .fetch_one(&pool)
    .await
    .expect("ahead");
    assert!(ahead, "the days ahead exist");
}

/// A run fired ahead of its instant waits in the queue until the instant: it is not
/// claimable before, counts as queued from the instant, and is claimable once it comes.
#[sqlx::test(migrator = "probactr_common::store::MIGRATOR")]
async fn a_run_fired_ahead_waits_for_its_instant(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "ahead", |j| j.parallel = true).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let soon = probactr_common::store::db_now(&pool).await.expect("now") + TimeDelta::milliseconds(400);
    let mut conn = pool.acquire().await.expect("connection");
    assert_eq!(
        insert_queued(&mut conn, &[job.id], &[trigger.id], &[soon])
            .await
            .expect("fire ahead"),
        1
    );
    drop(conn);
    let (queued_at, available_at): (DateTime<Utc>, DateTime<Utc>) =
        sqlx::query_as("SELECT queued_at, available_at FROM runs WHERE job_id = $1")
            .bind(job.id)
            .fetch_one(&pool)
            .await
            .expect("run");
    assert_eq!((queued_at, available_at), (soon, soon));
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs::claim_queued(&pool, ex, 10).await.expect("claim").len(), 1);
}
