//! Typed job specs: what a job's `spec` JSON column means for each [`JobKind`].
//!
//! The `jobs.spec` column is free-form JSON so that every kind can carry its own
//! settings. Free-form storage must not mean free-form input, though: the manager
//! validates a spec with [`JobSpec::parse`] before it stores it (so a bad spec is a 422
//! naming the field, invariant 7), and the executor parses it again before running (so
//! a row edited by hand fails the run with the same clear message instead of doing
//! something surprising).
//!
//! Parsing is done field by field rather than with a derived `Deserialize`, because the
//! error must name the offending field (`spec.url`, `spec.headers.X-Foo`,
//! `spec.expect_status[1]`), and serde's messages name a line and column of a document
//! the user never wrote.
//!
//! | kind    | spec |
//! |---------|------|
//! | `shell` | `{"program": "backup", "args": ["--full"], "env": {"K": "v"}, "cwd": "/srv", "shell": false}` |
//! | `http`  | `{"method": "POST", "url": "https://x/hook", "headers": {"K": "v"}, "body": "…", "expect_status": [200, 204]}` |
//! | `noop`  | `{}` (or `null`) |
//! | `sleep` | `{"millis": 1500}` |
//!
//! Variables named `PROBACTR_*` and headers named `X-Probactr-*` are reserved: the
//! executor sets them to the run's identity so that a job can make its own effects
//! idempotent, and a spec must not be able to forge them.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::account::AccountName;
use crate::model::JobKind;

/// The longest a `sleep` job may sleep: one day.
pub const MAX_SLEEP_MILLIS: u64 = 24 * 60 * 60 * 1000;

/// HTTP methods an `http` job may use.
pub const HTTP_METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// Prefix of the environment variables the executor sets for a shell job.
pub const RESERVED_ENV_PREFIX: &str = "PROBACTR_";

/// Prefix (lower case) of the request headers the executor sets for an HTTP job.
pub const RESERVED_HEADER_PREFIX: &str = "x-probactr-";

/// A job's spec, parsed and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobSpec {
    /// Run a program.
    Shell(ShellSpec),
    /// Send an HTTP request.
    Http(HttpSpec),
    /// Do nothing and succeed.
    Noop,
    /// Sleep, then succeed.
    Sleep {
        /// How long to sleep, at most [`MAX_SLEEP_MILLIS`].
        millis: u64,
    },
}

/// What stands for a value that may be a secret.
pub const REDACTED: &str = "***";

/// A stored spec with the values that may be secrets (a shell job's `env` values, an HTTP
/// job's `headers` values) replaced by [`REDACTED`]: what is shown to whoever may not edit
/// the job, and what the audit log keeps.
pub fn redact_secrets(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for key in ["env", "headers"] {
        if let Some(Value::Object(map)) = spec.get_mut(key) {
            for value in map.values_mut() {
                *value = Value::String(REDACTED.to_owned());
            }
        }
    }
    spec
}

/// A `shell` job: a program with an argument list, run without an implicit shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSpec {
    /// The program (looked up in `PATH` when it has no `/`), or the script when `shell`.
    pub program: String,
    /// Arguments, passed as they are (no word splitting, no globbing).
    pub args: Vec<String>,
    /// Variables added on top of the executor's environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; the executor's own when absent.
    pub cwd: Option<String>,
    /// When true, run `sh -c program sh args…` (so `args` are `$1`, `$2`, …), for pipelines.
    pub shell: bool,
    /// The account to run as, one of the executor's `PROBACTR_JOB_USERS_ALLOWED`; absent:
    /// the executor's `PROBACTR_JOB_USER`, or its own account.
    pub run_as: Option<AccountName>,
    /// Resource limits of the job's processes.
    pub limits: ProcessLimits,
}

