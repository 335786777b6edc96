//! Real executor and monitor processes whose logs go to files in the test's directory
//! (printed when the test fails), and the faults a test applies to them: `kill -9`,
//! SIGTERM, and pausing a whole "machine" (the executor and its jobs' process groups).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::services::TempDir;
use crate::support::{self, eventually, Process};

pub const SIGCONT: i32 = 18;
pub const SIGSTOP: i32 = 19;

/// The executor or monitor binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Executor,
    Monitor,
}

/// One process slot: it can be killed and started again under the same name.
pub struct Node {
    pub name: String,
    pub role: Role,
    pub env: HashMap<String, String>,
    pub log: PathBuf,
    process: Option<Process>,
    /// Process groups stopped with the node by [`Node::pause`].
    paused_groups: Vec<i32>,
}

impl Node {
    pub fn start(&mut self) {
        assert!(self.process.is_none(), "{} is already running", self.name);
        let binary = match self.role {
            Role::Executor => "probactr-executor",
            Role::Monitor => "probactr-monitor",
        };
        self.process = Some(support::spawn_workspace_logged(
            binary, &self.name, &self.env, &self.log,
        ));
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    pub fn pid(&self) -> i32 {
        self.process
            .as_ref()
            .unwrap_or_else(|| panic!("{} is not running", self.name))
            .pid()
    }

    /// `kill -9`, and reap it.
    pub async fn kill9(&mut self) {
        if let Some(mut process) = self.process.take() {
            if !self.paused_groups.is_empty() {
                process.signal(SIGCONT);
            }
            process.signal(support::SIGKILL);
            process.wait_exit(Duration::from_secs(10)).await;
        }
        self.resume_groups();
    }

    /// SIGTERM (drain), waiting up to `within` for it to exit.
    pub async fn terminate(&mut self, within: Duration) {
        if let Some(mut process) = self.process.take() {
            process.signal(support::SIGTERM);
            process.wait_exit(within).await;
        }
    }

    /// Pauses the executor and every job process group it started, as a frozen machine
    /// would be: SIGSTOP the executor first (so it starts nothing more), then the groups.
    pub fn pause(&mut self) {
        let pid = self.pid();
        self.process.as_ref().expect("running").signal(SIGSTOP);
        self.paused_groups = children_of(pid);
        for group in &self.paused_groups {
            support::signal_group(*group, SIGSTOP);
        }
    }

    /// Resumes a paused node: one `kill` sends SIGCONT to the executor and its groups.
    pub fn resume(&mut self) {
        let mut command = std::process::Command::new("kill");
        command.arg(format!("-{SIGCONT}")).arg("--");
        if let Some(process) = &self.process {
            command.arg(process.pid().to_string());
        }
        for group in &self.paused_groups {
            command.arg(format!("-{group}"));
        }
        let _ = command.stderr(std::process::Stdio::null()).status();
        self.paused_groups.clear();
    }

    fn resume_groups(&mut self) {
        for group in self.paused_groups.drain(..) {
            support::signal_group(group, SIGCONT);
        }
    }

    pub fn paused_groups(&self) -> &[i32] {
        &self.paused_groups
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The id this process registered under most recently, once it has.
    pub async fn current_id(&self, pool: &PgPool) -> Option<Uuid> {
        let pid = self.process.as_ref()?.pid();
        sqlx::query_scalar(
            "SELECT id FROM executors WHERE pid = $1 AND state = 'alive' ORDER BY started_at DESC LIMIT 1",
        )
        .bind(pid)
        .fetch_optional(pool)
        .await
        .ok()
        .flatten()
    }

    /// Waits until the process registered (a live row with its pid).
    pub async fn registered(&self, pool: &PgPool, within: Duration) -> Uuid {
        eventually(within, &format!("{} registered", self.name), || {
            self.current_id(pool)
        })
        .await
    }
}

/// The processes of one test, with their logs in a directory of their own.
pub struct Cluster {
    pub dir: TempDir,
    pub executors: Vec<Node>,
    pub monitors: Vec<Node>,
}

impl Cluster {
    pub fn new(test: &str) -> Cluster {
        Cluster {
            dir: TempDir::new(test),
            executors: Vec::new(),
            monitors: Vec::new(),
        }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn node(&self, name: &str, role: Role, env: &HashMap<String, String>) -> Node {
        Node {
            name: name.to_owned(),
            role,
            env: env.clone(),
            log: self.path(&format!("{name}.log")),
            process: None,
            paused_groups: Vec::new(),
        }
    }

    /// Adds and starts an executor; returns its index.
    pub fn add_executor(&mut self, name: &str, env: &HashMap<String, String>) -> usize {
        let mut node = self.node(name, Role::Executor, env);
        node.start();
        self.executors.push(node);
        self.executors.len() - 1
    }

    /// Adds and starts a monitor; returns its index.
    pub fn add_monitor(&mut self, name: &str, env: &HashMap<String, String>) -> usize {
        let mut node = self.node(name, Role::Monitor, env);
        node.start();
        self.monitors.push(node);
        self.monitors.len() - 1
    }

    /// The executor running `pid`.
    pub fn executor_with_pid(&self, pid: i32) -> usize {
        self.executors
            .iter()
            .position(|node| node.is_running() && node.pid() == pid)
            .unwrap_or_else(|| panic!("no executor of ours has pid {pid}"))
    }

    /// Every line of every log containing `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.executors
            .iter()
            .chain(&self.monitors)
            .flat_map(|node| {
                node.log_text()
                    .lines()
                    .filter(|line| line.contains(needle))
                    .map(|line| format!("{}: {line}", node.name))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.executors.iter_mut().chain(self.monitors.iter_mut()) {
            node.resume_groups();
        }
        if std::thread::panicking() || std::env::var_os("PROBACTR_FAULT_LOGS").is_some_and(|v| !v.is_empty())
        {
            for node in self.executors.iter().chain(&self.monitors) {
                print_tail(&node.name, &node.log, 80);
            }
        }
    }
}

fn print_tail(name: &str, log: &Path, lines: usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    eprintln!(
        "----- last {} lines of {name} ({}) -----",
        all.len() - from,
        log.display()
    );
    for line in &all[from..] {
        eprintln!("{line}");
    }
}

/// The processes whose parent is `pid` (an executor's jobs: each leads its own group).
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // Fields after the command name, which is in parentheses and may hold spaces.
                    let rest = stat.rsplit_once(')')?.1.to_owned();
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(pid)
        })
        .collect()
}
