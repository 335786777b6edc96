//! Job code cannot reach the executor's keys: a shell job tries every way it has to read
//! its executor (`/proc/$PPID/environ`, `cmdline`, `fd`, `maps` and `mem`) and finds
//! neither the database password nor the secret key, whether the executor runs as an
//! ordinary user (non-dumpable: its `/proc` files are closed to its own user) or as root
//! with `PROBACTR_JOB_USER` (the job runs as another account). A root job still finds the
//! executor's environment scrubbed. Needs root to start processes as `nobody`; skipped,
//! saying so, otherwise.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use probactr_common::model::{JobKind, Run, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::{runs, TEST_MIGRATOR};
use probactr_testkit as support;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::{eventually, fast_env, unique_prefix};

/// A password the database URL carries (trust authentication ignores it): the marker a
/// job must never see.
const DB_PASSWORD: &str = "kq7-marker-pw";

/// What the job prints: who and where it is, then everything it can read of its parent.
const SNOOP: &str = r#"
echo "uid=$(id -u) cwd=$(pwd)"
echo "== environ"; tr '\0' '\n' < /proc/$PPID/environ 2>&1
echo "== cmdline"; tr '\0' ' ' < /proc/$PPID/cmdline 2>&1
echo "== fd"; ls -l /proc/$PPID/fd 2>&1
for fd in /proc/$PPID/fd/*; do [ -f "$fd" ] && head -c 65536 "$fd" 2>&1; done
echo "== maps"; head -c 4096 /proc/$PPID/maps 2>&1
echo "== mem"
grep ' rw-p ' /proc/$PPID/maps 2>/dev/null | while read -r range perms rest; do
  start=${range%-*}; end=${range#*-}
  dd if=/proc/$PPID/mem bs=4096 skip=$((0x$start / 4096)) count=$(((0x$end - 0x$start) / 4096)) 2>/dev/null
done | tr -c '[:print:]' '\n' | grep -E 'kq7|AQEBAQEB' | head -n 5
echo "== own environment"; env
echo "== end"
"#;

/// Only the environment: a root job may read any process's memory, but the executor's
/// environment must hold nothing.
const READ_ENVIRON: &str = r#"echo "uid=$(id -u)"; tr '\0' '\n' < /proc/$PPID/environ"#;

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .map(|ids| ids.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

/// The executor binary in a directory `nobody` may enter (a test's target directory may
/// sit in a private one).
fn reachable_executor(dir: &std::path::Path) -> std::path::PathBuf {
    let copy = dir.join("probactr-executor");
    std::fs::copy(support::workspace_binary("probactr-executor"), &copy).expect("copy the executor");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod binary");
    copy
}

/// A database URL with [`DB_PASSWORD`] in it.
fn url_with_password(options: &PgConnectOptions) -> String {
    support::database_url(options).replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{DB_PASSWORD}@"),
        1,
    )
}

async fn shell_job(pool: &PgPool, name: &str, spec: serde_json::Value) -> i64 {
    jobs::insert(pool, &NewJob::new(name, JobKind::Shell, spec))
        .await
        .unwrap()
        .id
}

async fn run_to_end(pool: &PgPool, job_id: i64) -> Run {
    let queued = runs::queue_now(pool, job_id).await.unwrap();
    eventually(Duration::from_secs(30), "the job ran", || {
        let pool = pool.clone();
        async move {
            let run = runs::get(&pool, queued.id).await.unwrap().unwrap();
            run.state.is_terminal().then_some(run)
        }
    })
    .await
}

fn assert_no_key(run: &Run, how: &str) {
    let seen = format!(
        "{}\n{}",
        run.output.as_deref().unwrap_or(""),
        run.error.as_deref().unwrap_or("")
    );
    assert!(
        !seen.contains(DB_PASSWORD),
        "{how}: the job read the database password:\n{seen}"
    );
    assert!(
        !seen.contains("AQEBAQEB"),
        "{how}: the job read the secret key:\n{seen}"
    );
    assert!(
        seen.contains("== end"),
        "{how}: the job did not run to its end:\n{seen}"
    );
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_job_cannot_read_its_executors_keys(pool_options: PgPoolOptions, options: PgConnectOptions) {
    if !is_root() {
        eprintln!("skipped: starting processes as nobody needs root");
        return;
    }
    let url = url_with_password(&options);
    let pool = pool_options.connect_with(options).await.expect("test database");
    let dir = tempfile::tempdir().expect("temp dir");
    let binary = reachable_executor(dir.path());
    let snoop = shell_job(&pool, "snoop", json!({"program": SNOOP, "shell": true})).await;
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(65534), Some(65534)).unwrap();

    // 1. The executor as an ordinary user, and the job as the same user.
    let mut env: HashMap<String, String> = fast_env(&url, &unique_prefix("keys-user"));
    env.insert("PROBACTR_WORK_DIR".into(), work.display().to_string());
    let mut as_nobody = {
        let mut command = tokio::process::Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&binary)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(&env)
            .kill_on_drop(true);
        command.spawn().expect("setpriv starts the executor")
    };
    let run = run_to_end(&pool, snoop).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert!(
        run.output.as_deref().unwrap_or("").contains("uid=65534"),
        "{run:?}"
    );
    assert_no_key(&run, "same user, non-dumpable executor");
    // Killed like a crashed executor (and waited for: its lock is the kernel's to free).
    as_nobody.kill().await.expect("kill the first executor");

    // 2. The executor as root, jobs as PROBACTR_JOB_USER; the key from a file.
    let key_file = dir.path().join("secret-key");
    std::fs::write(&key_file, format!("{}\n", support::TEST_SECRET_KEY)).unwrap();
    let mut env: HashMap<String, String> = fast_env(&url, &unique_prefix("keys-root"));
    env.remove("PROBACTR_SECRET_KEY");
    env.insert("PROBACTR_SECRET_KEY_FILE".into(), key_file.display().to_string());
    env.insert("PROBACTR_JOB_USER".into(), "65534:65534".into());
    env.insert("PROBACTR_JOB_USERS_ALLOWED".into(), "0:0".into());
    env.insert("PROBACTR_WORK_DIR".into(), work.display().to_string());
    let _root = support::spawn(binary.to_str().expect("utf-8"), "root executor", &env);
    let run = run_to_end(&pool, snoop).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    let output = run.output.clone().unwrap_or_default();
    assert!(
        output.contains("uid=65534"),
        "the job did not run as the job user: {output}"
    );
    let cwd = output
        .lines()
        .find_map(|line| line.split_once(" cwd=").map(|(_, cwd)| cwd.to_owned()))
        .expect("the job printed its directory");
    assert!(
        cwd.contains("/probactr-work/executor-"),
        "not a run directory of its own: {cwd}"
    );
    assert!(
        !std::path::Path::new(&cwd).exists(),
        "the run's directory {cwd} outlived it"
    );
    assert_no_key(&run, "job user");
    let areas: Vec<_> = std::fs::read_dir(work.join("probactr-work"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        areas.len(),
        1,
        "what the killed executor left was not removed: {areas:?}"
    );

    // A root job (allowed by name) reads the environment, and finds it scrubbed.
    let as_root = shell_job(
        &pool,
        "root reader",
        json!({"program": READ_ENVIRON, "shell": true, "run_as": "0:0"}),
    )
    .await;
    let run = run_to_end(&pool, as_root).await;
    let output = run.output.clone().unwrap_or_default();
    assert!(output.contains("uid=0") && output.contains("PATH="), "{run:?}");
    assert!(
        !output.contains(DB_PASSWORD) && !output.contains(&key_file.display().to_string()),
        "{output}"
    );

    // An account the executor does not allow: the run fails naming it.
    let stranger = shell_job(
        &pool,
        "stranger",
        json!({"program": "true", "run_as": "1234:1234"}),
    )
    .await;
    let run = run_to_end(&pool, stranger).await;
    assert_eq!(run.state, RunState::Failed);
    let why = run.reason.as_deref().or(run.error.as_deref()).unwrap_or_default();
    assert!(why.contains("PROBACTR_JOB_USERS_ALLOWED"), "{run:?}");
}

#[tokio::test]
async fn an_executor_that_cannot_switch_to_the_job_user_refuses_to_start() {
    if !is_root() {
        eprintln!("skipped: starting processes as nobody needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let binary = reachable_executor(dir.path());
    let output = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&binary)
        .env_clear()
        .env("PROBACTR_SECRET_KEY", support::TEST_SECRET_KEY)
        .env("PROBACTR_JOB_USER", "1000:1000")
        .output()
        .await
        .expect("setpriv runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("PROBACTR_JOB_USER") && said.contains("CAP_SETUID"),
        "{said}"
    );
}
