//! queued → claimed (or straight to running when the run needs no lock), and the ways
//! back out of a claim before the job starts: claimed → queued (lock busy, shutting
//! down) and claimed → skipped / failed (overlap policy, invalid definition).

use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::model::{Run, RunState};
use crate::store::StoreError;

/// The queued-run claim (`$1` executor, `$2` limit). In claim order (oldest first, moved
/// earlier by priority: see migration `2026112503000001`), `SKIP LOCKED`, so concurrent
/// claimers split the queue instead of waiting. A cordoned executor takes nothing; a job
/// with a selector is taken only by an executor carrying all of its labels (the
/// executor's labels are read once per statement, the selector only of jobs that have
/// one); a run of a trigger with a cap stays queued while that many of the trigger's
/// runs are claimed or running, and one statement takes no more than the cap leaves. Runs of paused jobs, runs
/// waiting out a retry backoff, and runs of a non-parallel `overlap = queue` job that
/// already has an active attempt stay queued (claiming them would only make them wait
/// for the lock). Runs that need no lock — parallel jobs without a concurrency bound —
/// are started in the same statement: claim and start cost one round trip together.
/// `$3` false takes only those (an executor that cannot reach Redis leaves the others to
/// its peers). At most `$4` of the runs taken are shell jobs (each a process): the others
/// it looked at stay queued for executors with processes to spare. A run pinned to an
/// executor (a broadcast's, a shard's) is taken only there; a service's instance goes to
/// an executor that holds none of the job's others while one can take it, one per
/// statement.
pub const CLAIM_QUEUED_SQL: &str = "WITH picked AS (
         SELECT runs.id, runs.claim_order, (jobs.parallel AND jobs.max_concurrency IS NULL) AS lock_free,
                jobs.kind = 'shell' AS process, runs.trigger_id, runs.job_id,
                runs.replica IS NOT NULL AS service,
                runs.trigger_cap - (SELECT count(*) FROM runs_live AS active
                                    WHERE active.trigger_id = runs.trigger_id AND runs.trigger_cap IS NOT NULL
                                      AND active.trigger_cap IS NOT NULL
                                      AND active.state IN ('claimed', 'running')) AS trigger_room
         FROM runs CROSS JOIN LATERAL (
             -- The job of each run walked to, looked up as the walk goes (OFFSET 0 keeps
             -- the planner from turning this into a join it may start from the jobs' side).
             SELECT jobs.parallel, jobs.max_concurrency, jobs.kind, jobs.paused, jobs.selector, jobs.overlap
             FROM jobs WHERE jobs.id = runs.job_id OFFSET 0) AS jobs
         WHERE runs.state = 'queued' AND runs.available_at <= now() AND NOT jobs.paused
           AND ($3 OR (jobs.parallel AND jobs.max_concurrency IS NULL))
           AND (runs.trigger_cap IS NULL OR runs.trigger_cap > (
                SELECT count(*) FROM runs_live AS active
                WHERE active.trigger_id = runs.trigger_id AND active.trigger_cap IS NOT NULL
                  AND active.state IN ('claimed', 'running')))
           -- A process declared dead, or cordoned, gets nothing, even if it has not noticed yet.
           AND EXISTS (SELECT 1 FROM executors
                       WHERE executors.id = $1 AND executors.state = 'alive' AND NOT executors.cordoned)
           AND (jobs.selector = '{}'::jsonb
                OR jobs.selector <@ (SELECT labels FROM executors WHERE executors.id = $1))
           -- A broadcast's run only where it is pinned; a shard's there until the reaper
           -- unpins it (its executor gone or cordoned).
           AND (runs.pinned_to IS NULL OR runs.pinned_to = $1)
           -- A service's instances go to distinct executors while others can take them:
           -- an executor holding one takes another only after it waited 10 s.
           AND (runs.replica IS NULL OR runs.available_at < now() - interval '10 seconds'
                OR NOT EXISTS (SELECT 1 FROM runs_live AS mine
                               WHERE mine.executor_id = $1 AND mine.job_id = runs.job_id
                                 AND mine.replica IS NOT NULL AND mine.state IN ('claimed', 'running')))
           AND (jobs.parallel OR jobs.overlap = 'skip' OR NOT EXISTS (
                SELECT 1 FROM runs AS active
                WHERE active.job_id = runs.job_id AND active.state IN ('claimed', 'running')))
         ORDER BY runs.claim_order, runs.id
         LIMIT $2
         FOR UPDATE OF runs SKIP LOCKED),
     taken AS (
         SELECT id, lock_free FROM (
             SELECT id, lock_free, process, trigger_room, service,
                    row_number() OVER (PARTITION BY process ORDER BY claim_order, id) AS nth,
                    row_number() OVER (PARTITION BY job_id, service ORDER BY claim_order, id) AS nth_of_job,
                    row_number() OVER (PARTITION BY trigger_id, trigger_room IS NULL
                                       ORDER BY claim_order, id) AS nth_of_trigger
             FROM picked) AS ranked
         WHERE (NOT process OR nth <= $4) AND (trigger_room IS NULL OR nth_of_trigger <= trigger_room)
           AND (NOT service OR nth_of_job = 1)),
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
     ORDER BY claimed.claim_order, claimed.id";

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

/// Puts a claimed run back in the queue, claimable again after `delay` (lock busy and
/// overlap = queue, or the executor is shutting down before it started).
pub async fn unclaim(
    db: impl PgExecutor<'_>,
    run_id: i64,
    executor_id: Uuid,
    delay: Duration,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE runs SET state = 'queued', executor_id = NULL, claimed_at = NULL,
                         available_at = now() + make_interval(secs => $3)
         WHERE id = $1 AND state = 'claimed' AND executor_id = $2",
        run_id,
        executor_id,
        delay.as_secs_f64()
    )
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
    let ended = sqlx::query_file_scalar!(
        "src/store/runs/sql/end_claim.sql",
        run_id,
        executor_id,
        state.as_str(),
        reason
    )
    .fetch_optional(db)
    .await?;
    Ok(ended.is_some())
}
