//! Workflow pages: the list with each workflow's last runs, and a workflow's page with
//! its DAG drawn as SVG on the server, each step coloured by its state in the selected
//! (or latest) workflow run and linked to its run, and run-now with parameters; creating
//! and editing workflows ([`super::workflow_form`]), pausing them, cancelling a workflow
//! run, retrying a step, adding triggers, and restoring a kept version. Every change goes
//! through the API's service functions, checked as the API checks it.

use std::collections::HashMap;
use std::fmt::Write;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, Redirect, Response};
use minijinja::context;
use probactr_common::model::TriggerTiming;
use probactr_common::store::jobs::JobFilter;
use probactr_common::store::workflows::RunStep;

use super::forms::trigger_draft;
use super::workflow_form::{placed, StepRow, WorkflowForm};
use super::{flash, render, render_status, AdminError, AdminUser, FormData, FormPost};
use crate::api::Id;
use crate::command::workflow::WHEN;
use crate::error::{ApiError, FieldErrors};
use crate::input::{check, Page, QueryParams};
use crate::service::jobs::read_params;
use crate::service::{self, workflow_versions, workflows};
use crate::state::AppState;

/// `GET /workflows`.
pub async fn list(State(state): State<AppState>, user: AdminUser) -> Result<Html<String>, AdminError> {
    let workflows = workflows::list(&state.handles, user.listing().as_deref()).await?;
    render(
        &state,
        "workflows.html",
        context! { workflows, ..user.layout("workflows") },
    )
}

/// `GET /workflows/{id}?run=ID`: the DAG with the states of run ID (default: the latest).
pub async fn show(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let mut errors = FieldErrors::new();
    let selected = query.int("run", 1, i64::MAX, &mut errors);
    check(errors)?;
    let workflow = workflows::get(&state.handles, &user.0, id).await?;
    let run_id = selected.or_else(|| workflow.last_runs.first().map(|run| run.id));
    let run = match run_id {
        Some(run_id) => Some(workflows::get_run(&state.handles, &user.0, run_id).await?)
            .filter(|run| run.run.workflow_id == id),
        None => None,
    };
    let steps: Vec<RunStep> = match &run {
        Some(run) => run.steps.clone(),
        None => workflow
            .steps
            .iter()
            .map(|step| RunStep {
                name: step.name.clone(),
                job_id: step.job_id,
                depends_on: step.depends_on.clone(),
                when: step.when.clone(),
                state: "pending".to_owned(),
                run_id: None,
                run_ids: Vec::new(),
                output: None,
                started_at: None,
                finished_at: None,
            })
            .collect(),
    };
    let dag = dag_svg(&steps, run.is_some());
    let triggers = workflows::triggers(&state.handles, &user.0, id).await?;
    let next = format!("/workflows/{id}");
    let ids: Vec<i64> = steps.iter().map(|step| step.job_id).collect();
    let names = workflows::job_names(&state.handles, &ids).await?;
    let step_jobs: Vec<String> = ids
        .iter()
        .map(|id| {
            names
                .get(id)
                .cloned()
                .unwrap_or_else(|| format!("job {id} (deleted)"))
        })
        .collect();
    let history = workflow_versions::history(&state.handles, &user.0, id).await?;
    let can_operate = can_operate(&user, &workflow.workflow.namespace);
    let ctx = context! {
        workflow, run, steps, step_jobs, dag, triggers, next, history, can_operate, ..user.layout("workflows")
    };
    render(&state, "workflow.html", ctx)
}

/// `POST /workflows/{id}/run`: starts a workflow run with the form's parameters.
pub async fn run_now(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let params = read_params(form.get("params").unwrap_or_default(), false)?;
    let run_id = workflows::run_now(&state.handles, &user.0, id, &params).await?;
    Ok(flash::redirect(
        Redirect::to(&format!("/workflows/{id}?run={run_id}")),
        &format!("Workflow run #{run_id} started"),
    ))
}

