//! HTML forms: reading them, and turning the job and trigger forms into the same commands
//! an API body becomes ([`crate::command`]), so a form and an API call get the same checks
//! and the same field names (`retry.max_attempts` and `spec.program` are the form fields'
//! names too).
//!
//! The job's spec has a field per setting of its kind; lists and maps are textareas of
//! one item per line (`args`, `KEY=VALUE` for `env`, `Name: value` for `headers`), blank
//! lines ignored. A malformed value is a problem of its field, reported with every other
//! bad field of the form when the command is validated.

use std::collections::HashMap;

use std::str::FromStr;

use axum::extract::{FromRequest, Request};
use chrono::{DateTime, NaiveDateTime, Utc};

use super::AdminError;
use crate::error::{ApiError, FieldErrors};
use crate::input::Given;

/// A submitted form, field name → value.
#[derive(Debug, Clone, Default)]
pub struct FormData(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequest<S> for FormData {
    type Rejection = AdminError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Form::<HashMap<String, String>>::from_request(req, state).await {
            Ok(axum::Form(map)) => Ok(FormData(map)),
            Err(rejection) => Err(AdminError::Api(ApiError::Rejected {
                status: rejection.status(),
                message: rejection.body_text(),
            })),
        }
    }
}

impl FormData {
    /// A field's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A field's trimmed value, None when empty.
    pub(super) fn filled(&self, key: &str) -> Option<&str> {
        self.get(key).map(str::trim).filter(|v| !v.is_empty())
    }

    /// A checkbox.
    pub(super) fn checked(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// A whole number field: None when empty; a bad number is a problem of the field.
    pub(super) fn whole(&self, key: &str, problems: &mut FieldErrors) -> Option<i64> {
        let text = self.filled(key)?;
        match text.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                problems.insert(key.to_owned(), "must be a whole number".into());
                None
            }
        }
    }

    /// A number field that may be emptied: null when empty.
    pub(super) fn whole_or_null(&self, key: &str, problems: &mut FieldErrors) -> Given<i64> {
        match self.filled(key) {
            None => Some(None),
            Some(_) => self.whole(key, problems).map(Some),
        }
    }

    /// A number field left as it was when empty.
    pub(super) fn whole_if_filled(&self, key: &str, problems: &mut FieldErrors) -> Given<i64> {
        self.filled(key)?;
        self.whole(key, problems).map(Some)
    }

    /// A choice among `T`'s values: absent when the field is not in the form.
    pub(super) fn choice<T>(&self, key: &str, problems: &mut FieldErrors) -> Given<T>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let text = self.get(key)?.trim();
        match text.parse::<T>() {
            Ok(value) => Some(Some(value)),
            Err(err) => {
                problems.insert(key.to_owned(), err.to_string());
                None
            }
        }
    }

    /// Labels written `name=value,name=value` (a job's selector): absent when the field is
    /// not in the form, `{}` when empty.
    pub(super) fn labels(&self, key: &str, problems: &mut FieldErrors) -> Option<serde_json::Value> {
        let text = self.get(key)?;
        match probactr_common::labels::parse_labels(text) {
            Ok(labels) => Some(serde_json::json!(labels)),
            Err(why) => {
                problems.insert(key.to_owned(), why);
                None
            }
        }
    }

    /// A list of jobs, comma-separated, each an id or a name (absent when not in the
    /// form; empty: none).
    pub(super) fn jobs(&self, key: &str) -> Option<serde_json::Value> {
        let text = self.get(key)?;
        let references = text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| match item.parse::<i64>() {
                Ok(id) => serde_json::json!(id),
                Err(_) => serde_json::json!(item),
            });
        Some(serde_json::Value::Array(references.collect()))
    }

    /// A JSON object typed in a textarea (absent when not in the form; empty: `{}`).
    pub(super) fn json_object(&self, key: &str, problems: &mut FieldErrors) -> Option<serde_json::Value> {
        let text = self.get(key)?.trim();
        if text.is_empty() {
            return Some(serde_json::json!({}));
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => Some(value),
            Err(err) => {
                problems.insert(key.to_owned(), format!("not JSON: {err}"));
                None
            }
        }
    }

    /// A JSON value typed in a textarea (absent when not in the form; empty: `null`).
    pub(super) fn json_or_null(&self, key: &str, problems: &mut FieldErrors) -> Option<serde_json::Value> {
        let text = self.get(key)?.trim();
        if text.is_empty() {
            return Some(serde_json::Value::Null);
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => Some(value),
            Err(err) => {
                problems.insert(key.to_owned(), format!("not JSON: {err}"));
                None
            }
        }
    }

    /// A text field: absent when not in the form.
    pub(super) fn text(&self, key: &str) -> Given<String> {
        self.get(key).map(|value| Some(value.trim().to_owned()))
    }

    /// A time field: RFC 3339, or a zone-less `YYYY-MM-DDTHH:MM[:SS]` read as UTC; null
    /// when empty.
    pub(super) fn time(&self, key: &str, problems: &mut FieldErrors) -> Given<DateTime<Utc>> {
        let Some(text) = self.filled(key) else {
            return Some(None);
        };
        match DateTime::parse_from_rfc3339(&normalize_time(text)) {
            Ok(at) => Some(Some(at.to_utc())),
            Err(_) => {
                problems.insert(
                    key.to_owned(),
                    "must be an RFC 3339 time such as 2026-01-31T12:00:00Z".into(),
                );
                None
            }
        }
    }

    /// The fields as template values (what the user typed, shown back on errors).
    pub fn values(&self) -> &HashMap<String, String> {
        &self.0
    }
}

pub(super) fn normalize_time(text: &str) -> String {
    if DateTime::parse_from_rfc3339(text).is_ok() {
        return text.to_owned();
    }
    [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
    .map(|naive| naive.and_utc().to_rfc3339())
    .unwrap_or_else(|| text.to_owned())
}

mod job;
mod schedule;
mod trigger;

pub use job::{in_advanced_part, job_draft, job_form_errors, job_patch, spec_values};
pub use schedule::{schedule_draft, schedule_errors, SCHEDULE_KINDS};
pub use trigger::{trigger_draft, trigger_patch};

#[cfg(test)]
mod tests {
    use super::FormData;

    /// A form made of `pairs`.
    pub(super) fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}
