//! Integration tests of the job module: real processes, a real HTTP client against a
//! tiny loopback server. No database, no Redis.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use probactr_common::account::AccountName;
use probactr_common::jobspec::FollowRedirects;
use probactr_common::jobspec::{HttpSpec, JobSpec, ProcessLimits, ShellSpec};
use probactr_executor::job::account::Account;
use probactr_executor::job::{
    execute, execute_with, output::truncation_marker, Ending, Execution, HttpPolicy, HttpRunner, JobContext,
    Limits, Stop,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn ctx() -> JobContext {
    JobContext {
        run_id: 11,
        job_id: 22,
        trigger_id: Some(33),
        scheduled_at: Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5).unwrap(),
        attempt: 2,
        fence: Some(44),
        checkpoint_file: None,
        inputs: Vec::new(),
        account: None,
        work_dir: None,
        masker: Default::default(),
        trace: None,
    }
}

fn runner() -> HttpRunner {
    HttpRunner::new(HttpPolicy::default()).unwrap()
}

fn program(program: &str, args: &[&str]) -> ShellSpec {
    ShellSpec {
        program: program.to_owned(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: BTreeMap::new(),
        cwd: None,
        shell: false,
        run_as: None,
        limits: Default::default(),
    }
}

fn script(script: &str) -> ShellSpec {
    ShellSpec {
        shell: true,
        ..program(script, &[])
    }
}

async fn run(spec: ShellSpec, timeout: Duration) -> Execution {
    execute(
        &JobSpec::Shell(spec),
        &ctx(),
        timeout,
        CancellationToken::new(),
        &runner(),
    )
    .await
}

/// Gone, or a zombie nobody reaped yet (PID 1 in a container may not reap): either way
/// it runs no more.
pub(crate) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))),
    }
}

pub(crate) async fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    process_gone(pid)
}

