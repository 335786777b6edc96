//! One attempt of a run, from claim to recorded end.
//!
//! ```text
//! claimed ─ lock or permit (jittered retry within the start budget) ─┬─ busy ─▶ overlap policy
//!                                                                    │         (skip: record skipped,
//!                                                                    │          queue: back in the queue,
//!                                                                    │          buffer_one: the first waiting
//!                                                                    │            run back, later ones skipped,
//!                                                                    │          replace: stop the running
//!                                                                    │            attempt, back in the queue)
//!         start: state = running + next fencing token (one UPDATE) ──┤─ PostgreSQL says another attempt
//!                                                                    │  of this non-parallel job runs ─▶ overlap policy
//!         execute, renewing the lease every lease/3, ────────────────┤─ renewal lost ─▶ stop point: SIGTERM,
//!           saving a shell job's checkpoint every heartbeat          │                grace, SIGKILL; abandoned
//!         save the checkpoint once more; record the end, fenced,     │
//!           retried with jitter until stored ────────────────────────┘
//!         release the lock by token
//! ```
//!
//! Weak start, strong end: anything that goes wrong before the job starts is cheap (the
//! run is skipped or re-queued, with the reason); once it ran, its end must be recorded,
//! so that write is retried until PostgreSQL stores it or fences it off.

use std::sync::Arc;
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::fence::Write;
use probactr_common::jobspec::JobSpec;
use probactr_common::lock::{Lease, Locks};
use probactr_common::masking::Masker;
use probactr_common::model::{Job, Run, RunState};
use probactr_common::run_trace;
use probactr_common::secrets::{mask, Keyring};
use probactr_common::store::runs::{self, Finish, RunEnd, Start, StartRequest};
use sqlx::PgPool;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use uuid::Uuid;

use crate::checkpoint::{self, Checkpointer};
use crate::job::{self, Ending, Execution, JobContext, Limits};
use crate::live_output::OutputWriter;
use crate::progress;
use crate::recorder::Recorder;
use crate::registry::{Registry, StopHandle, StopReason};
use crate::run_traces;
use crate::slot::Slot;
use crate::wakeup::Wakeups;
use crate::workdir::RunDir;
use crate::{inputs, secrets};

mod lock;
mod overlap;

pub use lock::REDIS_PROBE_EVERY;
use lock::{keep_lease, NoLock, LOCKS_UNAVAILABLE_DELAY};

/// What attempts run with: one for the executor, shared by claiming and firing.
pub struct Attempts {
    /// PostgreSQL.
    pub pool: PgPool,
    /// Redis locks and permits.
    pub locks: Locks,
    /// The HTTP client of HTTP jobs, with its address policy.
    pub http: job::HttpRunner,
    /// Records attempts' ends in groups.
    pub recorder: Recorder,
    /// Writes shell jobs' output while they run.
    pub output: OutputWriter,
    /// Who this executor is now, and the runs it is executing.
    pub registry: Arc<Registry>,
    /// An ended attempt wakes the claim loop.
    pub wakeups: Arc<Wakeups>,
    /// One permit per shell job (a process) running at once (`PROBACTR_EXECUTOR_PROCESSES`).
    pub processes: Arc<Semaphore>,
    /// The running attempts, so shutdown can wait for them.
    pub tracker: TaskTracker,
    /// Cancelled when the executor starts shutting down.
    pub shutdown: CancellationToken,
    /// `PROBACTR_SECRET_KEY` (and its previous key): opens the job's secrets.
    pub secret_keys: Option<Keyring>,
    /// How often a shell job's checkpoint is saved (`PROBACTR_HEARTBEAT_INTERVAL`).
    pub heartbeat_interval: Duration,
    /// How long this executor may go unproven alive and still start a job
    /// ([`crate::liveness::give_up_after`]).
    pub give_up_after: Duration,
    /// `PROBACTR_LOCK_LEASE`.
    pub lock_lease: Duration,
    /// `PROBACTR_LOCK_START_BUDGET`.
    pub lock_start_budget: Duration,
    /// `PROBACTR_LOCK_RETRY`.
    pub lock_retry: Backoff,
}

