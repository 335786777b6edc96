//! The history of runs as people read it: lists sorted by a column with filters (the
//! output only flagged), counts by state and by executor.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgExecutor, Postgres, QueryBuilder};
use uuid::Uuid;

use crate::model::RunState;
use crate::store::{Page, StoreError};

/// A run in a list: every field but the output, which is only flagged.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSummary {
    /// Id.
    pub id: i64,
    /// Its job.
    pub job_id: i64,
    /// Its job's name.
    pub job_name: String,
    /// Its job's namespace.
    pub namespace: String,
    /// The trigger that fired it (None for run-now and deleted triggers).
    pub trigger_id: Option<i64>,
    /// The instant it was scheduled for.
    pub scheduled_at: DateTime<Utc>,
    /// Attempt number in its chain.
    pub attempt: i32,
    /// The chain's first attempt (None on the first attempt itself).
    pub first_run_id: Option<i64>,
    /// Where it is in its life.
    #[sqlx(try_from = "String")]
    pub state: RunState,
    /// Why, when the state alone does not say.
    pub reason: Option<String>,
    /// The executor that owns or owned it.
    pub executor_id: Option<Uuid>,
    /// That executor's name (`host:pid`), while its registration is kept.
    pub executor_name: Option<String>,
    /// Its fencing token.
    pub fence: Option<i64>,
    /// When it was queued.
    pub queued_at: DateTime<Utc>,
    /// When it started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// A shell job's exit code.
    pub exit_code: Option<i32>,
    /// An HTTP job's status.
    pub http_status: Option<i32>,
    /// What went wrong.
    pub error: Option<String>,
    /// Whether output was stored.
    pub has_output: bool,
    /// How long it ran (from start to end), once it ended.
    pub duration_ms: Option<i64>,
    /// Its index among the runs of its instant (broadcast, shard).
    pub shard: Option<i32>,
    /// How many runs its instant made.
    pub shard_total: Option<i32>,
    /// A service instance's slot.
    pub replica: Option<i32>,
}

/// Filters of the run list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only runs of this job.
    pub job_id: Option<i64>,
    /// Only runs of the job of this name.
    pub job_name: Option<String>,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only runs fired by this trigger.
    pub trigger_id: Option<i64>,
    /// Only runs this executor owns or owned.
    pub executor_id: Option<Uuid>,
    /// Only runs of the executor of this name (`host:pid`, or `host` for all its
    /// processes).
    pub executor_name: Option<String>,
    /// Only runs queued at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Only runs queued before this.
    pub until: Option<DateTime<Utc>>,
    /// Only runs that ran at least this long (so only runs that started and ended).
    pub min_duration_ms: Option<i64>,
    /// By which column.
    pub sort: RunSort,
    /// Which way.
    pub dir: SortDir,
    /// Only runs of jobs of these namespaces (None: every namespace).
    pub namespaces: Option<Vec<String>>,
}

/// The column the run list is sorted by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunSort {
    /// The run's id, that is when it was queued (`newest`; `id` is the same).
    #[default]
    Newest,
    /// The job's name.
    Job,
    /// The state's name.
    State,
    /// The instant it was scheduled for.
    Scheduled,
    /// How long it ran; runs that did not run come last either way.
    Duration,
    /// The executor's name; runs no executor took come last either way.
    Executor,
}

impl RunSort {
    /// Every column, in the order the list shows them.
    pub const ALL: [RunSort; 6] = [
        RunSort::Newest,
        RunSort::State,
        RunSort::Job,
        RunSort::Scheduled,
        RunSort::Duration,
        RunSort::Executor,
    ];

    /// Its name in a query string.
    pub fn as_str(self) -> &'static str {
        match self {
            RunSort::Newest => "newest",
            RunSort::Job => "job",
            RunSort::State => "state",
            RunSort::Scheduled => "scheduled",
            RunSort::Duration => "duration",
            RunSort::Executor => "executor",
        }
    }

    /// The SQL expression it orders by.
    fn expression(self) -> &'static str {
        match self {
            RunSort::Newest => "runs.id",
            RunSort::Job => "jobs.name",
            RunSort::State => "runs.state",
            RunSort::Scheduled => "runs.scheduled_at",
            RunSort::Duration => "duration_ms",
            RunSort::Executor => "executor_name",
        }
    }
}

impl std::str::FromStr for RunSort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "id" {
            return Ok(RunSort::Newest);
        }
        RunSort::ALL
            .into_iter()
            .find(|sort| sort.as_str() == text)
            .ok_or_else(|| "expected newest, state, job, scheduled, duration or executor".to_owned())
    }
}

