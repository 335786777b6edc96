//! The runs list (filtered by names with suggestions, sorted by a column, paginated,
//! refreshing) and the run page with its output (followed live by `static/app.js` from
//! the API's output stream, and downloadable).

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::model::{ProcessRole, RunState};
use probactr_common::store;
use probactr_common::store::runs::history::{RunFilter, RunSort, SortDir};
use serde::Serialize;

use super::{encode_component, flash, page_and_filter, render, AdminError, AdminUser, FormPost, Pager};
use crate::api::Id;
use crate::input::QueryParams;
use crate::service;
use crate::state::AppState;

/// The query parameters of the runs list's filters and page size, kept across its pages
/// and sorts.
const KEPT: &[&str] = &[
    "job_id",
    "job",
    "state",
    "trigger_id",
    "executor_id",
    "executor",
    "since",
    "until",
    "min_duration_ms",
    "limit",
    "tz",
];

/// A sortable column's header: the link that sorts by it (the other way when it is
/// the current sort) and its `aria-sort`.
#[derive(Serialize)]
struct SortLink {
    href: String,
    aria_sort: &'static str,
}

/// The header links of every sortable column, by column name; `base` ends with `?` or `&`.
fn sort_links(base: &str, filter: &RunFilter) -> std::collections::BTreeMap<&'static str, SortLink> {
    RunSort::ALL
        .into_iter()
        .map(|column| {
            let current = column == filter.sort;
            let dir = match (current, filter.dir) {
                (true, SortDir::Desc) => SortDir::Asc,
                _ => SortDir::Desc,
            };
            let aria_sort = match (current, filter.dir) {
                (false, _) => "none",
                (true, SortDir::Asc) => "ascending",
                (true, SortDir::Desc) => "descending",
            };
            let href = format!("{base}sort={}&dir={}", column.as_str(), dir.as_str());
            (column.as_str(), SortLink { href, aria_sort })
        })
        .collect()
}

/// An executor's name as people read it (the runs list's `executor` filter takes it).
fn executor_name(host: &str, pid: i32) -> String {
    format!("{host}:{pid}")
}

/// The names the filters suggest: the jobs the user sees and the registered executors.
async fn suggestions(state: &AppState, user: &AdminUser) -> Result<(Vec<String>, Vec<String>), AdminError> {
    let jobs = store::jobs::names(&state.handles.pool, user.listing().as_deref())
        .await?
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    let executors = service::cluster::processes(&state.handles, &user.0, ProcessRole::Executor)
        .await?
        .into_iter()
        .map(|p| executor_name(&p.host, p.pid))
        .collect();
    Ok((jobs, executors))
}

/// `GET /runs?job=&state=&trigger_id=&executor=&executor_id=&since=&until=&min_duration_ms=&sort=&dir=&offset=`.
pub async fn list(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let (page, mut filter) = page_and_filter(&query, service::runs::filter_from)?;
    if filter.namespaces.is_none() {
        filter.namespaces = user.namespace().map(|name| vec![name.to_owned()]);
    }
    let runs = service::runs::list(&state.handles, &user.0, &filter, page).await?;
    let pager = Pager::new(page, runs.items.len(), runs.total);
    let mut filter_base = String::from("/runs?");
    let mut given = std::collections::BTreeMap::new();
    for key in KEPT {
        if let Some(value) = query.text(key) {
            filter_base.push_str(&format!("{key}={}&", encode_component(value)));
            given.insert(*key, value.to_owned());
        }
    }
    let sorts = sort_links(&filter_base, &filter);
    let page_base = format!(
        "{filter_base}sort={}&dir={}&",
        filter.sort.as_str(),
        filter.dir.as_str()
    );
    let (job_names, executor_names) = suggestions(&state, &user).await?;
    let states: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let ctx = context! {
        runs => runs.items, page => pager, page_base, states, filters => given,
        sort => filter.sort.as_str(), dir => filter.dir.as_str(), sorts,
        job_names, executor_names,
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
    let executor_name = match run.executor_id {
        Some(executor) => store::processes::get(&state.handles.pool, executor)
            .await?
            .map(|p| executor_name(&p.host, p.pid)),
        None => None,
    };
    // A running run's duration so far; an ended one's whole.
    let duration_ms = run
        .started_at
        .map(|started| (run.finished_at.unwrap_or_else(chrono::Utc::now) - started).num_milliseconds());
    render(
        &state,
        "run.html",
        context! {
            run, job_name, terminal, waiting, output, executor_name, duration_ms,
            ..user.layout("runs")
        },
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
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Response, AdminError> {
    let new = service::runs::rerun(&state.handles, &user.0, id).await?;
    Ok(queued_again(new, id, "a re-run"))
}

/// To the page of run `new`, queued from run `id`'s page, saying how.
fn queued_again(new: i64, id: i64, how: &str) -> Response {
    flash::run_queued(new, Some(format!("{how} of #{id}")))
}

/// `POST /runs/{id}/retry`: the new attempt's page.
pub async fn retry(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Response, AdminError> {
    let new = service::runs::retry(&state.handles, &user.0, id).await?;
    Ok(queued_again(new, id, "a retry"))
}

/// `POST /runs/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Response, AdminError> {
    let cancelled = service::runs::cancel(&state.handles, &user.0, id).await?;
    let message = if cancelled.state == "cancelled" {
        format!("Run #{id} cancelled")
    } else {
        format!("Run #{id}: stop requested")
    };
    Ok(flash::redirect(Redirect::to(&format!("/runs/{id}")), &message))
}
