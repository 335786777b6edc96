//! Resuming a paused job or trigger: the instants that passed while it was paused are
//! recorded as skipped (`paused`, what the fire ledger shows) and its next instant moves
//! to the first one still ahead, so that resuming fires nothing at once. Without this,
//! every instant within the misfire threshold would fire together on resume (a burst of
//! runs, most of them skipped by the overlap policy of a non-parallel job).

use chrono::{DateTime, TimeDelta, Utc};
use probactr_common::ledger::PAUSED_REASON;
use probactr_common::model::Trigger;
use probactr_common::schedule::TriggerSchedule;
use probactr_common::store::triggers::{self, MissedInstants};
use probactr_common::store::{self, StoreError};
use sqlx::PgConnection;

/// Skips the instants of `resumed` (triggers firing again from now on) that passed while
/// they were paused; call it in the transaction that resumes them.
pub async fn skip_paused_instants(conn: &mut PgConnection, resumed: &[Trigger]) -> Result<(), StoreError> {
    let now = store::db_now(&mut *conn).await?;
    let passed: Vec<(MissedInstants, Option<DateTime<Utc>>)> = resumed
        .iter()
        .filter_map(|trigger| passed_while_paused(trigger, now))
        .collect();
    if passed.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = passed.iter().map(|(missed, _)| missed.trigger_id).collect();
    let next: Vec<Option<DateTime<Utc>>> = passed.iter().map(|(_, next)| *next).collect();
    let missed: Vec<MissedInstants> = passed.into_iter().map(|(missed, _)| missed).collect();
    triggers::record_misfires(&mut *conn, &missed).await?;
    triggers::move_next_fire_at(&mut *conn, &ids, &next).await?;
    tracing::info!(triggers = ?ids, "instants that passed while paused recorded as skipped");
    Ok(())
}

/// The instants of `trigger` in `[next_fire_at, now]`, and its next instant after `now`;
/// None when none passed (or its schedule cannot be read: firing reports that).
fn passed_while_paused(
    trigger: &Trigger,
    now: DateTime<Utc>,
) -> Option<(MissedInstants, Option<DateTime<Utc>>)> {
    let first = trigger.next_fire_at.filter(|first| *first <= now)?;
    let schedule = TriggerSchedule::from_trigger(trigger).ok()?;
    let count = schedule
        .between(first - TimeDelta::microseconds(1), now, 1)
        .total
        .max(1);
    let missed = MissedInstants {
        trigger_id: trigger.id,
        job_id: trigger.job_id,
        first,
        last: now,
        count: i64::try_from(count).unwrap_or(i64::MAX),
        policy: trigger.timing.misfire,
        reason: PAUSED_REASON.to_owned(),
    };
    Some((missed, schedule.next_after(now)))
}
