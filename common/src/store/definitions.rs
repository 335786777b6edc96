//! The lock that serializes applies of definitions (`POST /api/v1/definitions/apply`,
//! `probactr apply`, the admin's import): one apply at a time across every manager, so
//! that what an apply checked still holds when it makes its changes.

use sqlx::PgExecutor;

use super::StoreError;

/// Waits for the apply lock and takes it until the caller's transaction ends.
pub async fn lock_apply(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('probactr_definitions_apply')) AS locked")
        .fetch_one(db)
        .await?;
    Ok(())
}
