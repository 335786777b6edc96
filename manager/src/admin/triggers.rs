//! The trigger form (create and edit, with a "preview next 5" button that works without
//! JavaScript) with the trigger's kept versions, and the trigger actions (pause, resume,
//! delete, restore a version).

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Redirect, Response};
use chrono::{DateTime, Utc};
use minijinja::context;
use probactr_common::model::{Misfire, Trigger, TriggerKind};
use probactr_common::store::triggers::Extras;
use probactr_common::store::webhook_deliveries::Delivery;

use super::forms::{trigger_draft, trigger_patch};
use super::{check_csrf, flash, next_or, render_status, AdminError, AdminUser, FormData, FormPost};
use crate::api::Id;
use crate::command::trigger::PreviewRequest;
use crate::error::{ApiError, FieldErrors};
use crate::service::jobs::{self, JobView};
use crate::service::versions::HistoryEntry;
use crate::service::{trigger_versions, triggers, webhooks};
use crate::state::AppState;

/// What a trigger form page shows.
struct FormState<'a> {
    /// What the page answers with (422 over bad fields, 409 over a lost race).
    status: StatusCode,
    job: &'a JobView,
    trigger_id: Option<i64>,
    values: &'a HashMap<String, String>,
    errors: FieldErrors,
    conflict: Option<String>,
    preview: Option<triggers::Preview>,
    /// The saved trigger's next instants (an edit), shown beside the preview.
    current: Option<Vec<DateTime<Utc>>>,
    /// The latest deliveries of a saved webhook trigger (None: not one).
    deliveries: Option<Vec<Delivery>>,
    /// The saved trigger's kept versions (an edit; None on a new trigger's form).
    history: Option<Vec<HistoryEntry>>,
}

/// The next instants of the saved trigger `id`, for comparison with an edit's preview.
async fn current_instants(state: &AppState, user: &AdminUser, id: Option<i64>) -> Option<Vec<DateTime<Utc>>> {
    let trigger = triggers::get(&state.handles, &user.0, id?).await.ok()?;
    let schedule = probactr_common::schedule::TriggerSchedule::from_trigger(&trigger).ok()?;
    Some(schedule.upcoming(Utc::now(), PREVIEWED))
}

/// Instants the form's previews list.
const PREVIEWED: usize = 5;

/// Errors of one cron field (`cron.minute`) shown on the form's single cron input.
fn fold_cron_errors(mut errors: FieldErrors) -> FieldErrors {
    let folded: Vec<String> = errors
        .iter()
        .filter_map(|(field, message)| {
            field
                .strip_prefix("cron.")
                .map(|part| format!("{}: {message}", part.replace('_', " ")))
        })
        .collect();
    if !folded.is_empty() {
        errors
            .entry("cron".to_owned())
            .or_insert_with(|| folded.join("; "));
    }
    errors
}

/// How many of a webhook's latest deliveries its page lists.
const DELIVERIES_SHOWN: i64 = 50;

/// The latest deliveries of `trigger` when it is a webhook, newest first, accepted or
/// refused with the reason.
async fn latest_deliveries(
    state: &AppState,
    user: &AdminUser,
    trigger: &Trigger,
) -> Result<Option<Vec<Delivery>>, AdminError> {
    if trigger.timing.kind != TriggerKind::Webhook {
        return Ok(None);
    }
    let listed = webhooks::deliveries(&state.handles, &user.0, trigger.id, DELIVERIES_SHOWN, 0).await?;
    Ok(Some(listed.items))
}

fn render_form(state: &AppState, user: &AdminUser, form: FormState<'_>) -> Result<Response, AdminError> {
    let errors = fold_cron_errors(form.errors);
    let kinds: Vec<&str> = TriggerKind::ALL.iter().map(|k| k.as_str()).collect();
    let misfires: Vec<&str> = Misfire::ALL.iter().map(|m| m.as_str()).collect();
    let calendar_modes = ["exclude", "only"];
    let ctx = context! {
        job => form.job, trigger_id => form.trigger_id, form => form.values, errors,
        conflict => form.conflict, preview => form.preview, current => form.current, kinds, misfires,
        calendar_modes,
        deliveries => form.deliveries, history => form.history,
        ..user.layout("jobs")
    };
    render_status(state, form.status, "trigger_form.html", ctx)
}

