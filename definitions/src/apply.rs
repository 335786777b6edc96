//! Apply: make the server match the files, job by job, then child lists, workflows and
//! alert rules; every refusal names the file, line and field at fault.

use serde_json::{json, Map, Value};

use crate::compare::{describe, differences, paired_webhooks, short, unmatched_triggers};
use crate::fields::{child_names, names_by_id, trigger_definition, CHILD_FIELDS};
use crate::source::Source;
use crate::{alerting, workflows, DefinitionError, Refusal, Registry, MANAGER};

/// What applying the files did (or, for a dry run, would do): one line per change.
pub struct Report {
    /// The changes.
    pub changes: Vec<String>,
}

/// Makes the server match the files; with `dry_run`, only says what it would change;
/// with `prune`, also deletes the jobs apply manages that the files no longer name.
/// Stops at the first refusal.
pub async fn apply(
    registry: &impl Registry,
    sources: &[Source],
    dry_run: bool,
    prune: bool,
) -> Result<Report, DefinitionError> {
    let mut faults = Faults::default();
    run(registry, sources, dry_run, prune, &mut faults).await
}

/// Goes through the files as [`apply`] does (a registry that only validates, like the
/// manager's, writes nothing), but past every refusal: the error names every problem of
/// every object at once, each with its file, line and field.
pub async fn check(
    registry: &impl Registry,
    sources: &[Source],
    prune: bool,
) -> Result<Report, DefinitionError> {
    let mut faults = Faults {
        gather: true,
        found: Vec::new(),
    };
    let report = run(registry, sources, false, prune, &mut faults).await?;
    if faults.found.is_empty() {
        Ok(report)
    } else {
        Err(DefinitionError(faults.found.join("\n")))
    }
}

/// The refusals a check met: kept so that it goes on (when gathering), else the first
/// one ends the apply.
#[derive(Default)]
pub(crate) struct Faults {
    gather: bool,
    found: Vec<String>,
}

impl Faults {
    /// An object's outcome: a refusal kept when gathering, else passed on.
    fn keep(&mut self, outcome: Result<(), DefinitionError>) -> Result<(), DefinitionError> {
        match outcome {
            Err(err) if self.gather => {
                self.found.push(err.0);
                Ok(())
            }
            other => other,
        }
    }
}

async fn run(
    registry: &impl Registry,
    sources: &[Source],
    dry_run: bool,
    prune: bool,
    faults: &mut Faults,
) -> Result<Report, DefinitionError> {
    let mut changes = Vec::new();
    for source in sources {
        let outcome = alerting::apply_channels(registry, source, dry_run, &mut changes).await;
        faults.keep(outcome)?;
    }
    let wanted = wanted_jobs(sources);
    for job in &wanted {
        let outcome = apply_job(registry, job, dry_run, &mut changes, faults).await;
        faults.keep(outcome)?;
    }
    // Once every job exists, a child list may name any of them.
    for job in &wanted {
        let outcome = apply_children(registry, job, dry_run, &mut changes).await;
        faults.keep(outcome)?;
    }
    for source in sources {
        let outcome = workflows::apply(registry, source, dry_run, &mut changes).await;
        faults.keep(outcome)?;
        let outcome = alerting::apply_rules(registry, source, dry_run, &mut changes).await;
        faults.keep(outcome)?;
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

/// One job of the files.
pub(crate) struct Wanted<'a> {
    source: &'a Source,
    pointer: String,
    definition: Map<String, Value>,
    triggers: Vec<Value>,
    /// Its child lists by job name (a list left out: none).
    children: Map<String, Value>,
}

/// A refusal of the object at `pointer`, with the file and line of each bad field.
pub(crate) fn located_in(
    source: &Source,
    pointer: &str,
    refusal: Refusal,
    fields_under: &str,
) -> DefinitionError {
    // Bad fields say it all; the refusal's own message ("invalid input") would be one
    // more line that names no problem.
    let mut lines = Vec::new();
    if refusal.fields.is_empty() {
        lines.push(format!("{}: {}", source.at(pointer), refusal.message));
    }
    for (field, problem) in &refusal.fields {
        let field = field.trim_start_matches("config.");
        let at = format!("{pointer}{fields_under}/{}", field.replace('.', "/"));
        lines.push(format!("{}: {field}: {problem}", source.at(&at)));
    }
    DefinitionError(lines.join("\n"))
}

pub(crate) fn wanted_jobs(sources: &[Source]) -> Vec<Wanted<'_>> {
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
pub(crate) fn located(wanted: &Wanted<'_>, refusal: Refusal, under: &str) -> DefinitionError {
    located_in(wanted.source, &wanted.pointer, refusal, under)
}

pub(crate) async fn apply_job(
    registry: &impl Registry,
    wanted: &Wanted<'_>,
    dry_run: bool,
    changes: &mut Vec<String>,
    faults: &mut Faults,
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
            let created = registry
                .create_job(Value::Object(body))
                .await
                .map_err(|err| located(wanted, err, ""));
            match created {
                Ok(id) => id,
                Err(refused) => {
                    faults.keep(Err(refused))?;
                    // Gathering: the triggers are checked too, under the id a checking
                    // registry lists the refused job with (none: nothing to check them on).
                    let listed = registry.jobs().await?;
                    let Some(id) = listed
                        .iter()
                        .find(|job| job["name"] == name.as_str())
                        .and_then(|job| job["id"].as_i64())
                    else {
                        return Ok(());
                    };
                    id
                }
            }
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
                    let updated = registry
                        .update_job(id, Value::Object(patch))
                        .await
                        .map_err(|err| located(wanted, err, ""));
                    faults.keep(updated)?;
                }
            }
            id
        }
    };
    apply_triggers(registry, wanted, &name, job_id, dry_run, changes, faults).await
}

/// Sets a job's child lists (by name) where they differ from the files'.
pub(crate) async fn apply_children(
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

pub(crate) async fn apply_triggers(
    registry: &impl Registry,
    wanted: &Wanted<'_>,
    name: &str,
    job_id: i64,
    dry_run: bool,
    changes: &mut Vec<String>,
    faults: &mut Faults,
) -> Result<(), DefinitionError> {
    let (mut missing, mut existing) = unmatched_triggers(&wanted.triggers, registry.triggers(job_id).await?);
    for (t, trigger, current) in paired_webhooks(&mut missing, &mut existing) {
        changes.push(format!(
            "~ trigger {} of {name}: {}",
            current["id"],
            describe(trigger)
        ));
        if !dry_run {
            let mut patch = trigger.as_object().cloned().unwrap_or_default();
            patch.insert("version".into(), current["version"].clone());
            let edited = registry
                .update_trigger(current["id"].as_i64().unwrap_or_default(), Value::Object(patch))
                .await
                .map_err(|err| located(wanted, err, &format!("/triggers/{t}")));
            faults.keep(edited)?;
        }
    }
    for (t, trigger) in missing {
        changes.push(format!("+ trigger of {name}: {}", describe(trigger)));
        if !dry_run {
            let created = registry
                .create_trigger(job_id, trigger.clone())
                .await
                .map_err(|err| located(wanted, err, &format!("/triggers/{t}")));
            faults.keep(created)?;
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
