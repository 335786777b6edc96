//! Queries over `runs`: queueing, claiming, starting under a fence, finishing, retrying,
//! cancelling. The state machine is drawn in [`crate::model`]; what people read of the
//! history is in [`history`].

pub mod history;

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::{AssertSqlSafe, PgExecutor};
use uuid::Uuid;

use super::StoreError;
use crate::fence::{Write, RUN_FENCE_IS_CURRENT};
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

/// Queues a run of `job_id` now, outside any trigger ("run now").
pub async fn queue_now(db: impl PgExecutor<'_>, job_id: i64) -> Result<Run, StoreError> {
    Ok(
        sqlx::query_as::<_, Run>("INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now()) RETURNING *")
            .bind(job_id)
            .fetch_one(db)
            .await?,
    )
}

/// Queues `count` run-now runs of one job in one statement (benchmarks, bulk tools).
pub async fn queue_many_now(db: impl PgExecutor<'_>, job_id: i64, count: i64) -> Result<u64, StoreError> {
    let done =
        sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2)")
            .bind(job_id)
            .bind(count)
            .execute(db)
            .await?;
    Ok(done.rows_affected())
}

/// One run by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Run>, StoreError> {
    Ok(sqlx::query_as::<_, Run>("SELECT * FROM runs WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?)
}

/// The queued-run claim (`$1` executor, `$2` limit). Oldest first, `SKIP LOCKED`, so
/// concurrent claimers split the queue instead of waiting. Runs of paused jobs, runs
/// waiting out a retry backoff, and runs of a non-parallel `overlap = queue` job that
/// already has an active attempt stay queued (claiming them would only make them wait
/// for the lock). Runs that need no lock — parallel jobs without a concurrency bound —
/// are started in the same statement: claim and start cost one round trip together.
/// `$3` false takes only those (an executor that cannot reach Redis leaves the others to
/// its peers). At most `$4` of the runs taken are shell jobs (each a process): the others
/// it looked at stay queued for executors with processes to spare.
pub const CLAIM_QUEUED_SQL: &str = "WITH picked AS (
         SELECT runs.id, runs.available_at, (jobs.parallel AND jobs.max_concurrency IS NULL) AS lock_free,
                jobs.kind = 'shell' AS process
         FROM runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state = 'queued' AND runs.available_at <= now() AND NOT jobs.paused
           AND ($3 OR (jobs.parallel AND jobs.max_concurrency IS NULL))
           -- A process declared dead gets nothing, even if it has not noticed yet.
           AND EXISTS (SELECT 1 FROM executors WHERE executors.id = $1 AND executors.state = 'alive')
           AND (jobs.parallel OR jobs.overlap = 'skip' OR NOT EXISTS (
                SELECT 1 FROM runs AS active
                WHERE active.job_id = runs.job_id AND active.state IN ('claimed', 'running')))
         ORDER BY runs.available_at, runs.id
         LIMIT $2
         FOR UPDATE OF runs SKIP LOCKED),
     taken AS (
         SELECT id, lock_free FROM (
             SELECT id, lock_free, process,
                    row_number() OVER (PARTITION BY process ORDER BY available_at, id) AS nth
             FROM picked) AS ranked
         WHERE NOT process OR nth <= $4),
     claimed AS (
         -- The picked rows are locked and queued; the live partition is named so that
         -- only its id index can find them, whatever its statistics say.
         UPDATE runs_live AS runs SET executor_id = $1, claimed_at = now(),
                         state = CASE WHEN taken.lock_free THEN 'running' ELSE 'claimed' END,
                         started_at = CASE WHEN taken.lock_free THEN now() END,
                         heartbeat_at = CASE WHEN taken.lock_free THEN now() END
         FROM taken WHERE runs.id = taken.id
         RETURNING runs.*)
     SELECT claimed.*, jobs.version AS job_version
     FROM claimed JOIN jobs ON jobs.id = claimed.job_id
     ORDER BY claimed.available_at, claimed.id";

/// Claims up to `limit` queued runs for `executor_id` (see [`CLAIM_QUEUED_SQL`]): the
/// returned runs are `claimed`, or already `running` when they need no lock.
pub async fn claim_queued(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let claimed = claim(db, executor_id, &ClaimLimits::runs(limit)).await?;
    Ok(claimed.into_iter().map(|claimed| claimed.run).collect())
}

/// A claimed run, with the version of its job's definition at the claim (an executor
/// that read that version already need not read the job again).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedRun {
    /// The run.
    #[sqlx(flatten)]
    pub run: Run,
    /// `jobs.version` of its job.
    pub job_version: i64,
}

