//! Deployment checks: the files that package and document probactr, held against the
//! code so none of them can drift.
//!
//! - `docker-compose.yml` runs the workspace's real binaries, passes only variables the
//!   configuration reads ([`VARS`]) with the code's defaults, yields a valid
//!   [`Config`] for every service, has healthchecks, and lets executors and monitors
//!   scale and drain.
//! - Its secrets are Compose secrets (files `scripts/compose-secrets` makes), read
//!   through the `*_FILE` settings: no secret setting is ever in a service's environment
//!   or interpolated into the compose file, and each service gets only the files it needs.
//! - `docker-compose.yml` builds its image once, publishes the manager on loopback only
//!   by default, and checks PostgreSQL over TCP (the end-to-end run is
//!   `scripts/compose-check`, which CI runs where containers can).
//! - The `Dockerfile` builds every workspace member's manifest into its dependency layer,
//!   ships the three binaries and the migrations, and runs unprivileged, built from
//!   source or from prebuilt binaries.
//! - The Helm chart passes only settings the code reads, lets executors drain, and
//!   lints, renders and validates against the Kubernetes schemas (`scripts/helm-check`).
//! - Managed services: PostgreSQL over TLS (`sslmode=require` and `verify-full` with a
//!   CA file) and Redis over TLS (`rediss://` with a CA, a client certificate and an ACL
//!   user), each against a private instance with self-signed certificates.
//! - `.env.example` and README's configuration table list exactly [`VARS`], with their
//!   defaults; no file names a `PROBACTR_` variable nobody reads.
//! - End to end: `scripts/up` brings up a local cluster on the PostgreSQL and Redis of
//!   `DATABASE_URL` / `REDIS_URL` (in its own database and Redis prefix), refuses a second
//!   invocation, runs its demo job, runs README's curl examples as written and the job
//!   they create, and stops every process it started on SIGINT.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use probactr_common::config::{parse_duration, Config, FILE_SETTINGS, VARS};
use probactr_common::lock::{Acquire, Locks};
use serde_json::Value;
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlLoader};

/// Variables `docker-compose.yml` interpolates that no probactr process reads.
const COMPOSE_ONLY: &[&str] = &["MANAGER_PUBLISH", "SECRETS_DIR"];
/// Secrets of the bundled services that their images also take in clear, which
/// `docker-compose.yml` must never use (beside probactr's own, [`FILE_SETTINGS`]).
const OTHER_CLEAR_SECRETS: &[&str] = &["POSTGRES_PASSWORD", "REDIS_PASSWORD", "REDISCLI_AUTH"];
/// Where Compose mounts a service's secrets.
const SECRETS_MOUNT: &str = "/run/secrets/";
/// The crates whose binaries are the deployed services.
const SERVICE_CRATES: &[&str] = &["manager", "executor", "monitor"];
/// How long an executor may still take after its drain timeout to stop and record the
/// remaining runs (`executor::drain`).
const AFTER_DRAIN: Duration = Duration::from_secs(15);

// ------------------------------------------------------------------------- files

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("common/ is inside the workspace")
        .to_owned()
}

fn read(relative: &str) -> String {
    let path = repo().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

fn var_names() -> BTreeSet<&'static str> {
    VARS.iter().map(|var| var.name).collect()
}

fn default_of(name: &str) -> &'static str {
    VARS.iter()
        .find(|var| var.name == name)
        .unwrap_or_else(|| panic!("{name} is not in config::VARS"))
        .default
}

/// The strings between double quotes in `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The workspace members named in the root `Cargo.toml`.
fn workspace_members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let start = manifest.find("members").expect("the workspace lists its members");
    let list = &manifest[start..];
    let list = &list[list.find('[').unwrap()..=list.find(']').unwrap()];
    quoted(list)
}

/// The `[[bin]]` names of a member's `Cargo.toml`.
fn bin_names(member: &str) -> Vec<String> {
    let manifest = read(&format!("{member}/Cargo.toml"));
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && line.starts_with("name") && line.contains('=') {
            names.extend(quoted(line).into_iter().take(1));
        }
    }
    names
}

/// The binaries deployed as services: the `[[bin]]`s of the service crates.
fn service_binaries() -> BTreeSet<String> {
    let binaries: BTreeSet<String> = SERVICE_CRATES
        .iter()
        .flat_map(|member| bin_names(member))
        .collect();
    assert_eq!(
        binaries.len(),
        SERVICE_CRATES.len(),
        "expected one binary per service crate, found {binaries:?}"
    );
    binaries
}

/// Every `PROBACTR_…` name in `text`.
fn probactr_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("PROBACTR_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        let name = name.trim_end_matches('_');
        if name.len() > "PROBACTR".len() {
            names.insert(name.to_owned());
        }
    }
    names
}

// ------------------------------------------------------------- compose interpolation

/// One `${…}` or `$NAME` of compose's interpolation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    name: String,
    /// `""`, `":-"`, `"-"`, `":?"`, `"?"`, `":+"` or `"+"`.
    modifier: String,
    /// The default, error message or alternative after the modifier.
    argument: String,
}

/// Expands `text` as compose does with the variables in `env`; collects the references.
/// A missing required variable is an error naming it.
fn interpolate(
    text: &str,
    env: &HashMap<String, String>,
    seen: &mut Vec<Reference>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().map(|&(_, next)| next) {
            Some('$') => {
                chars.next();
                out.push('$');
            }
            Some('{') => {
                let mut depth = 0;
                let mut end = None;
                for (i, ch) in text[at + 1..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(at + 1 + i);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let end = end.ok_or_else(|| format!("unclosed ${{ in {text:?}"))?;
                let inner = &text[at + 2..end];
                let name: String = inner
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let rest = &inner[name.len()..];
                let modifier = [":-", ":?", ":+", "-", "?", "+"]
                    .into_iter()
                    .find(|m| rest.starts_with(m))
                    .unwrap_or("");
                if modifier.is_empty() && !rest.is_empty() {
                    return Err(format!("bad interpolation ${{{inner}}}"));
                }
                let argument = &rest[modifier.len()..];
                seen.push(Reference {
                    name: name.clone(),
                    modifier: modifier.to_owned(),
                    argument: argument.to_owned(),
                });
                let value = env.get(&name);
                let empty = value.is_none_or(String::is_empty);
                let expanded = match modifier {
                    ":-" if empty => interpolate(argument, env, seen)?,
                    "-" if value.is_none() => interpolate(argument, env, seen)?,
                    ":?" if empty => {
                        return Err(format!("required variable {name} is missing a value: {argument}"))
                    }
                    "?" if value.is_none() => {
                        return Err(format!("required variable {name} is missing: {argument}"))
                    }
                    ":+" => {
                        if empty {
                            String::new()
                        } else {
                            interpolate(argument, env, seen)?
                        }
                    }
                    "+" => {
                        if value.is_none() {
                            String::new()
                        } else {
                            interpolate(argument, env, seen)?
                        }
                    }
                    _ => value.cloned().unwrap_or_default(),
                };
                out.push_str(&expanded);
                while chars.peek().is_some_and(|&(i, _)| i <= end) {
                    chars.next();
                }
            }
            Some(next) if next.is_ascii_alphabetic() || next == '_' => {
                let mut name = String::new();
                while let Some(&(_, ch)) = chars.peek() {
                    if ch.is_ascii_alphanumeric() || ch == '_' {
                        name.push(ch);
                        chars.next();
                    } else {
                        break;
                    }
                }
                seen.push(Reference {
                    name: name.clone(),
                    modifier: String::new(),
                    argument: String::new(),
                });
                out.push_str(env.get(&name).map(String::as_str).unwrap_or(""));
            }
            _ => out.push('$'),
        }
    }
    Ok(out)
}

fn references(text: &str) -> Vec<Reference> {
    let mut seen = Vec::new();
    interpolate(text, &HashMap::new(), &mut seen).unwrap();
    seen
}

/// Runs `scripts/compose-secrets` into `dir`; its standard error.
fn make_secret_files(dir: &Path, args: &[&str]) -> String {
    let output = output_within(
        Command::new(repo().join("scripts/compose-secrets"))
            .args(args)
            .arg(dir)
            .env_remove("SECRETS_DIR"),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "scripts/compose-secrets: {stderr}");
    stderr
}

/// The secret files of this test process, made once as an operator makes them.
fn secrets_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        make_secret_files(&dir.path().join("secrets"), &[]);
        dir
    })
    .path()
    .join("secrets")
}

