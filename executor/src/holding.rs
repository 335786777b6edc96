//! Holding due instants back: what a firing does, after planning a trigger's instants
//! ([`crate::firing::plan_trigger`]), for calendars, maintenance windows and `max_fires`.
//!
//! - An instant a maintenance window covers (for the trigger's job), or that the
//!   trigger's calendar excludes, does not run: it is recorded as skipped, with a reason
//!   naming the window's or the calendar (consecutive ones as one stretch). The ledger
//!   shows them skipped; no alert, not counted missed.
//! - A `defer` window moves the trigger's next firing to the window's end, where it
//!   fires once; the stretch it records reaches the window's end, so every instant the
//!   window swallowed is accounted for.
//! - A trigger with `max_fires` runs no more instants than it has left, and ends (its
//!   `end_at` becomes its last instant, so the ledger, the reconciler and the forecast
//!   see no instant after it).
//!
//! Only what is needed is read: calendars only for due triggers that have one, job
//! names, namespaces and selectors only when a window's scope names jobs or a selector.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use probactr_common::calendar::CalendarRule;
use probactr_common::maintenance::{self, OwnedJobFacts, Window};
use probactr_common::model::Trigger;
use probactr_common::schedule::TriggerSchedule;
use probactr_common::store::triggers::{DueTrigger, MissedInstants};
use probactr_common::store::{self, StoreError};
use sqlx::PgConnection;

use crate::firing::TriggerPlan;

/// What a batch's due triggers are held back by.
#[derive(Debug, Default)]
pub struct Holds {
    /// Calendar rules, by trigger id.
    rules: HashMap<i64, CalendarRule>,
    /// The windows overlapping the batch's span.
    windows: Vec<Window>,
    /// What windows' scopes read of the batch's jobs (only when a scope needs it).
    jobs: HashMap<i64, OwnedJobFacts>,
}

/// Reads what holds back the instants of `due` up to `horizon`.
pub async fn read(
    conn: &mut PgConnection,
    due: &[DueTrigger],
    horizon: DateTime<Utc>,
) -> Result<Holds, StoreError> {
    let with_calendar: Vec<i64> = due
        .iter()
        .filter(|due| due.calendar_id.is_some())
        .map(|due| due.trigger.id)
        .collect();
    let rules = if with_calendar.is_empty() {
        HashMap::new()
    } else {
        store::calendars::rules_of(&mut *conn, &with_calendar)
            .await?
            .into_iter()
            .collect()
    };
    let earliest = due
        .iter()
        .filter_map(|due| due.trigger.next_fire_at)
        .min()
        .unwrap_or(horizon);
    let windows = store::maintenance::overlapping(&mut *conn, earliest, horizon).await?;
    let jobs = if windows.iter().any(Window::needs_job_facts) {
        let ids: Vec<i64> = due.iter().map(|due| due.trigger.job_id).collect();
        store::jobs::scope_facts(&mut *conn, &ids)
            .await?
            .into_iter()
            .collect()
    } else {
        HashMap::new()
    };
    Ok(Holds { rules, windows, jobs })
}

impl Holds {
    /// Takes the held-back instants out of `plan` (moving its next firing for a deferring
    /// window, ending it at `max_fires`); returns the skipped stretches to record.
    pub fn apply(
        &self,
        due: &DueTrigger,
        plan: &mut TriggerPlan,
        horizon: DateTime<Utc>,
    ) -> Vec<MissedInstants> {
        let trigger = &due.trigger;
        let rule = self.rules.get(&trigger.id);
        let job = self.jobs.get(&trigger.job_id).map(OwnedJobFacts::facts);
        let mut skipped: Vec<MissedInstants> = Vec::new();
        let mut deferred_to: Option<DateTime<Utc>> = None;
        let mut previous_held = false;
        let mut kept = Vec::with_capacity(plan.fire.len());
        for instant in plan.fire.drain(..) {
            let Some(held) = maintenance::held(instant, job, &self.windows, rule) else {
                kept.push(instant);
                previous_held = false;
                continue;
            };
            let reason = held.reason();
            if let Some(until) = held.deferred_to() {
                deferred_to = deferred_to.max(Some(until));
            }
            match skipped.last_mut() {
                Some(last) if previous_held && last.reason == reason => {
                    last.last = instant;
                    last.count += 1;
                }
                _ => skipped.push(stretch(trigger, instant, reason)),
            }
            previous_held = true;
        }
        plan.fire = kept;
        if let Some(until) = deferred_to {
            defer(trigger, plan, &mut skipped, until, horizon);
        }
        end_at_max_fires(due, plan);
        skipped
    }
}

fn stretch(trigger: &Trigger, instant: DateTime<Utc>, reason: String) -> MissedInstants {
    MissedInstants {
        trigger_id: trigger.id,
        job_id: trigger.job_id,
        first: instant,
        last: instant,
        count: 1,
        policy: trigger.timing.misfire,
        reason,
    }
}

/// The trigger fires once at `until`, the end of the window that deferred its instants:
/// now (queued until then) when it falls within this firing's span, else as its next
/// firing, with the deferred stretch reaching the window's end.
fn defer(
    trigger: &Trigger,
    plan: &mut TriggerPlan,
    skipped: &mut [MissedInstants],
    until: DateTime<Utc>,
    horizon: DateTime<Utc>,
) {
    if until <= horizon {
        let at = plan.fire.partition_point(|instant| *instant < until);
        if plan.fire.get(at) != Some(&until) {
            plan.fire.insert(at, until);
        }
        return;
    }
    plan.next = Some(until);
    let Some(last) = skipped.iter_mut().rev().find(|s| s.last < until) else {
        return;
    };
    let swallowed = TriggerSchedule::from_trigger(trigger)
        .map(|schedule| {
            schedule
                .between(last.last, until - TimeDelta::microseconds(1), 0)
                .total
        })
        .unwrap_or(0);
    if swallowed > 0 {
        last.last = until - TimeDelta::microseconds(1);
        last.count += swallowed as i64;
    }
}

