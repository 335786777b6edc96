//! Start-up against PostgreSQL or Redis that does not answer: every binary retries with a
//! log line per attempt naming the address (password hidden), exits non-zero naming the
//! service once `PROBACTR_CONNECT_TIMEOUT` passes, and starts normally when the service
//! comes up during the wait.

use super::*;

use infra::services::{free_port, TempDir};
use probactr_common::model::ProcessRole;
use tokio::net::{TcpListener, TcpStream};

const BINARIES: [&str; 3] = ["probactr-manager", "probactr-executor", "probactr-monitor"];

/// The settings of a process whose `var` names `url`, with a short connect timeout.
fn env_pointing(database_url: &str, var: &str, url: &str, timeout: &str) -> HashMap<String, String> {
    let mut env = fast_env(database_url, &unique_prefix("startup"));
    env.insert(var.to_owned(), url.to_owned());
    env.insert("PROBACTR_CONNECT_TIMEOUT".to_owned(), timeout.to_owned());
    env.insert(
        "PROBACTR_MANAGER_LISTEN".to_owned(),
        format!("127.0.0.1:{}", free_port()),
    );
    env.insert(
        "PROBACTR_ADMIN_PASSWORD".to_owned(),
        "a long enough password".to_owned(),
    );
    env.insert("RUST_LOG".to_owned(), "info".to_owned());
    env
}

/// Runs `binary` to its exit (within `within`); its status, how long it took and its log.
async fn run_to_exit(
    binary: &str,
    env: &HashMap<String, String>,
    within: Duration,
) -> (bool, Duration, String) {
    let dir = TempDir::new("startup");
    let log = dir.path().join("log");
    let started = Instant::now();
    let mut process = support::spawn_workspace_logged(binary, binary, env, &log);
    let status = process.wait_exit(within).await;
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("== {binary}:\n{said}");
    (status.success(), started.elapsed(), said)
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_service_that_never_answers_ends_start_up_with_a_clear_error(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (_pool, url) = pool_and_url(pool_options, options).await;
    let dead = format!(
        "postgres://probactr:hunter2secret@127.0.0.1:{}/probactr",
        free_port()
    );
    for binary in BINARIES {
        let env = env_pointing(&url, "DATABASE_URL", &dead, "2s");
        let (success, took, said) = run_to_exit(binary, &env, Duration::from_secs(20)).await;
        assert!(!success, "{binary} must exit non-zero");
        assert!(
            took < Duration::from_secs(12),
            "{binary} exits soon after the bound: {took:?}"
        );
        let address = dead.replace("hunter2secret", "***");
        assert!(
            said.contains(&format!("PostgreSQL at {address} does not answer yet")),
            "{binary} logs each attempt with the address: {said}"
        );
        assert!(
            said.contains(&format!("PostgreSQL at {address} did not answer within 2s")),
            "{binary} names the service when it gives up: {said}"
        );
        assert!(
            !said.contains("hunter2secret"),
            "{binary} never logs the password"
        );
    }
    // Executors and monitors need Redis too.
    let dead_redis = format!("redis://:hunter2secret@127.0.0.1:{}", free_port());
    for binary in ["probactr-executor", "probactr-monitor"] {
        let env = env_pointing(&url, "REDIS_URL", &dead_redis, "2s");
        let (success, took, said) = run_to_exit(binary, &env, Duration::from_secs(20)).await;
        assert!(!success, "{binary} must exit non-zero");
        assert!(took < Duration::from_secs(12), "{binary}: {took:?}");
        assert!(
            said.contains("Redis at redis://:***@127.0.0.1:") && said.contains("did not answer within 2s"),
            "{binary} names Redis when it gives up: {said}"
        );
        assert!(
            !said.contains("hunter2secret"),
            "{binary} never logs the password"
        );
    }
}

/// Forwards connections on `port` to `upstream` from `delay` on (the service "comes up").
fn come_up_later(port: u16, upstream: SocketAddr, delay: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the reserved port");
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if let Ok(mut server) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    })
}

/// The `host:port` of a URL's server.
fn server_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("a URL").1;
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let host = host.split(['/', '?']).next().expect("host:port");
    let host = host.replace("localhost", "127.0.0.1");
    host.parse()
        .unwrap_or_else(|_| format!("{host}:6379").parse().expect("host:port"))
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn an_executor_starts_once_postgres_and_redis_come_up_during_the_wait(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let (pg_port, redis_port) = (free_port(), free_port());
    let late_url = url.replacen(&server_of(&url).to_string(), &format!("127.0.0.1:{pg_port}"), 1);
    assert_ne!(
        late_url, url,
        "the test database's URL names its server as 127.0.0.1:port"
    );
    let mut env = env_pointing(&url, "DATABASE_URL", &late_url, "30s");
    env.insert("REDIS_URL".to_owned(), format!("redis://127.0.0.1:{redis_port}"));
    let postgres = come_up_later(pg_port, server_of(&url), Duration::from_secs(2));
    let redis = come_up_later(
        redis_port,
        server_of(&support::redis_url()),
        Duration::from_secs(3),
    );
    let dir = TempDir::new("startup");
    let log = dir.path().join("log");
    let _executor = support::spawn_workspace_logged("probactr-executor", "executor", &env, &log);
    eventually(Duration::from_secs(20), "the executor registers", || async {
        let alive = processes::list(&pool, ProcessRole::Executor)
            .await
            .unwrap()
            .into_iter()
            .any(|p| p.state == ProcessState::Alive);
        alive.then_some(())
    })
    .await;
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        said.contains(&format!("PostgreSQL at {late_url} does not answer yet")),
        "it said it was waiting: {said}"
    );
    assert!(
        said.contains("PostgreSQL at") && said.contains("answers"),
        "{said}"
    );
    postgres.abort();
    redis.abort();
}
