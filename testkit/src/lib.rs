//! Test support shared by the crates' tests: a per-test database URL for real processes,
//! per-test Redis prefixes, real `probactr-executor` and `probactr-monitor` processes,
//! waits, a witness HTTP server that records what jobs did independently of probactr's
//! own tables, and a webhook receiver and an SMTP sink that record alerts.
// Test support: a failed expectation is a failed test, and the names say what they are.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod receiver;
pub mod smtp;
pub mod witness;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use tokio::process::{Child, Command};

/// The URL of the database `#[sqlx::test]` created for this test, for child processes.
pub fn database_url(options: &PgConnectOptions) -> String {
    let base = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let database = options.get_database().expect("sqlx::test names its database");
    match base.rfind('/') {
        Some(slash) if base[..slash].contains("://") && base[..slash].matches('/').count() >= 2 => {
            let query = base[slash..].find('?').map(|q| &base[slash + q..]).unwrap_or("");
            format!("{}/{database}{query}", &base[..slash])
        }
        _ => format!("{base}/{database}"),
    }
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

pub fn unique_prefix(test: &str) -> String {
    format!("test:{test}:{}:", uuid::Uuid::new_v4().simple())
}

/// The key of job secrets every test cluster uses (32 bytes of 0x01, in base64).
pub const TEST_SECRET_KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

/// Settings for fast tests: short heartbeats, leases and budgets.
pub fn fast_env(database_url: &str, prefix: &str) -> HashMap<String, String> {
    [
        ("DATABASE_URL", database_url),
        ("REDIS_URL", &redis_url()),
        ("PROBACTR_REDIS_PREFIX", prefix),
        ("PROBACTR_HEARTBEAT_INTERVAL", "500ms"),
        ("PROBACTR_HEARTBEAT_TIMEOUT", "3s"),
        ("PROBACTR_REAP_INTERVAL", "1s"),
        ("PROBACTR_LOCK_LEASE", "3s"),
        ("PROBACTR_LOCK_START_BUDGET", "300ms"),
        ("PROBACTR_DRAIN_TIMEOUT", "2s"),
        ("PROBACTR_EXECUTOR_CAPACITY", "64"),
        ("PROBACTR_DB_POOL_SIZE", "8"),
        ("PROBACTR_SECRET_KEY", TEST_SECRET_KEY),
        ("RUST_LOG", "warn,probactr_executor=info,probactr_monitor=info"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A real probactr process, killed when dropped.
pub struct Process {
    pub child: Child,
    pub name: String,
}

impl Process {
    pub fn pid(&self) -> i32 {
        self.child.id().expect("process is running") as i32
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY-free: `kill` from the libc crate would need unsafe; the kill(1) command does it.
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {} failed", self.name);
    }

    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not exit within {within:?}", self.name))
            .expect("wait works")
    }
}

pub const SIGKILL: i32 = 9;
pub const SIGTERM: i32 = 15;
pub const SIGSTOP: i32 = 19;
pub const SIGCONT: i32 = 18;

/// Starts a probactr binary with `env` on top of a clean environment; its logs go to
/// the test's stderr (shown when the test fails).
pub fn spawn(binary: &str, name: &str, env: &HashMap<String, String>) -> Process {
    spawn_with_output(binary, name, env, Stdio::inherit(), Stdio::inherit())
}

/// Like [`spawn`], but stdout and stderr go to `log` (appended), so a test can read what
/// the process said (and print it when it fails).
pub fn spawn_logged(binary: &str, name: &str, env: &HashMap<String, String>, log: &Path) -> Process {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|err| panic!("cannot open {}: {err}", log.display()));
    let stdout = file.try_clone().expect("log file handle");
    spawn_with_output(binary, name, env, stdout.into(), file.into())
}

/// `binary` with only `PATH` and `env` in its environment, no stdin, and its output
/// where the caller says.
fn spawn_with_output(
    binary: &str,
    name: &str,
    env: &HashMap<String, String>,
    stdout: Stdio,
    stderr: Stdio,
) -> Process {
    let child = Command::new(binary)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {binary}: {err}"));
    Process {
        child,
        name: name.to_owned(),
    }
}

/// A workspace binary (`probactr-executor`, `probactr-monitor`) logging to `log`.
pub fn spawn_workspace_logged(
    binary: &str,
    name: &str,
    env: &HashMap<String, String>,
    log: &Path,
) -> Process {
    spawn_logged(
        workspace_binary(binary).to_str().expect("utf-8 path"),
        name,
        env,
        log,
    )
}

/// Sends `signal` to every process of the process group `pgid`; false when the group is
/// gone.
pub fn signal_group(pgid: i32, signal: i32) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stderr(Stdio::null())
        .status()
        .expect("kill runs")
        .success()
}

/// Whether any live (not zombie) process of the group `pgid` is still there (Linux:
/// reads /proc, since a container's init may leave killed processes unreaped).
pub fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return signal_group(pgid, 0);
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // After the command name (in parentheses): state, ppid, pgrp, ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
        group == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

pub fn executor(name: &str, env: &HashMap<String, String>) -> Process {
    spawn(
        workspace_binary("probactr-executor")
            .to_str()
            .expect("utf-8 path"),
        name,
        env,
    )
}

/// Polls `check` until it returns Some or `within` passes.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {within:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path of a workspace binary built next to this test binary (`cargo test
/// --workspace` and `cargo nextest run --workspace` build every binary first).
pub fn workspace_binary(name: &str) -> std::path::PathBuf {
    let test_binary = std::env::current_exe().expect("test binary path");
    let profile_dir = test_binary
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run the tests with --workspace (scripts/test does)",
        path.display()
    );
    path
}

pub fn monitor(name: &str, env: &HashMap<String, String>) -> Process {
    spawn(
        workspace_binary("probactr-monitor").to_str().expect("utf-8 path"),
        name,
        env,
    )
}
