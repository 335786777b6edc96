//! The runs list (filtered, paginated, refreshing) and the run page with its output.

use axum::extract::State;
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::model::RunState;
use probactr_common::store::runs::history::RunFilter;

use super::{check_csrf, encode_component, render, AdminError, AdminUser, FormData, Pager};
use crate::api::Id;
use crate::error::FieldErrors;
use crate::input::{check, QueryParams};
use crate::service;
use crate::state::AppState;

/// `GET /runs?job_id=&state=&offset=`.
pub async fn list(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = RunFilter {
        job_id: query.int("job_id", 1, i64::MAX, &mut errors),
        state: query.choice::<RunState>("state", &mut errors),
        since: None,
        until: None,
    };
    check(errors)?;
    let runs = service::runs::list(&state, &filter, page).await?;
    let pager = Pager::new(page, runs.items.len(), runs.total);
    let mut page_base = String::from("/runs?");
    if let Some(job_id) = filter.job_id {
        page_base.push_str(&format!("job_id={job_id}&"));
    }
    if let Some(run_state) = filter.state {
        page_base.push_str(&format!("state={}&", encode_component(run_state.as_str())));
    }
    let states: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let ctx = context! {
        runs => runs.items, page => pager, page_base, states,
        job_id => filter.job_id, state => filter.state.map(|s| s.as_str()),
        ..user.layout("runs")
    };
    render(&state, "runs.html", ctx)
}

/// `GET /runs/{id}`.
pub async fn show(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Html<String>, AdminError> {
    let run = service::runs::get(&state, id).await?;
    let job_name = service::jobs::name_of(&state, run.job_id)
        .await?
        .unwrap_or_default();
    let terminal = run.state.is_terminal();
    let waiting = if run.state == RunState::Queued {
        service::cluster::why_waiting(&state, run.job_id).await?
    } else {
        None
    };
    render(
        &state,
        "run.html",
        context! { run, job_name, terminal, waiting, ..user.layout("runs") },
    )
}

/// `POST /runs/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    form: FormData,
) -> Result<Response, AdminError> {
    check_csrf(&user, &form)?;
    service::runs::cancel(&state, &user.0, id).await?;
    Ok(Redirect::to(&format!("/runs/{id}")).into_response())
}
