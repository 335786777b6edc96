//! `shell` jobs: run a program, capture its output, and make sure nothing it started
//! outlives the run.
//!
//! # No implicit shell
//!
//! The program is executed directly with its argument list, so an argument containing
//! spaces, quotes or `$` reaches the program exactly as written. Only a job that asks
//! for it (`"shell": true`) runs `sh -c program sh arg1 arg2 …` (the arguments become
//! `$1`, `$2`, …), for pipelines and redirections.
//!
//! # One process group per run
//!
//! Killing the program we started is not enough: a script that started `sleep 300 &`,
//! a build that forked compilers, a pipeline, all leave processes behind that the kernel
//! does not kill when their parent dies. So every program starts as the leader of a new
//! process group (`setpgid(0, 0)`, via [`tokio::process::Command::process_group`]), and
//! everything it forks stays in that group unless it deliberately leaves it (`setsid`,
//! as daemons do). Signals then go to the whole group with `killpg`:
//!
//! - timeout, or a stop asked for (cancellation, the stop point after a lost lease, the
//!   end of a drain): SIGTERM to the group, then SIGKILL after the job's grace
//!   ([`super::Limits::stop_grace`], its `stop_grace_secs`, 10 s by default) if the
//!   leader is still alive. A job that traps SIGTERM can save its checkpoint and exit;
//!   its exit code is kept. While the leader ends, the grace is over for the group:
//!   whatever it left behind is killed;
//! - a forced stop (the executor cannot prove it is alive, so another executor may be
//!   running the run already): SIGKILL at once, during a grace too;
//! - the program exited on its own: SIGKILL to whatever is left in its group. A run's
//!   processes end with the run; work that must outlive a run belongs in a service,
//!   not in a job. (Between the leader's exit and this kill, the kernel keeps its pid
//!   reserved while the group has members, so the group id cannot name someone else's
//!   group; an empty group makes the kill a harmless no-op.)
//!
//! If the future running a job is dropped (its task aborted), a guard kills the group
//! with SIGKILL as well.
//!
//! # Dying with the executor
//!
//! If the executor itself dies, even by `kill -9` where no code of ours runs, its jobs
//! must die too: otherwise the monitor reaps the run, the retry starts elsewhere and
//! the old attempt is still running. The child asks the kernel for SIGKILL when its
//! parent dies (`prctl(PR_SET_PDEATHSIG, SIGKILL)`, Linux), set between fork and exec.
//! If the executor died during that short window, the child sees a new parent and gives
//! up instead of running.
//!
//! The catch: "parent" here means the *thread* that forked, not the process. Tokio forks
//! from whichever thread polls the task, and its threads come and go (blocking-pool
//! threads exit after idling, `block_in_place` retires a worker), which would kill
//! healthy jobs at random. So all programs are forked from one dedicated thread that
//! lives as long as the executor process and does nothing else.
//!
//! The limit: the death signal is not inherited by the program's own children. When the
//! executor dies by SIGKILL, the program dies, but a grandchild that ignores its
//! parent's death survives until it ends or writes to its output (the pipe's reader is
//! gone, so it gets SIGPIPE), and one that left the process group (`setsid`) escapes
//! the kill at the run's end as well. Where the executor has a cgroup delegated to it,
//! every run also gets a cgroup of its own ([`super::cgroup`]), which holds all of its
//! processes however they fork, is killed whole at the run's end, and is killed by the
//! next executor when this one died.
//!
//! # Account, directory and limits
//!
//! The child becomes the run's account ([`super::account`]) between fork and exec:
//! supplementary groups, group, user, in that order, and only then asks for its death
//! signal (changing credentials clears it). Its working directory is the attempt's own
//! ([`crate::workdir`]) unless the spec names `cwd`; `HOME` and `USER` name the account
//! it runs as. The spec's `limits` become rlimits set in the child before it drops its
//! privileges; a run killed for its CPU time says so, and a failed run under limits
//! names them, since a reached limit shows only as an allocation, open or fork failing.
//!
//! # Output
//!
//! stdout and stderr are two pipes, read as the program writes, so that each piece is
//! known to come from one or the other: the tail interleaves them in the order they were
//! read, and the live output ([`crate::live_output`], through the attempt's tap) keeps
//! each piece's stream. (A program that writes to both in quick succession may see its
//! lines reordered by a few bytes; each stream on its own keeps its order.) Once the run
//! has ended and its group is gone, the pipes are drained for a little while longer; a
//! process that escaped the group and still holds a pipe open cannot make the run wait.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{mpsc, Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use probactr_common::jobspec::{ProcessLimits, ShellSpec};
use probactr_common::masking::MaskStream;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::account::{self, Account};
use super::cgroup::RunCgroup;
use super::{timed_out_error, Ending, Execution, JobContext, Limits, Stop, TailBuffer, STOPPED_ERROR};
use crate::live_output::{OutputTap, Stream};

