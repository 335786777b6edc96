//! Triggers: create (with the first instant), read, edit (version-checked; a changed
//! schedule recomputes `next_fire_at`), delete, pause, resume, and the schedule preview.
//! Every write wakes the executors through the database's NOTIFY trigger.

use chrono::{DateTime, Utc};
use probactr_common::model::{Misfire, Trigger, TriggerKind};
use probactr_common::schedule::TriggerSchedule;
use probactr_common::store::audit::Change;
use probactr_common::store::{self, triggers::CreateTriggerError, triggers::NewTrigger};
use serde::Serialize;
use serde_json::{json, Value};

use super::jobs::stale;
use super::snapshot;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::input::Input;
use crate::state::AppState;

/// Instants the preview lists when `count` is not given.
pub const DEFAULT_PREVIEW: i64 = 5;
/// The most instants one preview lists.
pub const MAX_PREVIEW: i64 = 100;

/// Fields that decide a trigger's instants: changing one recomputes `next_fire_at`.
const SCHEDULE_FIELDS: &[&str] = &[
    "kind",
    "cron",
    "timezone",
    "interval_secs",
    "at",
    "start_at",
    "end_at",
];

/// The definition a body describes, laid over `base` (a `PATCH`) or over the defaults
/// (a create, where `kind` is required). When the kind changes, the previous kind's own
/// field (`cron`, `interval_secs` or `at`) is dropped unless the body sets it.
fn read_trigger(input: &mut Input, base: Option<&Trigger>) -> Option<NewTrigger> {
    let kind = input.choice::<TriggerKind>("kind");
    let kind = match base {
        Some(trigger) => input.not_null("kind", kind).or(Some(trigger.kind)),
        None => input.required("kind", kind),
    };
    let mut trigger = match base {
        Some(t) => NewTrigger {
            kind: t.kind,
            cron: t.cron.clone(),
            timezone: t.timezone.clone(),
            interval_secs: t.interval_secs,
            at: t.at,
            start_at: t.start_at,
            end_at: t.end_at,
            misfire: t.misfire,
            misfire_threshold_secs: t.misfire_threshold_secs,
            paused: t.paused,
        },
        None => NewTrigger::once(Utc::now()),
    };
    if let Some(kind) = kind {
        if base.is_none() || trigger.kind != kind {
            trigger.cron = None;
            trigger.interval_secs = None;
            trigger.at = None;
        }
        trigger.kind = kind;
    }
    if let Some(cron) = input.text("cron") {
        trigger.cron = cron;
    }
    let timezone = input.text("timezone");
    if let Some(timezone) = input.not_null("timezone", timezone) {
        trigger.timezone = timezone;
    }
    if let Some(interval) = input.int("interval_secs", 1, i64::from(i32::MAX)) {
        trigger.interval_secs = interval;
    }
    if let Some(at) = input.time("at") {
        trigger.at = at;
    }
    if let Some(start_at) = input.time("start_at") {
        trigger.start_at = start_at;
    }
    if let Some(end_at) = input.time("end_at") {
        trigger.end_at = end_at;
    }
    let misfire = input.choice::<Misfire>("misfire");
    if let Some(misfire) = input.not_null("misfire", misfire) {
        trigger.misfire = misfire;
    }
    let threshold = input.int("misfire_threshold_secs", 1, i64::from(i32::MAX));
    if let Some(threshold) = input.not_null("misfire_threshold_secs", threshold) {
        trigger.misfire_threshold_secs = threshold as i32;
    }
    let paused = input.boolean("paused");
    if let Some(paused) = input.not_null("paused", paused) {
        trigger.paused = paused;
    }
    (kind.is_some() && !input.has_errors()).then_some(trigger)
}

/// The schedule of a definition, its errors recorded under their fields.
fn schedule(input: &mut Input, trigger: &NewTrigger, anchor: DateTime<Utc>) -> Option<TriggerSchedule> {
    TriggerSchedule::from_parts(
        trigger.kind,
        trigger.cron.as_deref(),
        &trigger.timezone,
        trigger.interval_secs,
        trigger.at,
        trigger.start_at,
        trigger.end_at,
        anchor,
    )
    .map_err(|err| input.error(&err.field, err.message))
    .ok()
}

/// One trigger.
pub async fn get(state: &AppState, id: i64) -> Result<Trigger, ApiError> {
    store::triggers::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))
}

/// A job's triggers (404 when the job does not exist).
pub async fn list_for_job(state: &AppState, job_id: i64) -> Result<Vec<Trigger>, ApiError> {
    store::jobs::get(&state.pool, job_id)
        .await?
        .ok_or_else(|| ApiError::not_found("job", job_id))?;
    Ok(store::triggers::list_for_job(&state.pool, job_id).await?)
}

