//! The jobs list, the job page, the job form (create and edit) and the job actions
//! (pause, resume, run now, delete).

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::jobspec::{FollowRedirects, HTTP_METHODS};
use probactr_common::labels;
use probactr_common::model::{JobKind, JobMode, OnExecutorLost, Overlap, RetryBackoff, RetryJitter, Route};
use probactr_common::params_schema::ParamsSchema;
use probactr_common::store::{jobs::JobFilter, runs::history::RunFilter};
use serde::Serialize;
use serde_json::Value;

use super::forms::{
    in_advanced_part, job_draft, job_form_errors, job_patch, schedule_draft, schedule_errors, spec_values,
    SCHEDULE_KINDS,
};
use super::{
    encode_component, flash, next_or, page_and_filter, render, render_status, AdminError, AdminUser,
    FormData, FormPost, Pager,
};
use crate::api::Id;
use crate::command::duration_words;
use crate::error::{ApiError, FieldErrors};
use crate::input::{Page, QueryParams};
use crate::service::jobs::{self, JobView};
use crate::service::{self, Paged};
use crate::state::AppState;

/// `GET /jobs?q=&offset=`.
pub async fn list(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let (page, q) = page_and_filter(&query, |query, _| query.text("q").map(str::to_owned))?;
    let filter = JobFilter {
        q: q.clone(),
        namespaces: user.namespace().map(|name| vec![name.to_owned()]),
        ..JobFilter::default()
    };
    let found: Paged<JobView> = jobs::list(&state.handles, &user.0, &filter, page).await?;
    let pager = Pager::new(page, found.items.len(), found.total);
    let page_base = match &q {
        Some(q) => format!("/jobs?q={}&", encode_component(q)),
        None => "/jobs?".to_owned(),
    };
    let next = format!("{page_base}offset={}", page.offset);
    let ctx = context! { jobs => found, q, page => pager, page_base, next, ..user.layout("jobs") };
    render(&state, "jobs.html", ctx)
}

