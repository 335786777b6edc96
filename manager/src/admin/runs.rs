//! The runs list (filtered, paginated, refreshing) and the run page with its output
//! (followed live by `static/app.js` from the API's output stream, and downloadable).

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::model::RunState;

use super::{check_csrf, encode_component, flash, render, AdminError, AdminUser, FormData, Pager};
use crate::api::Id;
use crate::error::FieldErrors;
use crate::input::{check, QueryParams};
use crate::service;
use crate::state::AppState;

/// The query parameters of the runs list's filters, kept across its pages.
const FILTERS: &[&str] = &[
    "job_id",
    "job",
    "state",
    "trigger_id",
    "executor_id",
    "since",
    "until",
    "min_duration_ms",
    "sort",
    "tz",
];

/// `GET /runs?job=&state=&trigger_id=&executor_id=&since=&until=&min_duration_ms=&sort=&offset=`.
pub async fn list(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = service::runs::filter_from(&query, &mut errors);
    check(errors)?;
    let mut filter = filter;
    if filter.namespaces.is_none() {
        filter.namespaces = user.namespace().map(|name| vec![name.to_owned()]);
    }
    let runs = service::runs::list(&state.handles, &user.0, &filter, page).await?;
    let pager = Pager::new(page, runs.items.len(), runs.total);
    let mut page_base = String::from("/runs?");
    let mut given = std::collections::BTreeMap::new();
    for key in FILTERS {
        if let Some(value) = query.text(key) {
            page_base.push_str(&format!("{key}={}&", encode_component(value)));
            given.insert(*key, value.to_owned());
        }
    }
    let states: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let ctx = context! {
        runs => runs.items, page => pager, page_base, states, filters => given,
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
    let run = service::runs::get(&state.handles, &user.0, id).await?;
    let job_name = service::jobs::name_of(&state.handles, &user.0, run.job_id)
        .await?
        .unwrap_or_default();
    let terminal = run.state.is_terminal();
    let waiting = if run.state == RunState::Queued {
        service::cluster::why_run_waits(&state.handles, run.id, run.job_id).await?
    } else {
        None
    };
    let output = service::runs::output(&state.handles, &user.0, id, 0).await?;
    render(
        &state,
        "run.html",
        context! { run, job_name, terminal, waiting, output, ..user.layout("runs") },
    )
}

/// `GET /runs/{id}/output.txt`: the whole output, with its cut markers, as a download.
pub async fn download_output(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let text = service::runs::output_text(&state.handles, &user.0, id).await?;
    let disposition = format!("attachment; filename=\"run-{id}-output.txt\"");
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        text,
    )
        .into_response())
}

/// `POST /runs/{id}/rerun`: the new run's page.
pub async fn rerun(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    form: FormData,
) -> Result<Response, AdminError> {
    check_csrf(&user, &form)?;
    let new = service::runs::rerun(&state.handles, &user.0, id).await?;
    Ok(flash::redirect(
        Redirect::to(&format!("/runs/{new}")),
        &format!("Run #{new} queued: a re-run of #{id}"),
    ))
}

/// `POST /runs/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
    form: FormData,
) -> Result<Response, AdminError> {
    check_csrf(&user, &form)?;
    let cancelled = service::runs::cancel(&state.handles, &user.0, id).await?;
    let message = if cancelled.state == "cancelled" {
        format!("Run #{id} cancelled")
    } else {
        format!("Run #{id}: stop requested")
    };
    Ok(flash::redirect(Redirect::to(&format!("/runs/{id}")), &message))
}