/// Whether `user` may change the workflows of `namespace`.
fn can_operate(user: &AdminUser, namespace: &str) -> bool {
    user.0
        .access
        .role_in(namespace)
        .is_some_and(|role| role.can_operate())
}

/// What a workflow form page shows besides the form.
struct FormPage {
    workflow_id: Option<i64>,
    errors: FieldErrors,
    conflict: Option<String>,
}

/// The workflow form, with `errors` next to their fields and in the summary.
async fn render_form(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    form: &WorkflowForm,
    page: FormPage,
) -> Result<Response, AdminError> {
    let namespaces = match page.workflow_id {
        Some(_) => vec![form.namespace.clone()],
        None => user.namespaces_where(|role| role.can_operate()),
    };
    let filter = JobFilter {
        namespaces: Some(namespaces.clone()),
        ..JobFilter::default()
    };
    let jobs = service::jobs::list(
        &state.handles,
        &user.0,
        &filter,
        Page {
            limit: 1000,
            offset: 0,
        },
    )
    .await?
    .items;
    let jobs: Vec<_> = jobs
        .iter()
        .map(|job| context! { id => job.id.to_string(), name => job.name, namespace => job.namespace })
        .collect();
    let drawn: Vec<RunStep> = form
        .steps
        .iter()
        .filter(|row| !row.name.trim().is_empty())
        .map(drawn_step)
        .collect();
    let dag = dag_svg(&drawn, false);
    let (errors, listed) = placed(&page.errors);
    let ctx = context! {
        workflow_id => page.workflow_id, form, errors, listed, conflict => page.conflict, jobs, namespaces,
        whens => WHEN, dag, ..user.layout("workflows")
    };
    render_status(state, status, "workflow_form.html", ctx)
}

/// A row of the form as the drawing of the DAG takes it.
fn drawn_step(row: &StepRow) -> RunStep {
    RunStep {
        name: row.name.trim().to_owned(),
        job_id: row.job_id.trim().parse().unwrap_or_default(),
        depends_on: row
            .depends_on
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
        when: row.when.clone(),
        state: "defined".to_owned(),
        run_id: None,
        run_ids: Vec::new(),
        output: None,
        started_at: None,
        finished_at: None,
    }
}

/// A failed save shown again: each bad field named (422); a refusal or a lost race as a
/// notice above the form.
async fn form_failure(
    state: &AppState,
    user: &AdminUser,
    form: &WorkflowForm,
    workflow_id: Option<i64>,
    err: ApiError,
) -> Result<Response, AdminError> {
    let status = err.status_code();
    let (errors, conflict) = match err {
        ApiError::Invalid(errors) => (errors, None),
        ApiError::Forbidden(message)
        | ApiError::Conflict(message)
        | ApiError::Stale(message)
        | ApiError::PreconditionFailed(message) => (FieldErrors::new(), Some(message)),
        other => return Err(other.into()),
    };
    let page = FormPage {
        workflow_id,
        errors,
        conflict,
    };
    render_form(state, user, status, form, page).await
}

/// A form page without errors.
fn fresh(workflow_id: Option<i64>) -> FormPage {
    FormPage {
        workflow_id,
        errors: FieldErrors::new(),
        conflict: None,
    }
}

/// `GET /workflows/new`.
pub async fn new_form(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    let namespaces = user.namespaces_where(|role| role.can_operate());
    let Some(first) = namespaces.first() else {
        return Err(ApiError::Forbidden("you may create workflows in no namespace".into()).into());
    };
    let form = WorkflowForm {
        namespace: user.namespace().unwrap_or(first.as_str()).to_owned(),
        ..WorkflowForm::default()
    }
    .with_blank_row()
    .with_blank_row();
    render_form(&state, &user, StatusCode::OK, &form, fresh(None)).await
}

