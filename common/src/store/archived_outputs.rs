//! `archived_outputs`: the runs whose full output is in the output archive (written by
//! the executor's uploader once the object is stored), so that retention can delete the
//! objects of runs gone (by the monitor).

use sqlx::PgExecutor;

use super::StoreError;

/// Notes that a run's output is archived.
pub async fn record(db: impl PgExecutor<'_>, run_id: i64) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO archived_outputs (run_id) VALUES ($1) ON CONFLICT (run_id) DO NOTHING",
        run_id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Up to `batch` archived runs whose run is gone (past the retention, or deleted with its
/// job): their objects are to be deleted, then [`forget`] them.
pub async fn orphans(db: impl PgExecutor<'_>, batch: i64) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT archived.run_id FROM archived_outputs AS archived
         WHERE NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = archived.run_id)
         ORDER BY archived.archived_at
         LIMIT $1",
        batch
    )
    .fetch_all(db)
    .await?)
}

/// Forgets runs whose objects were deleted.
pub async fn forget(db: impl PgExecutor<'_>, run_ids: &[i64]) -> Result<u64, StoreError> {
    let done = sqlx::query!("DELETE FROM archived_outputs WHERE run_id = ANY($1)", run_ids)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}
