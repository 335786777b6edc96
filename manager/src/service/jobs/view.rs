//! A job as the API and the admin show it: its definition, retry policy and all-time
//! statistics; its possible secrets hidden from whoever may not edit it.

use chrono::{DateTime, Utc};
use probactr_common::jobspec::redact_secrets;
use probactr_common::model::{
    JobKind, JobMode, OnExecutorLost, Overlap, Rate, RetryBackoff, RetryJitter, RetryOn, Route,
};
use probactr_common::store::jobs::{JobRow, JobStats};
use serde::Serialize;
use serde_json::Value;

use crate::auth::Principal;

/// A job's retry policy.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RetryView {
    /// Attempts in all, the first included.
    pub max_attempts: i32,
    /// How the delay grows: `fixed`, or `exponential` (doubled for each later attempt).
    pub backoff: RetryBackoff,
    /// Seconds before the second attempt.
    pub initial_secs: i32,
    /// The same as `initial_secs` (its older name).
    pub backoff_secs: i32,
    /// The longest delay, in seconds (null: no bound).
    pub max_secs: Option<i32>,
    /// `full`: a random delay up to the computed one; `none`: exactly it.
    pub jitter: RetryJitter,
    /// Which failures are retried (null: every failure). A run abandoned by its
    /// executor always is.
    pub retry_on: Option<RetryOn>,
}

/// A job as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct JobView {
    /// Id.
    pub id: i64,
    /// Unique name within its namespace.
    pub name: String,
    /// The namespace it belongs to (never changes).
    pub namespace: String,
    /// Free text.
    pub description: String,
    /// shell, http, noop or sleep.
    pub kind: JobKind,
    /// The kind's definition.
    pub spec: Value,
    /// May attempts overlap?
    pub parallel: bool,
    /// Bound on overlapping attempts of a parallel job.
    pub max_concurrency: Option<i32>,
    /// skip or queue, when the job is busy.
    pub overlap: Overlap,
    /// Seconds an attempt may run.
    pub timeout_secs: i32,
    /// Retry policy.
    pub retry: RetryView,
    /// Paused jobs are neither fired nor claimed.
    pub paused: bool,
    /// Who manages the definition (`probactr apply`); null: people.
    pub managed_by: Option<String>,
    /// What happens to a run whose executor died: `rerun` (a takeover) or `fail`.
    pub on_executor_lost: OnExecutorLost,
    /// How many times a run is taken over at most.
    pub max_takeovers: i32,
    /// Seconds between SIGTERM and SIGKILL when an executor stops a run.
    pub stop_grace_secs: i32,
    /// Labels an executor must all carry to claim its runs (`{}`: any executor).
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub selector: Value,
    /// When slots are scarce, higher goes first.
    pub priority: i32,
    /// Where the runs of one instant go: `any`, `broadcast` or `shard`.
    pub route: Route,
    /// Runs per instant of a `shard` route.
    pub shards: i32,
    /// `batch`, or `service` (kept running).
    pub mode: JobMode,
    /// Instances of a service.
    pub replicas: i32,
    /// Its declared run parameters, `{NAME: {type, values, pattern, min, max, required,
    /// default, secret}}` (null: parameters are free).
    #[schema(value_type = Option<Object>)]
    pub params_schema: Option<Value>,
    /// The pool of its namespace whose slots its runs hold (null: none).
    pub pool: Option<String>,
    /// The slots of `pool` each run holds.
    pub pool_slots: i32,
    /// At most `limit` of its runs start in any window of `per_secs` seconds (null: no bound).
    pub rate: Option<Rate>,
    /// When the job was deleted with its history kept (null for a job in use).
    pub deleted_at: Option<DateTime<Utc>>,
    /// Jobs queued when a run succeeds (their runs get this run's params and
    /// `PROBACTR_PARENT_RUN_ID`).
    pub on_success: Vec<i64>,
    /// Jobs queued when a run fails, times out or is abandoned.
    pub on_failure: Vec<i64>,
    /// Jobs queued whenever a run ends, cancelled included.
    pub on_finish: Vec<i64>,
    /// Optimistic-locking version; send it back with a `PATCH`.
    pub version: i64,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// Run statistics.
    pub stats: JobStats,
}

impl From<JobRow> for JobView {
    fn from(row: JobRow) -> Self {
        let job = row.job;
        JobView {
            id: job.id,
            name: job.name,
            namespace: job.namespace,
            description: job.description,
            kind: job.kind,
            spec: job.spec,
            parallel: job.parallel,
            max_concurrency: job.max_concurrency,
            overlap: job.overlap,
            timeout_secs: job.timeout_secs,
            retry: RetryView {
                max_attempts: job.retry_max_attempts,
                backoff: job.retry_backoff,
                initial_secs: job.retry_backoff_secs,
                backoff_secs: job.retry_backoff_secs,
                max_secs: job.retry_max_secs,
                jitter: job.retry_jitter,
                retry_on: job.retry_on.map(|on| on.0),
            },
            paused: job.paused,
            managed_by: job.managed_by,
            on_executor_lost: job.on_executor_lost,
            max_takeovers: job.max_takeovers,
            stop_grace_secs: job.stop_grace_secs,
            selector: job.selector,
            priority: job.priority,
            route: job.route,
            shards: job.shards,
            mode: job.mode,
            replicas: job.replicas,
            params_schema: job.params_schema,
            pool: job.pool,
            pool_slots: job.pool_slots,
            rate: job.rate.map(|rate| rate.0),
            deleted_at: job.deleted_at,
            on_success: row.on_success,
            on_failure: row.on_failure,
            on_finish: row.on_finish,
            version: job.version,
            created_at: job.created_at,
            updated_at: job.updated_at,
            stats: row.stats,
        }
    }
}

impl JobView {
    /// The job as `who` may see it: whoever may not edit it sees its possible secrets
    /// (shell `env` and HTTP `headers` values) as `***`.
    pub fn visible_to(mut self, who: &Principal) -> JobView {
        if !who.can_edit_job(&self.namespace, self.kind) {
            self.spec = redact_secrets(&self.spec);
        }
        self
    }
}