/// What an operator's `.env` gives: only where the secret files are.
fn operator_env() -> HashMap<String, String> {
    HashMap::from([("SECRETS_DIR".to_owned(), secrets_dir().display().to_string())])
}

// ------------------------------------------------------------------------ compose

/// `docker-compose.yml` with YAML merge keys (`<<: *anchor`) applied, as compose does.
fn compose() -> Yaml {
    let docs = YamlLoader::load_from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML");
    assert_eq!(docs.len(), 1, "docker-compose.yml holds one document");
    merge_keys(docs[0].clone())
}

fn merge_keys(node: Yaml) -> Yaml {
    match node {
        Yaml::Hash(hash) => {
            let merge = Yaml::String("<<".into());
            let mut out = Hash::new();
            for (key, value) in &hash {
                if key != &merge {
                    out.insert(key.clone(), merge_keys(value.clone()));
                }
            }
            if let Some(merged) = hash.get(&merge) {
                let sources = match merged {
                    Yaml::Array(items) => items.clone(),
                    single => vec![single.clone()],
                };
                for source in sources {
                    let Yaml::Hash(source) = merge_keys(source) else {
                        panic!("a merge key must name a mapping")
                    };
                    for (key, value) in source {
                        if !out.contains_key(&key) {
                            out.insert(key, value);
                        }
                    }
                }
            }
            Yaml::Hash(out)
        }
        Yaml::Array(items) => Yaml::Array(items.into_iter().map(merge_keys).collect()),
        other => other,
    }
}

fn scalar(node: &Yaml) -> Option<String> {
    match node {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        Yaml::Null => Some(String::new()),
        _ => None,
    }
}

/// A list of scalars (`["CMD", "x"]`) or one string, as strings.
fn strings(node: &Yaml) -> Vec<String> {
    match node {
        Yaml::Array(items) => items.iter().filter_map(scalar).collect(),
        Yaml::BadValue => Vec::new(),
        other => scalar(other).into_iter().collect(),
    }
}

fn services(compose: &Yaml) -> Vec<(String, Yaml)> {
    compose["services"]
        .as_hash()
        .expect("docker-compose.yml has services")
        .iter()
        .map(|(name, service)| (name.as_str().unwrap().to_owned(), service.clone()))
        .collect()
}

/// Whether a service runs the probactr image.
fn is_probactr(service: &Yaml) -> bool {
    !service["build"].is_badvalue()
        || service["image"]
            .as_str()
            .is_some_and(|i| i.starts_with("probactr"))
}

