//! The fire ledger of a trigger, backfills of its unrun instants, and the forecast of
//! what will fire when across jobs (with the instants a DST change moves).

use chrono::{DateTime, LocalResult, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use probactr_common::calendar::CalendarRule;
use probactr_common::ledger::{self, Ledger, LedgerError, Outcome};
use probactr_common::maintenance::{self, OwnedJobFacts, Window};
use probactr_common::model::Trigger;
use probactr_common::schedule::{CronSpec, Schedule, TriggerSchedule};
use probactr_common::store::audit::Change;
use probactr_common::store::backfills::{self, Backfill};
use probactr_common::store::triggers::Extras;
use probactr_common::store::{self};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;

use super::Handles;
use crate::auth::Principal;
use crate::error::{ApiError, FieldErrors};

/// Instants one ledger page lists at most.
pub const MAX_LEDGER: usize = 2_000;
/// Instants one backfill may queue at most.
pub const MAX_BACKFILL: usize = 10_000;
/// Instants one forecast lists at most.
pub const MAX_FORECAST: usize = 1_000;

fn ledger_error(err: LedgerError) -> ApiError {
    match err {
        LedgerError::Schedule(err) => ApiError::Conflict(format!("the trigger's schedule: {err}")),
        LedgerError::Store(err) => err.into(),
    }
}

/// The trigger `id` (a 404 unless `who` sees its job's namespace), whether it or its job
/// is paused, and its namespace.
async fn trigger_and_pause(
    handles: &Handles,
    who: &Principal,
    id: i64,
) -> Result<(Trigger, bool, String), ApiError> {
    let trigger = store::triggers::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let job = store::jobs::get(&handles.pool, trigger.job_id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    who.role_for(&job.namespace, "trigger", id)?;
    let paused = trigger.paused || job.paused;
    Ok((trigger, paused, job.namespace))
}

/// What became of a trigger's instants in `[from, to)`.
pub async fn ledger(
    handles: &Handles,
    who: &Principal,
    id: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Result<Ledger, ApiError> {
    if to <= from {
        return Err(ApiError::field("to", "must be later than from"));
    }
    let (trigger, paused, _) = trigger_and_pause(handles, who, id).await?;
    ledger::read(&handles.pool, &trigger, paused, from, to, limit.min(MAX_LEDGER))
        .await
        .map_err(ledger_error)
}

/// What a backfill request did (or, for a dry run, would do).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BackfillAnswer {
    /// Whether nothing was queued because it was a dry run.
    pub dry_run: bool,
    /// The instants without a run in the span, which it queues.
    pub instants: Vec<DateTime<Utc>>,
    /// The backfill recorded (not for a dry run, nor when no instant needs a run).
    pub backfill: Option<Backfill>,
}

/// Queues a run for every past instant of `[from, to]` that has none, at most
/// `max_concurrency` live at once (monitors feed them).
pub async fn backfill(
    handles: &Handles,
    who: &Principal,
    id: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    dry_run: bool,
    max_concurrency: i32,
) -> Result<BackfillAnswer, ApiError> {
    let (trigger, _, namespace) = trigger_and_pause(handles, who, id).await?;
    who.require_operator(&namespace, "backfill triggers")?;
    let now = store::db_now(&handles.pool).await?;
    let mut errors = FieldErrors::new();
    if to < from {
        errors.insert("to".into(), "must not be earlier than from".into());
    }
    if from >= now {
        errors.insert(
            "from".into(),
            "must be in the past: only instants that were due are backfilled".into(),
        );
    }
    crate::input::check(errors)?;
    let until = to.min(now) + TimeDelta::nanoseconds(1);
    // Read what earlier backfills still have to queue before reading the runs: a monitor
    // feeding one in between then shows its instants as runs, never as neither.
    let waiting = backfills::waiting_instants(&handles.pool, id).await?;
    let span = ledger::read(&handles.pool, &trigger, false, from, until, MAX_BACKFILL + 1)
        .await
        .map_err(ledger_error)?;
    if span.next_from.is_some() {
        return Err(ApiError::field(
            "to",
            format!("the span holds more than {MAX_BACKFILL} instants; backfill it in parts"),
        ));
    }
    let instants: Vec<DateTime<Utc>> = span
        .entries
        .iter()
        .filter(|entry| entry.run_id.is_none() && entry.outcome != Outcome::Pending)
        .map(|entry| entry.instant)
        .filter(|instant| !waiting.contains(instant))
        .collect();
    if dry_run || instants.is_empty() {
        return Ok(BackfillAnswer {
            dry_run,
            instants,
            backfill: None,
        });
    }
    let mut tx = handles.pool.begin().await?;
    let backfill = backfills::create(
        &mut *tx,
        id,
        trigger.job_id,
        &instants,
        max_concurrency,
        &who.username,
    )
    .await?;
    let change = Change {
        action: "trigger.backfill",
        object_type: "trigger",
        object_id: Some(id),
        before: None,
        after: Some(
            json!({"backfill": backfill.id, "from": from, "to": to, "instants": instants.len(),
                           "max_concurrency": max_concurrency}),
        ),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        trigger.id = id,
        backfill.id = backfill.id,
        instants = instants.len(),
        max_concurrency,
        "backfill requested"
    );
    Ok(BackfillAnswer {
        dry_run,
        instants,
        backfill: Some(backfill),
    })
}

/// One instant of the forecast.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Forecast {
    /// When it fires.
    pub instant: DateTime<Utc>,
    /// The trigger.
    pub trigger_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The job's name.
    pub job_name: String,
    /// The trigger's time zone.
    pub timezone: String,
    /// The instant in that zone's local time.
    pub local_time: String,
    /// Set when a DST change in the zone moves this instant: `repeated` (its local time
    /// occurs twice that day; it fires once, at the first) or `skipped` (its local time
    /// does not exist that day; it fires at this instant instead).
    pub dst: Option<String>,
    /// Set when the trigger's cron holds `H` items: the expression they resolve to, which
    /// moved this instant from where the written text alone would put it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_cron: Option<String>,
    /// Set when the instant will not run: why (a maintenance window covers it, its
    /// trigger's calendar excludes it); it will be recorded skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Set when the trigger has `jitter_secs`: the seconds this instant's run waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_secs: Option<i64>,
}

/// The forecast and whether it was cut at its bound.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ForecastAnswer {
    /// The instants, in order.
    pub items: Vec<Forecast>,
    /// True when more instants fall in the span than were listed.
    pub truncated: bool,
}

