//! `run_checkpoints`: the last checkpoint a shell job wrote, one per chain of attempts of
//! an instant (keyed by the chain's first run), so the attempt that takes over after its
//! executor died resumes from it instead of starting over.
//!
//! A save is guarded like every executor write of a run: the attempt must still be
//! `running`, owned by the saving executor, under its fence (and, for a job that runs
//! one attempt at a time, the job's current fence). It locks the attempt's live row
//! (`FOR SHARE`), so a save and the reap that abandons the attempt are ordered: either
//! the save commits before the run leaves `running`, or it finds the run gone and saves
//! nothing. The next attempt starts only after that, so it reads the last save.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;
use crate::fence::Write;

/// The largest checkpoint stored, in bytes (the table's check says the same).
pub const MAX_CHECKPOINT_BYTES: usize = 64 * 1024;

/// A stored checkpoint's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// What the job wrote.
    pub data: Vec<u8>,
    /// The attempt that saved it.
    pub run_id: i64,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
}

/// What people see of a checkpoint: its size and age, not its contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckpointInfo {
    /// Its size in bytes.
    pub bytes: i32,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
    /// Seconds since it was saved.
    pub age_secs: i64,
    /// The attempt that saved it.
    pub run_id: i64,
}

/// Saves `data` as the checkpoint of the chain of `run_id`, if that attempt is still
/// running on `executor_id` under `fence`; a stale owner saves nothing (`Fenced`).
pub async fn save(
    db: impl PgExecutor<'_>,
    run_id: i64,
    executor_id: Uuid,
    fence: Option<i64>,
    data: &[u8],
) -> Result<Write, StoreError> {
    let saved = sqlx::query!(
        r#"WITH owner AS (
               SELECT runs.id, runs.job_id, coalesce(runs.first_run_id, runs.id) AS chain_id, runs.fence
               FROM runs_live AS runs
               WHERE runs.id = $1 AND runs.state = 'running' AND runs.executor_id = $2
                 AND runs.fence IS NOT DISTINCT FROM $3
                 AND (NOT runs.exclusive OR EXISTS (
                     SELECT 1 FROM jobs WHERE jobs.id = runs.job_id AND jobs.fence = $3))
               FOR SHARE OF runs)
           INSERT INTO run_checkpoints (chain_id, run_id, job_id, fence, data, saved_at)
           SELECT owner.chain_id, owner.id, owner.job_id, owner.fence, $4, now() FROM owner
           ON CONFLICT (chain_id) DO UPDATE
               SET run_id = excluded.run_id, fence = excluded.fence, data = excluded.data,
                   saved_at = excluded.saved_at"#,
        run_id,
        executor_id,
        fence,
        data
    )
    .execute(db)
    .await?;
    Ok(Write::from_rows(saved.rows_affected()))
}

/// The checkpoint of the chain whose first run is `chain_id`, if one was saved.
pub async fn load(db: impl PgExecutor<'_>, chain_id: i64) -> Result<Option<Checkpoint>, StoreError> {
    Ok(sqlx::query_as!(
        Checkpoint,
        "SELECT data, run_id, saved_at FROM run_checkpoints WHERE chain_id = $1",
        chain_id
    )
    .fetch_optional(db)
    .await?)
}

/// The size and age of the checkpoint of the chain whose first run is `chain_id`.
pub async fn info(db: impl PgExecutor<'_>, chain_id: i64) -> Result<Option<CheckpointInfo>, StoreError> {
    Ok(sqlx::query_as!(
        CheckpointInfo,
        r#"SELECT octet_length(data) AS "bytes!", saved_at,
                  floor(extract(epoch FROM now() - saved_at))::bigint AS "age_secs!", run_id
           FROM run_checkpoints WHERE chain_id = $1"#,
        chain_id
    )
    .fetch_optional(db)
    .await?)
}

/// Deletes checkpoints saved longer than `retention` ago; returns how many.
pub async fn prune(db: impl PgExecutor<'_>, retention: Duration) -> Result<u64, StoreError> {
    let deleted = sqlx::query!(
        "DELETE FROM run_checkpoints WHERE saved_at < now() - make_interval(secs => $1)",
        retention.as_secs_f64()
    )
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}
