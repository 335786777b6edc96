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
//! - [`Ending::TimedOut`]: the timeout elapsed; the job was killed or the request aborted.
//! - [`Ending::Stopped`]: the caller's stop token fired (cancellation, the stop point
//!   after a lost lease, a drain that ran out of time); the job was killed at once.
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
//! them.

mod builtin;
mod http;
pub mod output;
mod shell;

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use probactr_common::jobspec::JobSpec;
use tokio_util::sync::CancellationToken;

use crate::live_output::OutputTap;

pub use self::http::{HttpPolicy, HttpRunner, Refusal};
pub use self::output::{TailBuffer, DEFAULT_OUTPUT_LIMIT};
pub use self::shell::inherit_environment;

/// How long a timed-out program gets between SIGTERM and SIGKILL, by default.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);

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
    /// How long a timed-out program gets after SIGTERM before SIGKILL.
    pub kill_grace: Duration,
}

impl Limits {
    /// The default bounds with this timeout.
    pub fn new(timeout: Duration) -> Self {
        Limits {
            timeout,
            output_bytes: DEFAULT_OUTPUT_LIMIT,
            kill_grace: DEFAULT_KILL_GRACE,
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
    /// The timeout elapsed and the job was killed or the request aborted.
    TimedOut,
    /// The stop token fired and the job was killed or the request aborted.
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
    stop: CancellationToken,
    http: &HttpRunner,
) -> Execution {
    execute_with(spec, ctx, &Limits::new(timeout), stop, http).await
}

/// [`execute`] with explicit bounds (output size, kill grace).
pub async fn execute_with(
    spec: &JobSpec,
    ctx: &JobContext,
    limits: &Limits,
    stop: CancellationToken,
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
    stop: CancellationToken,
    http: &HttpRunner,
    tap: Option<&OutputTap>,
) -> Execution {
    if stop.is_cancelled() {
        return Execution::ended(Ending::Stopped).with_error("stopped before it started");
    }
    match spec {
        JobSpec::Shell(spec) => shell::run(spec, ctx, limits, &stop, tap).await,
        JobSpec::Http(spec) => http.run(spec, ctx, limits, &stop).await,
        JobSpec::Noop => builtin::noop(),
        JobSpec::Sleep { millis } => builtin::sleep(Duration::from_millis(*millis), limits, &stop).await,
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
        };
        let id = ctx.identity();
        assert_eq!(id[0], ("RUN_ID", "7".to_owned()));
        assert_eq!(id[2], ("TRIGGER_ID", String::new()));
        assert_eq!(id[3], ("SCHEDULED_AT", "2030-01-02T03:04:05Z".to_owned()));
        assert_eq!(id[5], ("FENCE", "41".to_owned()));
    }
}