/// What fires when in `[from, to)`, across the triggers of unpaused jobs (or one job's).
pub async fn forecast(
    handles: &Handles,
    who: &Principal,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    job_id: Option<i64>,
) -> Result<ForecastAnswer, ApiError> {
    if to <= from {
        return Err(ApiError::field("to", "must be later than from"));
    }
    let names: HashMap<i64, String> = store::jobs::names(&handles.pool, who.access.visible().as_deref())
        .await?
        .into_iter()
        .collect();
    let mut items = Vec::new();
    let mut truncated = false;
    let watched = store::triggers::watched(&handles.pool).await?;
    let holds = Holds::read(handles, &watched, from, to).await?;
    for watched in watched {
        let trigger = watched.trigger;
        // Only the jobs the caller sees (names holds exactly those).
        if job_id.is_some_and(|job| job != trigger.job_id) || !names.contains_key(&trigger.job_id) {
            continue;
        }
        let Ok(schedule) = TriggerSchedule::from_trigger(&trigger) else {
            continue;
        };
        let found = schedule.between(
            from - TimeDelta::nanoseconds(1),
            to - TimeDelta::nanoseconds(1),
            MAX_FORECAST,
        );
        truncated |= found.total > found.instants.len() as u64;
        let zone: Tz = trigger.timing.timezone.parse().unwrap_or(chrono_tz::UTC);
        let resolved_cron = match &schedule.schedule {
            Schedule::Cron(spec) => spec.resolved_expression(),
            _ => None,
        };
        for instant in found.instants {
            let local = instant.with_timezone(&zone);
            items.push(Forecast {
                instant,
                trigger_id: trigger.id,
                job_id: trigger.job_id,
                job_name: names.get(&trigger.job_id).cloned().unwrap_or_default(),
                timezone: trigger.timing.timezone.clone(),
                local_time: local.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
                dst: match &schedule.schedule {
                    Schedule::Cron(spec) => dst_effect(spec, instant),
                    _ => None,
                },
                resolved_cron: resolved_cron.clone(),
                skipped: holds.reason(&trigger, instant),
                jitter_secs: holds
                    .jitter(trigger.id)
                    .map(|max| probactr_common::schedule::jitter(trigger.id, instant, max).num_seconds()),
            });
        }
    }
    items.sort_by_key(|item| (item.instant, item.trigger_id));
    truncated |= items.len() > MAX_FORECAST;
    items.truncate(MAX_FORECAST);
    Ok(ForecastAnswer { items, truncated })
}