/// Runs one attempt in the background, holding `slot` (see [`Slot`]); each freed part
/// wakes the claim loop. `holds_quota`: the run holds a place in a quota, so its end is
/// not written in a claim's transaction (see [`crate::recorder`]).
pub fn spawn(
    attempts: &Arc<Attempts>,
    run: Run,
    job: Arc<Job>,
    executor_id: Uuid,
    slot: Slot,
    holds_quota: bool,
) {
    let attempts = attempts.clone();
    // Runs of a job that allows only one (or a few) at once wait in the queue while it
    // runs: its recorded end is news for the claim, not only a freed slot.
    let unblocks_queue = !job.parallel || job.max_concurrency.is_some();
    // Boxed once here: a task is moved a few times on its way to the runtime, and an
    // attempt's future is kilobytes (the awaits that would make it tens of kilobytes are
    // boxed where they are taken).
    attempts.tracker.clone().spawn(Box::pin(async move {
        run_attempt(
            &attempts,
            run,
            job,
            executor_id,
            &attempts.shutdown,
            slot,
            holds_quota,
        )
        .await;
        if unblocks_queue {
            attempts.wakeups.runs.notify_one();
        } else {
            attempts.wakeups.capacity.notify_one();
        }
    }));
}

/// How long a stopped job of `job` may take to end before it is killed (its
/// `stop_grace_secs`); a run held before it starts is registered with it too.
pub fn stop_grace_of(job: &Job) -> Duration {
    Duration::from_secs(u64::try_from(job.stop_grace_secs).unwrap_or(0))
}

/// Runs one claimed run to its recorded end.
pub async fn run_attempt(
    attempts: &Attempts,
    run: Run,
    job: Arc<Job>,
    executor_id: Uuid,
    shutdown: &CancellationToken,
    slot: Slot,
    holds_quota: bool,
) {
    let span = tracing::info_span!("attempt", run.id = run.id, job.id = job.id,
        trigger.id = run.trigger_id, attempt = run.attempt, executor.id = %executor_id,
        trace_id = tracing::field::Empty, span_id = tracing::field::Empty);
    // Each attempt (retry, takeover) is a span of its run's trace (its workflow run's,
    // under its step, for a step); its log lines name it.
    let traced = run_traces::of_run(&attempts.pool, &run).await;
    if let Some(traced) = &traced {
        traced.trace.adopt(&span);
        if let Some((trace_id, span_id)) = run_trace::ids_of(&span) {
            span.record("trace_id", trace_id);
            span.record("span_id", span_id);
        }
    }
    let step_run = traced
        .as_ref()
        .filter(|traced| traced.step.is_some())
        .map(|_| run.clone());
    Attempt {
        attempts,
        run,
        job,
        executor_id,
        slot,
        holds_quota,
    }
    .execute(shutdown)
    .instrument(span)
    .await;
    if let (Some(traced), Some(run)) = (&traced, &step_run) {
        run_traces::end_first_attempt(&attempts.pool, traced, run).await;
    }
}

/// A span of the run's trace when traces are exported; otherwise none, which costs nothing.
fn traced(span: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if probactr_common::telemetry::tracing_on() {
        span()
    } else {
        tracing::Span::none()
    }
}

struct Attempt<'a> {
    attempts: &'a Attempts,
    run: Run,
    job: Arc<Job>,
    executor_id: Uuid,
    slot: Slot,
    holds_quota: bool,
}