/// Creates a trigger of a job from a request body.
pub async fn create(
    state: &AppState,
    who: &Principal,
    job_id: i64,
    body: Value,
) -> Result<Trigger, ApiError> {
    who.require_operator("create triggers")?;
    let mut input = Input::new(body)?;
    let now = Utc::now();
    let trigger = read_trigger(&mut input, None);
    if let Some(trigger) = &trigger {
        schedule(&mut input, trigger, now);
    }
    input.finish()?;
    let trigger = trigger.ok_or_else(|| ApiError::field("body", "invalid trigger"))?;
    let mut tx = state.pool.begin().await?;
    store::jobs::get(&mut *tx, job_id)
        .await?
        .ok_or_else(|| ApiError::not_found("job", job_id))?;
    // The first instant is computed from PostgreSQL's clock, like every firing decision.
    let db_now = store::db_now(&mut *tx).await?;
    let created = store::triggers::create(&mut *tx, job_id, &trigger, db_now)
        .await
        .map_err(|err| match err {
            CreateTriggerError::Invalid(err) => ApiError::field(err.field, err.message),
            CreateTriggerError::Store(err) => err.into(),
        })?;
    let change = Change {
        action: "trigger.create",
        object_type: "trigger",
        object_id: Some(created.id),
        before: None,
        after: snapshot(&created),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(job.id = job_id, trigger.id = created.id, next_fire_at = ?created.next_fire_at, "trigger created");
    Ok(created)
}

/// Edits a trigger; the body must carry the `version` the caller read.
pub async fn update(state: &AppState, who: &Principal, id: i64, body: Value) -> Result<Trigger, ApiError> {
    who.require_operator("edit triggers")?;
    let mut input = Input::new(body)?;
    let schedule_changed = SCHEDULE_FIELDS.iter().any(|field| input.has(field));
    let mut tx = state.pool.begin().await?;
    let before = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let version = input.int("version", 1, i64::MAX);
    let version = input.required("version", version);
    let trigger = read_trigger(&mut input, Some(&before));
    let now = store::db_now(&mut *tx).await?;
    let next = trigger
        .as_ref()
        .and_then(|t| schedule(&mut input, t, before.created_at));
    input.finish()?;
    let (Some(version), Some(trigger), Some(next)) = (version, trigger, next) else {
        return Err(ApiError::field("body", "invalid trigger"));
    };
    if version != before.version {
        return Err(stale("trigger", id, version, before.version));
    }
    let next_fire_at = if schedule_changed {
        next.first_at_or_after(now)
    } else {
        before.next_fire_at
    };
    let after = store::triggers::update(&mut *tx, id, version, &trigger, next_fire_at)
        .await?
        .ok_or_else(|| stale("trigger", id, version, before.version))?;
    let change = Change {
        action: "trigger.update",
        object_type: "trigger",
        object_id: Some(id),
        before: snapshot(&before),
        after: snapshot(&after),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, next_fire_at = ?after.next_fire_at, "trigger updated");
    Ok(after)
}

/// Deletes a trigger (its runs stay).
pub async fn delete(state: &AppState, who: &Principal, id: i64) -> Result<i64, ApiError> {
    who.require_operator("delete triggers")?;
    let mut tx = state.pool.begin().await?;
    let before = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    store::triggers::delete(&mut *tx, id).await?;
    let change = Change {
        action: "trigger.delete",
        object_type: "trigger",
        object_id: Some(id),
        before: snapshot(&before),
        after: None,
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, "trigger deleted");
    Ok(before.job_id)
}

/// Pauses (true) or resumes (false) a trigger.
pub async fn set_paused(
    state: &AppState,
    who: &Principal,
    id: i64,
    paused: bool,
) -> Result<Trigger, ApiError> {
    who.require_operator(if paused {
        "pause triggers"
    } else {
        "resume triggers"
    })?;
    let mut tx = state.pool.begin().await?;
    let before = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let after = store::triggers::set_paused(&mut *tx, id, paused)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let change = Change {
        action: if paused { "trigger.pause" } else { "trigger.resume" },
        object_type: "trigger",
        object_id: Some(id),
        before: Some(json!({"paused": before.paused, "version": before.version})),
        after: Some(json!({"paused": after.paused, "version": after.version})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, paused, "trigger pause flag set");
    Ok(after)
}

/// The answer of the schedule preview.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Preview {
    /// The next instants, in order (fewer when the schedule runs out).
    pub instants: Vec<DateTime<Utc>>,
}

/// The next instants of a definition (the trigger fields, plus `count` and `after`).
pub fn preview(body: Value) -> Result<Preview, ApiError> {
    let mut input = Input::new(body)?;
    let count = input.int("count", 1, MAX_PREVIEW);
    let count = input.not_null("count", count).unwrap_or(DEFAULT_PREVIEW);
    let after = input.time("after");
    let after = input.not_null("after", after).unwrap_or_else(Utc::now);
    let trigger = read_trigger(&mut input, None);
    let schedule = trigger.as_ref().and_then(|t| schedule(&mut input, t, after));
    input.finish()?;
    let schedule = schedule.ok_or_else(|| ApiError::field("body", "invalid schedule"))?;
    let count = usize::try_from(count).unwrap_or(1);
    // Like a trigger created at `after`: its first instant may be `after` itself.
    let first = schedule.first_at_or_after(after);
    let mut instants: Vec<DateTime<Utc>> = first.into_iter().collect();
    if let Some(first) = first {
        instants.extend(schedule.upcoming(first, count.saturating_sub(1)));
    }
    Ok(Preview { instants })
}