pub(crate) async fn read_pid(path: &Path, within: Duration) -> u32 {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_file(path: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Shell
// ---------------------------------------------------------------------------------------

/// A program past its CPU time limit is killed, and the run's error names the limit.
#[tokio::test]
async fn a_job_past_its_cpu_limit_fails_naming_it() {
    let spec = ShellSpec {
        limits: ProcessLimits {
            cpu_secs: Some(1),
            ..ProcessLimits::default()
        },
        ..script("while :; do :; done")
    };
    let done = run(spec, Duration::from_secs(30)).await;
    assert_eq!(done.ending, Ending::Failed, "{done:?}");
    let error = done.error.unwrap_or_default();
    assert!(error.contains("limits.cpu_secs = 1"), "{error}");
}

/// A program past its open-files or memory limit fails (the open or the allocation
/// fails), and the run's error names the limits it ran under.
#[tokio::test]
async fn a_job_past_its_file_or_memory_limit_fails_naming_it() {
    let files = ShellSpec {
        limits: ProcessLimits {
            open_files: Some(8),
            ..ProcessLimits::default()
        },
        ..script("for fd in 3 4 5 6 7 8 9; do eval \"exec $fd</dev/null\" || exit 3; done")
    };
    let done = run(files, Duration::from_secs(30)).await;
    assert_eq!(done.ending, Ending::Failed, "{done:?}");
    let error = done.error.unwrap_or_default();
    assert!(error.contains("limits.open_files = 8"), "{error}");

    // 200 MB in one shell variable, under 64 MiB of address space.
    let memory = ShellSpec {
        limits: ProcessLimits {
            memory_mib: Some(64),
            ..ProcessLimits::default()
        },
        ..script("x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}")
    };
    let done = run(memory, Duration::from_secs(30)).await;
    assert_eq!(done.ending, Ending::Failed, "{done:?}");
    let error = done.error.unwrap_or_default();
    assert!(error.contains("limits.memory_mib = 64"), "{error}");
}

/// A program past its process limit fails naming it. The limit counts the processes of
/// the job's account, which root's are exempt from: as root the job runs as `nobody`.
#[tokio::test]
async fn a_job_past_its_process_limit_fails_naming_it() {
    let mut context = ctx();
    if super::keys::is_root() {
        context.account = Some(Account {
            name: AccountName::Ids {
                uid: 65534,
                gid: 65534,
            },
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
            home: None,
        });
    }
    let spec = ShellSpec {
        limits: ProcessLimits {
            processes: Some(8),
            ..ProcessLimits::default()
        },
        ..script("i=0; while [ $i -lt 40 ]; do sleep 5 & i=$((i+1)); done; wait")
    };
    let done = execute(
        &JobSpec::Shell(spec),
        &context,
        Duration::from_secs(30),
        CancellationToken::new(),
        &runner(),
    )
    .await;
    assert_eq!(done.ending, Ending::Failed, "{done:?}");
    let error = done.error.unwrap_or_default();
    assert!(error.contains("limits.processes = 8"), "{error}");
}

/// stdout and stderr are two pipes (so that live output can tell them apart): both are
/// captured, each in its order; how they interleave depends on when each was read.
#[tokio::test]
async fn shell_captures_stdout_and_stderr_each_in_order() {
    let done = run(
        script("echo one; echo two >&2; echo three; echo four >&2"),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
    assert_eq!(done.exit_code, Some(0));
    let output = done.output.unwrap_or_default();
    let at = |line: &str| {
        output
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} in {output:?}"))
    };
    assert!(at("one\n") < at("three\n"), "{output:?}");
    assert!(at("two\n") < at("four\n"), "{output:?}");
    assert_eq!(output.len(), "one\ntwo\nthree\nfour\n".len(), "{output:?}");
    assert!(!done.output_truncated);
}

#[tokio::test]
async fn shell_passes_arguments_without_a_shell() {
    let done = run(
        program("printf", &["%s|", "a b", "$HOME", "*", "'q'"]),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(done.output.as_deref(), Some("a b|$HOME|*|'q'|"));
    let mut with_args = script("printf '%s,' \"$@\"");
    with_args.args = vec!["x y".into(), "z".into()];
    assert_eq!(
        run(with_args, Duration::from_secs(10)).await.output.as_deref(),
        Some("x y,z,")
    );
}

#[tokio::test]
async fn shell_truncates_long_output_with_a_marker() {
    // 200 KiB of x, then END: the default limit keeps the last 64 KiB.
    let done = run(
        script("head -c 204800 /dev/zero | tr '\\0' x; echo END"),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
    assert!(done.output_truncated);
    let output = done.output.unwrap();
    let marker = truncation_marker(204_804 - 65_536);
    assert!(output.starts_with(&marker), "{}", &output[..80]);
    assert_eq!(output.len(), marker.len() + 65_536);
    assert!(output.ends_with("xxxxEND\n"));

    let limits = Limits {
        output_bytes: 1000,
        ..Limits::new(Duration::from_secs(10))
    };
    let small = execute_with(
        &JobSpec::Shell(script("seq 1 10000")),
        &ctx(),
        &limits,
        CancellationToken::new(),
        &runner(),
    )
    .await;
    let output = small.output.unwrap();
    assert!(
        small.output_truncated && output.starts_with("[… ") && output.ends_with("\n9999\n10000\n"),
        "{output}"
    );
}

#[tokio::test]
async fn shell_records_exit_codes_and_signals() {
    let ok = run(program("true", &[]), Duration::from_secs(10)).await;
    assert_eq!(
        (ok.ending, ok.exit_code, ok.error),
        (Ending::Succeeded, Some(0), None)
    );
    assert_eq!(ok.output, None);

    let three = run(script("echo failing; exit 3"), Duration::from_secs(10)).await;
    assert_eq!((three.ending, three.exit_code), (Ending::Failed, Some(3)));
    assert_eq!(three.error.as_deref(), Some("exited with code 3"));
    assert_eq!(three.output.as_deref(), Some("failing\n"));

    let killed = run(script("kill -9 $$"), Duration::from_secs(10)).await;
    assert_eq!((killed.ending, killed.exit_code), (Ending::Failed, None));
    assert!(
        killed.error.as_deref().unwrap().starts_with("killed by signal 9"),
        "{killed:?}"
    );
}

#[tokio::test]
async fn shell_gets_its_identity_and_environment() {
    let mut spec = program("env", &[]);
    spec.env.insert("GREETING".into(), "hello world".into());
    let done = run(spec.clone(), Duration::from_secs(10)).await;
    let output = done.output.unwrap();
    let lines: Vec<&str> = output.lines().collect();
    for expected in [
        "PROBACTR_RUN_ID=11",
        "PROBACTR_JOB_ID=22",
        "PROBACTR_TRIGGER_ID=33",
        "PROBACTR_SCHEDULED_AT=2030-01-02T03:04:05Z",
        "PROBACTR_ATTEMPT=2",
        "PROBACTR_FENCE=44",
        "GREETING=hello world",
    ] {
        assert!(lines.contains(&expected), "{expected} missing from:\n{output}");
    }
    assert!(
        lines.iter().any(|l| l.starts_with("PATH=")),
        "the executor's environment is inherited"
    );

    let run_now = JobContext {
        trigger_id: None,
        fence: None,
        ..ctx()
    };
    let done = execute(
        &JobSpec::Shell(spec),
        &run_now,
        Duration::from_secs(10),
        CancellationToken::new(),
        &runner(),
    )
    .await;
    let output = done.output.unwrap();
    let lines: Vec<&str> = output.lines().collect();
    assert!(
        lines.contains(&"PROBACTR_TRIGGER_ID=") && lines.contains(&"PROBACTR_FENCE="),
        "{output}"
    );
}

#[tokio::test]
async fn shell_runs_in_its_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = program("pwd", &[]);
    spec.cwd = Some(dir.path().to_str().unwrap().to_owned());
    let done = run(spec.clone(), Duration::from_secs(10)).await;
    let expected = format!("{}\n", dir.path().canonicalize().unwrap().display());
    assert_eq!(done.output.as_deref(), Some(expected.as_str()));

    spec.cwd = Some("/no/such/directory".into());
    let done = run(spec, Duration::from_secs(10)).await;
    assert_eq!(done.ending, Ending::Failed);
    assert!(
        done.error.as_deref().unwrap().contains("/no/such/directory"),
        "{done:?}"
    );
}

#[tokio::test]
async fn shell_program_not_found_fails_readably() {
    let done = run(
        program("probactr-no-such-program", &["x"]),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!((done.ending, done.exit_code), (Ending::Failed, None));
    let error = done.error.unwrap();
    assert!(
        error.contains("probactr-no-such-program") && error.contains("No such file"),
        "{error}"
    );
}

#[tokio::test]
async fn shell_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let spec = script(&format!("sleep 300 & echo $! > {}; sleep 300", pidfile.display()));
    let started = Instant::now();
    let done = run(spec, Duration::from_secs(1)).await;
    let elapsed = started.elapsed();
    assert_eq!(done.ending, Ending::TimedOut, "{done:?}");
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    let grandchild = read_pid(&pidfile, Duration::ZERO).await;
    assert!(
        wait_gone(grandchild, Duration::from_secs(2)).await,
        "grandchild {grandchild} survived the timeout"
    );
}

#[tokio::test]
async fn shell_timeout_escalates_to_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // SIGTERM is ignored by the script and (inherited) by its background child.
    let spec = script(&format!(
        "trap '' TERM; sleep 300 & echo $! > {}; while :; do sleep 1; done",
        pidfile.display()
    ));
    let limits = Limits {
        stop_grace: Duration::from_millis(300),
        ..Limits::new(Duration::from_millis(700))
    };
    let started = Instant::now();
    let done = execute_with(
        &JobSpec::Shell(spec),
        &ctx(),
        &limits,
        CancellationToken::new(),
        &runner(),
    )
    .await;
    assert_eq!(done.ending, Ending::TimedOut, "{done:?}");
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    let grandchild = read_pid(&pidfile, Duration::ZERO).await;
    assert!(
        wait_gone(grandchild, Duration::from_secs(2)).await,
        "grandchild {grandchild} survived SIGKILL"
    );
}

/// A stop that is asked for: SIGTERM to the group; a job that traps it saves its state
/// and exits cleanly within its grace, and its exit code and output are kept.
#[tokio::test]
async fn shell_stop_sends_sigterm_and_keeps_the_clean_exit() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let spec = script(&format!(
        "trap 'echo got TERM; echo step-7 > \"$PROBACTR_CHECKPOINT_FILE\"; exit 0' TERM; \
         echo working; touch {}; while :; do sleep 1; done",
        ready.display()
    ));
    let checkpoint = dir.path().join("checkpoint");
    let context = JobContext {
        checkpoint_file: Some(checkpoint.clone()),
        ..ctx()
    };
    let stop = CancellationToken::new();
    let job = tokio::spawn({
        let stop = stop.clone();
        async move {
            let limits = Limits {
                stop_grace: Duration::from_secs(60),
                ..Limits::new(Duration::from_secs(120))
            };
            execute_with(&JobSpec::Shell(spec), &context, &limits, stop, &runner()).await
        }
    });
    wait_for_file(&ready, Duration::from_secs(30)).await;
    stop.cancel();
    let done = job.await.unwrap();
    assert_eq!(
        (done.ending, done.exit_code),
        (Ending::Stopped, Some(0)),
        "{done:?}"
    );
    let error = done.error.as_deref().unwrap();
    assert!(error.contains("exited with code 0 after SIGTERM"), "{error}");
    let output = done.output.as_deref().unwrap();
    assert!(
        output.contains("working") && output.contains("got TERM"),
        "{output}"
    );
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "step-7\n");
}

