//! Where a server stands in the write-ahead log: the manager judges its read replica by
//! comparing the replica's replayed position with the primary's.

use sqlx::PgExecutor;

use super::StoreError;

/// The server's position in the write-ahead log, in bytes: the last record written on a
/// primary, the last one replayed on a standby (None when a standby has replayed nothing).
pub async fn wal_position(db: impl PgExecutor<'_>) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                                       ELSE pg_current_wal_lsn() END, '0/0')::bigint AS "position""#
    )
    .fetch_one(db)
    .await?)
}
