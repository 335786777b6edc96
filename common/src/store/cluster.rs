//! The cluster at a glance: the status summary of the dashboard and the numbers
//! `/metrics` exports, read across `executors`, `runs`, `jobs` and `triggers`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;

/// The next instant of one trigger, for the status summary.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NextFire {
    /// The trigger.
    pub trigger_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The job's name.
    pub job_name: String,
    /// When it fires next.
    pub next_fire_at: DateTime<Utc>,
}

/// A recent failed run, for the status summary.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecentFailure {
    /// The run.
    pub run_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The job's name.
    pub job_name: String,
    /// failed, timed_out or abandoned.
    pub state: String,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// What went wrong.
    pub error: Option<String>,
}

/// The cluster at a glance.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Status {
    /// Registered processes per role and state: `{"executor": {"alive": 2}}`.
    pub processes: BTreeMap<String, BTreeMap<String, i64>>,
    /// Runs queued in the last hour, by state.
    pub runs_last_hour: BTreeMap<String, i64>,
    /// Runs queued per minute over the last hour (oldest first, 60 numbers).
    pub runs_per_minute: Vec<i64>,
    /// The latest failures.
    pub recent_failures: Vec<RecentFailure>,
    /// The next instants to fire.
    pub next_fires: Vec<NextFire>,
    /// Instants recorded as missed in the last 24 hours (misfires, and the gaps the
    /// reconciler found).
    pub missed_last_day: i64,
}

/// Minutes of [`Status::runs_per_minute`], the current one last.
const PER_MINUTE_SPAN: usize = 60;

/// The status summary.
pub async fn status(db: impl PgExecutor<'_> + Copy) -> Result<Status, StoreError> {
    let mut processes: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for row in process_counts(db).await? {
        processes
            .entry(row.role)
            .or_default()
            .insert(row.state, row.count);
    }
    let run_rows = sqlx::query!(
        r#"SELECT state, count(*) AS "count!" FROM runs WHERE queued_at > now() - interval '1 hour'
           GROUP BY state"#
    )
    .fetch_all(db)
    .await?;
    // One range of the `runs_queued_at` index, counted by minute (a join of the sixty
    // minutes to `runs` probed every day's partition sixty times: 80 ms over a million
    // runs, against 6); minutes without runs are the zeros left.
    let by_minute = sqlx::query!(
        r#"SELECT (extract(epoch FROM date_trunc('minute', now()) - date_trunc('minute', queued_at)) / 60)::int AS "ago!",
                  count(*) AS "count!"
           FROM runs WHERE queued_at >= date_trunc('minute', now()) - interval '59 minutes'
           GROUP BY 1"#
    )
    .fetch_all(db)
    .await?;
    let mut per_minute = vec![0; PER_MINUTE_SPAN];
    for row in by_minute {
        // Oldest first; a run queued after this minute (a clock ahead) is not counted.
        if let Some(slot) = usize::try_from(row.ago)
            .ok()
            .and_then(|ago| (PER_MINUTE_SPAN - 1).checked_sub(ago))
        {
            per_minute[slot] = row.count;
        }
    }
    let recent_failures = sqlx::query_as!(
        RecentFailure,
        "SELECT runs.id AS run_id, runs.job_id, jobs.name AS job_name, runs.state, runs.finished_at, runs.error
         FROM runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state IN ('failed', 'timed_out', 'abandoned')
         ORDER BY runs.id DESC LIMIT 10"
    )
    .fetch_all(db)
    .await?;
    let next_fires = sqlx::query_as!(
        NextFire,
        r#"SELECT triggers.id AS trigger_id, triggers.job_id, jobs.name AS job_name,
                  triggers.next_fire_at AS "next_fire_at!"
           FROM triggers JOIN jobs ON jobs.id = triggers.job_id
           WHERE NOT triggers.paused AND NOT jobs.paused AND triggers.next_fire_at IS NOT NULL
           ORDER BY triggers.next_fire_at LIMIT 10"#
    )
    .fetch_all(db)
    .await?;
    let missed_last_day = sqlx::query_scalar!(
        r#"SELECT coalesce(sum(instants), 0)::bigint AS "missed!" FROM misfires
           WHERE recorded_at > now() - interval '1 day' AND reason <> $1
             -- Skipped on purpose (see `maintenance::is_deliberate`).
             AND reason NOT LIKE $2::text || '%' AND reason NOT LIKE $3::text || '%'"#,
        crate::ledger::PAUSED_REASON,
        crate::calendar::CALENDAR_REASON_PREFIX,
        crate::maintenance::MAINTENANCE_REASON_PREFIX
    )
    .fetch_one(db)
    .await?;
    Ok(Status {
        missed_last_day,
        processes,
        runs_last_hour: run_rows.into_iter().map(|row| (row.state, row.count)).collect(),
        runs_per_minute: per_minute,
        recent_failures,
        next_fires,
    })
}

/// How many registered processes there are of a role in a state.
struct ProcessCount {
    role: String,
    state: String,
    count: i64,
}

/// Registered processes by role and state, in that order.
async fn process_counts(db: impl PgExecutor<'_>) -> Result<Vec<ProcessCount>, StoreError> {
    Ok(sqlx::query_as!(
        ProcessCount,
        r#"SELECT role, state, count(*) AS "count!" FROM executors GROUP BY role, state ORDER BY 1, 2"#
    )
    .fetch_all(db)
    .await?)
}

/// Numbers for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Runs kept in history, by state.
    pub runs_by_state: Vec<(String, i64)>,
    /// Registered processes by role and state.
    pub processes: Vec<(String, String, i64)>,
    /// Jobs in all.
    pub jobs: i64,
    /// Paused jobs.
    pub jobs_paused: i64,
    /// Unpaused triggers more than 5 s past their instant (executors falling behind).
    pub triggers_overdue: i64,
}

/// Reads [`Metrics`].
pub async fn metrics(db: impl PgExecutor<'_> + Copy) -> Result<Metrics, StoreError> {
    let runs_by_state =
        sqlx::query!(r#"SELECT state, count(*) AS "count!" FROM runs GROUP BY state ORDER BY state"#)
            .fetch_all(db)
            .await?;
    let jobs =
        sqlx::query!(r#"SELECT count(*) AS "all!", count(*) FILTER (WHERE paused) AS "paused!" FROM jobs"#)
            .fetch_one(db)
            .await?;
    let triggers_overdue = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM triggers
           WHERE NOT paused AND next_fire_at < now() - interval '5 seconds'"#
    )
    .fetch_one(db)
    .await?;
    Ok(Metrics {
        runs_by_state: runs_by_state
            .into_iter()
            .map(|row| (row.state, row.count))
            .collect(),
        processes: process_counts(db)
            .await?
            .into_iter()
            .map(|row| (row.role, row.state, row.count))
            .collect(),
        jobs: jobs.all,
        jobs_paused: jobs.paused,
        triggers_overdue,
    })
}