/// A job that ignores SIGTERM is killed when its grace ends, and the error says so.
#[tokio::test]
async fn shell_stop_escalates_to_sigkill_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let spec = script(&format!(
        "trap '' TERM; sleep 300 & echo $! > {}; while :; do sleep 1; done",
        pidfile.display()
    ));
    let stop = CancellationToken::new();
    let job = tokio::spawn({
        let stop = stop.clone();
        async move {
            let limits = Limits {
                stop_grace: Duration::from_millis(300),
                ..Limits::new(Duration::from_secs(120))
            };
            execute_with(&JobSpec::Shell(spec), &ctx(), &limits, stop, &runner()).await
        }
    });
    let grandchild = read_pid(&pidfile, Duration::from_secs(5)).await;
    stop.cancel();
    let done = job.await.unwrap();
    assert_eq!((done.ending, done.exit_code), (Ending::Stopped, None), "{done:?}");
    assert!(
        done.error.as_deref().unwrap().contains("killed after its"),
        "{done:?}"
    );
    assert!(
        wait_gone(grandchild, Duration::from_secs(10)).await,
        "grandchild {grandchild} survived the stop"
    );
}

/// A forced stop (the executor cannot prove it is alive) kills at once, grace or not.
#[tokio::test]
async fn shell_forced_stop_kills_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let spec = script(&format!(
        "trap '' TERM; sleep 300 & echo $! > {}; sleep 300",
        pidfile.display()
    ));
    let stop = Stop::default();
    let job = tokio::spawn({
        let stop = stop.clone();
        async move {
            execute(
                &JobSpec::Shell(spec),
                &ctx(),
                Duration::from_secs(60),
                stop,
                &runner(),
            )
            .await
        }
    });
    let grandchild = read_pid(&pidfile, Duration::from_secs(5)).await;
    let stopped_at = Instant::now();
    stop.forced.cancel();
    stop.asked.cancel();
    let done = job.await.unwrap();
    assert_eq!(done.ending, Ending::Stopped, "{done:?}");
    assert!(
        stopped_at.elapsed() < Duration::from_secs(1),
        "{:?}",
        stopped_at.elapsed()
    );
    assert!(
        wait_gone(grandchild, Duration::from_secs(1)).await,
        "grandchild {grandchild} survived the stop"
    );
}

