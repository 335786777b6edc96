//! Workflows: create, list, read, pause and resume them, start runs with parameters, read
//! a run's steps, retry a failed step, cancel a run. Steps advance in the database as
//! their runs end ([`probactr_common::store::workflows`]); nothing here waits for them.

use std::collections::BTreeSet;

use probactr_common::store;
use probactr_common::store::audit::Change;
use probactr_common::store::workflows::{Retry, RunStep, Step, Workflow, WorkflowRun};
use serde::Serialize;
use serde_json::{json, Value};

use crate::auth::Principal;
use crate::command::workflow::WorkflowDraft;
use crate::error::ApiError;
use crate::state::AppState;

/// How many of a workflow's latest runs its view shows.
const LAST_RUNS: i64 = 5;

/// A workflow with its steps and latest runs.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WorkflowView {
    /// The definition.
    #[serde(flatten)]
    pub workflow: Workflow,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// Its latest runs, newest first.
    pub last_runs: Vec<WorkflowRun>,
}

/// A workflow run with its steps.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WorkflowRunView {
    /// The run.
    #[serde(flatten)]
    pub run: WorkflowRun,
    /// The workflow's name.
    pub workflow_name: String,
    /// Each step's state, runs and output.
    pub steps: Vec<RunStep>,
}

/// Creates a workflow; every bad field (unknown steps and jobs, cycles) is named.
pub async fn create(state: &AppState, who: &Principal, body: Value) -> Result<WorkflowView, ApiError> {
    who.require_operator("create workflows")?;
    let draft = WorkflowDraft::from_json(body);
    let existing: BTreeSet<i64> = store::jobs::get_many(&state.pool, &draft.job_ids())
        .await?
        .into_iter()
        .map(|job| job.id)
        .collect();
    let valid = draft.validate(&existing)?;
    let mut tx = state.pool.begin().await?;
    let workflow = store::workflows::create(&mut tx, &valid.name, &valid.description, &valid.steps)
        .await
        .map_err(|err| match &err {
            store::StoreError::Database(db) if store::is_unique_violation(db, "workflows_name_unique") => {
                ApiError::field("name", format!("a workflow named {} exists", valid.name))
            }
            _ => err.into(),
        })?;
    let change = Change {
        action: "workflow.create",
        object_type: "workflow",
        object_id: Some(workflow.id),
        before: None,
        after: Some(json!({"name": workflow.name, "steps": valid.steps})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        workflow.id = workflow.id,
        steps = valid.steps.len(),
        "workflow created"
    );
    get(state, workflow.id).await
}

/// One workflow with its steps and latest runs.
pub async fn get(state: &AppState, id: i64) -> Result<WorkflowView, ApiError> {
    let workflow = store::workflows::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow", id))?;
    view(state, workflow).await
}

async fn view(state: &AppState, workflow: Workflow) -> Result<WorkflowView, ApiError> {
    let steps = store::workflows::steps(&state.pool, workflow.id).await?;
    let last_runs = store::workflows::runs_of(&state.pool, workflow.id, LAST_RUNS).await?;
    Ok(WorkflowView {
        workflow,
        steps,
        last_runs,
    })
}

/// Every workflow, with its steps and latest runs.
pub async fn list(state: &AppState) -> Result<Vec<WorkflowView>, ApiError> {
    let mut views = Vec::new();
    for workflow in store::workflows::list(&state.pool).await? {
        views.push(view(state, workflow).await?);
    }
    Ok(views)
}

/// Pauses (no new run starts) or resumes a workflow.
pub async fn set_paused(
    state: &AppState,
    who: &Principal,
    id: i64,
    paused: bool,
) -> Result<WorkflowView, ApiError> {
    who.require_operator(if paused {
        "pause workflows"
    } else {
        "resume workflows"
    })?;
    let mut tx = state.pool.begin().await?;
    let workflow = store::workflows::set_paused(&mut *tx, id, paused)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow", id))?;
    let change = Change {
        action: if paused {
            "workflow.pause"
        } else {
            "workflow.resume"
        },
        object_type: "workflow",
        object_id: Some(id),
        before: None,
        after: Some(json!({"paused": paused, "version": workflow.version})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(workflow.id = id, paused, "workflow pause flag set");
    view(state, workflow).await
}

/// Starts a run of a workflow with `params` (a JSON object); returns its id.
pub async fn run_now(state: &AppState, who: &Principal, id: i64, params: &Value) -> Result<i64, ApiError> {
    who.require_operator("run workflows")?;
    let mut tx = state.pool.begin().await?;
    let workflow = store::workflows::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow", id))?;
    if workflow.paused {
        return Err(ApiError::Conflict(format!(
            "workflow {} is paused: resume it to run it",
            workflow.name
        )));
    }
    let run_id = store::workflows::start_run(&mut tx, id, params).await?;
    let change = Change {
        action: "workflow.run",
        object_type: "workflow",
        object_id: Some(id),
        before: None,
        after: Some(json!({"workflow_run_id": run_id, "params": params})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(workflow.id = id, workflow_run.id = run_id, "workflow run started");
    Ok(run_id)
}

/// One workflow run with its steps.
pub async fn get_run(state: &AppState, id: i64) -> Result<WorkflowRunView, ApiError> {
    let run = store::workflows::get_run(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow run", id))?;
    let workflow_name = store::workflows::get(&state.pool, run.workflow_id)
        .await?
        .map(|workflow| workflow.name)
        .unwrap_or_default();
    let steps = store::workflows::run_steps(&state.pool, id).await?;
    Ok(WorkflowRunView {
        run,
        workflow_name,
        steps,
    })
}

/// Runs a failed or cancelled step again and continues the workflow run from there;
/// returns the step's new run.
pub async fn retry_step(state: &AppState, who: &Principal, id: i64, step: &str) -> Result<i64, ApiError> {
    who.require_operator("retry workflow steps")?;
    let mut tx = state.pool.begin().await?;
    let run_id = match store::workflows::retry_step(&mut tx, id, step).await? {
        Retry::Queued { run_id } => run_id,
        Retry::Missing => return Err(ApiError::not_found("workflow run step", format!("{id}/{step}"))),
        Retry::NotRetryable(state) => {
            return Err(ApiError::Conflict(format!(
                "step {step} is {state}: only a failed or cancelled step is retried"
            )))
        }
    };
    let change = Change {
        action: "workflow_run.retry_step",
        object_type: "workflow_run",
        object_id: Some(id),
        before: None,
        after: Some(json!({"step": step, "run_id": run_id})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        workflow_run.id = id,
        step,
        run.id = run_id,
        "workflow step retried"
    );
    Ok(run_id)
}

/// Cancels a running workflow run and the runs of its running steps.
pub async fn cancel_run(state: &AppState, who: &Principal, id: i64) -> Result<WorkflowRunView, ApiError> {
    who.require_operator("cancel workflow runs")?;
    let mut tx = state.pool.begin().await?;
    let Some(chains) = store::workflows::cancel_run(&mut tx, id).await? else {
        return match store::workflows::get_run(&mut *tx, id).await? {
            None => Err(ApiError::not_found("workflow run", id)),
            Some(run) => Err(ApiError::Conflict(format!(
                "workflow run {id} already ended ({})",
                run.state
            ))),
        };
    };
    let reason = format!("workflow run {id} cancelled by {}", who.username);
    for run_id in store::runs::live_attempts_of(&mut *tx, &chains).await? {
        store::runs::request_cancel(&mut *tx, run_id, &reason).await?;
        tracing::info!(workflow_run.id = id, run.id = run_id, "step run cancel requested");
    }
    let change = Change {
        action: "workflow_run.cancel",
        object_type: "workflow_run",
        object_id: Some(id),
        before: None,
        after: Some(json!({"state": "cancelled"})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(workflow_run.id = id, "workflow run cancelled");
    get_run(state, id).await
}
