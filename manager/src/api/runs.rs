//! `/api/v1/runs`: list (newest first, filtered), read, cancel, and the output: read
//! from an offset, or followed as server-sent events until the run ends.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use tokio::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures_util::stream::Stream;
use probactr_common::model::RunState;
use probactr_common::store::runs::history::RunSummary;

use super::bodies::RunQueued;
use super::Id;
use crate::auth::Principal;

use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::runs::{self, Cancelled};
use crate::service::runs::{OutputChunk, OutputPage, RunView};
use crate::service::Paged;
use crate::state::AppState;
use crate::streams::{StreamPermit, RECHECK_EVERY};

/// List runs, newest first or sorted by a column, filtered and paginated (outputs are
/// only flagged).
#[utoipa::path(get, path = "/runs", operation_id = "list_runs", tag = "runs",
    params(
        ("job_id" = Option<i64>, Query, description = "Only this job's runs"),
        ("job" = Option<String>, Query, description = "Only the runs of the job of this name"),
        ("state" = Option<RunState>, Query, description = "Only runs in this state"),
        ("trigger_id" = Option<i64>, Query, description = "Only runs this trigger fired"),
        ("executor_id" = Option<String>, Query, description = "Only runs this executor owns or owned (its id)"),
        ("executor" = Option<String>, Query, description = "Only runs of the executor of this name (`host:pid`), or of every executor of this host"),
        ("since" = Option<String>, Query, description = "Queued at or after this instant (RFC 3339)"),
        ("until" = Option<String>, Query, description = "Queued before this instant (RFC 3339)"),
        ("tz" = Option<String>, Query, description = "The zone (IANA name) of `since` and `until` given without offset (default UTC)"),
        ("min_duration_ms" = Option<i64>, Query, description = "Only runs that ran at least this many milliseconds"),
        ("sort" = Option<String>, Query, description = "The column to sort by: `newest` (the run's id, the default), `state`, `job`, `scheduled`, `duration` or `executor`; runs without a duration or an executor come last"),
        ("dir" = Option<String>, Query, description = "`desc` (the default: newest, longest, last name first) or `asc`"),
        ("namespace" = Option<String>, Query, description = "Only runs of this namespace's jobs (default: every namespace the caller sees)"),
        ("limit" = Option<i64>, Query, description = "Page size, 1–500 (default 50)"),
        ("offset" = Option<i64>, Query, description = "Items to skip"),
    ),
    responses(
        (status = OK, description = "A page of runs", body = Paged<RunSummary>),
        (status = UNPROCESSABLE_ENTITY, description = "A bad filter, named", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<RunSummary>>, ApiError> {
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    let filter = runs::filter_from(&query, &mut errors);
    check(errors)?;
    Ok(Json(runs::list(&state.handles, &who, &filter, page).await?))
}

/// Read a run with its stored output.
#[utoipa::path(get, path = "/runs/{id}", operation_id = "get_run", tag = "runs",
    params(("id" = i64, Path, description = "The run")),
    responses(
        (status = OK, description = "The run", body = RunView),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn get(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(runs::get(&state.handles, &who, id).await?))
}

/// Cancel a queued or running run (a running one is stopped within a second).
#[utoipa::path(post, path = "/runs/{id}/cancel", operation_id = "cancel_run", tag = "runs",
    params(("id" = i64, Path, description = "The run")),
    responses(
        (status = OK, description = "Cancelled, or asked to stop", body = Cancelled),
        (status = CONFLICT, description = "The run already ended", body = ErrorBody),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn cancel(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<Json<Cancelled>, ApiError> {
    Ok(Json(runs::cancel(&state.handles, &who, id).await?))
}

/// Run a run's job again with the parameters that run saw (its trigger's defaults
/// included); the new run records which run it repeats (`rerun_of`).
#[utoipa::path(post, path = "/runs/{id}/rerun", operation_id = "rerun_run", tag = "runs",
    params(("id" = i64, Path, description = "The run to repeat")),
    responses(
        (status = ACCEPTED, description = "Queued; an executor picks it up", body = RunQueued),
        (status = CONFLICT, description = "The job is paused or a service", body = ErrorBody),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn rerun(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<(axum::http::StatusCode, Json<RunQueued>), ApiError> {
    let run_id = runs::rerun(&state.handles, &who, id).await?;
    Ok((axum::http::StatusCode::ACCEPTED, Json(RunQueued { run_id })))
}

/// Retry a failed, timed-out or abandoned run: the next attempt of its chain (same
/// instant, trigger and parameters), whatever the job's retry policy says.
#[utoipa::path(post, path = "/runs/{id}/retry", operation_id = "retry_run", tag = "runs",
    params(("id" = i64, Path, description = "The run to retry: its chain's latest attempt")),
    responses(
        (status = ACCEPTED, description = "Queued; an executor picks it up", body = RunQueued),
        (status = CONFLICT, description = "The run did not fail, a later attempt exists, or the job is paused or a service", body = ErrorBody),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn retry(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
) -> Result<(axum::http::StatusCode, Json<RunQueued>), ApiError> {
    let run_id = runs::retry(&state.handles, &who, id).await?;
    Ok((axum::http::StatusCode::ACCEPTED, Json(RunQueued { run_id })))
}

/// Read a run's output from an offset: what exists so far, the offset to ask for next,
/// and whether the run has ended (then nothing follows). With `full=true`, the whole
/// output in one chunk: from the output archive when it holds the run's, else the head
/// and tail PostgreSQL keeps.
#[utoipa::path(get, path = "/runs/{id}/output", operation_id = "get_run_output", tag = "runs",
    params(
        ("id" = i64, Path, description = "The run"),
        ("offset" = Option<i64>, Query, description = "Byte offset to read from: 0 (the default), or a `next_offset`"),
        ("full" = Option<bool>, Query, description = "`true`: the whole output (from the output archive when it holds it) in one chunk; `offset` must then be 0"),
    ),
    responses(
        (status = OK, description = "The output from the offset", body = OutputPage),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "A bad offset or full, named", body = ErrorBody),
        (status = SERVICE_UNAVAILABLE, description = "`full=true` and the output archive does not answer", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn output(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    query: QueryParams,
) -> Result<Json<OutputPage>, ApiError> {
    let mut errors = FieldErrors::new();
    let offset = query.int("offset", 0, i64::MAX, &mut errors).unwrap_or(0);
    let full = query.flag("full", &mut errors);
    if full && offset != 0 {
        errors.insert("offset".to_owned(), "must be 0 (or absent) with full=true".into());
    }
    check(errors)?;
    if full {
        return Ok(Json(runs::full_output(&state.handles, &who, id).await?));
    }
    let mut page = runs::output(&state.handles, &who, id, offset).await?;
    if !page.ended {
        // Followers (`probactr runs logs --follow`) show how far along it is.
        page.progress = runs::progress(&state.handles, &who, id).await?;
    }
    Ok(Json(page))
}

/// How often a followed run's output is read again while nothing new came.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Follow a run's output as server-sent events: a `chunk` event per chunk (its data an
/// output chunk, its id the offset to resume from), then one `end` event (`{"state",
/// "next_offset"}`) when the run has ended and all its output was sent.
#[utoipa::path(get, path = "/runs/{id}/output/stream", operation_id = "stream_run_output", tag = "runs",
    params(
        ("id" = i64, Path, description = "The run"),
        ("offset" = Option<i64>, Query, description = "Byte offset to start from (default 0, or the `Last-Event-ID` of a reconnecting client)"),
    ),
    responses(
        (status = OK, description = "`text/event-stream`: `chunk` events (data: an output chunk) then an `end` event", content_type = "text/event-stream", body = OutputChunk),
        (status = NOT_FOUND, description = "No such run", body = ErrorBody),
        (status = UNPROCESSABLE_ENTITY, description = "A bad offset, named", body = ErrorBody),
        (status = TOO_MANY_REQUESTS, description = "The caller holds `PROBACTR_SSE_PER_USER` streams already", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn stream(
    State(state): State<AppState>,
    who: Principal,
    Id(id): Id,
    headers: HeaderMap,
    query: QueryParams,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // A run the caller does not see is a 404 before anything else (no stream counted).
    runs::check_visible(&state.handles, &who, id).await?;
    let Some(permit) = state.streams.open(who.user_id) else {
        tracing::info!(
            user.id = who.user_id,
            run.id = id,
            "live output stream refused: too many open"
        );
        return Err(ApiError::TooMany(format!(
            "at most {} live output streams may be open at once per user (PROBACTR_SSE_PER_USER)",
            state.streams.per_user()
        )));
    };
    let mut errors = FieldErrors::new();
    let resumed = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<i64>().ok())
        .filter(|offset| *offset >= 0);
    let offset = query.int("offset", 0, i64::MAX, &mut errors);
    check(errors)?;
    let first = runs::output(&state.handles, &who, id, resumed.or(offset).unwrap_or(0)).await?;
    let now = Instant::now();
    let mut follow = Follow {
        ends_at: now + state.streams.max_age(),
        state,
        run_id: id,
        offset: 0,
        events: VecDeque::new(),
        finished: false,
        holder: Holder {
            principal: who,
            headers,
            checked_at: now,
        },
        _permit: permit,
    };
    follow.take(first);
    let events = futures_util::stream::unfold(follow, |mut follow| async move {
        follow.next().await.map(|event| (Ok(event), follow))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// A stream following one run's output.
struct Follow {
    state: AppState,
    run_id: i64,
    offset: i64,
    events: VecDeque<Event>,
    finished: bool,
    /// After this the stream ends (`PROBACTR_SSE_MAX_SECS`); the client reconnects from
    /// its last event's id.
    ends_at: Instant,
    /// Who opened the stream, asked again every [`RECHECK_EVERY`].
    holder: Holder,
    /// The stream's place in its user's count, given back when the stream is dropped.
    _permit: StreamPermit,
}

/// The caller of a stream, with what it authenticated with.
struct Holder {
    principal: Principal,
    headers: HeaderMap,
    checked_at: Instant,
}

impl Follow {
    /// The next event, reading the output again while there is none; None after `end`,
    /// once the stream is too old, or once its session or token no longer holds.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Some(event);
            }
            if self.finished {
                return None;
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
            if Instant::now() >= self.ends_at {
                tracing::debug!(
                    run.id = self.run_id,
                    "live output stream ended: PROBACTR_SSE_MAX_SECS"
                );
                return None;
            }
            if !self.still_held().await {
                tracing::info!(
                    run.id = self.run_id,
                    user.id = self.holder.principal.user_id,
                    "live output stream ended: its session or token ended"
                );
                self.finished = true;
                return Some(Event::default().event("error").data("the session or token ended"));
            }
            match runs::output(
                &self.state.handles,
                &self.holder.principal,
                self.run_id,
                self.offset,
            )
            .await
            {
                Ok(page) => self.take(page),
                Err(err) => {
                    tracing::warn!(run.id = self.run_id, error = %err, "cannot read a followed run's output");
                    self.events
                        .push_back(Event::default().event("error").data(err.to_string()));
                    self.finished = true;
                }
            }
        }
    }

    /// Whether the stream's session or token still holds, asked every [`RECHECK_EVERY`]
    /// (an unanswered question keeps the stream: PostgreSQL being away is no logout).
    async fn still_held(&mut self) -> bool {
        let holder = &mut self.holder;
        if holder.checked_at.elapsed() < RECHECK_EVERY {
            return true;
        }
        holder.checked_at = Instant::now();
        match crate::auth::still_valid(&self.state.handles.pool, &holder.principal, &holder.headers).await {
            Ok(Some(now)) => {
                // Roles changed meanwhile apply: a run no longer visible ends the stream.
                holder.principal = now;
                true
            }
            Ok(None) => false,
            Err(err) => {
                tracing::warn!(run.id = self.run_id, error = %err, "cannot check a stream's session or token");
                true
            }
        }
    }

    /// Queues the events of a page read.
    fn take(&mut self, page: OutputPage) {
        // A chunk's id is where a reconnecting client resumes: where the next one starts.
        let resume_points: Vec<i64> = page
            .chunks
            .iter()
            .skip(1)
            .map(|chunk| chunk.offset)
            .chain([page.next_offset])
            .collect();
        for (chunk, resume_at) in page.chunks.iter().zip(resume_points) {
            self.events.push_back(chunk_event(chunk, resume_at));
        }
        self.offset = page.next_offset;
        if page.ended {
            let end = serde_json::json!({"state": page.state, "next_offset": page.next_offset});
            self.events
                .push_back(Event::default().event("end").data(end.to_string()));
            self.finished = true;
        }
    }
}

fn chunk_event(chunk: &OutputChunk, resume_at: i64) -> Event {
    let data = serde_json::json!({"offset": chunk.offset, "stream": chunk.stream, "text": chunk.text});
    Event::default()
        .event("chunk")
        .id(resume_at.to_string())
        .data(data.to_string())
}
