//! Executing one attempt of a job: a program, an HTTP request, or a built-in.
//!
//! This module knows nothing about PostgreSQL, Redis or locks. It gets a parsed
//! [`JobSpec`], who the attempt is ([`JobContext`]), a timeout and a stop token, and
//! returns an [`Execution`]: how it ended, the exit code or HTTP status, an error text
//! and the tail of the output. The caller ([`crate::attempt`]) decides what to record.
//!
//! # Endings
//!
//! - [`Ending::Succeeded`]: exit code 0, or an accepted HTTP status.
//! - [`Ending::Failed`]: anything else the job itself decided (a non-zero exit, a killing
//!   signal it did not get from us, a rejected status, a refused address, a program that
//!   cannot start).
//! - [`Ending::TimedOut`]: the timeout elapsed; the job was stopped or the request aborted.
//! - [`Ending::Stopped`]: the caller asked it to stop ([`Stop`]: cancellation, the stop
//!   point after a lost lease, a drain that ran out of time).
//!
//! # Stopping
//!
//! A program that must stop (a timeout or [`Stop::asked`]) gets SIGTERM on its process
//! group and [`Limits::stop_grace`] to end cleanly (write its checkpoint, flush its
//! output), then SIGKILL. Its exit code, when it exited within the grace, is kept.
//! [`Stop::forced`] skips the grace: the executor can no longer prove it is alive, so
//! another executor may be running the run already. Requests and built-ins end at once.
//!
//! # Identity
//!
//! Every job learns who it is, so that it can make its own effects idempotent (a job
//! retried after its executor died may run twice; with the run id and the scheduled
//! instant it can notice): a shell job gets `PROBACTR_RUN_ID`, `PROBACTR_JOB_ID`,
//! `PROBACTR_TRIGGER_ID`, `PROBACTR_SCHEDULED_AT`, `PROBACTR_ATTEMPT` and
//! `PROBACTR_FENCE` in its environment; an HTTP job gets the same values as
//! `X-Probactr-Run-Id`, … request headers. Values that do not apply (no trigger for a
//! run-now, no fence for an unlocked job) are empty strings, so a job can always read
//! them. A shell job also gets `PROBACTR_CHECKPOINT_FILE` (see [`crate::checkpoint`]).

pub mod account;
mod builtin;
pub mod cgroup;
mod http;
pub mod output;
mod shell;

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use probactr_common::jobspec::JobSpec;
use probactr_common::masking::Masker;
use tokio_util::sync::CancellationToken;

use crate::live_output::OutputTap;

pub use self::http::{HttpPolicy, HttpRunner, Refusal};
pub use self::output::{TailBuffer, DEFAULT_OUTPUT_LIMIT};
pub use self::shell::inherit_environment;

/// How long a program that must stop gets between SIGTERM and SIGKILL, by default (a
/// job's `stop_grace_secs` says otherwise).
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);

/// How the caller ends a job early.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    /// Asks the job to stop: a program gets SIGTERM, then SIGKILL after its grace.
    pub asked: CancellationToken,
    /// Ends the job at once (SIGKILL), during the grace too. Whoever cancels it cancels
    /// `asked` as well.
    pub forced: CancellationToken,
}

impl From<CancellationToken> for Stop {
    /// A stop that is only ever asked for.
    fn from(asked: CancellationToken) -> Stop {
        Stop {
            asked,
            forced: CancellationToken::new(),
        }
    }
}

/// Who an attempt is: passed to the job as environment variables or request headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobContext {
    /// The run row's id.
    pub run_id: i64,
    /// The job's id.
    pub job_id: i64,
    /// The trigger that fired it; `None` for run-now.
    pub trigger_id: Option<i64>,
    /// The instant it was scheduled for (for run-now, when it was asked for).
    pub scheduled_at: DateTime<Utc>,
    /// 1 for the first attempt, 2 for the first retry, ….
    pub attempt: i32,
    /// The fencing token of the lock it runs under; `None` without a lock.
    pub fence: Option<i64>,
    /// The file a shell job may write its checkpoint to; `None`: no checkpoints.
    pub checkpoint_file: Option<std::path::PathBuf>,
    /// What the run was given, as (name suffix, value) pairs a shell job gets as
    /// `PROBACTR_<suffix>`: `PARAMS`, `PARAM_<KEY>`, `PARENT_RUN_ID`, `UPSTREAM`,
    /// `OUTPUT_FILE`, … (see [`crate::inputs`]).
    pub inputs: Vec<(String, String)>,
    /// The account a shell job runs as; None: the executor's own.
    pub account: Option<account::Account>,
    /// The attempt's own directory ([`crate::workdir`]): a shell job's working directory
    /// unless its spec names one.
    pub work_dir: Option<std::path::PathBuf>,
    /// The run's secret values, masked in its output as it is read: before the output
    /// is cut into stored chunks or a tail, so no cut splits a value out of sight.
    pub masker: Masker,
    /// The W3C `traceparent` of the attempt's span and its `tracestate` (if any), so job
    /// code joins the run's trace: `TRACEPARENT`/`TRACESTATE` for a shell job, the
    /// `traceparent`/`tracestate` headers for an HTTP job. `None` when traces are not
    /// exported.
    pub trace: Option<(String, Option<String>)>,
}