#[tokio::test]
async fn shell_leftovers_die_when_the_program_exits() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let started = Instant::now();
    let done = run(
        script(&format!("sleep 300 & echo $! > {}; echo bye", pidfile.display())),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
    assert_eq!(done.output.as_deref(), Some("bye\n"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let leftover = read_pid(&pidfile, Duration::ZERO).await;
    assert!(
        wait_gone(leftover, Duration::from_secs(1)).await,
        "background process {leftover} outlived its run"
    );
}

/// Set to a pid file path when this binary runs as a stand-in executor.
const HELPER_ENV: &str = "PROBACTR_JOBS_TEST_HELPER";

/// Not a test on its own: the body of a stand-in executor for
/// `shell_job_dies_with_its_executor`, which starts this binary running only this.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "helper process of shell_job_dies_with_its_executor"]
async fn helper_executor_process() {
    let Ok(pidfile) = std::env::var(HELPER_ENV) else {
        return;
    };
    let spec = script(&format!(
        "echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300"
    ));
    run(spec, Duration::from_secs(300)).await;
}

#[tokio::test]
async fn shell_jobs_start_from_a_clean_environment() {
    // The test runner's environment stands for the executor's: DATABASE_URL and
    // PROBACTR_* variables are set when scripts/test runs this.
    let mut spec = program("env", &[]);
    spec.env.insert("MINE".to_owned(), "yes".to_owned());
    let done = run(spec, Duration::from_secs(10)).await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
    let output = done.output.unwrap_or_default();
    let names: Vec<&str> = output
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name)
        .collect();
    assert!(names.contains(&"PATH") && names.contains(&"MINE"), "{names:?}");
    assert!(
        names.contains(&"PROBACTR_RUN_ID"),
        "the run's identity is given: {names:?}"
    );
    for leaked in [
        "DATABASE_URL",
        "REDIS_URL",
        "PROBACTR_PG_BINDIR",
        "CARGO",
        "RUST_LOG",
    ] {
        assert!(!names.contains(&leaked), "{leaked} reached the job: {names:?}");
    }
    for name in names.iter().filter(|name| name.starts_with("PROBACTR_")) {
        let identity = [
            "RUN_ID",
            "JOB_ID",
            "TRIGGER_ID",
            "SCHEDULED_AT",
            "ATTEMPT",
            "FENCE",
            "CHECKPOINT_FILE",
        ];
        assert!(
            identity.iter().any(|id| name.ends_with(id)),
            "{name} reached the job"
        );
    }
}

#[tokio::test]
async fn shell_job_dies_with_its_executor() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut executor = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "jobs::helper_executor_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, &pidfile)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let job = read_pid(&pidfile, Duration::from_secs(10)).await;
    assert!(!process_gone(job), "the job should be running");
    executor.kill().unwrap(); // SIGKILL: no code of the executor runs
    executor.wait().unwrap();
    assert!(
        wait_gone(job, Duration::from_secs(2)).await,
        "job {job} outlived its executor"
    );
}

