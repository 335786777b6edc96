//! A job's retry policy as given (the `retry` object of a job's body and form): how many
//! attempts, the delay before each (`fixed` or `exponential` from `initial_secs`, at most
//! `max_secs`, with `full` jitter or `none`) and which failures are retried (`retry_on`).
//!
//! `backoff_secs` is the older name of `initial_secs` and keeps being read. A new job's
//! jitter is `full` unless given; an edit keeps the job's own.

use probactr_common::model::{RetryBackoff, RetryJitter, RetryOn};
use probactr_common::store::jobs::NewJob;
use serde_json::Value;

use super::Checks;
use crate::input::{Given, Input};

/// The most attempts a retry policy may allow.
pub const MAX_ATTEMPTS: i64 = 100;
/// The longest retry delay, in seconds (a week).
pub const MAX_BACKOFF_SECS: i64 = 7 * 24 * 3600;
/// The most exit codes or HTTP statuses one `retry_on` lists.
pub const MAX_RETRY_ON_VALUES: usize = 100;

// Also the OpenAPI schema of a job body's `retry`: its docs are the API's documentation.
/// A job's retry policy as given; every field optional.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct RetryDraft {
    /// Attempts in all, the first included (1–100). Default 1: no retry.
    #[schema(value_type = Option<i32>)]
    pub max_attempts: Given<i64>,
    /// Seconds before the second attempt (0–604800). Default 10.
    #[schema(value_type = Option<i32>)]
    pub initial_secs: Given<i64>,
    // The name `initial_secs` was given under, for its problems (empty: `initial_secs`);
    // the schema documents that older name here, as the API reads it.
    /// The older name of `initial_secs`.
    #[schema(rename = "backoff_secs", value_type = Option<i32>)]
    pub initial_name: &'static str,
    /// `fixed` (the same delay each time) or `exponential` (default: doubled for each
    /// later attempt).
    #[schema(value_type = Option<RetryBackoff>)]
    pub backoff: Given<RetryBackoff>,
    /// The longest delay, in seconds (at least `initial_secs`; null: no bound).
    #[schema(value_type = Option<i32>)]
    pub max_secs: Given<i64>,
    /// `full` (default for a new job: a random delay up to the computed one, so that
    /// jobs failing together do not retry together) or `none`.
    #[schema(value_type = Option<RetryJitter>)]
    pub jitter: Given<RetryJitter>,
    /// Which failures are retried: `{"exit_codes": [75], "http_statuses": [503],
    /// "timeouts": true}` (exit codes 0–255, statuses 100–599); a failure matching any is
    /// retried. Null or empty: every failure. A run abandoned by its executor always is.
    #[schema(value_type = Option<RetryOn>)]
    pub retry_on: Option<Value>,
}

impl RetryDraft {
    /// Reads the fields of a `retry` object; problems are recorded in `retry`.
    pub fn read(retry: &mut Input) -> RetryDraft {
        let initial_secs = retry.int("initial_secs", i64::MIN, i64::MAX);
        let backoff_secs = retry.int("backoff_secs", i64::MIN, i64::MAX);
        // A job's view shows both names; they may come back together, alike.
        if initial_secs.is_some() && backoff_secs.is_some() && initial_secs != backoff_secs {
            retry.error(
                "initial_secs",
                "differs from backoff_secs, its older name: give one",
            );
        }
        RetryDraft {
            max_attempts: retry.int("max_attempts", i64::MIN, i64::MAX),
            initial_name: if backoff_secs.is_some() {
                "retry.backoff_secs"
            } else {
                ""
            },
            initial_secs: initial_secs.or(backoff_secs),
            backoff: retry.choice("backoff"),
            max_secs: retry.int("max_secs", i64::MIN, i64::MAX),
            jitter: retry.choice("jitter"),
            retry_on: retry.raw("retry_on"),
        }
    }

