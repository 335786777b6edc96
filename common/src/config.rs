//! Settings of every probactr process, read from environment variables.
//!
//! Every variable is declared once in [`VARS`] with its default and meaning; the README's
//! configuration table and `.env.example` are checked against that list. Reading is
//! strict: a value that does not parse, or a set of values that contradict each other,
//! is a [`ConfigError`] naming the variable and what was expected, and the binaries exit
//! with code 2 on it ([`Config::from_env_or_exit`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

mod files;

pub use files::FILE_SETTINGS;

use crate::account::AccountName;
use crate::backoff::Backoff;
use crate::cidr::Cidr;
use crate::secrets::{Keyring, SecretKey};

/// One environment variable probactr reads.
#[derive(Debug, Clone, Copy)]
pub struct Var {
    /// The variable's name.
    pub name: &'static str,
    /// Its value when unset (empty: no default, the feature is off or the value required).
    pub default: &'static str,
    /// What it means, in one line.
    pub help: &'static str,
}

/// Every variable any probactr process reads.
pub const VARS: &[Var] = &[
    Var {
        name: "DATABASE_URL",
        default: "postgres://postgres@127.0.0.1:5432/probactr",
        help: "PostgreSQL connection URL (the source of truth)",
    },
    Var {
        name: "REDIS_URL",
        default: "redis://127.0.0.1:6379",
        help: "Redis connection URL (locks and permits)",
    },
    Var {
        name: "PROBACTR_REDIS_PREFIX",
        default: "probactr:",
        help: "prefix of every Redis key, so clusters can share a Redis",
    },
    Var {
        name: "PROBACTR_DB_POOL_SIZE",
        default: "10",
        help: "maximum PostgreSQL connections per process",
    },
    Var {
        name: "PROBACTR_CONNECT_TIMEOUT",
        default: "60s",
        help: "at start-up, how long a process retries PostgreSQL and Redis (executors, monitors; the manager PostgreSQL) before it exits naming the one that does not answer",
    },
    Var {
        name: "PROBACTR_HEARTBEAT_INTERVAL",
        default: "5s",
        help: "how often executors and monitors heartbeat",
    },
    Var {
        name: "PROBACTR_HEARTBEAT_TIMEOUT",
        default: "15s",
        help: "silence after which a monitor declares a process dead; must exceed the interval",
    },
    Var {
        name: "PROBACTR_REAP_INTERVAL",
        default: "5s",
        help: "how often monitors look for dead executors and stuck runs",
    },
    Var {
        name: "PROBACTR_LOCK_LEASE",
        default: "30s",
        help: "lease of a job's Redis lock or permit; renewed every lease/3",
    },
    Var {
        name: "PROBACTR_LOCK_START_BUDGET",
        default: "2s",
        help: "how long an executor retries a busy lock before applying the overlap policy",
    },
    Var {
        name: "PROBACTR_LOCK_RETRY",
        default: "jitter:20ms:500ms",
        help:
            "how a busy lock is retried: jitter:BASE:CAP (full jitter) or fixed:DELAY (only to show why not)",
    },
    Var {
        name: "PROBACTR_EXECUTOR_CAPACITY",
        default: "1024",
        help: "runs one executor executes at once (noop, sleep and HTTP jobs run inside the executor)",
    },
    Var {
        name: "PROBACTR_EXECUTOR_PROCESSES",
        default: "16",
        help: "of those, shell jobs (each a process) one executor runs at once",
    },
    Var {
        name: "PROBACTR_EXECUTOR_LABELS",
        default: "",
        help: "labels of an executor, name=value,name=value (zone=a,gpu=1): jobs with a selector run only on executors carrying all of its labels",
    },
    Var {
        name: "PROBACTR_FIRE_BATCH",
        default: "500",
        help: "due triggers an executor fires per transaction",
    },
    Var {
        name: "PROBACTR_FIRE_AHEAD",
        default: "500ms",
        help: "how long before their instant runs are fired into the queue, waiting there until it comes (0s: at the instant)",
    },
    Var {
        name: "PROBACTR_DRAIN_TIMEOUT",
        default: "30s",
        help: "on SIGTERM, how long running jobs may finish before they are stopped",
    },
    Var {
        name: "PROBACTR_RETENTION",
        default: "30d",
        help: "run history older than this is deleted by monitors",
    },
    Var {
        name: "PROBACTR_OUTPUT_LIMIT",
        default: "1MiB",
        help: "how much output a run keeps (bytes, or with KiB/MiB): its first half and its last half, the middle cut",
    },
    Var {
        name: "PROBACTR_HTTP_ALLOW",
        default: "",
        help:
            "comma-separated CIDR ranges HTTP jobs may reach even if denied by default (link-local, metadata)",
    },
    Var {
        name: "PROBACTR_HTTP_DENY",
        default: "",
        help: "comma-separated CIDR ranges HTTP jobs may never reach",
    },
    Var {
        name: "PROBACTR_JOB_ENV_PASSTHROUGH",
        default: "",
        help: "comma-separated names (or `PREFIX_*`) of the executor's variables shell jobs inherit beyond PATH, HOME, LANG, LC_*, TZ, TMPDIR and USER",
    },
    Var {
        name: "PROBACTR_JOB_USER",
        default: "",
        help: "the account shell jobs run as, NAME or UID:GID (the executor's own when empty); the executor needs root's SETUID, SETGID, KILL, CHOWN, DAC_OVERRIDE and FOWNER capabilities for it and refuses to start without them",
    },
    Var {
        name: "PROBACTR_JOB_USERS_ALLOWED",
        default: "",
        help: "comma-separated accounts (NAME or UID:GID) a job may name as its own `run_as`",
    },
    Var {
        name: "PROBACTR_WORK_DIR",
        default: "",
        help: "where an executor makes each shell run's fresh working directory, removed after the run (the system's temporary directory when empty)",
    },
    Var {
        name: "PROBACTR_SECRET_KEY",
        default: "",
        help: "32 random bytes in base64 sealing job and channel secrets (manager, executors and monitors; `openssl rand -base64 32`)",
    },
    Var {
        name: "PROBACTR_SECRET_KEY_PREVIOUS",
        default: "",
        help: "the key before PROBACTR_SECRET_KEY, during a rotation: its secrets still open",
    },
    Var {
        name: "PROBACTR_SECRET_KEY_FILE",
        default: "",
        help: "a file holding PROBACTR_SECRET_KEY, instead of the variable (Docker and Kubernetes secrets)",
    },
    Var {
        name: "PROBACTR_SECRET_KEY_PREVIOUS_FILE",
        default: "",
        help: "a file holding PROBACTR_SECRET_KEY_PREVIOUS, instead of the variable",
    },
    Var {
        name: "DATABASE_URL_FILE",
        default: "",
        help: "a file holding DATABASE_URL, instead of the variable",
    },
    Var {
        name: "REDIS_URL_FILE",
        default: "",
        help: "a file holding REDIS_URL, instead of the variable",
    },
    Var {
        name: "PROBACTR_TRUSTED_PROXIES",
        default: "",
        help: "comma-separated CIDR ranges of reverse proxies whose X-Forwarded-For names the client (the manager's login rate limit)",
    },
    Var {
        name: "PROBACTR_SMTP_URL",
        default: "",
        help: "SMTP server monitors send alert mail through: smtps://user:pass@host:port (TLS), smtp://…?tls=starttls, or smtp://…?tls=none for a plain relay (off when empty)",
    },
    Var {
        name: "PROBACTR_SMTP_URL_FILE",
        default: "",
        help: "a file holding PROBACTR_SMTP_URL, instead of the variable",
    },
    Var {
        name: "PROBACTR_SMTP_FROM",
        default: "probactr@localhost",
        help: "sender address of alert mail",
    },
    Var {
        name: "PROBACTR_PUBLIC_URL",
        default: "http://127.0.0.1:8080",
        help: "the manager's address as users reach it, for links in alerts",
    },
    Var {
        name: "PROBACTR_ALERT_RETRY_FOR",
        default: "1h",
        help: "how long monitors retry an alert delivery that fails before marking it failed",
    },
    Var {
        name: "PROBACTR_METRICS_LISTEN",
        default: "",
        help: "address an executor or monitor serves Prometheus metrics on (off when empty)",
    },
    Var {
        name: "PROBACTR_MANAGER_LISTEN",
        default: "127.0.0.1:8080",
        help: "address the manager's web admin and API listen on",
    },
    Var {
        name: "PROBACTR_COOKIE_SECURE",
        default: "false",
        help: "mark the manager's session cookie Secure (set true when it is served over HTTPS)",
    },
    Var {
        name: "PROBACTR_SSE_PER_USER",
        default: "10",
        help: "live output streams one user may have open at once on a manager; more are answered 429",
    },
    Var {
        name: "PROBACTR_SSE_MAX_SECS",
        default: "3600",
        help: "seconds after which the manager ends a live output stream (the client reconnects to go on)",
    },
    Var {
        name: "PROBACTR_ADMIN_USER",
        default: "admin",
        help: "name of the first admin, created when no user exists",
    },
    Var {
        name: "PROBACTR_ADMIN_PASSWORD",
        default: "",
        help: "password of the first admin (at least 12 characters; required when no user exists)",
    },
    Var {
        name: "PROBACTR_ADMIN_PASSWORD_FILE",
        default: "",
        help: "a file holding PROBACTR_ADMIN_PASSWORD, instead of the variable",
    },
    Var {
        name: "PROBACTR_LOG_FORMAT",
        default: "text",
        help: "log format: text or json",
    },
    Var {
        name: "RUST_LOG",
        default: "info",
        help: "log filter (tracing EnvFilter syntax)",
    },
];