// ---------------------------------------------------------------------------------------
// Built-ins
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn builtins_noop_and_sleep() {
    let http = runner();
    let quick = Duration::from_secs(5);
    let noop = execute(&JobSpec::Noop, &ctx(), quick, CancellationToken::new(), &http).await;
    assert_eq!(noop.ending, Ending::Succeeded);

    let nap = execute(
        &JobSpec::Sleep { millis: 50 },
        &ctx(),
        quick,
        CancellationToken::new(),
        &http,
    )
    .await;
    assert_eq!(nap.ending, Ending::Succeeded);

    let started = Instant::now();
    let long = JobSpec::Sleep { millis: 60_000 };
    let timed_out = execute(
        &long,
        &ctx(),
        Duration::from_millis(200),
        CancellationToken::new(),
        &http,
    )
    .await;
    assert_eq!(timed_out.ending, Ending::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(1));

    let stop = CancellationToken::new();
    let canceller = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let stopped = execute(&long, &ctx(), Duration::from_secs(60), stop, &http).await;
    assert_eq!(stopped.ending, Ending::Stopped);
    assert!(started.elapsed() < Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------

/// A loopback server answering every request with one canned response (or never).
struct TestServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    async fn start(response: Option<&'static str>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let request = read_request(&mut socket).await;
                    seen.lock().unwrap().push(request);
                    match response {
                        Some(response) => {
                            let _ = socket.write_all(response.as_bytes()).await;
                            let _ = socket.shutdown().await;
                        }
                        None => tokio::time::sleep(Duration::from_secs(300)).await,
                    }
                });
            }
        });
        TestServer { addr, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one request: the head, then `Content-Length` bytes of body.
async fn read_request(socket: &mut tokio::net::TcpStream) -> String {
    let mut data = Vec::new();
    let mut chunk = [0_u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return text;
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&data).into_owned(),
            Ok(n) => data.extend_from_slice(&chunk[..n]),
        }
    }
}

