//! Reading input field by field, so that every bad field is named (invariant 7).
//!
//! A derived `Deserialize` stops at the first problem and names a line and column of a
//! document the user never wrote. Instead, request bodies are read as a JSON object and
//! each field is taken out of it by name with [`Input`]; every problem is collected
//! under its field's path (`retry.max_attempts`), fields nobody asked for are reported as
//! unknown, and the caller answers one 422 listing them all.
//!
//! [`ApiJson`] is the JSON extractor of the API: malformed JSON answers in the API's
//! error format instead of axum's plain text. [`QueryParams`] does the same for query
//! strings.

use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use probactr_common::store::namespaces::DEFAULT;

use crate::error::{ApiError, FieldErrors};

/// A value as given: `None` when the field is absent, `Some(None)` when it is `null`.
pub type Given<T> = Option<Option<T>>;

/// A JSON object being read field by field.
#[derive(Debug, Default)]
pub struct Input {
    map: Map<String, Value>,
    prefix: String,
    errors: FieldErrors,
}

impl Input {
    /// Reads a request body, which must be a JSON object.
    pub fn new(value: Value) -> Result<Input, ApiError> {
        match value {
            Value::Object(map) => Ok(Input {
                map,
                ..Input::default()
            }),
            _ => Err(ApiError::field("body", "must be a JSON object")),
        }
    }

    /// An input over an object; its errors are named `prefix` + field.
    fn nested(map: Map<String, Value>, prefix: String) -> Input {
        Input {
            map,
            prefix,
            errors: FieldErrors::new(),
        }
    }

    fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Records a problem with `key`.
    pub fn error(&mut self, key: &str, message: impl Into<String>) {
        let path = self.path(key);
        self.errors.entry(path).or_insert_with(|| message.into());
    }

    /// Whether a problem was recorded.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Whether `key` is present (even as null).
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Takes `key` out as it is.
    pub fn raw(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key)
    }

    fn read<T>(&mut self, key: &str, expected: &str, convert: impl FnOnce(&Value) -> Option<T>) -> Given<T> {
        match self.map.remove(key)? {
            Value::Null => Some(None),
            value => match convert(&value) {
                Some(converted) => Some(Some(converted)),
                None => {
                    self.error(key, format!("must be {expected}"));
                    None
                }
            },
        }
    }

    /// A string field.
    pub fn text(&mut self, key: &str) -> Given<String> {
        self.read(key, "a string", |v| v.as_str().map(str::to_owned))
    }

    /// A string field that must be given (not absent, not null).
    pub fn required_text(&mut self, key: &str) -> Option<String> {
        let given = self.text(key);
        self.required(key, given)
    }

    /// The `namespace` field; `default` when absent or null.
    pub fn namespace(&mut self) -> String {
        self.text("namespace")
            .flatten()
            .unwrap_or_else(|| DEFAULT.to_owned())
    }

    /// A whole number in `min..=max`.
    pub fn int(&mut self, key: &str, min: i64, max: i64) -> Given<i64> {
        let value = self.read(key, "a whole number", Value::as_i64)?;
        let bound = |limit: i64| crate::command::limit_words(key, limit);
        match value {
            Some(n) if n < min => {
                self.error(key, format!("must be at least {}", bound(min)));
                None
            }
            Some(n) if n > max => {
                self.error(key, format!("must be at most {}", bound(max)));
                None
            }
            other => Some(other),
        }
    }

    /// A boolean.
    pub fn boolean(&mut self, key: &str) -> Given<bool> {
        self.read(key, "true or false", Value::as_bool)
    }

    /// A string naming one of `T`'s values (kinds, policies, states).
    pub fn choice<T>(&mut self, key: &str) -> Given<T>
    where
        T: FromStr,
        T::Err: Display,
    {
        let text = self.text(key)?;
        match text.map(|t| t.parse::<T>()) {
            None => Some(None),
            Some(Ok(value)) => Some(Some(value)),
            Some(Err(err)) => {
                self.error(key, err.to_string());
                None
            }
        }
    }

    /// An RFC 3339 instant.
    pub fn time(&mut self, key: &str) -> Given<DateTime<Utc>> {
        let text = self.text(key)?;
        match text.map(|t| DateTime::parse_from_rfc3339(&t)) {
            None => Some(None),
            Some(Ok(at)) => Some(Some(at.with_timezone(&Utc))),
            Some(Err(_)) => {
                self.error(key, "must be an RFC 3339 time such as 2026-01-31T12:00:00Z");
                None
            }
        }
    }

    /// A nested object, read with the same rules; finish it with [`Input::absorb`].
    pub fn object(&mut self, key: &str) -> Given<Input> {
        let path = self.path(key);
        match self.map.remove(key)? {
            Value::Null => Some(None),
            Value::Object(map) => Some(Some(Input::nested(map, format!("{path}.")))),
            _ => {
                self.error(key, "must be an object");
                None
            }
        }
    }

    /// Takes the errors of a nested input, its unknown fields included.
    pub fn absorb(&mut self, nested: Input) {
        let errors = nested.into_errors();
        for (field, message) in errors {
            self.errors.entry(field).or_insert(message);
        }
    }

    /// Reports `null` for a field that may not be null; passes other values through.
    pub fn not_null<T>(&mut self, key: &str, given: Given<T>) -> Option<T> {
        match given {
            Some(None) => {
                self.error(key, "must not be null");
                None
            }
            Some(Some(value)) => Some(value),
            None => None,
        }
    }

    /// Reports a missing (or null) required field.
    pub fn required<T>(&mut self, key: &str, given: Given<T>) -> Option<T> {
        match given {
            Some(Some(value)) => Some(value),
            _ => {
                if !self.errors.contains_key(&self.path(key)) {
                    self.error(key, "is required");
                }
                None
            }
        }
    }

    /// The collected errors, with one for each field nobody read.
    pub fn into_errors(mut self) -> FieldErrors {
        let unknown: Vec<String> = self.map.keys().cloned().collect();
        for key in unknown {
            self.error(&key, "unknown field");
        }
        self.errors
    }

    /// Ok when every field was read and valid; else a 422 naming each bad field.
    pub fn finish(self) -> Result<(), ApiError> {
        let errors = self.into_errors();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Invalid(errors))
        }
    }
}

