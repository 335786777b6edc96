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
use probactr_common::fence::Write;
use probactr_common::model::{
    Job, JobKind, Overlap, ProcessRole, ProcessState, Run, RunState, TriggerKind, TriggerTiming,
};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::processes::{self, Heartbeat, Registration};
use probactr_common::store::runs::{self, Finish, Start, StartRequest};
use probactr_common::store::triggers::{self, CreateTriggerError, NewTrigger};
use probactr_common::store::{housekeeping, StoreError};
use sqlx::PgPool;
use uuid::Uuid;

mod checks;
mod claiming;
mod deletion;
mod fencing;
mod flow;
mod functions;
mod hot_path;
mod invariants;
mod job_stats;
mod lifecycle;
mod process_rows;
mod quota;
mod reaping;
mod retries;
mod routing;
mod schema;
mod trigger_creation;

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
        labels: Default::default(),
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

/// Inserts fired first attempts, all queued (the firing path without owned runs), each
/// with its job's priority and its trigger's cap as the due-trigger claim reads them;
/// returns how many were new.
async fn insert_queued(
    conn: &mut sqlx::PgConnection,
    job_ids: &[i64],
    trigger_ids: &[i64],
    instants: &[DateTime<Utc>],
) -> Result<usize, StoreError> {
    let mut fired = runs::FiredRuns::default();
    for ((job_id, trigger_id), instant) in job_ids.iter().zip(trigger_ids).zip(instants) {
        let (priority, cap): (Option<i32>, Option<i32>) = sqlx::query_as(
            "SELECT (SELECT priority FROM jobs WHERE id = $1),
                    (SELECT max_concurrency FROM triggers WHERE id = $2)",
        )
        .bind(job_id)
        .bind(trigger_id)
        .fetch_one(&mut *conn)
        .await?;
        fired.push_run(*job_id, *trigger_id, *instant, priority.unwrap_or(0), cap, false);
    }
    Ok(runs::insert_fired_runs(conn, &fired, Uuid::nil()).await?.len())
}
