//! Creating a workflow: a name and a DAG of steps, each running a job after the steps it
//! depends on. Every bad field is named (`steps[2].depends_on`), cycles included; whether
//! each job exists is checked against the store with [`WorkflowDraft::unknown_jobs`].

use std::collections::{BTreeMap, BTreeSet};

use probactr_common::store::workflows::Step;
use serde_json::Value;

use probactr_common::params_schema::ParamsSchema;
use probactr_common::secrets::Keyring;

use super::shapes::{ParamDeclaration, WorkflowStepBody};
use super::{lenient_input, params, Checks};
use crate::error::{ApiError, FieldErrors};
use crate::input::Input;

/// What a step may need of its upstream steps.
pub const WHEN: [&str; 3] = ["all_success", "all_done", "any_failed"];

/// At most this many steps per workflow.
pub const MAX_STEPS: usize = 200;

// Also the OpenAPI schema of those bodies: its docs are the API's documentation.
/// A workflow as asked for (`POST /api/v1/workflows`, `PUT /api/v1/workflows/{id}`),
/// read leniently.
#[derive(Debug, utoipa::ToSchema)]
pub struct WorkflowDraft {
    /// Unique, at most 200 characters.
    #[schema(value_type = String)]
    name: Option<String>,
    /// What it is for (null or absent: none).
    #[schema(value_type = Option<String>)]
    description: String,
    /// The steps: a DAG (no cycles), each name unique.
    #[schema(value_type = Vec<WorkflowStepBody>)]
    steps: Option<Value>,
    /// Declared parameters of its runs (as a job's `params_schema`): run now and trigger
    /// parameters are checked against them.
    #[schema(value_type = Option<BTreeMap<String, ParamDeclaration>>)]
    params_schema: Option<Value>,
    #[schema(ignore)]
    errors: FieldErrors,
}

/// A workflow ready to store.
#[derive(Debug, Clone)]
pub struct ValidWorkflow {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its steps, in the order given.
    pub steps: Vec<Step>,
    /// Its declared run parameters, as checked (None: free parameters).
    pub params_schema: Option<Value>,
}

impl WorkflowDraft {
    /// Reads a `POST /api/v1/workflows` body.
    pub fn from_json(body: Value) -> WorkflowDraft {
        let (mut input, mut errors) = lenient_input(body);
        let name = input.required_text("name");
        let description = input.text("description").flatten().unwrap_or_default();
        let steps = input.raw("steps");
        let params_schema = input.raw("params_schema");
        errors.extend(input.into_errors());
        WorkflowDraft {
            name,
            description,
            steps,
            params_schema,
            errors,
        }
    }

