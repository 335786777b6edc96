//! Export: the server's jobs with their triggers, and (for a whole export) its alerting
//! and workflows, as one YAML-ready document that names objects by name, never by id.

use serde_json::{json, Map, Value};

use crate::alerting;
use crate::fields::{child_names, names_by_id, pick, put_triggers, JOB_FIELDS};
use crate::{fail, workflows, DefinitionError, Registry};

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
        put_triggers(&mut definition, &registry.triggers(id).await?);
        jobs.push(Value::Object(definition));
    }
    if let Some(name) = job.filter(|_| jobs.is_empty()) {
        return fail(format!("no job is named {name:?}"));
    }
    let mut document = Map::new();
    document.insert("jobs".into(), Value::Array(jobs));
    if job.is_none() {
        alerting::export_alerting(registry, &mut document).await?;
        let workflows = workflows::export(registry, &job_names).await?;
        if !workflows.is_empty() {
            document.insert("workflows".into(), Value::Array(workflows));
        }
    }
    Ok(Value::Object(document))
}