/// A trigger with `max_fires` fires no more instants than it has left; the plan of its
/// last one has no next instant.
fn end_at_max_fires(due: &DueTrigger, plan: &mut TriggerPlan) {
    let Some(max) = due.max_fires else {
        return;
    };
    let left = usize::try_from(max.saturating_sub(due.fires)).unwrap_or(0);
    if plan.fire.len() >= left {
        plan.fire.truncate(left);
        plan.next = None;
    }
}

/// The delay of each of a jittered trigger's instants (none for the others).
pub fn jitter_of(due: &DueTrigger, instant: DateTime<Utc>) -> Option<TimeDelta> {
    due.jitter_secs
        .map(|max| probactr_common::schedule::jitter(due.trigger.id, instant, max))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use probactr_common::calendar::{Calendar, CalendarMode, Days};
    use probactr_common::maintenance::{Policy, Scope, WindowPlan};
    use probactr_common::model::TriggerTiming;

    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0)
            .single()
            .expect("valid instant")
    }

    /// A trigger every 10 s from 0, due at 100.
    fn due() -> DueTrigger {
        DueTrigger {
            trigger: Trigger {
                next_fire_at: Some(at(100)),
                ..Trigger::created(
                    7,
                    3,
                    TriggerTiming {
                        start_at: Some(at(0)),
                        ..TriggerTiming::interval(10)
                    },
                    at(0),
                )
            },
            lock_free: true,
            fan_out: false,
            in_process: true,
            job_version: 1,
            job_priority: 0,
            db_now: at(100),
            calendar_id: None,
            jitter_secs: None,
            max_fires: None,
            fires: 0,
            after_job_id: None,
        }
    }

    fn plan(fire: &[i64]) -> TriggerPlan {
        TriggerPlan {
            fire: fire.iter().map(|secs| at(*secs)).collect(),
            missed: None,
            next: Some(at(fire.last().copied().unwrap_or(0) + 10)),
        }
    }

    fn window(from: i64, until: i64, policy: Policy) -> Window {
        Window {
            id: 1,
            plan: WindowPlan {
                from: at(from),
                until: Some(at(until)),
                scope: Scope::All { all: true },
                policy,
                reason: "db upgrade".into(),
                stop_running: false,
            },
            created_by: "admin".into(),
            created_at: at(0),
        }
    }

    #[test]
    fn a_skip_window_and_a_calendar_take_their_instants_out_as_stretches() {
        let everyday = Days {
            weekdays: ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
                .map(String::from)
                .to_vec(),
            ..Days::default()
        };
        let holds = Holds {
            rules: HashMap::from([(
                7,
                CalendarRule {
                    calendar: Calendar::new("everyday", "UTC", &everyday).expect("valid"),
                    mode: CalendarMode::Exclude,
                },
            )]),
            windows: vec![window(110, 130, Policy::Skip)],
            jobs: HashMap::new(),
        };
        let mut plan = plan(&[100, 110, 120, 130]);
        let skipped = holds.apply(&due(), &mut plan, at(130));
        assert!(plan.fire.is_empty());
        let stretches: Vec<(DateTime<Utc>, DateTime<Utc>, i64, &str)> = skipped
            .iter()
            .map(|s| (s.first, s.last, s.count, s.reason.as_str()))
            .collect();
        assert_eq!(
            stretches,
            [
                (at(100), at(100), 1, "calendar everyday excludes it"),
                (at(110), at(120), 2, "maintenance: db upgrade"),
                (at(130), at(130), 1, "calendar everyday excludes it"),
            ]
        );
    }

    #[test]
    fn a_defer_window_fires_once_at_its_end() {
        let holds = Holds {
            windows: vec![window(100, 155, Policy::Defer)],
            ..Holds::default()
        };
        // The window ends beyond the firing's span: the next firing is its end, and the
        // deferred stretch reaches it (110…150 were never looked at one by one).
        let mut later = plan(&[100]);
        let skipped = holds.apply(&due(), &mut later, at(100));
        assert!(later.fire.is_empty());
        assert_eq!(later.next, Some(at(155)));
        assert_eq!((skipped[0].first, skipped[0].count), (at(100), 6));
        assert!(skipped[0].last > at(150) && skipped[0].last < at(155));
        assert!(skipped[0].reason.starts_with("maintenance (deferred"));
        // It ends within the span: the deferred run fires now, at its end, then the rest.
        let mut within = plan(&[100, 110, 120, 130, 140, 150, 160]);
        holds.apply(&due(), &mut within, at(160));
        assert_eq!(within.fire, [at(155), at(160)]);
    }

    #[test]
    fn max_fires_ends_the_trigger_after_its_last_instant() {
        let mut due = due();
        due.max_fires = Some(5);
        due.fires = 3;
        let mut plan = plan(&[100, 110, 120]);
        Holds::default().apply(&due, &mut plan, at(120));
        assert_eq!(plan.fire, [at(100), at(110)]);
        assert_eq!(plan.next, None);
    }
}
