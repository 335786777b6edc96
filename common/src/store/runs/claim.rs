//! queued → claimed (or straight to running when the run needs no lock), and the ways
//! back out of a claim before the job starts: claimed → queued (lock busy, shutting
//! down) and claimed → skipped / failed (overlap policy, invalid definition).

use std::time::Duration;

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::finish::{finish_many, Finished, RunEnd};

use crate::model::{Run, RunState};
use crate::store::StoreError;

/// The queued-run claim (`$1` executor, `$2` limit). In claim order (oldest first, moved
/// earlier by priority: see migration `2026112503000001`), `SKIP LOCKED`, so concurrent
/// claimers split the queue instead of waiting. A cordoned executor takes nothing; a job
/// with a selector is taken only by an executor carrying all of its labels (the
/// executor's labels are read once per statement, the selector only of jobs that have
/// one); a run of a trigger with a cap stays queued while that many of the trigger's
/// runs are claimed or running, and one statement takes no more than the cap leaves (exactly: see below). Runs of paused jobs, runs
/// waiting out a retry backoff, and runs of a non-parallel `overlap = queue` or
/// `buffer_one` job that already has an active attempt stay queued (claiming them would
/// only make them wait for the lock) — but for a `buffer_one` job's runs behind one
/// already waiting, taken to be skipped. Runs that need no lock — parallel jobs without a concurrency bound —
/// are started in the same statement: claim and start cost one round trip together.
/// `$3` false takes only those (an executor that cannot reach Redis leaves the others to
/// its peers). At most `$4` of the runs taken are shell jobs (each a process): the others
/// it looked at stay queued for executors with processes to spare. A run pinned to an
/// executor (a broadcast's, a shard's) is taken only there; a service's instance goes to
/// an executor that holds none of the job's others while one can take it, one per
/// statement. `$5`, when not NULL, names the only namespaces whose runs are taken (an
/// executor dedicated to them). A namespace with a `max_running` has its row locked and
/// its count of runs in flight (`namespaces.running`) read and raised in the same
/// statement: the claim takes no more of its runs than the quota leaves, and marks those
/// it takes (`quota_namespace`), which give their places back when they leave
/// claimed/running (see migration `2026120102000001` and docs/design.md, "Namespace
/// quotas"). Runs of namespaces without one touch no namespace row. A trigger's cap and a
/// job's pool are held the same way, after the namespaces: the rows of the capped
/// triggers (`triggers.running`) and of the pools (`pools.used`, by weight `pool_slots`)
/// whose runs were picked are locked, read and raised, and the runs marked
/// (`quota_trigger`, `quota_pool`); a run whose trigger has no cap and whose job takes no
/// pool touches neither (see migration `2026120201000001`). A rate (`{"limit": N,
/// "per_secs": S}`) of a job or of its pool is held the same way, last: the row keeping
/// its latest starts (the pool's, the job's `job_rate_windows`) is locked, the starts of
/// the last S seconds counted, no more runs taken than N less that count, and the
/// instant of those taken added (see migration `2026120303000001`); runs whose job and
/// pool have no rate read none of it. Past the first `$6` runs (the executor's free
/// slots), only runs an executor may hold in memory until a slot frees are taken
/// (prefetched: in-process, lock-free, bound by no quota, cap or rate; see
/// [`ClaimLimits::slots`]).
pub const CLAIM_QUEUED_SQL: &str = include_str!("sql/claim_queued.sql");

// The claim is checked at build time like every other statement: the macro below is
// never run. Its rows are read with `FromRow` instead, because `ClaimedRun` embeds a
// `Run`, which the checking macros cannot fill.
const _: fn() = || {
    let _ = sqlx::query_file!(
        "src/store/runs/sql/claim_queued.sql",
        Uuid::nil(),
        0_i64,
        false,
        0_i64,
        None::<&[String]>,
        0_i64
    );
};

/// Claims up to `limit` queued runs for `executor_id` (see [`CLAIM_QUEUED_SQL`]): the
/// returned runs are `claimed`, or already `running` when they need no lock.
pub async fn claim_queued(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let claimed = claim(db, executor_id, &ClaimLimits::runs(limit), None).await?;
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
    /// Whether it holds a place in a quota (its namespace's, its trigger's cap, its
    /// pool's), given back when it leaves claimed/running.
    pub holds_quota: bool,
}

/// How much one claim may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLimits {
    /// Runs in all.
    pub runs: i64,
    /// Of which runs of any kind, started as soon as claimed (the executor's free slots);
    /// the rest, up to `runs`, only runs the executor may hold until a slot frees:
    /// in-process, lock-free, bound by no quota, trigger cap, pool or rate (prefetched).
    pub slots: i64,
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
            slots: runs,
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
    claim(db, executor_id, limits, None).await
}