/// `POST /workflows/new`: creates the workflow, or shows the form again with every error
/// (`action=add_step`: again with one more row, without JavaScript).
pub async fn create(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let typed = WorkflowForm::read(&form);
    if form.get("action") == Some("add_step") {
        let typed = typed.with_blank_row();
        return render_form(&state, &user, StatusCode::OK, &typed, fresh(None)).await;
    }
    match workflows::create(&state.handles, &user.0, typed.body()).await {
        Ok(created) => Ok(flash::redirect(
            Redirect::to(&format!("/workflows/{}", created.workflow.id)),
            &format!("Workflow {} created", created.workflow.name),
        )),
        Err(err) => form_failure(&state, &user, &typed.with_blank_row(), None, err).await,
    }
}

/// `GET /workflows/{id}/edit`.
pub async fn edit_form(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let current = workflows::get(&state.handles, &user.0, id).await?;
    user.0
        .require_operator(&current.workflow.namespace, "edit workflows")?;
    let form = WorkflowForm {
        name: current.workflow.name.clone(),
        description: current.workflow.description.clone(),
        namespace: current.workflow.namespace.clone(),
        params_schema: current
            .workflow
            .params_schema
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        version: current.workflow.version.to_string(),
        steps: current.steps.iter().map(StepRow::of).collect(),
    }
    .with_blank_row();
    render_form(&state, &user, StatusCode::OK, &form, fresh(Some(id))).await
}

/// `POST /workflows/{id}/edit`: replaces the definition read at the form's version.
pub async fn update(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let current = workflows::get(&state.handles, &user.0, id).await?;
    let mut typed = WorkflowForm::read(&form);
    // Shown again in its namespace; a workflow never moves (the body does not say one).
    typed.namespace = current.workflow.namespace;
    if form.get("action") == Some("add_step") {
        let typed = typed.with_blank_row();
        return render_form(&state, &user, StatusCode::OK, &typed, fresh(Some(id))).await;
    }
    let mut body = typed.body();
    if let Some(fields) = body.as_object_mut() {
        fields.remove("namespace");
    }
    match workflows::replace(&state.handles, &user.0, id, body, typed.expected_version()).await {
        Ok(saved) => Ok(flash::redirect(
            Redirect::to(&format!("/workflows/{id}")),
            &format!(
                "Workflow {} saved as version {}",
                saved.workflow.name, saved.workflow.version
            ),
        )),
        Err(err) => form_failure(&state, &user, &typed.with_blank_row(), Some(id), err).await,
    }
}

