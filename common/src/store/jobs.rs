//! `jobs`: definitions created, listed with their run statistics and filters, updated
//! under a version check, paused, deleted, and the fencing-token counter.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use sqlx::{PgExecutor, Postgres, QueryBuilder};

use super::{Page, StoreError};
use crate::model::{
    Job, JobKind, JobMode, OnExecutorLost, Overlap, Rate, RetryBackoff, RetryJitter, RetryOn, Route, RunState,
};

/// What it takes to create a job; the database fills in ids, fence, version and times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewJob {
    /// Unique name within its namespace.
    pub name: String,
    /// Its namespace (set at creation; an edit keeps the job's own).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Free text.
    pub description: String,
    /// What it runs.
    pub kind: JobKind,
    /// Kind-specific definition (see the executor's `job` module).
    pub spec: serde_json::Value,
    /// May attempts run at the same time?
    pub parallel: bool,
    /// Bound on concurrent attempts of a parallel job (None: unbounded).
    pub max_concurrency: Option<i32>,
    /// What to do when the lock or permit cannot be had.
    pub overlap: Overlap,
    /// Seconds an attempt may run.
    pub timeout_secs: i32,
    /// Attempts in all, the first included.
    pub retry_max_attempts: i32,
    /// Seconds before the first retry (the `initial_secs` of the policy).
    pub retry_backoff_secs: i32,
    /// How the delay grows with the attempts.
    #[serde(default = "exponential")]
    pub retry_backoff: RetryBackoff,
    /// The longest delay, in seconds (None: no bound).
    #[serde(default)]
    pub retry_max_secs: Option<i32>,
    /// Whether the delay is randomised.
    #[serde(default = "no_jitter")]
    pub retry_jitter: RetryJitter,
    /// Which failures are retried (None: every failure).
    #[serde(default)]
    pub retry_on: Option<RetryOn>,
    /// Created paused?
    pub paused: bool,
    /// Who manages its definition (None: people, through the admin or the API).
    pub managed_by: Option<String>,
    /// What happens to a run whose executor died.
    pub on_executor_lost: OnExecutorLost,
    /// How many times a run is taken over at most.
    pub max_takeovers: i32,
    /// Seconds between SIGTERM and SIGKILL when an executor stops a run.
    pub stop_grace_secs: i32,
    /// Labels an executor must all carry to claim its runs (`{}`: any executor).
    pub selector: serde_json::Value,
    /// When slots are scarce, higher goes first (-100 to 100).
    pub priority: i32,
    /// Where the runs of one instant go.
    pub route: Route,
    /// Runs per instant of a `shard` route (1 to 1000).
    pub shards: i32,
    /// Run when triggered, or kept running.
    pub mode: JobMode,
    /// Instances of a service kept running (1 to 100).
    pub replicas: i32,
    /// Its declared run parameters, as checked (None: free parameters).
    #[serde(default)]
    pub params_schema: Option<serde_json::Value>,
    /// The pool of its namespace whose slots its runs hold (None: none).
    #[serde(default)]
    pub pool: Option<String>,
    /// The slots of `pool` each of its runs holds.
    #[serde(default = "one_slot")]
    pub pool_slots: i32,
    /// At most so many of its runs start in a window (None: no bound).
    #[serde(default)]
    pub rate: Option<Rate>,
}

fn exponential() -> RetryBackoff {
    RetryBackoff::Exponential
}

fn no_jitter() -> RetryJitter {
    RetryJitter::None
}

fn one_slot() -> i32 {
    1
}

fn default_namespace() -> String {
    super::namespaces::DEFAULT.to_owned()
}

impl NewJob {
    /// A job of `kind` with the defaults the schema gives.
    pub fn new(name: impl Into<String>, kind: JobKind, spec: serde_json::Value) -> NewJob {
        NewJob {
            name: name.into(),
            namespace: default_namespace(),
            description: String::new(),
            kind,
            spec,
            parallel: false,
            max_concurrency: None,
            overlap: Overlap::Skip,
            timeout_secs: 3600,
            retry_max_attempts: 1,
            retry_backoff_secs: 10,
            retry_backoff: RetryBackoff::Exponential,
            retry_max_secs: None,
            retry_jitter: RetryJitter::None,
            retry_on: None,
            paused: false,
            managed_by: None,
            on_executor_lost: OnExecutorLost::Rerun,
            max_takeovers: 3,
            stop_grace_secs: 10,
            selector: serde_json::json!({}),
            priority: 0,
            route: Route::Any,
            shards: 1,
            mode: JobMode::Batch,
            replicas: 1,
            params_schema: None,
            pool: None,
            pool_slots: 1,
            rate: None,
        }
    }
}