fn http(method: &str, url: &str) -> HttpSpec {
    HttpSpec {
        method: method.into(),
        url: url.into(),
        headers: BTreeMap::new(),
        body: None,
        expect_status: vec![],
        follow_redirects: FollowRedirects::default(),
    }
}

async fn call(spec: HttpSpec, runner: &HttpRunner, timeout: Duration) -> Execution {
    execute(
        &JobSpec::Http(spec),
        &ctx(),
        timeout,
        CancellationToken::new(),
        runner,
    )
    .await
}

const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nhello body";
const BOOM: &str = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom";
const TO_METADATA: &str =
    "HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

#[tokio::test]
async fn http_success_records_status_body_and_identity_headers() {
    let server = TestServer::start(Some(OK)).await;
    let mut spec = http("POST", &server.url("/hook"));
    spec.headers.insert("X-Custom".into(), "yes".into());
    spec.body = Some("payload".into());
    let done = call(spec, &runner(), Duration::from_secs(5)).await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
    assert_eq!(done.http_status, Some(200));
    assert_eq!(done.output.as_deref(), Some("hello body"));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = requests[0].to_ascii_lowercase();
    assert!(request.starts_with("post /hook http/1.1\r\n"), "{request}");
    for header in [
        "x-probactr-run-id: 11\r\n",
        "x-probactr-job-id: 22\r\n",
        "x-probactr-trigger-id: 33\r\n",
        "x-probactr-scheduled-at: 2030-01-02t03:04:05z\r\n",
        "x-probactr-attempt: 2\r\n",
        "x-probactr-fence: 44\r\n",
        "x-custom: yes\r\n",
    ] {
        assert!(request.contains(header), "{header:?} missing from:\n{request}");
    }
    assert!(request.ends_with("\r\n\r\npayload"), "{request}");
}

#[tokio::test]
async fn http_through_a_name_uses_the_guarded_resolver() {
    let server = TestServer::start(Some(OK)).await;
    let url = format!("http://localhost:{}/", server.addr.port());
    let done = call(http("GET", &url), &runner(), Duration::from_secs(5)).await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
}

#[tokio::test]
async fn http_rejected_status_fails() {
    let server = TestServer::start(Some(BOOM)).await;
    let done = call(http("GET", &server.url("/")), &runner(), Duration::from_secs(5)).await;
    assert_eq!((done.ending, done.http_status), (Ending::Failed, Some(500)));
    assert_eq!(done.output.as_deref(), Some("boom"));
    assert!(done.error.as_deref().unwrap().contains("500"), "{done:?}");

    let mut accepting = http("GET", &server.url("/"));
    accepting.expect_status = vec![500];
    let done = call(accepting, &runner(), Duration::from_secs(5)).await;
    assert_eq!((done.ending, done.http_status), (Ending::Succeeded, Some(500)));
}