/// How long output is still read after the run ended.
const DRAIN_AFTER_END: Duration = Duration::from_millis(500);

/// How long to wait for a SIGKILLed leader to be reaped before giving up on it.
const REAP_AFTER_KILL: Duration = Duration::from_secs(5);

/// Runs a shell job.
pub(super) async fn run(
    spec: &ShellSpec,
    ctx: &JobContext,
    limits: &Limits,
    stop: &Stop,
    tap: Option<&OutputTap>,
) -> Execution {
    if let Some(cwd) = &spec.cwd {
        if !Path::new(cwd).is_dir() {
            return Execution::failed(format!(
                "cannot start {:?}: working directory {cwd:?} is not a directory",
                spec.program
            ));
        }
    }
    let cgroup = match RunCgroup::create(ctx.run_id, ctx.attempt, &spec.limits) {
        Ok(cgroup) => cgroup,
        Err(err) => {
            return Execution::failed(format!("cannot make the run's cgroup (PROBACTR_CGROUP): {err}"))
        }
    };
    let (mut child, [stdout, stderr]) = match start(spec, ctx, cgroup.as_ref()).await {
        Ok(started) => started,
        // A limit can already stop the program's start (the process count at exec).
        Err(err) => {
            let failed = Execution::failed(format!("cannot start {:?}: {err}", spec.program));
            return name_limits(failed, &spec.limits, false);
        }
    };
    let group = ProcessGroup::of(&child);
    let output = Arc::new(Mutex::new(TailBuffer::new(limits.output_bytes)));
    let masked = || MaskStream::new(ctx.masker.clone());
    let collectors = [
        tokio::spawn(collect(
            stdout,
            Stream::Stdout,
            masked(),
            output.clone(),
            tap.cloned(),
        )),
        tokio::spawn(collect(
            stderr,
            Stream::Stderr,
            masked(),
            output.clone(),
            tap.cloned(),
        )),
    ];
    let execution = supervise(&mut child, &group, limits, stop).await;
    group.finish();
    let memory_killed = match &cgroup {
        Some(cgroup) => cgroup.finish().await,
        None => false,
    };
    let execution = name_limits(execution, &spec.limits, memory_killed);
    finish_collecting(collectors).await;
    let buffer = output.lock().unwrap_or_else(PoisonError::into_inner);
    execution.with_output(&buffer)
}

/// Builds the command, creates the output pipes (stdout, stderr), and forks from the
/// spawner thread.
async fn start(
    spec: &ShellSpec,
    ctx: &JobContext,
    cgroup: Option<&RunCgroup>,
) -> io::Result<(Child, [pipe::Receiver; 2])> {
    let (stdout_writer, stdout) = pipe::pipe()?;
    let (stderr_writer, stderr) = pipe::pipe()?;
    let cgroup_procs = cgroup.map(RunCgroup::procs_for_child).transpose()?;
    let mut command = command(spec, ctx, cgroup_procs);
    command
        .stdout(stdout_writer.into_blocking_fd()?)
        .stderr(stderr_writer.into_blocking_fd()?);
    // `command` holds our copies of the pipes' write ends: it must be dropped right after
    // the fork (spawn_on_spawner does), or the pipes would never report end of file.
    let child = spawn_on_spawner(command).await?;
    Ok((child, [stdout, stderr]))
}

/// The executor's variables every shell job inherits (besides `LC_*`).
const INHERITED: &[&str] = &["PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER"];

