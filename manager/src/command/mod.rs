//! Commands: what a user asks to create or change, typed, whether it came as an API body
//! or an admin form, and validated in one place.
//!
//! A command is read leniently: each field is taken as given (`None` absent, `Some(None)`
//! null) and a value of the wrong type, an unknown field or a malformed form line is
//! recorded against its field instead of stopping the reading. Validation then lays the
//! command over the stored object (an edit) or the defaults (a create), applies every
//! rule, and answers with the definition the store writes or with every bad field at
//! once, the reading's problems included.

pub mod alert;
pub mod job;
pub mod params;
pub mod rate;
pub mod retry;
pub mod shapes;
pub mod trigger;
pub mod webhook;
pub mod workflow;

pub use job::{JobDraft, JobPatch};
pub use trigger::{TriggerDraft, TriggerPatch};

use crate::error::{ApiError, FieldErrors};
use crate::input::{Given, Input};

/// The checks of a command's fields, collecting a message per bad field (the first one
/// met for each).
#[derive(Debug, Default)]
pub struct Checks {
    errors: FieldErrors,
}

impl Checks {
    /// Checks that start from the problems met while reading the command.
    pub fn after_reading(errors: &FieldErrors) -> Checks {
        Checks {
            errors: errors.clone(),
        }
    }

    /// Records a problem with `field`, unless it already has one.
    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        self.errors
            .entry(field.to_owned())
            .or_insert_with(|| message.into());
    }

    /// A value that may be absent but not null.
    pub fn not_null<T>(&mut self, field: &str, given: Given<T>) -> Option<T> {
        match given {
            Some(None) => {
                self.error(field, "must not be null");
                None
            }
            Some(Some(value)) => Some(value),
            None => None,
        }
    }

    /// A value that must be given.
    pub fn required<T>(&mut self, field: &str, given: Given<T>) -> Option<T> {
        match given {
            Some(Some(value)) => Some(value),
            _ => {
                self.error(field, "is required");
                None
            }
        }
    }

    /// A whole number in `min..=max` (bounds in words: [`limit_words`]).
    pub fn within(&mut self, field: &str, value: i64, min: i64, max: i64) -> Option<i64> {
        let bound = |limit: i64| limit_words(field, limit);
        if value < min {
            self.error(field, format!("must be at least {}", bound(min)));
            None
        } else if value > max {
            self.error(field, format!("must be at most {}", bound(max)));
            None
        } else {
            Some(value)
        }
    }

    /// A given number checked against `min..=max`, null kept as null.
    pub fn within_given(&mut self, field: &str, given: Given<i64>, min: i64, max: i64) -> Given<i64> {
        match given? {
            None => Some(None),
            Some(value) => self.within(field, value, min, max).map(Some),
        }
    }

    /// Whether a problem was found.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// `value` when nothing was found wrong; else a 422 naming every bad field.
    pub fn verdict<T>(self, value: Option<T>) -> Result<T, ApiError> {
        match value {
            Some(value) if self.errors.is_empty() => Ok(value),
            _ if self.errors.is_empty() => Err(ApiError::field("body", "invalid")),
            _ => Err(ApiError::Invalid(self.errors)),
        }
    }
}

/// Reads a request body leniently: an [`Input`] over it, or (for a body that is not an
/// object) an empty one with that problem recorded.
fn lenient_input(body: serde_json::Value) -> (Input, FieldErrors) {
    match Input::new(body) {
        Ok(input) => (input, FieldErrors::new()),
        Err(_) => {
            let mut errors = FieldErrors::new();
            errors.insert("body".into(), "must be a JSON object".into());
            (Input::default(), errors)
        }
    }
}

/// A bound of `field` as its errors state it: a duration for seconds (`*_secs`: "24 days"),
/// else the number.
pub fn limit_words(field: &str, limit: i64) -> String {
    if field.ends_with("_secs") {
        duration_words(limit)
    } else {
        limit.to_string()
    }
}

/// Seconds in words, the largest unit that divides them ("24 days", "1 hour", "90 s");
/// beyond a year, roughly ("about 68 years").
pub fn duration_words(secs: i64) -> String {
    const UNITS: [(i64, &str, &str); 4] = [
        (86_400, "day", "days"),
        (3600, "hour", "hours"),
        (60, "minute", "minutes"),
        (1, "second", "seconds"),
    ];
    const YEAR: i64 = 365 * 86_400;
    if secs > YEAR {
        return format!("about {} years", secs / YEAR);
    }
    let (size, one, many) = UNITS
        .into_iter()
        .find(|(size, ..)| secs != 0 && secs % size == 0)
        .unwrap_or((1, "second", "seconds"));
    let count = secs / size;
    format!("{count} {}", if count == 1 { one } else { many })
}

/// The whole-number range every stored `int4` column takes.
const INT4_MAX: i64 = i32::MAX as i64;

#[cfg(test)]
mod tests {
    use super::{duration_words, Checks, INT4_MAX};

    #[test]
    fn limits_of_seconds_read_as_durations() {
        assert_eq!(duration_words(24 * 24 * 3600), "24 days");
        assert_eq!(duration_words(3600), "1 hour");
        assert_eq!(duration_words(90), "90 seconds");
        assert_eq!(duration_words(1), "1 second");
        assert_eq!(duration_words(INT4_MAX), "about 68 years");
        let mut checks = Checks::default();
        checks.within("timeout_secs", 9_999_999, 1, 24 * 24 * 3600);
        checks.within("shards", 0, 1, 1000);
        let Err(crate::error::ApiError::Invalid(errors)) = checks.verdict(None::<()>) else {
            panic!("both fields are out of range");
        };
        assert_eq!(errors["timeout_secs"], "must be at most 24 days");
        assert_eq!(errors["shards"], "must be at least 1");
    }
}
