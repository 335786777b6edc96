//! `/api/v1/channels`, `/api/v1/alert-rules` and `/api/v1/notifications`: where alerts go,
//! which events raise them, and what was delivered.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use probactr_common::model::{AlertEvent, NotificationState};
use probactr_common::store::alerts::channels::Channel;
use probactr_common::store::alerts::notifications::{Filter, Notification};
use probactr_common::store::alerts::rules::Rule;
use serde::Deserialize;
use serde_json::Value;

use super::Id;
use crate::auth::Principal;
use crate::command::alert::{self, ChannelCommand};
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, ApiJson, QueryParams};
use crate::service::alerts::{self, TestResult};
use crate::service::Paged;
use crate::state::AppState;

/// An alert rule as created or replaced.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // documents the body, which is read field by field
pub struct RuleBody {
    /// Its namespace (default `default`): it watches that namespace's jobs and sends to its
    /// channels; a replacement may repeat it, never change it.
    namespace: Option<String>,
    /// Name, unique within its namespace.
    name: String,
    /// Events it listens for.
    events: Vec<AlertEvent>,
    /// The job it watches; absent or null: every job.
    job_id: Option<i64>,
    /// Channels its messages go to.
    channel_ids: Vec<i64>,
    /// `consecutive_failures`: failures in a row (default 3).
    threshold: Option<i32>,
    /// `run_too_long`, `no_success_within`: seconds (required with them).
    duration_secs: Option<i32>,
    /// Repeats of an event for one job within this many seconds are folded into one
    /// follow-up (default 300; 0: no throttling).
    throttle_secs: Option<i32>,
    /// Default true.
    enabled: Option<bool>,
}

