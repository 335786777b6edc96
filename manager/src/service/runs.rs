//! Runs: list, read, read the output from an offset, cancel.

use axum::http::StatusCode;
use probactr_common::archive::ArchiveError;
use probactr_common::model::{Run, RunState};
use probactr_common::params_schema::masked;
use probactr_common::store;
use probactr_common::store::audit::Change;
use probactr_common::store::checkpoints::CheckpointInfo;
use probactr_common::store::runs::history::{RunFilter, RunSort, RunSummary, SortDir};
use serde::Serialize;
use serde_json::json;

use super::Handles;
use super::Paged;
use crate::auth::Principal;
use crate::error::{ApiError, FieldErrors};
use crate::input::{Page, QueryParams};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A run as the API shows it: everything but the Redis lock token.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunView {
    /// Id.
    pub id: i64,
    /// Its job.
    pub job_id: i64,
    /// Its job's namespace.
    pub namespace: String,
    /// The trigger that fired it.
    pub trigger_id: Option<i64>,
    /// The instant it was scheduled for.
    pub scheduled_at: DateTime<Utc>,
    /// Attempt number in its chain.
    pub attempt: i32,
    /// The chain's first attempt.
    pub first_run_id: Option<i64>,
    /// Where it is in its life.
    pub state: RunState,
    /// Why.
    pub reason: Option<String>,
    /// The executor that owns or owned it.
    pub executor_id: Option<Uuid>,
    /// Its fencing token.
    pub fence: Option<i64>,
    /// When it was queued.
    pub queued_at: DateTime<Utc>,
    /// When an executor claimed it.
    pub claimed_at: Option<DateTime<Utc>>,
    /// When it started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// When a cancel was asked for.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// A shell job's exit code.
    pub exit_code: Option<i32>,
    /// An HTTP job's status.
    pub http_status: Option<i32>,
    /// What went wrong.
    pub error: Option<String>,
    /// The stored tail of the output.
    pub output: Option<String>,
    /// Whether the output lost its beginning.
    pub output_truncated: bool,
    /// The last checkpoint a shell job of its instant saved (this attempt or an earlier
    /// one): its size and age; null when none was saved.
    pub checkpoint: Option<CheckpointInfo>,
    /// Its parameters: its trigger's defaults merged under its own (`{}` for none),
    /// secret ones as `***`.
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// What it wrote to `PROBACTR_OUTPUT_FILE`, when it wrote a JSON object.
    #[schema(value_type = Option<Object>)]
    pub step_output: Option<serde_json::Value>,
    /// Its index among the runs of its instant (route broadcast or shard).
    pub shard: Option<i32>,
    /// How many runs its instant made.
    pub shard_total: Option<i32>,
    /// The executor it is pinned to (a broadcast's; a shard's while that executor lives).
    pub pinned_to: Option<uuid::Uuid>,
    /// A service instance's slot.
    pub replica: Option<i32>,
    /// The run it re-runs (started by hand with that run's parameters), if any.
    pub rerun_of: Option<i64>,
    /// While it runs: what its job last reported (`PROBACTR_PROGRESS_FILE`) and when it
    /// should end, from its job's previous durations; null once it ended (and in lists).
    pub progress: Option<RunProgress>,
}

/// A running run's progress and estimated end.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunProgress {
    /// How far along (0 to 100), as the job last said; null when it did not say.
    pub percent: Option<f32>,
    /// What the job last said it is doing (empty when it said nothing).
    pub message: String,
    /// When the executor read the job's last report; null without one.
    pub reported_at: Option<DateTime<Utc>>,
    /// Its start plus the median duration of its job's runs of the last 30 days; null
    /// without such runs.
    pub estimated_end: Option<DateTime<Utc>>,
    /// Its start plus their 90th percentile: later than this is unusual.
    pub estimated_end_p90: Option<DateTime<Utc>>,
}

/// How far back the durations an end is estimated from go.
const ESTIMATE_HISTORY_SECS: i64 = 30 * 86_400;

