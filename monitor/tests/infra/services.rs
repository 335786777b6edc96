//! Private PostgreSQL and Redis instances on free loopback ports, so a test can kill and
//! restart them without disturbing anyone else. Each lives in its own temporary
//! directory and is killed (and the directory removed) when dropped.
//!
//! PostgreSQL binaries are looked up in `PROBACTR_PG_BINDIR`, else the newest
//! `/usr/lib/postgresql/*/bin`, else `PATH`. `initdb` refuses to run as root, so as root
//! every PostgreSQL command runs as the `postgres` user (`runuser -u postgres --`), which
//! is given the data directory. `initdb` takes seconds; it runs once per machine into a
//! template directory that each instance copies.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A free port on 127.0.0.1 (free when asked; good enough for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("probactr-{what}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).expect("create a temporary directory");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

fn pg_bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PROBACTR_PG_BINDIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    dirs.sort_by_key(|dir| {
        dir.parent()
            .and_then(|version| version.file_name())
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(dir) = dirs.pop() {
        return dir;
    }
    let which = std::process::Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .expect("sh runs");
    let found = String::from_utf8_lossy(&which.stdout).trim().to_owned();
    assert!(
        !found.is_empty(),
        "no PostgreSQL binaries: install postgresql or set PROBACTR_PG_BINDIR"
    );
    PathBuf::from(found)
        .parent()
        .expect("initdb has a directory")
        .to_owned()
}

/// A command run as the PostgreSQL user (plain when not root).
fn pg_command(program: &Path) -> std::process::Command {
    if is_root() {
        let mut command = std::process::Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        std::process::Command::new(program)
    }
}

fn ensure_postgres_user() {
    if is_root() {
        let exists = std::process::Command::new("id")
            .arg("postgres")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !exists {
            let status = std::process::Command::new("useradd")
                .args(["--system", "--no-create-home", "postgres"])
                .status()
                .expect("useradd runs");
            assert!(status.success(), "cannot create the postgres user");
        }
    }
}

fn give_to_postgres(path: &Path) {
    if is_root() {
        let status = std::process::Command::new("chown")
            .args(["-R", "postgres"])
            .arg(path)
            .status()
            .expect("chown runs");
        assert!(status.success(), "chown {} failed", path.display());
    }
}

/// The initdb'd template for this PostgreSQL version, created once per machine (an
/// atomic rename makes concurrent tests agree on one).
fn pg_template(bindir: &Path) -> PathBuf {
    let version = bindir
        .parent()
        .and_then(|dir| dir.file_name())
        .and_then(|name| name.to_str())
        .unwrap_or("pg")
        .to_owned();
    let template = std::env::temp_dir().join(format!("probactr-pg-template-{version}"));
    if template.join("PG_VERSION").exists() {
        return template;
    }
    ensure_postgres_user();
    let scratch = std::env::temp_dir().join(format!("probactr-pg-initdb-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    give_to_postgres(&scratch);
    let data = scratch.join("data");
    let output = pg_command(&bindir.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .output()
        .expect("initdb runs");
    assert!(
        output.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Another test may have won the race; either template is good.
    if std::fs::rename(&data, &template).is_err() {
        assert!(template.join("PG_VERSION").exists(), "no PostgreSQL template");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    template
}

/// A PostgreSQL server of our own.
pub struct PrivatePostgres {
    dir: TempDir,
    bindir: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    /// Copies the template and starts a server on a free port.
    pub async fn start() -> PrivatePostgres {
        let bindir = pg_bindir();
        let template = pg_template(&bindir);
        let dir = TempDir::new("pg");
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(&template)
            .arg(dir.path().join("data"))
            .status()
            .expect("cp runs");
        assert!(status.success(), "cannot copy the PostgreSQL template");
        give_to_postgres(dir.path());
        let postgres = PrivatePostgres {
            dir,
            bindir,
            port: free_port(),
        };
        postgres.start_again().await;
        postgres
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The URL of database `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn pg_ctl(&self) -> std::process::Command {
        let mut command = pg_command(&self.bindir.join("pg_ctl"));
        command.arg("-D").arg(self.dir.path().join("data"));
        command
    }

    /// Starts the server (again) on its port and waits until it accepts connections.
    ///
    /// `fsync=off` is safe here: the faults kill processes, not the machine, so the page
    /// cache survives. Commits stay synchronous: an acknowledged commit must survive a
    /// crash of the server, as on any real deployment. (With `synchronous_commit=off` a
    /// crash loses acknowledged commits: runs the executors recorded as finished come
    /// back `running`, which no correct client can prevent.)
    pub async fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=32MB \
             -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let mut command = self.pg_ctl();
        command
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-w", "-t", "30", "-o", &options, "start"])
            .stdout(Stdio::null());
        let status = tokio::process::Command::from(command)
            .status()
            .await
            .expect("pg_ctl runs");
        if !status.success() {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            panic!("PostgreSQL did not start on port {}:\n{log}", self.port);
        }
    }

    /// Stops the server the way a crash would (`-m immediate`: no checkpoint, every
    /// connection cut); the next start recovers.
    pub async fn crash(&self) {
        let mut command = self.pg_ctl();
        command
            .args(["-w", "-m", "immediate", "stop"])
            .stdout(Stdio::null());
        let status = tokio::process::Command::from(command)
            .status()
            .await
            .expect("pg_ctl runs");
        assert!(status.success(), "pg_ctl stop failed");
    }

    /// A streaming replica of this server made with `pg_basebackup -R` (standby settings
    /// written), on a free port of its own; not started.
    pub async fn base_backup(&self) -> PrivatePostgres {
        let dir = TempDir::new("pg-replica");
        give_to_postgres(dir.path());
        let mut command = pg_command(&self.bindir.join("pg_basebackup"));
        command
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres"])
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-R", "-X", "stream", "--no-sync", "-c", "fast"]);
        let output = tokio::process::Command::from(command)
            .output()
            .await
            .expect("pg_basebackup runs");
        assert!(
            output.status.success(),
            "pg_basebackup failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        PrivatePostgres {
            dir,
            bindir: self.bindir.clone(),
            port: free_port(),
        }
    }

    /// Promotes this standby to a primary and waits until it accepts writes.
    pub async fn promote(&self) {
        let mut command = self.pg_ctl();
        command.args(["-w", "-t", "30", "promote"]).stdout(Stdio::null());
        let status = tokio::process::Command::from(command)
            .status()
            .await
            .expect("pg_ctl runs");
        assert!(status.success(), "pg_ctl promote failed");
    }

    /// One value from database `postgres`; None while the server does not answer.
    pub async fn scalar(&self, query: &'static str) -> Option<i64> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres")).await.ok()?;
        sqlx::query_scalar(query).fetch_one(&mut conn).await.ok()
    }

    /// Creates a database and applies probactr's migrations to it; returns its URL.
    pub async fn create_database(&self, name: &str) -> String {
        use sqlx::Connection;
        let mut admin = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connect to the private PostgreSQL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create database");
        let url = self.url(name);
        let pool = sqlx::PgPool::connect(&url)
            .await
            .expect("connect to the new database");
        probactr_common::store::migrate(&pool)
            .await
            .expect("migrations apply");
        pool.close().await;
        url
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl()
            .args(["-w", "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A Redis server of our own, without persistence: a restart starts it empty.
pub struct PrivateRedis {
    dir: TempDir,
    port: u16,
    child: Option<tokio::process::Child>,
}

impl PrivateRedis {
    pub async fn start() -> PrivateRedis {
        let mut redis = PrivateRedis {
            dir: TempDir::new("redis"),
            port: free_port(),
            child: None,
        };
        redis.start_again().await;
        redis
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, empty) on its port and waits until it answers PING.
    pub async fn start_again(&mut self) {
        assert!(self.child.is_none(), "Redis is already running");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let child = tokio::process::Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(self.dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("redis-server starts (is it installed?)");
            self.child = Some(child);
            if self.wait_until_answers(Duration::from_secs(3)).await {
                return;
            }
            // The port may still be held by the previous instance's sockets: try again.
            self.kill().await;
            assert!(
                tokio::time::Instant::now() < deadline,
                "Redis did not start on port {}",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_until_answers(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            if ping(self.addr()).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// `kill -9` the server: every key is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

async fn ping(addr: SocketAddr) -> bool {
    let Ok(Ok(mut stream)) = tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
    else {
        return false;
    };
    if stream.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    matches!(
        tokio::time::timeout(Duration::from_millis(200), stream.read_exact(&mut reply)).await,
        Ok(Ok(_)) if &reply == b"+PONG\r\n"
    )
}