/// Which way the run list is sorted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortDir {
    /// Smallest first.
    Asc,
    /// Largest (newest, longest, last in the alphabet) first.
    #[default]
    Desc,
}

impl SortDir {
    /// Its name in a query string.
    pub fn as_str(self) -> &'static str {
        match self {
            SortDir::Asc => "asc",
            SortDir::Desc => "desc",
        }
    }
}

impl std::str::FromStr for SortDir {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "asc" => Ok(SortDir::Asc),
            "desc" => Ok(SortDir::Desc),
            _ => Err("expected asc or desc".to_owned()),
        }
    }
}

/// `ORDER BY` of the run list: the column, then the newest run first so that pages
/// never repeat or skip a run of equal values.
fn order_by(sort: RunSort, dir: SortDir) -> String {
    let dir = match dir {
        SortDir::Asc => "ASC",
        SortDir::Desc => "DESC",
    };
    match sort {
        RunSort::Newest => format!(" ORDER BY runs.id {dir}"),
        other => format!(" ORDER BY {} {dir} NULLS LAST, runs.id DESC", other.expression()),
    }
}

/// The runs with their jobs and executors (gone executors' runs kept).
const FROM_RUNS: &str =
    " FROM runs JOIN jobs ON jobs.id = runs.job_id LEFT JOIN executors ON executors.id = runs.executor_id";

/// An executor's name as the run list shows it.
const EXECUTOR_NAME: &str = "executors.host || ':' || executors.pid";

/// A run's duration in milliseconds, in SQL.
const DURATION_MS: &str = "(extract(epoch FROM runs.finished_at - runs.started_at) * 1000)::bigint";

fn push_filters(query: &mut QueryBuilder<Postgres>, filter: &RunFilter) {
    query.push(" WHERE TRUE");
    if let Some(job_id) = filter.job_id {
        query.push(" AND runs.job_id = ").push_bind(job_id);
    }
    if let Some(name) = &filter.job_name {
        query.push(" AND jobs.name = ").push_bind(name.clone());
    }
    if let Some(trigger_id) = filter.trigger_id {
        query.push(" AND runs.trigger_id = ").push_bind(trigger_id);
    }
    if let Some(executor_id) = filter.executor_id {
        query.push(" AND runs.executor_id = ").push_bind(executor_id);
    }
    if let Some(name) = &filter.executor_name {
        query
            .push(" AND (executors.host = ")
            .push_bind(name.clone())
            .push(" OR ")
            .push(EXECUTOR_NAME)
            .push(" = ")
            .push_bind(name.clone())
            .push(")");
    }
    if let Some(min) = filter.min_duration_ms {
        query.push(" AND ").push(DURATION_MS).push(" >= ").push_bind(min);
    }
    if let Some(state) = filter.state {
        query.push(" AND runs.state = ").push_bind(state.as_str());
    }
    if let Some(since) = filter.since {
        query.push(" AND runs.queued_at >= ").push_bind(since);
    }
    if let Some(until) = filter.until {
        query.push(" AND runs.queued_at < ").push_bind(until);
    }
    if let Some(namespaces) = &filter.namespaces {
        query
            .push(" AND jobs.namespace = ANY(")
            .push_bind(namespaces.clone())
            .push(")");
    }
}

/// A page of runs, newest first, and how many match in all.
pub async fn list(
    db: impl PgExecutor<'_> + Copy,
    filter: &RunFilter,
    page: Page,
) -> Result<(Vec<RunSummary>, i64), StoreError> {
    let mut query = QueryBuilder::<Postgres>::new(
        "SELECT runs.id, runs.job_id, jobs.name AS job_name, jobs.namespace, runs.trigger_id, runs.scheduled_at,
                runs.attempt, runs.first_run_id, runs.state, runs.reason, runs.executor_id,
                runs.fence,
                runs.queued_at, runs.started_at, runs.finished_at, runs.exit_code, runs.http_status,
                runs.error, coalesce(runs.output, '') <> '' AS has_output,
                runs.shard, runs.shard_total, runs.replica, ",
    );
    query
        .push(EXECUTOR_NAME)
        .push(" AS executor_name, ")
        .push(DURATION_MS)
        .push(" AS duration_ms")
        .push(FROM_RUNS);
    push_filters(&mut query, filter);
    query.push(order_by(filter.sort, filter.dir));
    query.push(" LIMIT ").push_bind(page.limit);
    query.push(" OFFSET ").push_bind(page.offset);
    let items = query.build_query_as::<RunSummary>().fetch_all(db).await?;
    let mut count = QueryBuilder::<Postgres>::new("SELECT count(*)");
    count.push(FROM_RUNS);
    push_filters(&mut count, filter);
    let total: i64 = count.build_query_scalar().fetch_one(db).await?;
    Ok((items, total))
}