/// A service's `environment`, as a mapping or a `KEY=value` list, values unexpanded.
fn environment(service: &Yaml) -> BTreeMap<String, String> {
    match &service["environment"] {
        Yaml::Hash(hash) => hash
            .iter()
            .map(|(k, v)| {
                let key = k.as_str().unwrap().to_owned();
                let value = scalar(v).unwrap_or_else(|| panic!("{key} has a non-scalar value"));
                (key, value)
            })
            .collect(),
        Yaml::Array(items) => items
            .iter()
            .map(|item| {
                let item = item.as_str().unwrap();
                let (k, v) = item.split_once('=').unwrap_or((item, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The names of a service's `secrets` (short or long syntax).
fn service_secrets(service: &Yaml) -> Vec<String> {
    match &service["secrets"] {
        Yaml::Array(items) => items
            .iter()
            .map(|item| {
                scalar(item)
                    .or_else(|| item["source"].as_str().map(str::to_owned))
                    .expect("a secret names its source")
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The host file of the top-level secret `name`, expanded with `env`.
fn secret_file(compose: &Yaml, name: &str, env: &HashMap<String, String>) -> Result<PathBuf, String> {
    let secret = &compose["secrets"][name];
    let file = secret["file"]
        .as_str()
        .ok_or_else(|| format!("secret {name} has no file source (Compose v1 knows no other)"))?;
    let file = interpolate(file, env, &mut Vec::new())?;
    Ok(repo().join(file))
}

/// A service's environment expanded with `env`, read as probactr reads it: a
/// `/run/secrets/NAME` path becomes the host file of the service's secret NAME.
fn service_config(name: &str, service: &Yaml, env: &HashMap<String, String>) -> Result<Config, String> {
    let compose = compose();
    let mounted = service_secrets(service);
    let mut expanded = HashMap::new();
    for (key, value) in environment(service) {
        let mut value =
            interpolate(&value, env, &mut Vec::new()).map_err(|err| format!("{name}: {key}: {err}"))?;
        if let Some(secret) = value.strip_prefix(SECRETS_MOUNT) {
            if !mounted.iter().any(|m| m == secret) {
                return Err(format!(
                    "{name}: {key} reads {value}, but the service has no secret {secret}"
                ));
            }
            value = secret_file(&compose, secret, env)?.display().to_string();
        }
        expanded.insert(key, value);
    }
    Config::from_map(&expanded).map_err(|err| format!("{name}: {err}"))
}

fn service<'a>(compose: &'a Yaml, name: &str) -> &'a Yaml {
    let service = &compose["services"][name];
    assert!(!service.is_badvalue(), "docker-compose.yml has no service {name}");
    service
}

/// Compose durations: `1m30s`, `45s`, `500ms`.
fn compose_duration(text: &str) -> Duration {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let amount: u64 = rest[..digits]
            .parse()
            .unwrap_or_else(|_| panic!("bad duration {text:?}"));
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        total += match &rest[..unit] {
            "h" => Duration::from_secs(amount * 3600),
            "m" => Duration::from_secs(amount * 60),
            "s" => Duration::from_secs(amount),
            "ms" => Duration::from_millis(amount),
            other => panic!("bad unit {other:?} in duration {text:?}"),
        };
        rest = &rest[unit..];
    }
    total
}

#[test]
fn compose_services_run_the_workspace_binaries() {
    let compose = compose();
    let binaries = service_binaries();
    let mut deployed = BTreeSet::new();
    for (name, service) in services(&compose) {
        let command = strings(&service["command"]);
        if is_probactr(&service) {
            let program = command
                .first()
                .unwrap_or_else(|| panic!("service {name} runs the probactr image without a command"));
            assert!(
                binaries.contains(program),
                "service {name} runs {program:?}, which is none of the workspace's binaries {binaries:?}"
            );
            deployed.insert(program.clone());
        } else {
            assert!(
                !command.iter().any(|word| binaries.contains(word)),
                "service {name} runs a probactr binary outside the probactr image"
            );
        }
    }
    assert_eq!(deployed, binaries, "every service binary runs as a service");
    for member in SERVICE_CRATES {
        let command = strings(&service(&compose, member)["command"]);
        assert_eq!(
            command,
            bin_names(member),
            "service {member} runs its crate's binary"
        );
    }
}

#[test]
fn compose_environment_is_what_the_config_reads() {
    let compose = compose();
    let known = var_names();
    let mut configs = Vec::new();
    for (name, service) in services(&compose) {
        let env = environment(&service);
        if !is_probactr(&service) {
            for key in env.keys() {
                assert!(
                    !known.contains(key.as_str()) && !key.starts_with("PROBACTR_"),
                    "service {name} sets probactr's {key}"
                );
            }
            continue;
        }
        for (key, value) in &env {
            assert!(
                known.contains(key.as_str()),
                "service {name} sets {key}, which probactr does not read (config::VARS)"
            );
            for reference in references(value) {
                if reference.name == *key && matches!(reference.modifier.as_str(), ":-" | "-") {
                    assert_eq!(
                        reference.argument,
                        default_of(key),
                        "service {name}: the compose default of {key} differs from the code's"
                    );
                }
            }
        }
        for required in ["DATABASE_URL_FILE", "REDIS_URL_FILE", "PROBACTR_SECRET_KEY_FILE"] {
            assert!(env.contains_key(required), "service {name} must set {required}");
        }
        let config = service_config(&name, &service, &operator_env()).unwrap_or_else(|err| panic!("{err}"));
        configs.push((name, config));
    }
    assert_eq!(configs.len(), SERVICE_CRATES.len());

    // The manager listens beyond loopback, on the port that is published.
    let (_, manager) = configs.iter().find(|(name, _)| name == "manager").unwrap();
    assert!(
        manager.manager_listen.ip().is_unspecified(),
        "in a container the manager must listen on 0.0.0.0, not {}",
        manager.manager_listen
    );
    let ports = strings(&service(&compose, "manager")["ports"]);
    assert!(
        ports
            .iter()
            .any(|p| p.rsplit(':').next() == Some(&manager.manager_listen.port().to_string())),
        "the manager's port {} is published (ports: {ports:?})",
        manager.manager_listen.port()
    );
    assert!(
        manager.admin_password.is_some(),
        "the manager gets the first admin's password"
    );
    assert!(
        configs.iter().all(|(_, config)| config.secret_keys.is_some()),
        "every service gets the key of job secrets"
    );
    // Each secret only where it is needed: the admin's password in the manager, the SMTP
    // server's credentials in the monitors.
    for (secret, only) in [("admin-password", "manager"), ("smtp-url", "monitor")] {
        for (name, service) in services(&compose) {
            assert_eq!(
                service_secrets(&service).iter().any(|s| s == secret),
                name == only,
                "only the {only} gets the secret {secret}, the {name}: {:?}",
                service_secrets(&service)
            );
        }
    }

    // Executors and monitors must agree on liveness and leases, and the database.
    let (first, reference) = &configs[0];
    for (name, config) in &configs[1..] {
        let same = (
            config.database_url == reference.database_url,
            config.redis_url == reference.redis_url,
            config.redis_prefix == reference.redis_prefix,
            config.heartbeat_interval == reference.heartbeat_interval,
            config.heartbeat_timeout == reference.heartbeat_timeout,
            config.lock_lease == reference.lock_lease,
        );
        assert_eq!(
            same,
            (true, true, true, true, true, true),
            "{name} and {first} disagree on shared settings"
        );
    }
}

/// A secret setting (a password, a key, a URL with credentials) in a service's
/// environment shows in `docker inspect`, in every process's environment and in what job
/// code can read: the compose file passes each one only as a file.
#[test]
fn compose_passes_secrets_as_files_never_in_the_environment() {
    let text = read("docker-compose.yml");
    let clear: BTreeSet<&str> = FILE_SETTINGS
        .iter()
        .map(|(name, _)| *name)
        .chain(OTHER_CLEAR_SECRETS.iter().copied())
        .collect();
    let allowed: BTreeSet<&str> = var_names()
        .into_iter()
        .chain(COMPOSE_ONLY.iter().copied())
        .collect();
    for reference in references(&text) {
        assert!(
            allowed.contains(reference.name.as_str()),
            "docker-compose.yml interpolates {}, which neither probactr nor compose's own list reads",
            reference.name
        );
        assert!(
            !clear.contains(reference.name.as_str()),
            "docker-compose.yml interpolates the secret {}: pass it as a file",
            reference.name
        );
    }
    let compose = compose();
    let declared: BTreeSet<String> = keys(&compose["secrets"]).into_iter().collect();
    assert!(!declared.is_empty(), "docker-compose.yml declares its secrets");
    for secret in &declared {
        let file = secret_file(&compose, secret, &operator_env()).unwrap_or_else(|err| panic!("{err}"));
        assert!(
            file.is_file(),
            "scripts/compose-secrets makes no file for the secret {secret} ({})",
            file.display()
        );
        assert_eq!(
            keys(&compose["secrets"][secret.as_str()]),
            ["file"],
            "secret {secret}: a file source only (Compose v1 knows no environment sources)"
        );
    }
    for (name, service) in services(&compose) {
        let mounted = service_secrets(&service);
        for secret in &mounted {
            assert!(
                declared.contains(secret),
                "service {name} mounts the undeclared secret {secret}"
            );
        }
        for (key, value) in environment(&service) {
            assert!(
                !clear.contains(key.as_str()),
                "service {name} passes the secret {key} in its environment: use {key}_FILE and a Compose secret"
            );
            if key.ends_with("_FILE") {
                let secret = value
                    .strip_prefix(SECRETS_MOUNT)
                    .unwrap_or_else(|| panic!("service {name}: {key} is {value:?}, not a Compose secret"));
                assert!(
                    mounted.iter().any(|m| m == secret),
                    "service {name}: {key} reads the secret {secret}, which the service does not mount"
                );
            }
        }
    }
    // No secret's value is written anywhere in the file (a command, a health check).
    let expanded = interpolate(&text, &operator_env(), &mut Vec::new()).unwrap();
    for secret in &declared {
        let file = secret_file(&compose, secret, &operator_env()).unwrap();
        let value = std::fs::read_to_string(file).unwrap();
        let value = value.trim_end();
        assert!(
            value.is_empty() || !expanded.contains(value),
            "docker-compose.yml holds the value of the secret {secret}"
        );
    }
    // Jobs run as another account, which cannot read the executor's secret files: the
    // executor reads only its private copies, as root with just the capabilities
    // switching user needs.
    let executor = service(&compose, "executor");
    let executor_config = service_config("executor", executor, &operator_env()).unwrap();
    assert!(
        executor_config.job_user.is_some(),
        "the executor sets PROBACTR_JOB_USER"
    );
    assert_eq!(executor["user"].as_str(), Some("0:0"));
    assert_eq!(strings(&executor["cap_drop"]), ["ALL"]);
    let added: BTreeSet<String> = strings(&executor["cap_add"]).into_iter().collect();
    let needed: BTreeSet<String> = ["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"]
        .map(str::to_owned)
        .into();
    assert_eq!(
        added, needed,
        "the executor's capabilities are what switching user needs"
    );
    use std::os::unix::fs::PermissionsExt;
    for secret in service_secrets(executor) {
        let file = secret_file(&compose, &secret, &operator_env()).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o600,
            "the executor's secret {secret} is readable by its owner only"
        );
    }
    let postgres = environment(service(&compose, "postgres"));
    assert_eq!(
        postgres.get("POSTGRES_PASSWORD_FILE").map(String::as_str),
        Some("/run/secrets/postgres-password")
    );
    let redis = strings(&service(&compose, "redis")["command"]).join(" ");
    let redis = interpolate(&redis, &operator_env(), &mut Vec::new()).unwrap();
    assert!(
        redis.contains("requirepass $(cat /run/secrets/redis-password)"),
        "Redis asks for the password of its secret file: {redis}"
    );

    // A missing secret file stops the service that needs it, naming the setting.
    for (service_name, file, file_var) in [
        ("manager", "admin-password", "PROBACTR_ADMIN_PASSWORD_FILE"),
        ("executor", "executor-secret-key", "PROBACTR_SECRET_KEY_FILE"),
        ("monitor", "smtp-url", "PROBACTR_SMTP_URL_FILE"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        make_secret_files(dir.path(), &[]);
        std::fs::remove_file(dir.path().join(file)).unwrap();
        let env = HashMap::from([("SECRETS_DIR".to_owned(), dir.path().display().to_string())]);
        let err = service_config(service_name, service(&compose, service_name), &env).unwrap_err();
        assert!(err.contains(file_var), "{service_name} without {file}: {err}");
    }
    // The secret files stay out of git and out of the image's build context.
    for ignore in [".gitignore", ".dockerignore"] {
        assert!(
            read(ignore).lines().any(|l| l.trim_matches('/') == "secrets"),
            "{ignore} must exclude secrets/"
        );
    }
    // And .env.example commits no value for a secret.
    for line in read(".env.example").lines() {
        for secret in &clear {
            if let Some(value) = line.strip_prefix(&format!("{secret}=")) {
                assert!(value.trim().is_empty(), ".env.example gives {secret} a value");
            }
        }
    }
}

/// `scripts/compose-secrets` makes matching files once: the connection URLs carry the
/// bundled services' passwords, the key is 32 bytes, the folder is private, a second run
/// changes nothing, and `--rotate-key` keeps the old key as the previous one.
#[test]
fn compose_secrets_are_made_once_and_agree() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    make_secret_files(&secrets, &[]);
    let value = |name: &str| {
        std::fs::read_to_string(secrets.join(name))
            .unwrap()
            .trim_end()
            .to_owned()
    };
    let postgres = value("postgres-password");
    let redis = value("redis-password");
    assert!(postgres.len() >= 32 && redis.len() >= 32 && postgres != redis);
    assert_eq!(
        value("database-url"),
        format!("postgres://probactr:{postgres}@postgres:5432/probactr")
    );
    assert_eq!(value("redis-url"), format!("redis://:{redis}@redis:6379"));
    assert!(value("admin-password").len() >= 12);
    assert_eq!(
        value("smtp-url"),
        "",
        "no alert mail until the operator writes a URL"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the secrets folder is private to its owner");

    let before: Vec<String> = ["postgres-password", "secret-key", "admin-password"]
        .into_iter()
        .map(value)
        .collect();
    let again = make_secret_files(&secrets, &[]);
    assert!(again.contains("nothing changed"), "{again}");
    let after: Vec<String> = ["postgres-password", "secret-key", "admin-password"]
        .into_iter()
        .map(value)
        .collect();
    assert_eq!(before, after, "a second run keeps every file");

    // The executor's private copies.
    for name in ["database-url", "redis-url", "secret-key", "secret-key-previous"] {
        assert_eq!(value(&format!("executor-{name}")), value(name));
        let mode = std::fs::metadata(secrets.join(format!("executor-{name}")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "executor-{name}");
    }

    let key = value("secret-key");
    make_secret_files(&secrets, &["--rotate-key"]);
    assert_eq!(value("secret-key-previous"), key);
    assert_ne!(value("secret-key"), key);
    assert_eq!(
        value("executor-secret-key"),
        value("secret-key"),
        "the copy follows"
    );
    // The rotated pair is a valid configuration.
    let config = Config::from_map(&HashMap::from([
        (
            "PROBACTR_SECRET_KEY_FILE".to_owned(),
            secrets.join("secret-key").display().to_string(),
        ),
        (
            "PROBACTR_SECRET_KEY_PREVIOUS_FILE".to_owned(),
            secrets.join("secret-key-previous").display().to_string(),
        ),
    ]))
    .unwrap();
    assert!(config.secret_keys.is_some());
}

#[test]
fn compose_has_healthchecks_and_a_healthy_start_order() {
    let compose = compose();
    for (name, service) in services(&compose) {
        let test = strings(&service["healthcheck"]["test"]);
        assert!(test.len() > 1, "service {name} needs a healthcheck");
    }
    let check = |name: &str| strings(&service(&compose, name)["healthcheck"]["test"]).join(" ");
    assert!(
        check("postgres").contains("pg_isready"),
        "postgres: {}",
        check("postgres")
    );
    assert!(check("redis").contains("redis-cli") && check("redis").contains("ping"));
    let manager = service_config("manager", service(&compose, "manager"), &operator_env()).unwrap();
    assert!(
        check("manager").contains(&format!(":{}/healthz", manager.manager_listen.port())),
        "the manager's healthcheck asks its /healthz: {}",
        check("manager")
    );
    for name in ["executor", "monitor"] {
        let config = service_config(name, service(&compose, name), &operator_env()).unwrap();
        let metrics = config
            .metrics_listen
            .unwrap_or_else(|| panic!("{name} needs PROBACTR_METRICS_LISTEN for its healthcheck"));
        assert!(
            check(name).contains(&format!(":{}/", metrics.port())),
            "{name}: {}",
            check(name)
        );
    }

    let healthy = |name: &str, on: &str| {
        assert_eq!(
            service(&compose, name)["depends_on"][on]["condition"].as_str(),
            Some("service_healthy"),
            "{name} must wait for a healthy {on}"
        );
    };
    healthy("manager", "postgres");
    healthy("manager", "redis");
    for name in ["executor", "monitor"] {
        healthy(name, "postgres");
        healthy(name, "redis");
        // The manager applies the migrations the others need.
        healthy(name, "manager");
    }

    let volumes = strings(&service(&compose, "postgres")["volumes"]);
    let data = volumes
        .iter()
        .find(|v| v.ends_with(":/var/lib/postgresql/data"))
        .expect("postgres keeps its data in a volume");
    let volume = data.split(':').next().unwrap();
    assert!(
        !compose["volumes"][volume].is_badvalue(),
        "postgres' volume {volume} must be a named volume"
    );
}

#[test]
fn executors_and_monitors_scale_restart_and_drain() {
    let compose = compose();
    for (name, service) in services(&compose) {
        let restart = service["restart"].as_str().unwrap_or("no");
        assert!(
            matches!(restart, "always" | "unless-stopped" | "on-failure"),
            "service {name} must restart, not {restart:?}"
        );
        if is_probactr(&service) {
            assert_eq!(
                service["init"].as_bool(),
                Some(true),
                "service {name} needs init: true to reap orphaned job processes"
            );
        }
    }
    for name in ["executor", "monitor"] {
        let service = service(&compose, name);
        assert!(
            service["container_name"].is_badvalue(),
            "{name} cannot scale with a container_name"
        );
        assert!(
            service["ports"].is_badvalue(),
            "{name} cannot scale with host ports"
        );
        let replicas = service["deploy"]["replicas"].as_i64().unwrap_or(1);
        assert!(replicas >= 1, "{name} replicas");
    }
    assert!(
        service(&compose, "executor")["deploy"]["replicas"].as_i64() >= Some(2),
        "the compose cluster runs several executors"
    );
    let executor = service(&compose, "executor");
    let drain = service_config("executor", executor, &operator_env())
        .unwrap()
        .drain_timeout;
    let grace = compose_duration(
        executor["stop_grace_period"]
            .as_str()
            .expect("executor stop_grace_period"),
    );
    assert!(
        grace > drain + AFTER_DRAIN,
        "executor stop_grace_period {grace:?} must exceed PROBACTR_DRAIN_TIMEOUT {drain:?} + {AFTER_DRAIN:?}"
    );
}

#[test]
fn compose_builds_once_publishes_on_loopback_and_checks_postgres_over_tcp() {
    let compose = compose();
    let built: Vec<String> = services(&compose)
        .into_iter()
        .filter(|(_, service)| !service["build"].is_badvalue())
        .map(|(name, _)| name)
        .collect();
    assert_eq!(built, ["manager"], "one service builds the image, once");
    let image = service(&compose, "manager")["image"].as_str();
    for name in ["executor", "monitor"] {
        let service = service(&compose, name);
        assert_eq!(
            service["image"].as_str(),
            image,
            "{name} runs the manager's image"
        );
        assert_eq!(
            service["pull_policy"].as_str(),
            Some("never"),
            "{name} runs the image the manager's build made, never a pulled one"
        );
    }

    let ports = strings(&service(&compose, "manager")["ports"]);
    let [port] = ports.as_slice() else {
        panic!("the manager publishes one port: {ports:?}")
    };
    let published = interpolate(port, &operator_env(), &mut Vec::new()).unwrap();
    assert_eq!(
        published, "127.0.0.1:8080:8080",
        "by default the manager is published on the host's loopback only"
    );
    let mut exposed = operator_env();
    exposed.insert("MANAGER_PUBLISH".to_owned(), "0.0.0.0:8080".to_owned());
    assert_eq!(
        interpolate(port, &exposed, &mut Vec::new()).unwrap(),
        "0.0.0.0:8080:8080"
    );

    let check = strings(&service(&compose, "postgres")["healthcheck"]["test"]);
    assert!(
        check.iter().any(|word| word.starts_with("--host")),
        "pg_isready must ask over TCP, which the image opens only once initialised: {check:?}"
    );
}

// ----------------------------------------------------------------------- Dockerfile

/// The Dockerfile's instructions, continuation lines joined.
fn dockerfile() -> Vec<String> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                instructions.push(std::mem::take(&mut current));
            }
        }
    }
    instructions
}

/// The Dockerfile's stages: (name, `FROM` image, instructions after the `FROM`).
fn dockerfile_stages() -> Vec<(String, String, Vec<String>)> {
    let mut stages: Vec<(String, String, Vec<String>)> = Vec::new();
    for instruction in dockerfile() {
        if let Some(from) = instruction.strip_prefix("FROM ") {
            let words: Vec<&str> = from.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                _ => String::new(),
            };
            stages.push((name, words[0].to_owned(), Vec::new()));
        } else if let Some((_, _, body)) = stages.last_mut() {
            body.push(instruction);
        }
    }
    stages
}

fn stage<'a>(stages: &'a [(String, String, Vec<String>)], name: &str) -> (usize, &'a str, String) {
    let (position, (_, from, body)) = stages
        .iter()
        .enumerate()
        .find(|(_, (n, _, _))| n == name)
        .unwrap_or_else(|| panic!("the Dockerfile has no stage {name}"));
    (position, from.as_str(), body.join("\n"))
}

fn runs_unprivileged(stage_name: &str, body: &str) {
    let user = body
        .lines()
        .filter_map(|i| i.strip_prefix("USER "))
        .next_back()
        .unwrap_or_else(|| panic!("stage {stage_name} sets a USER"));
    let user = user.split(':').next().unwrap().trim();
    assert!(
        user != "root" && user != "0",
        "stage {stage_name} runs as an unprivileged user, not {user}"
    );
}

#[test]
fn dockerfile_caches_dependencies_ships_the_binaries_and_runs_unprivileged() {
    let instructions = dockerfile();
    let stages = dockerfile_stages();
    assert!(stages.len() >= 2, "the Dockerfile is multi-stage");
    assert!(instructions.iter().any(|i| i == "ARG DEBIAN_RELEASE=bookworm"));
    let (base_at, base_from, base) = stage(&stages, "base");
    assert_eq!(
        base_from, "debian:${DEBIAN_RELEASE}-slim",
        "the runtime is a slim Debian"
    );
    let (runtime_at, runtime_from, runtime) = stage(&stages, "runtime");
    let (prebuilt_at, prebuilt_from, prebuilt) = stage(&stages, "prebuilt");
    let (build_at, _, build) = stage(&stages, "build");
    assert_eq!(
        runtime_at,
        stages.len() - 1,
        "the default target (the last stage) is the runtime"
    );
    assert_eq!((runtime_from, prebuilt_from), ("base", "base"));
    // The classic builder builds every stage up to its target: the prebuilt image must
    // not need the compiler's stage.
    assert!(
        base_at < prebuilt_at && prebuilt_at < build_at,
        "the stages run base, prebuilt, build, runtime"
    );
    // The dependency layer: every member's manifest, then a build, before any source.
    let members = workspace_members();
    let first_source = instructions
        .iter()
        .position(|i| members.iter().any(|m| i == &format!("COPY {m} {m}")))
        .expect("the sources are copied");
    let first_build = instructions
        .iter()
        .position(|i| i.contains("cargo build"))
        .expect("the Dockerfile builds");
    assert!(
        first_build < first_source,
        "dependencies are built before the sources are copied"
    );
    for member in &members {
        let manifest = format!("COPY {member}/Cargo.toml {member}/Cargo.toml");
        let position = instructions.iter().position(|i| i == &manifest);
        assert!(
            position.is_some_and(|p| p < first_build),
            "workspace member {member}: the dependency layer needs `{manifest}`"
        );
        assert!(
            instructions.contains(&format!("COPY {member} {member}")),
            "workspace member {member}: its sources are copied"
        );
    }
    for instruction in instructions.iter().filter(|i| i.contains("for crate in")) {
        let list = instruction.split("for crate in").nth(1).unwrap();
        let list: Vec<String> = list[..list.find(';').unwrap()]
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            list, members,
            "the placeholder loop covers exactly the workspace members"
        );
    }
    assert!(
        build.contains("cargo build --release --locked"),
        "release build from the lock file"
    );

    // The runtime: the binaries (from source, or prebuilt ones), the migrations, an
    // unprivileged user.
    for binary in service_binaries() {
        assert!(
            runtime.contains(&format!(
                "COPY --from=build /src/target/release/{binary} /usr/local/bin/{binary}"
            )),
            "the image ships {binary}"
        );
        let copy = prebuilt
            .lines()
            .find(|i| i.starts_with("COPY ") && i.ends_with(" /usr/local/bin/"))
            .expect("the prebuilt stage copies binaries");
        assert!(
            copy.split_whitespace().any(|w| w == format!("prebuilt/{binary}")),
            "the prebuilt image ships {binary}: {copy}"
        );
    }
    assert!(base.contains("COPY migrations /usr/share/probactr/migrations"));
    assert!(base.contains("ca-certificates"), "HTTP jobs need CA certificates");
    runs_unprivileged("runtime", &runtime);
    runs_unprivileged("prebuilt", &prebuilt);
    for instruction in instructions.iter().filter(|i| i.starts_with("ENV ")) {
        let name = instruction[4..].split(['=', ' ']).next().unwrap();
        assert!(
            var_names().contains(name),
            "the Dockerfile sets {name}, which probactr does not read"
        );
    }

    let ignored: Vec<String> = read(".dockerignore")
        .lines()
        .map(|l| l.trim().trim_end_matches('/').to_owned())
        .collect();
    for path in ["target", ".git", ".env", ".probactr"] {
        assert!(
            ignored.iter().any(|l| l == path),
            ".dockerignore must exclude {path}"
        );
    }
}

// ------------------------------------------------------------------------ Helm chart

const CHART_VALUES: &[&str] = &[
    "deploy/helm/probactr/values.yaml",
    "deploy/helm/values-production.yaml",
];

fn yaml_file(relative: &str) -> Yaml {
    YamlLoader::load_from_str(&read(relative))
        .unwrap_or_else(|err| panic!("{relative}: {err}"))
        .remove(0)
}

fn keys(node: &Yaml) -> Vec<String> {
    node.as_hash()
        .map(|hash| {
            hash.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn helm_values_pass_only_settings_the_code_reads_and_let_executors_drain() {
    let defaults = yaml_file(CHART_VALUES[0]);
    for file in CHART_VALUES {
        let values = yaml_file(file);
        let mut settings = keys(&values["config"]);
        for component in ["manager", "executor", "monitor"] {
            settings.extend(keys(&values[component]["env"]));
        }
        for name in &settings {
            assert!(
                var_names().contains(name.as_str()),
                "{file} sets {name}, which no probactr process reads (config::VARS)"
            );
        }
        let pick = |path: &[&str]| {
            let get = |root: &Yaml| path.iter().fold(root.clone(), |node, key| node[*key].clone());
            let own = get(&values);
            if own.is_badvalue() {
                get(&defaults)
            } else {
                own
            }
        };
        let drain = pick(&["config", "PROBACTR_DRAIN_TIMEOUT"]);
        let drain = parse_duration(drain.as_str().unwrap_or(default_of("PROBACTR_DRAIN_TIMEOUT"))).unwrap();
        let grace = pick(&["executor", "terminationGracePeriodSeconds"])
            .as_i64()
            .unwrap();
        assert!(
            Duration::from_secs(grace as u64) > drain + AFTER_DRAIN,
            "{file}: executor.terminationGracePeriodSeconds {grace} must exceed the drain timeout {drain:?} + {AFTER_DRAIN:?}"
        );
        assert!(
            pick(&["monitor", "replicas"]).as_i64() >= Some(2),
            "{file}: two monitors"
        );
        assert_eq!(
            pick(&["executor", "podDisruptionBudget", "enabled"]).as_bool(),
            Some(true),
            "{file}: executors have a PodDisruptionBudget"
        );
    }
}

/// `helm lint` and `helm template` of the chart with the default and the production
/// values, every rendered object validated against the Kubernetes schemas
/// (`scripts/helm-check`; scripts/test installs its tools).
#[test]
fn helm_chart_lints_renders_and_validates_against_the_kubernetes_schemas() {
    let output = Command::new(repo().join("scripts/helm-check"))
        .current_dir(repo())
        .output()
        .expect("scripts/helm-check runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.code() == Some(3) {
        eprintln!("SKIPPED: the chart tools are missing (scripts/helm-check --install): {text}");
        return;
    }
    assert!(output.status.success(), "scripts/helm-check failed:\n{text}");
    for kind in [
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Ingress",
        "ServiceMonitor",
        "ScaledObject",
        "NetworkPolicy",
    ] {
        assert!(text.contains(kind), "the rendered chart has a {kind}:\n{text}");
    }
}

/// The chart's pods are hardened by default: a read-only root filesystem, no service
/// account token, no capabilities, and secrets only as files (never `secretRef` into the
/// environment, where job code could read them).
#[test]
fn helm_pods_are_hardened_and_read_secrets_from_files() {
    let values = yaml_file(CHART_VALUES[0]);
    assert_eq!(
        values["securityContext"]["readOnlyRootFilesystem"].as_bool(),
        Some(true)
    );
    assert_eq!(values["podSecurityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(values["networkPolicy"]["enabled"].as_bool(), Some(true));
    for component in ["manager", "executor", "monitor"] {
        let template = read(&format!("deploy/helm/probactr/templates/{component}.yaml"));
        assert!(
            template.contains("automountServiceAccountToken: false"),
            "{component}: the service account token is mounted"
        );
    }
    let helpers = read("deploy/helm/probactr/templates/_helpers.tpl");
    assert!(
        !helpers.contains("secretRef"),
        "secrets reach the environment through secretRef"
    );
    assert!(
        helpers.contains("_FILE"),
        "secrets are not passed as *_FILE settings"
    );
    // scripts/helm-check refuses every secret setting in a rendered container's
    // environment: its list is the code's.
    let check = read("scripts/helm-check");
    let list = &check[check
        .find("CLEAR_SECRETS = {")
        .expect("helm-check lists the secret settings")..];
    let listed: BTreeSet<String> = quoted(&list[..list.find('}').unwrap()]).into_iter().collect();
    let settings: BTreeSet<String> = FILE_SETTINGS.iter().map(|(name, _)| name.to_string()).collect();
    assert_eq!(
        listed, settings,
        "scripts/helm-check's CLEAR_SECRETS is config::FILE_SETTINGS"
    );
}

// ------------------------------------------------------------- .env.example, README

#[test]
fn env_example_lists_exactly_the_config_variables_with_their_defaults() {
    let text = read(".env.example");
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let mut previous = "";
    for line in text.lines() {
        let assignment = line.strip_prefix('#').unwrap_or(line);
        if let Some((name, value)) = assignment.split_once('=') {
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            {
                assert!(
                    previous.starts_with("# ") && !previous.contains('='),
                    ".env.example: {name} needs a line of documentation above it"
                );
                let again = listed.insert(name.to_owned(), value.to_owned());
                assert!(again.is_none(), ".env.example lists {name} twice");
            }
        }
        previous = line;
    }
    let expected: BTreeSet<&str> = var_names()
        .into_iter()
        .chain(COMPOSE_ONLY.iter().copied())
        .collect();
    let names: BTreeSet<&str> = listed.keys().map(String::as_str).collect();
    assert_eq!(
        names, expected,
        ".env.example must list exactly config::VARS (plus {COMPOSE_ONLY:?})"
    );
    for var in VARS {
        assert_eq!(
            listed[var.name], var.default,
            ".env.example: the default of {}",
            var.name
        );
    }
}

/// README's configuration table: name → default.
fn readme_configuration_table() -> Vec<(String, String)> {
    let readme = read("README.md");
    let start = readme
        .find("\n## Configuration\n")
        .expect("README has a Configuration section");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map(|e| e + 3).unwrap_or(section.len())];
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let unquote = |cell: &str| cell.trim_matches('`').to_owned();
            (unquote(cells[1]), unquote(cells[2]))
        })
        .collect()
}

#[test]
fn readme_configuration_table_is_config_vars() {
    let table = readme_configuration_table();
    let documented: Vec<&str> = table.iter().map(|(name, _)| name.as_str()).collect();
    let declared: Vec<&str> = VARS.iter().map(|var| var.name).collect();
    assert_eq!(
        documented, declared,
        "README's configuration table lists config::VARS, in order"
    );
    for (name, default) in &table {
        assert_eq!(default, default_of(name), "README: the default of {name}");
    }
}

#[test]
fn only_variables_probactr_reads_are_named() {
    let known = var_names();
    for file in [
        "README.md",
        ".env.example",
        "docker-compose.yml",
        "Dockerfile",
        "scripts/up",
        "scripts/compose-check",
        "deploy/helm/probactr/values.yaml",
        "deploy/helm/values-production.yaml",
    ] {
        for name in probactr_names(&read(file)) {
            assert!(
                known.contains(name.as_str()) || probactr_common::config::is_known_elsewhere(&name),
                "{file} names {name}, which no probactr process reads (config::VARS)"
            );
        }
    }
    // And every variable the configuration module reads is declared in VARS (its
    // default comes from there; an undeclared one would have none and break every start).
    let modules =
        std::fs::read_dir(repo().join("common/src/config")).expect("the configuration module is a folder");
    let mut files: Vec<String> = modules
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".rs"))
        .map(|name| format!("common/src/config/{name}"))
        .collect();
    files.sort();
    assert!(
        files.iter().any(|file| file.ends_with("/mod.rs")),
        "{files:?} holds the reader"
    );
    for file in files {
        for name in probactr_names(&read(&file)) {
            assert!(
                known.contains(name.as_str()) || probactr_common::config::is_known_elsewhere(&name),
                "{file} reads {name} but config::VARS does not declare it"
            );
        }
    }
}

// ---------------------------------------------------------- README's curl examples

/// The README blocks marked `<!-- test: curl -->`, in order.
fn readme_curl_blocks() -> Vec<String> {
    let readme = read("README.md");
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "<!-- test: curl -->" {
            continue;
        }
        assert_eq!(lines.next(), Some("```sh"), "a marked example is a ```sh block");
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        blocks.push(block.join("\n"));
    }
    blocks
}