/// A setting that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A variable's value does not parse.
    #[error("invalid {var}={value:?}: expected {expected}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// Values that parse but contradict each other.
    #[error("inconsistent {var}: {message}")]
    Inconsistent {
        /// The variable at fault.
        var: &'static str,
        /// Why.
        message: String,
    },
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// All settings. Each process uses the part it needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DATABASE_URL`.
    pub database_url: String,
    /// `REDIS_URL`.
    pub redis_url: String,
    /// `PROBACTR_REDIS_PREFIX`.
    pub redis_prefix: String,
    /// `PROBACTR_DB_POOL_SIZE`.
    pub db_pool_size: u32,
    /// `PROBACTR_CONNECT_TIMEOUT`.
    pub connect_timeout: Duration,
    /// `PROBACTR_HEARTBEAT_INTERVAL`.
    pub heartbeat_interval: Duration,
    /// `PROBACTR_HEARTBEAT_TIMEOUT`.
    pub heartbeat_timeout: Duration,
    /// `PROBACTR_REAP_INTERVAL`.
    pub reap_interval: Duration,
    /// `PROBACTR_LOCK_LEASE`.
    pub lock_lease: Duration,
    /// `PROBACTR_LOCK_START_BUDGET`.
    pub lock_start_budget: Duration,
    /// `PROBACTR_LOCK_RETRY`.
    pub lock_retry: Backoff,
    /// `PROBACTR_EXECUTOR_CAPACITY`.
    pub executor_capacity: u32,
    /// `PROBACTR_EXECUTOR_PROCESSES`.
    pub executor_processes: u32,
    /// `PROBACTR_EXECUTOR_LABELS`.
    pub executor_labels: crate::labels::Labels,
    /// `PROBACTR_FIRE_BATCH`.
    pub fire_batch: u32,
    /// `PROBACTR_FIRE_AHEAD`.
    pub fire_ahead: Duration,
    /// `PROBACTR_DRAIN_TIMEOUT`.
    pub drain_timeout: Duration,
    /// `PROBACTR_RETENTION`.
    pub retention: Duration,
    /// `PROBACTR_OUTPUT_LIMIT`, in bytes.
    pub output_limit: u64,
    /// `PROBACTR_HTTP_ALLOW`.
    pub http_allow: Vec<String>,
    /// `PROBACTR_HTTP_DENY`.
    pub http_deny: Vec<String>,
    /// `PROBACTR_JOB_ENV_PASSTHROUGH`.
    pub job_env_passthrough: Vec<String>,
    /// `PROBACTR_JOB_USER`: None runs jobs as the executor's own account.
    pub job_user: Option<AccountName>,
    /// `PROBACTR_JOB_USERS_ALLOWED`.
    pub job_users_allowed: Vec<AccountName>,
    /// `PROBACTR_WORK_DIR` (None: the system's temporary directory).
    pub work_dir: Option<std::path::PathBuf>,
    /// `PROBACTR_TRUSTED_PROXIES`.
    pub trusted_proxies: Vec<Cidr>,
    /// `PROBACTR_SECRET_KEY` (and `PROBACTR_SECRET_KEY_PREVIOUS`); None when unset.
    pub secret_keys: Option<Keyring>,
    /// `PROBACTR_SMTP_URL` (None when empty).
    pub smtp: Option<SmtpSettings>,
    /// `PROBACTR_SMTP_FROM`.
    pub smtp_from: String,
    /// `PROBACTR_PUBLIC_URL`, without a trailing slash.
    pub public_url: String,
    /// `PROBACTR_ALERT_RETRY_FOR`.
    pub alert_retry_for: Duration,
    /// `PROBACTR_METRICS_LISTEN`.
    pub metrics_listen: Option<SocketAddr>,
    /// `PROBACTR_MANAGER_LISTEN`.
    pub manager_listen: SocketAddr,
    /// `PROBACTR_COOKIE_SECURE`.
    pub cookie_secure: bool,
    /// `PROBACTR_SSE_PER_USER`.
    pub sse_per_user: u32,
    /// `PROBACTR_SSE_MAX_SECS`.
    pub sse_max: Duration,
    /// `PROBACTR_ADMIN_USER`.
    pub admin_user: String,
    /// `PROBACTR_ADMIN_PASSWORD` (None when unset or empty).
    pub admin_password: Option<String>,
    /// `PROBACTR_LOG_FORMAT`.
    pub log_format: LogFormat,
    /// `RUST_LOG`.
    pub log_filter: String,
}

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain text, only when the URL says so (`smtp://…?tls=none`): a relay on a network
    /// the operator trusts.
    None,
    /// Plain text upgraded with STARTTLS, which must succeed (`?tls=starttls`).
    StartTls,
    /// TLS from the first byte (`smtps://`).
    Wrapper,
}