impl From<Run> for RunView {
    fn from(run: Run) -> Self {
        RunView {
            id: run.id,
            job_id: run.job_id,
            namespace: String::new(),
            trigger_id: run.trigger_id,
            scheduled_at: run.scheduled_at,
            attempt: run.attempt,
            first_run_id: run.first_run_id,
            state: run.state,
            reason: run.reason,
            executor_id: run.executor_id,
            fence: run.fence,
            queued_at: run.queued_at,
            claimed_at: run.claimed_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
            cancel_requested_at: run.cancel_requested_at,
            exit_code: run.exit_code,
            http_status: run.http_status,
            error: run.error,
            output: run.output,
            output_truncated: run.output_truncated,
            checkpoint: None,
            params: json!({}),
            step_output: None,
            shard: run.shard,
            shard_total: run.shard_total,
            pinned_to: run.pinned_to,
            replica: run.replica,
            rerun_of: None,
            progress: None,
        }
    }
}

/// A run's progress as `who` may see it: None unless it runs.
pub async fn progress(handles: &Handles, who: &Principal, id: i64) -> Result<Option<RunProgress>, ApiError> {
    let db = handles.read_pool(who);
    let run = store::runs::get(db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    namespace_of(db, who, id, run.job_id).await?;
    progress_of(handles, &run).await
}

/// A running run's progress: its job's last report and the estimated end (None for a run
/// not running: no statement is spent on it).
async fn progress_of(handles: &Handles, run: &Run) -> Result<Option<RunProgress>, ApiError> {
    let (RunState::Running, Some(started_at)) = (run.state, run.started_at) else {
        return Ok(None);
    };
    let report = store::run_progress::get(&handles.pool, run.id).await?;
    let typical = store::jobs::typical_duration(&handles.pool, run.job_id, ESTIMATE_HISTORY_SECS).await?;
    let after = |secs: Option<f64>| {
        secs.and_then(|secs| chrono::Duration::try_milliseconds((secs * 1000.0) as i64))
            .map(|took| started_at + took)
    };
    Ok(Some(RunProgress {
        percent: report.as_ref().and_then(|report| report.percent),
        message: report
            .as_ref()
            .map(|report| report.message.clone())
            .unwrap_or_default(),
        reported_at: report.as_ref().map(|report| report.reported_at),
        estimated_end: after(typical.p50_secs),
        estimated_end_p90: after(typical.p90_secs),
    }))
}

/// The namespace of a run (its job's) when `who` sees it; a 404 for run `id` otherwise.
pub async fn namespace_of(
    db: impl sqlx::PgExecutor<'_>,
    who: &Principal,
    id: i64,
    job_id: i64,
) -> Result<String, ApiError> {
    let job = store::jobs::get(db, job_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    who.role_for(&job.namespace, "run", id)?;
    Ok(job.namespace)
}

/// Whether `who` sees run `id` (a 404 otherwise).
pub async fn check_visible(handles: &Handles, who: &Principal, id: i64) -> Result<(), ApiError> {
    let run = store::runs::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    namespace_of(&handles.pool, who, id, run.job_id).await?;
    Ok(())
}

/// One run, output, checkpoint, parameters and output file included.
pub async fn get(handles: &Handles, who: &Principal, id: i64) -> Result<RunView, ApiError> {
    let db = handles.read_pool(who);
    let run = store::runs::get(db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let namespace = namespace_of(db, who, id, run.job_id).await?;
    let chain_id = run.first_run_id.unwrap_or(run.id);
    let checkpoint = store::checkpoints::info(db, chain_id).await?;
    // Secret parameters are stored sealed and shown masked.
    let params = masked(&store::run_inputs::params_of(db, chain_id, run.trigger_id).await?);
    let step_output = store::run_inputs::output_of(db, id).await?;
    let rerun_of = store::run_inputs::rerun_of(db, chain_id).await?;
    let progress = progress_of(handles, &run).await?;
    Ok(RunView {
        progress,
        checkpoint,
        params,
        step_output,
        rerun_of,
        namespace,
        ..RunView::from(run)
    })
}

/// Starts a new run of run `id`'s job with the parameters run `id` saw (its trigger's
/// defaults included), recording which run it repeats; returns the new run's id.
pub async fn rerun(handles: &Handles, who: &Principal, id: i64) -> Result<i64, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let (original, job, namespace) = runnable_again(&mut tx, who, id).await?;
    let chain = original.first_run_id.unwrap_or(original.id);
    let runs = store::runs::queue_now_fanned_out(&mut *tx, job.id).await?;
    let Some(first) = runs.first().map(|run| run.id) else {
        return Err(ApiError::not_found("run", id));
    };
    for run in &runs {
        store::run_inputs::set_rerun(&mut *tx, run.id, id, chain, original.trigger_id).await?;
    }
    let change = Change {
        action: "run.rerun",
        object_type: "run",
        object_id: Some(first),
        before: None,
        after: Some(json!({"rerun_of": id, "job_id": job.id, "namespace": namespace})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        run.id = first,
        rerun_of = id,
        job.id = job.id,
        "run re-run by hand"
    );
    Ok(first)
}

/// Run `id`, its job and namespace, when `who` may run that job and it runs by hand.
async fn runnable_again(
    tx: &mut sqlx::PgConnection,
    who: &Principal,
    id: i64,
) -> Result<(Run, probactr_common::model::Job, String), ApiError> {
    let run = store::runs::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let namespace = namespace_of(&mut *tx, who, id, run.job_id).await?;
    who.require_operator(&namespace, "run jobs")?;
    let job = store::jobs::get(&mut *tx, run.job_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    super::jobs::check_runnable_by_hand(&job)?;
    Ok((run, job, namespace))
}

/// Retries a run that failed, timed out or was abandoned: the next attempt of its chain
/// (same instant, trigger and parameters), as the job's retry policy would have queued it,
/// whatever that policy says. 409 when the run did not fail or a later attempt exists.
pub async fn retry(handles: &Handles, who: &Principal, id: i64) -> Result<i64, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let (failed, job, namespace) = runnable_again(&mut tx, who, id).await?;
    if !matches!(
        failed.state,
        RunState::Failed | RunState::TimedOut | RunState::Abandoned
    ) {
        return Err(ApiError::Conflict(format!(
            "run {id} {}: only a failed, timed-out or abandoned run is retried (re-run it instead)",
            failed.state
        )));
    }
    let reason = format!("retried by {}", who.username);
    let Some(next) = store::runs::retry_now(&mut *tx, id, &reason).await? else {
        return Err(ApiError::Conflict(format!(
            "run {id} is not its chain's latest attempt: retry that one"
        )));
    };
    let change = Change {
        action: "run.retry",
        object_type: "run",
        object_id: Some(next.id),
        before: None,
        after: Some(
            json!({"retry_of": id, "attempt": next.attempt, "job_id": job.id, "namespace": namespace}),
        ),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(
        run.id = next.id,
        retry_of = id,
        job.id = job.id,
        "run retried by hand"
    );
    Ok(next.id)
}

/// A piece of a run's output as readers get it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct OutputChunk {
    /// Where it starts in the run's output, in bytes.
    pub offset: i64,
    /// `stdout` or `stderr`; `cut` for the marker of output cut by the bound
    /// (`PROBACTR_OUTPUT_LIMIT`); `output` for a run whose output was only kept at its end
    /// (HTTP jobs, runs recorded before live output).
    pub stream: String,
    /// The text.
    pub text: String,
}

/// A run's output from an offset: what exists so far.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct OutputPage {
    /// The run.
    pub run_id: i64,
    /// The run's state when the output was read.
    pub state: RunState,
    /// The chunks from the offset on, in order, with a `cut` marker where output was cut.
    pub chunks: Vec<OutputChunk>,
    /// The offset to ask for next.
    pub next_offset: i64,
    /// Whether the run has ended and this is the end of its output: nothing will follow.
    pub ended: bool,
    /// While the run runs, its progress and estimated end (the API's output reads only;
    /// null otherwise).
    pub progress: Option<RunProgress>,
}

/// The most chunks one read returns (the next read continues from `next_offset`).
pub const OUTPUT_PAGE: i64 = 1000;

/// The marker of `bytes` of output cut by the bound.
pub fn cut_marker(bytes: i64) -> String {
    format!("[… {bytes} bytes cut …]\n")
}

/// A run's output from `offset` (a byte offset; offsets from `next_offset` fall between
/// chunks, one inside a chunk gets that chunk whole).
pub async fn output(
    handles: &Handles,
    who: &Principal,
    id: i64,
    offset: i64,
) -> Result<OutputPage, ApiError> {
    let db = handles.read_pool(who);
    // The state first: a run seen ended has stored all its output, so nothing stored
    // after this read can be missed by a reader who stops at `ended`.
    let run = store::runs::get(db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    namespace_of(db, who, id, run.job_id).await?;
    let stored = store::run_output::read(db, id, offset, OUTPUT_PAGE).await?;
    let complete = (stored.len() as i64) < OUTPUT_PAGE;
    let ended = run.state.is_terminal() && complete;
    // No chunks: output kept only at the end (HTTP jobs, history from before live output).
    if stored.is_empty() && offset == 0 {
        if let Some(text) = run.output.filter(|text| !text.is_empty()) {
            return Ok(OutputPage {
                progress: None,
                run_id: id,
                state: run.state,
                next_offset: text.len() as i64,
                chunks: vec![OutputChunk {
                    offset: 0,
                    stream: "output".to_owned(),
                    text,
                }],
                ended,
            });
        }
    }
    let mut chunks = Vec::with_capacity(stored.len());
    let mut next_offset = offset;
    for chunk in stored {
        if chunk.byte_offset > next_offset {
            chunks.push(OutputChunk {
                offset: next_offset,
                stream: "cut".to_owned(),
                text: cut_marker(chunk.byte_offset - next_offset),
            });
        }
        next_offset = next_offset.max(chunk.byte_offset + i64::from(chunk.byte_count));
        chunks.push(OutputChunk {
            offset: chunk.byte_offset,
            stream: chunk.stream,
            text: chunk.content,
        });
    }
    Ok(OutputPage {
        progress: None,
        run_id: id,
        state: run.state,
        chunks,
        next_offset,
        ended,
    })
}

/// A run's whole output as text: from the output archive when it holds the run's (the
/// full output), else what PostgreSQL keeps, with the cut markers (for a download).
pub async fn output_text(handles: &Handles, who: &Principal, id: i64) -> Result<String, ApiError> {
    let page = full_output(handles, who, id).await?;
    Ok(page.chunks.into_iter().map(|chunk| chunk.text).collect())
}

/// A run's whole output as one page (`?full=true`): the archive's in one `output` chunk
/// when it holds the run's, else every chunk PostgreSQL keeps (head and tail, with the
/// cut marker).
pub async fn full_output(handles: &Handles, who: &Principal, id: i64) -> Result<OutputPage, ApiError> {
    let Some(text) = archived_output(handles, who, id).await? else {
        return stored_output(handles, who, id).await;
    };
    let run = store::runs::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    Ok(OutputPage {
        progress: None,
        run_id: id,
        state: run.state,
        next_offset: text.len() as i64,
        ended: run.state.is_terminal(),
        chunks: vec![OutputChunk {
            offset: 0,
            stream: "output".to_owned(),
            text,
        }],
    })
}

/// A run's output from the archive; None without an archive or before the run's output
/// reached it. An archive that does not answer is a 503 (the request may be retried).
async fn archived_output(handles: &Handles, who: &Principal, id: i64) -> Result<Option<String>, ApiError> {
    let Some(archive) = &handles.archive else {
        return Ok(None);
    };
    let run = store::runs::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    namespace_of(&handles.pool, who, id, run.job_id).await?;
    archive.read(id).await.map_err(|err| match err {
        ArchiveError::TooLarge { limit, .. } => ApiError::Rejected {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "run {id}'s archived output is larger than {} MiB, the most one request reads: \
                 read its pages (without full=true) or fetch the object from the archive",
                limit / (1024 * 1024)
            ),
        },
        err => {
            tracing::warn!(run.id = id, error = %err, "cannot read the run's archived output");
            ApiError::Unavailable("the output archive does not answer; try again".to_owned())
        }
    })
}

/// A run's output as PostgreSQL keeps it, every page in one, with the cut markers.
async fn stored_output(handles: &Handles, who: &Principal, id: i64) -> Result<OutputPage, ApiError> {
    let mut whole = output(handles, who, id, 0).await?;
    let mut more = whole.chunks.len() as i64 >= OUTPUT_PAGE;
    while more {
        let page = output(handles, who, id, whole.next_offset).await?;
        more = page.chunks.len() as i64 >= OUTPUT_PAGE && page.next_offset > whole.next_offset;
        whole.chunks.extend(page.chunks);
        whole.next_offset = whole.next_offset.max(page.next_offset);
        whole.ended = page.ended;
        whole.state = page.state;
    }
    Ok(whole)
}

/// The run list's filters from a query string (the API's and the admin's), every bad
/// one named in `errors`: `job_id`, `job` (a name), `state`, `trigger_id`, `executor_id`,
/// `since`, `until` (without offset: in the zone `tz`, UTC by default), `min_duration_ms`,
/// `executor` (a name), `sort` (a column) and `dir`.
pub fn filter_from(query: &QueryParams, errors: &mut FieldErrors) -> RunFilter {
    let zone = query
        .choice::<chrono_tz::Tz>("tz", errors)
        .unwrap_or(chrono_tz::UTC);
    let filter = RunFilter {
        job_id: query.int("job_id", 1, i64::MAX, errors),
        job_name: query.text("job").map(|name| name.trim().to_owned()),
        state: query.choice::<RunState>("state", errors),
        trigger_id: query.int("trigger_id", 1, i64::MAX, errors),
        executor_id: query.choice::<Uuid>("executor_id", errors),
        executor_name: query.text("executor").map(|name| name.trim().to_owned()),
        since: query.time_in("since", zone, errors),
        until: query.time_in("until", zone, errors),
        min_duration_ms: query.int("min_duration_ms", 0, i64::MAX, errors),
        sort: query.choice::<RunSort>("sort", errors).unwrap_or_default(),
        dir: query.choice::<SortDir>("dir", errors).unwrap_or_default(),
        namespaces: query.text("namespace").map(|name| vec![name.trim().to_owned()]),
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if until <= since {
            errors.insert("until".to_owned(), "must be after since".to_owned());
        }
    }
    filter
}

/// A page of runs in the filter's order.
pub async fn list(
    handles: &Handles,
    who: &Principal,
    filter: &RunFilter,
    page: Page,
) -> Result<Paged<RunSummary>, ApiError> {
    let db = handles.read_pool(who);
    let mut filter = filter.clone();
    filter.namespaces = super::jobs::scoped(who, filter.namespaces.take());
    let (items, total) = store::runs::history::list(db, &filter, page).await?;
    Ok(Paged { items, total })
}

/// The answer of a cancel request.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Cancelled {
    /// The run.
    pub id: i64,
    /// Its state after the request: `cancelled` when it had not started; still `running`
    /// when it had, until its executor stops it (shortly).
    pub state: String,
}

/// Asks for a run to stop; 409 when it already ended.
pub async fn cancel(handles: &Handles, who: &Principal, id: i64) -> Result<Cancelled, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let before = store::runs::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let namespace = namespace_of(&mut *tx, who, id, before.job_id).await?;
    who.require_operator(&namespace, "cancel runs")?;
    if before.state.is_terminal() {
        return Err(ApiError::Conflict(format!(
            "run {id} already ended ({})",
            before.state
        )));
    }
    let reason = format!("cancelled by {}", who.username);
    let after = store::runs::request_cancel(&mut tx, id, &reason)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let change = Change {
        action: "run.cancel",
        object_type: "run",
        object_id: Some(id),
        before: Some(json!({"state": before.state})),
        after: Some(json!({"state": after})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(run.id = id, state = %after, "cancel requested");
    Ok(Cancelled {
        id,
        state: after.to_string(),
    })
}
