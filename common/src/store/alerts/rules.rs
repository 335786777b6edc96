//! `alert_rules` and `alert_rule_channels`: which events, for which jobs, go to which
//! channels, how often.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};

use crate::model::AlertEvent;
use crate::store::StoreError;

/// A rule with its channels.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rule {
    /// Id.
    pub id: i64,
    /// The namespace it belongs to: it watches only that namespace's jobs and notifies
    /// only its channels.
    pub namespace: String,
    /// What it is made of.
    #[serde(flatten)]
    pub fields: RuleFields,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl Rule {
    /// Whether the rule listens for `event`.
    pub fn listens_for(&self, event: AlertEvent) -> bool {
        self.fields.events.contains(&event)
    }

    /// Whether an event about `job_id` of namespace `job_namespace` (None: about the
    /// cluster) concerns this rule: one about a job only if the job is in the rule's
    /// namespace (a rule of one namespace never hears of another's jobs); one about the
    /// cluster (executors) concerns the rules of every namespace.
    pub fn watches(&self, event: AlertEvent, job_id: Option<i64>, job_namespace: Option<&str>) -> bool {
        self.listens_for(event)
            && (event.is_cluster_wide()
                || (job_namespace == Some(self.namespace.as_str())
                    && (self.fields.job_id.is_none() || self.fields.job_id == job_id)))
    }
}

/// What a rule is made of (create and replace).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuleFields {
    /// Name, unique within its namespace.
    pub name: String,
    /// Events it listens for.
    pub events: Vec<AlertEvent>,
    /// The job it watches; None: every job.
    pub job_id: Option<i64>,
    /// Channels its messages go to (at least one).
    pub channel_ids: Vec<i64>,
    /// `consecutive_failures`: failures in a row that raise it.
    pub threshold: Option<i32>,
    /// `run_too_long`, `no_success_within`: the duration.
    pub duration_secs: Option<i32>,
    /// Window in which repeats of an event for one job are folded into one follow-up.
    pub throttle_secs: i32,
    /// Disabled rules raise nothing.
    pub enabled: bool,
}

/// A statement on `alert_rules` that binds `$pre`, then a [`RuleFields`] but its channels
/// in the order both writes list them.
macro_rules! query_rule {
    ($sql:tt, [$($pre:expr),*], $fields:ident) => {
        sqlx::query!(
            $sql,
            $($pre,)*
            $fields.name,
            &$fields.events as &[AlertEvent],
            $fields.job_id,
            $fields.threshold,
            $fields.duration_secs,
            $fields.throttle_secs,
            $fields.enabled
        )
    };
}

/// Creates a rule with its channels in `namespace`.
pub async fn create(
    conn: &mut PgConnection,
    namespace: &str,
    fields: &RuleFields,
) -> Result<Rule, StoreError> {
    let id = query_rule!(
        "INSERT INTO alert_rules (namespace, name, events, job_id, threshold, duration_secs, throttle_secs, enabled)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        [namespace],
        fields
    )
    .fetch_one(&mut *conn)
    .await?
    .id;
    set_channels(conn, id, &fields.channel_ids).await?;
    Ok(get(&mut *conn, id).await?.ok_or(sqlx::Error::RowNotFound)?)
}

/// Replaces a rule; None when there is no such rule.
pub async fn replace(
    conn: &mut PgConnection,
    id: i64,
    fields: &RuleFields,
) -> Result<Option<Rule>, StoreError> {
    let found = query_rule!(
        "UPDATE alert_rules SET name = $2, events = $3, job_id = $4, threshold = $5, duration_secs = $6,
                throttle_secs = $7, enabled = $8, updated_at = now()
         WHERE id = $1",
        [id],
        fields
    )
    .execute(&mut *conn)
    .await?;
    if found.rows_affected() == 0 {
        return Ok(None);
    }
    set_channels(conn, id, &fields.channel_ids).await?;
    get(&mut *conn, id).await
}

async fn set_channels(conn: &mut PgConnection, rule_id: i64, channel_ids: &[i64]) -> Result<(), StoreError> {
    sqlx::query!("DELETE FROM alert_rule_channels WHERE rule_id = $1", rule_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        "INSERT INTO alert_rule_channels (rule_id, channel_id)
         SELECT $1, channel_id FROM unnest($2::bigint[]) AS channel_id ON CONFLICT DO NOTHING",
        rule_id,
        channel_ids
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// One rule.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Rule>, StoreError> {
    let filter = Some(id);
    Ok(select(db, filter).await?.pop())
}

/// Every rule, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Rule>, StoreError> {
    select(db, None).await
}

/// Rules with their channels: one (`id`), or every one.
async fn select(db: impl PgExecutor<'_>, id: Option<i64>) -> Result<Vec<Rule>, StoreError> {
    Ok(sqlx::query!(
        r#"SELECT id, namespace, name, events AS "events: Vec<AlertEvent>", job_id, threshold, duration_secs,
                  throttle_secs, enabled, created_at, updated_at,
                  -- Only channels of the rule's own namespace are notified.
                  ARRAY(SELECT channel_id FROM alert_rule_channels
                        JOIN alert_channels ON alert_channels.id = alert_rule_channels.channel_id
                        WHERE rule_id = alert_rules.id AND alert_channels.namespace = alert_rules.namespace
                        ORDER BY channel_id) AS "channel_ids!"
           FROM alert_rules WHERE $1::bigint IS NULL OR id = $1 ORDER BY namespace, name"#,
        id
    )
    .map(|row| Rule {
        id: row.id,
        namespace: row.namespace,
        fields: RuleFields {
            name: row.name,
            events: row.events,
            job_id: row.job_id,
            channel_ids: row.channel_ids,
            threshold: row.threshold,
            duration_secs: row.duration_secs,
            throttle_secs: row.throttle_secs,
            enabled: row.enabled,
        },
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
    .fetch_all(db)
    .await?)
}

/// The enabled rules (what monitors match events against).
pub async fn enabled(db: impl PgExecutor<'_>) -> Result<Vec<Rule>, StoreError> {
    Ok(list(db)
        .await?
        .into_iter()
        .filter(|rule| rule.fields.enabled)
        .collect())
}

/// Deletes a rule; false when there is none.
pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM alert_rules WHERE id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}
