//! `/api/v1/triggers/{id}/ledger`, `/api/v1/triggers/{id}/backfill` and
//! `/api/v1/forecast`: what was due and what became of it, filling the gaps, and what
//! will fire when.

use axum::extract::State;
use axum::Json;
use chrono::{TimeDelta, Utc};
use probactr_common::ledger::Ledger;
use serde::Deserialize;
use serde_json::Value;

use super::Id;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, ApiJson, Input, QueryParams};
use crate::service::ledger::{self, BackfillAnswer, ForecastAnswer};
use crate::state::AppState;

/// A backfill request.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // documents the body, which is read field by field
pub struct BackfillBody {
    /// First instant of the span (RFC 3339), inclusive.
    from: String,
    /// Last instant of the span (RFC 3339), inclusive; instants after now are left out.
    to: String,
    /// List the instants without queueing anything.
    dry_run: Option<bool>,
    /// At most this many backfilled runs live at once (default 1).
    max_concurrency: Option<i32>,
}

/// The fire ledger of a trigger: every instant its schedule names in `[from, to)` (by
/// default the last 24 hours and the next one), each with what became of it: `ran`,
/// `skipped`, `missed`, `pending` or `backfilled`, with its run and reason.
#[utoipa::path(get, path = "/triggers/{id}/ledger", operation_id = "trigger_ledger", tag = "triggers",
    params(
        ("id" = i64, Path, description = "Trigger id"),
        ("from" = Option<String>, Query, description = "Start, inclusive (RFC 3339; default 24 h ago)"),
        ("to" = Option<String>, Query, description = "End, exclusive (RFC 3339; default in 1 h)"),
        ("limit" = Option<i64>, Query, description = "Instants per page, 1–2000 (default 500); `next_from` pages on"),
    ),
    responses(
        (status = OK, description = "The ledger", body = Ledger),
        (status = NOT_FOUND, description = "No such trigger", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "A bad parameter, named", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn ledger(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    query: QueryParams,
) -> Result<Json<Ledger>, ApiError> {
    let mut errors = FieldErrors::new();
    let now = Utc::now();
    let from = query
        .time("from", &mut errors)
        .unwrap_or(now - TimeDelta::hours(24));
    let to = query.time("to", &mut errors).unwrap_or(now + TimeDelta::hours(1));
    let limit = query
        .int("limit", 1, ledger::MAX_LEDGER as i64, &mut errors)
        .unwrap_or(500);
    check(errors)?;
    Ok(Json(
        ledger::ledger(&state.handles, &who, id, from, to, limit as usize).await?,
    ))
}

/// Backfill: queue a run for every instant of the span that has none (operators). Runs
/// carry their original instant (`PROBACTR_SCHEDULED_AT`); monitors queue them at most
/// `max_concurrency` at a time. Asking twice queues nothing the second time.
#[utoipa::path(post, path = "/triggers/{id}/backfill", operation_id = "backfill_trigger", tag = "triggers",
    params(("id" = i64, Path, description = "Trigger id")),
    request_body = BackfillBody,
    responses(
        (status = OK, description = "The instants queued (or, for a dry run, that would be)", body = BackfillAnswer),
        (status = NOT_FOUND, description = "No such trigger", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn backfill(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<BackfillAnswer>, ApiError> {
    // A trigger the caller does not see is a 404 whatever the body says.
    crate::service::triggers::get(&state.handles, &who, id).await?;
    let mut input = Input::new(body)?;
    let from = input.time("from");
    let from = input.required("from", from);
    let to = input.time("to");
    let to = input.required("to", to);
    let dry_run = input.boolean("dry_run").flatten().unwrap_or(false);
    let max_concurrency = input.int("max_concurrency", 1, 1000).flatten().unwrap_or(1);
    input.finish()?;
    let (Some(from), Some(to)) = (from, to) else {
        return Err(ApiError::field("body", "invalid"));
    };
    let answer = ledger::backfill(
        &state.handles,
        &who,
        id,
        from,
        to,
        dry_run,
        max_concurrency as i32,
    )
    .await?;
    Ok(Json(answer))
}

/// What will fire when, across the triggers of unpaused jobs (or one job's), with the
/// instants a DST change in the trigger's zone skips or repeats flagged.
#[utoipa::path(get, path = "/forecast", operation_id = "forecast", tag = "triggers",
    params(
        ("from" = Option<String>, Query, description = "Start (RFC 3339; default now)"),
        ("to" = Option<String>, Query, description = "End (RFC 3339; default in 24 h)"),
        ("job_id" = Option<i64>, Query, description = "Only this job's triggers"),
    ),
    responses(
        (status = OK, description = "The instants, in order (at most 1000)", body = ForecastAnswer),
        (status = UNPROCESSABLE_ENTITY, description = "A bad parameter, named", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn forecast(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<ForecastAnswer>, ApiError> {
    let mut errors = FieldErrors::new();
    let now = Utc::now();
    let from = query.time("from", &mut errors).unwrap_or(now);
    let to = query
        .time("to", &mut errors)
        .unwrap_or(now + TimeDelta::hours(24));
    let job_id = query.int("job_id", 1, i64::MAX, &mut errors);
    check(errors)?;
    Ok(Json(
        ledger::forecast(&state.handles, &who, from, to, job_id).await?,
    ))
}
