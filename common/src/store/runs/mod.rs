//! `runs` and the run state machine: this module and its submodules are the only code
//! that changes a run's state. Each transition is one function running one statement,
//! guarded by the state it leaves (and, for an executor's writes, by the executor and
//! the run's fencing token), so two processes racing for a run change it once.
//!
//! ```text
//!                    claim                      start (lock + fence)          finish
//!   (fire, run now) ─▶ queued ──────────▶ claimed ───────────────────▶ running ──────────▶ succeeded | failed
//!                      │  ▲  │               │  │   (no lock needed:      │  │                timed_out | cancelled
//!                      │  │  └───────────────┼──┼── claim starts it) ────▶│  │
//!                      │  └── unclaim / ─────┘  │                         │  └── reap (executor lost, ─▶ abandoned
//!                      │      requeue stale     └─ end_claim ─▶ skipped | failed    did not stop)
//!                      └─ cancel ─▶ cancelled;  expire ─▶ missed
//! ```
//!
//! | transition | from | to | function |
//! |---|---|---|---|
//! | queue | – | queued | [`queue_now`], [`crate::store::triggers::insert_fired_runs`], retries in [`finish_many`] and [`reap`] |
//! | claim | queued | claimed, or running when no lock is needed | [`claim_within`] |
//! | unclaim | claimed | queued | [`unclaim`], [`requeue_stale_claims`] (monitor) |
//! | end before start | claimed | skipped, failed | [`end_claim`] |
//! | start | claimed | running | [`start()`] |
//! | finish | running | succeeded, failed, timed_out, cancelled, abandoned | [`finish_many`] |
//! | cancel | queued, claimed | cancelled | [`request_cancel`] (a running run is flagged; it ends through finish) |
//! | abandon | running | abandoned | [`abandon_orphans`], [`abandon_stuck`] (monitor) |
//! | expire | queued | missed | [`expire_stale_queued`] (monitor) |
//!
//! [`RunState::may_become`] states the same table as code. A failed, timed-out or
//! abandoned attempt may be followed by a new `queued` row of the same chain
//! (`first_run_id`, `attempt + 1`) when the job's retry policy allows, queued in the
//! statement that ends it. What people read of the history is in [`history`].

pub mod cancel;
pub mod claim;
pub mod finish;
pub mod history;
pub mod queue;
pub mod reap;
pub mod start;

pub use cancel::*;
pub use claim::*;
pub use finish::*;
pub use queue::*;
pub use reap::*;
pub use start::*;

use sqlx::PgExecutor;

use super::StoreError;
use crate::model::{Run, RunState};

/// The columns of `runs`, in table order.
const RUN_COLUMNS: [&str; 24] = [
    "id",
    "job_id",
    "trigger_id",
    "scheduled_at",
    "attempt",
    "first_run_id",
    "state",
    "reason",
    "exclusive",
    "executor_id",
    "lock_token",
    "fence",
    "queued_at",
    "available_at",
    "claimed_at",
    "started_at",
    "finished_at",
    "heartbeat_at",
    "cancel_requested_at",
    "exit_code",
    "http_status",
    "error",
    "output",
    "output_truncated",
];

/// The two CTEs that end runs: `gone` deletes the live runs `delete` selects (written as
/// `DELETE FROM runs_live AS runs …`, returning `runs.*` and any extra column the new
/// values need), and `ended` inserts them, with the `changes` (column, expression over
/// `gone`) applied, as ended runs; the following CTEs read `ended` like the rows of
/// `runs`.
///
/// Ending a run is an explicit move rather than an UPDATE of its state: PostgreSQL would
/// move an updated row between the partitions too, but a concurrent statement meeting a
/// row moved that way fails (SQLSTATE 40001), whereas one meeting a deleted row simply
/// skips it, as two monitors or a monitor and an executor racing for a run must.
pub fn end_runs_ctes(delete: &str, changes: &[(&str, &str)]) -> String {
    let values: Vec<String> = RUN_COLUMNS
        .iter()
        .map(|column| match changes.iter().find(|(name, _)| name == column) {
            Some((_, expression)) => (*expression).to_owned(),
            None => format!("gone.{column}"),
        })
        .collect();
    format!(
        "gone AS ({delete}),
         ended AS (
             INSERT INTO runs ({columns}) OVERRIDING SYSTEM VALUE
             SELECT {values} FROM gone
             RETURNING *)",
        columns = RUN_COLUMNS.join(", "),
        values = values.join(", "),
    )
}

/// States after which the job's retry policy may queue another attempt.
pub const RETRYABLE_STATES: &[RunState] = &[RunState::Failed, RunState::TimedOut, RunState::Abandoned];

/// SQL that queues the next attempt of every row of a CTE named `ended` (with the
/// columns of `runs`) whose state is retryable and whose job allows more attempts; the
/// backoff doubles per attempt. `ON CONFLICT DO NOTHING` on the chain's unique
/// (first_run_id, attempt) makes a second re-queue of the same attempt a no-op.
pub const QUEUE_RETRIES_SQL: &str =
    "INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id, available_at, reason)
    SELECT ended.job_id, ended.trigger_id, ended.scheduled_at, ended.attempt + 1,
           coalesce(ended.first_run_id, ended.id),
           now() + make_interval(secs => jobs.retry_backoff_secs * power(2, ended.attempt - 1)),
           'retry of run ' || ended.id || ' (' || ended.state || ')'
    FROM ended JOIN jobs ON jobs.id = ended.job_id
    WHERE ended.state IN ('failed', 'timed_out', 'abandoned')
      AND ended.attempt < jobs.retry_max_attempts
    ON CONFLICT DO NOTHING
    RETURNING id, first_run_id";

/// One run by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Run>, StoreError> {
    Ok(sqlx::query_as::<_, Run>("SELECT * FROM runs WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?)
}