impl JobContext {
    /// The identity as (name suffix, value) pairs: `RUN_ID` becomes `PROBACTR_RUN_ID` in
    /// an environment and `X-Probactr-Run-Id` in a request.
    pub fn identity(&self) -> [(&'static str, String); 6] {
        let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        [
            ("RUN_ID", self.run_id.to_string()),
            ("JOB_ID", self.job_id.to_string()),
            ("TRIGGER_ID", opt(self.trigger_id)),
            (
                "SCHEDULED_AT",
                self.scheduled_at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            ),
            ("ATTEMPT", self.attempt.to_string()),
            ("FENCE", opt(self.fence)),
        ]
    }
}

/// Bounds of one execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// How long the job may run.
    pub timeout: Duration,
    /// How many bytes of output (or response body) to keep: the last ones.
    pub output_bytes: usize,
    /// How long a program that must stop gets after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
}

impl Limits {
    /// The default bounds with this timeout.
    pub fn new(timeout: Duration) -> Self {
        Limits {
            timeout,
            output_bytes: DEFAULT_OUTPUT_LIMIT,
            stop_grace: DEFAULT_STOP_GRACE,
        }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ending {
    /// The job did what it should.
    Succeeded,
    /// The job failed (see [`Execution::error`], the exit code or the HTTP status).
    Failed,
    /// The timeout elapsed and the job was stopped or the request aborted.
    TimedOut,
    /// The caller stopped it, and it was stopped or the request aborted.
    Stopped,
}

/// The outcome of one execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// How it ended.
    pub ending: Ending,
    /// A program's exit code, when it exited (not when a signal killed it).
    pub exit_code: Option<i32>,
    /// The HTTP response status, when a response came.
    pub http_status: Option<i32>,
    /// Why it did not succeed, for a person.
    pub error: Option<String>,
    /// The tail of the output (stdout and stderr interleaved as read, or the response body).
    pub output: Option<String>,
    /// Whether the output was truncated (it then starts with a marker).
    pub output_truncated: bool,
}

impl Execution {
    /// An execution that ended as `ending`, with nothing else known.
    pub fn ended(ending: Ending) -> Self {
        Execution {
            ending,
            exit_code: None,
            http_status: None,
            error: None,
            output: None,
            output_truncated: false,
        }
    }

    /// A failure with this error text.
    pub fn failed(error: impl Into<String>) -> Self {
        Execution::ended(Ending::Failed).with_error(error)
    }

    /// The same, with this error text.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// The same, with the output kept in `buffer`.
    pub fn with_output(mut self, buffer: &TailBuffer) -> Self {
        (self.output, self.output_truncated) = buffer.finish();
        self
    }
}

/// Runs one attempt of `spec` within `timeout`, ending early when `stop` fires.
pub async fn execute(
    spec: &JobSpec,
    ctx: &JobContext,
    timeout: Duration,
    stop: impl Into<Stop>,
    http: &HttpRunner,
) -> Execution {
    execute_with(spec, ctx, &Limits::new(timeout), stop, http).await
}

/// [`execute`] with explicit bounds (output size, stop grace).
pub async fn execute_with(
    spec: &JobSpec,
    ctx: &JobContext,
    limits: &Limits,
    stop: impl Into<Stop>,
    http: &HttpRunner,
) -> Execution {
    execute_live(spec, ctx, limits, stop, http, None).await
}

/// [`execute_with`], sending what a program prints to `tap` as it prints it (the live
/// output; only shell jobs print as they go).
pub async fn execute_live(
    spec: &JobSpec,
    ctx: &JobContext,
    limits: &Limits,
    stop: impl Into<Stop>,
    http: &HttpRunner,
    tap: Option<&OutputTap>,
) -> Execution {
    let stop = stop.into();
    if stop.asked.is_cancelled() || stop.forced.is_cancelled() {
        return Execution::ended(Ending::Stopped).with_error("stopped before it started");
    }
    // Requests and built-ins have nothing to clean up: being asked ends them at once.
    // Shell and HTTP runs are boxed so that their state does not size the future of every
    // attempt, built-ins included.
    match spec {
        JobSpec::Shell(spec) => Box::pin(shell::run(spec, ctx, limits, &stop, tap)).await,
        JobSpec::Http(spec) => Box::pin(http.run(spec, ctx, limits, &stop.asked)).await,
        JobSpec::Noop => builtin::noop(),
        JobSpec::Sleep { millis } => {
            builtin::sleep(Duration::from_millis(*millis), limits, &stop.asked).await
        }
    }
}

/// The text of a timeout error.
fn timed_out_error(timeout: Duration) -> String {
    format!("timed out after {timeout:?}")
}

/// The text of a stop error.
const STOPPED_ERROR: &str = "stopped";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn identity_values() {
        let ctx = JobContext {
            run_id: 7,
            job_id: 3,
            trigger_id: None,
            scheduled_at: Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5).unwrap(),
            attempt: 2,
            fence: Some(41),
            checkpoint_file: None,
            inputs: Vec::new(),
            account: None,
            work_dir: None,
            masker: Masker::default(),
            trace: None,
        };
        let id = ctx.identity();
        assert_eq!(id[0], ("RUN_ID", "7".to_owned()));
        assert_eq!(id[2], ("TRIGGER_ID", String::new()));
        assert_eq!(id[3], ("SCHEDULED_AT", "2030-01-02T03:04:05Z".to_owned()));
        assert_eq!(id[5], ("FENCE", "41".to_owned()));
    }
}
