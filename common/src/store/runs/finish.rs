//! running → succeeded / failed / timed_out / cancelled / abandoned, recorded by the
//! executor under the run's fence, singly or in groups, with the retry it earns queued in
//! the same statement.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::fence::Write;
use crate::model::RunState;
use crate::store::StoreError;

/// The result of an attempt, as it is recorded.
#[derive(Debug, Clone)]
pub struct Finish {
    /// The terminal state (succeeded, failed, timed_out, cancelled, abandoned).
    pub state: RunState,
    /// Why, in words, when the state alone does not say it.
    pub reason: Option<String>,
    /// A shell job's exit code.
    pub exit_code: Option<i32>,
    /// An HTTP job's response status.
    pub http_status: Option<i32>,
    /// What went wrong.
    pub error: Option<String>,
    /// The stored tail of the output.
    pub output: Option<String>,
    /// Whether `output` lost its beginning.
    pub output_truncated: bool,
}

/// The outcome of [`finish()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// Whether the write was accepted.
    pub write: Write,
    /// The queued retry, when the job's policy asked for one.
    pub retry_run_id: Option<i64>,
}

/// Records the end of an attempt if the executor's fence is still current, and queues
/// the next attempt when the job's retry policy asks for one — one statement.
pub async fn finish(
    db: impl PgExecutor<'_>,
    run_id: i64,
    executor_id: Uuid,
    fence: Option<i64>,
    finish: &Finish,
) -> Result<Finished, StoreError> {
    let ending = RunEnd {
        run_id,
        executor_id,
        fence,
        finish: finish.clone(),
        started_at: None,
    };
    let mut finished = finish_many(db, std::slice::from_ref(&ending)).await?;
    Ok(finished.pop().unwrap_or(Finished {
        write: Write::Fenced,
        retry_run_id: None,
    }))
}

/// One attempt's end, as [`finish_many`] records it.
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// The run.
    pub run_id: i64,
    /// The executor that ran it.
    pub executor_id: Uuid,
    /// Its fencing token.
    pub fence: Option<i64>,
    /// What is recorded.
    pub finish: Finish,
    /// When the job really started, for a run held after its start was stored (fired
    /// ahead of its instant, prefetched); None keeps the stored start.
    pub started_at: Option<DateTime<Utc>>,
}

/// Records the ends of several attempts in one statement; each is fenced on its own.
/// Returns, per input row in order, what happened to it.
pub async fn finish_many(db: impl PgExecutor<'_>, endings: &[RunEnd]) -> Result<Vec<Finished>, StoreError> {
    if endings.is_empty() {
        return Ok(Vec::new());
    }
    let column = |f: &dyn Fn(&RunEnd) -> Option<String>| endings.iter().map(f).collect::<Vec<_>>();
    let stored = sqlx::query_file!(
        "src/store/runs/sql/finish_many.sql",
        &endings.iter().map(|e| e.run_id).collect::<Vec<_>>(),
        &endings.iter().map(|e| e.executor_id).collect::<Vec<_>>(),
        &endings.iter().map(|e| e.fence).collect::<Vec<_>>() as &[Option<i64>],
        &column(&|e| Some(e.finish.state.as_str().to_owned())) as &[Option<String>],
        &column(&|e| e.finish.reason.clone()) as &[Option<String>],
        &endings.iter().map(|e| e.finish.exit_code).collect::<Vec<_>>() as &[Option<i32>],
        &endings.iter().map(|e| e.finish.http_status).collect::<Vec<_>>() as &[Option<i32>],
        &column(&|e| e.finish.error.clone()) as &[Option<String>],
        &column(&|e| e.finish.output.clone()) as &[Option<String>],
        &endings
            .iter()
            .map(|e| e.finish.output_truncated)
            .collect::<Vec<_>>(),
        &endings.iter().map(|e| e.started_at).collect::<Vec<_>>() as &[Option<DateTime<Utc>>]
    )
    .fetch_all(db)
    .await?;
    let by_id: std::collections::HashMap<i64, Option<i64>> =
        stored.into_iter().map(|row| (row.id, row.retry_run_id)).collect();
    Ok(endings
        .iter()
        .map(|ending| match by_id.get(&ending.run_id) {
            Some(retry_run_id) => Finished {
                write: Write::Stored,
                retry_run_id: *retry_run_id,
            },
            None => Finished {
                write: Write::Fenced,
                retry_run_id: None,
            },
        })
        .collect())
}