/// `GET /jobs/{id}`.
pub async fn show(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Html<String>, AdminError> {
    let job = jobs::get(&state.handles, &user.0, id).await?;
    let run_form = RunForm::defaults(&job);
    show_page(&state, &user, job, run_form).await
}

/// The run-now form of a job that declares its parameters: the values shown (by field
/// name, `params.NAME`, as typed) and the server's verdict on each.
#[derive(Debug, Default)]
struct RunForm {
    values: HashMap<String, String>,
    errors: FieldErrors,
}

/// A declared parameter as the run-now form draws it.
#[derive(Debug, Serialize)]
struct RunParam {
    name: String,
    field: String,
    #[serde(rename = "type")]
    kind: &'static str,
    values: Vec<String>,
    min: Option<Value>,
    max: Option<Value>,
    pattern: Option<String>,
    required: bool,
    secret: bool,
}

/// A bound as an HTML attribute takes it (`5`, not `5.0`).
fn bound(bound: Option<f64>) -> Option<Value> {
    bound.map(|b| {
        if b.fract() == 0.0 && b.abs() < 9.0e15 {
            Value::from(b as i64)
        } else {
            Value::from(b)
        }
    })
}

/// The declared parameters of a job, for its run-now form (empty: the free form).
fn run_params(job: &JobView) -> Vec<RunParam> {
    let schema = job
        .params_schema
        .as_ref()
        .and_then(|stored| ParamsSchema::parse(stored, "params_schema").ok().flatten());
    schema
        .map(|schema| {
            schema
                .params
                .into_iter()
                .map(|(name, spec)| RunParam {
                    field: format!("params.{name}"),
                    name,
                    kind: spec.kind.as_str(),
                    values: spec.values,
                    min: bound(spec.min),
                    max: bound(spec.max),
                    pattern: spec.pattern,
                    required: spec.required,
                    secret: spec.secret,
                })
                .collect()
        })
        .unwrap_or_default()
}

impl RunForm {
    /// The form as first shown: each declared default filled in.
    fn defaults(job: &JobView) -> RunForm {
        let schema = job
            .params_schema
            .as_ref()
            .and_then(|stored| ParamsSchema::parse(stored, "params_schema").ok().flatten())
            .unwrap_or_default();
        let values = schema
            .params
            .iter()
            .filter_map(|(name, spec)| {
                let text = match spec.default.as_ref()? {
                    Value::Bool(false) => return None,
                    Value::Bool(true) => "on".to_owned(),
                    other => probactr_common::template::as_text(other),
                };
                Some((format!("params.{name}"), text))
            })
            .collect();
        RunForm {
            values,
            errors: FieldErrors::new(),
        }
    }
}

/// The parameters the typed run-now form gives: each field read as its declared type
/// (a text that is not a number is passed on as text, for the check to name it); empty
/// fields left out, so defaults and `required` apply.
fn params_from_form(job: &JobView, form: &FormData) -> (Value, HashMap<String, String>) {
    let mut params = serde_json::Map::new();
    let mut values = HashMap::new();
    for param in run_params(job) {
        let text = form.get(&param.field).unwrap_or_default().trim().to_owned();
        if param.kind == "boolean" {
            let on = !text.is_empty();
            if on {
                values.insert(param.field.clone(), "on".to_owned());
            }
            params.insert(param.name, Value::Bool(on));
            continue;
        }
        if text.is_empty() {
            continue;
        }
        // A secret typed in is not sent back to the page.
        if !param.secret {
            values.insert(param.field.clone(), text.clone());
        }
        let value = match param.kind {
            "integer" => text
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or(Value::String(text)),
            "number" => text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .unwrap_or(Value::String(text)),
            _ => Value::String(text),
        };
        params.insert(param.name, value);
    }
    (Value::Object(params), values)
}

/// `POST /jobs/{id}/versions/{version}/restore`: back to the job's page.
pub async fn restore_version(
    State(state): State<AppState>,
    FormPost(user, Path((id, version)), _): FormPost<Path<(i64, i64)>>,
) -> Result<Response, AdminError> {
    let job = service::job_versions::restore(&state.handles, &user.0, id, version).await?;
    Ok(flash::restored(&format!("/jobs/{id}"), version, job.version))
}

async fn show_page(
    state: &AppState,
    user: &AdminUser,
    job: JobView,
    run_form: RunForm,
) -> Result<Html<String>, AdminError> {
    let id = job.id;
    let triggers = service::triggers::list_for_job(&state.handles, &user.0, id).await?;
    let filter = RunFilter {
        job_id: Some(id),
        ..RunFilter::default()
    };
    let runs = service::runs::list(&state.handles, &user.0, &filter, Page { limit: 10, offset: 0 })
        .await?
        .items;
    let spec_pretty = serde_json::to_string_pretty(&job.spec).unwrap_or_default();
    let can_edit = user.0.can_edit_job(&job.namespace, job.kind);
    let next = format!("/jobs/{id}");
    let waiting = service::cluster::why_waiting(&state.handles, id).await?;
    let replicas = if job.mode == JobMode::Service {
        jobs::replicas(&state.handles, &user.0, id).await?
    } else {
        Vec::new()
    };
    let children = jobs::children_named(&state.handles, &job).await?;
    let run_params = run_params(&job);
    let (run_values, run_errors) = (run_form.values, run_form.errors);
    let history = service::job_versions::history(&state.handles, &user.0, id).await?;
    let ctx = context! { job, triggers, runs, spec_pretty, can_edit, next, waiting, replicas, children,
    run_params, run_values, run_errors, history, ..user.layout("jobs") };
    render(state, "job.html", ctx)
}

/// The kinds the user may pick.
fn kinds(user: &AdminUser) -> Vec<&'static str> {
    JobKind::ALL
        .iter()
        .filter(|kind| {
            user.2
                .namespaces
                .iter()
                .any(|namespace| user.0.can_edit_job(namespace, **kind))
        })
        .map(|kind| kind.as_str())
        .collect()
}