static INHERITED_ENVIRONMENT: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Fixes, once at start, which of the executor's environment variables shell jobs
/// inherit: [`INHERITED`], `LC_*`, and the names or `PREFIX_*` patterns of
/// `passthrough` (`PROBACTR_JOB_ENV_PASSTHROUGH`), never a `PROBACTR_*` variable.
pub fn inherit_environment(passthrough: &[String]) {
    let chosen = inheritable(std::env::vars(), passthrough);
    if INHERITED_ENVIRONMENT.set(chosen).is_err() {
        tracing::warn!("the environment shell jobs inherit was already fixed");
    }
}

/// What jobs inherit: as fixed at start, else the defaults alone.
fn inherited_environment() -> &'static [(String, String)] {
    INHERITED_ENVIRONMENT.get_or_init(|| inheritable(std::env::vars(), &[]))
}

fn inheritable(
    vars: impl Iterator<Item = (String, String)>,
    passthrough: &[String],
) -> Vec<(String, String)> {
    let passes = |name: &str| {
        INHERITED.contains(&name)
            || name.starts_with("LC_")
            || passthrough.iter().any(|entry| match entry.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == entry,
            })
    };
    vars.filter(|(name, _)| !name.starts_with("PROBACTR_") && passes(name))
        .collect()
}

/// The command for a spec: program, arguments, environment, directory, process group.
fn command(spec: &ShellSpec, ctx: &JobContext, cgroup_procs: Option<std::fs::File>) -> Command {
    let mut command = if spec.shell {
        let mut sh = Command::new("sh");
        sh.arg("-c").arg(&spec.program).arg("sh");
        sh
    } else {
        Command::new(&spec.program)
    };
    // A clean environment: the executor's own (its database URL with a password, its
    // Redis URL, anything it was started with) is none of the job's business.
    command
        .args(&spec.args)
        .env_clear()
        .envs(inherited_environment().iter().map(|(name, value)| (name, value)))
        .envs(&spec.env);
    for (name, value) in ctx.identity() {
        command.env(format!("PROBACTR_{name}"), value);
    }
    if let Some((parent, state)) = &ctx.trace {
        command.env("TRACEPARENT", parent);
        if let Some(state) = state {
            command.env("TRACESTATE", state);
        }
    }
    let checkpoint = ctx
        .checkpoint_file
        .as_deref()
        .map(Path::as_os_str)
        .unwrap_or_default();
    command.env("PROBACTR_CHECKPOINT_FILE", checkpoint);
    for (name, value) in &ctx.inputs {
        command.env(format!("PROBACTR_{name}"), value);
    }
    if let Some(account) = &ctx.account {
        command.env("USER", account.name.to_string());
        if let Some(home) = account.home.as_ref().or(ctx.work_dir.as_ref()) {
            command.env("HOME", home);
        }
    }
    if let Some(cwd) = spec.cwd.as_deref().map(Path::new).or(ctx.work_dir.as_deref()) {
        command.current_dir(cwd);
    }
    command
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    prepare_child(&mut command, ctx.account.as_ref(), &spec.limits, cgroup_procs);
    command
}

/// A failed execution under limits says which were in force: one that was reached shows
/// only as a failing allocation, open or fork, as SIGXCPU for CPU time, or as the
/// cgroup's count of processes the kernel killed for its memory limit (`memory_killed`).
fn name_limits(mut execution: Execution, limits: &ProcessLimits, memory_killed: bool) -> Execution {
    if execution.ending != Ending::Failed {
        return execution;
    }
    let error = execution.error.take().unwrap_or_default();
    if let (true, Some(mib)) = (memory_killed, limits.memory_mib) {
        execution.error = Some(format!(
            "exceeded its memory limit (limits.memory_mib = {mib}, the run's cgroup): {error}"
        ));
        return execution;
    }
    let cpu_exceeded =
        error.contains("(SIGXCPU)") || (error.contains("(SIGKILL)") && limits.cpu_secs.is_some());
    execution.error = Some(match limits.cpu_secs {
        Some(secs) if cpu_exceeded => {
            format!("exceeded its CPU time limit (limits.cpu_secs = {secs}): {error}")
        }
        _ => {
            let set = limits.set();
            if set.is_empty() {
                error
            } else {
                let list: Vec<String> = set
                    .iter()
                    .map(|(name, value)| format!("limits.{name} = {value}"))
                    .collect();
                format!(
                    "{error} (it ran under {}; a limit reached makes allocations, opens or forks fail)",
                    list.join(", ")
                )
            }
        }
    });
    execution
}

