//! A rate limit as given for a job or a pool: `rate: {"limit": N, "per_secs": S}`, or
//! null for none. The claim holds it (see `probactr_common::store::rates`).

use probactr_common::model::Rate;
use serde_json::Value;

/// The most starts a rate allows in its window: the claim keeps that many latest starts
/// per rate and rewrites them at each claim, so the list stays small.
pub const MAX_LIMIT: i64 = 10_000;
/// The longest window of a rate: a week.
pub const MAX_PER_SECS: i64 = 7 * 24 * 3600;

/// Reads a rate given as `value` (`rate: null` is no rate); else reports every bad part
/// as `rate`, `rate.limit` or `rate.per_secs` (to a command's checks or a body's input).
pub fn checked(value: &Value, report: &mut dyn FnMut(&str, String)) -> Option<Option<Rate>> {
    if value.is_null() {
        return Some(None);
    }
    let Some(parts) = value.as_object() else {
        report(
            "rate",
            "must be an object {\"limit\": N, \"per_secs\": S}, or null".to_owned(),
        );
        return None;
    };
    if let Some(unknown) = parts
        .keys()
        .find(|key| !matches!(key.as_str(), "limit" | "per_secs"))
    {
        report(
            &format!("rate.{unknown}"),
            "unknown field (a rate has limit and per_secs)".to_owned(),
        );
    }
    let limit = bounded(parts.get("limit"), "rate.limit", MAX_LIMIT, report);
    let per_secs = bounded(parts.get("per_secs"), "rate.per_secs", MAX_PER_SECS, report);
    let (limit, per_secs) = (limit?, per_secs?);
    Some(Some(Rate { limit, per_secs }))
}

/// A whole number from 1 to `max`, required.
fn bounded(
    value: Option<&Value>,
    field: &str,
    max: i64,
    report: &mut dyn FnMut(&str, String),
) -> Option<i32> {
    match value.and_then(Value::as_i64) {
        Some(number) if (1..=max).contains(&number) => i32::try_from(number).ok(),
        _ => {
            report(field, format!("must be a whole number from 1 to {max}"));
            None
        }
    }
}