/// The SMTP server of `PROBACTR_SMTP_URL`.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    /// Host name or address.
    pub host: String,
    /// Port (25 for `smtp://`, 465 for `smtps://` unless given).
    pub port: u16,
    /// How the connection is secured.
    pub tls: SmtpTls,
    /// User name, when the server wants a login.
    pub user: Option<String>,
    /// Password (never printed: see the Debug impl).
    pub password: Option<String>,
}

impl std::fmt::Debug for SmtpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl SmtpSettings {
    /// Parses `smtps://[user[:password]@]host[:port]` or
    /// `smtp://[user[:password]@]host[:port]?tls=starttls|none`; the error says what was
    /// expected. An `smtp://` URL must say how it is secured: mail carries job names,
    /// errors and links, and the login would cross the network in the clear, so plain
    /// text is never a default, only a choice (`tls=none`).
    pub fn parse(text: &str) -> Result<SmtpSettings, String> {
        let expected =
            "smtps://[user:password@]host[:port], smtp://[user:password@]host[:port]?tls=starttls, \
             or smtp://host[:port]?tls=none for a plain relay";
        let url = url::Url::parse(text).map_err(|err| format!("{expected} ({err})"))?;
        // `smtp://` starts undecided: the query must choose.
        let mut tls = match url.scheme() {
            "smtp" => None,
            "smtps" => Some(SmtpTls::Wrapper),
            _ => return Err(expected.to_owned()),
        };
        let host = url
            .host_str()
            .filter(|host| !host.is_empty())
            .ok_or_else(|| format!("{expected} (no host)"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        for (key, value) in url.query_pairs() {
            tls = match (key.as_ref(), value.as_ref(), tls) {
                ("tls", "starttls" | "required", None) => Some(SmtpTls::StartTls),
                ("tls", "none", None) => Some(SmtpTls::None),
                _ => return Err(format!("{expected} (unknown or repeated option {key}={value})")),
            };
        }
        let tls = tls.ok_or_else(|| {
            format!("{expected} (smtp:// without tls=: mail would go unencrypted; add ?tls=starttls, or ?tls=none to mean it)")
        })?;
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned()
        };
        let user = Some(url.username()).filter(|u| !u.is_empty()).map(decode);
        Ok(SmtpSettings {
            port: url
                .port()
                .unwrap_or(if tls == SmtpTls::Wrapper { 465 } else { 25 }),
            host,
            tls,
            user,
            password: url.password().map(decode),
        })
    }
}

/// A name of `PROBACTR_JOB_ENV_PASSTHROUGH`: a variable name, or a prefix followed by
/// `*`, that cannot match probactr's own settings.
fn is_passthrough_name(entry: &str) -> bool {
    let name = entry.strip_suffix('*').unwrap_or(entry);
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid && !name.to_ascii_uppercase().starts_with("PROBACTR")
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the process environment; on error prints it and exits with code 2.
    pub fn from_env_or_exit(process: &str) -> Config {
        let names: Vec<String> = std::env::vars_os()
            .filter_map(|(name, _)| name.into_string().ok())
            .collect();
        for unknown in unknown_variables(names.iter().map(String::as_str)) {
            eprintln!("{process}: warning: {unknown}");
        }
        match Config::from_env() {
            Ok(config) => config,
            Err(err) => {
                eprintln!("{process}: configuration error: {err}");
                std::process::exit(2);
            }
        }
    }

    /// The secret keys, or exit 2 saying how to make one: the manager seals job secrets
    /// and executors open them, so both need the key to start.
    pub fn secret_keys_or_exit(&self, process: &str) -> Keyring {
        match &self.secret_keys {
            Some(keys) => keys.clone(),
            None => {
                eprintln!(
                    "{process}: configuration error: PROBACTR_SECRET_KEY is not set; it seals job \
                     secrets and must be the same for the manager, every executor and every monitor: 32 random \
                     bytes in base64, e.g. `openssl rand -base64 32` (scripts/up makes one)"
                );
                std::process::exit(2);
            }
        }
    }

    /// Reads settings from a map (tests, tools).
    pub fn from_map(map: &HashMap<String, String>) -> Result<Config, ConfigError> {
        Config::from_lookup(|name| map.get(name).cloned())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let from_files = files::read_file_settings(&lookup)?;
        let lookup = |name: &str| from_files.get(name).cloned().or_else(|| lookup(name));
        let env = Env { lookup: &lookup };
        let config = Config {
            database_url: env.url("DATABASE_URL", &["postgres://", "postgresql://"])?,
            redis_url: env.url(
                "REDIS_URL",
                &[
                    "redis://",
                    "rediss://",
                    "unix://",
                    "redis+unix://",
                    "redis+sentinel://",
                    "rediss+sentinel://",
                ],
            )?,
            redis_prefix: env.text("PROBACTR_REDIS_PREFIX"),
            db_pool_size: env.number("PROBACTR_DB_POOL_SIZE", 1, 1000)?,
            connect_timeout: env.duration("PROBACTR_CONNECT_TIMEOUT")?,
            heartbeat_interval: env.duration("PROBACTR_HEARTBEAT_INTERVAL")?,
            heartbeat_timeout: env.duration("PROBACTR_HEARTBEAT_TIMEOUT")?,
            reap_interval: env.duration("PROBACTR_REAP_INTERVAL")?,
            lock_lease: env.duration("PROBACTR_LOCK_LEASE")?,
            lock_start_budget: env.duration("PROBACTR_LOCK_START_BUDGET")?,
            lock_retry: env.backoff("PROBACTR_LOCK_RETRY")?,
            executor_capacity: env.number("PROBACTR_EXECUTOR_CAPACITY", 1, 100_000)?,
            executor_processes: env.number("PROBACTR_EXECUTOR_PROCESSES", 1, 100_000)?,
            executor_labels: env.labels("PROBACTR_EXECUTOR_LABELS")?,
            fire_batch: env.number("PROBACTR_FIRE_BATCH", 1, 100_000)?,
            fire_ahead: env.duration_or_zero("PROBACTR_FIRE_AHEAD", Duration::from_secs(10))?,
            drain_timeout: env.duration("PROBACTR_DRAIN_TIMEOUT")?,
            retention: env.duration("PROBACTR_RETENTION")?,
            output_limit: env.bytes("PROBACTR_OUTPUT_LIMIT", 1024, 1 << 30)?,
            http_allow: env.list("PROBACTR_HTTP_ALLOW"),
            http_deny: env.list("PROBACTR_HTTP_DENY"),
            job_env_passthrough: env.list("PROBACTR_JOB_ENV_PASSTHROUGH"),
            job_user: env.optional_account("PROBACTR_JOB_USER")?,
            job_users_allowed: env.accounts("PROBACTR_JOB_USERS_ALLOWED")?,
            work_dir: Some(env.text("PROBACTR_WORK_DIR"))
                .filter(|dir| !dir.trim().is_empty())
                .map(std::path::PathBuf::from),
            trusted_proxies: env.cidrs("PROBACTR_TRUSTED_PROXIES")?,
            secret_keys: env.keyring()?,
            smtp: env.smtp("PROBACTR_SMTP_URL")?,
            smtp_from: env.mailbox("PROBACTR_SMTP_FROM")?,
            public_url: env
                .url("PROBACTR_PUBLIC_URL", &["http://", "https://"])?
                .trim_end_matches('/')
                .to_owned(),
            alert_retry_for: env.duration("PROBACTR_ALERT_RETRY_FOR")?,
            metrics_listen: env.optional_addr("PROBACTR_METRICS_LISTEN")?,
            manager_listen: env.addr("PROBACTR_MANAGER_LISTEN")?,
            cookie_secure: env.flag("PROBACTR_COOKIE_SECURE")?,
            sse_per_user: env.number("PROBACTR_SSE_PER_USER", 1, 10_000)?,
            sse_max: Duration::from_secs(env.number("PROBACTR_SSE_MAX_SECS", 1, 7 * 24 * 3600)?.into()),
            admin_user: env.text("PROBACTR_ADMIN_USER"),
            admin_password: Some(env.text("PROBACTR_ADMIN_PASSWORD")).filter(|p| !p.is_empty()),
            log_format: env.log_format("PROBACTR_LOG_FORMAT")?,
            log_filter: env.text("RUST_LOG"),
        };
        config.check_consistency()?;
        Ok(config)
    }

    fn check_consistency(&self) -> Result<(), ConfigError> {
        if self.heartbeat_timeout <= self.heartbeat_interval {
            return Err(ConfigError::Inconsistent {
                var: "PROBACTR_HEARTBEAT_TIMEOUT",
                message: format!(
                    "{} must be larger than PROBACTR_HEARTBEAT_INTERVAL ({})",
                    format_duration(self.heartbeat_timeout),
                    format_duration(self.heartbeat_interval)
                ),
            });
        }
        if self.lock_lease < Duration::from_millis(300) {
            return Err(ConfigError::Inconsistent {
                var: "PROBACTR_LOCK_LEASE",
                message: "must be at least 300ms so renewal every lease/3 is possible".into(),
            });
        }
        if let Some(bad) = self
            .job_env_passthrough
            .iter()
            .find(|name| !is_passthrough_name(name))
        {
            return Err(ConfigError::Inconsistent {
                var: "PROBACTR_JOB_ENV_PASSTHROUGH",
                message: format!(
                    "{bad:?} is not a variable name or a `PREFIX_*` pattern (and probactr's own PROBACTR_* settings are never passed to jobs)"
                ),
            });
        }
        if self.admin_user.trim().is_empty() {
            return Err(ConfigError::Inconsistent {
                var: "PROBACTR_ADMIN_USER",
                message: "must not be empty".into(),
            });
        }
        Ok(())
    }

    /// One line describing the settings, for the start-up log (no secrets).
    pub fn summary(&self) -> String {
        format!(
            "database={} redis={} prefix={:?} heartbeat={}/{} reap={} lease={} capacity={} drain={}",
            redact_url(&self.database_url),
            redact_url(&self.redis_url),
            self.redis_prefix,
            format_duration(self.heartbeat_interval),
            format_duration(self.heartbeat_timeout),
            format_duration(self.reap_interval),
            format_duration(self.lock_lease),
            self.executor_capacity,
            format_duration(self.drain_timeout),
        )
    }
}

/// Reads one variable at a time, falling back to its declared default.
/// `1048576`, `1024KiB`, `1MiB` (or `K`, `M`): the size in bytes.
fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1024,
        "M" | "MiB" => 1024 * 1024,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Env<'_> {
    fn raw(&self, name: &'static str) -> String {
        (self.lookup)(name).unwrap_or_else(|| default_of(name).to_owned())
    }