/// A statement on `jobs` returning the row, its `NewJob` bound in one order by insert and
/// update: `$pre` (the update's id and version) first, then the definition's fields, with
/// `$namespace` (set only at creation) between `params_schema` and `pool`.
macro_rules! query_job {
    ($sql:tt, $job:ident, [$($pre:expr),*], [$($namespace:expr)?]) => {
        sqlx::query_as!(
            Job,
            $sql,
            $($pre,)*
            $job.name,
            $job.description,
            $job.kind as JobKind,
            $job.spec,
            $job.parallel,
            $job.max_concurrency,
            $job.overlap as Overlap,
            $job.timeout_secs,
            $job.retry_max_attempts,
            $job.retry_backoff_secs,
            $job.paused,
            $job.managed_by,
            $job.on_executor_lost as OnExecutorLost,
            $job.max_takeovers,
            $job.selector,
            $job.priority,
            $job.stop_grace_secs,
            $job.route as Route,
            $job.shards,
            $job.mode as JobMode,
            $job.replicas,
            $job.params_schema,
            $($namespace,)?
            $job.pool,
            $job.pool_slots,
            $job.retry_backoff as RetryBackoff,
            $job.retry_max_secs,
            $job.retry_jitter as RetryJitter,
            $job.retry_on.clone().map(sqlx::types::Json) as Option<sqlx::types::Json<RetryOn>>,
            $job.rate.map(Json) as Option<Json<Rate>>
        )
    };
}

/// Inserts a job and returns the stored row.
pub async fn insert(db: impl PgExecutor<'_>, job: &NewJob) -> Result<Job, StoreError> {
    Ok(query_job!(
        r#"INSERT INTO jobs (name, description, kind, spec, parallel, max_concurrency, overlap,
                            timeout_secs, retry_max_attempts, retry_backoff_secs, paused, managed_by,
                            on_executor_lost, max_takeovers, selector, priority, stop_grace_secs,
                            route, shards, mode, replicas, params_schema, namespace, pool, pool_slots,
                            retry_backoff, retry_max_secs, retry_jitter, retry_on, rate)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                   $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30)
           RETURNING id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>""#,
        job,
        [],
        [job.namespace]
    )
    .fetch_one(db)
    .await?)
}

/// One job by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Job>, StoreError> {
    Ok(
        sqlx::query_as!(Job, r#"SELECT id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>" FROM jobs WHERE id = $1"#, id)
            .fetch_optional(db)
            .await?,
    )
}

/// Sets a job's paused flag; returns the new row (None when the job does not exist).
pub async fn set_paused(db: impl PgExecutor<'_>, id: i64, paused: bool) -> Result<Option<Job>, StoreError> {
    Ok(sqlx::query_as!(
        Job,
        r#"UPDATE jobs SET paused = $2, version = version + 1, updated_at = now() WHERE id = $1
           RETURNING id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>""#,
        id,
        paused
    )
    .fetch_optional(db)
    .await?)
}

