//! The fire ledger: every instant a trigger's schedule names, and what became of it —
//! ran, skipped, missed, pending or backfilled — from the runs and misfires recorded.
//! The manager shows it (`GET /api/v1/triggers/{id}/ledger`); the monitor's reconciler
//! uses it to find gaps: instants that were due, were never fired and were never
//! recorded as missed either.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::model::{RunState, Trigger};
use crate::store::runs::history::ChainHead;
use crate::store::triggers::MissedInstants;

/// What became of an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A run was made (its chain's latest state says how it went).
    Ran,
    /// Not run on purpose: overlap policy, paused, misfire policy, a calendar, a
    /// maintenance window.
    Skipped,
    /// Not run although due: no executor fired it in time, an outage.
    Missed,
    /// Not due yet, or being fired now.
    Pending,
    /// Run later, by a backfill.
    Backfilled,
}

/// One instant of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Entry {
    /// The scheduled instant.
    pub instant: DateTime<Utc>,
    /// What became of it.
    pub outcome: Outcome,
    /// Its run (the chain's first attempt), if any.
    pub run_id: Option<i64>,
    /// The state of the chain's latest attempt, if any.
    pub state: Option<RunState>,
    /// Why it was skipped or missed.
    pub reason: Option<String>,
}

/// The reason recorded for the instants that passed while a trigger or its job was
/// paused (skipped when it was resumed).
pub const PAUSED_REASON: &str = "paused";

/// The reason of an instant found due, unfired and unrecorded.
pub const GAP_REASON: &str = "gap: due, but neither fired nor recorded as missed";
/// The reason the reconciler records a gap with (so it is found once).
pub const RECORDED_GAP_REASON: &str = "missed: found by the reconciler, due and never fired";

/// What a trigger's ledger is made of, besides its instants.
pub struct Records<'a> {
    /// The chain heads of the span, in the order of their instants.
    pub heads: &'a [ChainHead],
    /// The misfires overlapping the span.
    pub misfires: &'a [MissedInstants],
    /// The instants of the span that backfills queued.
    pub backfilled: &'a [DateTime<Utc>],
    /// The trigger.
    pub trigger: &'a Trigger,
    /// Whether the trigger or its job is paused now.
    pub paused: bool,
    /// The database's now.
    pub now: DateTime<Utc>,
}

/// Says what became of each instant.
pub fn classify(instants: &[DateTime<Utc>], records: &Records<'_>) -> Vec<Entry> {
    instants.iter().map(|&instant| entry(instant, records)).collect()
}

fn entry(instant: DateTime<Utc>, records: &Records<'_>) -> Entry {
    let bare = |outcome, reason: Option<String>| Entry {
        instant,
        outcome,
        run_id: None,
        state: None,
        reason,
    };
    // The heads are in order: an hour of a trigger firing every second is 3,600 instants,
    // each found by a search rather than a walk.
    let first_at_or_after = records.heads.partition_point(|head| head.scheduled_at < instant);
    if let Some(head) = records
        .heads
        .get(first_at_or_after)
        .filter(|head| head.scheduled_at == instant)
    {
        return of_run(instant, head, records.backfilled.contains(&instant));
    }
    if let Some(misfire) = records
        .misfires
        .iter()
        .find(|m| m.first <= instant && instant <= m.last)
    {
        let outcome = if crate::maintenance::is_deliberate(&misfire.reason) {
            Outcome::Skipped
        } else {
            Outcome::Missed
        };
        return bare(outcome, Some(misfire.reason.clone()));
    }
    if instant >= records.now {
        return bare(Outcome::Pending, None);
    }
    let threshold = TimeDelta::seconds(i64::from(records.trigger.timing.misfire_threshold_secs));
    match records.trigger.next_fire_at {
        Some(next) if instant >= next => {
            if records.paused {
                bare(Outcome::Skipped, Some(PAUSED_REASON.into()))
            } else if instant > records.now - threshold {
                bare(Outcome::Pending, None)
            } else {
                bare(
                    Outcome::Missed,
                    Some(format!(
                        "not fired yet: no executor has fired this trigger since {next}"
                    )),
                )
            }
        }
        _ => bare(Outcome::Missed, Some(GAP_REASON.into())),
    }
}

fn of_run(instant: DateTime<Utc>, head: &ChainHead, backfilled: bool) -> Entry {
    let outcome = match head.state {
        _ if backfilled => Outcome::Backfilled,
        RunState::Skipped => Outcome::Skipped,
        RunState::Missed => Outcome::Missed,
        _ => Outcome::Ran,
    };
    Entry {
        instant,
        outcome,
        run_id: Some(head.run_id),
        state: Some(head.latest_state),
        reason: head.reason.clone().filter(|_| outcome != Outcome::Ran),
    }
}

/// The gaps among `entries`, as stretches of consecutive gap instants (the
/// reconciler records each stretch as one misfire).
pub fn gap_stretches(entries: &[Entry]) -> Vec<(DateTime<Utc>, DateTime<Utc>, i64)> {
    let mut stretches: Vec<(DateTime<Utc>, DateTime<Utc>, i64)> = Vec::new();
    let mut open = false;
    for entry in entries {
        let gap = entry.outcome == Outcome::Missed && entry.reason.as_deref() == Some(GAP_REASON);
        match (gap, open, stretches.last_mut()) {
            (true, true, Some(last)) => {
                last.1 = entry.instant;
                last.2 += 1;
            }
            (true, _, _) => {
                stretches.push((entry.instant, entry.instant, 1));
                open = true;
            }
            (false, _, _) => open = false,
        }
    }
    stretches
}

