//! A benchmark cluster: a fresh database on the local PostgreSQL, a fresh Redis key
//! prefix, and real probactr processes started from the binaries built next to this one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use probactr_common::store;
use sqlx::PgPool;
use tokio::process::{Child, Command};

/// A database, a prefix and the processes using them; [`Cluster::teardown`] removes all.
pub struct Cluster {
    admin: PgPool,
    database: String,
    pub database_url: String,
    pub redis_url: String,
    pub prefix: String,
    pub pool: PgPool,
    pub processes: Vec<(String, Child)>,
}

fn base_database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn with_database(url: &str, database: &str) -> String {
    let (head, query) = url
        .split_once('?')
        .map(|(h, q)| (h, format!("?{q}")))
        .unwrap_or((url, String::new()));
    let server = head.rsplit_once('/').map(|(server, _)| server).unwrap_or(head);
    format!("{server}/{database}{query}")
}

impl Cluster {
    /// Creates and migrates a fresh database.
    pub async fn create() -> anyhow::Result<Cluster> {
        let base = base_database_url();
        let admin = PgPool::connect(&base)
            .await
            .with_context(|| format!("connecting to {base}"))?;
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let database = format!("probactr_bench_{}", &suffix[..12]);
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
            .execute(&admin)
            .await
            .context("creating the benchmark database")?;
        let database_url = with_database(&base, &database);
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(8)
            .connect(&database_url)
            .await
            .context("connecting to the benchmark database")?;
        store::migrate(&pool).await.context("migrating")?;
        Ok(Cluster {
            admin,
            database,
            database_url,
            redis_url: std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
            prefix: format!("bench:{}:", &suffix[..12]),
            pool,
            processes: Vec::new(),
        })
    }

    /// The environment every process of this cluster gets; `capacity` None leaves
    /// executors at their default capacity.
    pub fn env(&self, capacity: Option<u32>) -> HashMap<String, String> {
        let mut env: HashMap<String, String> = [
            ("DATABASE_URL", self.database_url.clone()),
            ("REDIS_URL", self.redis_url.clone()),
            ("PROBACTR_REDIS_PREFIX", self.prefix.clone()),
            ("PROBACTR_HEARTBEAT_INTERVAL", "1s".into()),
            ("PROBACTR_HEARTBEAT_TIMEOUT", "3s".into()),
            ("PROBACTR_REAP_INTERVAL", "1s".into()),
            ("PROBACTR_DRAIN_TIMEOUT", "2s".into()),
            // Benchmarks use no secrets; executors still need a key to start.
            (
                "PROBACTR_SECRET_KEY",
                "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=".into(),
            ),
            // `BENCH_LOG` (a `RUST_LOG` filter) shows the processes' logs.
            (
                "RUST_LOG",
                std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into()),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        // Settings given to the bench itself reach its cluster (a comparison of
        // `PROBACTR_EXECUTOR_PREFETCH` values, say), but for those the bench sets.
        for (name, value) in std::env::vars() {
            if name.starts_with("PROBACTR_") {
                env.entry(name).or_insert(value);
            }
        }
        if let Some(capacity) = capacity {
            env.insert("PROBACTR_EXECUTOR_CAPACITY".into(), capacity.to_string());
        }
        env
    }

    /// The pids of the probactr processes this cluster started.
    pub fn pids(&self) -> Vec<u32> {
        self.processes
            .iter()
            .filter_map(|(_, child)| child.id())
            .collect()
    }

    /// The capacity the executors registered with (their default unless set).
    pub async fn executor_capacity(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT coalesce(max(capacity), 0)::bigint FROM executors WHERE role = 'executor'",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Starts a probactr binary; its logs go to this process's stderr.
    pub fn spawn(&mut self, binary: &str, name: &str, env: &HashMap<String, String>) -> anyhow::Result<u32> {
        let path = binary_path(binary)?;
        let child = Command::new(&path)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", path.display()))?;
        let pid = child.id().context("the process has a pid")?;
        self.processes.push((name.to_owned(), child));
        Ok(pid)
    }

    /// Starts `count` executors and waits until all registered.
    pub async fn start_executors(
        &mut self,
        count: u32,
        env: &HashMap<String, String>,
    ) -> anyhow::Result<Vec<u32>> {
        let mut pids = Vec::new();
        for i in 0..count {
            pids.push(self.spawn("probactr-executor", &format!("executor-{i}"), env)?);
        }
        self.wait_registered("executor", count as i64).await?;
        Ok(pids)
    }

    /// Waits until `count` processes of `role` are alive.
    pub async fn wait_registered(&self, role: &str, count: i64) -> anyhow::Result<()> {
        for _ in 0..200 {
            let alive: i64 =
                sqlx::query_scalar("SELECT count(*) FROM executors WHERE role = $1 AND state = 'alive'")
                    .bind(role)
                    .fetch_one(&self.pool)
                    .await?;
            if alive >= count {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("{count} {role}(s) did not register within 10 s")
    }

    /// Stops the processes and drops the database and the Redis keys; with `BENCH_KEEP`
    /// set, keeps the database (named on stderr) for reading the runs afterwards.
    pub async fn teardown(mut self) -> anyhow::Result<()> {
        for (_, child) in &mut self.processes {
            let _ = child.kill().await;
        }
        self.pool.close().await;
        if std::env::var_os("BENCH_KEEP").is_some() {
            eprintln!("probactr-bench: kept the database {}", self.database);
            return Ok(());
        }
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.database
        )))
        .execute(&self.admin)
        .await
        .context("dropping the benchmark database")?;
        if let Ok(client) = redis::Client::open(self.redis_url.as_str()) {
            if let Ok(mut redis) = client.get_multiplexed_async_connection().await {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{}*", self.prefix))
                    .query_async(&mut redis)
                    .await
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let _: Result<(), _> = redis::cmd("DEL").arg(keys).query_async(&mut redis).await;
                }
            }
        }
        Ok(())
    }
}

/// A binary built next to this one (`cargo build --release --bins` builds them all).
pub fn binary_path(name: &str) -> anyhow::Result<PathBuf> {
    let here = std::env::current_exe().context("locating probactr-bench")?;
    let dir = here.parent().context("probactr-bench has a directory")?;
    for candidate in [dir.join(name), dir.join("..").join(name)] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!(
        "{name} is not built next to probactr-bench ({}); run cargo build --bins",
        dir.display()
    )
}