/// Resource limits of a shell job's processes (`spec.limits`), applied as rlimits to the
/// program and inherited by what it starts; absent ones are the executor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessLimits {
    /// Address space of each process, in MiB (`RLIMIT_AS`): allocations past it fail.
    pub memory_mib: Option<u64>,
    /// CPU time of each process, in seconds (`RLIMIT_CPU`): SIGXCPU, then SIGKILL.
    pub cpu_secs: Option<u64>,
    /// Open files of each process (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Processes of the job's account (`RLIMIT_NPROC`; not enforced for root).
    pub processes: Option<u64>,
}

impl ProcessLimits {
    /// The fields, their names and their largest accepted values.
    pub const FIELDS: [(&'static str, u64); 4] = [
        ("memory_mib", 1 << 24),
        ("cpu_secs", 1 << 31),
        ("open_files", 1 << 20),
        ("processes", 1 << 22),
    ];

    /// (field name, value) of the limits that are set.
    pub fn set(&self) -> Vec<(&'static str, u64)> {
        [
            ("memory_mib", self.memory_mib),
            ("cpu_secs", self.cpu_secs),
            ("open_files", self.open_files),
            ("processes", self.processes),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| (name, value)))
        .collect()
    }
}

/// An `http` job: one request whose status decides the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSpec {
    /// One of [`HTTP_METHODS`], upper case.
    pub method: String,
    /// An absolute `http` or `https` URL.
    pub url: String,
    /// Request headers.
    pub headers: BTreeMap<String, String>,
    /// Request body.
    pub body: Option<String>,
    /// Statuses that count as success; empty means any 2xx.
    pub expect_status: Vec<u16>,
    /// Which redirects are followed.
    pub follow_redirects: FollowRedirects,
}

/// Which redirects an HTTP job follows. A redirect to another origin could hand the
/// job's headers (an `X-Api-Key`) and body to whatever host the first one names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FollowRedirects {
    /// Only to the same scheme, host and port; a redirect elsewhere ends the exchange
    /// (its 3xx status is the job's answer).
    #[default]
    SameOrigin,
    /// Anywhere; across origins without the job's headers and without a body.
    Any,
    /// None: the first answer is the job's answer.
    None,
}

impl FollowRedirects {
    /// Every value, as the spec spells it.
    pub const NAMES: &'static [&'static str] = &["same-origin", "any", "none"];

    /// The spec's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FollowRedirects::SameOrigin => "same-origin",
            FollowRedirects::Any => "any",
            FollowRedirects::None => "none",
        }
    }

    fn parse(text: &str) -> Option<FollowRedirects> {
        match text {
            "same-origin" => Some(FollowRedirects::SameOrigin),
            "any" => Some(FollowRedirects::Any),
            "none" => Some(FollowRedirects::None),
            _ => None,
        }
    }
}

impl HttpSpec {
    /// Whether `status` counts as success for this job.
    pub fn accepts(&self, status: u16) -> bool {
        if self.expect_status.is_empty() {
            (200..=299).contains(&status)
        } else {
            self.expect_status.contains(&status)
        }
    }
}

/// A spec that is not valid for its kind; `field` names the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// The field, as a path from the job: `spec.url`, `spec.headers.X-Foo`, `spec`.
    pub field: String,
    /// What is wrong with it, for a person.
    pub message: String,
}

impl SpecError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl JobSpec {
    /// Parses and validates the spec of a job of kind `kind`.
    pub fn parse(kind: JobKind, spec: &Value) -> Result<JobSpec, SpecError> {
        match kind {
            JobKind::Shell => parse_shell(spec).map(JobSpec::Shell),
            JobKind::Http => parse_http(spec).map(JobSpec::Http),
            JobKind::Noop => parse_noop(spec),
            JobKind::Sleep => parse_sleep(spec),
        }
    }

    /// The kind this spec belongs to.
    pub fn kind(&self) -> JobKind {
        match self {
            JobSpec::Shell(_) => JobKind::Shell,
            JobSpec::Http(_) => JobKind::Http,
            JobSpec::Noop => JobKind::Noop,
            JobSpec::Sleep { .. } => JobKind::Sleep,
        }
    }

