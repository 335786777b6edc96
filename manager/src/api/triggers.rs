//! `/api/v1/jobs/{id}/triggers`, `/api/v1/triggers/{id}` and the schedule preview.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;

use super::by_id::{delete_by_id, get_by_id, set_paused_by_id, update_by_id};
use super::precondition::Tagged;
use super::Id;
use crate::auth::Principal;
use crate::command::trigger::PreviewRequest;
use crate::command::{TriggerDraft, TriggerPatch};
use crate::error::FieldErrors;
use crate::error::{ApiError, ErrorBody};
use crate::input::{check, ApiJson, QueryParams};
use crate::service::triggers::{self, Preview, TriggerView};
use crate::service::webhooks::{self, HookUrl};
use crate::service::Paged;
use crate::state::AppState;
use probactr_common::store::webhook_deliveries::Delivery;

/// List a job's triggers.
#[utoipa::path(get, path = "/jobs/{id}/triggers", operation_id = "list_triggers", tag = "triggers",
    params(("id" = i64, Path, description = "The job")),
    responses(
        (status = OK, description = "Every trigger of the job", body = Paged<TriggerView>),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    Id(job_id): Id,
) -> Result<Json<Paged<TriggerView>>, ApiError> {
    let items = triggers::with_params(
        &state.handles,
        triggers::list_for_job(&state.handles, &who, job_id).await?,
    )
    .await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// Add a trigger to a job (cron, interval, once or webhook); executors see it within a
/// second. A webhook trigger's answer carries its URL (`webhook_url`), shown this once.
#[utoipa::path(post, path = "/jobs/{id}/triggers", operation_id = "create_trigger", tag = "triggers",
    params(("id" = i64, Path, description = "The job")),
    request_body = TriggerDraft,
    responses(
        (status = CREATED, description = "The trigger, with its first instant", body = TriggerView),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named (`cron.minute`, `timezone`…); nothing was created", body = ErrorBody),
        (status = NOT_FOUND, description = "No such job", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    Id(job_id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Tagged<TriggerView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Tagged(
            triggers::created_view(
                &state.handles,
                triggers::create(&state.handles, &who, job_id, TriggerDraft::from_json(body)).await?,
            )
            .await?,
        ),
    ))
}

get_by_id! {
    /// Read a trigger.
    triggers via view -> TriggerView { path: "/triggers/{id}", operation_id: "get_trigger", tag: "triggers",
        id: "The trigger", ok: "The trigger", missing: "No such trigger",
        otherwise: "Not allowed, not signed in, or a server error" }
}

update_by_id! {
    /// Edit a trigger: send the fields to change and the version you read, as
    /// `If-Match: "VERSION"` (412 when stale) or as `version` in the body (409 when stale).
    triggers via view -> TriggerView { path: "/triggers/{id}", operation_id: "update_trigger", tag: "triggers",
        id: "The trigger", patch: TriggerPatch,
        ok: "The trigger as changed, its next instant recomputed", stale_version: "`version` is stale",
        stale_if_match: "`If-Match` is stale: the trigger changed since it was read", missing: "No such trigger" }
}

delete_by_id! {
    /// Delete a trigger (its runs stay in the history).
    triggers { path: "/triggers/{id}", operation_id: "delete_trigger", tag: "triggers",
        id: "The trigger", missing: "No such trigger" }
}

set_paused_by_id! {
    /// Pause a trigger.
    pause = true, triggers via view -> TriggerView { path: "/triggers/{id}/pause", operation_id: "pause_trigger",
        tag: "triggers", id: "The trigger", ok: "The paused trigger", missing: "No such trigger" }
}

set_paused_by_id! {
    /// Resume a trigger (instants missed while paused follow its misfire policy).
    resume = false, triggers via view -> TriggerView { path: "/triggers/{id}/resume",
        operation_id: "resume_trigger", tag: "triggers", id: "The trigger", ok: "The resumed trigger",
        missing: "No such trigger" }
}

/// The next instants of a trigger definition, without saving anything; those its
/// calendar or a maintenance window hold back are listed in `skipped`.
#[utoipa::path(post, path = "/schedule/preview", operation_id = "preview_schedule", tag = "triggers",
    request_body = PreviewRequest,
    responses(
        (status = OK, description = "The next instants", body = Preview),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn preview(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Preview>, ApiError> {
    Ok(Json(
        triggers::preview(&state.handles, &who, PreviewRequest::from_json(body)).await?,
    ))
}

/// Give a webhook trigger a new URL: the previous one stops working at once; the new one
/// is in this answer only.
#[utoipa::path(post, path = "/triggers/{id}/rotate-token", operation_id = "rotate_trigger_token", tag = "triggers",
    params(("id" = i64, Path, description = "The webhook trigger")),
    responses(
        (status = OK, description = "The new URL, shown this once", body = HookUrl),
        (status = CONFLICT, description = "The trigger is not a webhook", body = ErrorBody),
        (status = NOT_FOUND, description = "No such trigger", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn rotate_token(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<HookUrl>, ApiError> {
    Ok(Json(webhooks::rotate_token(&state.handles, &who, id).await?))
}

/// A webhook trigger's deliveries, newest first: accepted (with the run), repeated, or
/// refused (with the reason). Kept for the records retention.
#[utoipa::path(get, path = "/triggers/{id}/deliveries", operation_id = "list_trigger_deliveries", tag = "triggers",
    params(
        ("id" = i64, Path, description = "The trigger"),
        ("limit" = Option<i64>, Query, description = "Page size, 1–500 (default 50)"),
        ("offset" = Option<i64>, Query, description = "Items to skip"),
    ),
    responses(
        (status = OK, description = "A page of deliveries", body = Paged<Delivery>),
        (status = NOT_FOUND, description = "No such trigger", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn deliveries(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    query: QueryParams,
) -> Result<Json<Paged<Delivery>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    check(errors)?;
    Ok(Json(
        webhooks::deliveries(&state.handles, &who, id, page.limit, page.offset).await?,
    ))
}
