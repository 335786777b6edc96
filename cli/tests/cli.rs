//! The `probactr` client against a real manager and executor: logging in (the token kept
//! with mode 0600), listing, running a job and following it to its end (the exit code
//! says how it went), following a run's output live, pausing, output formats, and
//! errors that say what was wrong.
#![allow(clippy::unwrap_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use probactr_common::store::TEST_MIGRATOR;
use probactr_testkit::{eventually, fast_env, unique_prefix, workspace_binary};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

const PASSWORD: &str = "cli-test-password-1";

struct Cluster {
    url: String,
    _manager: probactr_testkit::Process,
    _executor: probactr_testkit::Process,
}

async fn cluster(options: &PgConnectOptions) -> Cluster {
    let database_url = probactr_testkit::database_url(options);
    let mut env = fast_env(&database_url, &unique_prefix("cli"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    env.insert("PROBACTR_MANAGER_LISTEN".into(), format!("127.0.0.1:{port}"));
    env.insert("PROBACTR_ADMIN_PASSWORD".into(), PASSWORD.into());
    let manager = probactr_testkit::spawn(
        workspace_binary("probactr-manager").to_str().unwrap(),
        "manager",
        &env,
    );
    let url = format!("http://127.0.0.1:{port}");
    eventually(Duration::from_secs(30), "the manager is ready", || async {
        let ready = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok();
        ready.then_some(())
    })
    .await;
    let executor = probactr_testkit::executor("executor", &env);
    Cluster {
        url,
        _manager: manager,
        _executor: executor,
    }
}

/// Runs `probactr` with `args`, a home of its own and `stdin`.
fn probactr(home: &Path, extra_env: &[(&str, &str)], args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(workspace_binary("probactr"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .envs(extra_env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn the_client_logs_in_lists_runs_jobs_and_says_what_went_wrong(
    _pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let none: &[(&str, &str)] = &[];

    let lost = probactr(home, none, &["jobs", "list"], "");
    assert_eq!(lost.status.code(), Some(1));
    assert!(
        text(&lost.stderr).contains("probactr login"),
        "{}",
        text(&lost.stderr)
    );

    let wrong = probactr(
        home,
        none,
        &["login", &cluster.url, "--user", "admin", "--password-stdin"],
        "nope\n",
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        text(&wrong.stderr).to_lowercase().contains("password"),
        "{}",
        text(&wrong.stderr)
    );
    let login = probactr(
        home,
        none,
        &["login", &cluster.url, "--user", "admin", "--password-stdin"],
        &format!("{PASSWORD}\n"),
    );
    assert!(login.status.success(), "{}", text(&login.stderr));
    let saved = home.join(".config/probactr/credentials.json");
    assert_eq!(
        std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // Jobs made through the API with the saved token.
    let token: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let api = reqwest::Client::new();
    for (name, kind, spec) in [
        ("hello", "noop", serde_json::json!({})),
        (
            "broken",
            "shell",
            serde_json::json!({"program": "echo doomed; exit 3", "shell": true}),
        ),
    ] {
        let made = api
            .post(format!("{}/api/v1/jobs", cluster.url))
            .bearer_auth(token["token"].as_str().unwrap())
            .header("content-type", "application/json")
            .body(serde_json::json!({"name": name, "kind": kind, "spec": spec}).to_string())
            .send()
            .await
            .unwrap();
        assert!(made.status().is_success(), "{}", made.text().await.unwrap());
    }

    let listed = probactr(home, none, &["jobs", "list"], "");
    let table = text(&listed.stdout);
    assert!(table.starts_with("NAME "), "{table}");
    assert!(table.contains("broken") && table.contains("hello"), "{table}");
    let json = probactr(home, none, &["jobs", "list", "-o", "json"], "");
    let jobs: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(jobs.len(), 2);

    let ok = probactr(home, none, &["jobs", "run", "hello", "--wait", "-o", "json"], "");
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let run: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(run["state"], "succeeded");
    let failed = probactr(home, none, &["jobs", "run", "broken", "--wait"], "");
    assert_eq!(failed.status.code(), Some(1), "a failed run exits non-zero");
    let runs = probactr(home, none, &["runs", "list", "--job", "broken", "-o", "json"], "");
    let runs: Vec<Value> = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(runs.len(), 1);
    let id = runs[0]["id"].to_string();
    let logs = probactr(home, none, &["runs", "logs", &id], "");
    assert!(text(&logs.stdout).contains("doomed"), "{}", text(&logs.stdout));

    // Parameters reach the run; a malformed one is refused before anything is queued.
    let greet = api
        .post(format!("{}/api/v1/jobs", cluster.url))
        .bearer_auth(token["token"].as_str().unwrap())
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"name": "greet", "kind": "shell",
                               "spec": {"program": "echo \"hi $PROBACTR_PARAM_WHO\"", "shell": true}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(greet.status().is_success(), "{}", greet.text().await.unwrap());
    let bad_param = probactr(home, none, &["jobs", "run", "greet", "--param", "who"], "");
    assert_eq!(bad_param.status.code(), Some(1));
    assert!(
        text(&bad_param.stderr).contains("KEY=VALUE"),
        "{}",
        text(&bad_param.stderr)
    );
    let greeted = probactr(
        home,
        none,
        &[
            "jobs",
            "run",
            "greet",
            "--param",
            "who=world",
            "--wait",
            "-o",
            "json",
        ],
        "",
    );
    assert_eq!(greeted.status.code(), Some(0), "{}", text(&greeted.stderr));
    let run: Value = serde_json::from_slice(&greeted.stdout).unwrap();
    assert_eq!(run["params"]["who"], "world");
    let logs = probactr(home, none, &["runs", "logs", &run["id"].to_string()], "");
    assert!(text(&logs.stdout).contains("hi world"), "{}", text(&logs.stdout));

    let paused = probactr(home, none, &["jobs", "pause", "hello"], "");
    assert!(paused.status.success(), "{}", text(&paused.stderr));
    let got = probactr(home, none, &["jobs", "get", "hello", "-o", "yaml"], "");
    assert!(
        text(&got.stdout).contains("paused: true"),
        "{}",
        text(&got.stdout)
    );

    let unknown = probactr(home, none, &["jobs", "get", "nosuch"], "");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        text(&unknown.stderr).contains("no job is named \"nosuch\""),
        "{}",
        text(&unknown.stderr)
    );
    let refused = probactr(home, none, &["jobs", "delete", "hello"], "");
    assert_eq!(refused.status.code(), Some(1), "deleting asks for confirmation");
    let bad_state = probactr(home, none, &["runs", "list", "--state", "sideways"], "");
    assert_eq!(bad_state.status.code(), Some(1));
    assert!(
        text(&bad_state.stderr).contains("state:"),
        "names the field: {}",
        text(&bad_state.stderr)
    );

    let status = probactr(home, none, &["status", "-o", "yaml"], "");
    assert!(
        text(&status.stdout).contains("processes:"),
        "{}",
        text(&status.stdout)
    );
    let executors = probactr(home, none, &["executors", "list"], "");
    assert!(
        text(&executors.stdout).contains("alive"),
        "{}",
        text(&executors.stdout)
    );
    let completions = probactr(home, none, &["completions", "bash"], "");
    assert!(text(&completions.stdout).contains("probactr"), "completions");

    // The environment overrides the saved credentials.
    let elsewhere = probactr(home, &[("PROBACTR_URL", "http://127.0.0.1:9")], &["status"], "");
    assert_eq!(elsewhere.status.code(), Some(1));
    assert!(
        text(&elsewhere.stderr).contains("cannot reach http://127.0.0.1:9"),
        "{}",
        text(&elsewhere.stderr)
    );
    let out = probactr(home, none, &["logout"], "");
    assert!(out.status.success());
    assert!(!saved.exists());
}

fn login(cluster: &Cluster, home: &Path) {
    let none: &[(&str, &str)] = &[];
    let login = probactr(
        home,
        none,
        &["login", &cluster.url, "--user", "admin", "--password-stdin"],
        &format!("{PASSWORD}\n"),
    );
    assert!(login.status.success(), "{}", text(&login.stderr));
}

const DEFINITIONS: &str = r#"# Kept in git.
channels:
  - name: ops-hook
    kind: webhook
    config: {url: "https://hooks.example.com/ops"}
alert_rules:
  - name: nightly-failures
    events: [run_failed, recovered]
    job: nightly-export
    channels: [ops-hook]
    throttle_secs: 120
jobs:
  - name: nightly-export
    kind: shell
    description: exports the day
    spec:
      program: /bin/true
      args: ["--day", "today"]
    timeout_secs: 600
    overlap: replace
    retry: {max_attempts: 3, backoff: fixed, initial_secs: 30, max_secs: 60, jitter: none, retry_on: {exit_codes: [75]}}
    triggers:
      - kind: cron
        cron: "0 0 2 * * *"
        timezone: Europe/Berlin
      - {kind: interval, interval_secs: 3600, misfire: skip}
  - name: heartbeat
    kind: noop
"#;

/// Definitions as code: apply creates, a second apply changes nothing (no new version,
/// no audit entry), an edit is shown then applied, export then apply on an empty cluster
/// reproduces the same definitions, and a bad file names file, line and field.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn apply_and_export_keep_definitions_in_files(_pool_options: PgPoolOptions, options: PgConnectOptions) {
    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let none: &[(&str, &str)] = &[];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.yaml");
    std::fs::write(&file, DEFINITIONS).unwrap();
    let file_arg = file.to_str().unwrap();

    let dry = probactr(home, none, &["apply", "-f", file_arg, "--dry-run"], "");
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("+ job nightly-export"),
        "{}",
        text(&dry.stdout)
    );
    let nothing_yet = probactr(home, none, &["jobs", "list", "-o", "json"], "");
    assert_eq!(
        serde_json::from_slice::<Vec<Value>>(&nothing_yet.stdout)
            .unwrap()
            .len(),
        0,
        "a dry run changes nothing"
    );

    let first = probactr(home, none, &["apply", "-f", file_arg], "");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let created = text(&first.stdout);
    assert_eq!(created.matches("+ trigger").count(), 2, "{created}");
    assert!(
        created.contains("+ channel ops-hook") && created.contains("+ alert rule nightly-failures"),
        "{created}"
    );
    let jobs = |home: &Path| -> Vec<Value> {
        serde_json::from_slice(&probactr(home, none, &["jobs", "list", "-o", "json"], "").stdout).unwrap()
    };
    let versions: Vec<Value> = jobs(home).iter().map(|j| j["version"].clone()).collect();
    let audit_before = audit_count(&options).await;

    let again = probactr(home, none, &["apply", "-f", dir.path().to_str().unwrap()], "");
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), "", "the second apply changes nothing");
    assert!(text(&again.stderr).contains("Nothing to change"));
    assert_eq!(
        jobs(home)
            .iter()
            .map(|j| j["version"].clone())
            .collect::<Vec<_>>(),
        versions
    );
    assert_eq!(audit_count(&options).await, audit_before, "no audit entry");

    std::fs::write(
        &file,
        DEFINITIONS.replace("timeout_secs: 600", "timeout_secs: 900"),
    )
    .unwrap();
    let edit = probactr(home, none, &["apply", "-f", file_arg, "--dry-run"], "");
    assert!(
        text(&edit.stdout).contains("~ job nightly-export: timeout_secs 600 → 900"),
        "{}",
        text(&edit.stdout)
    );
    assert!(probactr(home, none, &["apply", "-f", file_arg], "")
        .status
        .success());
    let exported = probactr(home, none, &["export"], "");
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let yaml = text(&exported.stdout);
    assert!(yaml.contains("timeout_secs: 900"), "{yaml}");
    assert!(
        yaml.contains("overlap: replace") && yaml.contains("jitter: none") && yaml.contains("75"),
        "the overlap and retry policy are exported: {yaml}"
    );
    assert!(
        yaml.contains("job: nightly-export") && yaml.contains("- ops-hook"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("hooks.example.com"),
        "a channel's URL is a credential, never exported: {yaml}"
    );

    // Export, then apply on an emptied cluster: the same definitions.
    for name in ["nightly-export", "heartbeat"] {
        let deleted = probactr(home, none, &["jobs", "delete", name, "--yes"], "");
        assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    }
    assert!(jobs(home).is_empty());
    let exported_file = dir.path().join("exported.yml");
    std::fs::write(&exported_file, &yaml).unwrap();
    std::fs::remove_file(&file).unwrap();
    let reproduced = probactr(home, none, &["apply", "-f", exported_file.to_str().unwrap()], "");
    assert!(reproduced.status.success(), "{}", text(&reproduced.stderr));
    let exported_again = probactr(home, none, &["export"], "");
    assert_eq!(
        text(&exported_again.stdout),
        yaml,
        "export then apply reproduces the definitions"
    );
    let other_home = home;

    // Prune deletes what apply manages and the files no longer name, never what people
    // made, unless a file adopted it.
    let token: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".config/probactr/credentials.json")).unwrap(),
    )
    .unwrap();
    let made = reqwest::Client::new()
        .post(format!("{}/api/v1/jobs", cluster.url))
        .bearer_auth(token["token"].as_str().unwrap())
        .header("content-type", "application/json")
        .body(r#"{"name": "made-by-hand", "kind": "noop"}"#)
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success());
    let only_nightly = dir.path().join("only-nightly.yml");
    let nightly_only = DEFINITIONS
        .replace("timeout_secs: 600", "timeout_secs: 900")
        .split("  - name: heartbeat")
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(&only_nightly, nightly_only).unwrap();
    std::fs::remove_file(&exported_file).unwrap();
    let pruned = probactr(
        home,
        none,
        &["apply", "-f", dir.path().to_str().unwrap(), "--prune"],
        "",
    );
    assert!(pruned.status.success(), "{}", text(&pruned.stderr));
    assert_eq!(
        text(&pruned.stdout),
        "- job heartbeat\n",
        "{}",
        text(&pruned.stdout)
    );
    let names: Vec<String> = jobs(home)
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        vec!["made-by-hand".to_owned(), "nightly-export".to_owned()]
    );
    let adopt = dir.path().join("adopt.yml");
    std::fs::write(&adopt, "jobs:\n  - name: made-by-hand\n    kind: noop\n").unwrap();
    let adopted = probactr(home, none, &["apply", "-f", adopt.to_str().unwrap()], "");
    assert!(
        text(&adopted.stdout).contains("~ job made-by-hand: adopted"),
        "{}",
        text(&adopted.stdout)
    );
    std::fs::remove_file(&adopt).unwrap();
    let pruned_again = probactr(
        home,
        none,
        &["apply", "-f", dir.path().to_str().unwrap(), "--prune"],
        "",
    );
    assert_eq!(
        text(&pruned_again.stdout),
        "- job made-by-hand\n",
        "adopted, then pruned"
    );
    std::fs::remove_file(&only_nightly).unwrap();

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "jobs:\n  - name: broken\n    kind: noop\n    timeout: 5\n  - kind: noop\n",
    )
    .unwrap();
    let refused = probactr(other_home, none, &["apply", "-f", bad.to_str().unwrap()], "");
    assert_eq!(refused.status.code(), Some(1));
    let message = text(&refused.stderr);
    assert!(
        message.contains("bad.yaml:4: jobs[0].timeout: unknown field"),
        "{message}"
    );
    assert!(
        message.contains("bad.yaml:5: jobs[1].name: is required"),
        "{message}"
    );
    std::fs::write(
        &bad,
        "jobs:\n  - name: negative\n    kind: noop\n    timeout_secs: -5\n",
    )
    .unwrap();
    let rejected = probactr(other_home, none, &["apply", "-f", bad.to_str().unwrap()], "");
    assert_eq!(rejected.status.code(), Some(1));
    assert!(
        text(&rejected.stderr).contains("bad.yaml:4: timeout_secs:"),
        "{}",
        text(&rejected.stderr)
    );
}