/// What holds the forecast's instants back, and the jitter that moves them.
struct Holds {
    rules: HashMap<i64, CalendarRule>,
    extras: HashMap<i64, Extras>,
    windows: Vec<Window>,
    jobs: HashMap<i64, OwnedJobFacts>,
}

impl Holds {
    async fn read(
        handles: &Handles,
        watched: &[store::triggers::Watched],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Holds, ApiError> {
        let ids: Vec<i64> = watched.iter().map(|w| w.trigger.id).collect();
        let rules = store::calendars::rules_of(&handles.pool, &ids)
            .await?
            .into_iter()
            .collect();
        let extras = store::triggers::extras_of(&handles.pool, &ids)
            .await?
            .into_iter()
            .collect();
        let windows = store::maintenance::overlapping(&handles.pool, from, to).await?;
        let jobs = if windows.iter().any(Window::needs_job_facts) {
            let job_ids: Vec<i64> = watched.iter().map(|w| w.trigger.job_id).collect();
            store::jobs::scope_facts(&handles.pool, &job_ids)
                .await?
                .into_iter()
                .collect()
        } else {
            HashMap::new()
        };
        Ok(Holds {
            rules,
            extras,
            windows,
            jobs,
        })
    }

    fn reason(&self, trigger: &Trigger, instant: DateTime<Utc>) -> Option<String> {
        let job = self.jobs.get(&trigger.job_id).map(OwnedJobFacts::facts);
        maintenance::held(instant, job, &self.windows, self.rules.get(&trigger.id)).map(|held| held.reason())
    }

    fn jitter(&self, trigger_id: i64) -> Option<i32> {
        self.extras.get(&trigger_id).and_then(|extras| extras.jitter_secs)
    }
}

/// How a DST change moves a cron instant (see [`Forecast::dst`]).
fn dst_effect(spec: &CronSpec, instant: DateTime<Utc>) -> Option<String> {
    let local = instant.with_timezone(&spec.timezone()).naive_local();
    if matches!(
        spec.timezone().from_local_datetime(&local),
        LocalResult::Ambiguous(..)
    ) {
        Some("repeated".into())
    } else if !spec.matches_local(local) {
        Some("skipped".into())
    } else {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dst_changes_are_flagged() {
        let half_past_two = CronSpec::parse("0 30 2 * * *", "Europe/Berlin").unwrap();
        let half_past_three = CronSpec::parse("0 30 3 * * *", "Europe/Berlin").unwrap();
        // 2026-03-29 02:30 CET does not exist; the schedule fires at 01:30 UTC (03:30 CEST),
        // which is also when a 03:30 job fires, as it should.
        let pushed = Utc.with_ymd_and_hms(2026, 3, 29, 1, 30, 0).unwrap();
        assert_eq!(dst_effect(&half_past_two, pushed).as_deref(), Some("skipped"));
        assert_eq!(dst_effect(&half_past_three, pushed), None);
        // 2026-10-25 02:30 occurs twice in Berlin; the first is 00:30 UTC.
        let twice = Utc.with_ymd_and_hms(2026, 10, 25, 0, 30, 0).unwrap();
        assert_eq!(dst_effect(&half_past_two, twice).as_deref(), Some("repeated"));
        let plain = Utc.with_ymd_and_hms(2026, 6, 1, 0, 30, 0).unwrap();
        assert_eq!(dst_effect(&half_past_two, plain), None);
    }
}