impl Attempt<'_> {
    async fn execute(mut self, shutdown: &CancellationToken) {
        // Runs that need no lock were started by the claim itself.
        let started_at_claim = self.run.state == RunState::Running;
        let spec = match JobSpec::parse(self.job.kind, &self.job.spec) {
            Ok(spec) => spec,
            Err(err) => {
                return self
                    .refuse(started_at_claim, &format!("invalid job spec: {err}"))
                    .await
            }
        };
        let keys = self.attempts.secret_keys.as_ref();
        let (spec, mut secret_values) =
            match secrets::resolve(&self.attempts.pool, keys, self.job.id, spec).await {
                Ok(resolved) => (resolved.spec, resolved.values),
                Err(why) => return self.refuse(started_at_claim, &why).await,
            };
        let prepared = match inputs::prepare(&self.attempts.pool, &self.run, &self.job, keys, spec).await {
            Ok(prepared) => prepared,
            Err(why) => return self.refuse(started_at_claim, &why).await,
        };
        // Secret parameters are masked like secrets in what the run leaves.
        secret_values.extend(prepared.secret_values.iter().cloned());
        let (spec, input_env) = (prepared.spec, prepared.env);
        let account = match &spec {
            JobSpec::Shell(shell) => match job::account::for_job(shell.run_as.as_ref()) {
                Ok(account) => account,
                Err(why) => return self.refuse(started_at_claim, &why.to_string()).await,
            },
            _ => None,
        };
        let mut lock_asked_at = tokio::time::Instant::now();
        let (lease, fence) = if started_at_claim {
            (None, None)
        } else {
            lock_asked_at = tokio::time::Instant::now();
            let lease = match self
                .take_lock()
                .instrument(traced(|| tracing::info_span!("lock")))
                .await
            {
                Ok(lease) => lease,
                Err(NoLock::Busy(why)) => return self.give_way(&why).await,
                Err(NoLock::Unavailable(why)) => return self.put_back(LOCKS_UNAVAILABLE_DELAY, &why).await,
            };
            if shutdown.is_cancelled() {
                self.release(lease.as_ref()).await;
                return self.put_back(Duration::ZERO, "executor shutting down").await;
            }
            match self.start(lease.as_ref()).await {
                Some(Started { fence }) => (lease, fence),
                None => return self.release(lease.as_ref()).await,
            }
        };
        let handle = self
            .attempts
            .registry
            .track(self.run.id, self.executor_id, self.stop_grace());
        if !self
            .attempts
            .registry
            .may_act(self.executor_id, self.attempts.give_up_after)
        {
            // The start was answered after this executor lost its proof of life (a
            // stalled link, a pause): a monitor may have re-queued the run already.
            tracing::warn!("cannot prove this executor is alive; not starting the job");
            handle.stop(StopReason::ExecutorLost);
        }
        note_started(&self.run);
        let renewal = lease.clone().map(|lease| {
            let locks = self.attempts.locks.clone();
            tokio::spawn(keep_lease(locks, lease, handle.clone(), lock_asked_at).in_current_span())
        });
        // Claims take no more shell runs than there are processes to spare, so this waits
        // only when fired runs and claimed ones arrive together.
        let process = match spec {
            JobSpec::Shell(_) => self.attempts.processes.clone().acquire_owned().await.ok(),
            _ => None,
        };
        let checkpointer = match spec {
            JobSpec::Shell(_) => Checkpointer::prepare(
                &self.attempts.pool,
                &self.run,
                self.executor_id,
                fence,
                account.as_ref(),
            )
            .await
            .map(Arc::new),
            _ => None,
        };
        let job_ended = CancellationToken::new();
        let saving = checkpointer.clone().map(|checkpointer| {
            checkpoint::keep_saving(checkpointer, self.attempts.heartbeat_interval, job_ended.clone())
        });
        let tap = match spec {
            JobSpec::Shell(_) => Some(
                self.attempts
                    .output
                    .open(self.run.id, secret_values.clone())
                    .await,
            ),
            _ => None,
        };
        let work_dir = match spec {
            JobSpec::Shell(_) => match RunDir::create("run", self.run.id, self.run.attempt, account.as_ref())
            {
                Ok(dir) => Some(dir),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot make the run's working directory");
                    None
                }
            },
            _ => None,
        };
        let mut context = self.context(fence, input_env, &secret_values);
        context.checkpoint_file = checkpointer.as_ref().map(|c| c.path().to_path_buf());
        context.work_dir = work_dir.as_ref().map(|dir| dir.path().to_path_buf());
        context.account = account;
        let watching = context.work_dir.as_deref().map(|dir| {
            let path = progress::file_in(dir);
            context
                .inputs
                .push(("PROGRESS_FILE".to_owned(), path.display().to_string()));
            tokio::spawn(progress::watch(
                self.attempts.pool.clone(),
                self.run.id,
                path,
                context.masker.clone(),
                job_ended.clone(),
            ))
        });
        let limits = Limits {
            stop_grace: self.stop_grace(),
            ..Limits::new(self.timeout())
        };
        let execution = job::execute_live(
            &spec,
            &context,
            &limits,
            handle.signal(),
            &self.attempts.http,
            tap.as_ref(),
        )
        .await;
        job_ended.cancel();
        if let Some(watching) = watching {
            // Before the directory (and the file in it) goes.
            let _ = watching.await;
        }
        if let Some(dir) = work_dir {
            // Whatever the job left there may be large: removed off the runtime's threads.
            tokio::task::spawn_blocking(move || drop(dir));
        }
        if let Some(saving) = saving {
            let _ = saving.await;
        }
        if let Some(checkpointer) = &checkpointer {
            checkpointer.save_at_exit().await;
        }
        if tap.is_some() {
            // Readers who see the run ended must have seen all of its output.
            self.attempts.output.close(self.run.id).await;
        }
        if let Some(renewal) = renewal {
            renewal.abort();
        }
        drop(process);
        self.slot.release_execution(&self.attempts.wakeups);
        if let Some(path) = &prepared.output_file {
            inputs::keep_output(&self.attempts.pool, self.run.id, path, &context.masker).await;
        }
        let mut finish = describe_end(&execution, &handle, self.job.timeout_secs);
        if !secret_values.is_empty() {
            // A job may print what it was given: its secrets never reach the history.
            finish.output = finish.output.map(|output| mask(&output, &secret_values));
            finish.error = finish.error.map(|error| mask(&error, &secret_values));
        }
        metrics::gauge!("probactr_runs_executing").decrement(1.0);
        metrics::counter!("probactr_runs_total", "outcome" => finish.state.as_str()).increment(1);
        self.record_end(fence, finish).await;
        self.attempts.registry.untrack(self.run.id);
        self.release(lease.as_ref()).await;
    }

    /// Ends a run that cannot run at all (its definition is invalid).
    async fn refuse(&self, started_at_claim: bool, why: &str) {
        if started_at_claim {
            let finish = Finish {
                state: RunState::Failed,
                reason: None,
                exit_code: None,
                http_status: None,
                error: Some(why.to_owned()),
                output: None,
                output_truncated: false,
            };
            self.record_end(None, finish).await;
        } else {
            self.end_before_start(RunState::Failed, why).await;
        }
    }

    fn context(&self, fence: Option<i64>, inputs: Vec<(String, String)>, secrets: &[String]) -> JobContext {
        JobContext {
            run_id: self.run.id,
            job_id: self.job.id,
            trigger_id: self.run.trigger_id,
            scheduled_at: self.run.scheduled_at,
            attempt: self.run.attempt,
            fence,
            checkpoint_file: None,
            inputs,
            account: None,
            work_dir: None,
            masker: Masker::new(secrets),
            trace: run_trace::current_traceparent(),
        }
    }

    fn stop_grace(&self) -> Duration {
        stop_grace_of(&self.job)
    }

    fn timeout(&self) -> Duration {
        if self.run.replica.is_some() {
            // A service's instance runs until it is stopped.
            return SERVICE_TIMEOUT;
        }
        Duration::from_secs(u64::try_from(self.job.timeout_secs).unwrap_or(1).max(1))
    }

    /// Marks the run running with a fresh fencing token. None when it must not run.
    async fn start(&self, lease: Option<&Lease>) -> Option<Started> {
        let request = StartRequest {
            run_id: self.run.id,
            job_id: self.job.id,
            executor_id: self.executor_id,
            exclusive: !self.job.parallel,
            fenced: lease.is_some(),
            lock_token: lease.map(Lease::token),
        };
        match runs::start(&self.attempts.pool, &request).await {
            Ok(Start::Started { fence }) => {
                tracing::info!(fence, "run started");
                Some(Started { fence })
            }
            Ok(Start::JobBusy) => {
                tracing::info!("PostgreSQL refused: another attempt of this non-parallel job is running");
                self.give_way("job busy: another attempt is running").await;
                None
            }
            Ok(Start::Gone) => {
                tracing::info!("claim vanished before start (cancelled, reaped or job deleted)");
                None
            }
            Err(err) => {
                tracing::warn!(error = %err, "the start failed in flight; reading the run back");
                self.resolve_start(lease).await
            }
        }
    }

    /// A start whose answer was lost (the connection broke after the statement was sent)
    /// may have been committed; putting the run back blindly would leave it `running`
    /// with nobody running it until its timeout. So read the run back, retrying until
    /// PostgreSQL answers: started under our lock token, it is ours to run (the fence is
    /// on the row); still claimed by us, it goes back to the queue; otherwise it is not
    /// ours any more.
    async fn resolve_start(&self, lease: Option<&Lease>) -> Option<Started> {
        let backoff = Backoff::FullJitter {
            base: Duration::from_millis(50),
            cap: Duration::from_secs(2),
        };
        let mut failures = 0u32;
        loop {
            match runs::get(&self.attempts.pool, self.run.id).await {
                Ok(Some(run))
                    if run.executor_id == Some(self.executor_id)
                        && run.state == RunState::Running
                        && run.lock_token.as_deref() == lease.map(Lease::token) =>
                {
                    tracing::info!(fence = run.fence, "run started (the start was stored after all)");
                    return Some(Started { fence: run.fence });
                }
                Ok(Some(run))
                    if run.executor_id == Some(self.executor_id) && run.state == RunState::Claimed =>
                {
                    self.put_back(Duration::from_secs(1), "start failed").await;
                    return None;
                }
                Ok(run) => {
                    tracing::info!(state = ?run.map(|r| r.state), "the claim is no longer ours");
                    return None;
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %err, failures, "cannot read the run back yet; retrying");
                    tokio::time::sleep(backoff.delay(failures.min(10))).await;
                }
            }
        }
    }

    /// Strong end: the recorder retries until PostgreSQL stores the end or fences it off.
    async fn record_end(&self, fence: Option<i64>, finish: Finish) {
        let ending = RunEnd {
            run_id: self.run.id,
            executor_id: self.executor_id,
            fence,
            finish,
            // Later than stored only for a run held before its job started.
            started_at: self.run.started_at,
        };
        let done = (self.attempts.recorder.record(ending.clone(), self.holds_quota))
            .instrument(traced(|| tracing::info_span!("record")))
            .await;
        let finish = &ending.finish;
        match done.write {
            Write::Stored => tracing::info!(state = %finish.state, exit_code = finish.exit_code,
                http_status = finish.http_status, retry.run_id = done.retry_run_id, "run recorded"),
            Write::Fenced => tracing::warn!(state = %finish.state, fence,
                "end rejected by fencing: the run was reaped or a newer holder took the job"),
        }
    }
}