async fn audit_count(options: &PgConnectOptions) -> i64 {
    let pool = PgPoolOptions::new().connect_with(options.clone()).await.unwrap();
    sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(&pool)
        .await
        .unwrap()
}

/// `probactr executors cordon|uncordon|drain ID` over the API: the list shows the cordon,
/// a drained executor exits, and an unknown id is an error that says so.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn executors_are_cordoned_uncordoned_and_drained(
    _pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let none: &[(&str, &str)] = &[];
    let id: String = eventually(Duration::from_secs(30), "the executor is listed", || async {
        let out = probactr(home, none, &["executors", "list", "-o", "json"], "");
        let listed: Value = serde_json::from_slice(&out.stdout).ok()?;
        let alive = listed.as_array()?.iter().find(|e| e["state"] == "alive")?;
        Some(alive["id"].as_str()?.to_owned())
    })
    .await;

    let out = probactr(home, none, &["executors", "cordon", &id], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cordoned"), "{}", text(&out.stderr));
    let out = probactr(home, none, &["executors", "list", "-o", "json"], "");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id.as_str())
        .unwrap();
    assert_eq!(row["cordoned"], true);

    let out = probactr(home, none, &["executors", "uncordon", &id, "-o", "json"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["cordoned"], false);

    let out = probactr(home, none, &["executors", "drain", &id], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    eventually(
        Duration::from_secs(30),
        "the drained executor stopped",
        || async {
            let out = probactr(home, none, &["executors", "list", "-o", "json"], "");
            let listed: Value = serde_json::from_slice(&out.stdout).ok()?;
            let row = listed
                .as_array()?
                .iter()
                .find(|e| e["id"] == id.as_str())?
                .clone();
            (row["state"] == "stopped").then_some(())
        },
    )
    .await;
    let out = probactr(home, none, &["executors", "cordon", &id], "");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("stopped"), "{}", text(&out.stderr));

    let out = probactr(home, none, &["executors", "cordon", "not-an-executor"], "");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not-an-executor"),
        "{}",
        text(&out.stderr)
    );
}