    /// The canonical JSON form (what the manager stores); [`JobSpec::parse`] reads it back.
    pub fn to_json(&self) -> Value {
        match self {
            JobSpec::Shell(s) => {
                let mut o = Map::new();
                o.insert("program".into(), Value::from(s.program.clone()));
                o.insert("args".into(), Value::from(s.args.clone()));
                o.insert("env".into(), string_map_json(&s.env));
                if let Some(cwd) = &s.cwd {
                    o.insert("cwd".into(), Value::from(cwd.clone()));
                }
                o.insert("shell".into(), Value::from(s.shell));
                if let Some(account) = &s.run_as {
                    o.insert("run_as".into(), Value::from(account.to_string()));
                }
                let limits = s.limits.set();
                if !limits.is_empty() {
                    let limits: Map<String, Value> = limits
                        .into_iter()
                        .map(|(name, value)| (name.to_owned(), Value::from(value)))
                        .collect();
                    o.insert("limits".into(), Value::Object(limits));
                }
                Value::Object(o)
            }
            JobSpec::Http(h) => {
                let mut o = Map::new();
                o.insert("method".into(), Value::from(h.method.clone()));
                o.insert("url".into(), Value::from(h.url.clone()));
                o.insert("headers".into(), string_map_json(&h.headers));
                if let Some(body) = &h.body {
                    o.insert("body".into(), Value::from(body.clone()));
                }
                o.insert("expect_status".into(), Value::from(h.expect_status.clone()));
                if h.follow_redirects != FollowRedirects::default() {
                    o.insert(
                        "follow_redirects".into(),
                        Value::from(h.follow_redirects.as_str()),
                    );
                }
                Value::Object(o)
            }
            JobSpec::Noop => Value::Object(Map::new()),
            JobSpec::Sleep { millis } => serde_json::json!({ "millis": millis }),
        }
    }
}

fn string_map_json(map: &BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------
// Field helpers
// ---------------------------------------------------------------------------------------

/// The spec as an object whose keys are all in `allowed`.
fn object<'a>(spec: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>, SpecError> {
    let obj = spec
        .as_object()
        .ok_or_else(|| SpecError::new("spec", "must be a JSON object"))?;
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(SpecError::new(
            format!("spec.{unknown}"),
            format!("unknown field; expected one of: {}", allowed.join(", ")),
        ));
    }
    Ok(obj)
}

/// Field `name` read as a `T`; `None` when absent or null. `what` describes `T` for people.
fn field<T: DeserializeOwned>(
    obj: &Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<Option<T>, SpecError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => T::deserialize(v)
            .map(Some)
            .map_err(|_| SpecError::new(format!("spec.{name}"), format!("must be {what}"))),
    }
}

fn required<T: DeserializeOwned>(obj: &Map<String, Value>, name: &str, what: &str) -> Result<T, SpecError> {
    field(obj, name, what)?.ok_or_else(|| SpecError::new(format!("spec.{name}"), "is required"))
}