/// Runs claimed or running per executor.
pub async fn active_by_executor(db: impl PgExecutor<'_>) -> Result<BTreeMap<Uuid, i64>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT executor_id AS "executor_id!", count(*) AS "count!" FROM runs
           WHERE state IN ('claimed', 'running') AND executor_id IS NOT NULL
           GROUP BY executor_id"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|row| (row.executor_id, row.count)).collect())
}

/// Runs claimed or running per executor, of the jobs of the namespaces `only`.
pub async fn active_by_executor_in(
    db: impl PgExecutor<'_>,
    only: &[String],
) -> Result<BTreeMap<Uuid, i64>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT runs.executor_id AS "executor_id!", count(*) AS "count!" FROM runs
           JOIN jobs ON jobs.id = runs.job_id
           WHERE runs.state IN ('claimed', 'running') AND runs.executor_id IS NOT NULL
             AND jobs.namespace = ANY($1)
           GROUP BY runs.executor_id"#,
        only
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|row| (row.executor_id, row.count)).collect())
}

/// Counts runs by state (for tests, status pages and benchmarks), optionally of one job.
pub async fn count_by_state(
    db: impl PgExecutor<'_>,
    job_id: Option<i64>,
) -> Result<Vec<(RunState, i64)>, StoreError> {
    let mut query: QueryBuilder<Postgres> = QueryBuilder::new("SELECT state, count(*) FROM runs");
    if let Some(job_id) = job_id {
        query.push(" WHERE job_id = ").push_bind(job_id);
    }
    query.push(" GROUP BY state ORDER BY state");
    let rows: Vec<(String, i64)> = query.build_query_as().fetch_all(db).await?;
    rows.into_iter()
        .map(|(state, count)| {
            state
                .parse::<RunState>()
                .map(|state| (state, count))
                .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))
        })
        .collect()
}

/// The first attempt of each of a trigger's instants in `[from, to)`, with the state of
/// the chain's latest attempt (the fire ledger).
#[derive(Debug, Clone, PartialEq)]
pub struct ChainHead {
    /// The instant.
    pub scheduled_at: DateTime<Utc>,
    /// The first attempt.
    pub run_id: i64,
    /// The first attempt's state.
    pub state: RunState,
    /// The first attempt's reason (skips, backfills).
    pub reason: Option<String>,
    /// The state of the chain's latest attempt.
    pub latest_state: RunState,
}

/// Of the given instants (`trigger_ids[i]`'s instant `instants[i]`), those no first attempt
/// was recorded for, in the order given: the reconciler's quick look before it reads a
/// trigger's whole ledger. Each pair is one probe of a trigger-instant index.
pub async fn instants_without_first_run(
    db: impl PgExecutor<'_>,
    trigger_ids: &[i64],
    instants: &[DateTime<Utc>],
) -> Result<Vec<(i64, DateTime<Utc>)>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT due.trigger_id AS "trigger_id!", due.instant AS "instant!"
           FROM UNNEST($1::bigint[], $2::timestamptz[]) WITH ORDINALITY AS due (trigger_id, instant, position)
           WHERE NOT EXISTS (SELECT 1 FROM runs
                             WHERE runs.trigger_id = due.trigger_id AND runs.scheduled_at = due.instant
                               AND runs.attempt = 1)
           ORDER BY due.position"#,
        trigger_ids,
        instants
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.trigger_id, row.instant))
        .collect())
}

/// The chain heads of a trigger's instants in `[from, to)`, in order.
pub async fn chain_heads(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ChainHead>, StoreError> {
    Ok(sqlx::query_as!(
        ChainHead,
        r#"SELECT head.scheduled_at, head.id AS run_id, head.state AS "state: RunState", head.reason,
                  coalesce((SELECT later.state FROM runs AS later WHERE later.first_run_id = head.id
                            ORDER BY later.attempt DESC LIMIT 1), head.state) AS "latest_state!: RunState"
           FROM runs AS head
           WHERE head.trigger_id = $1 AND head.attempt = 1 AND head.scheduled_at >= $2 AND head.scheduled_at < $3
           ORDER BY head.scheduled_at"#,
        trigger_id,
        from,
        to
    )
    .fetch_all(db)
    .await?)
}
