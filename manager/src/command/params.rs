//! Run parameters given to a job or a workflow (run now, a trigger's `params`, a
//! workflow step's), checked against its declared `params_schema`, with their secret
//! values sealed before they are stored.

use probactr_common::params_schema::{ParamsSchema, Problems};
use probactr_common::secrets::Keyring;
use serde_json::Value;

use crate::error::{ApiError, FieldErrors};

/// How much of the parameters a run will get is given here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    /// All of them (run now): defaults are filled in.
    Whole,
    /// All of them, stored to be used later (a trigger's): checked whole, stored as
    /// given, so a later change of a default reaches its runs.
    Stored,
    /// A part that others complete (a workflow step's, under its workflow run's): the
    /// given ones are checked, none is required.
    Part,
}

/// A stored schema (`params_schema` of a job or a workflow), read.
pub fn schema_of(stored: Option<&Value>) -> Result<Option<ParamsSchema>, ApiError> {
    match stored {
        None => Ok(None),
        Some(stored) => ParamsSchema::parse(stored, "params_schema").map_err(|problems| {
            ApiError::Internal(anyhow::anyhow!("stored params_schema is not valid: {problems:?}"))
        }),
    }
}

/// `params` (a JSON object) checked against `stored` (a job's or a workflow's
/// `params_schema`; None: anything goes), secret values sealed with `keys`; else a 422
/// naming each bad parameter under `prefix` (`params`, `steps[1].params`).
pub fn checked(
    stored: Option<&Value>,
    params: &Value,
    given: Given,
    keys: Option<&Keyring>,
    prefix: &str,
) -> Result<Value, ApiError> {
    let Some(schema) = schema_of(stored)? else {
        return Ok(params.clone());
    };
    let checked = match given {
        Given::Whole => schema.check(params),
        Given::Stored => schema.check(params).and_then(|_| schema.check_part(params)),
        Given::Part => schema.check_part(params),
    }
    .map_err(|problems| invalid(problems, prefix))?;
    let secrets: Vec<&String> = schema
        .params
        .iter()
        .filter(|(name, spec)| spec.secret && checked.contains_key(*name))
        .map(|(name, _)| name)
        .collect();
    if secrets.is_empty() {
        return Ok(Value::Object(checked));
    }
    let Some(keys) = keys else {
        return Err(ApiError::field(
            format!("{prefix}.{}", secrets[0]),
            "is secret, and this manager has no PROBACTR_SECRET_KEY to seal it",
        ));
    };
    Ok(Value::Object(schema.seal_secrets(checked, keys)))
}

/// Refuses, naming each under `prefix`, the parameters `stored` (a `params_schema`)
/// requires without a default that `given` (all the parameters a run will see, checked
/// each already) leaves out.
pub fn complete(stored: Option<&Value>, given: &Value, prefix: &str) -> Result<(), ApiError> {
    let Some(schema) = schema_of(stored)? else {
        return Ok(());
    };
    let missing: FieldErrors = schema
        .params
        .iter()
        .filter(|(name, spec)| spec.required && spec.default.is_none() && given.get(name.as_str()).is_none())
        .map(|(name, _)| (format!("{prefix}.{name}"), "is required".to_owned()))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Invalid(missing))
    }
}

fn invalid(problems: Problems, prefix: &str) -> ApiError {
    let errors: FieldErrors = problems
        .into_iter()
        .map(|(field, message)| match field.strip_prefix("params") {
            Some(rest) => (format!("{prefix}{rest}"), message),
            None => (field, message),
        })
        .collect();
    ApiError::Invalid(errors)
}
