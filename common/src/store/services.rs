//! Services: jobs with `mode = 'service'`, whose `replicas` instances are kept running.
//! An instance is a run with a `replica` slot (0 to replicas - 1), and the live runs
//! hold at most one run per slot (a unique index): never more than `replicas` instances
//! are queued, claimed or running at once, whoever starts them. Monitors start the
//! instances that are missing (a first start, an instance that ended, one whose executor
//! was declared dead) and stop the surplus (a paused service, fewer replicas) every
//! pass (the instances are queued by [`crate::store::runs::queue_missing_service_instances`]).
//! Instances that keep ending quickly are restarted with a growing backoff.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::StoreError;

/// A live instance that should stop, and why.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SurplusReplica {
    /// Its run.
    pub run_id: i64,
    /// The service.
    pub job_id: i64,
    /// Why it should stop.
    pub reason: String,
}

/// Live instances not yet asked to stop whose service is paused, is no longer a
/// service, or has fewer replicas than their slot.
pub async fn surplus(db: impl PgExecutor<'_>) -> Result<Vec<SurplusReplica>, StoreError> {
    Ok(sqlx::query_as!(
        SurplusReplica,
        r#"SELECT runs.id AS run_id, runs.job_id,
                  CASE WHEN jobs.paused THEN 'service paused'
                       WHEN jobs.mode <> 'service' THEN 'no longer a service'
                       ELSE 'service scaled to ' || jobs.replicas || ' replicas' END AS "reason!"
           FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
           WHERE runs.replica IS NOT NULL AND runs.cancel_requested_at IS NULL
             AND (jobs.paused OR jobs.mode <> 'service' OR runs.replica >= jobs.replicas)"#
    )
    .fetch_all(db)
    .await?)
}

/// Who holds each live instance of a service (the job page's replicas).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicaHolder {
    /// The slot.
    pub replica: i32,
    /// Its current run.
    pub run_id: i64,
    /// The run's state.
    pub state: String,
    /// The executor running it (None while queued).
    pub executor_id: Option<uuid::Uuid>,
    /// That executor's host.
    pub host: Option<String>,
    /// When the instance started.
    pub started_at: Option<DateTime<Utc>>,
}

/// The live instances of a service, by slot.
pub async fn holders(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<ReplicaHolder>, StoreError> {
    Ok(sqlx::query_as!(
        ReplicaHolder,
        r#"SELECT runs.replica AS "replica!", runs.id AS run_id, runs.state, runs.executor_id,
                  executors.host AS "host?", runs.started_at
           FROM runs_live AS runs LEFT JOIN executors ON executors.id = runs.executor_id
           WHERE runs.job_id = $1 AND runs.replica IS NOT NULL
           ORDER BY runs.replica"#,
        job_id
    )
    .fetch_all(db)
    .await?)
}