/// What README's examples assume about the local cluster, and the test replaces.
const README_URL: &str = "http://127.0.0.1:8080";
const README_PASSWORD_FILE: &str = ".probactr/admin-password";

#[test]
fn readme_curl_examples_are_marked_and_cover_the_api() {
    let blocks = readme_curl_blocks();
    assert!(
        blocks.len() >= 5,
        "README marks its curl examples with <!-- test: curl -->"
    );
    assert!(
        blocks[0].contains(&format!("URL={README_URL}")),
        "the first example sets URL"
    );
    assert!(
        blocks[0].contains(README_PASSWORD_FILE),
        "the first example reads the generated password"
    );
    assert!(
        blocks[0].contains("/api/v1/auth/token"),
        "the first example logs in"
    );
    let all = blocks.join("\n");
    for path in [
        "/api/v1/jobs\"",
        "/triggers\"",
        "/run\"",
        "/api/v1/runs",
        "/pause\"",
        "/api/v1/status",
    ] {
        assert!(all.contains(path), "README's examples show {path}");
    }
    assert!(
        all.contains("JOB=$("),
        "an example creates a job and keeps its id in JOB"
    );
    for block in &blocks {
        assert!(block.contains("curl "), "every marked example uses curl: {block}");
    }
}

// --------------------------------------------------------------- the local cluster

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Waits for `child` up to `within`; None when it is still running.
fn wait_timeout(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a command to its end, killing it after `within`. Its output goes to files, so
/// processes it leaves behind cannot keep the test waiting on a pipe.
fn output_within(command: &mut Command, within: Duration) -> Output {
    let mut stdout = tempfile::tempfile().unwrap();
    let mut stderr = tempfile::tempfile().unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().unwrap())
        .stderr(stderr.try_clone().unwrap())
        .spawn()
        .unwrap();
    let status = match wait_timeout(&mut child, within) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            child.wait().unwrap()
        }
    };
    let read_back = |file: &mut std::fs::File| {
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0)).unwrap();
        file.read_to_end(&mut bytes).unwrap();
        bytes
    };
    Output {
        status,
        stdout: read_back(&mut stdout),
        stderr: read_back(&mut stderr),
    }
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let (head, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let scheme_end = head.find("://").map(|i| i + 3).unwrap_or(0);
    let server = match head[scheme_end..].find('/') {
        Some(slash) => &head[..scheme_end + slash],
        None => head,
    };
    format!("{server}/{database}{query}")
}

