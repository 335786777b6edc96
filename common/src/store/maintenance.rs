//! `maintenance_windows`: creating, listing and ending them, and the windows a firing
//! must apply (see [`crate::maintenance`] for what they mean).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{rows_written, StoreError};
use crate::maintenance::{Policy, Window, WindowPlan};

struct Row {
    id: i64,
    starts_at: DateTime<Utc>,
    ends_at: Option<DateTime<Utc>>,
    scope: serde_json::Value,
    policy: String,
    reason: String,
    stop_running: bool,
    created_by: String,
    created_at: DateTime<Utc>,
}

impl Row {
    /// The window; None for a row that no longer reads (written from a [`WindowPlan`] only).
    fn window(self) -> Option<Window> {
        let policy = match self.policy.as_str() {
            "skip" => Policy::Skip,
            "defer" => Policy::Defer,
            _ => return None,
        };
        Some(Window {
            id: self.id,
            plan: WindowPlan {
                from: self.starts_at,
                until: self.ends_at,
                scope: serde_json::from_value(self.scope).ok()?,
                policy,
                reason: self.reason,
                stop_running: self.stop_running,
            },
            created_by: self.created_by,
            created_at: self.created_at,
        })
    }
}

fn windows(rows: Vec<Row>) -> Vec<Window> {
    rows.into_iter().filter_map(Row::window).collect()
}

/// Records a window.
pub async fn create(
    db: impl PgExecutor<'_>,
    window: &WindowPlan,
    created_by: &str,
) -> Result<Window, StoreError> {
    let row = sqlx::query_as!(
        Row,
        "INSERT INTO maintenance_windows (starts_at, ends_at, scope, policy, reason, stop_running, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING id, starts_at, ends_at, scope, policy, reason, stop_running, created_by, created_at",
        window.from,
        window.until,
        serde_json::to_value(&window.scope).unwrap_or_default(),
        window.policy.as_str(),
        window.reason,
        window.stop_running,
        created_by
    )
    .fetch_one(db)
    .await?;
    row.window().ok_or_else(|| {
        StoreError::Database(sqlx::Error::Protocol(
            "a window just written does not read".into(),
        ))
    })
}

/// Every window not over at `now` (active or to come), the earliest first.
pub async fn current(db: impl PgExecutor<'_>, now: DateTime<Utc>) -> Result<Vec<Window>, StoreError> {
    Ok(windows(
        sqlx::query_as!(
            Row,
            "SELECT id, starts_at, ends_at, scope, policy, reason, stop_running, created_by, created_at
             FROM maintenance_windows WHERE ends_at IS NULL OR ends_at > $1
             ORDER BY starts_at, id",
            now
        )
        .fetch_all(db)
        .await?,
    ))
}

/// The windows that overlap `[from, until]`: those a firing of instants in that span
/// must apply, and those whose end falls in it (a deferred trigger fires then).
pub async fn overlapping(
    db: impl PgExecutor<'_>,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<Window>, StoreError> {
    Ok(windows(
        sqlx::query_as!(
            Row,
            "SELECT id, starts_at, ends_at, scope, policy, reason, stop_running, created_by, created_at
             FROM maintenance_windows WHERE starts_at <= $2 AND (ends_at IS NULL OR ends_at > $1)
             ORDER BY starts_at, id",
            from,
            until
        )
        .fetch_all(db)
        .await?,
    ))
}

/// Deletes a window (its skipped instants stay recorded); false when there is none.
pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM maintenance_windows WHERE id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Ends every open-ended window over every job at `now` (a cluster resume); returns
/// how many it ended.
pub async fn end_cluster_pauses(db: impl PgExecutor<'_>, now: DateTime<Utc>) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"UPDATE maintenance_windows SET ends_at = greatest($1, starts_at + interval '1 microsecond')
           WHERE ends_at IS NULL AND scope = '{"all": true}'::jsonb"#,
        now
    );
    rows_written(db, statement).await
}