    /// Lays the policy over `job` (the defaults of a new job when `creating`, else the
    /// job's own), recording every bad field.
    pub fn apply(self, job: &mut NewJob, creating: bool, checks: &mut Checks) {
        let attempts = checks.not_null("retry.max_attempts", self.max_attempts);
        if let Some(attempts) = attempts.and_then(|a| checks.within("retry.max_attempts", a, 1, MAX_ATTEMPTS))
        {
            job.retry_max_attempts = attempts as i32;
        }
        let initial_name = match self.initial_name {
            "" => "retry.initial_secs",
            given => given,
        };
        let initial = checks.not_null(initial_name, self.initial_secs);
        if let Some(initial) = initial.and_then(|i| checks.within(initial_name, i, 0, MAX_BACKOFF_SECS)) {
            job.retry_backoff_secs = initial as i32;
        }
        if let Some(backoff) = checks.not_null("retry.backoff", self.backoff) {
            job.retry_backoff = backoff;
        }
        if let Some(max) = checks.within_given("retry.max_secs", self.max_secs, 1, MAX_BACKOFF_SECS) {
            job.retry_max_secs = max.map(|m| m as i32);
        }
        if let Some(max) = job.retry_max_secs {
            if max < job.retry_backoff_secs {
                checks.error(
                    "retry.max_secs",
                    format!("must be at least retry.initial_secs ({})", job.retry_backoff_secs),
                );
            }
        }
        match checks.not_null("retry.jitter", self.jitter) {
            Some(jitter) => job.retry_jitter = jitter,
            // Jobs made before jitter existed keep none; new ones spread their retries.
            None if creating => job.retry_jitter = RetryJitter::Full,
            None => {}
        }
        if let Some(retry_on) = self.retry_on {
            match checked_retry_on(retry_on) {
                Ok(on) => job.retry_on = on.filter(|on| !on.is_empty()),
                Err((field, problem)) => checks.error(&field, problem),
            }
        }
    }
}

/// `retry_on` as given: `{exit_codes: [...], http_statuses: [...], timeouts: bool}` or
/// null; else the first bad field and its problem.
fn checked_retry_on(given: Value) -> Result<Option<RetryOn>, (String, String)> {
    let field = |key: &str| format!("retry.retry_on.{key}");
    let mut fields = match given {
        Value::Null => return Ok(None),
        Value::Object(fields) => fields,
        _ => {
            return Err((
                "retry.retry_on".to_owned(),
                "must be an object or null".to_owned(),
            ))
        }
    };
    let exit_codes = codes(fields.remove("exit_codes"), 0, 255).map_err(|p| (field("exit_codes"), p))?;
    let http_statuses =
        codes(fields.remove("http_statuses"), 100, 599).map_err(|p| (field("http_statuses"), p))?;
    let timeouts = match fields.remove("timeouts") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(timeouts)) => timeouts,
        Some(_) => return Err((field("timeouts"), "must be true or false".to_owned())),
    };
    if let Some(unknown) = fields.keys().next() {
        return Err((field(unknown), "unknown field".to_owned()));
    }
    Ok(Some(RetryOn {
        exit_codes,
        http_statuses,
        timeouts,
    }))
}

/// A list of whole numbers in `min..=max`, sorted and without repeats (absent or null:
/// none).
fn codes(given: Option<Value>, min: i64, max: i64) -> Result<Vec<i32>, String> {
    let problem = || format!("must be a list of whole numbers from {min} to {max}");
    let items = match given {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(problem()),
    };
    if items.len() > MAX_RETRY_ON_VALUES {
        return Err(format!("must list at most {MAX_RETRY_ON_VALUES} values"));
    }
    let mut codes = items
        .iter()
        .map(|item| {
            item.as_i64()
                .filter(|n| (min..=max).contains(n))
                .map(|n| n as i32)
        })
        .collect::<Option<Vec<i32>>>()
        .ok_or_else(problem)?;
    codes.sort_unstable();
    codes.dedup();
    Ok(codes)
}
