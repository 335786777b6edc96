//! `audit_log`: one row per change made through the manager (who, when, what, the object
//! before and after).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgExecutor;

use super::{Page, StoreError};

/// What changed, for [`record`].
#[derive(Debug, Clone)]
pub struct Change<'a> {
    /// `object.verb`: `job.create`, `trigger.pause`, `run.cancel`…
    pub action: &'a str,
    /// `job`, `trigger`, `run`, `token`, `user`.
    pub object_type: &'a str,
    /// The object's id.
    pub object_id: Option<i64>,
    /// The object before the change.
    pub before: Option<Value>,
    /// The object after it.
    pub after: Option<Value>,
}

/// An entry of the audit log: who changed what, when, and the object before and after.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Entry {
    /// Id.
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// The actor's user id (None once the user is deleted).
    pub actor_id: Option<i64>,
    /// The actor's name at the time.
    pub actor: String,
    /// What was done.
    pub action: String,
    /// On what kind of object.
    pub object_type: String,
    /// Its id.
    pub object_id: Option<i64>,
    /// Before.
    pub before: Option<Value>,
    /// After.
    pub after: Option<Value>,
}

/// Who made a change: the user's id and name at the time.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The user's id.
    pub id: i64,
    /// The user's name.
    pub name: &'a str,
}

/// Writes one audit row; call it in the transaction of the change.
pub async fn record(db: impl PgExecutor<'_>, who: Actor<'_>, change: Change<'_>) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, before, after)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        who.id,
        who.name,
        change.action,
        change.object_type,
        change.object_id,
        change.before,
        change.after
    )
    .execute(db)
    .await?;
    tracing::info!(
        actor = who.name,
        action = change.action,
        object.id = change.object_id,
        "audited change"
    );
    Ok(())
}

/// A page of the log, newest first, optionally of one object.
pub async fn list(
    db: impl PgExecutor<'_> + Copy,
    object: Option<(&str, i64)>,
    page: Page,
) -> Result<(Vec<Entry>, i64), StoreError> {
    let (object_type, object_id) = object.map_or((None, None), |(t, id)| (Some(t), Some(id)));
    let items = sqlx::query_as!(
        Entry,
        "SELECT id, at, actor_id, actor, action, object_type, object_id, before, after FROM audit_log
         WHERE ($1::text IS NULL OR (object_type = $1 AND object_id = $2))
         ORDER BY id DESC LIMIT $3 OFFSET $4",
        object_type,
        object_id,
        page.limit,
        page.offset
    )
    .fetch_all(db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM audit_log
           WHERE ($1::text IS NULL OR (object_type = $1 AND object_id = $2))"#,
        object_type,
        object_id
    )
    .fetch_one(db)
    .await?;
    Ok((items, total))
}