/// Several jobs by id (the ones that exist).
pub async fn get_many(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<Vec<Job>, StoreError> {
    Ok(
        sqlx::query_as!(Job, r#"SELECT id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>" FROM jobs WHERE id = ANY($1)"#, ids)
            .fetch_all(db)
            .await?,
    )
}

/// A job with its all-time run statistics (the `job_stats` row kept by triggers on
/// `runs`; see its migration).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobRow {
    /// The row of `jobs`.
    #[sqlx(flatten)]
    pub job: Job,
    /// Its run statistics.
    #[sqlx(flatten)]
    pub stats: JobStats,
    /// Its child jobs (see [`JobChildren`]).
    pub on_success: Vec<i64>,
    /// See [`JobChildren`].
    pub on_failure: Vec<i64>,
    /// See [`JobChildren`].
    pub on_finish: Vec<i64>,
}

/// A job's all-time run statistics: counters updated as runs end, so reading them costs
/// the same however long the history is. Pruning old runs does not lower them.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobStats {
    /// Ended runs, every attempt counted once: successes + failures + cancelled + not_run.
    pub runs: i64,
    /// Ended runs that succeeded.
    pub successes: i64,
    /// Ended runs that failed, timed out or were abandoned.
    pub failures: i64,
    /// Runs cancelled, before or while running.
    pub cancelled: i64,
    /// Runs that never started: skipped (overlap policy) or missed.
    pub not_run: i64,
    /// The latest ended run (it may since have been pruned from the history).
    pub last_run_id: Option<i64>,
    /// When the latest ended run ended.
    pub last_run_at: Option<DateTime<Utc>>,
    /// How the latest ended run ended (a terminal state, copied from the run).
    pub last_state: Option<RunState>,
    /// How long the latest ended run ran, in milliseconds (none if it never started).
    pub last_duration_ms: Option<i64>,
    /// When a run last succeeded.
    pub last_success_at: Option<DateTime<Utc>>,
    /// When a run last failed, timed out or was abandoned.
    pub last_failure_at: Option<DateTime<Utc>>,
    /// Its next scheduled instant (none while the job is paused).
    pub next_fire_at: Option<DateTime<Utc>>,
}

/// Filters of the job list.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    /// Case-insensitive substring of the name or description.
    pub q: Option<String>,
    /// Only this kind.
    pub kind: Option<JobKind>,
    /// Only paused (true) or unpaused (false) jobs.
    pub paused: Option<bool>,
    /// Only jobs of these namespaces (None: every namespace).
    pub namespaces: Option<Vec<String>>,
}

/// Jobs with their statistics: the sum of at most eight rows of `job_stat_shards`, found
/// by primary key, per job, whatever the length of its history (zeros for a job without
/// a row). The lateral subquery sums the shards of each listed job alone (`OFFSET 0`
/// keeps PostgreSQL from flattening it into one aggregate over every job's shards).
/// Followed by what `jobs` is: the table, or one page of it ([`page_query`]).
const SELECT_WITH_STATS: &str = "SELECT jobs.*,
        coalesce(stats.runs, 0) AS runs,
        coalesce(stats.successes, 0) AS successes,
        coalesce(stats.failures, 0) AS failures,
        coalesce(stats.cancelled, 0) AS cancelled,
        coalesce(stats.not_run, 0) AS not_run,
        stats.last_run_id, stats.last_run_at, stats.last_state, stats.last_duration_ms,
        stats.last_success_at, stats.last_failure_at,
        CASE WHEN jobs.paused THEN NULL ELSE
            (SELECT min(triggers.next_fire_at) FROM triggers
             WHERE triggers.job_id = jobs.id AND NOT triggers.paused) END AS next_fire_at";

/// The statistics of each row of `jobs` (see [`SELECT_WITH_STATS`]).
const STATS_JOIN: &str =
    " LEFT JOIN LATERAL (SELECT * FROM job_stats WHERE job_stats.job_id = jobs.id OFFSET 0) AS stats ON true";