/// `runs logs --follow` prints lines while the run is still running, and exits once it
/// has ended and all its output is printed (stderr's lines on standard error).
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn runs_logs_follow_prints_lines_while_the_run_is_still_running(
    _pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    use std::io::BufRead;

    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let saved = home.join(".config/probactr/credentials.json");
    let token: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let token = token["token"].as_str().unwrap().to_owned();
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("gate");
    let script = format!(
        "echo first line; while [ ! -e '{}' ]; do sleep 0.05; done; echo last line; echo complaint >&2",
        gate.display()
    );
    let api = reqwest::Client::new();
    let made = api
        .post(format!("{}/api/v1/jobs", cluster.url))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"name": "gated", "kind": "shell", "timeout_secs": 120,
                                  "spec": {"program": script, "shell": true}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let made: Value = json_of(made).await;
    let queued = api
        .post(format!("{}/api/v1/jobs/{}/run", cluster.url, made["id"]))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let queued: Value = json_of(queued).await;
    let run_id = queued["run_id"].as_i64().unwrap();

    let mut child = Command::new(workspace_binary("probactr"))
        .args(["runs", "logs", &run_id.to_string(), "--follow"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = tokio::task::spawn_blocking(move || (lines.recv_timeout(Duration::from_secs(60)), lines))
        .await
        .unwrap();
    let (first, lines) = first;
    assert_eq!(first.unwrap(), "first line");
    let run = api
        .get(format!("{}/api/v1/runs/{run_id}", cluster.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let run: Value = json_of(run).await;
    assert_eq!(run["state"], "running", "the line came while the run was running");
    assert!(child.try_wait().unwrap().is_none(), "the client still follows");

    std::fs::write(&gate, b"").unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    reader.join().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let rest: Vec<String> = lines.try_iter().collect();
    assert_eq!(rest, ["last line"]);
    assert!(
        text(&output.stderr).contains("complaint"),
        "{}",
        text(&output.stderr)
    );
}

async fn json_of(response: reqwest::Response) -> Value {
    let text = response.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{err}: {text}"))
}

const WORKFLOW_DEFINITIONS: &str = r#"jobs:
  - name: extract
    kind: noop
    on_success: [load]
    on_failure: [page-someone]
    triggers:
      - {kind: interval, interval_secs: 3600, params: {region: eu}}
  - name: load
    kind: noop
  - name: page-someone
    kind: noop
workflows:
  - name: nightly-etl
    description: extract then load
    steps:
      - {name: first, job: extract}
      - name: second
        job: load
        depends_on: [first]
        when: all_done
        params: {mode: full}
    triggers:
      - {kind: cron, cron: "0 0 3 * * *", params: {region: us}}
"#;

/// Child jobs, trigger parameters and workflows with their triggers go through files:
/// applied twice they change nothing, and export → delete all → apply reproduces them.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn workflows_child_jobs_and_trigger_params_round_trip(
    _pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let none: &[(&str, &str)] = &[];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etl.yaml");
    std::fs::write(&file, WORKFLOW_DEFINITIONS).unwrap();
    let file_arg = file.to_str().unwrap();

    let first = probactr(home, none, &["apply", "-f", file_arg], "");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let created = text(&first.stdout);
    assert!(created.contains("+ workflow nightly-etl"), "{created}");
    assert!(created.contains("+ trigger of workflow nightly-etl"), "{created}");
    let audit_before = audit_count(&options).await;
    let again = probactr(home, none, &["apply", "-f", file_arg], "");
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), "", "the second apply changes nothing");
    assert_eq!(audit_count(&options).await, audit_before, "no audit entry");

    let edited = WORKFLOW_DEFINITIONS.replace("mode: full", "mode: delta");
    std::fs::write(&file, edited).unwrap();
    let dry = probactr(home, none, &["apply", "-f", file_arg, "--dry-run"], "");
    let shown = text(&dry.stdout);
    assert!(shown.starts_with("~ workflow nightly-etl: steps"), "{shown}");
    assert_eq!(shown.lines().count(), 1, "only that change: {shown}");
    assert!(probactr(home, none, &["apply", "-f", file_arg], "")
        .status
        .success());

    let exported = probactr(home, none, &["export"], "");
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let yaml = text(&exported.stdout);
    for expected in [
        "on_success:\n      - load",
        "mode: delta",
        "region: us",
        "region: eu",
        "job: extract",
    ] {
        assert!(yaml.contains(expected), "{expected:?} in {yaml}");
    }

    let token: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".config/probactr/credentials.json")).unwrap(),
    )
    .unwrap();
    let api = reqwest::Client::new();
    let workflows = json_of(
        api.get(format!("{}/api/v1/workflows", cluster.url))
            .bearer_auth(token["token"].as_str().unwrap())
            .send()
            .await
            .unwrap(),
    )
    .await;
    let id = workflows["items"][0]["id"].as_i64().unwrap();
    let deleted = api
        .delete(format!("{}/api/v1/workflows/{id}", cluster.url))
        .bearer_auth(token["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    for name in ["extract", "load", "page-someone"] {
        let deleted = probactr(home, none, &["jobs", "delete", name, "--yes"], "");
        assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    }
    let exported_file = dir.path().join("exported.yml");
    std::fs::write(&exported_file, &yaml).unwrap();
    std::fs::remove_file(&file).unwrap();
    let reproduced = probactr(home, none, &["apply", "-f", exported_file.to_str().unwrap()], "");
    assert!(reproduced.status.success(), "{}", text(&reproduced.stderr));
    let exported_again = probactr(home, none, &["export"], "");
    assert_eq!(
        text(&exported_again.stdout),
        yaml,
        "export then apply reproduces them"
    );

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "workflows:\n  - name: w\n    steps:\n      - {name: a, job: nowhere}\n",
    )
    .unwrap();
    let refused = probactr(home, none, &["apply", "-f", bad.to_str().unwrap()], "");
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("bad.yaml:4: workflows[0].steps[0].job: no job is named"),
        "{}",
        text(&refused.stderr)
    );
}

