//! `audit_log`: one row per change made through the manager (who, when, what, the object
//! before and after), and one per login. Each row keeps the object's name as it was then
//! (a job, user or channel by its name; a trigger or run by its job's name), so it reads
//! the same after the object is renamed or deleted.

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
    /// Its name when the change was made (a trigger's or run's: its job's).
    pub object_name: Option<String>,
    /// The namespace of the object (null: a cluster-wide object such as a user, a
    /// namespace or an executor).
    pub namespace: Option<String>,
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

/// The object types that live in a namespace; the others are cluster-wide.
pub const NAMESPACED: &[&str] = &[
    "job",
    "trigger",
    "run",
    "workflow",
    "workflow_run",
    "workflow_trigger",
    "secret",
    "pool",
    "channel",
    "alert_channel",
    "alert_rule",
];

/// Writes one audit row; call it in the transaction of the change. The object's name is
/// taken from the values written (`name`, `username`), else from the object itself; so is
/// the namespace of an object that lives in one (see [`record_in`] to name it).
pub async fn record(db: impl PgExecutor<'_>, who: Actor<'_>, change: Change<'_>) -> Result<(), StoreError> {
    record_in(db, who, None, change).await
}

/// [`record`], with the object's namespace given (objects found by name, not id).
pub async fn record_in(
    db: impl PgExecutor<'_>,
    who: Actor<'_>,
    namespace: Option<&str>,
    change: Change<'_>,
) -> Result<(), StoreError> {
    let namespaced = NAMESPACED.contains(&change.object_type);
    sqlx::query!(
        "INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, before, after, object_name, namespace)
         VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE(
             $7::jsonb ->> 'name', $6::jsonb ->> 'name', $7::jsonb ->> 'username', $6::jsonb ->> 'username',
             CASE $4::text
                 WHEN 'job' THEN (SELECT name FROM jobs WHERE id = $5::bigint)
                 WHEN 'user' THEN (SELECT username FROM users WHERE id = $5::bigint)
                 WHEN 'trigger' THEN (SELECT jobs.name FROM triggers JOIN jobs ON jobs.id = triggers.job_id
                                       WHERE triggers.id = $5)
                 WHEN 'run' THEN (SELECT jobs.name FROM runs JOIN jobs ON jobs.id = runs.job_id
                                   WHERE runs.id = $5)
             END),
             CASE WHEN $9 THEN COALESCE(
                 $8::text, $7::jsonb ->> 'namespace', $6::jsonb ->> 'namespace',
                 CASE $4::text
                     WHEN 'job' THEN (SELECT namespace FROM jobs WHERE id = $5::bigint)
                     WHEN 'trigger' THEN (SELECT jobs.namespace FROM triggers JOIN jobs ON jobs.id = triggers.job_id
                                           WHERE triggers.id = $5)
                     WHEN 'run' THEN (SELECT jobs.namespace FROM runs JOIN jobs ON jobs.id = runs.job_id
                                       WHERE runs.id = $5)
                     WHEN 'workflow' THEN (SELECT namespace FROM workflows WHERE id = $5)
                     WHEN 'workflow_run' THEN (SELECT workflows.namespace FROM workflow_runs
                                                JOIN workflows ON workflows.id = workflow_runs.workflow_id
                                                WHERE workflow_runs.id = $5)
                     WHEN 'workflow_trigger' THEN (SELECT workflows.namespace FROM workflow_triggers
                                                    JOIN workflows ON workflows.id = workflow_triggers.workflow_id
                                                    WHERE workflow_triggers.id = $5)
                     WHEN 'channel' THEN (SELECT namespace FROM alert_channels WHERE id = $5)
                     WHEN 'alert_channel' THEN (SELECT namespace FROM alert_channels WHERE id = $5)
                     WHEN 'alert_rule' THEN (SELECT namespace FROM alert_rules WHERE id = $5)
                 END) END)",
        who.id,
        who.name,
        change.action,
        change.object_type,
        change.object_id,
        change.before,
        change.after,
        namespace,
        namespaced
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

/// Which entries to list; every criterion given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The actor's name.
    pub user: Option<String>,
    /// `job`, `trigger`, `run`, `user`…
    pub object_type: Option<String>,
    /// The object's name, or its id.
    pub object: Option<String>,
    /// The action (`job.update`), or every action of a kind (`job`).
    pub action: Option<String>,
    /// Only entries of this namespace.
    pub namespace: Option<String>,
    /// Only entries of these namespaces, cluster-wide ones left out (None: every entry).
    pub visible: Option<Vec<String>>,
}

/// A page of the log, newest first, of the entries `filter` selects; and their count.
pub async fn list(
    db: impl PgExecutor<'_> + Copy,
    filter: &Filter,
    page: Page,
) -> Result<(Vec<Entry>, i64), StoreError> {
    let object_id = filter.object.as_deref().and_then(|o| o.parse::<i64>().ok());
    let items = sqlx::query_as!(
        Entry,
        "SELECT id, at, actor_id, actor, action, object_type, object_id, object_name, namespace, before, after
         FROM audit_log
         WHERE ($1::text IS NULL OR actor = $1)
           AND ($2::text IS NULL OR object_type = $2)
           AND ($3::text IS NULL OR object_name = $3 OR object_id = $4)
           AND ($5::text IS NULL OR action = $5 OR action LIKE $5 || '.%')
           AND ($8::text IS NULL OR namespace = $8)
           AND ($9::text[] IS NULL OR namespace = ANY($9))
         ORDER BY id DESC LIMIT $6 OFFSET $7",
        filter.user,
        filter.object_type,
        filter.object,
        object_id,
        filter.action,
        page.limit,
        page.offset,
        filter.namespace,
        filter.visible.as_deref()
    )
    .fetch_all(db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM audit_log
           WHERE ($1::text IS NULL OR actor = $1)
             AND ($2::text IS NULL OR object_type = $2)
             AND ($3::text IS NULL OR object_name = $3 OR object_id = $4)
             AND ($5::text IS NULL OR action = $5 OR action LIKE $5 || '.%')
             AND ($6::text IS NULL OR namespace = $6)
             AND ($7::text[] IS NULL OR namespace = ANY($7))"#,
        filter.user,
        filter.object_type,
        filter.object,
        object_id,
        filter.action,
        filter.namespace,
        filter.visible.as_deref()
    )
    .fetch_one(db)
    .await?;
    Ok((items, total))
}

/// Who last changed an object and when (the newest entry about it), to tell someone whose
/// edit lost a race whose change won.
pub async fn last_change(
    db: impl PgExecutor<'_>,
    object_type: &str,
    object_id: i64,
) -> Result<Option<(String, DateTime<Utc>)>, StoreError> {
    let row = sqlx::query!(
        "SELECT actor, at FROM audit_log WHERE object_type = $1 AND object_id = $2 ORDER BY id DESC LIMIT 1",
        object_type,
        object_id
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|row| (row.actor, row.at)))
}

/// The names of the users who appear in the entries of the namespaces `visible` (None:
/// every entry), for the filter's choices.
pub async fn actors(db: impl PgExecutor<'_>, visible: Option<&[String]>) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT DISTINCT actor AS "actor!" FROM audit_log
           WHERE $1::text[] IS NULL OR namespace = ANY($1) ORDER BY 1"#,
        visible
    )
    .fetch_all(db)
    .await?)
}
