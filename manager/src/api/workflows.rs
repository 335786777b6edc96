//! `/api/v1/workflows` and `/api/v1/workflow-runs`: DAGs of jobs, their runs, and the
//! operations on a run under way (retry a failed step, cancel).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use serde_json::Value;

use probactr_common::store::workflows::WorkflowTrigger;

use super::bodies::RunNowBody;
use super::by_id::{delete_by_id, get_by_id, set_paused_by_id};
use super::precondition::{IfMatch, Tagged};
use super::Id;
use crate::auth::Principal;
use crate::command::workflow::WorkflowDraft;
use crate::command::TriggerDraft;
use crate::error::{ApiError, ErrorBody};
use crate::input::ApiJson;
use crate::service::jobs::read_params;
use crate::service::workflows::{self, WorkflowRunView, WorkflowView};
use crate::service::Paged;
use crate::state::AppState;

/// The answer of starting a workflow run.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WorkflowRunStarted {
    /// The new workflow run; follow it at `/api/v1/workflow-runs/{workflow_run_id}`.
    pub workflow_run_id: i64,
}

/// The answer of retrying a step.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StepRetried {
    /// The step's new run.
    pub run_id: i64,
}

/// Every workflow the caller sees, with its steps and latest runs.
#[utoipa::path(get, path = "/workflows", operation_id = "list_workflows", tag = "workflows",
    params(
        ("namespace" = Option<String>, Query, description = "Only workflows of this namespace (default: every namespace the caller sees)"),
    ),
    responses(
        (status = OK, description = "The workflows, by name", body = Paged<WorkflowView>),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    query: crate::input::QueryParams,
) -> Result<Json<Paged<WorkflowView>>, ApiError> {
    let only = crate::service::jobs::scoped(
        &who,
        query.text("namespace").map(|name| vec![name.trim().to_owned()]),
    );
    Ok(Json(Paged::all(
        workflows::list(&state.handles, only.as_deref()).await?,
    )))
}

/// Create a workflow: a DAG of steps, each running a job once the steps it depends on are
/// done and its `when` holds.
#[utoipa::path(post, path = "/workflows", operation_id = "create_workflow", tag = "workflows",
    request_body = WorkflowDraft,
    responses(
        (status = CREATED, description = "Created", body = WorkflowView),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named (cycles, unknown steps and jobs)", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Tagged<WorkflowView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Tagged(workflows::create(&state.handles, &who, body).await?),
    ))
}

get_by_id! {
    /// One workflow with its steps and latest runs.
    workflows -> WorkflowView { path: "/workflows/{id}", operation_id: "get_workflow", tag: "workflows",
        id: "The workflow", ok: "The workflow", missing: "No such workflow",
        otherwise: "Not signed in, or a server error" }
}

