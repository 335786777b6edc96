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
//!                      └─ cancel ─▶ cancelled;  expire ─▶ missed;  give up waiting ─▶ failed
//! ```
//!
//! | transition | from | to | function |
//! |---|---|---|---|
//! | queue | – | queued | [`queue_now`], [`queue_instants`] (backfills), [`insert_fired_runs`] (firing), [`queue_missing_service_instances`] (services), `probactr_queue_run` (workflow steps, child jobs); the next attempt in [`finish_many`] and [`reap`] (`probactr_next_attempt`) |
//! | fire and start | – | running (a lock-free job's run the firing executor starts at once, or holds until its instant) | [`insert_fired_runs`] |
//! | claim | queued | claimed, or running when no lock is needed | [`claim_within`], [`claim_in_namespaces`] (within a namespace's `max_running`: see [`quota`]) |
//! | unclaim | claimed | queued | [`unclaim`], [`requeue_stale_claims`] (monitor) |
//! | give back unstarted | running (claimed ahead of free slots, or fired ahead and held; job not started) | queued | [`give_back_unstarted`] |
//! | end before start | claimed | skipped, failed | [`end_claim`] |
//! | start | claimed | running | [`start()`] |
//! | finish | running | succeeded, failed, timed_out, cancelled, abandoned | [`finish_many`] |
//! | cancel | queued, claimed | cancelled | [`request_cancel`] (a running run is flagged; it ends through finish) |
//! | abandon | running | abandoned | [`abandon_orphans`] (with the takeover of the job's policy), [`abandon_stuck`] (monitor) |
//! | expire | queued | missed | [`expire_stale_queued`] (monitor) |
//! | hold, release | queued | queued (not claimable while it waits for another job) | [`hold_for_upstream`] (firing), [`release_ready`] (monitor) |
//! | give up waiting | queued | failed | [`fail_overdue`] (monitor) |
//! | bound a rated job's queue | queued | skipped | [`skip_beyond_rate`] (monitor) |
//!
//! [`RunState::may_become`] states the same table as code. The statements that end runs
//! are written out in `sql/`, checked at build time like every other: ending a run moves
//! it from `runs_live` to the ended runs in the statement that ends it (a DELETE and an
//! INSERT, rather than an UPDATE that PostgreSQL would turn into a move: a concurrent
//! statement that meets a row moved by an UPDATE fails with SQLSTATE 40001, whereas one
//! meeting a deleted row skips it, as two monitors, or a monitor and an executor, racing
//! for a run must). A failed, timed-out or
//! abandoned attempt may be followed by a new `queued` row of the same chain
//! (`first_run_id`, `attempt + 1`) when the job's retry policy allows, queued in the
//! statement that ends it. What people read of the history is in [`history`].

pub mod cancel;
pub mod claim;
pub mod finish;
pub mod fired;
pub mod history;
pub mod queue;
pub mod quota;
pub mod reap;
pub mod start;
pub mod upstream;

pub use cancel::*;
pub use claim::*;
pub use finish::*;
pub use fired::*;
pub use queue::*;
pub use reap::*;
pub use start::*;
pub use upstream::*;

use sqlx::PgExecutor;

use super::StoreError;
use crate::model::{Run, RunState};

/// One run by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Run>, StoreError> {
    Ok(
        sqlx::query_as!(Run, r#"SELECT id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica FROM runs WHERE id = $1"#, id)
            .fetch_optional(db)
            .await?,
    )
}