fn values_of(trigger: &Trigger) -> HashMap<String, String> {
    let time = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339()).unwrap_or_default();
    let mut values = HashMap::from([
        ("kind".to_owned(), trigger.timing.kind.to_string()),
        ("cron".to_owned(), trigger.timing.cron.clone().unwrap_or_default()),
        ("timezone".to_owned(), trigger.timing.timezone.clone()),
        (
            "interval_secs".to_owned(),
            trigger
                .timing
                .interval_secs
                .map(|s| s.to_string())
                .unwrap_or_default(),
        ),
        ("at".to_owned(), time(trigger.timing.at)),
        ("start_at".to_owned(), time(trigger.timing.start_at)),
        ("end_at".to_owned(), time(trigger.timing.end_at)),
        ("misfire".to_owned(), trigger.timing.misfire.to_string()),
        (
            "misfire_threshold_secs".to_owned(),
            trigger.timing.misfire_threshold_secs.to_string(),
        ),
        ("version".to_owned(), trigger.version.to_string()),
        (
            "max_concurrency".to_owned(),
            trigger.max_concurrency.map(|m| m.to_string()).unwrap_or_default(),
        ),
    ]);
    if trigger.paused {
        values.insert("paused".to_owned(), "on".to_owned());
    }
    values
}

/// A trigger's calendar, jitter and bound on fires as the form shows them.
fn extras_values(extras: &Extras) -> HashMap<String, String> {
    let text = |value: Option<String>| value.unwrap_or_default();
    HashMap::from([
        ("calendar".to_owned(), text(extras.calendar.clone())),
        (
            "calendar_mode".to_owned(),
            text(extras.calendar_mode.map(|mode| mode.as_str().to_owned())),
        ),
        (
            "jitter_secs".to_owned(),
            text(extras.jitter_secs.map(|s| s.to_string())),
        ),
        (
            "max_fires".to_owned(),
            text(extras.max_fires.map(|n| n.to_string())),
        ),
    ])
}

/// A trigger's parameters as the form's textarea shows them (empty: none).
fn params_text(params: &serde_json::Value) -> String {
    match params.as_object() {
        Some(object) if !object.is_empty() => serde_json::to_string_pretty(params).unwrap_or_default(),
        _ => String::new(),
    }
}