/// The form's values for an existing job, and a warning when the form cannot show its
/// spec faithfully.
fn values_of(job: &JobView) -> (HashMap<String, String>, Option<String>) {
    let (mut values, warning) = spec_values(job.kind, &job.spec);
    values.extend([
        ("name".to_owned(), job.name.clone()),
        ("description".to_owned(), job.description.clone()),
        ("kind".to_owned(), job.kind.to_string()),
        ("overlap".to_owned(), job.overlap.to_string()),
        ("timeout_secs".to_owned(), job.timeout_secs.to_string()),
        (
            "max_concurrency".to_owned(),
            job.max_concurrency.map(|m| m.to_string()).unwrap_or_default(),
        ),
        (
            "retry.max_attempts".to_owned(),
            job.retry.max_attempts.to_string(),
        ),
        (
            "retry.backoff_secs".to_owned(),
            job.retry.backoff_secs.to_string(),
        ),
        ("retry.backoff".to_owned(), job.retry.backoff.to_string()),
        (
            "retry.max_secs".to_owned(),
            job.retry.max_secs.map(|m| m.to_string()).unwrap_or_default(),
        ),
        ("retry.jitter".to_owned(), job.retry.jitter.to_string()),
        (
            "retry.retry_on.exit_codes".to_owned(),
            codes_text(job.retry.retry_on.as_ref().map(|on| &on.exit_codes)),
        ),
        (
            "retry.retry_on.http_statuses".to_owned(),
            codes_text(job.retry.retry_on.as_ref().map(|on| &on.http_statuses)),
        ),
        ("on_executor_lost".to_owned(), job.on_executor_lost.to_string()),
        ("max_takeovers".to_owned(), job.max_takeovers.to_string()),
        ("stop_grace_secs".to_owned(), job.stop_grace_secs.to_string()),
        (
            "selector".to_owned(),
            labels::describe(&labels::from_json(&job.selector)),
        ),
        ("priority".to_owned(), job.priority.to_string()),
        ("on_success".to_owned(), ids_text(&job.on_success)),
        ("on_failure".to_owned(), ids_text(&job.on_failure)),
        ("on_finish".to_owned(), ids_text(&job.on_finish)),
        ("version".to_owned(), job.version.to_string()),
        (
            "params_schema".to_owned(),
            schema_text(job.params_schema.as_ref()),
        ),
    ]);
    if job.parallel {
        values.insert("parallel".to_owned(), "on".to_owned());
    }
    if job.paused {
        values.insert("paused".to_owned(), "on".to_owned());
    }
    if job.retry.retry_on.as_ref().is_some_and(|on| on.timeouts) {
        values.insert("retry.retry_on.timeouts".to_owned(), "on".to_owned());
    }
    (values, warning)
}

