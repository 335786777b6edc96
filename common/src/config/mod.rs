//! Settings of every probactr process, read from environment variables.
//!
//! Every variable is declared once in [`VARS`] with its default and meaning; the README's
//! configuration table and `.env.example` are checked against that list. Reading is
//! strict: a value that does not parse, or a set of values that contradict each other,
//! is a [`ConfigError`] naming the variable and what was expected, and the binaries exit
//! with code 2 on it ([`Config::from_env_or_exit`]).
//!
//! # Layout
//!
//! - `vars`: the catalogue of variables ([`VARS`]), each with its default and meaning.
//! - `env`: the reader of one variable at a time, whose errors name the variable.
//! - `units`: durations (`5s`) and sizes (`1MiB`) as they are written in settings.
//! - `smtp`: the SMTP server of `PROBACTR_SMTP_URL`.
//! - `unknown`: names that are not settings, and what a misspelt one probably meant.
//! - `files`: secret settings read from `NAME_FILE`.
//! - `oidc`: single sign-on (`PROBACTR_OIDC_ISSUER` and the settings beside it, the role map) and password logins
//!   (`PROBACTR_LOCAL_LOGIN`, `PROBACTR_BREAK_GLASS_USER`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

mod env;
mod files;
mod oidc;
mod smtp;
mod units;
mod unknown;
mod vars;

pub use files::FILE_SETTINGS;
pub use oidc::{Grant, Grants, LocalLogin, OidcSettings, RoleMap};
pub use smtp::{SmtpSettings, SmtpTls};
pub use units::{format_duration, parse_duration};
pub use unknown::{
    is_known_elsewhere, unknown_variables, UnknownVariable, CLIENT_VARS, JOB_VARS, SCRIPT_VARS,
};
pub use vars::{Var, VARS};

use crate::account::AccountName;
use crate::backoff::Backoff;
use crate::cidr::Cidr;
use crate::secrets::Keyring;
use env::Env;

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

/// `PROBACTR_CGROUP`: which cgroup (v2) an executor puts its shell runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupSetting {
    /// The executor's own cgroup when it is delegated to it (writable, not the
    /// hierarchy's root); process groups alone otherwise.
    Auto,
    /// Process groups alone.
    Off,
    /// This cgroup directory, which must exist and be writable (start-up refuses otherwise).
    Path(std::path::PathBuf),
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
    /// `DATABASE_READ_URL`: a streaming replica the manager reads from (None: the primary).
    pub database_read_url: Option<String>,
    /// `PROBACTR_READ_MAX_LAG`: the replica's largest lag before reads go to the primary.
    pub read_max_lag: Duration,
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
    /// `PROBACTR_EXECUTOR_PREFETCH`.
    pub executor_prefetch: u32,
    /// `PROBACTR_EXECUTOR_LABELS`.
    pub executor_labels: crate::labels::Labels,
    /// `PROBACTR_EXECUTOR_NAMESPACES` (None when empty: every namespace).
    pub executor_namespaces: Option<Vec<String>>,
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
    /// `PROBACTR_OUTPUT_ARCHIVE` (None when empty: no archive).
    pub output_archive: Option<ArchiveLocation>,
    /// `PROBACTR_OUTPUT_SPOOL`.
    pub output_spool: std::path::PathBuf,
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
    /// `PROBACTR_CGROUP`: where shell runs get a cgroup (v2) each.
    pub cgroup: CgroupSetting,
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
    /// Single sign-on (None when `PROBACTR_OIDC_ISSUER` is empty).
    pub oidc: Option<OidcSettings>,
    /// Who may log in with a password (`PROBACTR_LOCAL_LOGIN`, `PROBACTR_BREAK_GLASS_USER`).
    pub local_login: LocalLogin,
    /// `PROBACTR_LOG_FORMAT`.
    pub log_format: LogFormat,
    /// `RUST_LOG`.
    pub log_filter: String,
}

