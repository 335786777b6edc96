//! `/api/v1/calendars`: a namespace's named sets of days that its triggers skip
//! (`calendar_mode: exclude`) or keep to (`only`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::NaiveDate;
use probactr_common::calendar::{DateRange, Days};
use probactr_common::store::calendars::StoredCalendar;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::bodies::CalendarBody;
use super::listing::list_handler;
use super::named::{delete_named, get_named};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody};
use crate::input::{ApiJson, Input, QueryParams};
use crate::service::calendars::{self, CalendarDraft};
use crate::service::Paged;
use crate::state::AppState;

list_handler! {
    /// Every calendar the caller sees.
    calendars -> StoredCalendar { path: "/calendars", operation_id: "list_calendars", tag: "calendars",
        namespace: "Only this namespace's calendars (default: every namespace the caller sees)",
        ok: "The calendars", otherwise: "Not signed in, or a server error" }
}

/// Create a calendar (admins of its namespace).
#[utoipa::path(post, path = "/calendars", operation_id = "create_calendar", tag = "calendars",
    request_body = CalendarBody,
    responses(
        (status = CREATED, description = "Created", body = StoredCalendar),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = CONFLICT, description = "The namespace already has a calendar so named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn create(
    State(state): State<AppState>,
    who: Principal,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<StoredCalendar>), ApiError> {
    let mut input = Input::new(body)?;
    let name = input.required_text("name").unwrap_or_default();
    let namespace = input.namespace();
    let draft = read_draft(input)?;
    let calendar = calendars::create(&state.handles, &who, &namespace, &name, draft).await?;
    Ok((StatusCode::CREATED, Json(calendar)))
}

get_named! {
    /// A calendar.
    calendars -> StoredCalendar { path: "/calendars/{name}", operation_id: "get_calendar", tag: "calendars",
        name: "The calendar", missing: "No such calendar" }
}

/// Replace a calendar's zone and days (admins of its namespace); its triggers follow the
/// new days from their next firing on.
#[utoipa::path(put, path = "/calendars/{name}", operation_id = "replace_calendar", tag = "calendars",
    params(("name" = String, Path, description = "The calendar"),
           ("namespace" = Option<String>, Query, description = "Its namespace (default: default)")),
    request_body = CalendarBody,
    responses(
        (status = OK, description = "The calendar", body = StoredCalendar),
        (status = NOT_FOUND, description = "No such calendar", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "Each bad field, named", body = ErrorBody),
        (status = "default", description = "Not an admin, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn replace(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    query: QueryParams,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<StoredCalendar>, ApiError> {
    let namespace = query.namespace();
    let mut input = Input::new(body)?;
    // The name and namespace are the path's; they may be repeated, not changed.
    let _ = input.raw("name");
    let _ = input.raw("namespace");
    let draft = read_draft(input)?;
    Ok(Json(
        calendars::replace(&state.handles, &who, namespace, &name, draft).await?,
    ))
}

delete_named! {
    /// Delete a calendar (admins of its namespace); 409 naming the triggers that follow it.
    calendars { path: "/calendars/{name}", operation_id: "delete_calendar", tag: "calendars",
        name: "The calendar", missing: "No such calendar", conflict: "Triggers follow it (named)" }
}

/// The zone, days and iCalendar file of a calendar body; every bad field named.
fn read_draft(mut input: Input) -> Result<CalendarDraft, ApiError> {
    let timezone = input
        .text("timezone")
        .flatten()
        .unwrap_or_else(|| "UTC".to_owned());
    let dates: Vec<NaiveDate> = list_of(&mut input, "dates", "a list of dates (YYYY-MM-DD)");
    let ranges: Vec<DateRange> = list_of(
        &mut input,
        "ranges",
        "a list of {\"from\": \"YYYY-MM-DD\", \"to\": \"YYYY-MM-DD\"}",
    );
    let weekdays: Vec<String> = list_of(&mut input, "weekdays", "a list of weekdays (mon … sun)");
    let ical = input.text("ical").flatten();
    input.finish()?;
    Ok(CalendarDraft {
        timezone,
        days: Days {
            dates: dates.into_iter().collect(),
            ranges,
            weekdays: weekdays.into_iter().map(|day| day.to_ascii_lowercase()).collect(),
        },
        ical,
    })
}

/// A list field read as `T`s (absent or null: empty); a bad one is a field error.
fn list_of<T: DeserializeOwned>(input: &mut Input, key: &str, expected: &str) -> Vec<T> {
    match input.raw(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => serde_json::from_value(value).unwrap_or_else(|_| {
            input.error(key, format!("must be {expected}"));
            Vec::new()
        }),
    }
}