/// `POST /workflows/{id}/pause` (`PAUSED`) and `/resume`.
pub async fn set_paused<const PAUSED: bool>(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Response, AdminError> {
    let workflow = workflows::set_paused(&state.handles, &user.0, id, PAUSED).await?;
    let done = flash::paused_or_resumed(PAUSED);
    Ok(flash::redirect(
        Redirect::to(&format!("/workflows/{id}")),
        &format!("Workflow {} {done}", workflow.workflow.name),
    ))
}

/// `POST /workflow-runs/{id}/cancel`.
pub async fn cancel_run(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Response, AdminError> {
    let run = workflows::cancel_run(&state.handles, &user.0, id).await?;
    Ok(flash::redirect(
        Redirect::to(&format!("/workflows/{}?run={id}", run.run.workflow_id)),
        &format!("Workflow run #{id} cancelled"),
    ))
}

/// `POST /workflow-runs/{id}/steps/{name}/retry`.
pub async fn retry_step(
    State(state): State<AppState>,
    FormPost(user, Path((id, step)), _): FormPost<Path<(i64, String)>>,
) -> Result<Response, AdminError> {
    let run_id = workflows::retry_step(&state.handles, &user.0, id, &step).await?;
    let run = workflows::get_run(&state.handles, &user.0, id).await?;
    Ok(flash::redirect(
        Redirect::to(&format!("/workflows/{}?run={id}", run.run.workflow_id)),
        &format!("Step {step} retried as run #{run_id}"),
    ))
}

/// `POST /workflows/{id}/versions/{version}/restore`.
pub async fn restore_version(
    State(state): State<AppState>,
    FormPost(user, Path((id, version)), _): FormPost<Path<(i64, i64)>>,
) -> Result<Response, AdminError> {
    let restored = workflow_versions::restore(&state.handles, &user.0, id, version).await?;
    Ok(flash::restored(
        &format!("/workflows/{id}"),
        version,
        restored.workflow.version,
    ))
}

/// `GET /workflows/{id}/triggers/new`.
pub async fn new_trigger(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let workflow = workflows::get(&state.handles, &user.0, id).await?;
    user.0
        .require_operator(&workflow.workflow.namespace, "create workflow triggers")?;
    let form = FormData::default();
    render_trigger_form(
        &state,
        &user,
        StatusCode::OK,
        &workflow.workflow,
        &form,
        FieldErrors::new(),
    )
}

/// `POST /workflows/{id}/triggers/new`: the trigger form of a job, without what applies
/// to job triggers only.
pub async fn create_trigger(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let workflow = workflows::get(&state.handles, &user.0, id).await?;
    let mut draft = trigger_draft(&form);
    draft.extras = Default::default();
    draft.max_concurrency = None;
    match workflows::create_trigger(&state.handles, &user.0, id, draft).await {
        Ok(created) => Ok(flash::redirect(
            Redirect::to(&format!("/workflows/{id}")),
            &format!("Trigger #{} added", created.id),
        )),
        Err(ApiError::Invalid(errors)) => render_trigger_form(
            &state,
            &user,
            StatusCode::UNPROCESSABLE_ENTITY,
            &workflow.workflow,
            &form,
            errors,
        ),
        Err(other) => Err(other.into()),
    }
}

fn render_trigger_form(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    workflow: &probactr_common::store::workflows::Workflow,
    form: &FormData,
    errors: FieldErrors,
) -> Result<Response, AdminError> {
    let (errors, listed) = placed_trigger_errors(errors);
    let ctx = context! {
        workflow, form => form.values(), errors, listed, kinds => ["cron", "interval", "once"],
        ..user.layout("workflows")
    };
    render_status(state, status, "workflow_trigger_form.html", ctx)
}

/// The trigger form's errors: each by its field, and listed (a field the form does not
/// show is listed only).
fn placed_trigger_errors(errors: FieldErrors) -> (FieldErrors, Vec<minijinja::Value>) {
    let listed = errors
        .iter()
        .map(|(field, message)| {
            let own = field.split(['.', '[']).next().unwrap_or(field);
            let anchor = (TriggerTiming::schedule_fields().contains(&own) || own == "params")
                .then(|| format!("f-{own}"));
            context! { field, message, anchor }
        })
        .collect();
    (errors, listed)
}

/// `POST /workflows/{id}/triggers/{trigger_id}/delete`.
pub async fn delete_trigger(
    State(state): State<AppState>,
    FormPost(user, Path((id, trigger_id)), _): FormPost<Path<(i64, i64)>>,
) -> Result<Response, AdminError> {
    workflows::delete_trigger(&state.handles, &user.0, id, trigger_id).await?;
    Ok(flash::redirect(
        Redirect::to(&format!("/workflows/{id}")),
        &format!("Trigger #{trigger_id} deleted"),
    ))
}

const NODE_WIDTH: i64 = 160;
const NODE_HEIGHT: i64 = 44;
const COLUMN: i64 = 210;
const ROW: i64 = 64;
const MARGIN: i64 = 12;

/// Each step's column: one more than the deepest step it depends on.
fn depths(steps: &[RunStep]) -> HashMap<&str, i64> {
    let mut depth: HashMap<&str, i64> = HashMap::new();
    // Steps form a DAG of at most a few hundred: relaxing until nothing moves is enough.
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds <= steps.len() {
        changed = false;
        rounds += 1;
        for step in steps {
            let wanted = step
                .depends_on
                .iter()
                .filter_map(|up| depth.get(up.as_str()).map(|d| d + 1))
                .max()
                .unwrap_or(0);
            if depth.get(step.name.as_str()) != Some(&wanted) {
                depth.insert(&step.name, wanted);
                changed = true;
            }
        }
    }
    depth
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The DAG as an SVG drawing: steps in columns by depth, an arrow per dependency, each
/// step coloured by its state (`with_states`) and linked to its run.
pub fn dag_svg(steps: &[RunStep], with_states: bool) -> String {
    let depth = depths(steps);
    let mut rows: HashMap<i64, i64> = HashMap::new();
    let mut place: HashMap<&str, (i64, i64)> = HashMap::new();
    for step in steps {
        let column = depth.get(step.name.as_str()).copied().unwrap_or(0);
        let row = rows.entry(column).or_insert(0);
        place.insert(&step.name, (MARGIN + column * COLUMN, MARGIN + *row * ROW));
        *row += 1;
    }
    let width = place
        .values()
        .map(|(x, _)| x + NODE_WIDTH + MARGIN)
        .max()
        .unwrap_or(MARGIN);
    let height = place
        .values()
        .map(|(_, y)| y + NODE_HEIGHT + MARGIN)
        .max()
        .unwrap_or(MARGIN);
    let mut svg = format!(
        r#"<svg class="dag" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="workflow steps">"#
    );
    svg.push_str(r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>"#);
    for step in steps {
        let Some(&(x, y)) = place.get(step.name.as_str()) else {
            continue;
        };
        for up in &step.depends_on {
            if let Some(&(ux, uy)) = place.get(up.as_str()) {
                let _ = write!(
                    svg,
                    r#"<line class="edge" x1="{}" y1="{}" x2="{x}" y2="{}" marker-end="url(#arrow)"/>"#,
                    ux + NODE_WIDTH,
                    uy + NODE_HEIGHT / 2,
                    y + NODE_HEIGHT / 2
                );
            }
        }
    }
    for step in steps {
        let Some(&(x, y)) = place.get(step.name.as_str()) else {
            continue;
        };
        let state = if with_states {
            step.state.as_str()
        } else {
            "defined"
        };
        let name = escape(&step.name);
        let node = format!(
            r#"<g class="step state-{state}" data-step="{name}" data-state="{state}"><rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="6"/><text x="{}" y="{}">{name}</text><text class="state" x="{}" y="{}">{}</text></g>"#,
            x + 10,
            y + 18,
            x + 10,
            y + 35,
            escape(&state.replace('_', " ")),
        );
        match step.run_id.filter(|_| with_states) {
            Some(run) => {
                let _ = write!(svg, r#"<a href="/runs/{run}">{node}</a>"#);
            }
            None => svg.push_str(&node),
        }
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, depends_on: &[&str], state: &str, run_id: Option<i64>) -> RunStep {
        RunStep {
            name: name.to_owned(),
            job_id: 1,
            depends_on: depends_on.iter().map(|s| (*s).to_owned()).collect(),
            when: "all_success".to_owned(),
            state: state.to_owned(),
            run_id,
            run_ids: run_id.into_iter().collect(),
            output: None,
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn a_diamond_is_drawn_in_columns_with_states_and_links() {
        let steps = [
            step("A", &[], "succeeded", Some(1)),
            step("B", &["A"], "running", Some(2)),
            step("C", &["A"], "failed", Some(3)),
            step("D", &["B", "C"], "skipped", None),
        ];
        let depth = depths(&steps);
        assert_eq!((depth["A"], depth["B"], depth["C"], depth["D"]), (0, 1, 1, 2));
        let svg = dag_svg(&steps, true);
        assert_eq!(svg.matches("<line").count(), 4, "{svg}");
        assert!(
            svg.contains(r#"<a href="/runs/3"><g class="step state-failed" data-step="C""#),
            "{svg}"
        );
        assert!(svg.contains(r#"data-step="D" data-state="skipped""#), "{svg}");
        assert!(!svg.contains(r#"href="/runs/4""#));
    }
}
