//! Live output: reading from offsets, following as server-sent events, the bound.

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::*;

/// An executor running in this process until the returned token is cancelled.
pub(super) fn start_executor(
    pool: &PgPool,
    settings: &[(&str, &str)],
) -> (CancellationToken, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let shutdown = CancellationToken::new();
    let executor = tokio::spawn(probactr_executor::run(
        executor_config_with(pool, settings),
        shutdown.clone(),
    ));
    (shutdown, executor)
}

/// A shell job that prints `start`, waits for `gate` to exist, then prints `done` on
/// stderr.
fn gated_job(name: &str, gate: &Path) -> Value {
    let script = format!(
        "echo start; while [ ! -e '{}' ]; do sleep 0.05; done; echo done >&2",
        gate.display()
    );
    json!({"name": name, "kind": "shell", "spec": {"program": script, "shell": true}, "timeout_secs": 120})
}

pub(super) async fn run_now(app: &TestApp, token: &str, job: &Value) -> i64 {
    let queued = app
        .post(&format!("/api/v1/jobs/{}/run", job["id"]), token, json!({}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    queued.body["run_id"].as_i64().unwrap()
}

/// Reads the output from `offset` until `until` holds for what was read, or panics after
/// a generous while.
async fn read_until(
    app: &TestApp,
    token: &str,
    run_id: i64,
    offset: i64,
    until: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let page = app
            .get(&format!("/api/v1/runs/{run_id}/output?offset={offset}"), token)
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        if until(&page.body) {
            return page.body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {}",
            page.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn texts(page: &Value) -> Vec<(String, String)> {
    page["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["stream"].as_str().unwrap().to_owned(),
                c["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn output_is_read_from_offsets_while_the_run_runs(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let job = app.job(&admin, gated_job("gated", &gate)).await;
    let (shutdown, executor) = start_executor(app.pool(), &[]);
    let run_id = run_now(&app, &admin, &job).await;

    let first = read_until(&app, &admin, run_id, 0, |page| {
        !page["chunks"].as_array().unwrap().is_empty()
    })
    .await;
    assert_eq!(texts(&first), [("stdout".to_owned(), "start\n".to_owned())]);
    assert_eq!(first["ended"], false);
    assert_eq!(first["state"], "running");
    let next = first["next_offset"].as_i64().unwrap();
    assert_eq!(next, 6);
    // Nothing new yet: the same offset comes back.
    let nothing = app
        .get(&format!("/api/v1/runs/{run_id}/output?offset={next}"), &admin)
        .await;
    assert_eq!(texts(&nothing.body), Vec::<(String, String)>::new());
    assert_eq!(nothing.body["next_offset"], next);

    std::fs::write(&gate, b"").unwrap();
    let last = read_until(&app, &admin, run_id, next, |page| page["ended"] == true).await;
    assert_eq!(texts(&last), [("stderr".to_owned(), "done\n".to_owned())]);
    assert_eq!(last["state"], "succeeded");
    assert_eq!(last["next_offset"], 11);
    let whole = app.get(&format!("/api/v1/runs/{run_id}/output"), &admin).await;
    assert_eq!(texts(&whole.body).len(), 2);

    assert_field(
        &app.get(&format!("/api/v1/runs/{run_id}/output?offset=-1"), &admin)
            .await,
        "offset",
    );
    assert_eq!(
        app.get("/api/v1/runs/424242/output", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    shutdown.cancel();
    executor.await.unwrap().unwrap();
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_output_stream_follows_a_run_to_its_end(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let job = app.job(&admin, gated_job("streamed", &gate)).await;
    let (shutdown, executor) = start_executor(app.pool(), &[]);
    let run_id = run_now(&app, &admin, &job).await;

    let request = Request::builder()
        .uri(format!("/api/v1/runs/{run_id}/output/stream"))
        .header(header::AUTHORIZATION, format!("Bearer {admin}"))
        .body(Body::empty())
        .unwrap();
    let response = app.app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut body = response.into_body();
    let mut received = String::new();
    let mut opened = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !received.contains("event: end") {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("the stream ends")
            .expect("the stream ends with its end event")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            received.push_str(&String::from_utf8_lossy(&data));
        }
        if !opened && received.contains(r#""text":"start\n""#) {
            // The run is still running: only now may it end.
            let run = store::runs::get(app.pool(), run_id).await.unwrap().unwrap();
            assert_eq!(run.state, RunState::Running);
            assert!(!received.contains("done"));
            std::fs::write(&gate, b"").unwrap();
            opened = true;
        }
    }
    assert!(opened, "{received}");
    assert!(received.contains(r#""stream":"stderr""#), "{received}");
    assert!(received.contains(r#""text":"done\n""#), "{received}");
    assert!(
        received.contains(r#"event: end"#) && received.contains(r#""state":"succeeded""#),
        "{received}"
    );
    assert!(
        received.contains("id: 11"),
        "the last chunk resumes at the end: {received}"
    );
    // The stream closes after its end event.
    let after = tokio::time::timeout(Duration::from_secs(30), body.frame())
        .await
        .unwrap();
    assert!(after.is_none(), "nothing after the end event");
    shutdown.cancel();
    executor.await.unwrap().unwrap();
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_output_keeps_its_head_and_tail_within_the_bound(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    // 3000 lines of 10 bytes ("line 0001\n"), far beyond a 4 KiB bound.
    let job = app
        .job(
            &admin,
            json!({"name": "chatty", "kind": "shell", "timeout_secs": 120, "spec": {
                "program": "i=1; while [ $i -le 3000 ]; do printf 'line %04d\\n' $i; i=$((i+1)); done",
                "shell": true}}),
        )
        .await;
    let (shutdown, executor) = start_executor(app.pool(), &[("PROBACTR_OUTPUT_LIMIT", "4KiB")]);
    let run_id = run_now(&app, &admin, &job).await;
    let page = read_until(&app, &admin, run_id, 0, |page| page["ended"] == true).await;
    shutdown.cancel();
    executor.await.unwrap().unwrap();

    let text: String = texts(&page).iter().map(|(_, text)| text.as_str()).collect();
    assert!(
        text.starts_with("line 0001\nline 0002\n"),
        "the head is kept: {text}"
    );
    assert!(text.ends_with("line 2999\nline 3000\n"), "the tail is kept");
    assert!(!text.contains("line 1500\n"), "the middle is cut");
    let cuts: Vec<&Value> = page["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["stream"] == "cut")
        .collect();
    assert_eq!(cuts.len(), 1, "one marker where the middle was cut");
    let cut_text = cuts[0]["text"].as_str().unwrap();
    assert!(cut_text.contains("bytes cut"), "{cut_text}");
    assert_eq!(page["next_offset"], 30_000);
    // What is stored stays within the bound (a chunk of slack: pieces are cut whole).
    let stored: i64 =
        sqlx::query_scalar("SELECT coalesce(sum(byte_count), 0)::bigint FROM run_output WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert!(stored <= 4096 + 16 * 1024, "{stored} bytes stored");
    assert!(stored >= 2048, "{stored} bytes stored");
    // The head and tail add up with the cut to the whole.
    let cut: i64 = cut_text
        .trim_start_matches("[… ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(stored + cut, 30_000);
    // The download has the same text, marker included.
    let browser = app.browser("admin").await;
    let download = app
        .page(&format!("/runs/{run_id}/output.txt"), &browser.cookie)
        .await;
    assert_eq!(download.status, StatusCode::OK);
    assert_eq!(download.text, text);
}

/// Live output streams are bounded: one user holds at most `PROBACTR_SSE_PER_USER` (10
/// by default) open at once, an 11th gets 429 while the rest of the API keeps answering
/// (another user's stream included), a place comes back when a stream ends, and a stream
/// ends once the token it was opened with is revoked.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn an_eleventh_stream_of_one_user_gets_429(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let other = app.user("other", Role::Viewer).await;
    let job = app.job(&admin, noop("watched")).await;
    // A queued run: nothing runs it, so its stream stays open.
    let run = store::runs::queue_now(app.pool(), job["id"].as_i64().unwrap())
        .await
        .unwrap();
    let open = |token: &str| {
        let request = Request::builder()
            .uri(format!("/api/v1/runs/{}/output/stream", run.id))
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        app.app.clone().oneshot(request)
    };
    let mut streams = Vec::new();
    for _ in 0..10 {
        let response = open(&admin).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        streams.push(response);
    }
    let refused = open(&admin).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    assert!(
        String::from_utf8_lossy(&body).contains("PROBACTR_SSE_PER_USER"),
        "{body:?}"
    );
    assert_eq!(app.get("/api/v1/jobs", &admin).await.status, StatusCode::OK);
    let others = open(&other).await.unwrap();
    assert_eq!(
        others.status(),
        StatusCode::OK,
        "another user has places of their own"
    );

    drop(streams.pop());
    let again = open(&admin).await.unwrap();
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "an ended stream gives its place back"
    );

    // The other user's token is revoked: their stream ends, with an error event.
    let revoked = app
        .call(Method::DELETE, "/api/v1/auth/token", Some(&other), None)
        .await;
    assert!(revoked.status.is_success(), "{}", revoked.text);
    let mut body = others.into_body();
    let mut received = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("the stream ends once its token is revoked");
        let Some(frame) = frame else { break };
        if let Ok(data) = frame.unwrap().into_data() {
            received.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(received.contains("event: error"), "{received}");
}

/// A live output stream ends after `PROBACTR_SSE_MAX_SECS` even while its run goes on
/// (the client reconnects from its last event's id), and gives its place back.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_stream_ends_after_its_maximum_age(pool: PgPool) {
    let mut app = TestApp::new(pool);
    app.state = app.state.clone().with_stream_limits(1, Duration::from_secs(1));
    app.app = probactr_manager::app(app.state.clone());
    let admin = app.admin().await;
    let job = app.job(&admin, noop("watched long")).await;
    // A queued run: nothing runs it, so only the age limit ends its stream.
    let run = store::runs::queue_now(app.pool(), job["id"].as_i64().unwrap())
        .await
        .unwrap();
    let open = || {
        let request = Request::builder()
            .uri(format!("/api/v1/runs/{}/output/stream", run.id))
            .header(header::AUTHORIZATION, format!("Bearer {admin}"))
            .body(Body::empty())
            .unwrap();
        app.app.clone().oneshot(request)
    };
    let stream = open().await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let started = tokio::time::Instant::now();
    let mut body = stream.into_body();
    loop {
        let frame = tokio::time::timeout_at(started + Duration::from_secs(20), body.frame())
            .await
            .expect("the stream ends after PROBACTR_SSE_MAX_SECS");
        if frame.is_none() {
            break;
        }
    }
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "ended after its age, not before: {:?}",
        started.elapsed()
    );
    drop(body);
    assert_eq!(
        open().await.unwrap().status(),
        StatusCode::OK,
        "the ended stream gave its place back"
    );
}

/// A live output stream opened in a browser session ends once the session does (logout).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_sessions_stream_ends_at_logout(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let b = app.browser("admin").await;
    let job = app.job(&admin, noop("watched in a browser")).await;
    let run = store::runs::queue_now(app.pool(), job["id"].as_i64().unwrap())
        .await
        .unwrap();
    let request = Request::builder()
        .uri(format!("/api/v1/runs/{}/output/stream", run.id))
        .header(header::COOKIE, &b.cookie)
        .body(Body::empty())
        .unwrap();
    let stream = app.app.clone().oneshot(request).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let logout = app.form("/logout", &b.cookie, &[("csrf", &b.csrf)]).await;
    assert_eq!(logout.status, StatusCode::SEE_OTHER, "{}", logout.text);
    let mut body = stream.into_body();
    let mut received = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("the stream ends once its session does");
        let Some(frame) = frame else { break };
        if let Ok(data) = frame.unwrap().into_data() {
            received.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(received.contains("event: error"), "{received}");
}

/// Reads the run's view until `until` holds for it, or panics after a generous while.
pub(super) async fn run_until(
    app: &TestApp,
    token: &str,
    run_id: i64,
    until: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let run = app.get(&format!("/api/v1/runs/{run_id}"), token).await;
        assert_eq!(run.status, StatusCode::OK, "{}", run.text);
        if until(&run.body) {
            return run.body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {}",
            run.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn progress_written_by_the_job_is_seen_while_it_runs(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let script = format!(
        r#"printf '{{"percent": 42, "message": "rows 420/1000"}}' > "$PROBACTR_PROGRESS_FILE"; while [ ! -e '{}' ]; do sleep 0.05; done"#,
        gate.display()
    );
    let job = app
        .job(
            &admin,
            json!({"name": "progressing", "kind": "shell", "spec": {"program": script, "shell": true}, "timeout_secs": 120}),
        )
        .await;
    let (shutdown, executor) = start_executor(app.pool(), &[]);
    // A first run through the open gate: the duration the second one's end is estimated from.
    std::fs::write(&gate, b"").unwrap();
    let first = run_now(&app, &admin, &job).await;
    let ended = run_until(&app, &admin, first, |run| run["state"] == "succeeded").await;
    assert_eq!(ended["progress"], Value::Null, "an ended run shows no progress");
    std::fs::remove_file(&gate).unwrap();

    let run_id = run_now(&app, &admin, &job).await;
    let running = run_until(&app, &admin, run_id, |run| run["progress"]["percent"] == 42.0).await;
    assert_eq!(running["state"], "running");
    assert_eq!(running["progress"]["message"], "rows 420/1000");
    assert!(running["progress"]["estimated_end"].is_string(), "{running}");
    // Followers of the output see it too.
    let page = app.get(&format!("/api/v1/runs/{run_id}/output"), &admin).await;
    assert_eq!(page.body["progress"]["percent"], 42.0, "{}", page.text);

    std::fs::write(&gate, b"").unwrap();
    let ended = run_until(&app, &admin, run_id, |run| run["state"] == "succeeded").await;
    assert_eq!(ended["progress"], Value::Null);
    shutdown.cancel();
    executor.await.unwrap().unwrap();
}
