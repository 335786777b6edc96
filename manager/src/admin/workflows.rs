//! Workflow pages: the list with each workflow's last runs, and a workflow's page with
//! its DAG drawn as SVG on the server, each step coloured by its state in the selected
//! (or latest) workflow run and linked to its run, and run-now with parameters.

use std::collections::HashMap;
use std::fmt::Write;

use axum::extract::State;
use axum::response::{Html, Redirect, Response};
use minijinja::context;
use probactr_common::store::workflows::RunStep;

use super::{check_csrf, flash, render, AdminError, AdminUser, FormData};
use crate::api::Id;
use crate::error::FieldErrors;
use crate::input::{check, QueryParams};
use crate::service::jobs::read_params;
use crate::service::workflows;
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
    let ctx = context! {
        workflow, run, steps, dag, triggers, next, ..user.layout("workflows")
    };
    render(&state, "workflow.html", ctx)
}

/// `POST /workflows/{id}/run`: starts a workflow run with the form's parameters.
pub async fn run_now(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    form: FormData,
) -> Result<Response, AdminError> {
    check_csrf(&user, &form)?;
    let params = read_params(form.get("params").unwrap_or_default(), false)?;
    let run_id = workflows::run_now(&state.handles, &user.0, id, &params).await?;
    Ok(flash::redirect(
        Redirect::to(&format!("/workflows/{id}?run={run_id}")),
        &format!("Workflow run #{run_id} started"),
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