/// A page of a trigger's ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Ledger {
    /// The trigger.
    pub trigger_id: i64,
    /// The span asked for: from (inclusive).
    pub from: DateTime<Utc>,
    /// To (exclusive).
    pub to: DateTime<Utc>,
    /// Its instants, in order, at most the limit asked for.
    pub entries: Vec<Entry>,
    /// Where the next page starts when the span holds more instants.
    pub next_from: Option<DateTime<Utc>>,
}

/// Why a ledger could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The trigger's stored schedule does not parse (it was valid when stored).
    #[error("schedule: {0}")]
    Schedule(#[from] crate::schedule::ScheduleError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The first instants of a trigger's schedule in a span.
pub struct Page {
    /// At most the limit asked for, in order.
    pub instants: Vec<DateTime<Utc>>,
    /// Where the page ends: the span's end, or just after its last instant when the span
    /// holds more.
    pub end: DateTime<Utc>,
    /// Whether the span holds more instants than the page.
    pub more: bool,
}

/// The instants of `trigger`'s schedule in `[from, to)`, at most `limit` of them.
pub fn page_of_instants(
    trigger: &Trigger,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Result<Page, crate::schedule::ScheduleError> {
    let schedule = crate::schedule::TriggerSchedule::from_trigger(trigger)?;
    let just_before = |t: DateTime<Utc>| t - TimeDelta::nanoseconds(1);
    let found = schedule.between(just_before(from), just_before(to), limit);
    let more = found.total > found.instants.len() as u64;
    let end = match (more, found.instants.last()) {
        (true, Some(last)) => *last + TimeDelta::nanoseconds(1),
        _ => to,
    };
    Ok(Page {
        instants: found.instants,
        end,
        more,
    })
}

/// Reads what became of a trigger's instants in `[from, to)`, at most `limit` of them.
pub async fn read(
    pool: &sqlx::PgPool,
    trigger: &Trigger,
    paused: bool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Result<Ledger, LedgerError> {
    let Page { instants, end, more } = page_of_instants(trigger, from, to, limit)?;
    let heads = crate::store::runs::history::chain_heads(pool, trigger.id, from, end).await?;
    let misfires = crate::store::triggers::misfires_between(pool, trigger.id, from, end).await?;
    let backfilled = crate::store::backfills::queued_instants(pool, trigger.id, from, end).await?;
    let now = crate::store::db_now(pool).await?;
    let records = Records {
        heads: &heads,
        misfires: &misfires,
        backfilled: &backfilled,
        trigger,
        paused,
        now,
    };
    Ok(Ledger {
        trigger_id: trigger.id,
        from,
        to,
        entries: classify(&instants, &records),
        next_from: more.then_some(end),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{Misfire, TriggerTiming};

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn trigger(next: i64) -> Trigger {
        let timing = TriggerTiming {
            start_at: Some(at(0)),
            misfire: Misfire::Skip,
            misfire_threshold_secs: 5,
            ..TriggerTiming::interval(10)
        };
        Trigger {
            next_fire_at: Some(at(next)),
            ..Trigger::created(1, 1, timing, at(0))
        }
    }

    fn head(secs: i64, state: RunState, reason: Option<&str>) -> ChainHead {
        ChainHead {
            scheduled_at: at(secs),
            run_id: secs,
            state,
            reason: reason.map(str::to_owned),
            latest_state: state,
        }
    }

    #[test]
    fn each_instant_says_what_became_of_it() {
        let trigger = trigger(60);
        let heads = [
            head(0, RunState::Succeeded, None),
            head(10, RunState::Skipped, Some("overlap: the job is running")),
            head(30, RunState::Failed, None),
        ];
        let misfires = [MissedInstants {
            trigger_id: 1,
            job_id: 1,
            first: at(40),
            last: at(40),
            count: 1,
            policy: Misfire::Skip,
            reason: "misfired".into(),
        }];
        let records = Records {
            heads: &heads,
            misfires: &misfires,
            backfilled: &[at(30)],
            trigger: &trigger,
            paused: false,
            now: at(72),
        };
        let instants: Vec<_> = (0..9).map(|k| at(k * 10)).collect();
        let outcomes: Vec<Outcome> = classify(&instants, &records).iter().map(|e| e.outcome).collect();
        use Outcome::*;
        // 20 and 50 lie before next_fire_at with nothing recorded: gaps. 60 is overdue
        // past its threshold; 70 is within it; 80 is in the future.
        assert_eq!(
            outcomes,
            vec![Ran, Skipped, Missed, Backfilled, Missed, Missed, Missed, Pending, Pending]
        );
        let entries = classify(&instants, &records);
        assert_eq!(entries[2].reason.as_deref(), Some(GAP_REASON));
        assert!(entries[6].reason.as_deref().unwrap().starts_with("not fired yet"));
        assert_eq!(
            gap_stretches(&entries),
            vec![(at(20), at(20), 1), (at(50), at(50), 1)]
        );
    }

    #[test]
    fn consecutive_gaps_make_one_stretch_and_a_paused_trigger_skips() {
        let trigger = trigger(100);
        let records = Records {
            heads: &[],
            misfires: &[],
            backfilled: &[],
            trigger: &trigger,
            paused: true,
            now: at(200),
        };
        let instants: Vec<_> = (0..12).map(|k| at(k * 10)).collect();
        let entries = classify(&instants, &records);
        assert_eq!(gap_stretches(&entries), vec![(at(0), at(90), 10)]);
        assert_eq!(entries[10].outcome, Outcome::Skipped);
        assert_eq!(entries[10].reason.as_deref(), Some("paused"));
    }
}
