//! Calendars: a namespace's named sets of days (dates, ranges, weekdays, holidays
//! imported from an iCalendar file) in a time zone, which its jobs' triggers follow with
//! `calendar` and `calendar_mode` (see `probactr_common::calendar`). Admins of the
//! namespace write them; anyone with a role there reads them. A calendar a trigger
//! follows cannot be deleted: the answer names the triggers.

use probactr_common::calendar::{ical_dates, Calendar, Days};
use probactr_common::store::{self, audit::Change, calendars::StoredCalendar};
use serde_json::json;

use super::Handles;
use crate::auth::Principal;
use crate::error::ApiError;

/// A calendar as written: its zone, its days, and an iCalendar file whose events'
/// dates join the days.
#[derive(Debug, Clone)]
pub struct CalendarDraft {
    /// The IANA zone its days are read in.
    pub timezone: String,
    /// Its days.
    pub days: Days,
    /// An iCalendar file (`BEGIN:VCALENDAR` …) to import.
    pub ical: Option<String>,
}

impl CalendarDraft {
    /// The days to store (the file's dates merged in), checked; else the field at fault.
    fn checked(self, name: &str) -> Result<(String, Days), ApiError> {
        let mut days = self.days;
        if let Some(text) = &self.ical {
            let imported = ical_dates(text).map_err(|err| ApiError::field(err.field, err.message))?;
            days.dates.extend(imported);
        }
        Calendar::new(name, &self.timezone, &days).map_err(|err| ApiError::field(err.field, err.message))?;
        Ok((self.timezone, days))
    }
}

/// The calendars of `namespace`, or of every namespace the caller sees.
pub async fn list(
    handles: &Handles,
    who: &Principal,
    namespace: Option<&str>,
) -> Result<Vec<StoredCalendar>, ApiError> {
    let shown = who.access.listing(namespace);
    Ok(store::calendars::list(&handles.pool, shown.as_deref()).await?)
}

/// Calendar `name` of `namespace` (404 when the caller has no role there).
pub async fn get(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
) -> Result<StoredCalendar, ApiError> {
    who.role_for(namespace, "calendar", name)?;
    store::calendars::get(&handles.pool, namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("calendar", name))
}

/// Creates calendar `name` in `namespace` (admins); 409 when the name is taken.
pub async fn create(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
    draft: CalendarDraft,
) -> Result<StoredCalendar, ApiError> {
    who.role_for(namespace, "namespace", namespace)?;
    who.require_admin(namespace, "manage calendars")?;
    if !super::pools::is_valid_name(name) {
        return Err(ApiError::field(
            "name",
            "must be 1 to 63 lowercase letters, digits or `-`, starting and ending with a letter or digit",
        ));
    }
    let (timezone, days) = draft.checked(name)?;
    let mut tx = handles.pool.begin().await?;
    let calendar = store::calendars::create(&mut *tx, namespace, name, &timezone, &days)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("namespace {namespace} already has a calendar {name}")))?;
    audit(&mut tx, who, namespace, "calendar.create", None, Some(&calendar)).await?;
    tx.commit().await?;
    tracing::info!(
        calendar.namespace = namespace,
        calendar.name = name,
        "calendar created"
    );
    Ok(calendar)
}

/// Replaces the zone and days of calendar `name` of `namespace` (admins); the triggers
/// following it follow the new days from their next firing on.
pub async fn replace(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
    draft: CalendarDraft,
) -> Result<StoredCalendar, ApiError> {
    who.role_for(namespace, "calendar", name)?;
    who.require_admin(namespace, "manage calendars")?;
    let (timezone, days) = draft.checked(name)?;
    let mut tx = handles.pool.begin().await?;
    let before = store::calendars::get(&mut *tx, namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("calendar", name))?;
    let calendar = store::calendars::replace(&mut *tx, namespace, name, &timezone, &days)
        .await?
        .ok_or_else(|| ApiError::not_found("calendar", name))?;
    audit(
        &mut tx,
        who,
        namespace,
        "calendar.update",
        Some(&before),
        Some(&calendar),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(
        calendar.namespace = namespace,
        calendar.name = name,
        "calendar replaced"
    );
    Ok(calendar)
}

/// Deletes calendar `name` of `namespace` (admins); 409 naming the triggers that follow it.
pub async fn delete(handles: &Handles, who: &Principal, namespace: &str, name: &str) -> Result<(), ApiError> {
    who.role_for(namespace, "calendar", name)?;
    who.require_admin(namespace, "manage calendars")?;
    let mut tx = handles.pool.begin().await?;
    let before = store::calendars::get(&mut *tx, namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("calendar", name))?;
    if let Err(triggers) = store::calendars::delete(&mut tx, namespace, name).await? {
        let ids: Vec<String> = triggers.iter().map(i64::to_string).collect();
        return Err(ApiError::Conflict(format!(
            "calendar {name} is followed by trigger(s) {}: give them another calendar or none first",
            ids.join(", ")
        )));
    }
    audit(&mut tx, who, namespace, "calendar.delete", Some(&before), None).await?;
    tx.commit().await?;
    tracing::info!(
        calendar.namespace = namespace,
        calendar.name = name,
        "calendar deleted"
    );
    Ok(())
}

async fn audit(
    conn: &mut sqlx::PgConnection,
    who: &Principal,
    namespace: &str,
    action: &'static str,
    before: Option<&StoredCalendar>,
    after: Option<&StoredCalendar>,
) -> Result<(), ApiError> {
    let change = Change {
        action,
        object_type: "calendar",
        object_id: None,
        before: before.map(|calendar| json!(calendar)),
        after: after.map(|calendar| json!(calendar)),
    };
    store::audit::record_in(&mut *conn, who.actor(), Some(namespace), change).await?;
    Ok(())
}
