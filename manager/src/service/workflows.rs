//! Workflows: create, list, read, pause and resume them, start runs with parameters, read
//! a run's steps, retry a failed step, cancel a run. Steps advance in the database as
//! their runs end ([`probactr_common::store::workflows`]); nothing here waits for them.

use probactr_common::run_trace::RunTrace;
use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use probactr_common::store::audit::Change;
use probactr_common::store::workflows::{Retry, RunStep, Step, Workflow, WorkflowRun, WorkflowTrigger};
use probactr_common::{schedule, store};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::{workflow_versions, Handles};
use crate::auth::Principal;
use crate::command::params;
use crate::command::trigger::{checked_params, Definition};
use crate::command::workflow::{ValidWorkflow, WorkflowDraft};
use crate::command::TriggerDraft;
use crate::error::ApiError;
use probactr_common::params_schema::masked;
use probactr_common::secrets::Keyring;

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
pub async fn create(handles: &Handles, who: &Principal, body: Value) -> Result<WorkflowView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let workflow = create_in(&mut tx, handles.secret_keys.as_deref(), who, body).await?;
    tx.commit().await?;
    tracing::info!(workflow.id = workflow.id, "workflow created");
    get(handles, who, workflow.id).await
}

/// One workflow `who` sees (a 404 for any other).
pub(super) async fn visible(conn: &mut PgConnection, who: &Principal, id: i64) -> Result<Workflow, ApiError> {
    let workflow = store::workflows::get(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow", id))?;
    who.role_for(&workflow.namespace, "workflow", id)?;
    Ok(workflow)
}

/// Takes `namespace` out of a workflow body (the draft reads the rest).
fn take_namespace(body: &mut Value) -> Result<Option<String>, ApiError> {
    match body.as_object_mut().and_then(|map| map.remove("namespace")) {
        None => Ok(None),
        Some(Value::String(name)) => Ok(Some(name)),
        Some(_) => Err(ApiError::field("namespace", "must be a namespace's name")),
    }
}

/// [`create`] in the caller's transaction (its audit row included).
pub async fn create_in(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    mut body: Value,
) -> Result<Workflow, ApiError> {
    let asked = take_namespace(&mut body)?;
    let namespace = super::namespaces::for_creation(conn, who, asked.as_deref()).await?;
    who.require_operator(&namespace, "create workflows")?;
    let valid = validated(conn, keys, body, &namespace).await?;
    let workflow =
        store::workflows::create_in(conn, &namespace, &valid.name, &valid.description, &valid.steps)
            .await
            .map_err(|err| name_taken(err, &valid.name))?;
    store::workflows::set_params_schema(&mut *conn, workflow.id, valid.params_schema.as_ref()).await?;
    let definition = workflow_versions::definition(&valid);
    workflow_versions::keep(conn, who, &workflow, &definition, "create", None).await?;
    let change = Change {
        action: "workflow.create",
        object_type: "workflow",
        object_id: Some(workflow.id),
        before: None,
        after: Some(json!({"name": workflow.name, "namespace": workflow.namespace, "steps": valid.steps})),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(workflow)
}

/// A workflow body checked against the jobs its steps name: jobs of the workflow's own
/// namespace only (a job of another one is unknown to it).
async fn validated(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    body: Value,
    namespace: &str,
) -> Result<ValidWorkflow, ApiError> {
    let draft = WorkflowDraft::from_json(body);
    let mut jobs = store::jobs::get_many(&mut *conn, &draft.job_ids()).await?;
    jobs.retain(|job| job.namespace == namespace);
    let existing: BTreeSet<i64> = jobs.iter().map(|job| job.id).collect();
    let schemas: BTreeMap<i64, Value> = jobs
        .into_iter()
        .filter_map(|job| Some((job.id, job.params_schema?)))
        .collect();
    draft
        .validate(&existing)?
        .with_step_params_checked(&schemas, keys)
}

fn name_taken(err: store::StoreError, name: &str) -> ApiError {
    match &err {
        store::StoreError::Database(db) if store::is_unique_violation(db, "workflows_name_unique") => {
            ApiError::field("name", format!("a workflow named {name} exists"))
        }
        _ => err.into(),
    }
}

/// Replaces a workflow's definition (a create's body); runs under way keep their steps.
pub async fn replace(
    handles: &Handles,
    who: &Principal,
    id: i64,
    body: Value,
    expected_version: Option<i64>,
) -> Result<WorkflowView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let workflow = replace_in(
        &mut tx,
        handles.secret_keys.as_deref(),
        who,
        id,
        body,
        expected_version,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(workflow.id = id, version = workflow.version, "workflow replaced");
    get(handles, who, id).await
}

/// [`replace`] in the caller's transaction (its audit row included).
pub async fn replace_in(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    id: i64,
    body: Value,
    expected_version: Option<i64>,
) -> Result<Workflow, ApiError> {
    replace_made(conn, keys, who, id, body, expected_version, None).await
}

/// [`replace_in`], as an edit or as the restore of version `restored_from`: the version
/// it makes is kept as such (and the one it replaces, when not kept yet).
pub(super) async fn replace_made(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    id: i64,
    mut body: Value,
    expected_version: Option<i64>,
    restored_from: Option<i64>,
) -> Result<Workflow, ApiError> {
    let current = visible(conn, who, id).await?;
    who.require_operator(&current.namespace, "edit workflows")?;
    if take_namespace(&mut body)?.is_some_and(|asked| asked != current.namespace) {
        return Err(ApiError::field("namespace", "namespace cannot change"));
    }
    let valid = validated(conn, keys, body, &current.namespace).await?;
    let before = store::workflows::steps(&mut *conn, id).await?;
    let replaced = store::workflows::replace(
        conn,
        id,
        expected_version,
        &valid.name,
        &valid.description,
        &valid.steps,
    )
    .await
    .map_err(|err| name_taken(err, &valid.name))?;
    if replaced.is_some() {
        store::workflows::set_params_schema(&mut *conn, id, valid.params_schema.as_ref()).await?;
    }
    let Some(workflow) = replaced else {
        return Err(
            match (expected_version, store::workflows::get(&mut *conn, id).await?) {
                (Some(sent), Some(current)) => ApiError::PreconditionFailed(format!(
                "workflow {id} changed since it was read (version {sent} sent, {} current); reload and retry",
                current.version
            )),
                _ => ApiError::not_found("workflow", id),
            },
        );
    };
    let action = if restored_from.is_some() {
        "restore"
    } else {
        "update"
    };
    workflow_versions::keep_before(conn, &current, &before).await?;
    let definition = workflow_versions::definition(&valid);
    workflow_versions::keep(conn, who, &workflow, &definition, action, restored_from).await?;
    let audited = format!("workflow.{action}");
    let change = Change {
        action: &audited,
        object_type: "workflow",
        object_id: Some(id),
        before: Some(json!({"steps": before})),
        after: Some(json!({"name": workflow.name, "steps": valid.steps})),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(workflow)
}

/// Deletes a workflow with its triggers and runs (the runs of its steps' jobs stay).
pub async fn delete(handles: &Handles, who: &Principal, id: i64) -> Result<(), ApiError> {
    let mut tx = handles.pool.begin().await?;
    let before = visible(&mut tx, who, id).await?;
    who.require_operator(&before.namespace, "delete workflows")?;
    store::workflows::delete(&mut *tx, id).await?;
    let change = Change {
        action: "workflow.delete",
        object_type: "workflow",
        object_id: Some(id),
        before: Some(json!({"name": before.name, "namespace": before.namespace})),
        after: None,
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(workflow.id = id, "workflow deleted");
    Ok(())
}

/// One workflow `who` sees, with its steps and latest runs.
pub async fn get(handles: &Handles, who: &Principal, id: i64) -> Result<WorkflowView, ApiError> {
    let workflow = visible(&mut *handles.pool.acquire().await?, who, id).await?;
    view(handles, workflow).await
}

async fn view(handles: &Handles, workflow: Workflow) -> Result<WorkflowView, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    view_in(&mut conn, workflow).await
}

async fn view_in(conn: &mut PgConnection, workflow: Workflow) -> Result<WorkflowView, ApiError> {
    let mut steps = store::workflows::steps(&mut *conn, workflow.id).await?;
    let mut last_runs = store::workflows::runs_of(&mut *conn, workflow.id, LAST_RUNS).await?;
    // Secret parameters are stored sealed and shown masked.
    steps
        .iter_mut()
        .for_each(|step| step.params = masked(&step.params));
    last_runs
        .iter_mut()
        .for_each(|run| run.params = masked(&run.params));
    Ok(WorkflowView {
        workflow,
        steps,
        last_runs,
    })
}

/// Every workflow of the namespaces `only` (None: every one), with its steps and
/// latest runs; callers narrow `only` to what the caller sees ([`super::jobs::scoped`]).
pub async fn list(handles: &Handles, only: Option<&[String]>) -> Result<Vec<WorkflowView>, ApiError> {
    list_in(&mut *handles.pool.acquire().await?, only).await
}

/// [`list`], read through the caller's connection (a transaction's).
pub async fn list_in(
    conn: &mut PgConnection,
    only: Option<&[String]>,
) -> Result<Vec<WorkflowView>, ApiError> {
    let mut views = Vec::new();
    for workflow in store::workflows::list(&mut *conn, only).await? {
        views.push(view_in(conn, workflow).await?);
    }
    Ok(views)
}

/// Pauses (no new run starts) or resumes a workflow.
pub async fn set_paused(
    handles: &Handles,
    who: &Principal,
    id: i64,
    paused: bool,
) -> Result<WorkflowView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let current = visible(&mut tx, who, id).await?;
    who.require_operator(
        &current.namespace,
        if paused {
            "pause workflows"
        } else {
            "resume workflows"
        },
    )?;
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
    view(handles, workflow).await
}

/// Starts a run of a workflow with `params` (a JSON object); returns its id.
pub async fn run_now(handles: &Handles, who: &Principal, id: i64, params: &Value) -> Result<i64, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let workflow = visible(&mut tx, who, id).await?;
    who.require_operator(&workflow.namespace, "run workflows")?;
    if workflow.paused {
        return Err(ApiError::Conflict(format!(
            "workflow {} is paused: resume it to run it",
            workflow.name
        )));
    }
    let params = &params::checked(
        workflow.params_schema.as_ref(),
        params,
        params::Given::Whole,
        handles.secret_keys.as_deref(),
        "params",
    )?;
    let run_id = store::workflows::start_run(&mut tx, id, params).await?;
    let change = Change {
        action: "workflow.run",
        object_type: "workflow",
        object_id: Some(id),
        before: None,
        after: Some(json!({"workflow_run_id": run_id, "params": masked(params)})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    RunTrace::workflow_run_started(id, run_id, std::time::SystemTime::now());
    tracing::info!(workflow.id = id, workflow_run.id = run_id, "workflow run started");
    Ok(run_id)
}

/// The workflow of workflow run `id` when `who` sees it (a 404 for the run otherwise).
async fn run_workflow(conn: &mut PgConnection, who: &Principal, id: i64) -> Result<Workflow, ApiError> {
    let run = store::workflows::get_run(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow run", id))?;
    let workflow = store::workflows::get(&mut *conn, run.workflow_id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow run", id))?;
    who.role_for(&workflow.namespace, "workflow run", id)?;
    Ok(workflow)
}

/// One workflow run with its steps.
pub async fn get_run(handles: &Handles, who: &Principal, id: i64) -> Result<WorkflowRunView, ApiError> {
    let workflow = run_workflow(&mut *handles.pool.acquire().await?, who, id).await?;
    let run = store::workflows::get_run(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow run", id))?;
    let workflow_name = workflow.name;
    let steps = store::workflows::run_steps(&handles.pool, id).await?;
    Ok(WorkflowRunView {
        run: WorkflowRun {
            params: masked(&run.params),
            ..run
        },
        workflow_name,
        steps,
    })
}

/// Runs a failed or cancelled step again and continues the workflow run from there;
/// returns the step's new run.
pub async fn retry_step(handles: &Handles, who: &Principal, id: i64, step: &str) -> Result<i64, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let workflow = run_workflow(&mut tx, who, id).await?;
    who.require_operator(&workflow.namespace, "retry workflow steps")?;
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
pub async fn cancel_run(handles: &Handles, who: &Principal, id: i64) -> Result<WorkflowRunView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let workflow = run_workflow(&mut tx, who, id).await?;
    who.require_operator(&workflow.namespace, "cancel workflow runs")?;
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
        store::runs::request_cancel(&mut tx, run_id, &reason).await?;
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
    get_run(handles, who, id).await
}

/// Creates a trigger of a workflow: `draft` is a job trigger's body (its `params` become
/// those of the workflow runs it starts; `max_concurrency` does not apply).
pub async fn create_trigger(
    handles: &Handles,
    who: &Principal,
    workflow_id: i64,
    draft: TriggerDraft,
) -> Result<WorkflowTrigger, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let created = create_trigger_in(&mut tx, handles.secret_keys.as_deref(), who, workflow_id, draft).await?;
    tx.commit().await?;
    tracing::info!(workflow.id = workflow_id, trigger.id = created.id, next_fire_at = ?created.next_fire_at,
        "workflow trigger created");
    Ok(created)
}

/// [`create_trigger`] in the caller's transaction (its audit row included).
pub async fn create_trigger_in(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    workflow_id: i64,
    draft: TriggerDraft,
) -> Result<WorkflowTrigger, ApiError> {
    let workflow = visible(conn, who, workflow_id).await?;
    who.require_operator(&workflow.namespace, "create workflow triggers")?;
    let Definition {
        trigger,
        params,
        extras,
        ..
    } = draft.definition(None, Utc::now(), workflow_id)?;
    if extras.after.is_some() {
        return Err(ApiError::field("after", "applies to job triggers only"));
    }
    if extras.given() {
        return Err(ApiError::field(
            "calendar",
            "calendar, calendar_mode, jitter_secs and max_fires apply to job triggers only",
        ));
    }
    if trigger.max_concurrency.is_some() {
        return Err(ApiError::field(
            "max_concurrency",
            "applies to job triggers only: bound the jobs of the steps instead",
        ));
    }
    if trigger.timing.kind == probactr_common::model::TriggerKind::Webhook {
        return Err(ApiError::field("kind", "webhook triggers start job runs only"));
    }
    let params = checked_params(workflow.params_schema.as_ref(), params, true, None, keys)?;
    // The first instant comes from PostgreSQL's clock, like every firing decision.
    let now = store::db_now(&mut *conn).await?;
    let schedule = trigger
        .schedule(now, Some(schedule::hash_seed(workflow_id)))
        .map_err(|err| ApiError::field(err.field, err.message))?;
    let params = params.unwrap_or_else(|| json!({}));
    let created = store::workflows::create_trigger(
        &mut *conn,
        workflow_id,
        &trigger,
        &params,
        schedule.first_at_or_after(now),
    )
    .await?;
    let change = Change {
        action: "workflow.trigger.create",
        object_type: "workflow_trigger",
        object_id: Some(created.id),
        before: None,
        after: serde_json::to_value(&created).ok(),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(created)
}

/// A workflow's triggers (404 when the workflow does not exist or `who` does not see it).
pub async fn triggers(
    handles: &Handles,
    who: &Principal,
    workflow_id: i64,
) -> Result<Vec<WorkflowTrigger>, ApiError> {
    triggers_in(&mut *handles.pool.acquire().await?, who, workflow_id).await
}

/// [`triggers`], read through the caller's connection (a transaction's).
pub async fn triggers_in(
    conn: &mut PgConnection,
    who: &Principal,
    workflow_id: i64,
) -> Result<Vec<WorkflowTrigger>, ApiError> {
    visible(conn, who, workflow_id).await?;
    let mut triggers = store::workflows::triggers_of(&mut *conn, workflow_id).await?;
    triggers
        .iter_mut()
        .for_each(|trigger| trigger.params = masked(&trigger.params));
    Ok(triggers)
}

/// Deletes a trigger of a workflow (the runs it started stay).
pub async fn delete_trigger(
    handles: &Handles,
    who: &Principal,
    workflow_id: i64,
    id: i64,
) -> Result<(), ApiError> {
    let mut tx = handles.pool.begin().await?;
    delete_trigger_in(&mut tx, who, workflow_id, id).await?;
    tx.commit().await?;
    tracing::info!(
        workflow.id = workflow_id,
        trigger.id = id,
        "workflow trigger deleted"
    );
    Ok(())
}

/// [`delete_trigger`] in the caller's transaction (its audit row included).
pub async fn delete_trigger_in(
    conn: &mut PgConnection,
    who: &Principal,
    workflow_id: i64,
    id: i64,
) -> Result<(), ApiError> {
    let workflow = store::workflows::get(&mut *conn, workflow_id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow trigger", id))?;
    who.role_for(&workflow.namespace, "workflow trigger", id)?;
    who.require_operator(&workflow.namespace, "delete workflow triggers")?;
    if !store::workflows::delete_trigger(&mut *conn, workflow_id, id).await? {
        return Err(ApiError::not_found("workflow trigger", id));
    }
    let change = Change {
        action: "workflow.trigger.delete",
        object_type: "workflow_trigger",
        object_id: Some(id),
        before: Some(json!({"workflow_id": workflow_id})),
        after: None,
    };
    store::audit::record_in(&mut *conn, who.actor(), Some(&workflow.namespace), change).await?;
    Ok(())
}

/// The names of the jobs `ids` (steps' jobs, to show them by name), by id; a job gone
/// since is left out.
pub async fn job_names(handles: &Handles, ids: &[i64]) -> Result<BTreeMap<i64, String>, ApiError> {
    let jobs = store::jobs::get_many(&handles.pool, ids).await?;
    Ok(jobs.into_iter().map(|job| (job.id, job.name)).collect())
}
