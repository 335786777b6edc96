//! Definitions as code: jobs with their triggers written as YAML (`probactr export`, the
//! admin's download), and applied back (`probactr apply`, the admin's upload): create what
//! is missing, update what differs, say what changes object by object, and change nothing
//! when the files and the server already agree. Both the command-line client (through
//! the REST API) and the manager (through its services) drive it, as a [`Registry`].
//!
//! ```yaml
//! jobs:
//!   - name: nightly-export
//!     kind: shell
//!     spec: {program: /opt/export.sh, env: {DB: "{{ secrets.db }}"}}
//!     timeout_secs: 7200
//!     retry: {max_attempts: 3, backoff_secs: 60}
//!     triggers:
//!       - {kind: cron, cron: "0 0 2 * * *", timezone: Europe/Berlin}
//! ```
//!
//! Secrets stay on the server: a definition names them (`{{ secrets.NAME }}`), never
//! their values.

pub mod marked;
mod workflows;

use std::future::Future;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use marked::Document;
use yaml_rust2::{Yaml, YamlEmitter};

/// Where definitions live: the jobs and triggers of one cluster, as the REST API shapes
/// them (`JobView`, `Trigger`).
pub trait Registry {
    /// Every job.
    fn jobs(&self) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// A job's triggers.
    fn triggers(&self, job_id: i64) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates a job from an API body; returns its id.
    fn create_job(&self, body: Value) -> impl Future<Output = Result<i64, Refusal>> + Send;
    /// Edits a job with an API body (`version` included).
    fn update_job(&self, id: i64, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Deletes a job.
    fn delete_job(&self, id: i64) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Creates a trigger of a job from an API body.
    fn create_trigger(&self, job_id: i64, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Deletes a trigger.
    fn delete_trigger(&self, id: i64) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Every alert channel (`Channel`), or None when the caller may not manage them.
    fn channels(&self) -> impl Future<Output = Result<Option<Vec<Value>>, Refusal>> + Send;
    /// Creates (`id` None) or replaces an alert channel from an API body.
    fn put_channel(&self, id: Option<i64>, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Every alert rule (`Rule`).
    fn rules(&self) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates (`id` None) or replaces an alert rule from an API body.
    fn put_rule(&self, id: Option<i64>, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Every workflow (`WorkflowView`: its steps name jobs by id).
    fn workflows(&self) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates (`id` None) or replaces a workflow from an API body; returns its id.
    fn put_workflow(&self, id: Option<i64>, body: Value)
        -> impl Future<Output = Result<i64, Refusal>> + Send;
    /// A workflow's triggers (`WorkflowTrigger`).
    fn workflow_triggers(&self, workflow_id: i64)
        -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates a trigger of a workflow from an API body.
    fn create_workflow_trigger(
        &self,
        workflow_id: i64,
        body: Value,
    ) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Deletes a trigger of a workflow.
    fn delete_workflow_trigger(
        &self,
        workflow_id: i64,
        id: i64,
    ) -> impl Future<Output = Result<(), Refusal>> + Send;
}

/// The fields of an alert channel a definition carries (its secret and its URL never:
/// a webhook or Slack URL is itself a credential; both are set in the admin or the API,
/// and kept when a file leaves them out).
const CHANNEL_FIELDS: &[&str] = &["name", "kind", "config"];
/// The fields of an alert rule a definition carries; `job` and `channels` by name.
const RULE_FIELDS: &[&str] = &[
    "name",
    "events",
    "job",
    "channels",
    "threshold",
    "duration_secs",
    "throttle_secs",
    "enabled",
];
/// The sections of a definition file.
const SECTIONS: &[&str] = &["jobs", "channels", "alert_rules", "workflows"];
/// A job's child lists, carried by job name (ids differ from cluster to cluster).
const CHILD_FIELDS: &[&str] = &["on_success", "on_failure", "on_finish"];

/// A registry's refusal: what went wrong and, for bad input, each bad field.
#[derive(Debug, Clone, Default)]
pub struct Refusal {
    /// What went wrong.
    pub message: String,
    /// Each bad field (`timeout_secs`, `retry.max_attempts`) and its problem.
    pub fields: Vec<(String, String)>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        for (field, problem) in &self.fields {
            write!(f, "\n  {field}: {problem}")?;
        }
        Ok(())
    }
}

/// Why definitions could not be read or applied; the message names file, line and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DefinitionError(pub String);

impl From<Refusal> for DefinitionError {
    fn from(refusal: Refusal) -> Self {
        DefinitionError(refusal.to_string())
    }
}

fn fail<T>(message: impl Into<String>) -> Result<T, DefinitionError> {
    Err(DefinitionError(message.into()))
}

/// A JSON value as a YAML document.
pub fn yaml(value: &Value) -> String {
    let mut out = String::new();
    let mut emitter = YamlEmitter::new(&mut out);
    // Emitting into a String cannot fail.
    let _ = emitter.dump(&to_yaml(value));
    out.trim_start_matches("---\n").to_owned()
}

fn to_yaml(value: &Value) -> Yaml {
    match value {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(items) => Yaml::Array(items.iter().map(to_yaml).collect()),
        Value::Object(map) => Yaml::Hash(
            map.iter()
                .map(|(k, v)| (Yaml::String(k.clone()), to_yaml(v)))
                .collect(),
        ),
    }
}

/// What `apply` marks the jobs it manages with (`managed_by`): `--prune` deletes only
/// those, and a job created in the admin becomes one when a file names it (adoption).
pub const MANAGER: &str = "probactr-apply";

/// The fields of a job a definition carries (besides `triggers`).
const JOB_FIELDS: &[&str] = &[
    "name",
    "kind",
    "description",
    "spec",
    "parallel",
    "max_concurrency",
    "overlap",
    "timeout_secs",
    "retry",
    "paused",
    "on_executor_lost",
    "max_takeovers",
    "stop_grace_secs",
    "selector",
    "priority",
    "route",
    "shards",
    "mode",
    "replicas",
];
/// The fields of a trigger a definition carries.
const TRIGGER_FIELDS: &[&str] = &[
    "kind",
    "cron",
    "timezone",
    "interval_secs",
    "at",
    "start_at",
    "end_at",
    "misfire",
    "misfire_threshold_secs",
    "paused",
    "max_concurrency",
    "params",
];

/// A trigger's value of `field` when a definition leaves it out (the server's default).
fn trigger_default(field: &str) -> Value {
    match field {
        "timezone" => json!("UTC"),
        "misfire" => json!("fire_once"),
        "misfire_threshold_secs" => json!(60),
        "paused" => json!(false),
        "params" => json!({}),
        _ => Value::Null,
    }
}

/// The definitions of every job (or one) with its triggers, as a YAML-ready value.
pub async fn export(registry: &impl Registry, job: Option<&str>) -> Result<Value, DefinitionError> {
    let mut jobs = Vec::new();
    let all_jobs = registry.jobs().await?;
    let job_names = names_by_id(&all_jobs);
    for existing in &all_jobs {
        if job.is_some_and(|name| existing["name"] != name) {
            continue;
        }
        let mut definition = pick(existing, JOB_FIELDS);
        for (field, names) in child_names(existing, &job_names) {
            if !names.is_empty() {
                definition.insert(field.into(), json!(names));
            }
        }
        let id = existing["id"].as_i64().unwrap_or_default();
        let triggers: Vec<Value> = registry
            .triggers(id)
            .await?
            .iter()
            .map(trigger_definition)
            .collect();
        if !triggers.is_empty() {
            definition.insert("triggers".into(), Value::Array(triggers));
        }
        jobs.push(Value::Object(definition));
    }
    if let Some(name) = job.filter(|_| jobs.is_empty()) {
        return fail(format!("no job is named {name:?}"));
    }
    let mut document = Map::new();
    document.insert("jobs".into(), Value::Array(jobs));
    if job.is_none() {
        export_alerting(registry, &mut document).await?;
        let workflows = workflows::export(registry, &job_names).await?;
        if !workflows.is_empty() {
            document.insert("workflows".into(), Value::Array(workflows));
        }
    }
    Ok(Value::Object(document))
}

/// A trigger's definition: its carried fields, empty parameters left out.
fn trigger_definition(trigger: &Value) -> Value {
    let mut definition = pick(trigger, TRIGGER_FIELDS);
    if definition
        .get("params")
        .is_some_and(|p| p.as_object().is_some_and(Map::is_empty))
    {
        definition.remove("params");
    }
    Value::Object(definition)
}

/// A job's child lists by job name (children since deleted left out).
fn child_names(
    job: &Value,
    names: &std::collections::HashMap<i64, String>,
) -> Vec<(&'static str, Vec<String>)> {
    CHILD_FIELDS
        .iter()
        .map(|field| {
            let listed = job[*field].as_array().cloned().unwrap_or_default();
            let named = listed
                .iter()
                .filter_map(|id| id.as_i64().and_then(|id| names.get(&id)).cloned())
                .collect();
            (*field, named)
        })
        .collect()
}

/// Adds the alert channels (when the caller may see them) and rules, with names for ids.
async fn export_alerting(
    registry: &impl Registry,
    document: &mut Map<String, Value>,
) -> Result<(), DefinitionError> {
    let channels = registry.channels().await?.unwrap_or_default();
    let job_names = names_by_id(&registry.jobs().await?);
    let channel_names = names_by_id(&channels);
    let rules: Vec<Value> = registry
        .rules()
        .await?
        .iter()
        .map(|rule| {
            let mut definition = pick(
                rule,
                &[
                    "name",
                    "events",
                    "threshold",
                    "duration_secs",
                    "throttle_secs",
                    "enabled",
                ],
            );
            if let Some(job) = rule["job_id"].as_i64().and_then(|id| job_names.get(&id)) {
                definition.insert("job".into(), json!(job));
            }
            let channels: Vec<Value> = rule["channel_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| {
                    id.as_i64()
                        .and_then(|id| channel_names.get(&id))
                        .map(|n| json!(n))
                })
                .collect();
            definition.insert("channels".into(), Value::Array(channels));
            Value::Object(definition)
        })
        .collect();
    if !channels.is_empty() {
        let listed = channels
            .iter()
            .map(|c| {
                let mut definition = pick(c, CHANNEL_FIELDS);
                // Even masked: a file that carries no URL keeps the channel's.
                if let Some(Value::Object(config)) = definition.get_mut("config") {
                    config.remove("url");
                }
                Value::Object(definition)
            })
            .collect();
        document.insert("channels".into(), Value::Array(listed));
    }
    if !rules.is_empty() {
        document.insert("alert_rules".into(), Value::Array(rules));
    }
    Ok(())
}

fn names_by_id(objects: &[Value]) -> std::collections::HashMap<i64, String> {
    objects
        .iter()
        .filter_map(|o| Some((o["id"].as_i64()?, o["name"].as_str()?.to_owned())))
        .collect()
}

/// The listed fields of an object that are set (nulls left out, to keep files short).
fn pick(object: &Value, fields: &[&str]) -> Map<String, Value> {
    fields
        .iter()
        .filter_map(|field| {
            let value = object.get(*field)?;
            (!value.is_null()).then(|| ((*field).to_owned(), value.clone()))
        })
        .collect()
}

/// A definition file read, with where each job came from.
pub struct Source {
    path: PathBuf,
    document: Document,
}

/// Reads definitions given as text (an upload); `name` is what errors call it.
pub fn read_text(name: &str, text: &str) -> Result<Vec<Source>, DefinitionError> {
    let (source, problems) = source_of(PathBuf::from(name), text);
    if !problems.is_empty() {
        return fail(problems.join("\n"));
    }
    Ok(source.into_iter().collect())
}

fn source_of(path: PathBuf, text: &str) -> (Option<Source>, Vec<String>) {
    match marked::parse(text) {
        Ok(document) => {
            let source = Source { path, document };
            let problems = shape_problems(&source);
            (Some(source), problems)
        }
        Err((line, message)) => (
            None,
            vec![format!("{}:{line}: not YAML: {message}", path.display())],
        ),
    }
}

impl Source {
    fn at(&self, pointer: &str) -> String {
        format!("{}:{}", self.path.display(), self.document.line_of(pointer))
    }
}

/// One job of the files.
struct Wanted<'a> {
    source: &'a Source,
    pointer: String,
    definition: Map<String, Value>,
    triggers: Vec<Value>,
    /// Its child lists by job name (a list left out: none).
    children: Map<String, Value>,
}

/// Reads `path` (a file, or every `.yaml`/`.yml` file of a directory), checking the shape
/// of every definition; the errors name file, line and field.
pub fn read(path: &Path) -> Result<Vec<Source>, DefinitionError> {
    let unreadable = |err: std::io::Error| DefinitionError(format!("cannot read {}: {err}", path.display()));
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(unreadable)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|err| DefinitionError(format!("cannot read {}: {err}", file.display())))?;
        let (source, found) = source_of(file, &text);
        problems.extend(found);
        sources.extend(source);
    }
    if !problems.is_empty() {
        return fail(problems.join("\n"));
    }
    Ok(sources)
}