    fn text(&self, name: &'static str) -> String {
        self.raw(name)
    }

    fn invalid(name: &'static str, value: &str, expected: &str) -> ConfigError {
        ConfigError::Invalid {
            var: name,
            // The message is printed: a URL's password must not be.
            value: redact_url(value),
            expected: expected.to_owned(),
        }
    }

    fn url(&self, name: &'static str, schemes: &[&str]) -> Result<String, ConfigError> {
        let value = self.raw(name);
        if schemes.iter().any(|scheme| value.starts_with(scheme)) {
            Ok(value)
        } else {
            Err(Env::invalid(
                name,
                &value,
                &format!("a URL starting with {}", schemes.join(" or ")),
            ))
        }
    }

    /// An SMTP server URL; None when empty. The error never repeats the password.
    fn smtp(&self, name: &'static str) -> Result<Option<SmtpSettings>, ConfigError> {
        let value = self.raw(name);
        if value.trim().is_empty() {
            return Ok(None);
        }
        SmtpSettings::parse(&value)
            .map(Some)
            .map_err(|expected| Env::invalid(name, &value, &expected))
    }

    /// A mail address (`name@domain`, or `Display Name <name@domain>`).
    fn mailbox(&self, name: &'static str) -> Result<String, ConfigError> {
        let value = self.raw(name);
        let address = value
            .rsplit_once('<')
            .map(|(_, rest)| rest.trim_end_matches('>'))
            .unwrap_or(&value);
        match address.split_once('@') {
            Some((local, domain)) if !local.is_empty() && !domain.is_empty() && !address.contains(' ') => {
                Ok(value)
            }
            _ => Err(Env::invalid(
                name,
                &value,
                "a mail address such as probactr@example.com",
            )),
        }
    }

