//! Replicated servers a test can fail over: a Redis master with a replica watched by
//! sentinels ([`SentinelGroup`]), and a PostgreSQL primary with a streaming replica that
//! can be promoted ([`PostgresPair`]), behind a [`Switch`] that moves the address clients
//! use from one to the other.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::services::{free_port, PrivatePostgres, TempDir};
use crate::support::eventually;

/// The name under which the sentinels watch the master.
pub const MASTER_NAME: &str = "probactr-main";

/// A Redis master, one replica and three sentinels (quorum 2), on free loopback ports.
pub struct SentinelGroup {
    dir: TempDir,
    /// The ports of the master and the replica, in that order at start.
    pub data_ports: [u16; 2],
    pub sentinel_ports: [u16; 3],
    children: Vec<Option<Child>>,
}

fn spawn_redis(args: &[String]) -> Child {
    Command::new("redis-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server starts (is it installed?)")
}

/// One command to a Redis server or sentinel (a fresh connection each time).
pub async fn redis_query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut conn).await
}

impl SentinelGroup {
    /// Starts the servers and waits until every sentinel knows the replica and the other
    /// sentinels (so a failover can be agreed).
    pub async fn start() -> SentinelGroup {
        let dir = TempDir::new("sentinel");
        let data_ports = [free_port(), free_port()];
        let sentinel_ports = [free_port(), free_port(), free_port()];
        let mut children = Vec::new();
        for (i, port) in data_ports.iter().enumerate() {
            let mut args: Vec<String> = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
                .iter()
                .map(|arg| arg.to_string())
                .collect();
            args.extend(["--port".into(), port.to_string()]);
            args.extend(["--dir".into(), dir.path().display().to_string()]);
            args.extend(["--dbfilename".into(), format!("dump-{port}.rdb")]);
            if i == 1 {
                args.extend([
                    "--replicaof".into(),
                    "127.0.0.1".into(),
                    data_ports[0].to_string(),
                ]);
            }
            children.push(Some(spawn_redis(&args)));
        }
        for port in sentinel_ports {
            let config = dir.path().join(format!("sentinel-{port}.conf"));
            std::fs::write(
                &config,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 10000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir = dir.path().display(),
                    master = data_ports[0],
                ),
            )
            .expect("write the sentinel configuration");
            children.push(Some(spawn_redis(&[
                config.display().to_string(),
                "--sentinel".into(),
            ])));
        }
        let group = SentinelGroup {
            dir,
            data_ports,
            sentinel_ports,
            children,
        };
        eventually(
            Duration::from_secs(30),
            "the sentinels see the replica and each other",
            || async {
                for port in group.sentinel_ports {
                    let replicas: Vec<redis::Value> =
                        redis_query(port, &["SENTINEL", "REPLICAS", MASTER_NAME])
                            .await
                            .ok()?;
                    let others: Vec<redis::Value> =
                        redis_query(port, &["SENTINEL", "SENTINELS", MASTER_NAME])
                            .await
                            .ok()?;
                    if replicas.is_empty() || others.len() < 2 {
                        return None;
                    }
                }
                let link: String = redis_query(group.data_ports[1], &["INFO", "replication"])
                    .await
                    .ok()?;
                link.contains("master_link_status:up").then_some(())
            },
        )
        .await;
        group
    }

    /// The `redis+sentinel://` URL naming every sentinel.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .sentinel_ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", nodes.join(","))
    }

    /// The port of the master the sentinels name now.
    pub async fn master_port(&self) -> Option<u16> {
        for port in self.sentinel_ports {
            let addr: Result<Vec<String>, _> =
                redis_query(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME]).await;
            if let Some(port) = addr
                .ok()
                .and_then(|addr| addr.get(1).and_then(|p| p.parse().ok()))
            {
                return Some(port);
            }
        }
        None
    }

    /// `kill -9` the data server on `port` (master or replica).
    pub async fn kill(&mut self, port: u16) {
        let at = self
            .data_ports
            .iter()
            .position(|p| *p == port)
            .expect("a data server of the group");
        if let Some(mut child) = self.children[at].take() {
            let _ = child.kill().await;
        }
    }

    /// The calls of `command` (e.g. `evalsha`) the server on `port` has served.
    pub async fn calls(&self, port: u16, command: &str) -> u64 {
        let stats: String = redis_query(port, &["INFO", "commandstats"])
            .await
            .unwrap_or_default();
        stats
            .lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0)
    }
}

/// A TCP forwarder on a fixed loopback port whose destination can be changed: clients
/// keep one address while the server behind it moves. Changing the destination cuts every
/// connection open through it, as a moved virtual IP or DNS name with a restarted proxy
/// would.
pub struct Switch {
    port: u16,
    target: Arc<AtomicU16>,
    cut: std::sync::Mutex<CancellationToken>,
    stop: CancellationToken,
}

impl Switch {
    /// Starts forwarding to `target` on a free port.
    pub async fn start(target: u16) -> Arc<Switch> {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the switch");
        let port = listener.local_addr().expect("its address").port();
        let switch = Arc::new(Switch {
            port,
            target: Arc::new(AtomicU16::new(target)),
            cut: std::sync::Mutex::new(CancellationToken::new()),
            stop: CancellationToken::new(),
        });
        let accepting = switch.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = accepting.stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                let target = accepting.target.load(Ordering::SeqCst);
                let cut = accepting.cut.lock().unwrap().clone();
                tokio::spawn(forward(client, target, cut));
            }
        });
        switch
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sends new connections to `target` and cuts the open ones.
    pub fn point_to(&self, target: u16) {
        self.target.store(target, Ordering::SeqCst);
        let old = std::mem::replace(&mut *self.cut.lock().unwrap(), CancellationToken::new());
        old.cancel();
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop.cancel();
        self.cut.lock().unwrap().cancel();
    }
}

async fn forward(mut client: TcpStream, target: u16, cut: CancellationToken) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else {
        return;
    };
    tokio::select! {
        _ = cut.cancelled() => {}
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
    }
}

/// A PostgreSQL primary and a streaming replica made from its base backup.
pub struct PostgresPair {
    pub primary: PrivatePostgres,
    pub replica: PrivatePostgres,
}

impl PostgresPair {
    /// Starts a primary with `database` (migrated), then a replica of it
    /// (`pg_basebackup -R`), and waits until the replica streams.
    pub async fn start(database: &str) -> (PostgresPair, String) {
        let primary = PrivatePostgres::start().await;
        let url = primary.create_database(database).await;
        let replica = primary.base_backup().await;
        replica.start_again().await;
        eventually(
            Duration::from_secs(30),
            "the replica streams from the primary",
            || async {
                let streaming: Option<i64> = primary
                    .scalar("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
                    .await;
                (streaming? > 0).then_some(())
            },
        )
        .await;
        // Synchronous: a commit is acknowledged once the replica has it, so promoting
        // the replica loses nothing that was acknowledged.
        {
            use sqlx::Connection;
            let mut admin = sqlx::PgConnection::connect(&primary.url("postgres"))
                .await
                .expect("connect to the primary");
            for statement in [
                "ALTER SYSTEM SET synchronous_standby_names = '*'",
                "SELECT pg_reload_conf()",
            ] {
                sqlx::query(statement).execute(&mut admin).await.expect(statement);
            }
        }
        eventually(Duration::from_secs(15), "the replica is synchronous", || async {
            let sync: Option<i64> = primary
                .scalar("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")
                .await;
            (sync? > 0).then_some(())
        })
        .await;
        (PostgresPair { primary, replica }, url)
    }
}