fn shape_problems(source: &Source) -> Vec<String> {
    let mut problems = Vec::new();
    let mut problem = |pointer: &str, field: &str, message: &str| {
        problems.push(format!("{}: {field}: {message}", source.at(pointer)));
    };
    let root = &source.document.value;
    let Some(object) = root.as_object() else {
        problem("", "(document)", "must be a mapping with a `jobs` list");
        return problems;
    };
    for key in object.keys().filter(|k| !SECTIONS.contains(&k.as_str())) {
        problem(
            &format!("/{key}"),
            key,
            "unknown section (expected jobs, workflows, channels or alert_rules)",
        );
    }
    workflows::shape_problems(source, &mut problem);
    for (section, fields) in [("channels", CHANNEL_FIELDS), ("alert_rules", RULE_FIELDS)] {
        let Some(listed) = object.get(section) else {
            continue;
        };
        let Some(items) = listed.as_array() else {
            problem(&format!("/{section}"), section, "must be a list");
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let at = format!("/{section}/{i}");
            let Some(map) = item.as_object() else {
                problem(&at, &format!("{section}[{i}]"), "must be a mapping");
                continue;
            };
            if !item.get("name").is_some_and(Value::is_string) {
                problem(&at, &format!("{section}[{i}].name"), "is required (a string)");
            }
            for key in map.keys().filter(|k| !fields.contains(&k.as_str())) {
                problem(
                    &format!("{at}/{key}"),
                    &format!("{section}[{i}].{key}"),
                    "unknown field",
                );
            }
        }
    }
    let empty = json!([]);
    let Some(jobs) = root.get("jobs").unwrap_or(&empty).as_array() else {
        problem("/jobs", "jobs", "must be a list of jobs");
        return problems;
    };
    for (i, job) in jobs.iter().enumerate() {
        let at = format!("/jobs/{i}");
        let Some(fields) = job.as_object() else {
            problem(&at, &format!("jobs[{i}]"), "must be a mapping");
            continue;
        };
        if !job.get("name").is_some_and(Value::is_string) {
            problem(&at, &format!("jobs[{i}].name"), "is required (a string)");
        }
        for key in fields.keys().filter(|k| {
            !JOB_FIELDS.contains(&k.as_str()) && !CHILD_FIELDS.contains(&k.as_str()) && *k != "triggers"
        }) {
            problem(
                &format!("{at}/{key}"),
                &format!("jobs[{i}].{key}"),
                "unknown field",
            );
        }
        let triggers = job.get("triggers").cloned().unwrap_or(json!([]));
        let Some(triggers) = triggers.as_array() else {
            problem(
                &format!("{at}/triggers"),
                &format!("jobs[{i}].triggers"),
                "must be a list",
            );
            continue;
        };
        for (t, trigger) in triggers.iter().enumerate() {
            let here = format!("{at}/triggers/{t}");
            match trigger.as_object() {
                None => problem(&here, &format!("jobs[{i}].triggers[{t}]"), "must be a mapping"),
                Some(fields) => {
                    for key in fields.keys().filter(|k| !TRIGGER_FIELDS.contains(&k.as_str())) {
                        problem(
                            &format!("{here}/{key}"),
                            &format!("jobs[{i}].triggers[{t}].{key}"),
                            "unknown field",
                        );
                    }
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, job) in jobs.iter().enumerate() {
        if let Some(name) = job.get("name").and_then(Value::as_str) {
            if !seen.insert(name.to_owned()) {
                problem(
                    &format!("/jobs/{i}/name"),
                    &format!("jobs[{i}].name"),
                    &format!("{name:?} is defined twice"),
                );
            }
        }
    }
    problems
}

/// What applying the files did (or, for a dry run, would do): one line per change.
pub struct Report {
    /// The changes.
    pub changes: Vec<String>,
}

/// Makes the server match the files; with `dry_run`, only says what it would change;
/// with `prune`, also deletes the jobs apply manages that the files no longer name.
pub async fn apply(
    registry: &impl Registry,
    sources: &[Source],
    dry_run: bool,
    prune: bool,
) -> Result<Report, DefinitionError> {
    let mut changes = Vec::new();
    for source in sources {
        apply_channels(registry, source, dry_run, &mut changes).await?;
    }
    let wanted = wanted_jobs(sources);
    for job in &wanted {
        apply_job(registry, job, dry_run, &mut changes).await?;
    }
    // Once every job exists, a child list may name any of them.
    for job in &wanted {
        apply_children(registry, job, dry_run, &mut changes).await?;
    }
    for source in sources {
        workflows::apply(registry, source, dry_run, &mut changes).await?;
        apply_rules(registry, source, dry_run, &mut changes).await?;
    }
    if prune {
        let named: Vec<&str> = wanted
            .iter()
            .filter_map(|w| w.definition["name"].as_str())
            .collect();
        for job in registry.jobs().await? {
            let name = job["name"].as_str().unwrap_or_default();
            if job["managed_by"] == MANAGER && !named.contains(&name) {
                changes.push(format!("- job {name}"));
                if !dry_run {
                    registry
                        .delete_job(job["id"].as_i64().unwrap_or_default())
                        .await?;
                }
            }
        }
    }
    Ok(Report { changes })
}

/// Creates the channels the file names that do not exist, and replaces those that differ.
async fn apply_channels(
    registry: &impl Registry,
    source: &Source,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let wanted = section(source, "channels");
    if wanted.is_empty() {
        return Ok(());
    }
    let Some(existing) = registry.channels().await? else {
        return fail(format!(
            "{}: channels: only admins manage alert channels",
            source.at("/channels")
        ));
    };
    for (i, channel) in wanted.iter().enumerate() {
        let found = existing.iter().find(|c| c["name"] == channel["name"]);
        let unchanged = found.is_some_and(|current| same(&as_shown(channel), current));
        let Some(id) = put_or_skip("channel", channel, found, unchanged, changes) else {
            continue;
        };
        if !dry_run {
            registry
                .put_channel(id, channel.clone())
                .await
                .map_err(|err| located_in(source, &format!("/channels/{i}"), err, "/config"))?;
        }
    }
    Ok(())
}

/// A channel of a file as the server shows it: its URL, sealed there, masked (the masked
/// form's fingerprint tells whether the file names the same URL).
fn as_shown(channel: &Value) -> Value {
    let mut shown = channel.clone();
    if let Some(url) = shown.pointer_mut("/config/url") {
        if let Some(text) = url.as_str().filter(|text| !probactr_common::masked_url::is_masked(text)) {
            *url = Value::String(probactr_common::masked_url::masked(text));
        }
    }
    shown
}

/// The objects of a section of a file.
fn section(source: &Source, name: &str) -> Vec<Value> {
    source.document.value[name]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether an object of the files must be put, and under which id (None: created):
/// None when the server already has it as written. Records the change.
fn put_or_skip(
    what: &str,
    wanted: &Value,
    found: Option<&Value>,
    unchanged: bool,
    changes: &mut Vec<String>,
) -> Option<Option<i64>> {
    let name = wanted["name"].as_str().unwrap_or_default();
    match found {
        Some(_) if unchanged => None,
        Some(current) => {
            changes.push(format!("~ {what} {name}"));
            Some(current["id"].as_i64())
        }
        None => {
            changes.push(format!("+ {what} {name}"));
            Some(None)
        }
    }
}

/// Creates or replaces the alert rules the file names, their job and channels by name.
async fn apply_rules(
    registry: &impl Registry,
    source: &Source,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let wanted = section(source, "alert_rules");
    if wanted.is_empty() {
        return Ok(());
    }
    let jobs = registry.jobs().await?;
    let channels = registry.channels().await?.unwrap_or_default();
    let existing = registry.rules().await?;
    for (i, rule) in wanted.iter().enumerate() {
        let at = format!("/alert_rules/{i}");
        let name = rule["name"].as_str().unwrap_or_default();
        let body = match rule_body(rule, &jobs, &channels) {
            Ok(body) => body,
            Err((field, problem)) if !dry_run => {
                return fail(format!(
                    "{}: alert_rules[{i}].{field}: {problem}",
                    source.at(&format!("{at}/{field}"))
                ))
            }
            Err(_) => {
                changes.push(format!("+ alert rule {name}"));
                continue;
            }
        };
        let found = existing.iter().find(|r| r["name"] == name);
        let unchanged = found.is_some_and(|current| same_rule(&body, current));
        let Some(id) = put_or_skip("alert rule", rule, found, unchanged, changes) else {
            continue;
        };
        if !dry_run {
            registry
                .put_rule(id, body)
                .await
                .map_err(|err| located_in(source, &at, err, ""))?;
        }
    }
    Ok(())
}

/// A rule of a file as the API takes it: its job and channels from their names.
fn rule_body(rule: &Value, jobs: &[Value], channels: &[Value]) -> Result<Value, (String, String)> {
    let id_of = |objects: &[Value], name: &Value| {
        objects
            .iter()
            .find(|o| o["name"] == *name)
            .and_then(|o| o["id"].as_i64())
    };
    let mut body = pick(
        rule,
        &[
            "name",
            "events",
            "threshold",
            "duration_secs",
            "throttle_secs",
            "enabled",
        ],
    );
    if let Some(job) = rule.get("job").filter(|j| !j.is_null()) {
        let id = id_of(jobs, job).ok_or_else(|| ("job".to_owned(), format!("no job is named {job}")))?;
        body.insert("job_id".into(), json!(id));
    }
    let mut ids = Vec::new();
    for channel in rule["channels"].as_array().into_iter().flatten() {
        let id = id_of(channels, channel)
            .ok_or_else(|| ("channels".to_owned(), format!("no channel is named {channel}")))?;
        ids.push(id);
    }
    body.insert("channel_ids".into(), json!(ids));
    Ok(Value::Object(body))
}

/// Whether a rule's body says what the stored rule does (defaults where left out).
fn same_rule(body: &Value, current: &Value) -> bool {
    let sorted = |v: &Value| {
        let mut items: Vec<String> = v.as_array().into_iter().flatten().map(Value::to_string).collect();
        items.sort();
        items
    };
    let or = |v: &Value, default: Value| if v.is_null() { default } else { v.clone() };
    sorted(&body["events"]) == sorted(&current["events"])
        && sorted(&body["channel_ids"]) == sorted(&current["channel_ids"])
        && body["job_id"] == current["job_id"]
        && body["threshold"] == current["threshold"]
        && body["duration_secs"] == current["duration_secs"]
        && or(&body["throttle_secs"], json!(300)) == current["throttle_secs"]
        && or(&body["enabled"], json!(true)) == current["enabled"]
}

/// A refusal of the object at `pointer`, with the file and line of each bad field.
fn located_in(source: &Source, pointer: &str, refusal: Refusal, fields_under: &str) -> DefinitionError {
    let mut out = format!("{}: {}", source.at(pointer), refusal.message);
    for (field, problem) in &refusal.fields {
        let field = field.trim_start_matches("config.");
        let at = format!("{pointer}{fields_under}/{}", field.replace('.', "/"));
        out.push_str(&format!("\n{}: {field}: {problem}", source.at(&at)));
    }
    DefinitionError(out)
}

fn wanted_jobs(sources: &[Source]) -> Vec<Wanted<'_>> {
    let mut wanted = Vec::new();
    for source in sources {
        let jobs = source.document.value["jobs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, job) in jobs.into_iter().enumerate() {
            let mut definition = job.as_object().cloned().unwrap_or_default();
            let triggers = definition
                .remove("triggers")
                .and_then(|t| t.as_array().cloned())
                .unwrap_or_default();
            let children = CHILD_FIELDS
                .iter()
                .map(|field| {
                    (
                        (*field).to_owned(),
                        definition.remove(*field).unwrap_or_else(|| json!([])),
                    )
                })
                .collect();
            wanted.push(Wanted {
                source,
                pointer: format!("/jobs/{i}"),
                definition,
                triggers,
                children,
            });
        }
    }
    wanted
}

/// A refusal of a job's definition, with the file and line of each bad field.
fn located(wanted: &Wanted<'_>, refusal: Refusal, under: &str) -> DefinitionError {
    located_in(wanted.source, &wanted.pointer, refusal, under)
}

async fn apply_job(
    registry: &impl Registry,
    wanted: &Wanted<'_>,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let name = wanted.definition["name"].as_str().unwrap_or_default().to_owned();
    let existing = registry
        .jobs()
        .await?
        .into_iter()
        .find(|job| job["name"] == name.as_str());
    let job_id = match existing {
        None => {
            changes.push(format!("+ job {name}"));
            if dry_run {
                for trigger in &wanted.triggers {
                    changes.push(format!("+ trigger of {name}: {}", describe(trigger)));
                }
                return Ok(());
            }
            let mut body = wanted.definition.clone();
            body.insert("managed_by".into(), json!(MANAGER));
            registry
                .create_job(Value::Object(body))
                .await
                .map_err(|err| located(wanted, err, ""))?
        }
        Some(job) => {
            let mut differences = differences(&wanted.definition, &job);
            if job["managed_by"] != MANAGER {
                differences.push(format!(
                    "adopted (managed_by {} → {MANAGER})",
                    short(job.get("managed_by"))
                ));
            }
            let id = job["id"].as_i64().unwrap_or_default();
            if !differences.is_empty() {
                changes.push(format!("~ job {name}: {}", differences.join(", ")));
                if !dry_run {
                    let mut patch = Map::new();
                    for field in wanted.definition.keys().filter(|f| *f != "name") {
                        patch.insert(field.clone(), wanted.definition[field].clone());
                    }
                    patch.insert("version".into(), job["version"].clone());
                    patch.insert("managed_by".into(), json!(MANAGER));
                    registry
                        .update_job(id, Value::Object(patch))
                        .await
                        .map_err(|err| located(wanted, err, ""))?;
                }
            }
            id
        }
    };
    apply_triggers(registry, wanted, &name, job_id, dry_run, changes).await
}

/// Sets a job's child lists (by name) where they differ from the files'.
async fn apply_children(
    registry: &impl Registry,
    wanted: &Wanted<'_>,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let jobs = registry.jobs().await?;
    let names = names_by_id(&jobs);
    let name = wanted.definition["name"].as_str().unwrap_or_default();
    let existing = jobs.iter().find(|job| job["name"] == name);
    let current: Map<String, Value> = match existing {
        Some(job) => child_names(job, &names)
            .into_iter()
            .map(|(field, names)| (field.to_owned(), json!(names)))
            .collect(),
        None => CHILD_FIELDS
            .iter()
            .map(|f| ((*f).to_owned(), json!([])))
            .collect(),
    };
    let differ = differences(&wanted.children, &Value::Object(current));
    if differ.is_empty() {
        return Ok(());
    }
    changes.push(format!("~ job {name}: {}", differ.join(", ")));
    let Some(job) = existing.filter(|_| !dry_run) else {
        return Ok(());
    };
    let mut patch = wanted.children.clone();
    patch.insert("version".into(), job["version"].clone());
    registry
        .update_job(job["id"].as_i64().unwrap_or_default(), Value::Object(patch))
        .await
        .map_err(|err| located(wanted, err, ""))
}

/// The fields the definition sets to something else than the server has.
fn differences(wanted: &Map<String, Value>, existing: &Value) -> Vec<String> {
    wanted
        .iter()
        .filter(|(field, value)| !same(value, existing.get(field.as_str()).unwrap_or(&Value::Null)))
        .map(|(field, value)| {
            format!(
                "{field} {} → {}",
                short(existing.get(field.as_str())),
                short(Some(value))
            )
        })
        .collect()
}

/// Whether `wanted` says nothing `existing` does not: objects compare on the keys
/// `wanted` names (the server may fill in defaults), everything else exactly.
fn same(wanted: &Value, existing: &Value) -> bool {
    match (wanted, existing) {
        (Value::Object(w), Value::Object(e)) => {
            w.iter().all(|(k, v)| same(v, e.get(k).unwrap_or(&Value::Null)))
        }
        (Value::Number(w), Value::Number(e)) => w.as_f64() == e.as_f64(),
        _ => wanted == existing,
    }
}

fn short(value: Option<&Value>) -> String {
    let text = value.map(Value::to_string).unwrap_or_else(|| "-".into());
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

fn describe(trigger: &Value) -> String {
    let object = trigger.as_object().cloned().unwrap_or_default();
    object
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A trigger as compared: every carried field, the server's default where left out.
fn canonical(trigger: &Value) -> Vec<(String, Value)> {
    TRIGGER_FIELDS
        .iter()
        .map(|field| {
            let value = trigger
                .get(*field)
                .filter(|v| !v.is_null())
                .cloned()
                .unwrap_or_else(|| trigger_default(field));
            ((*field).to_owned(), normalize_time(value))
        })
        .collect()
}

/// Instants compared as instants, whatever their notation.
fn normalize_time(value: Value) -> Value {
    match value
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    {
        Some(at) => json!(at.with_timezone(&chrono::Utc).timestamp_millis()),
        None => value,
    }
}

/// The wanted triggers the server lacks (with their index), and the server's triggers
/// no wanted one matches.
fn unmatched_triggers(wanted: &[Value], mut existing: Vec<Value>) -> (Vec<(usize, &Value)>, Vec<Value>) {
    let mut missing = Vec::new();
    for (t, trigger) in wanted.iter().enumerate() {
        let key = canonical(trigger);
        match existing.iter().position(|e| canonical(e) == key) {
            Some(found) => {
                existing.remove(found);
            }
            None => missing.push((t, trigger)),
        }
    }
    (missing, existing)
}

async fn apply_triggers(
    registry: &impl Registry,
    wanted: &Wanted<'_>,
    name: &str,
    job_id: i64,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let (missing, existing) = unmatched_triggers(&wanted.triggers, registry.triggers(job_id).await?);
    for (t, trigger) in missing {
        changes.push(format!("+ trigger of {name}: {}", describe(trigger)));
        if !dry_run {
            registry
                .create_trigger(job_id, trigger.clone())
                .await
                .map_err(|err| located(wanted, err, &format!("/triggers/{t}")))?;
        }
    }
    for stale in existing {
        changes.push(format!(
            "- trigger {} of {name}: {}",
            stale["id"],
            describe(&trigger_definition(&stale))
        ));
        if !dry_run {
            registry
                .delete_trigger(stale["id"].as_i64().unwrap_or_default())
                .await?;
        }
    }
    Ok(())
}