    /// The secret keys; an error never repeats a key's text.
    fn keyring(&self) -> Result<Option<Keyring>, ConfigError> {
        let key = |name: &'static str| -> Result<Option<SecretKey>, ConfigError> {
            let text = self.raw(name);
            if text.trim().is_empty() {
                return Ok(None);
            }
            SecretKey::parse(&text)
                .map(Some)
                .map_err(|err| ConfigError::Inconsistent {
                    var: name,
                    message: err.to_string(),
                })
        };
        let current = key("PROBACTR_SECRET_KEY")?;
        let previous = key("PROBACTR_SECRET_KEY_PREVIOUS")?;
        match (current, previous) {
            (Some(current), previous) => Ok(Some(Keyring::new(current, previous))),
            (None, Some(_)) => Err(ConfigError::Inconsistent {
                var: "PROBACTR_SECRET_KEY_PREVIOUS",
                message: "is set without PROBACTR_SECRET_KEY".into(),
            }),
            (None, None) => Ok(None),
        }
    }

    fn cidrs(&self, name: &'static str) -> Result<Vec<Cidr>, ConfigError> {
        let value = self.raw(name);
        self.list(name)
            .iter()
            .map(|entry| entry.parse::<Cidr>())
            .collect::<Result<_, _>>()
            .map_err(|_| Env::invalid(name, &value, "CIDR ranges like 10.0.0.0/8,fd00::/8"))
    }

    fn number(&self, name: &'static str, min: u32, max: u32) -> Result<u32, ConfigError> {
        let value = self.raw(name);
        match value.trim().parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(Env::invalid(
                name,
                &value,
                &format!("a whole number from {min} to {max}"),
            )),
        }
    }

    /// A size in bytes from `min` to `max`: a whole number, or one followed by `KiB` or
    /// `MiB` (`K` and `M` too).
    fn bytes(&self, name: &'static str, min: u64, max: u64) -> Result<u64, ConfigError> {
        let value = self.raw(name);
        match parse_bytes(&value) {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(Env::invalid(
                name,
                &value,
                &format!("a size like 65536, 512KiB or 1MiB, from {min} to {max} bytes"),
            )),
        }
    }

    fn duration(&self, name: &'static str) -> Result<Duration, ConfigError> {
        let value = self.raw(name);
        match parse_duration(&value) {
            Ok(d) if !d.is_zero() => Ok(d),
            _ => Err(Env::invalid(
                name,
                &value,
                "a positive duration like 500ms, 5s, 2m, 1h or 30d",
            )),
        }
    }

    /// A duration from zero up to `max`.
    fn duration_or_zero(&self, name: &'static str, max: Duration) -> Result<Duration, ConfigError> {
        let value = self.raw(name);
        match parse_duration(&value) {
            Ok(d) if d <= max => Ok(d),
            _ => Err(Env::invalid(
                name,
                &value,
                &format!(
                    "a duration like 0s, 500ms or 2s, at most {}",
                    format_duration(max)
                ),
            )),
        }
    }

    fn labels(&self, name: &'static str) -> Result<crate::labels::Labels, ConfigError> {
        let value = self.raw(name);
        crate::labels::parse_labels(&value).map_err(|why| ConfigError::Inconsistent {
            var: name,
            message: format!("{why}; expected name=value,name=value such as zone=a,gpu=1"),
        })
    }

    fn list(&self, name: &'static str) -> Vec<String> {
        self.raw(name)
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn optional_account(&self, name: &'static str) -> Result<Option<AccountName>, ConfigError> {
        let value = self.raw(name);
        if value.trim().is_empty() {
            return Ok(None);
        }
        AccountName::parse(&value)
            .map(Some)
            .map_err(|expected| Env::invalid(name, &value, &expected))
    }

    fn accounts(&self, name: &'static str) -> Result<Vec<AccountName>, ConfigError> {
        let value = self.raw(name);
        self.list(name)
            .iter()
            .map(|entry| {
                AccountName::parse(entry).map_err(|expected| {
                    Env::invalid(
                        name,
                        &value,
                        &format!("a comma-separated list of accounts, each {expected}"),
                    )
                })
            })
            .collect()
    }

    fn addr(&self, name: &'static str) -> Result<SocketAddr, ConfigError> {
        let value = self.raw(name);
        value
            .trim()
            .parse()
            .map_err(|_| Env::invalid(name, &value, "an address like 127.0.0.1:8080"))
    }

    fn optional_addr(&self, name: &'static str) -> Result<Option<SocketAddr>, ConfigError> {
        if self.raw(name).trim().is_empty() {
            Ok(None)
        } else {
            self.addr(name).map(Some)
        }
    }

    fn backoff(&self, name: &'static str) -> Result<Backoff, ConfigError> {
        let value = self.raw(name);
        value.parse().map_err(|why: String| {
            Env::invalid(name, &value, &format!("jitter:BASE:CAP or fixed:DELAY ({why})"))
        })
    }

    fn flag(&self, name: &'static str) -> Result<bool, ConfigError> {
        let value = self.raw(name);
        match value.trim() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(Env::invalid(name, &value, "true or false")),
        }
    }

    fn log_format(&self, name: &'static str) -> Result<LogFormat, ConfigError> {
        let value = self.raw(name);
        match value.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(Env::invalid(name, &value, "text or json")),
        }
    }
}