#[tokio::test]
async fn http_connection_refused_fails_readably() {
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let done = call(
        http("GET", &format!("http://127.0.0.1:{port}/")),
        &runner(),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!((done.ending, done.http_status), (Ending::Failed, None));
    let error = done.error.unwrap();
    assert!(
        error.contains(&format!("127.0.0.1:{port}")) && error.to_lowercase().contains("refused"),
        "{error}"
    );
}

#[tokio::test]
async fn http_timeout_when_the_server_never_answers() {
    let server = TestServer::start(None).await;
    let started = Instant::now();
    let done = call(http("GET", &server.url("/")), &runner(), Duration::from_secs(1)).await;
    let elapsed = started.elapsed();
    assert_eq!(done.ending, Ending::TimedOut, "{done:?}");
    assert_eq!(done.http_status, None);
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn http_stop_aborts_the_request() {
    let server = TestServer::start(None).await;
    let stop = CancellationToken::new();
    let canceller = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let done = execute(
        &JobSpec::Http(http("GET", &server.url("/"))),
        &ctx(),
        Duration::from_secs(30),
        stop,
        &runner(),
    )
    .await;
    assert_eq!(done.ending, Ending::Stopped, "{done:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn http_refuses_the_metadata_address_without_connecting() {
    let started = Instant::now();
    let done = call(
        http("GET", "http://169.254.169.254/latest/meta-data/"),
        &runner(),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!((done.ending, done.http_status), (Ending::Failed, None));
    let error = done.error.unwrap();
    assert!(
        error.contains("refused to connect to 169.254.169.254") && error.contains("169.254.0.0/16"),
        "{error}"
    );
    // A connection attempt to an unroutable address would take far longer.
    assert!(started.elapsed() < Duration::from_millis(500));

    let mapped = call(
        http("GET", "http://[::ffff:169.254.169.254]/"),
        &runner(),
        Duration::from_secs(10),
    )
    .await;
    assert!(mapped
        .error
        .unwrap()
        .contains("refused to connect to ::ffff:169.254.169.254"));
}

#[tokio::test]
async fn http_refuses_a_redirect_to_the_metadata_address() {
    let server = TestServer::start(Some(TO_METADATA)).await;
    let follows_any = HttpSpec {
        follow_redirects: FollowRedirects::Any,
        ..http("GET", &server.url("/go"))
    };
    let done = call(follows_any, &runner(), Duration::from_secs(10)).await;
    assert_eq!(done.ending, Ending::Failed, "{done:?}");
    let error = done.error.unwrap();
    assert!(error.contains("refused to connect to 169.254.169.254"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

/// A server answering every request with a redirect to `to`.
async fn redirecting_to(status: u16, to: &str) -> TestServer {
    let response = format!("HTTP/1.1 {status} Moved\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n");
    TestServer::start(Some(Box::leak(response.into_boxed_str()))).await
}

#[tokio::test]
async fn http_redirects_to_another_origin_carry_neither_the_jobs_headers_nor_its_body() {
    let elsewhere = TestServer::start(Some(OK)).await;
    let first = redirecting_to(307, &elsewhere.url("/landing")).await;
    let mut spec = http("POST", &first.url("/hook"));
    spec.headers.insert("X-Api-Key".into(), "k3y-value".into());
    spec.body = Some("secret payload".into());

    // By default a redirect to another origin is not followed: its 307 is the answer.
    let done = call(spec.clone(), &runner(), Duration::from_secs(10)).await;
    assert_eq!(done.http_status, Some(307), "{done:?}");
    assert_eq!(done.ending, Ending::Failed);
    assert!(elsewhere.requests().is_empty(), "the other origin was called");

    // With `any` it is followed, stripped of the job's headers and body.
    spec.follow_redirects = FollowRedirects::Any;
    let done = call(spec.clone(), &runner(), Duration::from_secs(10)).await;
    assert_eq!(done.ending, Ending::Succeeded, "{done:?}");
    let received = elsewhere.requests();
    assert_eq!(received.len(), 1);
    assert!(!received[0].contains("k3y-value"), "{}", received[0]);
    assert!(!received[0].contains("secret payload"), "{}", received[0]);
    assert!(
        received[0].to_ascii_lowercase().contains("x-probactr-run-id"),
        "{}",
        received[0]
    );
    assert!(
        first.requests()[0].contains("k3y-value"),
        "the first origin gets the headers"
    );

    // With `none` nothing is followed.
    spec.follow_redirects = FollowRedirects::None;
    let done = call(spec, &runner(), Duration::from_secs(10)).await;
    assert_eq!(done.http_status, Some(307));
    assert_eq!(elsewhere.requests().len(), 1);
}

#[tokio::test]
async fn http_deny_list_refuses_loopback() {
    let server = TestServer::start(Some(OK)).await;
    let policy = HttpPolicy::from_lists(&[], &["127.0.0.0/8".into(), "::1".into()]).unwrap();
    let strict = HttpRunner::new(policy).unwrap();

    let done = call(http("GET", &server.url("/")), &strict, Duration::from_secs(5)).await;
    assert_eq!(done.ending, Ending::Failed);
    let error = done.error.unwrap();
    assert!(
        error.contains("refused to connect to 127.0.0.1") && error.contains("PROBACTR_HTTP_DENY"),
        "{error}"
    );

    let by_name = format!("http://localhost:{}/", server.addr.port());
    let done = call(http("GET", &by_name), &strict, Duration::from_secs(5)).await;
    let error = done.error.unwrap();
    assert!(
        error.contains("resolved from localhost") && error.contains("PROBACTR_HTTP_DENY"),
        "{error}"
    );
    assert!(server.requests().is_empty(), "nothing may reach a denied address");
}