/// A `scripts/up` cluster in its own state directory, database and Redis prefix.
struct LocalCluster {
    child: Child,
    state: tempfile::TempDir,
    url: String,
    env: Vec<(String, String)>,
    output: Arc<Mutex<String>>,
    server_url: String,
    database: String,
}

impl LocalCluster {
    fn start() -> LocalCluster {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let database = format!("probactr_up_{}", &id[..12]);
        let base = std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let state = tempfile::tempdir().unwrap();
        let env = vec![
            ("PROBACTR_STATE".to_owned(), state.path().display().to_string()),
            ("DATABASE_URL".to_owned(), with_database(&base, &database)),
            ("PROBACTR_MANAGER_LISTEN".to_owned(), format!("127.0.0.1:{port}")),
            ("PROBACTR_REDIS_PREFIX".to_owned(), format!("test:up:{id}:")),
            ("PROBACTR_DRAIN_TIMEOUT".to_owned(), "5s".to_owned()),
        ];
        let mut command = Command::new(repo().join("scripts/up"));
        command
            .current_dir(repo())
            .env_remove("PROBACTR_ADMIN_PASSWORD")
            .env_remove("PROBACTR_ADMIN_USER")
            .env_remove("PROBACTR_METRICS_LISTEN")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("scripts/up starts");
        let output = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        for stream in [
            Box::new(stdout) as Box<dyn std::io::Read + Send>,
            Box::new(stderr),
        ] {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    eprintln!("{line}");
                    let mut all = output.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        LocalCluster {
            child,
            state,
            url: format!("http://127.0.0.1:{port}"),
            env,
            output,
            server_url: with_database(&base, "postgres"),
            database,
        }
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits until the output holds `needle`; panics if scripts/up exits first.
    fn wait_for_output(&mut self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.output().contains(needle) {
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "scripts/up exited ({status}) before printing {needle:?}:\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} from scripts/up within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn password(&self) -> String {
        std::fs::read_to_string(self.state.path().join("admin-password"))
            .expect("scripts/up keeps the generated password in its state directory")
            .trim()
            .to_owned()
    }

    /// Processes started for this cluster: their environment names its state directory.
    fn processes(&self) -> Vec<String> {
        let marker = format!("PROBACTR_STATE={}", self.state.path().display());
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().filter(|n| n.chars().all(|c| c.is_ascii_digit())) else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if environ.split(|b| *b == 0).any(|var| var == marker.as_bytes()) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                found.push(format!("{pid}: {}", cmdline.trim()));
            }
        }
        found
    }

    /// `curl` against the API; the JSON answer.
    fn api(&self, token: &str, method: &str, path: &str, body: Option<&str>) -> Value {
        let mut command = Command::new("curl");
        command.args([
            "-fsS",
            "--max-time",
            "10",
            "-X",
            method,
            "-H",
            "content-type: application/json",
        ]);
        if !token.is_empty() {
            command.args(["-H", &format!("authorization: Bearer {token}")]);
        }
        if let Some(body) = body {
            command.args(["--data-binary", body]);
        }
        let output = output_within(
            command.arg(format!("{}{path}", self.url)),
            Duration::from_secs(15),
        );
        assert!(
            output.status.success(),
            "{method} {path}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
    }

    fn login(&self) -> String {
        let body = serde_json::json!({"username": "admin", "password": self.password()}).to_string();
        let answer = self.api("", "POST", "/api/v1/auth/token", Some(&body));
        answer["token"].as_str().expect("a token").to_owned()
    }

    /// Waits until job `job` has a succeeded run; returns it.
    fn succeeded_run(&self, token: &str, job: i64, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let runs = self.api(
                token,
                "GET",
                &format!("/api/v1/runs?job_id={job}&state=succeeded"),
                None,
            );
            if let Some(run) = runs["items"].as_array().and_then(|items| items.first()) {
                return self.api(token, "GET", &format!("/api/v1/runs/{}", run["id"]), None);
            }
            let all = self.api(token, "GET", &format!("/api/v1/runs?job_id={job}"), None);
            assert!(
                Instant::now() < deadline,
                "job {job} has no succeeded run within {within:?}; its runs: {all}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            signal(self.child.id(), "TERM");
            if wait_timeout(&mut self.child, Duration::from_secs(60)).is_none() {
                signal(self.child.id(), "KILL");
                let _ = self.child.wait();
            }
        }
        for process in self.processes() {
            if let Some(pid) = process.split(':').next().and_then(|p| p.parse::<u32>().ok()) {
                signal(pid, "KILL");
            }
        }
        let _ = output_within(
            Command::new("psql").args([
                &self.server_url,
                "-Xqc",
                &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.database),
            ]),
            Duration::from_secs(30),
        );
    }
}

#[test]
fn local_cluster_runs_the_demo_and_readme_jobs_and_stops_cleanly_on_sigint() {
    for tool in ["curl", "jq", "psql"] {
        assert!(
            have(tool),
            "this test needs {tool} (README's examples use curl and jq): install it"
        );
    }
    let started = Instant::now();
    let mut cluster = LocalCluster::start();
    // The first start may compile; after that it takes seconds.
    cluster.wait_for_output("probactr is running", Duration::from_secs(600));
    eprintln!("== up after {:?}", started.elapsed());
    let output = cluster.output();
    assert!(
        output.contains(&format!("admin:  {}/", cluster.url)),
        "it prints the admin URL"
    );
    assert!(
        output.contains(&format!("login:  admin / {}", cluster.password())),
        "it prints the login"
    );
    assert!(
        output.contains("[up] building probactr")
            && output.contains("Finished")
            && output.contains("[up] built"),
        "it shows cargo's progress rather than building in silence"
    );

    // A second invocation on the same state directory says so and changes nothing.
    let second = output_within(
        Command::new(repo().join("scripts/up"))
            .current_dir(repo())
            .envs(cluster.env.iter().map(|(k, v)| (k, v))),
        Duration::from_secs(60),
    );
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success(),
        "a second scripts/up must not start: {said}"
    );
    assert!(
        said.contains("already running"),
        "a second scripts/up says why: {said}"
    );