/// axum's JSON extractor, answering in the API's error format.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::JsonDataError(err) => ApiError::field("body", err.body_text()),
        other => {
            let status = other.status();
            let message = other.body_text();
            ApiError::Rejected { status, message }
        }
    }
}

/// The query string as name → value, read with [`QueryParams::int`] and friends.
#[derive(Debug, Clone, Default)]
pub struct QueryParams(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<HashMap<String, String>>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(map)) => Ok(QueryParams(map)),
            Err(rejection) => Err(ApiError::field("query", rejection.body_text())),
        }
    }
}

pub use probactr_common::store::Page;

impl QueryParams {
    /// A non-empty parameter's text.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// The `namespace` parameter naming one object's namespace; `default` when not given.
    pub fn namespace(&self) -> &str {
        self.text("namespace").unwrap_or(DEFAULT)
    }

    /// A whole number parameter in `min..=max`.
    pub fn int(&self, key: &str, min: i64, max: i64, errors: &mut FieldErrors) -> Option<i64> {
        let text = self.text(key)?;
        match text.trim().parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                errors.insert(
                    key.to_owned(),
                    format!("must be a whole number from {min} to {max}"),
                );
                None
            }
        }
    }

    /// A `true`/`false` parameter (absent: false).
    pub fn flag(&self, key: &str, errors: &mut FieldErrors) -> bool {
        match self.text(key).map(str::trim) {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                errors.insert(key.to_owned(), "must be true or false".into());
                false
            }
        }
    }

    /// A parameter naming one of `T`'s values.
    pub fn choice<T>(&self, key: &str, errors: &mut FieldErrors) -> Option<T>
    where
        T: FromStr,
        T::Err: Display,
    {
        let text = self.text(key)?;
        match text.parse::<T>() {
            Ok(value) => Some(value),
            Err(err) => {
                errors.insert(key.to_owned(), err.to_string());
                None
            }
        }
    }

    /// An RFC 3339 instant parameter; a date and time without offset (what a browser's
    /// `datetime-local` field sends) or a date alone is taken as UTC.
    pub fn time(&self, key: &str, errors: &mut FieldErrors) -> Option<DateTime<Utc>> {
        self.time_in(key, chrono_tz::UTC, errors)
    }

    /// [`QueryParams::time`] with a date and time without offset read in `zone` (a local
    /// time skipped by a clock change is an error of the field; one repeated, the first).
    pub fn time_in(&self, key: &str, zone: chrono_tz::Tz, errors: &mut FieldErrors) -> Option<DateTime<Utc>> {
        use chrono::TimeZone;
        let text = self.text(key)?.trim();
        let naive = || {
            ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
                .iter()
                .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
                .or_else(|| {
                    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                        .ok()
                        .and_then(|day| day.and_hms_opt(0, 0, 0))
                })
        };
        match DateTime::parse_from_rfc3339(text) {
            Ok(at) => Some(at.with_timezone(&Utc)),
            Err(_) if naive().is_some() => {
                let local = naive().and_then(|at| zone.from_local_datetime(&at).earliest());
                if local.is_none() {
                    errors.insert(key.to_owned(), format!("{text} does not exist in {zone}"));
                }
                local.map(|at| at.with_timezone(&Utc))
            }
            Err(_) => {
                errors.insert(
                    key.to_owned(),
                    "must be an RFC 3339 time such as 2026-01-31T12:00:00Z".into(),
                );
                None
            }
        }
    }

    /// `limit` and `offset`.
    pub fn page(&self, errors: &mut FieldErrors) -> Page {
        Page {
            limit: self
                .int("limit", 1, Page::MAX_LIMIT, errors)
                .unwrap_or(Page::DEFAULT_LIMIT),
            offset: self.int("offset", 0, i64::from(i32::MAX), errors).unwrap_or(0),
        }
    }
}

/// Ok when no query parameter was bad.
pub fn check(errors: FieldErrors) -> Result<(), ApiError> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Invalid(errors))
    }
}