/// `jobs run --wait` shows the run's states and output lines while it runs (on standard
/// error), then one line: state, duration, exit code (on standard output).
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn jobs_run_wait_shows_progress_before_the_end(
    _pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    use std::io::BufRead;

    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("gate");
    let script = format!(
        "echo first line; while [ ! -e '{}' ]; do sleep 0.05; done; echo last line",
        gate.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gated.yaml");
    std::fs::write(
        &file,
        serde_json::json!({"jobs": [{"name": "gated", "kind": "shell", "timeout_secs": 120,
                                       "spec": {"program": script, "shell": true}}]})
        .to_string(),
    )
    .unwrap();
    let none: &[(&str, &str)] = &[];
    let applied = probactr(home, none, &["apply", "-f", file.to_str().unwrap()], "");
    assert!(applied.status.success(), "{}", text(&applied.stderr));

    let mut child = Command::new(workspace_binary("probactr"))
        .args(["jobs", "run", "gated", "--wait", "--utc"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let seen = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
            let done = line.contains("| first line");
            seen.push(line);
            if done {
                break;
            }
        }
        (seen, lines)
    })
    .await
    .unwrap();
    let (seen, lines) = seen;
    assert!(
        seen.iter().any(|line| line.ends_with("] running (attempt 1)")),
        "the state change is shown: {seen:?}"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        Some("  | first line"),
        "{seen:?}"
    );
    assert!(child.try_wait().unwrap().is_none(), "shown before the run ended");

    std::fs::write(&gate, b"").unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    reader.join().unwrap();
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(output.status.success(), "{rest:?}");
    assert!(rest.contains(&"  | last line".to_owned()), "{rest:?}");
    let summary = text(&output.stdout);
    assert!(
        summary.starts_with("Run #")
            && summary.contains(" of gated succeeded in ")
            && summary.ends_with("(exit code 0)\n"),
        "{summary}"
    );
    assert_eq!(summary.lines().count(), 1, "{summary}");

    // The run again, by its id; and the job's history.
    let first: i64 = summary["Run #".len()..]
        .split(' ')
        .next()
        .and_then(|id| id.parse().ok())
        .expect("the run's id");
    let rerun = probactr(home, none, &["runs", "rerun", &first.to_string()], "");
    assert!(rerun.status.success(), "{}", text(&rerun.stderr));
    let second: i64 = text(&rerun.stdout).trim().parse().expect("the new run's id");
    assert!(second > first);
    let history = probactr(home, none, &["jobs", "history", "gated", "-o", "json"], "");
    assert!(history.status.success(), "{}", text(&history.stderr));
    let versions: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    assert_eq!(versions[0]["action"], "create", "{versions}");
}

