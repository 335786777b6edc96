//! claimed → running: the start under a fresh fencing token, refused by PostgreSQL when
//! another attempt of a non-parallel job is running.

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::store::{is_unique_violation, StoreError};

/// How an attempt to start a claimed run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Running, with this fencing token (None for an unfenced parallel run).
    Started {
        /// The token every later write must carry.
        fence: Option<i64>,
    },
    /// PostgreSQL refused: another attempt of this non-parallel job is running (the
    /// database's own guard, for when Redis forgot a lock).
    JobBusy,
    /// The claim is gone (reaped, cancelled, job deleted).
    Gone,
}

/// What the executor holds while starting a run.
#[derive(Debug, Clone)]
pub struct StartRequest<'a> {
    /// The claimed run.
    pub run_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The executor that claimed it.
    pub executor_id: Uuid,
    /// Non-parallel job: takes the job's mutex, is fenced, and is unique while running.
    pub exclusive: bool,
    /// Draw a fencing token (every run that holds a Redis lock or permit does).
    pub fenced: bool,
    /// The Redis lock or permit token, when one was taken.
    pub lock_token: Option<&'a str>,
}

/// Moves a claimed run to `running`, drawing the job's next fencing token in the same
/// statement.
pub async fn start(db: impl PgExecutor<'_>, req: &StartRequest<'_>) -> Result<Start, StoreError> {
    // The claim is locked first so a start that finds no claim draws no fence: a
    // wasted fence would fence off the job's legitimate current holder.
    // The run is found by id alone and its state checked after: a state condition
    // in the lookup lets the planner pick a partial index that holds every run in
    // flight, a cost that grows with the executor's capacity.
    let result = sqlx::query_scalar!(
        "WITH found AS (
             SELECT id, state FROM runs_live WHERE id = $1 AND executor_id = $3
               AND EXISTS (SELECT 1 FROM executors WHERE id = $3 AND state IN ('alive', 'draining'))
             FOR UPDATE),
         claimed AS (SELECT id FROM found WHERE state = 'claimed'),
         fence AS (
             UPDATE jobs SET fence = fence + 1
             WHERE id = $2 AND $5 AND EXISTS (SELECT 1 FROM claimed) RETURNING fence)
         UPDATE runs_live SET state = 'running', started_at = now(), heartbeat_at = now(),
                              exclusive = $4, lock_token = $6, fence = (SELECT fence FROM fence)
         WHERE id = (SELECT id FROM claimed)
         RETURNING fence",
        req.run_id,
        req.job_id,
        req.executor_id,
        req.exclusive,
        req.fenced,
        req.lock_token
    )
    .fetch_optional(db)
    .await;
    match result {
        Ok(Some(fence)) => Ok(Start::Started { fence }),
        Ok(None) => Ok(Start::Gone),
        Err(err) if is_unique_violation(&err, "runs_one_running_exclusive") => Ok(Start::JobBusy),
        Err(err) => Err(err.into()),
    }
}