/// Exit codes or HTTP statuses as the form's lists show them.
fn codes_text(codes: Option<&Vec<i32>>) -> String {
    codes
        .map(|codes| codes.iter().map(i32::to_string).collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

/// A job's declared parameters as the form's textarea shows them (empty: none).
fn schema_text(schema: Option<&serde_json::Value>) -> String {
    schema
        .and_then(|schema| serde_json::to_string_pretty(schema).ok())
        .unwrap_or_default()
}

/// Job ids as the form's lists show them.
fn ids_text(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

fn default_values() -> HashMap<String, String> {
    [
        ("kind", "noop"),
        ("overlap", "skip"),
        ("timeout_secs", "3600"),
        ("retry.max_attempts", "1"),
        ("retry.backoff_secs", "10"),
        ("retry.backoff", "exponential"),
        ("retry.jitter", "full"),
        ("on_executor_lost", "rerun"),
        ("max_takeovers", "3"),
        ("stop_grace_secs", "10"),
        ("priority", "0"),
        ("schedule.kind", "none"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// What a form page shows besides its values.
struct FormState<'a> {
    job_id: Option<i64>,
    values: &'a HashMap<String, String>,
    errors: FieldErrors,
    conflict: Option<String>,
    /// Why the form may not show the stored spec as it is.
    warning: Option<String>,
}

/// The names of the environment variables and headers of a job form whose values look
/// like credentials typed in the clear (a name such as TOKEN, PASSWORD, SECRET or KEY, or
/// an Authorization header, with a value that is not a `{{ secrets.NAME }}` reference).
fn plain_credentials(values: &HashMap<String, String>) -> Vec<String> {
    const HINTS: &[&str] = &[
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "SECRET",
        "KEY",
        "AUTHORIZATION",
        "CREDENTIAL",
    ];
    let mut found = Vec::new();
    for (field, separator) in [("spec.env", '='), ("spec.headers", ':')] {
        let text = values.get(field).map(String::as_str).unwrap_or_default();
        for line in text.lines() {
            let Some((name, value)) = line.split_once(separator) else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            let upper = name.to_ascii_uppercase();
            let looks_secret = HINTS.iter().any(|hint| upper.contains(hint));
            if looks_secret && !value.is_empty() && !value.contains("{{") {
                found.push(name.to_owned());
            }
        }
    }
    found
}

fn render_form(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    form: FormState<'_>,
) -> Result<Response, AdminError> {
    // Errors of no visible field (the whole body, the version, …) go in the top notice.
    let (errors, unplaced) = job_form_errors(schedule_errors(form.errors));
    let advanced_open = errors.keys().any(|field| in_advanced_part(field));
    let limits = context! {
        timeout => duration_words(crate::command::job::MAX_TIMEOUT_SECS),
        stop_grace => duration_words(crate::command::job::MAX_STOP_GRACE_SECS),
        backoff => duration_words(crate::command::retry::MAX_BACKOFF_SECS),
        attempts => crate::command::retry::MAX_ATTEMPTS,
        takeovers => crate::command::job::MAX_TAKEOVERS,
    };
    let other_errors: Vec<_> = unplaced
        .into_iter()
        .map(|(field, message)| context! { field, message })
        .collect();
    let overlaps: Vec<&str> = Overlap::ALL.iter().map(|o| o.as_str()).collect();
    let takeover_policies: Vec<&str> = OnExecutorLost::ALL.iter().map(|p| p.as_str()).collect();
    let routes: Vec<&str> = Route::ALL.iter().map(|r| r.as_str()).collect();
    let modes: Vec<&str> = JobMode::ALL.iter().map(|m| m.as_str()).collect();
    let retry_backoffs: Vec<&str> = RetryBackoff::ALL.iter().map(|b| b.as_str()).collect();
    let retry_jitters: Vec<&str> = RetryJitter::ALL.iter().map(|j| j.as_str()).collect();
    let kind_hint = if user.0.access.best_role().is_some_and(|role| role.is_admin()) {
        ""
    } else {
        "only admins define shell and http jobs"
    };
    let credentials = plain_credentials(form.values);
    let ctx = context! {
        job_id => form.job_id, form => form.values, errors, other_errors, advanced_open, limits, schedule_kinds => SCHEDULE_KINDS, conflict => form.conflict, credentials,
        warning => form.warning, kinds => kinds(user),
        create_namespaces => user.namespaces_where(|role| role.can_operate()), overlaps, takeover_policies, routes, modes, retry_backoffs, retry_jitters, kind_hint, methods => HTTP_METHODS, follow_redirects => FollowRedirects::NAMES,
        ..user.layout("jobs")
    };
    render_status(state, status, "job_form.html", ctx)
}

/// Shows a form again after a failed save: field errors inline (422), a forbidden kind
/// on the kind field (403), a lost race as a notice (409).
fn form_failure(
    state: &AppState,
    user: &AdminUser,
    job_id: Option<i64>,
    form: &FormData,
    err: ApiError,
) -> Result<Response, AdminError> {
    let status = err.status_code();
    let (errors, conflict) = match err {
        ApiError::Invalid(errors) => (errors, None),
        ApiError::Forbidden(message) => (FieldErrors::from([("kind".to_owned(), message)]), None),
        ApiError::Conflict(message) | ApiError::Stale(message) => (FieldErrors::new(), Some(message)),
        other => return Err(other.into()),
    };
    render_form(
        state,
        user,
        status,
        FormState {
            job_id,
            values: form.values(),
            errors,
            conflict,
            warning: None,
        },
    )
}

/// `GET /jobs/new`.
pub async fn new_form(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    if user.namespaces_where(|role| role.can_operate()).is_empty() {
        return Err(ApiError::Forbidden("you may create jobs in no namespace".into()).into());
    }
    let values = default_values();
    render_form(
        &state,
        &user,
        StatusCode::OK,
        FormState {
            job_id: None,
            values: &values,
            errors: FieldErrors::new(),
            conflict: None,
            warning: None,
        },
    )
}

/// `POST /jobs/new`.
pub async fn create(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let created = match schedule_draft(&form) {
        Some(trigger) => jobs::create_with_trigger(&state.handles, &user.0, job_draft(&form), trigger).await,
        None => jobs::create(&state.handles, &user.0, job_draft(&form)).await,
    };
    match created {
        Ok(job) => Ok(flash::redirect(
            Redirect::to(&format!("/jobs/{}", job.id)),
            &format!("Job {} created", job.name),
        )),
        Err(err) => form_failure(&state, &user, None, &form, err),
    }
}

/// `GET /jobs/{id}/edit`.
pub async fn edit_form(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let job = jobs::get(&state.handles, &user.0, id).await?;
    user.0.require_job_kind(&job.namespace, job.kind)?;
    let (values, warning) = values_of(&job);
    render_form(
        &state,
        &user,
        StatusCode::OK,
        FormState {
            job_id: Some(id),
            values: &values,
            errors: FieldErrors::new(),
            conflict: None,
            warning,
        },
    )
}

/// `POST /jobs/{id}/edit`.
pub async fn update(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    match jobs::update(&state.handles, &user.0, id, job_patch(&form)).await {
        Ok(job) => Ok(flash::redirect(
            Redirect::to(&format!("/jobs/{}", job.id)),
            &format!("Job {} saved", job.name),
        )),
        Err(err @ ApiError::NotFound { .. }) => Err(err.into()),
        Err(err) => form_failure(&state, &user, Some(id), &form, err),
    }
}

/// `POST /jobs/{id}/pause` (`PAUSED`) and `/resume`: then back where the form says (or
/// to the job).
pub async fn set_paused<const PAUSED: bool>(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let job = jobs::set_paused(&state.handles, &user.0, id, PAUSED).await?;
    let message = format!("Job {} {}", job.name, flash::paused_or_resumed(PAUSED));
    Ok(flash::redirect(next_or(&form, &format!("/jobs/{id}")), &message))
}

/// `POST /jobs/{id}/run`: queues a run and shows it.
pub async fn run_now(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let job = jobs::get(&state.handles, &user.0, id).await?;
    let run_id = if job.params_schema.is_some() {
        // The typed form: a bad value is shown next to its field.
        let (params, values) = params_from_form(&job, &form);
        match jobs::run_now(&state.handles, &user.0, id, &params).await {
            Err(ApiError::Invalid(errors)) => {
                let page = show_page(&state, &user, job, RunForm { values, errors }).await?;
                return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
            }
            other => other?,
        }
    } else {
        let params = jobs::read_params(form.get("params").unwrap_or_default(), false)?;
        jobs::run_now(&state.handles, &user.0, id, &params).await?
    };
    Ok(flash::run_queued(run_id, None))
}

/// `POST /jobs/{id}/delete`: only when the form's `confirm` is the job's name, typed.
/// The history stays readable unless `erase_history` is checked.
pub async fn delete(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let job = jobs::get(&state.handles, &user.0, id).await?;
    if form.get("confirm").map(str::trim) != Some(job.name.as_str()) {
        let message = format!("Job {} was not deleted: type its name to confirm", job.name);
        return Ok(flash::redirect(Redirect::to(&format!("/jobs/{id}")), &message));
    }
    let erase_history = form.checked("erase_history");
    match jobs::delete(&state.handles, &user.0, id, erase_history).await {
        // Still a step of a workflow, or already deleted: say so on the job's page.
        Err(ApiError::Conflict(message)) => {
            return Ok(flash::redirect(Redirect::to(&format!("/jobs/{id}")), &message))
        }
        other => other?,
    }
    let message = if erase_history {
        format!("Job {} deleted with its history", job.name)
    } else {
        format!("Job {} deleted; its history is kept", job.name)
    };
    Ok(flash::redirect(Redirect::to("/jobs"), &message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_typed_in_the_clear_are_named() {
        let values = HashMap::from([
            (
                "spec.env".to_owned(),
                "API_TOKEN=abc\nDB_PASSWORD={{ secrets.db }}\nLANG=C\nAWS_SECRET_ACCESS_KEY=xyz".to_owned(),
            ),
            (
                "spec.headers".to_owned(),
                "Authorization: Bearer x\nAccept: */*".to_owned(),
            ),
        ]);
        assert_eq!(
            plain_credentials(&values),
            ["API_TOKEN", "AWS_SECRET_ACCESS_KEY", "Authorization"]
        );
    }
}
