//! Reading definition files: YAML with the line of every value kept, and the shape of
//! every object checked (sections, fields, names) before anything is applied.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::fields::{
    is_trigger_field, CHANNEL_FIELDS, CHILD_FIELDS, JOB_FIELDS, RULE_FIELDS, SECTIONS, WEBHOOK_FIELDS,
};
use crate::marked::{self, Document};
use crate::{fail, workflows, DefinitionError};

/// A definition file read, with where each job came from.
pub struct Source {
    pub(crate) path: PathBuf,
    pub(crate) document: Document,
}

/// Reads definitions given as text (an upload); `name` is what errors call it.
pub fn read_text(name: &str, text: &str) -> Result<Vec<Source>, DefinitionError> {
    let (source, problems) = source_of(PathBuf::from(name), text);
    if !problems.is_empty() {
        return fail(problems.join("\n"));
    }
    Ok(source.into_iter().collect())
}

pub(crate) fn source_of(path: PathBuf, text: &str) -> (Option<Source>, Vec<String>) {
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
    pub(crate) fn at(&self, pointer: &str) -> String {
        format!("{}:{}", self.path.display(), self.document.line_of(pointer))
    }

    /// The namespace the file names at its top (`namespace: NAME`), if any: its objects
    /// go there. Files without it go where the apply is told.
    pub fn namespace(&self) -> Option<&str> {
        self.document.value.get("namespace").and_then(Value::as_str)
    }

    /// Where the file names its namespace (`FILE:LINE`), for messages.
    pub fn namespace_at(&self) -> String {
        self.at("/namespace")
    }
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

/// Every problem of a file's shape, each with its file and line.
pub(crate) fn shape_problems(source: &Source) -> Vec<String> {
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
            "unknown section (expected namespace, jobs, workflows, channels or alert_rules)",
        );
    }
    if object
        .get("namespace")
        .is_some_and(|namespace| !namespace.is_string())
    {
        problem("/namespace", "namespace", "must be a namespace's name");
    }
    workflows::shape_problems(source, &mut problem);
    for (section, fields) in [("channels", CHANNEL_FIELDS), ("alert_rules", RULE_FIELDS)] {
        alerting_problems(object.get(section), section, fields, &mut problem);
    }
    let empty = json!([]);
    let Some(jobs) = root.get("jobs").unwrap_or(&empty).as_array() else {
        problem("/jobs", "jobs", "must be a list of jobs");
        return problems;
    };
    for (i, job) in jobs.iter().enumerate() {
        job_problems(job, i, &mut problem);
    }
    duplicate_job_problems(jobs, &mut problem);
    problems
}

/// The problems of a section of alert channels or rules (absent: none).
fn alerting_problems(
    listed: Option<&Value>,
    section: &str,
    fields: &[&str],
    problem: &mut impl FnMut(&str, &str, &str),
) {
    let Some(listed) = listed else {
        return;
    };
    let Some(items) = listed.as_array() else {
        problem(&format!("/{section}"), section, "must be a list");
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let place = (format!("/{section}/{i}"), format!("{section}[{i}]"));
        let known = |key: &str| fields.contains(&key);
        checked_mapping(
            item,
            &place,
            Some(("name", "is required (a string)")),
            known,
            problem,
        );
    }
}

/// The problems of the `i`th job of a file and of its triggers.
fn job_problems(job: &Value, i: usize, problem: &mut impl FnMut(&str, &str, &str)) {
    let (at, label) = (format!("/jobs/{i}"), format!("jobs[{i}]"));
    let known = |key: &str| JOB_FIELDS.contains(&key) || CHILD_FIELDS.contains(&key) || key == "triggers";
    let place = (at.clone(), label.clone());
    if checked_mapping(
        job,
        &place,
        Some(("name", "is required (a string)")),
        known,
        problem,
    )
    .is_none()
    {
        return;
    }
    let triggers = job.get("triggers").cloned().unwrap_or(json!([]));
    let Some(triggers) = triggers.as_array() else {
        problem(
            &format!("{at}/triggers"),
            &format!("{label}.triggers"),
            "must be a list",
        );
        return;
    };
    for (t, trigger) in triggers.iter().enumerate() {
        let place = (format!("{at}/triggers/{t}"), format!("{label}.triggers[{t}]"));
        checked_mapping(
            trigger,
            &place,
            None,
            |key| is_trigger_field(key) || WEBHOOK_FIELDS.contains(&key),
            problem,
        );
    }
}

/// A problem for each job named again after its first definition.
fn duplicate_job_problems(jobs: &[Value], problem: &mut impl FnMut(&str, &str, &str)) {
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
}

/// The object at `place` (its pointer, and its name in messages) as a mapping, with a
/// problem when it is none, when it lacks the `required` string field (with what to say),
/// and for each field `known` does not accept.
pub(crate) fn checked_mapping<'v>(
    item: &'v Value,
    (at, label): &(String, String),
    required: Option<(&str, &str)>,
    known: impl Fn(&str) -> bool,
    problem: &mut impl FnMut(&str, &str, &str),
) -> Option<&'v Map<String, Value>> {
    let Some(map) = item.as_object() else {
        problem(at, label, "must be a mapping");
        return None;
    };
    if let Some((field, message)) = required {
        if !item.get(field).is_some_and(Value::is_string) {
            problem(at, &format!("{label}.{field}"), message);
        }
    }
    for key in map.keys().filter(|key| !known(key)) {
        problem(&format!("{at}/{key}"), &format!("{label}.{key}"), "unknown field");
    }
    Some(map)
}

/// The objects of a section of a file.
pub(crate) fn section(source: &Source, name: &str) -> Vec<Value> {
    source.document.value[name]
        .as_array()
        .cloned()
        .unwrap_or_default()
}