/// Replace a workflow's definition (the body of a create): name, description and steps.
/// Runs under way keep the steps they started with. With `If-Match: "VERSION"`, only that
/// version is replaced (412 when stale).
#[utoipa::path(put, path = "/workflows/{id}", operation_id = "replace_workflow", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow")),
    request_body = WorkflowDraft,
    responses(
        (status = OK, description = "The workflow as replaced", body = WorkflowView),
        (status = PRECONDITION_FAILED, description = "`If-Match` is stale: the workflow changed since it was read", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named; nothing was changed", body = ErrorBody),
        (status = NOT_FOUND, description = "No such workflow", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn replace(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    IfMatch(expected): IfMatch,
    ApiJson(body): ApiJson<Value>,
) -> Result<Tagged<WorkflowView>, ApiError> {
    Ok(Tagged(
        workflows::replace(&state.handles, &who, id, body, expected).await?,
    ))
}

delete_by_id! {
    /// Delete a workflow with its triggers and workflow runs.
    workflows { path: "/workflows/{id}", operation_id: "delete_workflow", tag: "workflows",
        id: "The workflow", missing: "No such workflow" }
}

set_paused_by_id! {
    /// Pause a workflow: it starts no new run (runs under way go on).
    pause = true, workflows -> WorkflowView { path: "/workflows/{id}/pause", operation_id: "pause_workflow",
        tag: "workflows", id: "The workflow", ok: "The paused workflow", missing: "No such workflow" }
}

set_paused_by_id! {
    /// Resume a paused workflow.
    resume = false, workflows -> WorkflowView { path: "/workflows/{id}/resume", operation_id: "resume_workflow",
        tag: "workflows", id: "The workflow", ok: "The resumed workflow", missing: "No such workflow" }
}

/// Start a run of the workflow now, optionally with parameters every step gets (a step's
/// own `params` over them).
#[utoipa::path(post, path = "/workflows/{id}/run", operation_id = "run_workflow_now", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow")),
    request_body(content = Option<RunNowBody>, description = "Optional: the run's parameters"),
    responses(
        (status = ACCEPTED, description = "Started: its first steps are queued", body = WorkflowRunStarted),
        (status = NOT_FOUND, description = "No such workflow", body = ErrorBody),
        (status = CONFLICT, description = "The workflow is paused", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn run_now(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<WorkflowRunStarted>), ApiError> {
    let params = read_params(&String::from_utf8_lossy(&body), true)?;
    let workflow_run_id = workflows::run_now(&state.handles, &who, id, &params).await?;
    Ok((StatusCode::ACCEPTED, Json(WorkflowRunStarted { workflow_run_id })))
}

/// One workflow run: its state and each step's state, runs and output.
#[utoipa::path(get, path = "/workflow-runs/{id}", operation_id = "get_workflow_run", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow run")),
    responses(
        (status = OK, description = "The workflow run", body = WorkflowRunView),
        (status = NOT_FOUND, description = "No such workflow run", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get_run(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<WorkflowRunView>, ApiError> {
    Ok(Json(workflows::get_run(&state.handles, &who, id).await?))
}

/// Cancel a workflow run: its pending steps will not start, its running steps' runs are
/// cancelled.
#[utoipa::path(post, path = "/workflow-runs/{id}/cancel", operation_id = "cancel_workflow_run", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow run")),
    responses(
        (status = OK, description = "The cancelled workflow run", body = WorkflowRunView),
        (status = NOT_FOUND, description = "No such workflow run", body = ErrorBody),
        (status = CONFLICT, description = "It already ended", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn cancel_run(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<WorkflowRunView>, ApiError> {
    Ok(Json(workflows::cancel_run(&state.handles, &who, id).await?))
}

/// Run a failed (or cancelled) step again and continue the workflow run from there: the
/// steps it made skip wait for it again.
#[utoipa::path(post, path = "/workflow-runs/{id}/steps/{name}/retry", operation_id = "retry_workflow_step",
    tag = "workflows",
    params(("id" = i64, Path, description = "The workflow run"), ("name" = String, Path, description = "The step")),
    responses(
        (status = ACCEPTED, description = "The step's new run is queued", body = StepRetried),
        (status = NOT_FOUND, description = "No such workflow run or step", body = ErrorBody),
        (status = CONFLICT, description = "The step is not failed or cancelled", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn retry_step(
    State(state): State<AppState>,
    who: Principal,
    Path((id, name)): Path<(String, String)>,
) -> Result<(StatusCode, Json<StepRetried>), ApiError> {
    let id = id
        .parse::<i64>()
        .map_err(|_| ApiError::not_found("workflow run", &id))?;
    let run_id = workflows::retry_step(&state.handles, &who, id, &name).await?;
    Ok((StatusCode::ACCEPTED, Json(StepRetried { run_id })))
}

/// The triggers of a workflow.
#[utoipa::path(get, path = "/workflows/{id}/triggers", operation_id = "list_workflow_triggers", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow")),
    responses(
        (status = OK, description = "Its triggers, oldest first", body = Paged<WorkflowTrigger>),
        (status = NOT_FOUND, description = "No such workflow", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list_triggers(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Paged<WorkflowTrigger>>, ApiError> {
    Ok(Json(Paged::all(
        workflows::triggers(&state.handles, &who, id).await?,
    )))
}

/// Schedule a workflow: each instant of the trigger (cron, interval or once, with the
/// misfire policy of job triggers) starts one workflow run with the trigger's `params`.
#[utoipa::path(post, path = "/workflows/{id}/triggers", operation_id = "create_workflow_trigger", tag = "workflows",
    params(("id" = i64, Path, description = "The workflow")),
    request_body = TriggerDraft,
    responses(
        (status = CREATED, description = "The trigger, with its first instant", body = WorkflowTrigger),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named; nothing was created", body = ErrorBody),
        (status = NOT_FOUND, description = "No such workflow", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create_trigger(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<WorkflowTrigger>), ApiError> {
    let created = workflows::create_trigger(&state.handles, &who, id, TriggerDraft::from_json(body)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Delete a trigger of a workflow (the workflow runs it started stay).
#[utoipa::path(delete, path = "/workflows/{id}/triggers/{trigger_id}", operation_id = "delete_workflow_trigger",
    tag = "workflows",
    params(("id" = i64, Path, description = "The workflow"), ("trigger_id" = i64, Path, description = "The trigger")),
    responses(
        (status = NO_CONTENT, description = "Deleted"),
        (status = NOT_FOUND, description = "No such trigger of this workflow", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn delete_trigger(
    State(state): State<AppState>,
    who: Principal,
    Path((id, trigger_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let parse = |text: &str| {
        text.parse::<i64>()
            .map_err(|_| ApiError::not_found("workflow trigger", text))
    };
    workflows::delete_trigger(&state.handles, &who, parse(&id)?, parse(&trigger_id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}