/// Waits for the program to exit, time out or be stopped; in the latter two cases
/// stops its group: SIGTERM, the grace, SIGKILL.
async fn supervise(child: &mut Child, group: &ProcessGroup, limits: &Limits, stop: &Stop) -> Execution {
    let mut execution = tokio::select! {
        biased;
        () = stop.forced.cancelled() => Execution::ended(Ending::Stopped).with_error(STOPPED_ERROR),
        () = stop.asked.cancelled() => Execution::ended(Ending::Stopped).with_error(STOPPED_ERROR),
        status = child.wait() => return exited(status),
        () = tokio::time::sleep(limits.timeout) => {
            Execution::ended(Ending::TimedOut).with_error(timed_out_error(limits.timeout))
        }
    };
    if !stop.forced.is_cancelled() && !limits.stop_grace.is_zero() {
        group.signal(libc::SIGTERM);
        tokio::select! {
            biased;
            () = stop.forced.cancelled() => {}
            status = child.wait() => return ended_after_sigterm(execution, status),
            () = tokio::time::sleep(limits.stop_grace) => {
                let error = execution.error.take().unwrap_or_default();
                execution.error = Some(format!("{error}; killed after its {:?} grace", limits.stop_grace));
            }
        }
    }
    group.signal(libc::SIGKILL);
    if tokio::time::timeout(REAP_AFTER_KILL, child.wait()).await.is_err() {
        tracing::warn!(
            pid = group.pgid,
            "a killed job process was not reaped in time; tokio reaps it later"
        );
    }
    execution
}

/// A stopped or timed-out execution whose program ended within its grace: its exit code
/// is kept, and the error says how it ended.
fn ended_after_sigterm(mut execution: Execution, status: io::Result<ExitStatus>) -> Execution {
    let how = match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => {
                execution.exit_code = Some(code);
                format!("exited with code {code} after SIGTERM")
            }
            (None, Some(signal)) => format!("ended by signal {signal}{}", signal_name(signal)),
            (None, None) => format!("ended after SIGTERM: {status}"),
        },
        Err(err) => format!("lost track of the process after SIGTERM: {err}"),
    };
    execution.error = Some(match execution.error.take() {
        Some(error) => format!("{error}; {how}"),
        None => how,
    });
    execution
}

/// The execution of a program that exited on its own (or was killed by someone else).
fn exited(status: io::Result<ExitStatus>) -> Execution {
    let status = match status {
        Ok(status) => status,
        Err(err) => return Execution::failed(format!("lost track of the process: {err}")),
    };
    if let Some(code) = status.code() {
        let ending = if code == 0 {
            Ending::Succeeded
        } else {
            Ending::Failed
        };
        let mut execution = Execution::ended(ending);
        execution.exit_code = Some(code);
        if code != 0 {
            execution.error = Some(format!("exited with code {code}"));
        }
        return execution;
    }
    match status.signal() {
        Some(signal) => Execution::failed(format!("killed by signal {signal}{}", signal_name(signal))),
        None => Execution::failed(format!("ended without an exit code: {status}")),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGQUIT => " (SIGQUIT)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGFPE => " (SIGFPE)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGPIPE => " (SIGPIPE)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGXCPU => " (SIGXCPU)",
        _ => "",
    }
}

/// Reads one output pipe into the tail buffer, and to the live output when tapped,
/// until end of file, masking the run's secrets first: a value the program wrote in two
/// pieces, or that two reads split, is masked whole before anything cuts the output.
async fn collect(
    mut reader: pipe::Receiver,
    stream: Stream,
    mut masked: MaskStream,
    output: Arc<Mutex<TailBuffer>>,
    tap: Option<OutputTap>,
) {
    let mut chunk = vec![0_u8; 16 * 1024];
    loop {
        let shown = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => masked.push(&chunk[..n]),
        };
        keep(stream, &shown, &output, tap.as_ref()).await;
    }
    let rest = masked.finish();
    keep(stream, &rest, &output, tap.as_ref()).await;
}

