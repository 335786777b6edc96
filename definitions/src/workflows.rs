//! Workflows in definition files: each with its steps (naming jobs by name) and its
//! triggers.
//!
//! ```yaml
//! workflows:
//!   - name: nightly-etl
//!     steps:
//!       - {name: extract, job: export-db}
//!       - {name: load, job: load-dw, depends_on: [extract], params: {mode: full}}
//!     triggers:
//!       - {kind: cron, cron: "0 0 3 * * *", params: {region: eu}}
//! ```
//!
//! A workflow is replaced when its description or steps differ (runs under way keep
//! theirs); its triggers are matched like a job's. `--prune` leaves workflows alone.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::apply::located_in;
use crate::compare::{describe, same, short, unmatched_triggers};
use crate::fields::{is_trigger_field, put_triggers, trigger_definition};
use crate::source::{checked_mapping, section, Source};
use crate::{fail, DefinitionError, Registry};

/// The fields of a workflow a definition carries.
const WORKFLOW_FIELDS: &[&str] = &["name", "description", "params_schema", "steps", "triggers"];
/// The fields of a step.
const STEP_FIELDS: &[&str] = &["name", "job", "depends_on", "when", "params"];

/// Every workflow as a definition, its steps' jobs by name.
pub(super) async fn export(
    registry: &impl Registry,
    job_names: &HashMap<i64, String>,
) -> Result<Vec<Value>, DefinitionError> {
    let mut exported = Vec::new();
    for workflow in registry.workflows().await? {
        let mut definition = Map::new();
        definition.insert("name".into(), workflow["name"].clone());
        if workflow["description"].as_str().is_some_and(|d| !d.is_empty()) {
            definition.insert("description".into(), workflow["description"].clone());
        }
        if !workflow["params_schema"].is_null() {
            definition.insert("params_schema".into(), workflow["params_schema"].clone());
        }
        definition.insert("steps".into(), Value::Array(steps_by_name(&workflow, job_names)));
        let id = workflow["id"].as_i64().unwrap_or_default();
        put_triggers(&mut definition, &registry.workflow_triggers(id).await?);
        exported.push(Value::Object(definition));
    }
    Ok(exported)
}

/// A stored workflow's steps as a file writes them: defaults left out.
fn steps_by_name(workflow: &Value, job_names: &HashMap<i64, String>) -> Vec<Value> {
    let steps = workflow["steps"].as_array().cloned().unwrap_or_default();
    steps
        .iter()
        .map(|step| {
            let job = step["job_id"].as_i64().and_then(|id| job_names.get(&id));
            canonical_step(&json!({
                "name": step["name"],
                "job": job,
                "depends_on": step["depends_on"],
                "when": step["when"],
                "params": step["params"],
            }))
        })
        .collect()
}

/// A step with its defaults left out, so that a file and the server compare equal.
fn canonical_step(step: &Value) -> Value {
    let mut out = Map::new();
    for field in STEP_FIELDS {
        let value = step.get(*field).cloned().unwrap_or(Value::Null);
        let default = match *field {
            "depends_on" => value.as_array().is_some_and(Vec::is_empty),
            "when" => value == "all_success",
            "params" => value.as_object().is_some_and(Map::is_empty),
            _ => false,
        };
        if !value.is_null() && !default {
            out.insert((*field).to_owned(), value);
        }
    }
    Value::Object(out)
}

/// Problems of the `workflows` section's shape.
pub(super) fn shape_problems(source: &Source, problem: &mut impl FnMut(&str, &str, &str)) {
    let Some(listed) = source.document.value.get("workflows") else {
        return;
    };
    let Some(workflows) = listed.as_array() else {
        problem("/workflows", "workflows", "must be a list");
        return;
    };
    for (i, workflow) in workflows.iter().enumerate() {
        let at = format!("/workflows/{i}");
        let place = (at.clone(), format!("workflows[{i}]"));
        let known = |key: &str| WORKFLOW_FIELDS.contains(&key);
        if checked_mapping(
            workflow,
            &place,
            Some(("name", "is required (a string)")),
            known,
            problem,
        )
        .is_none()
        {
            continue;
        }
        let Some(steps) = workflow.get("steps").and_then(Value::as_array) else {
            problem(
                &format!("{at}/steps"),
                &format!("workflows[{i}].steps"),
                "is required (a list)",
            );
            continue;
        };
        for (s, step) in steps.iter().enumerate() {
            let place = (format!("{at}/steps/{s}"), format!("workflows[{i}].steps[{s}]"));
            let required = Some(("job", "is required (a job's name)"));
            checked_mapping(step, &place, required, |key| STEP_FIELDS.contains(&key), problem);
        }
        let triggers = workflow.get("triggers").cloned().unwrap_or(json!([]));
        for (t, trigger) in triggers.as_array().into_iter().flatten().enumerate() {
            let here = format!("{at}/triggers/{t}");
            for key in trigger
                .as_object()
                .into_iter()
                .flat_map(Map::keys)
                .filter(|k| !is_trigger_field(k))
            {
                problem(
                    &format!("{here}/{key}"),
                    &format!("workflows[{i}].triggers[{t}].{key}"),
                    "unknown field",
                );
            }
        }
    }
}