    // The demo job exists, alone, and runs.
    let token = cluster.login();
    let jobs = cluster.api(&token, "GET", "/api/v1/jobs", None);
    assert_eq!(jobs["total"], 1, "the empty database got one demo job: {jobs}");
    assert_eq!(jobs["items"][0]["name"], "hello");
    let demo = jobs["items"][0]["id"].as_i64().unwrap();
    let run = cluster.succeeded_run(&token, demo, Duration::from_secs(30));
    assert!(
        run["output"]
            .as_str()
            .unwrap_or("")
            .contains("hello from probactr"),
        "the demo job's output: {run}"
    );
    eprintln!("== demo job ran after {:?}", started.elapsed());

    // Logs are prefixed with their process' name.
    let output = cluster.output();
    for prefix in ["[manager] ", "[executor-1] ", "[executor-2] ", "[monitor] "] {
        assert!(
            output.lines().any(|line| line.starts_with(prefix)),
            "no line starts with {prefix:?}"
        );
    }

    // README's curl examples, as written but for the address and the state directory.
    let password_file = cluster.state.path().join("admin-password");
    let mut script = String::from("set -euo pipefail\n");
    for block in readme_curl_blocks() {
        script.push_str(
            &block
                .replace(README_URL, &cluster.url)
                .replace(README_PASSWORD_FILE, &password_file.display().to_string()),
        );
        script.push('\n');
    }
    script.push_str("echo \"README_JOB=$JOB\"\n");
    let examples = output_within(
        Command::new("bash").args(["-c", &script]).current_dir(repo()),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&examples.stdout);
    let stderr = String::from_utf8_lossy(&examples.stderr);
    assert!(
        examples.status.success(),
        "README's curl examples failed ({}):\n{stdout}\n{stderr}",
        examples.status
    );
    assert!(
        stdout.contains("spec.program"),
        "the bad-input example names the field: {stdout}"
    );
    let readme_job: i64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("README_JOB="))
        .and_then(|id| id.trim().parse().ok())
        .expect("README's examples keep the job's id in JOB");
    let run = cluster.succeeded_run(&token, readme_job, Duration::from_secs(30));
    assert_eq!(run["exit_code"], 0, "README's job ran: {run}");
    eprintln!("== README's examples ran after {:?}", started.elapsed());

    // Ctrl-C: every process stops, nothing is left behind.
    assert!(cluster.processes().len() >= 5, "{:?}", cluster.processes());
    signal(cluster.child.id(), "INT");
    let status = wait_timeout(&mut cluster.child, Duration::from_secs(60)).unwrap_or_else(|| {
        panic!(
            "scripts/up did not stop within 60 s of SIGINT:\n{}",
            cluster.output()
        )
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        status.success(),
        "scripts/up ends cleanly on SIGINT: {status}\n{}",
        cluster.output()
    );
    assert!(cluster.output().contains("[up] stopped"), "{}", cluster.output());
    let left = cluster.processes();
    assert!(left.is_empty(), "processes left behind after SIGINT: {left:#?}");
    let port = cluster.url.rsplit(':').next().unwrap();
    assert!(
        std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err(),
        "the manager's port is closed"
    );
    eprintln!("== stopped after {:?}", started.elapsed());
}

