//! The output archive against a real S3-compatible server: moto's (`moto_server`,
//! installed by `install.sh` into the target directory, which `scripts/test` runs). A run
//! printing 5 MiB, past the bound PostgreSQL keeps, is read back whole from the archive,
//! and its object is gone once retention deleted the run. Skips, saying so, when moto is
//! not installed.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use probactr_common::archive::OutputArchive;
use probactr_common::store::archived_outputs;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::output::{run_now, run_until, start_executor};
use super::*;

const BUCKET: &str = "probactr-test";

/// Lines of 64 bytes: 5 MiB.
const LINES: usize = 81_920;

/// `<target>/moto/bin/moto_server`, where `install.sh` puts it; None when it is not there.
fn moto_server() -> Option<PathBuf> {
    let target = super::browser::artifact_dir().parent()?.to_path_buf();
    let server = target.join("moto/bin/moto_server");
    server.is_file().then_some(server)
}

/// A moto server on a free port, with the test's bucket; killed when dropped.
struct S3 {
    _child: Child,
    endpoint: String,
}

impl S3 {
    async fn start(server: PathBuf) -> S3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("moto_server starts");
        let endpoint = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        // Creating the bucket is also the readiness check (moto takes any credentials).
        loop {
            if let Ok(answer) = client.put(format!("{endpoint}/{BUCKET}")).send().await {
                assert!(answer.status().is_success(), "bucket: {}", answer.status());
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "moto_server did not answer"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        S3 {
            _child: child,
            endpoint,
        }
    }

    fn settings<'a>(&'a self, spool: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("PROBACTR_OUTPUT_ARCHIVE", "s3://probactr-test/clusters/test"),
            ("PROBACTR_OUTPUT_SPOOL", spool),
            ("AWS_ENDPOINT_URL", &self.endpoint),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
    }
}

/// The 5 MiB the job prints.
fn expected_output() -> String {
    (0..LINES).map(|i| format!("{i:063}\n")).collect()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_runs_full_output_is_read_from_the_archive_and_gone_after_retention(pool: PgPool) {
    let Some(server) = moto_server() else {
        eprintln!(
            "output archive test skipped: moto_server is not installed \
             (run `bash manager/tests/api/archive/install.sh`; scripts/test does)"
        );
        return;
    };
    let s3 = S3::start(server).await;
    let spool = tempfile::tempdir().unwrap();
    let spool_dir = spool.path().display().to_string();
    let settings = s3.settings(&spool_dir);
    let config = executor_config_with(&pool, &settings);
    let archive = OutputArchive::new(config.output_archive.as_ref().unwrap()).unwrap();

    let mut state = AppState::new(pool.clone(), &redis_url())
        .unwrap()
        .with_fast_hashing();
    state.handles.archive = Some(archive.clone());
    let app = TestApp {
        app: probactr_manager::app(state.clone()),
        state,
    };
    let admin = app.admin().await;
    let script = format!("awk 'BEGIN {{ for (i = 0; i < {LINES}; i++) printf \"%063d\\n\", i }}'");
    let job = app
        .job(
            &admin,
            json!({"name": "talkative", "kind": "shell", "spec": {"program": script, "shell": true}, "timeout_secs": 120}),
        )
        .await;
    let (shutdown, executor) = start_executor(&pool, &settings);
    let run_id = run_now(&app, &admin, &job).await;
    run_until(&app, &admin, run_id, |run| run["state"] == "succeeded").await;

    // PostgreSQL keeps the head and the tail (1 MiB); the archive the whole.
    let stored = app.get(&format!("/api/v1/runs/{run_id}/output"), &admin).await;
    assert!(stored.text.contains("\"cut\""), "the bound cut the middle");
    let expected = expected_output();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let full = app
            .get(&format!("/api/v1/runs/{run_id}/output?full=true"), &admin)
            .await;
        assert_eq!(full.status, StatusCode::OK, "{}", full.text);
        let text = full.body["chunks"][0]["text"].as_str().unwrap_or_default();
        if text.len() == expected.len() {
            assert!(text == expected, "the archived output is the printed output");
            assert_eq!(full.body["ended"], true);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the output never reached the archive"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        std::fs::read_dir(spool.path()).unwrap().count(),
        0,
        "the spool is emptied"
    );
    assert_field(
        &app.get(&format!("/api/v1/runs/{run_id}/output?full=maybe"), &admin)
            .await,
        "full",
    );
    shutdown.cancel();
    executor.await.unwrap().unwrap();

    // Retention deletes the run, then its object.
    let mut monitor_settings = settings.clone();
    monitor_settings.extend([
        ("PROBACTR_RETENTION", "1s"),
        ("PROBACTR_REAP_INTERVAL", "1s"),
        ("PROBACTR_SECRET_KEY", probactr_testkit::TEST_SECRET_KEY),
    ]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stop = CancellationToken::new();
    let monitor = tokio::spawn(probactr_monitor::run(
        executor_config_with(&pool, &monitor_settings),
        stop.clone(),
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while archive.read(run_id).await.unwrap().is_some()
        || !archived_outputs::orphans(&pool, 10).await.unwrap().is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "retention left the archived output"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        app.get(&format!("/api/v1/runs/{run_id}"), &admin).await.status,
        StatusCode::NOT_FOUND
    );
    stop.cancel();
    monitor.await.unwrap().unwrap();
}
