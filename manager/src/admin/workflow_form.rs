//! The workflow form: its fields read into the body of `POST /api/v1/workflows`, so the
//! admin's workflows are checked by the API's own validation, and the errors it answers
//! placed next to their fields (`steps[1].job_id`) and listed in one summary.
//!
//! Steps are rows of indexed fields (`steps[0].name`, `steps[0].job_id`,
//! `steps[0].depends_on` as names separated by commas, `steps[0].when`, `steps[0].params`
//! as a JSON object). Blank rows are dropped before the body is made, and the form is shown
//! again from the same rows, so an error's index is its row's.

use std::collections::BTreeMap;

use probactr_common::store::workflows::Step;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::FormData;
use crate::error::FieldErrors;

/// The fields of a step row, in the order they are shown.
const STEP_FIELDS: [&str; 5] = ["name", "job_id", "depends_on", "when", "params"];

/// A step row as typed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepRow {
    /// Its name.
    pub name: String,
    /// The id of its job (a select's value).
    pub job_id: String,
    /// The names of the steps it follows, separated by commas.
    pub depends_on: String,
    /// What of those steps it needs.
    pub when: String,
    /// Its parameters, a JSON object.
    pub params: String,
}

impl StepRow {
    fn is_blank(&self) -> bool {
        [&self.name, &self.job_id, &self.depends_on, &self.params]
            .iter()
            .all(|text| text.trim().is_empty())
    }

    /// The row of a stored step.
    pub fn of(step: &Step) -> StepRow {
        let empty = step.params.as_object().is_none_or(Map::is_empty);
        StepRow {
            name: step.name.clone(),
            job_id: step.job_id.to_string(),
            depends_on: step.depends_on.join(", "),
            when: step.when.clone(),
            params: if empty {
                String::new()
            } else {
                step.params.to_string()
            },
        }
    }

    /// The step as an API body's item: what cannot be read is passed on as typed, for
    /// the validation to name.
    fn body(&self) -> Value {
        let mut step = Map::new();
        step.insert("name".into(), json!(self.name.trim()));
        if let Some(job) = filled(&self.job_id) {
            step.insert(
                "job_id".into(),
                job.parse::<i64>().map_or_else(|_| json!(job), |id| json!(id)),
            );
        }
        let upstream: Vec<&str> = self
            .depends_on
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .collect();
        step.insert("depends_on".into(), json!(upstream));
        if let Some(when) = filled(&self.when) {
            step.insert("when".into(), json!(when));
        }
        if let Some(params) = filled(&self.params) {
            step.insert("params".into(), json_or_text(params));
        }
        Value::Object(step)
    }
}

/// A workflow form as typed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkflowForm {
    /// The workflow's name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The namespace to create it in (a create only).
    pub namespace: String,
    /// Its declared run parameters, a JSON object (empty: free parameters).
    pub params_schema: String,
    /// The version it was read at (an edit only).
    pub version: String,
    /// Its step rows.
    pub steps: Vec<StepRow>,
}

impl WorkflowForm {
    /// Reads a submitted form; blank step rows are dropped.
    pub fn read(form: &FormData) -> WorkflowForm {
        let text = |key: &str| form.get(key).unwrap_or_default().to_owned();
        let rows = form
            .values()
            .keys()
            .filter_map(|key| row_index(key))
            .max()
            .map_or(0, |last| last + 1);
        let steps = (0..rows)
            .map(|index| {
                let field = |name: &str| text(&format!("steps[{index}].{name}"));
                StepRow {
                    name: field("name"),
                    job_id: field("job_id"),
                    depends_on: field("depends_on"),
                    when: field("when"),
                    params: field("params"),
                }
            })
            .filter(|row| !row.is_blank())
            .collect();
        WorkflowForm {
            name: text("name"),
            description: text("description"),
            namespace: text("namespace"),
            params_schema: text("params_schema"),
            version: text("version"),
            steps,
        }
    }

    /// The body of the create (or replace) it asks for.
    pub fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("name".into(), json!(self.name.trim()));
        body.insert("description".into(), json!(self.description.trim()));
        if let Some(namespace) = filled(&self.namespace) {
            body.insert("namespace".into(), json!(namespace));
        }
        body.insert(
            "steps".into(),
            Value::Array(self.steps.iter().map(StepRow::body).collect()),
        );
        if let Some(schema) = filled(&self.params_schema) {
            body.insert("params_schema".into(), json_or_text(schema));
        }
        Value::Object(body)
    }

    /// The version an edit was read at, when the form carries one.
    pub fn expected_version(&self) -> Option<i64> {
        self.version.trim().parse().ok()
    }

    /// The form with a blank row to add a step in.
    pub fn with_blank_row(mut self) -> WorkflowForm {
        self.steps.push(StepRow {
            when: "all_success".to_owned(),
            ..StepRow::default()
        });
        self
    }
}

