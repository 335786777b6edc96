//! `/triggers/{id}/ledger`: the fire ledger of a trigger as a strip per day (gaps in
//! red), with a backfill form that lists the instants first (dry run) or queues them.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use minijinja::context;
use probactr_common::ledger::{Entry, Outcome};

use super::{render_status, AdminError, AdminUser, FormData, FormPost};
use crate::api::Id;
use crate::error::{ApiError, FieldErrors};
use crate::input::QueryParams;
use crate::service::{ledger, triggers};
use crate::state::AppState;

/// Days the page shows by default.
const DAYS: i64 = 3;

struct Shown {
    status: StatusCode,
    notice: Option<String>,
    errors: FieldErrors,
    form: BTreeMap<String, String>,
}

async fn page_of(
    state: &AppState,
    user: &AdminUser,
    id: i64,
    days: i64,
    shown: Shown,
) -> Result<Response, AdminError> {
    let trigger = triggers::get(&state.handles, &user.0, id).await?;
    let now = Utc::now();
    let from = now - TimeDelta::days(days);
    let ledger = ledger::ledger(
        &state.handles,
        &user.0,
        id,
        from,
        now + TimeDelta::hours(1),
        ledger::MAX_LEDGER,
    )
    .await?;
    let mut by_day: BTreeMap<NaiveDate, Vec<&Entry>> = BTreeMap::new();
    for entry in &ledger.entries {
        by_day.entry(entry.instant.date_naive()).or_default().push(entry);
    }
    let days: Vec<_> = by_day
        .iter()
        .rev()
        .map(|(day, entries)| {
            let count = |outcome: Outcome| entries.iter().filter(|e| e.outcome == outcome).count();
            context! {
                day => day.to_string(),
                entries => entries,
                ran => count(Outcome::Ran), missed => count(Outcome::Missed),
                skipped => count(Outcome::Skipped), backfilled => count(Outcome::Backfilled),
            }
        })
        .collect();
    let ctx = context! {
        trigger, days, truncated => ledger.next_from.is_some(),
        notice => shown.notice, errors => shown.errors, form => shown.form,
        ..user.layout("jobs")
    };
    render_status(state, shown.status, "ledger.html", ctx)
}

/// `GET /triggers/{id}/ledger?days=N`.
pub async fn page(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    query: QueryParams,
) -> Result<Response, AdminError> {
    let mut errors = FieldErrors::new();
    let days = query.int("days", 1, 31, &mut errors).unwrap_or(DAYS);
    let shown = Shown {
        status: StatusCode::OK,
        notice: None,
        errors,
        form: BTreeMap::new(),
    };
    page_of(&state, &user, id, days, shown).await
}

fn instant_field(form: &FormData, field: &str, errors: &mut FieldErrors) -> Option<DateTime<Utc>> {
    let text = form.get(field).map(str::trim).filter(|t| !t.is_empty());
    let Some(text) = text else {
        errors.insert(field.into(), "is required".into());
        return None;
    };
    let parsed = DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| {
            chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M")
                .or_else(|_| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S"))
                .map(|naive| naive.and_utc())
        });
    match parsed {
        Ok(at) => Some(at),
        Err(_) => {
            errors.insert(
                field.into(),
                "must be a time such as 2026-01-31T12:00 (UTC)".into(),
            );
            None
        }
    }
}

/// `POST /triggers/{id}/backfill`: lists (dry run) or queues the instants without a run.
pub async fn backfill(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let mut errors = FieldErrors::new();
    let from = instant_field(&form, "from", &mut errors);
    let to = instant_field(&form, "to", &mut errors);
    let max_concurrency = match form
        .get("max_concurrency")
        .map(str::trim)
        .filter(|v| !v.is_empty())
    {
        None => Some(1),
        Some(text) => match text.parse::<i32>() {
            Ok(n) if (1..=1000).contains(&n) => Some(n),
            _ => {
                errors.insert(
                    "max_concurrency".into(),
                    "must be a whole number from 1 to 1000".into(),
                );
                None
            }
        },
    };
    let dry_run = form.get("action") != Some("queue");
    let kept: BTreeMap<String, String> = ["from", "to", "max_concurrency"]
        .iter()
        .map(|field| (field.to_string(), form.get(field).unwrap_or_default().to_owned()))
        .collect();
    let outcome = match (from, to, max_concurrency) {
        (Some(from), Some(to), Some(max)) if errors.is_empty() => {
            ledger::backfill(&state.handles, &user.0, id, from, to, dry_run, max).await
        }
        _ => Err(ApiError::Invalid(errors)),
    };
    let shown = match outcome {
        Ok(answer) => Shown {
            status: StatusCode::OK,
            notice: Some(match (answer.dry_run, answer.instants.len()) {
                (_, 0) => "Every instant of the span has a run: nothing to backfill.".to_owned(),
                (true, n) => format!(
                    "{n} instant(s) without a run: {}{}",
                    answer
                        .instants
                        .iter()
                        .take(10)
                        .map(|i| i.to_rfc3339())
                        .collect::<Vec<_>>()
                        .join(", "),
                    if n > 10 { ", …" } else { "" }
                ),
                (false, n) => format!(
                    "Backfill queued: {n} instant(s), at most {} at a time.",
                    max_concurrency.unwrap_or(1)
                ),
            }),
            errors: FieldErrors::new(),
            form: kept,
        },
        Err(ApiError::Invalid(errors)) => Shown {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            notice: None,
            errors,
            form: kept,
        },
        Err(err) => return Err(err.into()),
    };
    page_of(&state, &user, id, DAYS, shown).await
}
