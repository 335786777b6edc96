//! The manager's read replica (`DATABASE_READ_URL`), against a real streaming replica of
//! a private PostgreSQL: lists are read from it while it keeps up, from the primary once
//! it lags past `PROBACTR_READ_MAX_LAG` or is gone, and a user who has just changed
//! something reads the change at once.

use super::*;

use infra::services::{free_port, TempDir};
use serde_json::Value;

const PASSWORD: &str = "a long enough password";

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn token(&self, username: &str) -> Option<String> {
        let reply = self
            .http
            .post(format!("{}/auth/token", self.base))
            .header("content-type", "application/json")
            .body(json!({"username": username, "password": PASSWORD}).to_string())
            .send()
            .await
            .ok()?;
        let body: Value = serde_json::from_str(&reply.text().await.ok()?).ok()?;
        body["token"].as_str().map(str::to_owned)
    }

    async fn post(&self, token: &str, path: &str, body: Value) -> reqwest::StatusCode {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("the manager answers")
            .status()
    }

    /// The job names `token`'s user is shown; None unless the answer is a 200.
    async fn job_names(&self, token: &str) -> Option<Vec<String>> {
        let reply = self
            .http
            .get(format!("{}/jobs?limit=500", self.base))
            .bearer_auth(token)
            .send()
            .await
            .ok()?;
        if !reply.status().is_success() {
            return None;
        }
        let body: Value = serde_json::from_str(&reply.text().await.ok()?).ok()?;
        Some(
            body["items"]
                .as_array()?
                .iter()
                .filter_map(|job| job["name"].as_str().map(str::to_owned))
                .collect(),
        )
    }
}

async fn on_replica(replica: &PrivatePostgres, statement: &'static str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&replica.url("probactr"))
        .await
        .expect("connect to the replica");
    sqlx::query(statement).execute(&mut conn).await.expect(statement);
}

#[tokio::test]
async fn reads_go_to_a_replica_that_keeps_up_and_to_the_primary_otherwise() {
    let primary = PrivatePostgres::start().await;
    let url = primary.create_database("probactr").await;
    let replica = primary.base_backup().await;
    replica.start_again().await;

    let port = free_port();
    let mut env = fast_env(&url, &unique_prefix("replica"));
    env.insert("PROBACTR_MANAGER_LISTEN".to_owned(), format!("127.0.0.1:{port}"));
    env.insert("PROBACTR_ADMIN_PASSWORD".to_owned(), PASSWORD.to_owned());
    env.insert("DATABASE_READ_URL".to_owned(), replica.url("probactr"));
    env.insert("PROBACTR_READ_MAX_LAG".to_owned(), "2s".to_owned());
    env.insert("RUST_LOG".to_owned(), "warn,probactr_manager=info".to_owned());
    let dir = TempDir::new("replica");
    let log = dir.path().join("manager.log");
    let _manager = support::spawn_workspace_logged("probactr-manager", "manager", &env, &log);
    let api = Api {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{port}/api/v1"),
    };
    let admin = eventually(Duration::from_secs(30), "the manager answers", || {
        api.token("admin")
    })
    .await;
    let created = api
        .post(
            &admin,
            "/users",
            json!({"username": "reader", "password": PASSWORD, "role": "viewer"}),
        )
        .await;
    assert_eq!(created, reqwest::StatusCode::CREATED);
    let reader = api.token("reader").await.expect("the reader's token");
    let job = |name: &str| json!({"name": name, "kind": "noop"});
    assert_eq!(
        api.post(&admin, "/jobs", job("before")).await,
        reqwest::StatusCode::CREATED
    );
    eventually(
        Duration::from_secs(10),
        "the reader sees the first job",
        || async {
            api.job_names(&reader)
                .await
                .filter(|names| names.iter().any(|name| name == "before"))
        },
    )
    .await;

    eventually(
        Duration::from_secs(10),
        "the manager reads from the replica",
        || async {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            said.contains("the read replica keeps up").then_some(())
        },
    )
    .await;

    // The replica stops replaying: a change is seen at once by its author (the primary)
    // and not by another user (the replica), until the replica lags past 2 s.
    on_replica(&replica, "SELECT pg_wal_replay_pause()").await;
    assert_eq!(
        api.post(&admin, "/jobs", job("during")).await,
        reqwest::StatusCode::CREATED
    );
    let author_sees = api.job_names(&admin).await.expect("the author's list");
    let reader_sees = api.job_names(&reader).await.expect("the reader's list");
    assert!(author_sees.iter().any(|name| name == "during"), "{author_sees:?}");
    assert!(
        !reader_sees.iter().any(|name| name == "during"),
        "the reader's list comes from the paused replica: {reader_sees:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let waited = Instant::now();
    eventually(
        Duration::from_secs(10),
        "the reader's list from the primary",
        || async {
            api.job_names(&reader)
                .await
                .filter(|names| names.iter().any(|name| name == "during"))
        },
    )
    .await;
    assert!(
        waited.elapsed() >= Duration::from_millis(500),
        "the lagging replica served until its lag passed the bound"
    );

    // A replica gone: reads keep being answered, from the primary.
    on_replica(&replica, "SELECT pg_wal_replay_resume()").await;
    replica.crash().await;
    eventually(
        Duration::from_secs(10),
        "lists answered without the replica",
        || async {
            api.job_names(&reader)
                .await
                .filter(|names| names.iter().any(|name| name == "during"))
        },
    )
    .await;
    // Requests switch as soon as the lag passes the bound; the watcher says so at its
    // next sample, which a crashed replica may make wait for its connection's timeout.
    eventually(
        Duration::from_secs(15),
        "the manager says reads go to the primary",
        || async {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            said.contains("reads go to the primary").then_some(())
        },
    )
    .await;
}