const NAMESPACED: &str = r#"jobs:
  - name: tick
    kind: noop
    triggers:
      - {kind: interval, interval_secs: 600}
workflows:
  - name: etl
    steps:
      - {name: first, job: tick}
"#;

/// `-n` and `PROBACTR_NAMESPACE` scope listings; workflows, secrets, alerts, the ledger
/// and the forecast have commands whose `-o json` parses; `status` reads as a summary.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn namespaces_scope_listings_and_every_object_has_commands(
    _pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let none: &[(&str, &str)] = &[];
    let run = |args: &[&str], stdin: &str| -> Output {
        let out = probactr(home, none, args, stdin);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        out
    };
    let json = |args: &[&str]| -> Vec<Value> {
        let out = run(args, "");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|err| panic!("{args:?}: {err}: {}", text(&out.stdout)))
    };
    run(&["namespaces", "create", "payments"], "");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payments.yaml");
    std::fs::write(&file, NAMESPACED).unwrap();
    run(&["-n", "payments", "apply", "-f", file.to_str().unwrap()], "");
    let hello = dir.path().join("hello.yaml");
    std::fs::write(
        &hello,
        "channels:\n  - {name: ops-hook, kind: webhook, config: {url: \"https://hooks.example.com/ops\"}}\n\
         alert_rules:\n  - {name: hello-failures, events: [run_failed], job: hello, channels: [ops-hook]}\n\
         jobs:\n  - {name: hello, kind: noop}\n",
    )
    .unwrap();
    run(&["apply", "-f", hello.to_str().unwrap()], "");

    assert_eq!(json(&["jobs", "list", "-o", "json"]).len(), 2);
    let scoped = json(&["-n", "payments", "jobs", "list", "-o", "json"]);
    assert_eq!(scoped.len(), 1);
    assert_eq!(scoped[0]["name"], "tick");
    let by_env = probactr(
        home,
        &[("PROBACTR_NAMESPACE", "payments")],
        &["jobs", "list", "-o", "json"],
        "",
    );
    let by_env: Vec<Value> = serde_json::from_slice(&by_env.stdout).unwrap();
    assert_eq!(by_env.len(), 1, "PROBACTR_NAMESPACE scopes too");

    let workflows = json(&["-n", "payments", "workflows", "list", "-o", "json"]);
    assert_eq!(workflows[0]["name"], "etl");
    assert!(json(&["-n", "default", "workflows", "list", "-o", "json"]).is_empty());
    run(&["-n", "payments", "workflows", "run", "etl"], "");
    run(&["-n", "payments", "workflows", "pause", "etl"], "");
    let shown = text(&run(&["-n", "payments", "workflows", "get", "etl"], "").stdout);
    assert!(
        shown.contains("paused") && shown.contains("STEPS") && shown.contains("first"),
        "{shown}"
    );

    run(&["-n", "payments", "secrets", "set", "db-password"], "s3cret\n");
    let listed = run(&["-n", "payments", "secrets", "list", "-o", "json"], "");
    assert!(!text(&listed.stdout).contains("s3cret"), "never a value");
    let secrets: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(secrets[0]["name"], "db-password");
    assert!(json(&["-n", "default", "secrets", "list", "-o", "json"]).is_empty());
    run(&["-n", "payments", "secrets", "delete", "db-password"], "");

    let rules = json(&["-n", "default", "alerts", "rules", "list", "-o", "json"]);
    assert_eq!(rules[0]["name"], "hello-failures");
    assert!(json(&["-n", "payments", "alerts", "rules", "list", "-o", "json"]).is_empty());
    let channel = run(&["alerts", "channels", "get", "ops-hook", "-o", "json"], "");
    let channel: Value = serde_json::from_slice(&channel.stdout).unwrap();
    assert_eq!(channel["kind"], "webhook");
    run(&["alerts", "rules", "delete", "hello-failures"], "");
    assert!(json(&["alerts", "rules", "list", "-o", "json"]).is_empty());

    let forecast = json(&["-n", "payments", "forecast", "--until", "+2h", "-o", "json"]);
    assert!(
        !forecast.is_empty() && forecast.iter().all(|f| f["job_name"] == "tick"),
        "{forecast:?}"
    );
    assert!(json(&["-n", "default", "forecast", "-o", "json"]).is_empty());
    let table = text(&run(&["forecast", "--job", "tick", "--utc"], "").stdout);
    assert!(table.starts_with("INSTANT (UTC) "), "{table}");
    json(&["ledger", "--job", "tick", "--from", "-1h", "-o", "json"]);
    let bad = probactr(home, none, &["ledger", "--from", "someday"], "");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("--from: \"someday\""),
        "{}",
        text(&bad.stderr)
    );

    let status = text(&run(&["status"], "").stdout);
    assert!(status.contains("executors:") && !status.contains('{'), "{status}");
}