/// Where runs' full output is archived: `s3://BUCKET/PREFIX`, with the storage's
/// endpoint, region and credentials from the standard `AWS_*` variables.
#[derive(Clone, PartialEq, Eq)]
pub struct ArchiveLocation {
    /// The bucket.
    pub bucket: String,
    /// The key prefix, without slashes at either end (empty: the bucket's root).
    pub prefix: String,
    /// The `AWS_*` variables that were set ([`ARCHIVE_AWS_VARS`]), as (name, value).
    pub aws: Vec<(&'static str, String)>,
}

/// The `AWS_*` variables the output archive reads (those of S3-compatible storage that
/// apply to one bucket).
pub const ARCHIVE_AWS_VARS: &[&str] = &[
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ALLOW_HTTP",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_ENDPOINT_URL_STS",
    "AWS_METADATA_ENDPOINT",
    "AWS_IMDSV1_FALLBACK",
    "AWS_SERVER_SIDE_ENCRYPTION",
    "AWS_SSE_KMS_KEY_ID",
];

impl std::fmt::Debug for ArchiveLocation {
    // The credentials are never printed: the names that were set only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.aws.iter().map(|(name, _)| *name).collect();
        f.debug_struct("ArchiveLocation")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("aws", &names)
            .finish()
    }
}

impl ArchiveLocation {
    /// Reads `s3://BUCKET[/PREFIX]`; None when it is not one.
    pub fn parse(value: &str) -> Option<ArchiveLocation> {
        let rest = value.trim().strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid_bucket = !bucket.is_empty()
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'));
        valid_bucket.then(|| ArchiveLocation {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            aws: Vec::new(),
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
        let oidc = oidc::read(&env)?;
        let local_login = oidc::local_login(&env, oidc.is_some())?;
        let config = Config {
            database_url: env.url("DATABASE_URL", &["postgres://", "postgresql://"])?,
            database_read_url: env.optional_url("DATABASE_READ_URL", &["postgres://", "postgresql://"])?,
            read_max_lag: env.duration("PROBACTR_READ_MAX_LAG")?,
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
            executor_prefetch: env.number("PROBACTR_EXECUTOR_PREFETCH", 0, 100_000)?,
            executor_labels: env.labels("PROBACTR_EXECUTOR_LABELS")?,
            executor_namespaces: env.namespaces("PROBACTR_EXECUTOR_NAMESPACES")?,
            fire_batch: env.number("PROBACTR_FIRE_BATCH", 1, 100_000)?,
            fire_ahead: env.duration_or_zero("PROBACTR_FIRE_AHEAD", Duration::from_secs(10))?,
            drain_timeout: env.duration("PROBACTR_DRAIN_TIMEOUT")?,
            retention: env.duration("PROBACTR_RETENTION")?,
            output_limit: env.bytes("PROBACTR_OUTPUT_LIMIT", 1024, 1 << 30)?,
            output_archive: env.archive("PROBACTR_OUTPUT_ARCHIVE")?,
            output_spool: Some(env.text("PROBACTR_OUTPUT_SPOOL"))
                .filter(|dir| !dir.trim().is_empty())
                .map_or_else(
                    || std::env::temp_dir().join("probactr-output-spool"),
                    std::path::PathBuf::from,
                ),
            http_allow: env.list("PROBACTR_HTTP_ALLOW"),
            http_deny: env.list("PROBACTR_HTTP_DENY"),
            job_env_passthrough: env.list("PROBACTR_JOB_ENV_PASSTHROUGH"),
            job_user: env.optional_account("PROBACTR_JOB_USER")?,
            job_users_allowed: env.accounts("PROBACTR_JOB_USERS_ALLOWED")?,
            work_dir: Some(env.text("PROBACTR_WORK_DIR"))
                .filter(|dir| !dir.trim().is_empty())
                .map(std::path::PathBuf::from),
            cgroup: env.cgroup("PROBACTR_CGROUP")?,
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
            oidc,
            local_login,
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
mod tests;