fn no_nul(field: &str, text: &str) -> Result<(), SpecError> {
    if text.contains('\0') {
        return Err(SpecError::new(field, "must not contain a NUL character"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Kinds
// ---------------------------------------------------------------------------------------

fn parse_shell(spec: &Value) -> Result<ShellSpec, SpecError> {
    let obj = object(
        spec,
        &["program", "args", "env", "cwd", "shell", "run_as", "limits"],
    )?;
    let program: String = required(obj, "program", "a string")?;
    if program.trim().is_empty() {
        return Err(SpecError::new("spec.program", "must not be empty"));
    }
    no_nul("spec.program", &program)?;
    let args: Vec<String> = field(obj, "args", "an array of strings")?.unwrap_or_default();
    for (i, arg) in args.iter().enumerate() {
        no_nul(&format!("spec.args[{i}]"), arg)?;
    }
    let env: BTreeMap<String, String> = field(obj, "env", "an object of string values")?.unwrap_or_default();
    for (key, value) in &env {
        check_env(key, value)?;
    }
    let cwd: Option<String> = field(obj, "cwd", "a string")?;
    if let Some(cwd) = &cwd {
        if cwd.is_empty() {
            return Err(SpecError::new("spec.cwd", "must not be empty (omit it instead)"));
        }
        no_nul("spec.cwd", cwd)?;
    }
    let shell: bool = field(obj, "shell", "true or false")?.unwrap_or(false);
    let run_as = field::<String>(obj, "run_as", "a string")?
        .map(|text| {
            AccountName::parse(&text)
                .map_err(|expected| SpecError::new("spec.run_as", format!("must be {expected}")))
        })
        .transpose()?;
    Ok(ShellSpec {
        program,
        args,
        env,
        cwd,
        shell,
        run_as,
        limits: parse_limits(obj.get("limits"))?,
    })
}

fn parse_limits(value: Option<&Value>) -> Result<ProcessLimits, SpecError> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(ProcessLimits::default());
    };
    let names: Vec<&str> = ProcessLimits::FIELDS.iter().map(|(name, _)| *name).collect();
    let obj = value.as_object().ok_or_else(|| {
        SpecError::new(
            "spec.limits",
            format!("must be an object of {}", names.join(", ")),
        )
    })?;
    if let Some(unknown) = obj.keys().find(|key| !names.contains(&key.as_str())) {
        return Err(SpecError::new(
            format!("spec.limits.{unknown}"),
            format!("unknown limit; expected one of: {}", names.join(", ")),
        ));
    }
    let limit = |name: &str, max: u64| -> Result<Option<u64>, SpecError> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
                _ => Err(SpecError::new(
                    format!("spec.limits.{name}"),
                    format!("must be a whole number from 1 to {max}"),
                )),
            },
        }
    };
    let [memory, cpu, files, processes] = ProcessLimits::FIELDS;
    Ok(ProcessLimits {
        memory_mib: limit(memory.0, memory.1)?,
        cpu_secs: limit(cpu.0, cpu.1)?,
        open_files: limit(files.0, files.1)?,
        processes: limit(processes.0, processes.1)?,
    })
}

fn check_env(key: &str, value: &str) -> Result<(), SpecError> {
    let name = format!("spec.env.{key}");
    if key.is_empty() {
        return Err(SpecError::new("spec.env", "variable names must not be empty"));
    }
    if key.contains('=') {
        return Err(SpecError::new(name, "variable names must not contain '='"));
    }
    if key.starts_with(RESERVED_ENV_PREFIX) {
        return Err(SpecError::new(
            name,
            "PROBACTR_* variables are reserved: the executor sets them",
        ));
    }
    no_nul(&name, key)?;
    no_nul(&name, value)
}

fn parse_http(spec: &Value) -> Result<HttpSpec, SpecError> {
    let obj = object(
        spec,
        &[
            "method",
            "url",
            "headers",
            "body",
            "expect_status",
            "follow_redirects",
        ],
    )?;
    let method: String = field(obj, "method", "a string")?.unwrap_or_else(|| "GET".to_owned());
    let method = method.to_ascii_uppercase();
    if !HTTP_METHODS.contains(&method.as_str()) {
        return Err(SpecError::new(
            "spec.method",
            format!("must be one of: {}", HTTP_METHODS.join(", ")),
        ));
    }
    let url: String = required(obj, "url", "a string")?;
    check_url(&url)?;
    let headers: BTreeMap<String, String> =
        field(obj, "headers", "an object of string values")?.unwrap_or_default();
    for (name, value) in &headers {
        check_header(name, value)?;
    }
    let body: Option<String> = field(obj, "body", "a string")?;
    let expect_status: Vec<u16> =
        field(obj, "expect_status", "an array of status codes (100 to 599)")?.unwrap_or_default();
    for (i, status) in expect_status.iter().enumerate() {
        if !(100..=599).contains(status) {
            return Err(SpecError::new(
                format!("spec.expect_status[{i}]"),
                format!("{status} is not a status code (100 to 599)"),
            ));
        }
    }
    let follow_redirects: Option<String> = field(obj, "follow_redirects", "a string")?;
    let follow_redirects = match follow_redirects {
        None => FollowRedirects::default(),
        Some(text) => FollowRedirects::parse(&text).ok_or_else(|| {
            SpecError::new(
                "spec.follow_redirects",
                format!("must be one of: {}", FollowRedirects::NAMES.join(", ")),
            )
        })?,
    };
    Ok(HttpSpec {
        method,
        url,
        headers,
        body,
        expect_status,
        follow_redirects,
    })
}