    /// The job ids the steps name, to check against the store.
    pub fn job_ids(&self) -> Vec<i64> {
        self.steps
            .as_ref()
            .and_then(Value::as_array)
            .map(|steps| {
                steps
                    .iter()
                    .filter_map(|step| step.get("job_id").and_then(Value::as_i64))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Validates the draft; `existing_jobs` are the ids of [`WorkflowDraft::job_ids`] that
    /// exist.
    pub fn validate(self, existing_jobs: &BTreeSet<i64>) -> Result<ValidWorkflow, ApiError> {
        let mut checks = Checks::after_reading(&self.errors);
        if let Some(name) = &self.name {
            if name.trim().is_empty() || name.chars().count() > 200 {
                checks.error("name", "must be 1 to 200 characters");
            }
        }
        let steps = match &self.steps {
            None | Some(Value::Null) => {
                checks.error("steps", "is required");
                Vec::new()
            }
            Some(Value::Array(items)) if items.is_empty() => {
                checks.error("steps", "must name at least one step");
                Vec::new()
            }
            Some(Value::Array(items)) if items.len() > MAX_STEPS => {
                checks.error("steps", format!("must have at most {MAX_STEPS} steps"));
                Vec::new()
            }
            Some(Value::Array(items)) => read_steps(items, existing_jobs, &mut checks),
            Some(_) => {
                checks.error("steps", "must be a list of steps");
                Vec::new()
            }
        };
        let params_schema = match ParamsSchema::parse(
            self.params_schema.as_ref().unwrap_or(&Value::Null),
            "params_schema",
        ) {
            Ok(schema) => schema.map(|schema| schema.to_json()),
            Err(problems) => {
                for (field, message) in problems {
                    checks.error(&field, message);
                }
                None
            }
        };
        let valid = self.name.map(|name| ValidWorkflow {
            name: name.trim().to_owned(),
            description: self.description,
            steps,
            params_schema,
        });
        checks.verdict(valid)
    }
}

impl ValidWorkflow {
    /// The workflow with each step's `params` checked against its job's declared ones
    /// (`schemas`: job id → `params_schema`): the given ones must be declared and valid,
    /// none is required (the workflow run's parameters come under them); secret values
    /// sealed. Else a 422 naming each (`steps[1].params.day`).
    pub fn with_step_params_checked(
        mut self,
        schemas: &BTreeMap<i64, Value>,
        keys: Option<&Keyring>,
    ) -> Result<ValidWorkflow, ApiError> {
        let mut errors = FieldErrors::new();
        for (index, step) in self.steps.iter_mut().enumerate() {
            let prefix = format!("steps[{index}].params");
            match params::checked(
                schemas.get(&step.job_id),
                &step.params,
                params::Given::Part,
                keys,
                &prefix,
            ) {
                Ok(checked) => step.params = checked,
                Err(ApiError::Invalid(more)) => errors.extend(more),
                Err(other) => return Err(other),
            }
        }
        if errors.is_empty() {
            Ok(self)
        } else {
            Err(ApiError::Invalid(errors))
        }
    }
}

fn read_steps(items: &[Value], existing_jobs: &BTreeSet<i64>, checks: &mut Checks) -> Vec<Step> {
    let mut steps = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let field = |name: &str| format!("steps[{index}].{name}");
        let Ok(mut input) = Input::new(item.clone()) else {
            checks.error(&format!("steps[{index}]"), "must be an object");
            continue;
        };
        let name = input.required_text("name");
        let job_id = input.int("job_id", 1, i64::MAX);
        let job_id = input.required("job_id", job_id);
        let depends_on = input.raw("depends_on");
        let when = input
            .text("when")
            .flatten()
            .unwrap_or_else(|| "all_success".to_owned());
        let params = input.raw("params");
        for (key, message) in input.into_errors() {
            checks.error(&field(&key), message);
        }
        if let Some(name) = &name {
            if !is_step_name(name) {
                checks.error(&field("name"), "must be 1 to 100 letters, digits, `_` or `-`");
            } else if steps.iter().any(|step: &Step| &step.name == name) {
                checks.error(&field("name"), format!("step {name} is named twice"));
            }
        }
        if let Some(job_id) = job_id {
            if !existing_jobs.contains(&job_id) {
                checks.error(&field("job_id"), format!("job {job_id} does not exist"));
            }
        }
        if !WHEN.contains(&when.as_str()) {
            checks.error(&field("when"), format!("must be one of {}", WHEN.join(", ")));
        }
        let depends_on = match depends_on {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(names)) if names.iter().all(Value::is_string) => {
                let mut unique: Vec<String> = Vec::new();
                for name in names.iter().filter_map(Value::as_str) {
                    if !unique.iter().any(|known| known == name) {
                        unique.push(name.to_owned());
                    }
                }
                unique
            }
            Some(_) => {
                checks.error(&field("depends_on"), "must be a list of step names");
                Vec::new()
            }
        };
        let params = match params {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(params @ Value::Object(_)) => params,
            Some(_) => {
                checks.error(&field("params"), "must be a JSON object");
                Value::Object(Default::default())
            }
        };
        steps.push(Step {
            name: name.unwrap_or_default(),
            job_id: job_id.unwrap_or_default(),
            depends_on,
            when,
            params,
        });
    }
    check_graph(&steps, checks);
    steps
}

fn is_step_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// Unknown upstream names, and cycles (named on the first step found in one).
fn check_graph(steps: &[Step], checks: &mut Checks) {
    let index: BTreeMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| (step.name.as_str(), i))
        .collect();
    for (i, step) in steps.iter().enumerate() {
        for upstream in &step.depends_on {
            if !index.contains_key(upstream.as_str()) {
                checks.error(
                    &format!("steps[{i}].depends_on"),
                    format!("names {upstream}, which is not a step"),
                );
            } else if upstream == &step.name {
                checks.error(
                    &format!("steps[{i}].depends_on"),
                    "a step cannot depend on itself",
                );
            }
        }
    }
    // Kahn's algorithm: whatever cannot be ordered lies on (or after) a cycle.
    let mut needs: Vec<usize> = steps
        .iter()
        .map(|step| {
            step.depends_on
                .iter()
                .filter(|name| index.contains_key(name.as_str()))
                .count()
        })
        .collect();
    let mut ready: Vec<usize> = (0..steps.len()).filter(|&i| needs[i] == 0).collect();
    let mut ordered = 0;
    while let Some(done) = ready.pop() {
        ordered += 1;
        for (i, step) in steps.iter().enumerate() {
            if step.depends_on.iter().any(|name| name == &steps[done].name) {
                needs[i] -= 1;
                if needs[i] == 0 {
                    ready.push(i);
                }
            }
        }
    }
    if ordered < steps.len() {
        if let Some(i) = (0..steps.len()).find(|&i| needs[i] > 0) {
            checks.error(
                &format!("steps[{i}].depends_on"),
                format!("step {} is part of a cycle", steps[i].name),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors_of(body: Value, jobs: &[i64]) -> FieldErrors {
        let draft = WorkflowDraft::from_json(body);
        match draft.validate(&jobs.iter().copied().collect()) {
            Ok(_) => FieldErrors::new(),
            Err(err) => err.fields(),
        }
    }

    #[test]
    fn a_diamond_is_valid_and_cycles_unknown_names_and_jobs_are_named() {
        let diamond = json!({"name": "d", "steps": [
            {"name": "a", "job_id": 1},
            {"name": "b", "job_id": 1, "depends_on": ["a"]},
            {"name": "c", "job_id": 1, "depends_on": ["a"], "when": "all_done"},
            {"name": "d", "job_id": 1, "depends_on": ["b", "c"], "params": {"x": 1}}]});
        assert!(errors_of(diamond, &[1]).is_empty());
        let bad = json!({"name": "d", "steps": [
            {"name": "a", "job_id": 1, "depends_on": ["c"]},
            {"name": "b", "job_id": 2, "depends_on": ["nope"], "when": "sometimes"},
            {"name": "c", "job_id": 1, "depends_on": ["a"]}]});
        let errors = errors_of(bad, &[1]);
        assert!(errors["steps[0].depends_on"].contains("cycle"), "{errors:?}");
        assert!(errors["steps[1].depends_on"].contains("nope"), "{errors:?}");
        assert!(errors.contains_key("steps[1].job_id"), "{errors:?}");
        assert!(errors.contains_key("steps[1].when"), "{errors:?}");
        assert!(errors_of(json!({"name": "x"}), &[]).contains_key("steps"));
    }
}