/// How much one claim may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLimits {
    /// Runs in all.
    pub runs: i64,
    /// Of which shell jobs.
    pub processes: i64,
    /// Whether runs that need a Redis lock or permit may be taken.
    pub with_locked: bool,
}

impl ClaimLimits {
    /// Up to `runs` runs of any kind.
    pub fn runs(runs: i64) -> ClaimLimits {
        ClaimLimits {
            runs,
            processes: runs,
            with_locked: true,
        }
    }
}

/// Claims within `limits` (see [`CLAIM_QUEUED_SQL`]).
pub async fn claim_within(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limits: &ClaimLimits,
) -> Result<Vec<ClaimedRun>, StoreError> {
    claim(db, executor_id, limits).await
}

/// Like [`claim_queued`], but only runs that need no Redis lock (parallel jobs without
/// a concurrency bound): what an executor that cannot reach Redis can still run.
pub async fn claim_queued_lock_free(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let limits = ClaimLimits {
        with_locked: false,
        ..ClaimLimits::runs(limit)
    };
    let claimed = claim(db, executor_id, &limits).await?;
    Ok(claimed.into_iter().map(|claimed| claimed.run).collect())
}

async fn claim(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limits: &ClaimLimits,
) -> Result<Vec<ClaimedRun>, StoreError> {
    Ok(sqlx::query_as::<_, ClaimedRun>(CLAIM_QUEUED_SQL)
        .bind(executor_id)
        .bind(limits.runs)
        .bind(limits.with_locked)
        .bind(limits.processes)
        .fetch_all(db)
        .await?)
}

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
    let result = sqlx::query_as::<_, (Option<i64>,)>(
        // The claim is locked first so a start that finds no claim draws no fence: a
        // wasted fence would fence off the job's legitimate current holder.
        // The run is found by id alone and its state checked after: a state condition
        // in the lookup lets the planner pick a partial index that holds every run in
        // flight, a cost that grows with the executor's capacity.
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
    )
    .bind(req.run_id)
    .bind(req.job_id)
    .bind(req.executor_id)
    .bind(req.exclusive)
    .bind(req.fenced)
    .bind(req.lock_token)
    .fetch_optional(db)
    .await;
    match result {
        Ok(Some((fence,))) => Ok(Start::Started { fence }),
        Ok(None) => Ok(Start::Gone),
        Err(err) if super::is_unique_violation(&err, "runs_one_running_exclusive") => Ok(Start::JobBusy),
        Err(err) => Err(err.into()),
    }
}

/// Puts a claimed run back in the queue, claimable again after `delay` (lock busy and
/// overlap = queue, or the executor is shutting down before it started).
pub async fn unclaim(
    db: impl PgExecutor<'_>,
    run_id: i64,
    executor_id: Uuid,
    delay: Duration,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE runs SET state = 'queued', executor_id = NULL, claimed_at = NULL,
                         available_at = now() + make_interval(secs => $3)
         WHERE id = $1 AND state = 'claimed' AND executor_id = $2",
    )
    .bind(run_id)
    .bind(executor_id)
    .bind(delay.as_secs_f64())
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Ends a claimed run that never started (skipped by the overlap policy, failed on an
/// invalid spec) with its reason.
pub async fn end_claim(
    db: impl PgExecutor<'_>,
    run_id: i64,
    executor_id: Uuid,
    state: RunState,
    reason: &str,
) -> Result<bool, StoreError> {
    let ended: Option<i64> = sqlx::query_scalar(AssertSqlSafe(END_CLAIM_SQL.as_str()))
        .bind(run_id)
        .bind(executor_id)
        .bind(state.as_str())
        .bind(reason)
        .fetch_optional(db)
        .await?;
    Ok(ended.is_some())
}

static END_CLAIM_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {} SELECT id FROM ended",
        end_runs_ctes(
            "DELETE FROM runs_live AS runs
             WHERE id = $1 AND state = 'claimed' AND executor_id = $2
             RETURNING runs.*",
            &[("state", "$3"), ("reason", "$4"), ("finished_at", "now()")],
        )
    )
});

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

/// The outcome of [`finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// Whether the write was accepted.
    pub write: Write,
    /// The queued retry, when the job's policy asked for one.
    pub retry_run_id: Option<i64>,
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
}