/// Creates the file's workflows that are missing, replaces those that differ and
/// matches their triggers.
pub(super) async fn apply(
    registry: &impl Registry,
    source: &Source,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let wanted = section(source, "workflows");
    if wanted.is_empty() {
        return Ok(());
    }
    let jobs = registry.jobs().await?;
    let ids: HashMap<String, i64> = jobs
        .iter()
        .filter_map(|job| Some((job["name"].as_str()?.to_owned(), job["id"].as_i64()?)))
        .collect();
    let names: HashMap<i64, String> = ids.iter().map(|(name, id)| (*id, name.clone())).collect();
    let existing = registry.workflows().await?;
    for (i, workflow) in wanted.iter().enumerate() {
        let at = format!("/workflows/{i}");
        let name = workflow["name"].as_str().unwrap_or_default();
        let steps = workflow["steps"].as_array().cloned().unwrap_or_default();
        let mut body_steps = Vec::new();
        for (s, step) in steps.iter().enumerate() {
            let job = step["job"].as_str().unwrap_or_default();
            let Some(job_id) = ids.get(job) else {
                if dry_run {
                    // A job the same files create.
                    continue;
                }
                return fail(format!(
                    "{}: workflows[{i}].steps[{s}].job: no job is named {job:?}",
                    source.at(&format!("{at}/steps/{s}/job"))
                ));
            };
            let mut body = step.as_object().cloned().unwrap_or_default();
            body.remove("job");
            body.insert("job_id".into(), json!(job_id));
            body_steps.push(Value::Object(body));
        }
        let description = workflow["description"].as_str().unwrap_or_default();
        let params_schema = workflow.get("params_schema").cloned().unwrap_or(Value::Null);
        let body = json!({"name": name, "description": description, "params_schema": params_schema,
                          "steps": body_steps});
        let found = existing.iter().find(|w| w["name"] == name);
        let wanted_steps: Vec<Value> = steps.iter().map(canonical_step).collect();
        let id = match found {
            None => {
                changes.push(format!("+ workflow {name}"));
                if dry_run {
                    for trigger in workflow["triggers"].as_array().into_iter().flatten() {
                        changes.push(format!("+ trigger of workflow {name}: {}", describe(trigger)));
                    }
                    continue;
                }
                registry
                    .put_workflow(None, body)
                    .await
                    .map_err(|err| located_in(source, &at, err, ""))?
            }
            Some(current) => {
                let id = current["id"].as_i64().unwrap_or_default();
                let current_steps = steps_by_name(current, &names);
                let mut differ = Vec::new();
                if current["description"].as_str().unwrap_or_default() != description {
                    differ.push(format!(
                        "description {} → {}",
                        short(current.get("description")),
                        short(workflow.get("description"))
                    ));
                }
                let current_schema = current.get("params_schema").unwrap_or(&Value::Null);
                if !same(&params_schema, current_schema)
                    || (params_schema.is_null() != current_schema.is_null())
                {
                    differ.push(format!(
                        "params_schema {} → {}",
                        short(Some(current_schema)),
                        short(Some(&params_schema))
                    ));
                }
                if current_steps != wanted_steps {
                    differ.push(format!(
                        "steps {} → {}",
                        short(Some(&json!(current_steps))),
                        short(Some(&json!(wanted_steps)))
                    ));
                }
                if !differ.is_empty() {
                    changes.push(format!("~ workflow {name}: {}", differ.join(", ")));
                    if !dry_run {
                        registry
                            .put_workflow(Some(id), body)
                            .await
                            .map_err(|err| located_in(source, &at, err, ""))?;
                    }
                }
                id
            }
        };
        apply_triggers(registry, source, workflow, id, dry_run, changes).await?;
    }
    Ok(())
}

async fn apply_triggers(
    registry: &impl Registry,
    source: &Source,
    workflow: &Value,
    id: i64,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let name = workflow["name"].as_str().unwrap_or_default();
    let wanted = workflow["triggers"].as_array().cloned().unwrap_or_default();
    let (missing, existing) = unmatched_triggers(&wanted, registry.workflow_triggers(id).await?);
    for (t, trigger) in missing {
        changes.push(format!("+ trigger of workflow {name}: {}", describe(trigger)));
        if !dry_run {
            registry
                .create_workflow_trigger(id, trigger.clone())
                .await
                .map_err(|err| {
                    located_in(
                        source,
                        &format!("/workflows/{}/triggers/{t}", index_of(source, name)),
                        err,
                        "",
                    )
                })?;
        }
    }
    for stale in existing {
        changes.push(format!(
            "- trigger {} of workflow {name}: {}",
            stale["id"],
            describe(&trigger_definition(&stale))
        ));
        if !dry_run {
            registry
                .delete_workflow_trigger(id, stale["id"].as_i64().unwrap_or_default())
                .await?;
        }
    }
    Ok(())
}

/// The position of workflow `name` in its file.
fn index_of(source: &Source, name: &str) -> usize {
    section(source, "workflows")
        .iter()
        .position(|w| w["name"] == name)
        .unwrap_or_default()
}