fn default_values() -> HashMap<String, String> {
    [
        ("kind", "cron"),
        ("cron", "0 */5 * * * *"),
        ("timezone", "UTC"),
        ("misfire", "fire_once"),
        ("misfire_threshold_secs", "60"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Handles a submitted trigger form of `job`: a preview, or a save that creates a
/// trigger (`trigger_id` None) or edits one.
async fn submit(
    state: &AppState,
    user: &AdminUser,
    job: &JobView,
    trigger_id: Option<i64>,
    form: &FormData,
) -> Result<Response, AdminError> {
    // Checked here, not by a `FormPost`: the job and the trigger are found first, so a
    // form for a missing one answers 404 whatever its token.
    check_csrf(user, form)?;
    let previewing = form.get("action") == Some("preview");
    let current = current_instants(state, user, trigger_id).await;
    // A saved trigger's form keeps its history beside a preview or a refused edit.
    let history = match trigger_id {
        Some(id) => Some(trigger_versions::history(&state.handles, &user.0, id).await?),
        None => None,
    };
    let page = |status, errors, conflict, preview| {
        let view = FormState {
            status,
            job,
            trigger_id,
            values: form.values(),
            errors,
            conflict,
            preview,
            current: current.clone(),
            deliveries: None,
            history: history.clone(),
        };
        render_form(state, user, view)
    };
    let result = if previewing {
        let request = PreviewRequest {
            job_id: Some(Some(job.id)),
            draft: trigger_draft(form),
            ..PreviewRequest::default()
        };
        triggers::preview(&state.handles, &user.0, request)
            .await
            .map(Some)
    } else {
        save(state, user, job.id, trigger_id, form).await.map(|_| None)
    };
    match result {
        Ok(Some(preview)) => page(StatusCode::OK, FieldErrors::new(), None, Some(preview)),
        Ok(None) => Ok(flash::redirect(
            Redirect::to(&format!("/jobs/{}", job.id)),
            &format!("Trigger of job {} saved", job.name),
        )),
        Err(ApiError::Invalid(errors)) => page(StatusCode::UNPROCESSABLE_ENTITY, errors, None, None),
        Err(ApiError::Conflict(message) | ApiError::Stale(message)) => {
            page(StatusCode::CONFLICT, FieldErrors::new(), Some(message), None)
        }
        Err(err) => Err(err.into()),
    }
}

async fn save(
    state: &AppState,
    user: &AdminUser,
    job_id: i64,
    trigger_id: Option<i64>,
    form: &FormData,
) -> Result<Trigger, ApiError> {
    match trigger_id {
        None => triggers::create(&state.handles, &user.0, job_id, trigger_draft(form))
            .await
            .map(|created| created.trigger),
        Some(id) => triggers::update(&state.handles, &user.0, id, trigger_patch(form)).await,
    }
}

/// `GET /jobs/{id}/triggers/new`.
pub async fn new_form(
    State(state): State<AppState>,
    user: AdminUser,
    Id(job_id): Id,
) -> Result<Response, AdminError> {
    let job = jobs::get(&state.handles, &user.0, job_id).await?;
    user.0.require_operator(&job.namespace, "create triggers")?;
    let values = default_values();
    let view = FormState {
        status: StatusCode::OK,
        job: &job,
        trigger_id: None,
        values: &values,
        errors: FieldErrors::new(),
        conflict: None,
        preview: None,
        current: None,
        deliveries: None,
        history: None,
    };
    render_form(&state, &user, view)
}

/// `POST /jobs/{id}/triggers/new`.
pub async fn create(
    State(state): State<AppState>,
    user: AdminUser,
    Id(job_id): Id,
    form: FormData,
) -> Result<Response, AdminError> {
    let job = jobs::get(&state.handles, &user.0, job_id).await?;
    submit(&state, &user, &job, None, &form).await
}

/// `GET /triggers/{id}/edit`.
pub async fn edit_form(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let trigger = triggers::view(&state.handles, triggers::get(&state.handles, &user.0, id).await?).await?;
    let job = jobs::get(&state.handles, &user.0, trigger.trigger.job_id).await?;
    user.0.require_operator(&job.namespace, "edit triggers")?;
    let mut values = values_of(&trigger.trigger);
    values.insert("params".to_owned(), params_text(&trigger.params));
    values.extend(extras_values(&trigger.extras));
    let view = FormState {
        status: StatusCode::OK,
        job: &job,
        trigger_id: Some(id),
        values: &values,
        errors: FieldErrors::new(),
        conflict: None,
        preview: None,
        current: current_instants(&state, &user, Some(id)).await,
        deliveries: latest_deliveries(&state, &user, &trigger.trigger).await?,
        history: Some(trigger_versions::history(&state.handles, &user.0, id).await?),
    };
    render_form(&state, &user, view)
}

/// `POST /triggers/{id}/edit`.
pub async fn update(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    form: FormData,
) -> Result<Response, AdminError> {
    let trigger = triggers::get(&state.handles, &user.0, id).await?;
    let job = jobs::get(&state.handles, &user.0, trigger.job_id).await?;
    submit(&state, &user, &job, Some(id), &form).await
}

/// `POST /triggers/{id}/pause` (`PAUSED`) and `/resume`: then back where the form says
/// (or to its job).
pub async fn set_paused<const PAUSED: bool>(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let trigger = triggers::set_paused(&state.handles, &user.0, id, PAUSED).await?;
    let to = next_or(&form, &format!("/jobs/{}", trigger.job_id));
    let done = flash::paused_or_resumed(PAUSED);
    Ok(flash::redirect(to, &format!("Trigger #{id} {done}")))
}

/// `POST /triggers/{id}/versions/{version}/restore`: back to the trigger's form.
pub async fn restore_version(
    State(state): State<AppState>,
    FormPost(user, Path((id, version)), _): FormPost<Path<(i64, i64)>>,
) -> Result<Response, AdminError> {
    let restored = trigger_versions::restore(&state.handles, &user.0, id, version).await?;
    Ok(flash::restored(
        &format!("/triggers/{id}/edit"),
        version,
        restored.trigger.version,
    ))
}

/// `POST /triggers/{id}/delete`.
pub async fn delete(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let job_id = triggers::delete(&state.handles, &user.0, id).await?;
    let to = next_or(&form, &format!("/jobs/{job_id}"));
    Ok(flash::redirect(to, &format!("Trigger #{id} deleted")))
}