/// The statement of [`finish_many`]: [`finish`] for a group of runs, each row fenced on
/// its own, retries queued for the ones whose policy asks.
static FINISH_MANY_SQL: LazyLock<String> = LazyLock::new(|| {
    let ending = end_runs_ctes(
        &format!(
            "DELETE FROM runs_live AS runs USING input
             WHERE runs.id = input.id AND {RUN_FENCE_IS_CURRENT}
             RETURNING runs.*, input.state AS new_state, input.reason AS new_reason,
                       input.exit_code AS new_exit_code, input.http_status AS new_http_status,
                       input.error AS new_error, input.output AS new_output,
                       input.output_truncated AS new_output_truncated"
        ),
        &[
            ("state", "gone.new_state"),
            ("reason", "gone.new_reason"),
            ("exit_code", "gone.new_exit_code"),
            ("http_status", "gone.new_http_status"),
            ("error", "gone.new_error"),
            ("output", "gone.new_output"),
            ("output_truncated", "gone.new_output_truncated"),
            ("finished_at", "now()"),
        ],
    );
    format!(
        "WITH input AS (
             SELECT * FROM UNNEST($1::bigint[], $2::uuid[], $3::bigint[], $4::text[], $5::text[],
                                  $6::int[], $7::int[], $8::text[], $9::text[], $10::bool[])
                 AS input (id, executor_id, fence, state, reason, exit_code, http_status, error,
                           output, output_truncated)),
         {ending},
         retry AS ({QUEUE_RETRIES_SQL})
         SELECT ended.id, retry.id FROM ended
         LEFT JOIN retry ON retry.first_run_id = coalesce(ended.first_run_id, ended.id)"
    )
});

/// Records the ends of several attempts in one statement; each is fenced on its own.
/// Returns, per input row in order, what happened to it.
pub async fn finish_many(db: impl PgExecutor<'_>, endings: &[RunEnd]) -> Result<Vec<Finished>, StoreError> {
    if endings.is_empty() {
        return Ok(Vec::new());
    }
    let column = |f: &dyn Fn(&RunEnd) -> Option<String>| endings.iter().map(f).collect::<Vec<_>>();
    let stored: Vec<(i64, Option<i64>)> = sqlx::query_as(AssertSqlSafe(FINISH_MANY_SQL.as_str()))
        .bind(endings.iter().map(|e| e.run_id).collect::<Vec<_>>())
        .bind(endings.iter().map(|e| e.executor_id).collect::<Vec<_>>())
        .bind(endings.iter().map(|e| e.fence).collect::<Vec<_>>())
        .bind(column(&|e| Some(e.finish.state.as_str().to_owned())))
        .bind(column(&|e| e.finish.reason.clone()))
        .bind(endings.iter().map(|e| e.finish.exit_code).collect::<Vec<_>>())
        .bind(endings.iter().map(|e| e.finish.http_status).collect::<Vec<_>>())
        .bind(column(&|e| e.finish.error.clone()))
        .bind(column(&|e| e.finish.output.clone()))
        .bind(
            endings
                .iter()
                .map(|e| e.finish.output_truncated)
                .collect::<Vec<_>>(),
        )
        .fetch_all(db)
        .await?;
    let by_id: std::collections::HashMap<i64, Option<i64>> = stored.into_iter().collect();
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

/// Asks for a run to stop. A queued or claimed run is cancelled at once; a running one is
/// flagged and its executor stops it (it polls for the flag). Returns the run's state
/// after the request, or None when the run does not exist.
pub async fn request_cancel(
    db: impl PgExecutor<'_>,
    run_id: i64,
    reason: &str,
) -> Result<Option<RunState>, StoreError> {
    let row: Option<(String,)> = sqlx::query_as(AssertSqlSafe(REQUEST_CANCEL_SQL.as_str()))
        .bind(run_id)
        .bind(reason)
        .fetch_optional(db)
        .await?;
    row.map(|(state,)| {
        state
            .parse()
            .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))
    })
    .transpose()
}

/// [`request_cancel`]: a queued or claimed run ends `cancelled`; a running one is
/// flagged; an ended one is left as it is. Answers the run's state after the request.
static REQUEST_CANCEL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {},
         flagged AS (
             UPDATE runs_live SET cancel_requested_at = now(), reason = $2
             WHERE id = $1 AND state = 'running'
             RETURNING state)
         SELECT state FROM ended
         UNION ALL SELECT state FROM flagged
         UNION ALL SELECT state FROM runs
                   WHERE id = $1 AND state NOT IN ('queued', 'claimed', 'running')",
        end_runs_ctes(
            "DELETE FROM runs_live AS runs
             WHERE id = $1 AND state IN ('queued', 'claimed')
             RETURNING runs.*",
            &[
                ("state", "'cancelled'"),
                ("reason", "$2"),
                ("finished_at", "now()")
            ],
        )
    )
});

/// The executor's running runs whose cancellation was requested.
pub async fn cancel_requested(db: impl PgExecutor<'_>, executor_id: Uuid) -> Result<Vec<i64>, StoreError> {
    let rows: Vec<(i64,)> = sqlx::query_as(
        "SELECT id FROM runs
         WHERE executor_id = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL",
    )
    .bind(executor_id)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}