fn default_of(name: &str) -> &'static str {
    VARS.iter()
        .find(|var| var.name == name)
        .map(|var| var.default)
        .unwrap_or("")
}

/// Parses `500ms`, `5s`, `2m`, `1h`, `30d` (one number and one unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "" => return Err(format!("{text:?} has no unit (ms, s, m, h, d)")),
        other => return Err(format!("{other:?} is not a unit (ms, s, m, h, d)")),
    };
    amount
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Writes a duration in the largest unit that divides it exactly.
pub fn format_duration(d: Duration) -> String {
    let millis = d.as_millis();
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if millis >= size && millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// `PROBACTR_*` names the scripts read (`scripts/up`, `scripts/test`), not the processes.
pub const SCRIPT_VARS: &[&str] = &["PROBACTR_STATE", "PROBACTR_PG_BINDIR"];

/// `PROBACTR_*` names executors give the jobs they run (a run's identity, its checkpoint
/// file, its inputs and output file), not settings.
pub const JOB_VARS: &[&str] = &[
    "PROBACTR_RUN_ID",
    "PROBACTR_JOB_ID",
    "PROBACTR_TRIGGER_ID",
    "PROBACTR_SCHEDULED_AT",
    "PROBACTR_ATTEMPT",
    "PROBACTR_FENCE",
    "PROBACTR_CHECKPOINT_FILE",
    "PROBACTR_PARAMS",
    // `PROBACTR_PARAM_<KEY>`, one per top-level parameter.
    "PROBACTR_PARAM",
    "PROBACTR_PARENT_RUN_ID",
    "PROBACTR_WORKFLOW_RUN_ID",
    "PROBACTR_STEP",
    "PROBACTR_UPSTREAM",
    "PROBACTR_OUTPUT_FILE",
    "PROBACTR_SHARD_INDEX",
    "PROBACTR_SHARD_TOTAL",
    "PROBACTR_REPLICA_INDEX",
];

/// `PROBACTR_*` names the command-line client (`probactr`) reads.
pub const CLIENT_VARS: &[&str] = &["PROBACTR_URL", "PROBACTR_TOKEN"];

/// Whether `name` is a `PROBACTR_*` name probactr knows without it being a setting of
/// its processes (the scripts', the jobs', the client's).
pub fn is_known_elsewhere(name: &str) -> bool {
    SCRIPT_VARS.contains(&name) || JOB_VARS.contains(&name) || CLIENT_VARS.contains(&name)
}

/// A `PROBACTR_*` variable that nothing reads, with the known name it is closest to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariable {
    /// As set.
    pub name: String,
    /// The known name it most likely misspells.
    pub suggestion: Option<&'static str>,
}