/// Counts a run that began executing, with how late it started.
fn note_started(run: &Run) {
    let lag = (chrono::Utc::now() - run.scheduled_at)
        .num_microseconds()
        .unwrap_or(0);
    metrics::histogram!("probactr_start_lag_seconds").record(lag.max(0) as f64 / 1e6);
    metrics::gauge!("probactr_runs_executing").increment(1.0);
}

/// A run this attempt started: it may execute the job, and every write of the run
/// carries `fence` (None for a job that takes no lock).
struct Started {
    fence: Option<i64>,
}

/// A service instance's timeout: none in practice (a hundred years).
const SERVICE_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Turns how the job ended into what is recorded.
fn describe_end(execution: &Execution, handle: &StopHandle, timeout_secs: i32) -> Finish {
    let (state, reason) = match execution.ending {
        Ending::Succeeded => (RunState::Succeeded, None),
        Ending::Failed => (RunState::Failed, None),
        Ending::TimedOut => (
            RunState::TimedOut,
            Some(format!("timed out after {timeout_secs}s")),
        ),
        Ending::Stopped => match handle.reason() {
            Some(StopReason::Cancelled) => (
                RunState::Cancelled,
                Some(StopReason::Cancelled.describe().to_owned()),
            ),
            Some(reason) => (RunState::Abandoned, Some(reason.describe().to_owned())),
            None => (RunState::Abandoned, Some("stopped".to_owned())),
        },
    };
    Finish {
        state,
        reason,
        exit_code: execution.exit_code,
        http_status: execution.http_status,
        error: execution.error.clone(),
        output: execution.output.clone(),
        output_truncated: execution.output_truncated,
    }
}