// ------------------------------------------------------------- the test's own tools

#[test]
fn interpolation_follows_compose() {
    let env = HashMap::from([
        ("SET".to_owned(), "v".to_owned()),
        ("EMPTY".to_owned(), String::new()),
    ]);
    let expand = |text: &str| interpolate(text, &env, &mut Vec::new());
    assert_eq!(expand("a${SET}b$SET-$$x").unwrap(), "avbv-$x");
    assert_eq!(
        expand("${UNSET:-d}${EMPTY:-e}${EMPTY-f}${UNSET-g}").unwrap(),
        "deg"
    );
    assert_eq!(expand("${SET:+alt}${EMPTY:+no}${EMPTY+yes}").unwrap(), "altyes");
    assert_eq!(
        expand("${UNSET:-jitter:20ms:500ms}").unwrap(),
        "jitter:20ms:500ms"
    );
    assert!(expand("${EMPTY:?set EMPTY}").unwrap_err().contains("EMPTY"));
    assert_eq!(expand("${EMPTY?set it}").unwrap(), "");
    assert!(expand("${UNSET?set UNSET}").is_err());
    assert_eq!(compose_duration("1m30s"), Duration::from_secs(90));
    assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
    assert_eq!(
        with_database("postgres://u:p@h:5432/postgres?sslmode=disable", "x"),
        "postgres://u:p@h:5432/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
    assert_eq!(
        probactr_names("`PROBACTR_A_B`, PROBACTR_C=1 PROBACTR_"),
        BTreeSet::from(["PROBACTR_A_B".to_owned(), "PROBACTR_C".to_owned()])
    );
}

// --------------------------------------------- managed services: TLS to both databases

/// A private certificate authority with a server certificate for `localhost` and
/// 127.0.0.1, a client certificate, and a second, unrelated authority.
struct Certificates {
    dir: tempfile::TempDir,
}

impl Certificates {
    fn make() -> Certificates {
        let dir = tempfile::tempdir().unwrap();
        let script = r#"
            set -e
            ca() { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$2" -keyout "$1.key" -out "$1.crt" 2>/dev/null; }
            leaf() {
              openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
              printf '%s\n' "$3" > "$1.ext"
              openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
            }
            ca ca probactr-test-ca
            ca other-ca someone-else
            leaf server localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
            leaf client probactr "extendedKeyUsage=clientAuth"
            chmod 600 *.key
        "#;
        let status = Command::new("sh")
            .args(["-c", script])
            .current_dir(dir.path())
            .status()
            .expect("openssl runs");
        assert!(status.success(), "openssl made the certificates");
        Certificates { dir }
    }

    fn path(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn is_root() -> bool {
    output_within(Command::new("id").arg("-u"), Duration::from_secs(10))
        .stdout
        .starts_with(b"0\n")
}

/// A command run as the `postgres` user when we are root (PostgreSQL refuses root).
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn pg_bindir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PROBACTR_PG_BINDIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// A process killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private PostgreSQL that accepts TLS connections only, with `certs`' server certificate.
fn tls_postgres(certs: &Certificates, dir: &Path) -> Option<(Server, u16)> {
    let bindir = pg_bindir()?;
    let data = dir.join("data");
    let key = dir.join("server.key");
    std::fs::copy(certs.path("server.key"), &key).unwrap();
    if is_root() {
        let chown = Command::new("chown")
            .args(["-R", "postgres"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(chown.success());
    }
    let initdb = output_within(
        as_postgres(&bindir.join("initdb")).arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ]),
        Duration::from_secs(120),
    );
    assert!(
        initdb.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&initdb.stderr)
    );
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 reject\n",
    )
    .unwrap();
    let port = free_port();
    let server = as_postgres(&bindir.join("postgres"))
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "ssl=on",
        ])
        .arg("-c")
        .arg(format!("ssl_cert_file={}", certs.path("server.crt")))
        .arg("-c")
        .arg(format!("ssl_key_file={}", key.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("postgres starts");
    Some((Server(server), port))
}

/// A private Redis listening on TLS only, asking for client certificates, with an ACL
/// user `probactr` and the default user off.
fn tls_redis(certs: &Certificates) -> (Server, u16) {
    let port = free_port();
    let server = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(["--tls-cert-file", &certs.path("server.crt")])
        .args(["--tls-key-file", &certs.path("server.key")])
        .args(["--tls-ca-cert-file", &certs.path("ca.crt")])
        .args(["--tls-auth-clients", "yes", "--save", "", "--appendonly", "no"])
        .args(["--user", "default", "off"])
        .args(["--user", "probactr", "on", ">acl-password", "~*", "&*", "+@all"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    (Server(server), port)
}

async fn tls_in_use(url: &str) -> Result<bool, String> {
    let pool = probactr_common::store::pool(url, 1).map_err(|e| e.to_string())?;
    let ssl: Result<bool, _> = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await;
    pool.close().await;
    ssl.map_err(|e| e.to_string())
}

#[tokio::test]
async fn postgres_over_tls_with_sslmode_require_and_verify_full() {
    if !have("openssl") {
        eprintln!("SKIPPED: openssl is missing");
        return;
    }
    let certs = Certificates::make();
    let dir = tempfile::tempdir().unwrap();
    let Some((_server, port)) = tls_postgres(&certs, dir.path()) else {
        eprintln!("SKIPPED: no PostgreSQL binaries (initdb) installed");
        return;
    };
    let base = format!("postgres://postgres@localhost:{port}/postgres");
    let ca = certs.path("ca.crt");
    let verified = format!("{base}?sslmode=verify-full&sslrootcert={ca}");
    let started = Instant::now();
    while tls_in_use(&verified).await.is_err() && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(tls_in_use(&verified).await, Ok(true), "verify-full with the CA");
    assert_eq!(
        tls_in_use(&format!("{base}?sslmode=require")).await,
        Ok(true),
        "require: encrypted, the certificate not checked"
    );

    // The store's own path over TLS: the migrations.
    let pool = probactr_common::store::pool(&verified, 2).unwrap();
    probactr_common::store::migrate(&pool).await.unwrap();
    pool.close().await;

    let other = certs.path("other-ca.crt");
    let wrong_ca = tls_in_use(&format!("{base}?sslmode=verify-full&sslrootcert={other}")).await;
    assert!(
        wrong_ca.is_err(),
        "a certificate from another CA is refused: {wrong_ca:?}"
    );
    let by_ip = format!("postgres://postgres@127.0.0.1:{port}/postgres?sslmode=verify-full&sslrootcert={ca}");
    assert_eq!(
        tls_in_use(&by_ip).await,
        Ok(true),
        "the certificate names 127.0.0.1 too"
    );
    let plain = tls_in_use(&format!("{base}?sslmode=disable")).await;
    assert!(
        plain.is_err(),
        "this server refuses connections without TLS: {plain:?}"
    );
}

#[tokio::test]
async fn redis_over_tls_with_a_client_certificate_and_an_acl_user() {
    if !have("openssl") || !have("redis-server") {
        eprintln!("SKIPPED: openssl or redis-server is missing");
        return;
    }
    let certs = Certificates::make();
    let (_server, port) = tls_redis(&certs);
    let (ca, cert, key) = (
        certs.path("ca.crt"),
        certs.path("client.crt"),
        certs.path("client.key"),
    );
    let url = format!(
        "rediss://probactr:acl-password@localhost:{port}/?sslrootcert={ca}&sslcert={cert}&sslkey={key}"
    );
    let prefix = format!("tls-{}:", std::process::id());

    let started = Instant::now();
    let locks = loop {
        match Locks::connect(&url, &prefix).await {
            Ok(locks) => break locks,
            Err(err) if started.elapsed() < Duration::from_secs(60) => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => panic!("rediss:// with the CA and a client certificate: {err}"),
        }
    };
    let lease = match locks.try_mutex(7, Duration::from_secs(5)).await.unwrap() {
        Acquire::Acquired(lease) => lease,
        other => panic!("a fresh mutex is free: {other:?}"),
    };
    assert!(matches!(
        locks.try_mutex(7, Duration::from_secs(5)).await.unwrap(),
        Acquire::Busy { .. }
    ));
    assert!(locks.release(&lease).await.unwrap());

    let refused = |url: String| async move {
        tokio::time::timeout(Duration::from_secs(20), Locks::connect(&url, "x:"))
            .await
            .map(|r| r.is_err())
            .unwrap_or(true)
    };
    let no_client_cert = format!("rediss://probactr:acl-password@localhost:{port}/?sslrootcert={ca}");
    assert!(
        refused(no_client_cert).await,
        "the server asks for a client certificate"
    );
    let wrong_password = url.replace("acl-password", "wrong-password");
    assert!(
        refused(wrong_password).await,
        "the ACL user's password is checked"
    );
    let other = certs.path("other-ca.crt");
    let wrong_ca = format!(
        "rediss://probactr:acl-password@localhost:{port}/?sslrootcert={other}&sslcert={cert}&sslkey={key}"
    );
    assert!(
        refused(wrong_ca).await,
        "a server certificate from another CA is refused"
    );
    let plain = format!("redis://probactr:acl-password@localhost:{port}/");
    assert!(refused(plain).await, "no plain connections to a TLS port");

    let missing = format!("rediss://localhost:{port}/?sslrootcert=/nonexistent/ca.crt");
    let err = Locks::connect(&missing, "x:").await.unwrap_err().to_string();
    assert!(err.contains("sslrootcert /nonexistent/ca.crt"), "{err}");
}