/// `text` as a LIKE pattern matching it anywhere, its wildcards escaped.
pub fn contains_pattern(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

fn push_filters(query: &mut QueryBuilder<Postgres>, filter: &JobFilter) {
    // Deleted jobs whose history was kept are reached through their runs, not listed.
    query.push(" WHERE jobs.deleted_at IS NULL");
    if let Some(q) = &filter.q {
        let pattern = contains_pattern(q);
        query.push(" AND (jobs.name ILIKE ").push_bind(pattern.clone());
        query
            .push(" OR jobs.description ILIKE ")
            .push_bind(pattern)
            .push(")");
    }
    if let Some(kind) = filter.kind {
        query.push(" AND jobs.kind = ").push_bind(kind.as_str());
    }
    if let Some(paused) = filter.paused {
        query.push(" AND jobs.paused = ").push_bind(paused);
    }
    if let Some(namespaces) = &filter.namespaces {
        query
            .push(" AND jobs.namespace = ANY(")
            .push_bind(namespaces.clone())
            .push(")");
    }
}

/// A page of jobs by name, and how many match in all: one statement, unless the page
/// is past the last job.
pub async fn list_with_stats(
    db: impl PgExecutor<'_> + Copy,
    filter: &JobFilter,
    page: Page,
) -> Result<(Vec<JobRow>, i64), StoreError> {
    let counted: Vec<CountedJobRow> = page_query(filter, page, true)
        .build_query_as()
        .fetch_all(db)
        .await?;
    let total = match counted.first() {
        Some(first) => first.total,
        None if page.offset == 0 => 0,
        None => count(db, filter).await?,
    };
    Ok((counted.into_iter().map(|counted| counted.row).collect(), total))
}

/// A page of jobs by name (through any executor, a transaction's connection included).
pub async fn page_with_stats(
    db: impl PgExecutor<'_>,
    filter: &JobFilter,
    page: Page,
) -> Result<Vec<JobRow>, StoreError> {
    Ok(page_query(filter, page, false)
        .build_query_as::<JobRow>()
        .fetch_all(db)
        .await?)
}

/// A job row and how many jobs match the list's filter in all.
#[derive(sqlx::FromRow)]
struct CountedJobRow {
    #[sqlx(flatten)]
    row: JobRow,
    total: i64,
}

/// The page of jobs `filter` and `page` pick, with their statistics (and, when
/// `counted`, a `total` column). The page is cut before the statistics are read: they
/// are summed for the jobs shown, not for every job that matches.
fn page_query(filter: &JobFilter, page: Page, counted: bool) -> QueryBuilder<Postgres> {
    let mut query = QueryBuilder::<Postgres>::new(SELECT_WITH_STATS);
    if counted {
        query.push(", (SELECT count(*) FROM jobs");
        push_filters(&mut query, filter);
        query.push(") AS total");
    }
    query.push(" FROM (SELECT * FROM jobs");
    push_filters(&mut query, filter);
    query.push(" ORDER BY jobs.name LIMIT ").push_bind(page.limit);
    query.push(" OFFSET ").push_bind(page.offset);
    query.push(") AS jobs");
    query.push(STATS_JOIN);
    query.push(" ORDER BY jobs.name");
    query
}

/// How many jobs match `filter`.
pub async fn count(db: impl PgExecutor<'_>, filter: &JobFilter) -> Result<i64, StoreError> {
    let mut count = QueryBuilder::<Postgres>::new("SELECT count(*) FROM jobs");
    push_filters(&mut count, filter);
    Ok(count.build_query_scalar().fetch_one(db).await?)
}

/// One job with its statistics.
pub async fn get_with_stats(db: impl PgExecutor<'_>, id: i64) -> Result<Option<JobRow>, StoreError> {
    let mut query = QueryBuilder::<Postgres>::new(SELECT_WITH_STATS);
    query.push(" FROM jobs").push(STATS_JOIN);
    query.push(" WHERE jobs.id = ").push_bind(id);
    Ok(query.build_query_as::<JobRow>().fetch_optional(db).await?)
}

/// One job, locked for the rest of the transaction.
pub async fn get_for_update(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Job>, StoreError> {
    Ok(
        sqlx::query_as!(Job, r#"SELECT id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>" FROM jobs WHERE id = $1 FOR UPDATE"#, id)
            .fetch_optional(db)
            .await?,
    )
}

/// Replaces a job's definition if its version is still `version`; None on a lost race.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: i64,
    version: i64,
    job: &NewJob,
) -> Result<Option<Job>, StoreError> {
    Ok(query_job!(
        r#"UPDATE jobs SET name = $3, description = $4, kind = $5, spec = $6, parallel = $7,
                           max_concurrency = $8, overlap = $9, timeout_secs = $10,
                           retry_max_attempts = $11, retry_backoff_secs = $12, paused = $13,
                           managed_by = $14, on_executor_lost = $15, max_takeovers = $16,
                           selector = $17, priority = $18, stop_grace_secs = $19,
                           route = $20, shards = $21, mode = $22, replicas = $23,
                           params_schema = $24, pool = $25, pool_slots = $26,
                           retry_backoff = $27, retry_max_secs = $28, retry_jitter = $29,
                           retry_on = $30, rate = $31,
                           version = version + 1, updated_at = now()
           WHERE id = $1 AND version = $2
           RETURNING id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>""#,
        job,
        [id, version],
        []
    )
    .fetch_optional(db)
    .await?)
}

/// Retires a job whose history is kept (see migration `2026112601000002`): marked
/// deleted, paused, renamed to free its name, no longer managed by definitions. The
/// caller removes its triggers and cancels its live runs in the same transaction.
/// Returns the retired row (None when the job does not exist or was already retired).
pub async fn retire(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Job>, StoreError> {
    Ok(sqlx::query_as!(
        Job,
        r#"UPDATE jobs SET deleted_at = now(), paused = true, managed_by = NULL, pool = NULL,
                           name = left(name, 170) || ' (deleted #' || id || ')',
                           version = version + 1, updated_at = now()
           WHERE id = $1 AND deleted_at IS NULL
           RETURNING id, name, namespace, description, kind AS "kind: JobKind", spec, parallel, max_concurrency, overlap AS "overlap: Overlap", timeout_secs, retry_max_attempts, retry_backoff_secs, retry_backoff AS "retry_backoff: RetryBackoff", retry_max_secs, retry_jitter AS "retry_jitter: RetryJitter", retry_on AS "retry_on: sqlx::types::Json<RetryOn>", paused, fence, version, created_at, updated_at, managed_by, on_executor_lost AS "on_executor_lost: OnExecutorLost", max_takeovers, selector, priority, stop_grace_secs, route AS "route: Route", shards, mode AS "mode: JobMode", replicas, deleted_at, params_schema, pool, pool_slots, rate AS "rate: Json<Rate>""#,
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Deletes a job with its triggers and history (see the core migration's policy).
pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM jobs WHERE id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Wakes the executors as if a trigger had changed: pausing or resuming a job changes
/// which triggers are due without touching the `triggers` table, so its NOTIFY trigger
/// does not fire. Delivered when the transaction commits.
pub async fn notify_schedule_changed(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query!("SELECT pg_notify($1, '')", super::TRIGGERS_CHANNEL)
        .execute(db)
        .await?;
    Ok(())
}

/// The id of the job of `namespace` named `name`, if any.
pub async fn id_by_name(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT id FROM jobs WHERE namespace = $1 AND name = $2",
        namespace,
        name
    )
    .fetch_optional(db)
    .await?)
}

/// Every job's id and name, by name (pickers); only those of the namespaces `only`
/// when given.
pub async fn names(
    db: impl PgExecutor<'_>,
    only: Option<&[String]>,
) -> Result<Vec<(i64, String)>, StoreError> {
    Ok(sqlx::query!(
        "SELECT id, name FROM jobs WHERE $1::text[] IS NULL OR namespace = ANY($1) ORDER BY name",
        only as Option<&[String]>
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| (row.id, row.name))
    .collect())
}

/// The name, namespace and executor selector of each of the given jobs (what a
/// maintenance window's scope reads), by id.
pub async fn scope_facts(
    db: impl PgExecutor<'_>,
    ids: &[i64],
) -> Result<Vec<(i64, crate::maintenance::OwnedJobFacts)>, StoreError> {
    Ok(sqlx::query_as!(
        FactsRow,
        "SELECT id, name, namespace, selector FROM jobs WHERE id = ANY($1)",
        ids
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(FactsRow::keyed)
    .collect())
}

/// A row of an id (a job's, or a running run's) and what a maintenance window's scope
/// reads of its job.
pub(crate) struct FactsRow {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) selector: serde_json::Value,
}

impl FactsRow {
    /// The id and the facts.
    pub(crate) fn keyed(self) -> (i64, crate::maintenance::OwnedJobFacts) {
        let facts = crate::maintenance::OwnedJobFacts {
            name: self.name,
            namespace: self.namespace,
            selector: self.selector,
        };
        (self.id, facts)
    }
}

/// A job's child jobs: the jobs queued when one of its runs ends (the trigger
/// `runs_advance` in the workflows migration queues them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobChildren {
    /// Queued when a run succeeds.
    pub on_success: Vec<i64>,
    /// Queued when a run fails, times out or is abandoned.
    pub on_failure: Vec<i64>,
    /// Queued whenever a run ends, cancelled included.
    pub on_finish: Vec<i64>,
}

impl JobChildren {
    /// Whether no child is listed.
    pub fn is_empty(&self) -> bool {
        self.on_success.is_empty() && self.on_failure.is_empty() && self.on_finish.is_empty()
    }

    /// Every listed job id, once each.
    pub fn all(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .on_success
            .iter()
            .chain(&self.on_failure)
            .chain(&self.on_finish)
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// A job's child jobs (None when the job does not exist).
pub async fn children(db: impl PgExecutor<'_>, id: i64) -> Result<Option<JobChildren>, StoreError> {
    Ok(sqlx::query_as!(
        JobChildren,
        "SELECT on_success, on_failure, on_finish FROM jobs WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Replaces a job's child jobs; true when the lists changed.
pub async fn set_children(
    db: impl PgExecutor<'_>,
    id: i64,
    children: &JobChildren,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE jobs SET on_success = $2, on_failure = $3, on_finish = $4
         WHERE id = $1 AND (on_success, on_failure, on_finish) IS DISTINCT FROM ($2, $3, $4)",
        id,
        &children.on_success,
        &children.on_failure,
        &children.on_finish
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `target` is reached from any of `starts` by following child lists (a job
/// listing one of `starts` as its child would close a loop of runs that never ends).
pub async fn children_reach(
    db: impl PgExecutor<'_>,
    starts: &[i64],
    target: i64,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"WITH RECURSIVE reached (id) AS (
               SELECT unnest($1::bigint[])
               UNION
               SELECT child FROM jobs JOIN reached ON jobs.id = reached.id
               CROSS JOIN LATERAL unnest(jobs.on_success || jobs.on_failure || jobs.on_finish) AS child
           )
           SELECT EXISTS (SELECT 1 FROM reached WHERE id = $2) AS "reached!""#,
        starts,
        target
    )
    .fetch_one(db)
    .await?)
}

/// Takes a deleted job out of every other job's child lists.
pub async fn forget_child(db: impl PgExecutor<'_>, id: i64) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE jobs SET on_success = array_remove(on_success, $1), on_failure = array_remove(on_failure, $1),
                         on_finish = array_remove(on_finish, $1)
         WHERE $1 = ANY (on_success || on_failure || on_finish)",
        id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A job as the capacity forecast weighs it: its name, the executor labels it needs, and
/// its typical duration (the 90th percentile of its runs that ran to an end within
/// `within_secs`; None without such runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Labels an executor must carry to run it.
    pub selector: serde_json::Value,
    /// p90 duration in seconds.
    pub p90_secs: Option<f64>,
}

/// The jobs of the namespaces `only` (None: every job) with their selectors and typical
/// durations.
pub async fn demand(
    db: impl PgExecutor<'_>,
    only: Option<&[String]>,
    within_secs: i64,
) -> Result<Vec<Demand>, StoreError> {
    Ok(sqlx::query_as!(
        Demand,
        r#"SELECT jobs.id, jobs.name, jobs.selector,
                  (SELECT extract(epoch FROM percentile_cont(0.9)
                                  WITHIN GROUP (ORDER BY runs.finished_at - runs.started_at))::float8
                   FROM runs
                   WHERE runs.job_id = jobs.id AND runs.state IN ('succeeded', 'failed', 'timed_out')
                     AND runs.started_at IS NOT NULL
                     AND runs.finished_at >= now() - make_interval(secs => $2::bigint)) AS p90_secs
           FROM jobs
           WHERE ($1::text[] IS NULL OR jobs.namespace = ANY($1)) AND jobs.deleted_at IS NULL
           ORDER BY jobs.id"#,
        only as Option<&[String]>,
        within_secs,
    )
    .fetch_all(db)
    .await?)
}

/// A job's typical durations: the median and 90th percentile, in seconds, of its runs
/// that ran to an end within `within_secs` (None without such runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypicalDuration {
    /// The median.
    pub p50_secs: Option<f64>,
    /// The 90th percentile.
    pub p90_secs: Option<f64>,
}

/// [`TypicalDuration`] of one job (a running run's estimated end).
pub async fn typical_duration(
    db: impl PgExecutor<'_>,
    job_id: i64,
    within_secs: i64,
) -> Result<TypicalDuration, StoreError> {
    Ok(sqlx::query_as!(
        TypicalDuration,
        r#"SELECT extract(epoch FROM percentile_cont(0.5)
                  WITHIN GROUP (ORDER BY finished_at - started_at))::float8 AS p50_secs,
                  extract(epoch FROM percentile_cont(0.9)
                  WITHIN GROUP (ORDER BY finished_at - started_at))::float8 AS p90_secs
           FROM runs
           WHERE job_id = $1 AND state IN ('succeeded', 'failed', 'timed_out')
             AND started_at IS NOT NULL
             AND finished_at >= now() - make_interval(secs => $2::bigint)"#,
        job_id,
        within_secs,
    )
    .fetch_one(db)
    .await?)
}