const FOUR_FAULTS: &str = r#"jobs:
  - name: faulty
    kind: shell
    spec: {args: ["--all"]}
    timeout_secs: 99999999
    triggers:
      - kind: cron
        cron: "61 * * * *"
        timezone: Mars/Olympus
"#;

/// A dry run checks as much as an apply and names every problem at once, each with its
/// file, line and field; the API lists them in `errors` too.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn apply_dry_run_lists_every_fault_at_once(_pool_options: PgPoolOptions, options: PgConnectOptions) {
    let cluster = cluster(&options).await;
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    login(&cluster, home);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("faults.yaml");
    std::fs::write(&file, FOUR_FAULTS).unwrap();
    let none: &[(&str, &str)] = &[];
    let dry = probactr(
        home,
        none,
        &["apply", "-f", file.to_str().unwrap(), "--dry-run"],
        "",
    );
    assert_eq!(dry.status.code(), Some(1));
    let message = text(&dry.stderr);
    for fault in [
        "faults.yaml:4: spec.program:",
        "faults.yaml:5: timeout_secs:",
        "faults.yaml:8: cron",
        "faults.yaml:9: timezone:",
    ] {
        assert!(message.contains(fault), "{fault:?} in {message}");
    }

    let token: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".config/probactr/credentials.json")).unwrap(),
    )
    .unwrap();
    let answer = reqwest::Client::new()
        .post(format!("{}/api/v1/definitions/apply?dry_run=true", cluster.url))
        .bearer_auth(token["token"].as_str().unwrap())
        .header("content-type", "application/yaml")
        .body(FOUR_FAULTS)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 422);
    let body = json_of(answer).await;
    let errors = body["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 4, "{body}");
    let lines: Vec<i64> = errors.iter().map(|e| e["line"].as_i64().unwrap()).collect();
    assert_eq!(lines, [4, 5, 8, 9], "{body}");
    assert_eq!(
        body["error"]["fields"].as_object().unwrap().len(),
        4,
        "the old shape holds"
    );
}
