//! Which trace a claimed run's spans belong to: its chain's ([`RunTrace::of`]), or, for a
//! workflow's step, its workflow run's, under the step's own span
//! ([`RunTrace::of_step`]), so that a workflow run is one trace with a span per step.
//! The database is asked which runs are steps only when traces are exported: a cluster
//! that exports none pays nothing for it.

use std::collections::HashMap;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use probactr_common::model::Run;
use probactr_common::run_trace::{RunTrace, Timed};
use probactr_common::store::run_inputs::{self, StepOf};
use probactr_common::store::runs;
use probactr_common::telemetry;
use sqlx::PgPool;

/// A run's trace, and the step it is when it is a workflow's.
#[derive(Debug, Clone)]
pub struct Traced {
    /// The trace its spans go to.
    pub trace: RunTrace,
    /// The workflow step it runs, if any.
    pub step: Option<StepOf>,
}

/// The traces of `runs`, by run id; empty when traces are not exported.
pub async fn of_runs<'a>(pool: &PgPool, runs: impl IntoIterator<Item = &'a Run>) -> HashMap<i64, Traced> {
    if !telemetry::tracing_on() {
        return HashMap::new();
    }
    let runs: Vec<&Run> = runs.into_iter().collect();
    let chains: Vec<i64> = runs.iter().map(|run| chain_of(run)).collect();
    // Boxed, like the other reads an attempt may make: inline, their state would size
    // every attempt's future.
    let steps: HashMap<i64, StepOf> = match Box::pin(run_inputs::workflow_steps(pool, &chains)).await {
        Ok(steps) => steps.into_iter().map(|step| (step.chain_id, step)).collect(),
        Err(err) => {
            tracing::debug!(error = %err, "cannot tell which runs are workflow steps; their spans go to their own traces");
            HashMap::new()
        }
    };
    runs.into_iter()
        .filter_map(|run| {
            let step = steps.get(&chain_of(run)).cloned();
            let trace = match &step {
                Some(step) => RunTrace::of_step(step.workflow_run_id, &step.step),
                None => RunTrace::of(run),
            }?;
            Some((run.id, Traced { trace, step }))
        })
        .collect()
}

/// The trace of one run; None when traces are not exported.
pub async fn of_run(pool: &PgPool, run: &Run) -> Option<Traced> {
    of_runs(pool, [run]).await.remove(&run.id)
}

/// Exports the span of a workflow step once, when its first attempt has ended (not when
/// it was only put back in the queue, to be claimed again): from when its run was queued
/// to now. Retries and takeovers of the step nest under it as well. (A first attempt whose
/// executor died leaves the step without its span: its retries still point at it.)
pub async fn end_first_attempt(pool: &PgPool, traced: &Traced, run: &Run) {
    let Some(step) = &traced.step else {
        return;
    };
    if run.first_run_id.is_some() {
        return;
    }
    let ended = matches!(Box::pin(runs::get(pool, run.id)).await, Ok(Some(now)) if now.state.is_terminal());
    if !ended {
        return;
    }
    traced.trace.step_span(
        step.workflow_run_id,
        Timed {
            start: run.queued_at.into(),
            end: SystemTime::now(),
            attributes: vec![
                KeyValue::new("workflow_run.id", step.workflow_run_id),
                KeyValue::new("step", step.step.clone()),
                KeyValue::new("run.id", run.id),
            ],
        },
    );
}

fn chain_of(run: &Run) -> i64 {
    run.first_run_id.unwrap_or(run.id)
}
