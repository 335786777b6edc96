//! `/api/v1/jobs`: list, create, read, edit, delete, pause, resume, run now.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::JobKind;
use probactr_common::store::jobs::JobFilter;
use probactr_common::store::services::ReplicaHolder;
use serde_json::Value;

use super::bodies::{RunNowBody, RunQueued};
use super::by_id::{get_by_id, set_paused_by_id, update_by_id};
use super::precondition::Tagged;
use super::Id;
use crate::auth::Principal;
use crate::command::{JobDraft, JobPatch};
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, ApiJson, QueryParams};
use crate::service::jobs::{self, JobView};
use crate::service::Paged;
use crate::state::AppState;

/// List jobs with their statistics, filtered and paginated.
#[utoipa::path(get, path = "/jobs", operation_id = "list_jobs", tag = "jobs",
    params(
        ("q" = Option<String>, Query, description = "Case-insensitive text in the name or description"),
        ("kind" = Option<JobKind>, Query, description = "Only jobs of this kind"),
        ("paused" = Option<bool>, Query, description = "Only paused (true) or unpaused (false) jobs"),
        ("namespace" = Option<String>, Query, description = "Only jobs of this namespace (default: every namespace the caller sees)"),
        ("limit" = Option<i64>, Query, description = "Page size, 1–500 (default 50)"),
        ("offset" = Option<i64>, Query, description = "Items to skip"),
    ),
    responses(
        (status = OK, description = "A page of jobs, by name", body = Paged<JobView>),
        (status = UNPROCESSABLE_ENTITY, description = "A bad filter, named", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<JobView>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = JobFilter {
        q: query.text("q").map(str::to_owned),
        kind: query.choice::<JobKind>("kind", &mut errors),
        paused: query.choice::<bool>("paused", &mut errors),
        namespaces: query.text("namespace").map(|name| vec![name.trim().to_owned()]),
    };
    check(errors)?;
    Ok(Json(jobs::list(&state.handles, &who, &filter, page).await?))
}

/// Create a job (operators and admins; `shell` and `http` jobs: admins only).
#[utoipa::path(post, path = "/jobs", operation_id = "create_job", tag = "jobs",
    request_body = JobDraft,
    responses(
        (status = CREATED, description = "The job", body = JobView),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named; nothing was created", body = ErrorBody),
        (status = FORBIDDEN, description = "The caller's role may not create this job", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Tagged<JobView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Tagged(jobs::create(&state.handles, &who, JobDraft::from_json(body)).await?),
    ))
}

get_by_id! {
    /// Read a job with its statistics.
    jobs -> JobView { path: "/jobs/{id}", operation_id: "get_job", tag: "jobs",
        id: "The job", ok: "The job", missing: "No such job", otherwise: "Not signed in, or a server error" }
}

/// A service's instances: which executor holds each replica slot, and the run it is.
#[utoipa::path(get, path = "/jobs/{id}/replicas", operation_id = "list_job_replicas", tag = "jobs",
    params(("id" = i64, Path, description = "The job")),
    responses(
        (status = OK, description = "The live instances by slot (empty for a batch job)", body = Vec<ReplicaHolder>),
        (status = NOT_FOUND, description = "No such job", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn replicas(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Vec<ReplicaHolder>>, ApiError> {
    Ok(Json(jobs::replicas(&state.handles, &who, id).await?))
}

update_by_id! {
    /// Edit a job: send the fields to change and the version you read, as `If-Match: "VERSION"`
    /// (412 when stale) or as `version` in the body (409 when stale).
    jobs -> JobView { path: "/jobs/{id}", operation_id: "update_job", tag: "jobs", id: "The job",
        patch: JobPatch, ok: "The job as changed",
        stale_version: "`version` is stale: the job changed since it was read",
        stale_if_match: "`If-Match` is stale: the job changed since it was read", missing: "No such job" }
}

/// Delete a job. Its triggers go and its live runs are cancelled; its run history stays
/// readable, under "NAME (deleted #ID)", unless `erase_history=true` (then the runs go
/// too; a job deleted earlier can be erased this way). The audit log keeps the record.
#[utoipa::path(delete, path = "/jobs/{id}", operation_id = "delete_job", tag = "jobs",
    params(("id" = i64, Path, description = "The job"),
           ("erase_history" = Option<bool>, Query, description = "Also delete the job's runs (default false)")),
    responses(
        (status = NO_CONTENT, description = "Deleted"),
        (status = NOT_FOUND, description = "No such job", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn delete(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    query: QueryParams,
) -> Result<StatusCode, ApiError> {
    let mut errors = FieldErrors::new();
    let erase_history = query.flag("erase_history", &mut errors);
    check(errors)?;
    jobs::delete(&state.handles, &who, id, erase_history).await?;
    Ok(StatusCode::NO_CONTENT)
}

set_paused_by_id! {
    /// Pause a job: its triggers stop firing and its queued runs wait.
    pause = true, jobs -> JobView { path: "/jobs/{id}/pause", operation_id: "pause_job", tag: "jobs",
        id: "The job", ok: "The paused job", missing: "No such job" }
}

set_paused_by_id! {
    /// Resume a paused job.
    resume = false, jobs -> JobView { path: "/jobs/{id}/resume", operation_id: "resume_job", tag: "jobs",
        id: "The job", ok: "The resumed job", missing: "No such job" }
}

/// Queue a run of the job now, optionally with parameters (`{"params": {...}}`, merged over
/// the defaults of no trigger: a run-now has none). A paused job cannot be run.
#[utoipa::path(post, path = "/jobs/{id}/run", operation_id = "run_job_now", tag = "jobs",
    params(("id" = i64, Path, description = "The job")),
    request_body(content = Option<RunNowBody>, description = "Optional: the run's parameters"),
    responses(
        (status = ACCEPTED, description = "Queued; an executor picks it up", body = RunQueued),
        (status = NOT_FOUND, description = "No such job", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn run_now(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<RunQueued>), ApiError> {
    let params = jobs::read_params(&String::from_utf8_lossy(&body), true)?;
    let run_id = jobs::run_now(&state.handles, &who, id, &params).await?;
    Ok((StatusCode::ACCEPTED, Json(RunQueued { run_id })))
}