/// A structural check of an absolute `http`/`https` URL, without a URL crate.
///
/// It catches what people actually get wrong (no scheme, another scheme, no host, spaces,
/// a bad port); the executor parses the URL fully before sending and fails the run with
/// the parser's message if something subtler is wrong.
///
/// References (`{{ params.id }}`) may stand in the path, query and fragment only: a value
/// filled in the scheme or authority could send the request, with the job's headers,
/// to another host ([`crate::template`]).
fn check_url(text: &str) -> Result<(), SpecError> {
    let bad = |message: &str| Err(SpecError::new("spec.url", message));
    if let Some(misplaced) = crate::template::misplaced_in_url(text) {
        return bad(&misplaced.to_string());
    }
    let text = &crate::template::with_references_as(text, "x");
    let lower = text.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &text[7..]
    } else if lower.starts_with("https://") {
        &text[8..]
    } else {
        return bad("must be an absolute URL starting with http:// or https://");
    };
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("must not contain spaces or control characters (percent-encode them)");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = split_host_port(host_port);
    if host.is_empty() {
        return bad("must name a host");
    }
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        host.chars()
            .all(|c| c.is_alphanumeric() || "-._~%!$&'()*+,;=".contains(c))
    };
    if !host_ok {
        return bad("the host is not a valid name or address");
    }
    if let Some(port) = port {
        if !port.is_empty() && port.parse::<u16>().is_err() {
            return bad("the port must be a number from 0 to 65535");
        }
    }
    Ok(())
}

/// Splits `host:port` (with `[v6]:port` for IPv6 literals); the port is `None` if absent.
fn split_host_port(text: &str) -> (&str, Option<&str>) {
    if text.starts_with('[') {
        return match text.find(']') {
            Some(end) => {
                let port = text[end + 1..].strip_prefix(':');
                (&text[..=end], port)
            }
            None => (text, None),
        };
    }
    match text.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    }
}

/// Header names are RFC 9110 tokens; values must not smuggle a line break.
fn check_header(name: &str, value: &str) -> Result<(), SpecError> {
    let field = format!("spec.headers.{name}");
    let is_tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(is_tchar) {
        return Err(SpecError::new(field, "not a valid header name"));
    }
    if name.to_ascii_lowercase().starts_with(RESERVED_HEADER_PREFIX) {
        return Err(SpecError::new(
            field,
            "X-Probactr-* headers are reserved: the executor sets them",
        ));
    }
    if value.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
        return Err(SpecError::new(field, "the value must not contain CR, LF or NUL"));
    }
    Ok(())
}

fn parse_noop(spec: &Value) -> Result<JobSpec, SpecError> {
    if !spec.is_null() {
        object(spec, &[])?;
    }
    Ok(JobSpec::Noop)
}