/// Every alert channel (admins).
#[utoipa::path(get, path = "/channels", operation_id = "list_channels", tag = "alerts",
    responses(
        (status = OK, description = "The channels", body = Paged<Channel>),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list_channels(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Paged<Channel>>, ApiError> {
    Ok(Json(Paged::all(
        alerts::list_channels(&state.handles, &who).await?,
    )))
}

/// Create an alert channel (admins).
#[utoipa::path(post, path = "/channels", operation_id = "create_channel", tag = "alerts",
    request_body = ChannelCommand,
    responses(
        (status = CREATED, description = "Created", body = Channel),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create_channel(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Channel>), ApiError> {
    let command = ChannelCommand::read(body)?;
    Ok((
        StatusCode::CREATED,
        Json(alerts::create_channel(&state.handles, &who, command).await?),
    ))
}

/// Read an alert channel (its secret only as `has_secret`).
#[utoipa::path(get, path = "/channels/{id}", operation_id = "get_channel", tag = "alerts",
    params(("id" = i64, Path, description = "Channel id")),
    responses(
        (status = OK, description = "The channel", body = Channel),
        (status = NOT_FOUND, description = "No such channel", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get_channel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Channel>, ApiError> {
    Ok(Json(alerts::get_channel(&state.handles, &who, id).await?))
}

/// Replace an alert channel (a webhook's secret is kept unless given).
#[utoipa::path(put, path = "/channels/{id}", operation_id = "update_channel", tag = "alerts",
    params(("id" = i64, Path, description = "Channel id")),
    request_body = ChannelCommand,
    responses(
        (status = OK, description = "The channel", body = Channel),
        (status = NOT_FOUND, description = "No such channel", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn update_channel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Channel>, ApiError> {
    let command = ChannelCommand::read(body)?;
    Ok(Json(
        alerts::update_channel(&state.handles, &who, id, command).await?,
    ))
}

/// Delete an alert channel no rule uses.
#[utoipa::path(delete, path = "/channels/{id}", operation_id = "delete_channel", tag = "alerts",
    params(("id" = i64, Path, description = "Channel id")),
    responses(
        (status = NO_CONTENT, description = "Deleted"),
        (status = NOT_FOUND, description = "No such channel", body = ErrorBody),
        (status = CONFLICT, description = "Rules still use it (named)", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn delete_channel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    alerts::delete_channel(&state.handles, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Send a test message through a channel: a monitor delivers it, and the answer reports
/// its first attempt.
#[utoipa::path(post, path = "/channels/{id}/test", operation_id = "test_channel", tag = "alerts",
    params(("id" = i64, Path, description = "Channel id")),
    responses(
        (status = OK, description = "The attempt: delivered, or the error", body = TestResult),
        (status = NOT_FOUND, description = "No such channel", body = ErrorBody),
        (status = SERVICE_UNAVAILABLE, description = "No monitor attempted it in time", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn test_channel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<TestResult>, ApiError> {
    Ok(Json(alerts::test_channel(&state.handles, &who, id).await?))
}

/// Every alert rule.
#[utoipa::path(get, path = "/alert-rules", operation_id = "list_alert_rules", tag = "alerts",
    responses(
        (status = OK, description = "The rules", body = Paged<Rule>),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list_rules(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<Paged<Rule>>, ApiError> {
    Ok(Json(Paged::all(alerts::list_rules(&state.handles, &who).await?)))
}

/// Create an alert rule (operators).
#[utoipa::path(post, path = "/alert-rules", operation_id = "create_alert_rule", tag = "alerts",
    request_body = RuleBody,
    responses(
        (status = CREATED, description = "Created", body = Rule),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create_rule(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Rule>), ApiError> {
    let command = alert::read_rule(body)?;
    Ok((
        StatusCode::CREATED,
        Json(alerts::save_rule(&state.handles, &who, None, command).await?),
    ))
}

/// Read an alert rule.
#[utoipa::path(get, path = "/alert-rules/{id}", operation_id = "get_alert_rule", tag = "alerts",
    params(("id" = i64, Path, description = "Rule id")),
    responses(
        (status = OK, description = "The rule", body = Rule),
        (status = NOT_FOUND, description = "No such rule", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get_rule(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Rule>, ApiError> {
    Ok(Json(alerts::get_rule(&state.handles, &who, id).await?))
}

/// Replace an alert rule (operators).
#[utoipa::path(put, path = "/alert-rules/{id}", operation_id = "update_alert_rule", tag = "alerts",
    params(("id" = i64, Path, description = "Rule id")),
    request_body = RuleBody,
    responses(
        (status = OK, description = "The rule", body = Rule),
        (status = NOT_FOUND, description = "No such rule", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn update_rule(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Rule>, ApiError> {
    let command = alert::read_rule(body)?;
    Ok(Json(
        alerts::save_rule(&state.handles, &who, Some(id), command).await?,
    ))
}

/// Delete an alert rule (operators).
#[utoipa::path(delete, path = "/alert-rules/{id}", operation_id = "delete_alert_rule", tag = "alerts",
    params(("id" = i64, Path, description = "Rule id")),
    responses(
        (status = NO_CONTENT, description = "Deleted"),
        (status = NOT_FOUND, description = "No such rule", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn delete_rule(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<StatusCode, ApiError> {
    alerts::delete_rule(&state.handles, &who, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The delivery log, newest first.
#[utoipa::path(get, path = "/notifications", operation_id = "list_notifications", tag = "alerts",
    params(
        ("job_id" = Option<i64>, Query, description = "Only this job's"),
        ("state" = Option<NotificationState>, Query, description = "pending, sent or failed"),
        ("limit" = Option<i64>, Query, description = "Page size, 1–500 (default 50)"),
        ("offset" = Option<i64>, Query, description = "Items to skip"),
    ),
    responses(
        (status = OK, description = "A page of notifications", body = Paged<Notification>),
        (status = UNPROCESSABLE_ENTITY, description = "A bad filter, named", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn notifications(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<Notification>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = Filter {
        id: None,
        job_id: query.int("job_id", 1, i64::MAX, &mut errors),
        state: query.choice::<NotificationState>("state", &mut errors),
        namespaces: None,
    };
    check(errors)?;
    Ok(Json(Paged::all(
        alerts::notifications(&state.handles, &who, &filter, page).await?,
    )))
}