/// An error of the form as the summary lists it: its field's element, when it has one.
#[derive(Debug, Clone, Serialize)]
pub struct ListedError {
    /// The field as the API names it.
    pub field: String,
    /// The id of the element it is about (None: the form as a whole).
    pub anchor: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// The errors of a form: by the field they are shown next to (`steps[1].params` for
/// `steps[1].params.day`), and every one as the summary lists it.
pub fn placed(errors: &FieldErrors) -> (BTreeMap<String, String>, Vec<ListedError>) {
    let mut by_field: BTreeMap<String, String> = BTreeMap::new();
    let mut listed = Vec::with_capacity(errors.len());
    for (field, message) in errors {
        let shown = shown_field(field);
        if let Some(shown) = &shown {
            let text = by_field.entry(shown.clone()).or_default();
            if !text.is_empty() {
                text.push_str("; ");
            }
            if shown != field {
                text.push_str(&format!("{}: ", &field[shown.len() + 1..]));
            }
            text.push_str(message);
        }
        listed.push(ListedError {
            field: field.clone(),
            anchor: shown.as_deref().map(element_id),
            message: message.clone(),
        });
    }
    (by_field, listed)
}

/// The field of the form an error of `field` is shown next to.
fn shown_field(field: &str) -> Option<String> {
    if let Some(index) = row_index(field) {
        let rest = field.split_once("].")?.1;
        let own = rest.split(['.', '[']).next()?;
        return STEP_FIELDS
            .contains(&own)
            .then(|| format!("steps[{index}].{own}"));
    }
    let own = field.split(['.', '[']).next()?;
    ["name", "description", "namespace", "params_schema"]
        .contains(&own)
        .then(|| own.to_owned())
}

/// The id of a field's element: `steps[1].job_id` is `step-1-job_id`, `name` `wf-name`.
fn element_id(field: &str) -> String {
    match (row_index(field), field.split_once("].")) {
        (Some(index), Some((_, own))) => format!("step-{index}-{own}"),
        _ => format!("wf-{field}"),
    }
}

/// The row of a `steps[N]…` field.
fn row_index(field: &str) -> Option<usize> {
    field.strip_prefix("steps[")?.split_once(']')?.0.parse().ok()
}

fn filled(text: &str) -> Option<&str> {
    Some(text.trim()).filter(|text| !text.is_empty())
}

/// Typed JSON, or the text itself when it is not JSON (the validation then says what the
/// field must be).
fn json_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData(
            pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn rows_become_the_api_body_and_blank_rows_are_dropped() {
        let submitted = form(&[
            ("name", " nightly "),
            ("steps[0].name", "extract"),
            ("steps[0].job_id", "4"),
            ("steps[0].when", "all_success"),
            ("steps[1].when", "all_success"),
            ("steps[2].name", "load"),
            ("steps[2].job_id", "five"),
            ("steps[2].depends_on", "extract, ,extract2"),
            ("steps[2].params", r#"{"day": "mon"}"#),
        ]);
        let read = WorkflowForm::read(&submitted);
        assert_eq!(read.steps.len(), 2, "the blank row dropped");
        assert_eq!(
            read.body(),
            json!({"name": "nightly", "description": "", "steps": [
                {"name": "extract", "job_id": 4, "depends_on": [], "when": "all_success"},
                {"name": "load", "job_id": "five", "depends_on": ["extract", "extract2"],
                 "params": {"day": "mon"}}]})
        );
    }

    #[test]
    fn errors_are_placed_next_to_their_fields_and_all_listed() {
        let errors = FieldErrors::from([
            ("name".to_owned(), "is required".to_owned()),
            ("steps[1].params.day".to_owned(), "must be a date".to_owned()),
            ("steps".to_owned(), "must name at least one step".to_owned()),
        ]);
        let (by_field, listed) = placed(&errors);
        assert_eq!(by_field["steps[1].params"], "day: must be a date");
        assert_eq!(by_field["name"], "is required");
        assert_eq!(listed.len(), 3);
        let anchors: Vec<Option<&str>> = listed.iter().map(|e| e.anchor.as_deref()).collect();
        assert_eq!(anchors, [Some("wf-name"), None, Some("step-1-params")]);
    }
}