/// Hands masked output to the tail buffer and the live output.
async fn keep(stream: Stream, bytes: &[u8], output: &Mutex<TailBuffer>, tap: Option<&OutputTap>) {
    if bytes.is_empty() {
        return;
    }
    output.lock().unwrap_or_else(PoisonError::into_inner).push(bytes);
    if let Some(tap) = tap {
        tap.write(stream, bytes).await;
    }
}

/// Lets the collectors read what is left, for a little while.
async fn finish_collecting(collectors: [tokio::task::JoinHandle<()>; 2]) {
    let deadline = tokio::time::Instant::now() + DRAIN_AFTER_END;
    for mut collector in collectors {
        if tokio::time::timeout_at(deadline, &mut collector).await.is_err() {
            tracing::debug!(
                "a process outside the job's group still holds its output open; not waiting for it"
            );
            collector.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Process group
// ---------------------------------------------------------------------------------------

/// The process group of a started program; kills it with SIGKILL when dropped early.
struct ProcessGroup {
    pgid: u32,
    finished: std::sync::atomic::AtomicBool,
}

impl ProcessGroup {
    fn of(child: &Child) -> Self {
        // A freshly spawned child has an id until it is reaped; 0 makes every signal a no-op.
        ProcessGroup {
            pgid: child.id().unwrap_or(0),
            finished: false.into(),
        }
    }

    fn signal(&self, signal: i32) {
        signal_group(self.pgid, signal);
    }

    /// Kills what is left of the group, once; the guard is then disarmed.
    fn finish(&self) {
        if !self.finished.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.signal(libc::SIGKILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Sends `signal` to process group `pgid`; false if it is gone (or `pgid` is not a
/// plausible group of ours).
#[allow(unsafe_code)]
fn signal_group(pgid: u32, signal: i32) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    // Group 0 is our own and 1 is init's: never ours to kill.
    if pgid <= 1 {
        return false;
    }
    // SAFETY: killpg takes two integers and no memory; it cannot break Rust's invariants.
    unsafe { libc::killpg(pgid, signal) == 0 }
}

/// What the child does between fork and exec: it joins its run's cgroup (writing "0" to
/// `cgroup_procs`, while it still has the executor's rights), sets its rlimits, becomes
/// its account (groups, group, user), then asks for its death signal (see the module
/// docs for why in that order).
#[allow(unsafe_code)]
fn prepare_child(
    command: &mut Command,
    account: Option<&Account>,
    limits: &ProcessLimits,
    cgroup_procs: Option<std::fs::File>,
) {
    let parent = std::process::id();
    let rlimits = rlimits(limits);
    // Everything the child uses is made here, before the fork: it must not allocate.
    let credentials = account
        .filter(|account| !account::is_own(account))
        .map(|account| (account.uid, account.gid, account.groups.clone()));
    let in_child = move || -> io::Result<()> {
        if let Some(procs) = &cgroup_procs {
            // SAFETY: write reads one byte of a static string; the descriptor is owned by
            // this closure, which the command keeps until after the fork.
            if unsafe { libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        for (resource, limit) in &rlimits {
            // SAFETY: setrlimit reads the struct we own; an async-signal-safe system call.
            if unsafe { libc::setrlimit(*resource, limit) } == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some((uid, gid, groups)) = &credentials {
            // SAFETY: system calls on integers and on a slice we own, all
            // async-signal-safe; the length passed is the slice's.
            let failed = unsafe {
                libc::setgroups(groups.len(), groups.as_ptr()) == -1
                    || libc::setgid(*gid) == -1
                    || libc::setuid(*uid) == -1
            };
            if failed {
                return Err(io::Error::last_os_error());
            }
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: prctl and getppid are async-signal-safe system calls on integers.
            let (set, ppid) = unsafe {
                (
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong),
                    libc::getppid(),
                )
            };
            if set == -1 {
                return Err(io::Error::last_os_error());
            }
            // The executor died between fork and prctl: the signal will never come.
            if u32::try_from(ppid).ok() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = parent;
        Ok(())
    };
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe operations are allowed (another thread may have held the
    // allocator's lock at the fork). It makes system calls on integers and on memory
    // allocated before the fork, and compares integers: no allocation
    // (`from_raw_os_error` and `last_os_error` do not allocate), no locks, no state
    // shared with other threads.
    unsafe {
        command.pre_exec(in_child);
    }
}

/// The rlimits of `limits` (soft and hard the same, but CPU time: SIGXCPU at the limit,
/// SIGKILL a second later for a program that ignores it).
fn rlimits(limits: &ProcessLimits) -> Vec<(RlimitResource, libc::rlimit)> {
    let both = |value: u64| libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    let mut set = Vec::new();
    if let Some(mib) = limits.memory_mib {
        set.push((libc::RLIMIT_AS, both(mib.saturating_mul(1024 * 1024))));
    }
    if let Some(secs) = limits.cpu_secs {
        let limit = libc::rlimit {
            rlim_cur: secs as libc::rlim_t,
            rlim_max: secs.saturating_add(1) as libc::rlim_t,
        };
        set.push((libc::RLIMIT_CPU, limit));
    }
    if let Some(files) = limits.open_files {
        set.push((libc::RLIMIT_NOFILE, both(files)));
    }
    if let Some(processes) = limits.processes {
        set.push((libc::RLIMIT_NPROC, both(processes)));
    }
    set
}

/// The type of an rlimit's resource number, which differs between C libraries.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type RlimitResource = libc::c_int;

// ---------------------------------------------------------------------------------------
// The spawner thread
// ---------------------------------------------------------------------------------------

/// A command to fork, and where to send the child.
struct SpawnRequest {
    command: Command,
    runtime: Handle,
    reply: oneshot::Sender<io::Result<Child>>,
}

/// Forks `command` from the long-lived spawner thread (see the module docs for why).
async fn spawn_on_spawner(command: Command) -> io::Result<Child> {
    let (reply, response) = oneshot::channel();
    let request = SpawnRequest {
        command,
        runtime: Handle::current(),
        reply,
    };
    spawner()?
        .send(request)
        .map_err(|_| io::Error::other("the process spawner thread is gone"))?;
    response
        .await
        .map_err(|_| io::Error::other("the process spawner thread dropped the request"))?
}

fn spawner() -> io::Result<&'static mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Result<mpsc::Sender<SpawnRequest>, String>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (sender, requests) = mpsc::channel();
            std::thread::Builder::new()
                .name("probactr-spawner".into())
                .spawn(move || serve_spawns(&requests))
                .map(|_| sender)
                .map_err(|err| format!("cannot start the process spawner thread: {err}"))
        })
        .as_ref()
        .map_err(|err| io::Error::other(err.clone()))
}

/// The spawner thread's loop: it lives as long as the process (its sender is static).
fn serve_spawns(requests: &mpsc::Receiver<SpawnRequest>) {
    for SpawnRequest {
        mut command,
        runtime,
        reply,
    } in requests.iter()
    {
        let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _entered = runtime.enter();
            command.spawn()
        }))
        .unwrap_or_else(|_| Err(io::Error::other("spawning panicked")));
        drop(command);
        if let Err(Ok(orphan)) = reply.send(spawned) {
            // The job was dropped while we forked: nobody will supervise this child.
            if let Some(pid) = orphan.id() {
                signal_group(pid, libc::SIGKILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> impl Iterator<Item = (String, String)> {
        names
            .iter()
            .map(|name| (name.to_string(), format!("value of {name}")))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn jobs_inherit_the_allowlist_and_the_passthrough_never_probactr_settings() {
        let all = [
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "TZ",
            "DATABASE_URL",
            "REDIS_URL",
            "PROBACTR_SECRET_KEY",
            "PROBACTR_DATABASE_URL",
            "AWS_REGION",
            "AWS_SECRET_ACCESS_KEY",
            "JAVA_HOME",
        ];
        let names = |passthrough: &[&str]| {
            let passthrough: Vec<String> = passthrough.iter().map(|p| p.to_string()).collect();
            inheritable(vars(&all), &passthrough)
                .into_iter()
                .map(|(name, _)| name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&[]), ["PATH", "HOME", "LANG", "LC_ALL", "TZ"]);
        assert_eq!(
            names(&["JAVA_HOME", "AWS_*", "PROBACTR_*"]),
            [
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TZ",
                "AWS_REGION",
                "AWS_SECRET_ACCESS_KEY",
                "JAVA_HOME"
            ]
        );
    }
}