fn parse_sleep(spec: &Value) -> Result<JobSpec, SpecError> {
    let obj = object(spec, &["millis"])?;
    let millis: u64 = required(obj, "millis", "a whole number of milliseconds")?;
    if millis > MAX_SLEEP_MILLIS {
        return Err(SpecError::new(
            "spec.millis",
            format!("{millis} is more than one day ({MAX_SLEEP_MILLIS} ms)"),
        ));
    }
    Ok(JobSpec::Sleep { millis })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn err(kind: JobKind, spec: Value) -> SpecError {
        JobSpec::parse(kind, &spec).unwrap_err()
    }

    #[test]
    fn shell_round_trips() {
        let spec =
            json!({"program": "echo", "args": ["a b"], "env": {"K": "v"}, "cwd": "/tmp", "shell": false});
        let parsed = JobSpec::parse(JobKind::Shell, &spec).unwrap();
        assert_eq!(parsed.to_json(), spec);
        assert_eq!(JobSpec::parse(JobKind::Shell, &parsed.to_json()).unwrap(), parsed);
        assert_eq!(parsed.kind(), JobKind::Shell);
    }

    #[test]
    fn shell_run_as_and_limits_round_trip_and_name_bad_fields() {
        let spec = json!({"program": "x", "args": [], "env": {}, "shell": false, "run_as": "1000:1000",
                          "limits": {"memory_mib": 256, "cpu_secs": 60}});
        let parsed = JobSpec::parse(JobKind::Shell, &spec).unwrap();
        assert_eq!(parsed.to_json(), spec);
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "run_as": "a b"})).field,
            "spec.run_as"
        );
        assert_eq!(
            err(
                JobKind::Shell,
                json!({"program": "x", "limits": {"memory_mib": 0}})
            )
            .field,
            "spec.limits.memory_mib"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "limits": {"threads": 2}})).field,
            "spec.limits.threads"
        );
    }

    #[test]
    fn shell_defaults() {
        let parsed = JobSpec::parse(JobKind::Shell, &json!({"program": "true"})).unwrap();
        let JobSpec::Shell(s) = parsed else {
            panic!("not shell")
        };
        assert!(s.args.is_empty() && s.env.is_empty() && s.cwd.is_none() && !s.shell);
    }

    #[test]
    fn shell_errors_name_their_field() {
        assert_eq!(err(JobKind::Shell, json!({})).field, "spec.program");
        assert_eq!(err(JobKind::Shell, json!({"program": " "})).field, "spec.program");
        assert_eq!(err(JobKind::Shell, json!({"program": 3})).field, "spec.program");
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "argz": []})).field,
            "spec.argz"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "args": "a b"})).field,
            "spec.args"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "args": ["a\0"]})).field,
            "spec.args[0]"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "env": {"": "v"}})).field,
            "spec.env"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "env": {"A=B": "v"}})).field,
            "spec.env.A=B"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "env": {"K": 1}})).field,
            "spec.env"
        );
        assert_eq!(
            err(
                JobKind::Shell,
                json!({"program": "x", "env": {"PROBACTR_RUN_ID": "1"}})
            )
            .field,
            "spec.env.PROBACTR_RUN_ID"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "cwd": ""})).field,
            "spec.cwd"
        );
        assert_eq!(
            err(JobKind::Shell, json!({"program": "x", "shell": "yes"})).field,
            "spec.shell"
        );
        assert_eq!(err(JobKind::Shell, json!([])).field, "spec");
    }

    #[test]
    fn error_display_is_field_then_message() {
        let e = err(JobKind::Shell, json!({"program": "x", "bogus": 1}));
        assert!(e.to_string().starts_with("spec.bogus: unknown field"), "{e}");
    }

    #[test]
    fn http_round_trips_and_defaults() {
        let spec = json!({"method": "post", "url": "https://example.com/x", "headers": {"X-A": "1"},
                          "body": "{}", "expect_status": [200, 204]});
        let parsed = JobSpec::parse(JobKind::Http, &spec).unwrap();
        let JobSpec::Http(h) = &parsed else {
            panic!("not http")
        };
        assert_eq!(h.method, "POST");
        assert!(h.accepts(204) && !h.accepts(201));
        assert_eq!(JobSpec::parse(JobKind::Http, &parsed.to_json()).unwrap(), parsed);

        let JobSpec::Http(h) = JobSpec::parse(JobKind::Http, &json!({"url": "http://h/"})).unwrap() else {
            panic!("not http")
        };
        assert_eq!(h.method, "GET");
        for ok in [
            "http://127.0.0.1:8080/a?b#c",
            "HTTPS://user:pw@Example.com",
            "http://[::1]:80/",
            "http://h?x",
        ] {
            assert!(JobSpec::parse(JobKind::Http, &json!({"url": ok})).is_ok(), "{ok}");
        }
        assert!(h.accepts(200) && h.accepts(299) && !h.accepts(300) && !h.accepts(404));
    }

    #[test]
    fn http_errors_name_their_field() {
        assert_eq!(err(JobKind::Http, json!({})).field, "spec.url");
        assert_eq!(err(JobKind::Http, json!({"url": "not a url"})).field, "spec.url");
        assert_eq!(err(JobKind::Http, json!({"url": "ftp://h/x"})).field, "spec.url");
        assert_eq!(err(JobKind::Http, json!({"url": "/relative"})).field, "spec.url");
        assert_eq!(
            err(JobKind::Http, json!({"url": "http:///path"})).field,
            "spec.url"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://exa mple.com/"})).field,
            "spec.url"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://h:99999/"})).field,
            "spec.url"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://[::1/"})).field,
            "spec.url"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://h/", "method": "BREW"})).field,
            "spec.method"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://h/", "methd": "GET"})).field,
            "spec.methd"
        );
        assert_eq!(
            err(
                JobKind::Http,
                json!({"url": "http://h/", "headers": {"Bad Name": "v"}})
            )
            .field,
            "spec.headers.Bad Name"
        );
        assert_eq!(
            err(
                JobKind::Http,
                json!({"url": "http://h/", "headers": {"X-A": "a\r\nB: c"}})
            )
            .field,
            "spec.headers.X-A"
        );
        assert_eq!(
            err(
                JobKind::Http,
                json!({"url": "http://h/", "headers": {"X-Probactr-Run-Id": "1"}})
            )
            .field,
            "spec.headers.X-Probactr-Run-Id"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://h/", "body": 5})).field,
            "spec.body"
        );
        assert_eq!(
            err(
                JobKind::Http,
                json!({"url": "http://h/", "expect_status": [200, 99]})
            )
            .field,
            "spec.expect_status[1]"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://h/", "expect_status": [600]})).field,
            "spec.expect_status[0]"
        );
        assert_eq!(
            err(JobKind::Http, json!({"url": "http://h/", "expect_status": [-1]})).field,
            "spec.expect_status"
        );
    }

    #[test]
    fn url_references_only_in_path_query_and_fragment() {
        for ok in [
            "https://api.example.com/items/{{ params.id }}?k={{params.k}}#{{ steps.a.output.b }}",
            "https://user:{{ secrets.password }}@api.example.com/",
        ] {
            assert!(JobSpec::parse(JobKind::Http, &json!({"url": ok})).is_ok(), "{ok}");
        }
        for bad in [
            "https://{{params.u}}@api.example.com/",
            "https://{{ params.host }}/x",
            "https://h:{{params.port}}/",
            "{{ params.base }}/x",
        ] {
            let e = err(JobKind::Http, json!({"url": bad}));
            assert_eq!(e.field, "spec.url", "{bad}");
            assert!(e.message.contains("only in its path, query or fragment"), "{e}");
        }
    }

    #[test]
    fn builtins() {
        assert_eq!(JobSpec::parse(JobKind::Noop, &json!({})).unwrap(), JobSpec::Noop);
        assert_eq!(
            JobSpec::parse(JobKind::Noop, &Value::Null).unwrap(),
            JobSpec::Noop
        );
        assert_eq!(err(JobKind::Noop, json!({"x": 1})).field, "spec.x");
        let sleep = JobSpec::parse(JobKind::Sleep, &json!({"millis": 5})).unwrap();
        assert_eq!(sleep, JobSpec::Sleep { millis: 5 });
        assert_eq!(sleep.to_json(), json!({"millis": 5}));
        assert_eq!(err(JobKind::Sleep, json!({})).field, "spec.millis");
        assert_eq!(err(JobKind::Sleep, json!({"millis": -1})).field, "spec.millis");
        assert_eq!(
            err(JobKind::Sleep, json!({"millis": MAX_SLEEP_MILLIS + 1})).field,
            "spec.millis"
        );
        assert_eq!(err(JobKind::Sleep, json!({"millis": 1, "x": 2})).field, "spec.x");
    }
}
