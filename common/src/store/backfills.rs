//! `backfills`: requests to run the instants of a trigger that have no run, fed into the
//! queue by monitors a few at a time (see migration `20261124000008_backfills.sql`).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};

use crate::store::{runs, StoreError};

/// A backfill as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Backfill {
    /// Id.
    pub id: i64,
    /// The trigger whose instants it runs.
    pub trigger_id: i64,
    /// The trigger's job.
    pub job_id: i64,
    /// The instants it runs, in order.
    pub instants: Vec<DateTime<Utc>>,
    /// How many of them are queued so far.
    pub queued: i32,
    /// At most this many of its runs live at once.
    pub max_concurrency: i32,
    /// Who asked.
    pub requested_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When its last instant was queued.
    pub finished_at: Option<DateTime<Utc>>,
}

impl Backfill {
    /// The reason its runs carry (and by which its live runs are counted).
    pub fn reason(&self) -> String {
        reason_of(self.id)
    }
}

/// The reason the runs of backfill `id` carry.
pub fn reason_of(id: i64) -> String {
    format!("backfill #{id}")
}

/// Records a backfill.
pub async fn create(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    job_id: i64,
    instants: &[DateTime<Utc>],
    max_concurrency: i32,
    requested_by: &str,
) -> Result<Backfill, StoreError> {
    Ok(sqlx::query_as!(
        Backfill,
        "INSERT INTO backfills (trigger_id, job_id, instants, max_concurrency, requested_by)
         VALUES ($1, $2, $3, $4, $5)
         RETURNING id, trigger_id, job_id, instants, queued, max_concurrency, requested_by, created_at, finished_at",
        trigger_id,
        job_id,
        instants,
        max_concurrency,
        requested_by
    )
    .fetch_one(db)
    .await?)
}

/// The instants of a trigger that unfinished backfills have yet to queue.
pub async fn waiting_instants(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
) -> Result<Vec<DateTime<Utc>>, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT waiting AS "instant!" FROM backfills, unnest(instants[queued + 1:]) AS waiting
           WHERE trigger_id = $1 AND finished_at IS NULL"#,
        trigger_id
    )
    .fetch_all(db)
    .await?)
}

/// The instants of a trigger in `[from, to)` that backfills have queued.
pub async fn queued_instants(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<DateTime<Utc>>, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT DISTINCT done AS "instant!" FROM backfills, unnest(instants[1:queued]) AS done
           WHERE trigger_id = $1 AND done >= $2 AND done < $3"#,
        trigger_id,
        from,
        to
    )
    .fetch_all(db)
    .await?)
}

/// A trigger's backfills, newest first.
pub async fn list_for_trigger(db: impl PgExecutor<'_>, trigger_id: i64) -> Result<Vec<Backfill>, StoreError> {
    Ok(sqlx::query_as!(
        Backfill,
        "SELECT id, trigger_id, job_id, instants, queued, max_concurrency, requested_by, created_at, finished_at
         FROM backfills WHERE trigger_id = $1 ORDER BY id DESC LIMIT 20",
        trigger_id
    )
    .fetch_all(db)
    .await?)
}

/// Queues the next instants of every unfinished backfill, while fewer than its
/// `max_concurrency` runs are live; returns how many runs it queued. Backfills another
/// monitor is feeding are skipped.
pub async fn feed(conn: &mut PgConnection) -> Result<u64, StoreError> {
    let unfinished = sqlx::query_as!(
        Backfill,
        "SELECT id, trigger_id, job_id, instants, queued, max_concurrency, requested_by, created_at, finished_at
         FROM backfills WHERE finished_at IS NULL ORDER BY id LIMIT 50
         FOR UPDATE SKIP LOCKED"
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut queued_runs = 0;
    for backfill in unfinished {
        let live = runs::count_live_with_reason(&mut *conn, &backfill.reason()).await?;
        let room = (i64::from(backfill.max_concurrency) - live).max(0) as usize;
        let from = backfill.queued.max(0) as usize;
        let next: Vec<DateTime<Utc>> = backfill.instants.iter().skip(from).take(room).copied().collect();
        if next.is_empty() && from < backfill.instants.len() {
            continue;
        }
        queued_runs += runs::queue_instants(
            &mut *conn,
            backfill.job_id,
            backfill.trigger_id,
            &next,
            &backfill.reason(),
        )
        .await?;
        let queued = (from + next.len()) as i32;
        sqlx::query!(
            "UPDATE backfills SET queued = $2,
                    finished_at = CASE WHEN $2 = cardinality(instants) THEN now() END
             WHERE id = $1",
            backfill.id,
            queued
        )
        .execute(&mut *conn)
        .await?;
        tracing::info!(
            backfill.id = backfill.id,
            trigger.id = backfill.trigger_id,
            queued,
            total = backfill.instants.len(),
            "backfill fed"
        );
    }
    Ok(queued_runs)
}
