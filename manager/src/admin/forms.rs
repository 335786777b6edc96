//! HTML forms: reading them, and turning the job and trigger forms into the JSON bodies
//! the services validate, so a form and an API call get the same checks and the same
//! field names (`retry.max_attempts` is the form field's name too).

use std::collections::HashMap;

use axum::extract::{FromRequest, Request};
use chrono::{DateTime, NaiveDateTime};
use serde_json::{json, Map, Value};

use super::AdminError;
use crate::error::{ApiError, FieldErrors};

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
    fn filled(&self, key: &str) -> Option<&str> {
        self.get(key).map(str::trim).filter(|v| !v.is_empty())
    }

    /// A checkbox.
    fn checked(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// A number field into `body[key]` (null when empty); a bad number is a field error.
    fn number(&self, key: &str, errors: &mut FieldErrors) -> Value {
        match self.filled(key) {
            None => Value::Null,
            Some(text) => match text.parse::<i64>() {
                Ok(n) => json!(n),
                Err(_) => {
                    errors.insert(key.to_owned(), "must be a whole number".into());
                    Value::Null
                }
            },
        }
    }

    /// A time field: RFC 3339, or a zone-less `YYYY-MM-DDTHH:MM[:SS]` read as UTC.
    fn time(&self, key: &str) -> Value {
        match self.filled(key) {
            None => Value::Null,
            Some(text) => json!(normalize_time(text)),
        }
    }

    /// The fields as template values (what the user typed, shown back on errors).
    pub fn values(&self) -> &HashMap<String, String> {
        &self.0
    }
}

fn normalize_time(text: &str) -> String {
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

/// The JSON body of the job form. `editing` adds the `version`.
pub fn job_body(form: &FormData, editing: bool, errors: &mut FieldErrors) -> Value {
    let mut body = Map::new();
    for key in ["name", "description", "kind", "overlap"] {
        if let Some(value) = form.get(key) {
            body.insert(key.to_owned(), json!(value.trim()));
        }
    }
    match form.filled("spec") {
        None => {
            body.insert("spec".into(), Value::Null);
        }
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(spec) => {
                body.insert("spec".into(), spec);
            }
            Err(err) => {
                errors.insert("spec".into(), format!("is not valid JSON: {err}"));
            }
        },
    }
    body.insert("parallel".into(), json!(form.checked("parallel")));
    body.insert("paused".into(), json!(form.checked("paused")));
    body.insert("max_concurrency".into(), form.number("max_concurrency", errors));
    let timeout = form.number("timeout_secs", errors);
    if !timeout.is_null() {
        body.insert("timeout_secs".into(), timeout);
    }
    if editing {
        body.insert("version".into(), form.number("version", errors));
    }
    let mut retry = Map::new();
    for key in ["max_attempts", "backoff_secs"] {
        let value = form.number(&format!("retry.{key}"), errors);
        if !value.is_null() {
            retry.insert(key.to_owned(), value);
        }
    }
    body.insert("retry".into(), Value::Object(retry));
    Value::Object(body)
}

/// The JSON body of the trigger form: only the chosen kind's own field is sent (the
/// others as null). `with_version` adds the `version` (saving an edit, not previewing).
pub fn trigger_body(form: &FormData, with_version: bool, errors: &mut FieldErrors) -> Value {
    let kind = form.filled("kind").unwrap_or("");
    let mut body = Map::new();
    body.insert("kind".into(), json!(kind));
    body.insert(
        "cron".into(),
        if kind == "cron" {
            json!(form.filled("cron"))
        } else {
            Value::Null
        },
    );
    let interval = if kind == "interval" {
        form.number("interval_secs", errors)
    } else {
        Value::Null
    };
    body.insert("interval_secs".into(), interval);
    body.insert(
        "at".into(),
        if kind == "once" {
            form.time("at")
        } else {
            Value::Null
        },
    );
    body.insert("timezone".into(), json!(form.filled("timezone").unwrap_or("UTC")));
    body.insert("start_at".into(), form.time("start_at"));
    body.insert("end_at".into(), form.time("end_at"));
    if let Some(misfire) = form.filled("misfire") {
        body.insert("misfire".into(), json!(misfire));
    }
    let threshold = form.number("misfire_threshold_secs", errors);
    if !threshold.is_null() {
        body.insert("misfire_threshold_secs".into(), threshold);
    }
    body.insert("paused".into(), json!(form.checked("paused")));
    if with_version {
        body.insert("version".into(), form.number("version", errors));
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn job_form_becomes_the_api_body() {
        let mut errors = FieldErrors::new();
        let body = job_body(
            &form(&[
                ("name", " a "),
                ("kind", "sleep"),
                ("spec", "{\"millis\": 5}"),
                ("timeout_secs", "30"),
                ("retry.max_attempts", "2"),
                ("parallel", "on"),
                ("max_concurrency", ""),
            ]),
            false,
            &mut errors,
        );
        assert!(errors.is_empty());
        assert_eq!(body["name"], "a");
        assert_eq!(body["spec"]["millis"], 5);
        assert_eq!(body["retry"]["max_attempts"], 2);
        assert_eq!(body["parallel"], true);
        assert_eq!(body["paused"], false);
        assert_eq!(body["max_concurrency"], Value::Null);
        assert!(body.get("version").is_none());

        let mut errors = FieldErrors::new();
        let body = job_body(
            &form(&[("spec", "{oops"), ("timeout_secs", "soon"), ("version", "3")]),
            true,
            &mut errors,
        );
        assert!(errors.contains_key("spec") && errors.contains_key("timeout_secs"));
        assert_eq!(body["version"], 3);
    }

    #[test]
    fn trigger_form_sends_only_its_kinds_field() {
        let mut errors = FieldErrors::new();
        let body = trigger_body(
            &form(&[
                ("kind", "interval"),
                ("cron", "* * * * *"),
                ("interval_secs", "60"),
                ("at", "2026-01-01T10:00"),
            ]),
            false,
            &mut errors,
        );
        assert!(errors.is_empty());
        assert_eq!(body["cron"], Value::Null);
        assert_eq!(body["interval_secs"], 60);
        assert_eq!(body["at"], Value::Null);
        assert_eq!(normalize_time("2026-01-01T10:00"), "2026-01-01T10:00:00+00:00");
        assert_eq!(normalize_time("garbage"), "garbage");
    }
}
