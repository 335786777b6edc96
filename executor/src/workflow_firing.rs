//! Firing the triggers of workflows: each due instant starts one workflow run.
//!
//! One pass is one transaction: lock the due workflow triggers (`SKIP LOCKED`, so
//! executors firing at once split them), plan each with the job triggers' rules
//! ([`firing::plan_trigger`]: timely instants start, late ones follow the misfire policy),
//! start a workflow run per instant to start (at most one per trigger and instant: the
//! constraint `workflow_runs_instant_once`), move `next_fire_at` on, commit. A crash
//! before the commit starts nothing and moves nothing; a peer then fires the same
//! instants. Instants fire when due, not ahead: a workflow run starts its first steps
//! at once. Instants not started are logged and counted, not recorded as `misfires`
//! rows (those belong to a job).

use probactr_common::run_trace::RunTrace;
use probactr_common::schedule::TriggerSchedule;
use probactr_common::store::workflows::{self, WorkflowTrigger};
use probactr_common::store::{self, StoreError};
use sqlx::PgPool;

use crate::firing::{plan_trigger, TriggerPlan};
use crate::wakeup::Wakeups;

/// Fires the due workflow triggers, `batch` at a time; returns how many fired.
pub async fn fire_due(pool: &PgPool, wakeups: &Wakeups, batch: i64) -> Result<usize, StoreError> {
    let mut fired = 0;
    loop {
        let count = fire_batch(pool, wakeups, batch).await?;
        fired += count;
        if count < batch as usize {
            return Ok(fired);
        }
    }
}

async fn fire_batch(pool: &PgPool, wakeups: &Wakeups, batch: i64) -> Result<usize, StoreError> {
    let mut tx = pool.begin().await?;
    let due = workflows::claim_due_triggers(&mut tx, batch).await?;
    if due.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    let now = store::db_now(&mut *tx).await?;
    let mut started = Vec::new();
    for trigger in &due {
        let plan = plan(trigger, now);
        for instant in &plan.fire {
            if let Some(run) = workflows::start_scheduled_run(&mut tx, trigger, *instant).await? {
                tracing::info!(workflow.id = trigger.workflow_id, trigger.id = trigger.id,
                    workflow_run.id = run, %instant, "workflow run started by its trigger");
                started.push((trigger.workflow_id, run));
            }
        }
        if let Some(missed) = &plan.missed {
            metrics::counter!("probactr_missed_instants_total").increment(missed.count as u64);
            tracing::info!(workflow.id = trigger.workflow_id, trigger.id = trigger.id,
                count = missed.count, reason = %missed.reason, "workflow instants missed");
        }
        workflows::advance_trigger(&mut tx, trigger.id, plan.next, now).await?;
    }
    tx.commit().await?;
    if !started.is_empty() {
        wakeups.runs.notify_one();
    }
    let at = std::time::SystemTime::now();
    for (workflow_id, run) in started {
        RunTrace::workflow_run_started(workflow_id, run, at);
    }
    Ok(due.len())
}

fn plan(trigger: &WorkflowTrigger, now: chrono::DateTime<chrono::Utc>) -> TriggerPlan {
    let view = trigger.schedule_view();
    match TriggerSchedule::from_trigger(&view) {
        Ok(schedule) => plan_trigger(&view, &schedule, now),
        Err(err) => {
            tracing::error!(trigger.id = trigger.id, error = %err,
                "stored workflow trigger has an invalid schedule; it stops firing");
            TriggerPlan {
                fire: Vec::new(),
                missed: None,
                next: None,
            }
        }
    }
}
