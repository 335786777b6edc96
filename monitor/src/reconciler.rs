//! The reconciler: compares what each trigger's schedule made due with what was recorded
//! — a run, or a misfire — over the last hour, and records every gap once as a missed
//! stretch (which raises the `fire_missed` alert). A gap means an instant was lost
//! without a word; the invariants say there are none, and this is the watch that says
//! so in production. It also feeds backfills into the queue.

use std::time::Duration;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use probactr_common::ledger::{self, LedgerError, RECORDED_GAP_REASON};
use probactr_common::model::Trigger;
use probactr_common::store::runs::history;
use probactr_common::store::triggers::{self, MissedInstants, Watched};
use probactr_common::store::{backfills, db_now};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// How far back the reconciler looks.
const WINDOW: TimeDelta = TimeDelta::hours(1);
/// The most instants of one trigger it checks in a pass.
const MAX_INSTANTS: usize = 5_000;
/// Pause between two passes.
const EVERY: Duration = Duration::from_secs(30);
/// Pause between two feedings of the backfills.
const FEED_EVERY: Duration = Duration::from_millis(500);

/// Runs the reconciler and the backfill feeder until `stop` is cancelled.
pub async fn run(pool: PgPool, stop: CancellationToken) {
    let feeder = tokio::spawn(feed_loop(pool.clone(), stop.clone()));
    let mut reconciler = Reconciler::default();
    loop {
        match reconciler.reconcile_once(&pool).await {
            Ok(0) => {}
            Ok(gaps) => tracing::warn!(gaps, "fire ledger gaps recorded as missed"),
            Err(err) => tracing::warn!(error = %err, "fire ledger reconciliation failed; retrying"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
    let _ = feeder.await;
}

async fn feed_loop(pool: PgPool, stop: CancellationToken) {
    loop {
        let fed = async {
            let mut tx = pool.begin().await?;
            let queued = backfills::feed(&mut tx).await?;
            tx.commit().await?;
            Ok::<u64, probactr_common::store::StoreError>(queued)
        };
        if let Err(err) = fed.await {
            tracing::warn!(error = %err, "feeding backfills failed; retrying");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(FEED_EVERY) => {}
        }
    }
}

/// The most instants probed in one statement of the quick look.
const PROBED_AT_ONCE: usize = 10_000;

/// The reconciler's memory between passes: up to where each trigger's instants were found
/// accounted for. A pass reads only the instants since, so a trigger firing every second
/// costs each pass its last half minute, not the whole hour again: the fired instants
/// before its `next_fire_at` were committed with their runs or misfires, and stay
/// accounted for. A monitor that starts again reads the hour once.
#[derive(Debug, Default)]
pub struct Reconciler {
    checked_to: HashMap<i64, DateTime<Utc>>,
}

/// One trigger's instants not yet looked at.
struct Span<'a> {
    trigger: &'a Trigger,
    from: DateTime<Utc>,
    /// Where the span ends: `to`, or just after its last instant when it held more than
    /// [`MAX_INSTANTS`].
    until: DateTime<Utc>,
    instants: Vec<DateTime<Utc>>,
}

impl Reconciler {
    /// One pass over every watched trigger; returns how many instants it recorded as missed.
    ///
    /// A quick look first: one probe of the trigger-instant index per instant, in a few
    /// statements for all triggers. Only a trigger with an instant no first attempt was
    /// recorded for (a skip, a misfire or a gap) has its ledger read in full.
    pub async fn reconcile_once(&mut self, pool: &PgPool) -> Result<i64, LedgerError> {
        let now = db_now(pool).await?;
        let watched = triggers::watched(pool).await?;
        let present: HashSet<i64> = watched.iter().map(|w| w.trigger.id).collect();
        self.checked_to.retain(|id, _| present.contains(id));
        // Spans are made a group at a time: a monitor starting on a busy cluster has an
        // hour of every trigger to look at, millions of instants.
        let mut recorded = 0;
        let mut group: Vec<Span<'_>> = Vec::new();
        let mut held = 0;
        for watched in &watched {
            let Some(span) = self.span_of(watched, now) else {
                continue;
            };
            if held > 0 && held + span.instants.len() > PROBED_AT_ONCE {
                recorded += self.reconcile_group(pool, &group).await?;
                group.clear();
                held = 0;
            }
            held += span.instants.len();
            group.push(span);
        }
        if !group.is_empty() {
            recorded += self.reconcile_group(pool, &group).await?;
        }
        Ok(recorded)
    }

    /// Probes a group's instants at once, reads the ledger of the triggers with an
    /// instant unaccounted for, and moves each trigger's mark past its span.
    async fn reconcile_group(&mut self, pool: &PgPool, group: &[Span<'_>]) -> Result<i64, LedgerError> {
        let (trigger_ids, instants): (Vec<i64>, Vec<DateTime<Utc>>) = group
            .iter()
            .flat_map(|span| span.instants.iter().map(|instant| (span.trigger.id, *instant)))
            .unzip();
        let unaccounted: HashSet<i64> = history::instants_without_first_run(pool, &trigger_ids, &instants)
            .await?
            .into_iter()
            .map(|(trigger_id, _)| trigger_id)
            .collect();
        let mut recorded = 0;
        for span in group {
            if unaccounted.contains(&span.trigger.id) {
                recorded += reconcile_trigger(pool, span).await?;
            }
            self.checked_to.insert(span.trigger.id, span.until);
        }
        Ok(recorded)
    }

    /// The instants of `watched` to look at: those before its `next_fire_at` (every one of
    /// them was fired, so each must have a run or a misfire), in the last hour, since it
    /// and its job last changed (an edit or a pause moves what was due), and since the
    /// last pass looked.
    fn span_of<'a>(&self, watched: &'a Watched, now: DateTime<Utc>) -> Option<Span<'a>> {
        let trigger = &watched.trigger;
        let from = [
            Some(now - WINDOW),
            Some(trigger.created_at),
            Some(trigger.updated_at),
            Some(watched.job_updated_at),
            self.checked_to.get(&trigger.id).copied(),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(now);
        let to = trigger.next_fire_at.map_or(now, |next| next.min(now));
        if from >= to {
            return None;
        }
        let page = match ledger::page_of_instants(trigger, from, to, MAX_INSTANTS) {
            Ok(page) => page,
            Err(err) => {
                // It cannot fire either; the others are still watched.
                tracing::warn!(trigger.id = trigger.id, job.id = trigger.job_id, error = %err,
                    "cannot reconcile a trigger whose schedule does not parse");
                return None;
            }
        };
        Some(Span {
            trigger,
            from,
            until: page.end,
            instants: page.instants,
        })
    }
}

/// Records the gaps among one trigger's instants, its ledger read in full.
async fn reconcile_trigger(pool: &PgPool, span: &Span<'_>) -> Result<i64, LedgerError> {
    let trigger = span.trigger;
    let (from, to) = (span.from, span.until);
    let ledger = ledger::read(pool, trigger, false, from, to, MAX_INSTANTS).await?;
    let stretches = ledger::gap_stretches(&ledger.entries);
    if stretches.is_empty() {
        return Ok(0);
    }
    let missed: Vec<MissedInstants> = stretches
        .iter()
        .map(|&(first, last, count)| {
            MissedInstants::of(trigger, first, last, count, RECORDED_GAP_REASON.into())
        })
        .collect();
    let mut conn = pool
        .acquire()
        .await
        .map_err(probactr_common::store::StoreError::from)?;
    triggers::record_misfires(&mut conn, &missed).await?;
    for gap in &missed {
        tracing::warn!(trigger.id = trigger.id, job.id = trigger.job_id, first = %gap.first, last = %gap.last,
            instants = gap.count, "instants due and never fired nor recorded: recorded as missed");
    }
    Ok(missed.iter().map(|gap| gap.count).sum())
}
