//! Triggers of a job, the version-checked update (which also moves `next_fire_at`) and
//! the delete. Every write wakes the executors through the `triggers_changed` database
//! trigger of the core migration.

use chrono::{DateTime, Utc};
use probactr_common::model::Trigger;
use probactr_common::store::triggers::NewTrigger;
use sqlx::PgExecutor;

/// A job's triggers, oldest first.
pub async fn list_for_job(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<Trigger>, sqlx::Error> {
    sqlx::query_as::<_, Trigger>("SELECT * FROM triggers WHERE job_id = $1 ORDER BY id")
        .bind(job_id)
        .fetch_all(db)
        .await
}

/// One trigger, locked for the rest of the transaction.
pub async fn get_for_update(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Trigger>, sqlx::Error> {
    sqlx::query_as::<_, Trigger>("SELECT * FROM triggers WHERE id = $1 FOR UPDATE")
        .bind(id)
        .fetch_optional(db)
        .await
}

/// Replaces a trigger's definition if its version is still `version`; None on a lost race.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: i64,
    version: i64,
    trigger: &NewTrigger,
    next_fire_at: Option<DateTime<Utc>>,
) -> Result<Option<Trigger>, sqlx::Error> {
    sqlx::query_as::<_, Trigger>(
        "UPDATE triggers SET kind = $3, cron = $4, timezone = $5, interval_secs = $6, at = $7,
                             start_at = $8, end_at = $9, misfire = $10, misfire_threshold_secs = $11,
                             paused = $12, next_fire_at = $13, version = version + 1, updated_at = now()
         WHERE id = $1 AND version = $2
         RETURNING *",
    )
    .bind(id)
    .bind(version)
    .bind(trigger.kind.as_str())
    .bind(&trigger.cron)
    .bind(&trigger.timezone)
    .bind(trigger.interval_secs)
    .bind(trigger.at)
    .bind(trigger.start_at)
    .bind(trigger.end_at)
    .bind(trigger.misfire.as_str())
    .bind(trigger.misfire_threshold_secs)
    .bind(trigger.paused)
    .bind(next_fire_at)
    .fetch_optional(db)
    .await
}

/// Deletes a trigger (its runs stay, with `trigger_id` NULL).
pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM triggers WHERE id = $1")
        .bind(id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}
