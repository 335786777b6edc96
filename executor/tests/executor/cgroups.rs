//! A cgroup per shell run (`PROBACTR_CGROUP`): a process that left the run's process group
//! (`setsid`) still dies at the run's end; what a run left when its executor was killed
//! with SIGKILL is killed and removed by the next executor; a cgroup setting that cannot
//! work stops start-up. Needs a writable cgroup v2 hierarchy (root); skipped, saying so,
//! otherwise.

use std::path::{Path, PathBuf};
use std::time::Duration;

use probactr_common::model::{JobKind, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::{runs, TEST_MIGRATOR};
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use support::{eventually, fast_env, unique_prefix};

use crate::jobs::{process_gone, read_pid, wait_gone};

/// A fresh cgroup for one test under the mounted cgroup v2 hierarchy, removed (with
/// whatever is left in it) when dropped; None where none can be made.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn make(name: &str) -> Option<TestCgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mountinfo.lines().find_map(|line| {
            let (mount, filesystem) = line.split_once(" - ")?;
            (filesystem.split_whitespace().next()? == "cgroup2")
                .then(|| mount.split_whitespace().nth(4).map(PathBuf::from))?
        })?;
        let path = mount.join(format!("{}-{:08x}", name, rand::random::<u32>()));
        std::fs::create_dir(&path).ok()?;
        Some(TestCgroup(path))
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        remove_cgroup(&self.0);
    }
}

/// Kills and removes a cgroup tree, leaves first.
fn remove_cgroup(path: &Path) {
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                remove_cgroup(&entry.path());
            }
        }
    }
    let _ = std::fs::write(path.join("cgroup.kill"), "1");
    for _ in 0..100 {
        if std::fs::remove_dir(path).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A job that leaves a process behind outside its process group, writes that process's
/// pid to `pidfile` (waiting until it did), prints its own cgroup, then sleeps `then_secs`.
fn escaping_job(pidfile: &Path, then_secs: u32) -> serde_json::Value {
    let pidfile = pidfile.display();
    json!({
        "program": format!(
            "setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300' </dev/null >/dev/null 2>&1 &
             while [ ! -s {pidfile} ]; do sleep 0.01; done
             grep '^0::' /proc/self/cgroup; sleep {then_secs}"
        ),
        "shell": true,
    })
}

fn executors_nodes(cgroup: &Path) -> Vec<String> {
    std::fs::read_dir(cgroup)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_runs_processes_die_with_its_cgroup_even_after_its_executor_was_killed(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let Some(cgroup) = TestCgroup::make("probactr-test") else {
        eprintln!("skipped: no writable cgroup v2 hierarchy here");
        return;
    };
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.expect("test database");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut env = fast_env(&url, &unique_prefix("cgroups"));
    env.insert("PROBACTR_CGROUP".into(), cgroup.0.display().to_string());

    // 1. A process that left the run's process group dies at the run's end.
    let mut first = support::executor("executor with cgroups", &env);
    let pidfile = dir.path().join("escaped");
    let job = jobs::insert(
        &pool,
        &NewJob::new("escaper", JobKind::Shell, escaping_job(&pidfile, 0)),
    )
    .await
    .unwrap()
    .id;
    let queued = runs::queue_now(&pool, job).await.unwrap();
    let run = eventually(Duration::from_secs(30), "the run ended", || {
        let pool = pool.clone();
        async move {
            runs::get(&pool, queued.id)
                .await
                .unwrap()
                .filter(|run| run.state.is_terminal())
        }
    })
    .await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert!(
        run.output
            .as_deref()
            .unwrap_or("")
            .contains(&format!("/run-{}-1", run.id)),
        "the run was not in a cgroup of its own: {run:?}"
    );
    let escaped = read_pid(&pidfile, Duration::from_secs(5)).await;
    assert!(
        wait_gone(escaped, Duration::from_secs(5)).await,
        "process {escaped} left the run's group and outlived the run"
    );

    // 2. The executor is killed while a run's escaped process lives.
    let pidfile = dir.path().join("orphan");
    let job = jobs::insert(
        &pool,
        &NewJob::new("sleeper", JobKind::Shell, escaping_job(&pidfile, 300)),
    )
    .await
    .unwrap()
    .id;
    runs::queue_now(&pool, job).await.unwrap();
    let orphan = read_pid(&pidfile, Duration::from_secs(30)).await;
    let dead_node = executors_nodes(&cgroup.0);
    assert_eq!(dead_node.len(), 1, "{dead_node:?}");
    first.signal(support::SIGKILL);
    first.wait_exit(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !process_gone(orphan),
        "nothing outlived the killed executor: the test proves nothing"
    );

    // 3. The next executor kills it and removes the dead executor's cgroup.
    let _second = support::executor("next executor", &env);
    assert!(
        wait_gone(orphan, Duration::from_secs(30)).await,
        "process {orphan} of a killed executor's run survived the next executor's start"
    );
    eventually(
        Duration::from_secs(10),
        "the dead executor's cgroup is removed",
        || {
            let nodes = executors_nodes(&cgroup.0);
            let dead = dead_node[0].clone();
            async move { (!nodes.contains(&dead) && nodes.len() == 1).then_some(()) }
        },
    )
    .await;
}

#[tokio::test]
async fn a_cgroup_setting_that_cannot_work_stops_start_up() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (setting, said) in [
        ("relative/path", "PROBACTR_CGROUP"),
        (&*dir.path().display().to_string(), "not a cgroup v2 directory"),
        ("/nonexistent/probactr", "not a directory"),
    ] {
        let output = tokio::process::Command::new(support::workspace_binary("probactr-executor"))
            .env_clear()
            .env("PROBACTR_SECRET_KEY", support::TEST_SECRET_KEY)
            .env("PROBACTR_CGROUP", setting)
            .output()
            .await
            .expect("the executor runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{setting}: {stderr}");
        assert!(
            stderr.contains("PROBACTR_CGROUP") && stderr.contains(said),
            "{setting}: {stderr}"
        );
    }
}