/// Claims within `limits` only runs of jobs in `namespaces` (None: every namespace), for
/// an executor dedicated to them.
pub async fn claim_in_namespaces(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limits: &ClaimLimits,
    namespaces: Option<&[String]>,
) -> Result<Vec<ClaimedRun>, StoreError> {
    claim(db, executor_id, limits, namespaces).await
}

/// Records `endings` (see [`finish_many`]) and claims within `limits` (see
/// [`claim_in_namespaces`]) in one transaction: the claim loop's cycle pays one commit,
/// one WAL flush, for both. The ends are written first, so the places they free are
/// claimable at once. The caller passes only ends of runs that hold no quota: releasing
/// one locks the rows a claim locks, and two such transactions could then wait for each
/// other. The claim ends no run, so the job counters the ends lock (see
/// `probactr_job_stats_count`) are still locked by one statement per transaction.
pub async fn finish_and_claim(
    pool: &PgPool,
    endings: &[RunEnd],
    executor_id: Uuid,
    limits: &ClaimLimits,
    namespaces: Option<&[String]>,
) -> Result<(Vec<Finished>, Vec<ClaimedRun>), StoreError> {
    let mut transaction = pool.begin().await?;
    let finished = finish_many(&mut *transaction, endings).await?;
    let claimed = claim(&mut *transaction, executor_id, limits, namespaces).await?;
    transaction.commit().await?;
    Ok((finished, claimed))
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
    let claimed = claim(db, executor_id, &limits, None).await?;
    Ok(claimed.into_iter().map(|claimed| claimed.run).collect())
}

async fn claim(
    db: impl PgExecutor<'_>,
    executor_id: Uuid,
    limits: &ClaimLimits,
    namespaces: Option<&[String]>,
) -> Result<Vec<ClaimedRun>, StoreError> {
    Ok(sqlx::query_as::<_, ClaimedRun>(CLAIM_QUEUED_SQL)
        .bind(executor_id)
        .bind(limits.runs)
        .bind(limits.with_locked)
        .bind(limits.processes)
        .bind(namespaces)
        .bind(limits.slots)
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

/// Gives back to the queue runs this executor claimed ahead of its free slots and held
/// without starting their jobs (prefetched: see [`ClaimLimits::slots`]): the claim made
/// them `running`, but no job ran, so they go back unchanged, in their place in the
/// queue. A run asked to stop meanwhile is not given back (its attempt starts at once
/// and records it stopped before its job started). Executors waiting for work are woken.
/// Returns the ids given back.
pub async fn give_back_unstarted(
    db: impl PgExecutor<'_>,
    run_ids: &[i64],
    executor_id: Uuid,
) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "WITH back AS (
             UPDATE runs_live SET state = 'queued', executor_id = NULL, claimed_at = NULL,
                                  started_at = NULL, heartbeat_at = NULL
             WHERE id = ANY($1) AND executor_id = $2 AND state IN ('claimed', 'running')
               AND cancel_requested_at IS NULL
             RETURNING id),
         -- Executors waiting for work hear of them at once, as of newly queued runs.
         woken AS (SELECT pg_notify('probactr_runs', '') FROM (SELECT FROM back LIMIT 1) AS any_back)
         SELECT back.id AS \"id!\" FROM back CROSS JOIN woken",
        run_ids,
        executor_id
    )
    .fetch_all(db)
    .await?)
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

/// The other runs of a job waiting to start (queued, or claimed and not started) beside
/// one of them: what `buffer_one` and `replace` decide on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    /// The first born before it, if any.
    pub earlier: Option<i64>,
    /// The one of the latest instant (`coalesce(scheduled_at, queued_at)`), if its instant
    /// is later than this one's: by instant, not birth, since a retry of an older instant
    /// is born after a newer instant's run.
    pub later: Option<i64>,
}

/// The runs of `job_id` waiting beside `run_id` (see [`Waiting`]).
pub async fn waiting_beside(
    db: impl PgExecutor<'_>,
    job_id: i64,
    run_id: i64,
) -> Result<Waiting, StoreError> {
    let row = sqlx::query!(
        r#"SELECT min(waiting.id) FILTER (WHERE waiting.id < $2) AS earlier,
                  (array_agg(waiting.id ORDER BY coalesce(waiting.scheduled_at, waiting.queued_at) DESC, waiting.id DESC)
                     FILTER (WHERE coalesce(waiting.scheduled_at, waiting.queued_at) > me.at))[1] AS later
           FROM runs_live AS waiting,
                (SELECT coalesce(scheduled_at, queued_at) AS at FROM runs_live WHERE id = $2) AS me
           WHERE waiting.job_id = $1 AND waiting.state IN ('queued', 'claimed') AND waiting.id <> $2"#,
        job_id,
        run_id
    )
    .fetch_one(db)
    .await?;
    Ok(Waiting {
        earlier: row.earlier,
        later: row.later,
    })
}