impl std::fmt::Display for UnknownVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown {}", self.name)?;
        match self.suggestion {
            Some(known) => write!(f, ", did you mean {known}?"),
            None => write!(f, " (it is ignored)"),
        }
    }
}

/// The `PROBACTR_*` names among `names` that no probactr process or script reads: a
/// misspelt setting is otherwise silently replaced by its default.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<UnknownVariable> {
    let known = || {
        VARS.iter()
            .map(|var| var.name)
            .chain(SCRIPT_VARS.iter().copied())
            .chain(JOB_VARS.iter().copied())
            .chain(CLIENT_VARS.iter().copied())
    };
    let mut unknown: Vec<UnknownVariable> = names
        .into_iter()
        .filter(|name| name.starts_with("PROBACTR_") && !known().any(|k| k == *name))
        .map(|name| UnknownVariable {
            name: name.to_owned(),
            suggestion: known()
                .map(|k| (edit_distance(name, k), k))
                .filter(|(distance, _)| *distance <= 3)
                .min()
                .map(|(_, k)| k),
        })
        .collect();
    unknown.sort_by(|a, b| a.name.cmp(&b.name));
    unknown
}

/// The Levenshtein distance between two names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// Hides the password of a connection URL.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_with(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_map(&map)
    }

    #[test]
    fn defaults_make_a_local_config() {
        let config = config_with(&[]).expect("defaults are valid");
        assert_eq!(config.heartbeat_interval, Duration::from_secs(5));
        assert_eq!(config.heartbeat_timeout, Duration::from_secs(15));
        assert_eq!(config.reap_interval, Duration::from_secs(5));
        assert_eq!(config.lock_lease, Duration::from_secs(30));
        assert_eq!(config.redis_prefix, "probactr:");
        assert_eq!(config.admin_password, None);
    }

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        for bad in ["", "5", "s", "5 s", "-5s", "5x", "1.5s", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
    }

    #[test]
    fn sizes_parse_in_bytes_kib_and_mib() {
        assert_eq!(config_with(&[]).expect("defaults").output_limit, 1024 * 1024);
        assert_eq!(parse_bytes("65536"), Some(65536));
        assert_eq!(parse_bytes("512KiB"), Some(512 * 1024));
        assert_eq!(parse_bytes("2M"), Some(2 * 1024 * 1024));
        for bad in ["", "KiB", "1.5MiB", "1GiB", "-1"] {
            assert_eq!(parse_bytes(bad), None, "{bad:?} should not parse");
        }
        let err = config_with(&[("PROBACTR_OUTPUT_LIMIT", "10")]).expect_err("below the minimum");
        assert!(err.to_string().contains("PROBACTR_OUTPUT_LIMIT"), "{err}");
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        let cases = [
            ("PROBACTR_HEARTBEAT_INTERVAL", "fast"),
            ("PROBACTR_LOCK_LEASE", "0s"),
            ("PROBACTR_EXECUTOR_CAPACITY", "-1"),
            ("PROBACTR_EXECUTOR_CAPACITY", "0"),
            ("DATABASE_URL", "mysql://x"),
            ("REDIS_URL", "localhost:6379"),
            ("PROBACTR_MANAGER_LISTEN", "everywhere"),
            ("PROBACTR_LOG_FORMAT", "xml"),
            ("PROBACTR_COOKIE_SECURE", "maybe"),
            ("PROBACTR_LOCK_RETRY", "sometimes"),
        ];
        for (var, value) in cases {
            let err = config_with(&[(var, value)]).expect_err(var);
            assert!(err.to_string().contains(var), "{err} should name {var}");
            assert!(
                err.to_string().contains("expected"),
                "{err} should say what is expected"
            );
        }
    }

    #[test]
    fn heartbeat_timeout_must_exceed_interval() {
        let err = config_with(&[
            ("PROBACTR_HEARTBEAT_INTERVAL", "5s"),
            ("PROBACTR_HEARTBEAT_TIMEOUT", "5s"),
        ])
        .expect_err("equal timeout is inconsistent");
        assert!(matches!(
            err,
            ConfigError::Inconsistent {
                var: "PROBACTR_HEARTBEAT_TIMEOUT",
                ..
            }
        ));
    }

    #[test]
    fn misspelt_variables_are_named_with_the_likely_intent() {
        // Spelt in two parts, so that the file names no variable nothing reads.
        let misspelt = concat!("PROBACTR", "_EXECUTOR_CAPACTY");
        let unheard_of = concat!("PROBACTR", "_WHATEVER_THIS_IS");
        let unknown = unknown_variables([
            misspelt,
            "PROBACTR_EXECUTOR_CAPACITY",
            "PROBACTR_STATE",
            unheard_of,
            "HOME",
        ]);
        let text: Vec<String> = unknown.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                format!("unknown {misspelt}, did you mean PROBACTR_EXECUTOR_CAPACITY?"),
                format!("unknown {unheard_of} (it is ignored)"),
            ]
        );
    }

    #[test]
    fn errors_hide_passwords() {
        let err = config_with(&[("DATABASE_URL", "mysql://u:secret@db/x")]).expect_err("wrong scheme");
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(err.to_string().contains("DATABASE_URL"), "{err}");
    }

    #[test]
    fn summary_hides_passwords() {
        let config = config_with(&[("DATABASE_URL", "postgres://u:secret@db/x")]).expect("valid");
        assert!(!config.summary().contains("secret"));
        assert!(config.summary().contains("u:***@db/x"));
    }

    #[test]
    fn smtp_urls() {
        let plain = SmtpSettings::parse("smtp://127.0.0.1:2525?tls=none").expect("valid");
        assert_eq!(
            (plain.host.as_str(), plain.port, plain.tls),
            ("127.0.0.1", 2525, SmtpTls::None)
        );
        assert_eq!(plain.user, None);
        let login = SmtpSettings::parse("smtp://alerts%40example.com:p%40ss@mail.example.com?tls=starttls")
            .expect("valid");
        assert_eq!(login.user.as_deref(), Some("alerts@example.com"));
        assert_eq!(login.password.as_deref(), Some("p@ss"));
        assert_eq!((login.port, login.tls), (25, SmtpTls::StartTls));
        let wrapped = SmtpSettings::parse("smtps://u:p@mail.example.com").expect("valid");
        assert_eq!((wrapped.port, wrapped.tls), (465, SmtpTls::Wrapper));
        assert!(
            !format!("{wrapped:?}").contains("\"p\""),
            "Debug hides the password"
        );
        for bad in [
            "http://mail",
            "smtp://",
            "smtp://mail?tls=maybe",
            "smtps://mail?tls=starttls",
            "smtp://mail?tls=none&tls=starttls",
        ] {
            assert!(SmtpSettings::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn a_bad_smtp_url_is_named_without_its_password() {
        let err =
            config_with(&[("PROBACTR_SMTP_URL", "smtp://u:hunter2@mail?tls=maybe")]).expect_err("invalid");
        let text = err.to_string();
        assert!(text.contains("PROBACTR_SMTP_URL"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        let err = config_with(&[("PROBACTR_SMTP_FROM", "nobody")]).expect_err("invalid");
        assert!(err.to_string().contains("PROBACTR_SMTP_FROM"));
    }

    #[test]
    fn smtp_without_tls_must_say_so() {
        for plain in ["smtp://u:hunter2@mail.example.com:587", "smtp://mail.example.com"] {
            let err = config_with(&[("PROBACTR_SMTP_URL", plain)]).expect_err("plain text by default");
            let text = err.to_string();
            assert!(
                text.contains("PROBACTR_SMTP_URL") && text.contains("tls=none"),
                "{text}"
            );
            assert!(!text.contains("hunter2"), "{text}");
        }
        let config = config_with(&[("PROBACTR_SMTP_URL", "smtp://relay.internal?tls=none")]).expect("chosen");
        assert_eq!(config.smtp.map(|smtp| smtp.tls), Some(SmtpTls::None));
        let config = config_with(&[("PROBACTR_SMTP_URL", "smtp://mail.example.com:587?tls=starttls")])
            .expect("STARTTLS");
        assert_eq!(config.smtp.map(|smtp| smtp.tls), Some(SmtpTls::StartTls));
    }

    #[test]
    fn every_variable_has_a_parsing_default() {
        let names: Vec<_> = VARS.iter().map(|v| v.name).collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(names.len(), unique.len(), "a variable is declared twice");
    }
}
