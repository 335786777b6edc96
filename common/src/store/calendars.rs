//! `calendars`: a namespace's named sets of days (see [`crate::calendar`]), and which
//! triggers use them (`triggers.calendar_id`, `calendar_mode`). Only triggers that name
//! a calendar ever cause a read here: the firing asks for the calendars of the due
//! triggers that have one.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;
use crate::calendar::{Calendar, CalendarError, CalendarMode, CalendarRule, Days};

/// A calendar as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredCalendar {
    /// Its id (triggers refer to it).
    #[serde(skip)]
    pub id: i64,
    /// The namespace it belongs to (its jobs' triggers may name it).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The IANA zone its days are read in.
    pub timezone: String,
    /// Its days.
    #[serde(flatten)]
    pub days: Days,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl StoredCalendar {
    /// The calendar, ready to judge instants.
    pub fn calendar(&self) -> Result<Calendar, CalendarError> {
        Calendar::new(&self.name, &self.timezone, &self.days)
    }
}

struct Row {
    id: i64,
    namespace: String,
    name: String,
    timezone: String,
    days: serde_json::Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<Row> for StoredCalendar {
    fn from(row: Row) -> Self {
        StoredCalendar {
            id: row.id,
            namespace: row.namespace,
            name: row.name,
            timezone: row.timezone,
            // Written from `Days` only; a row that no longer reads has no days.
            days: serde_json::from_value(row.days).unwrap_or_default(),
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// At most one calendar, read by a statement whose rows are `Row`s.
macro_rules! one_calendar {
    ($db:expr, $sql:tt, $($arg:expr),+) => {
        sqlx::query_as!(Row, $sql, $($arg),+)
            .fetch_optional($db)
            .await?
            .map(StoredCalendar::from)
    };
}

fn days_json(days: &Days) -> serde_json::Value {
    serde_json::to_value(days).unwrap_or_default()
}

/// Creates calendar `name` in `namespace`; None when the namespace has one so named.
pub async fn create(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    timezone: &str,
    days: &Days,
) -> Result<Option<StoredCalendar>, StoreError> {
    Ok(one_calendar!(
        db,
        "INSERT INTO calendars (namespace, name, timezone, days) VALUES ($1, $2, $3, $4)
         ON CONFLICT (namespace, name) DO NOTHING
         RETURNING id, namespace, name, timezone, days, created_at, updated_at",
        namespace,
        name,
        timezone,
        days_json(days)
    ))
}

/// Replaces the zone and days of calendar `name` of `namespace` (None: no such calendar).
pub async fn replace(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    timezone: &str,
    days: &Days,
) -> Result<Option<StoredCalendar>, StoreError> {
    Ok(one_calendar!(
        db,
        "UPDATE calendars SET timezone = $3, days = $4, updated_at = now()
         WHERE namespace = $1 AND name = $2
         RETURNING id, namespace, name, timezone, days, created_at, updated_at",
        namespace,
        name,
        timezone,
        days_json(days)
    ))
}

/// The calendars of `namespaces` (None: every namespace), by namespace and name.
pub async fn list(
    db: impl PgExecutor<'_>,
    namespaces: Option<&[String]>,
) -> Result<Vec<StoredCalendar>, StoreError> {
    Ok(sqlx::query_as!(
        Row,
        "SELECT id, namespace, name, timezone, days, created_at, updated_at FROM calendars
         WHERE $1::text[] IS NULL OR namespace = ANY ($1) ORDER BY namespace, name",
        namespaces
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(StoredCalendar::from)
    .collect())
}

/// Calendar `name` of `namespace`, its key held until the transaction ends (a trigger
/// about to follow it): a delete under way is waited for, and then it is not found.
pub async fn get_to_follow(
    conn: &mut sqlx::PgConnection,
    namespace: &str,
    name: &str,
) -> Result<Option<StoredCalendar>, StoreError> {
    Ok(one_calendar!(
        conn,
        "SELECT id, namespace, name, timezone, days, created_at, updated_at FROM calendars
         WHERE namespace = $1 AND name = $2 FOR KEY SHARE",
        namespace,
        name
    ))
}

/// Calendar `name` of `namespace`.
pub async fn get(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
) -> Result<Option<StoredCalendar>, StoreError> {
    Ok(one_calendar!(
        db,
        "SELECT id, namespace, name, timezone, days, created_at, updated_at FROM calendars
         WHERE namespace = $1 AND name = $2",
        namespace,
        name
    ))
}

/// Deletes calendar `name` of `namespace` unless a trigger uses it: Ok(Err(ids)) names
/// the triggers that do, Ok(Ok(false)) says there was no such calendar.
///
/// The calendar's row is locked first: a trigger being given the calendar at the same
/// time holds its key (the foreign key's check), so the lock waits for that edit and the
/// users read after it sees the trigger, instead of the delete failing on the foreign key.
pub async fn delete(
    conn: &mut sqlx::PgConnection,
    namespace: &str,
    name: &str,
) -> Result<Result<bool, Vec<i64>>, StoreError> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM calendars WHERE namespace = $1 AND name = $2 FOR UPDATE",
        namespace,
        name
    )
    .fetch_optional(&mut *conn)
    .await?;
    if found.is_none() {
        return Ok(Ok(false));
    }
    let users = sqlx::query_scalar!(
        "SELECT triggers.id FROM triggers JOIN calendars ON calendars.id = triggers.calendar_id
         WHERE calendars.namespace = $1 AND calendars.name = $2 ORDER BY triggers.id",
        namespace,
        name
    )
    .fetch_all(&mut *conn)
    .await?;
    if !users.is_empty() {
        return Ok(Err(users));
    }
    let done = sqlx::query!(
        "DELETE FROM calendars WHERE namespace = $1 AND name = $2",
        namespace,
        name
    )
    .execute(&mut *conn)
    .await?;
    Ok(Ok(done.rows_affected() == 1))
}

/// The rules of the given triggers that name a calendar, by trigger id. A calendar that
/// no longer reads (it was valid when written) is logged and left out.
pub async fn rules_of(
    db: impl PgExecutor<'_>,
    trigger_ids: &[i64],
) -> Result<Vec<(i64, CalendarRule)>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT triggers.id AS trigger_id, triggers.calendar_mode AS "mode!", calendars.id,
                  calendars.namespace, calendars.name, calendars.timezone, calendars.days,
                  calendars.created_at, calendars.updated_at
           FROM triggers JOIN calendars ON calendars.id = triggers.calendar_id
           WHERE triggers.id = ANY ($1)"#,
        trigger_ids
    )
    .fetch_all(db)
    .await?;
    let mut rules = Vec::new();
    for row in rows {
        let stored = StoredCalendar::from(Row {
            id: row.id,
            namespace: row.namespace,
            name: row.name,
            timezone: row.timezone,
            days: row.days,
            created_at: row.created_at,
            updated_at: row.updated_at,
        });
        match (stored.calendar(), row.mode.parse::<CalendarMode>()) {
            (Ok(calendar), Ok(mode)) => rules.push((row.trigger_id, CalendarRule { calendar, mode })),
            (Err(err), _) => {
                tracing::error!(trigger.id = row.trigger_id, calendar = %stored.name, error = %err,
                    "stored calendar is invalid; the trigger fires as if it had none")
            }
            (_, Err(err)) => {
                tracing::error!(trigger.id = row.trigger_id, error = %err, "stored calendar mode is invalid")
            }
        }
    }
    Ok(rules)
}
