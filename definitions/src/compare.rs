//! How an object of the files is compared with the server's: on the fields the file
//! names, the server's defaults where it leaves one out, instants as instants.

use serde_json::{json, Map, Value};

use crate::fields::{trigger_default, trigger_fields, WEBHOOK_FIELDS};

/// Whether an object of the files must be put, and under which id (None: created):
/// None when the server already has it as written. Records the change.
pub(crate) fn put_or_skip(
    what: &str,
    wanted: &Value,
    found: Option<&Value>,
    unchanged: bool,
    changes: &mut Vec<String>,
) -> Option<Option<i64>> {
    let name = wanted["name"].as_str().unwrap_or_default();
    match found {
        Some(_) if unchanged => None,
        Some(current) => {
            changes.push(format!("~ {what} {name}"));
            Some(current["id"].as_i64())
        }
        None => {
            changes.push(format!("+ {what} {name}"));
            Some(None)
        }
    }
}

/// The fields the definition sets to something else than the server has.
pub(crate) fn differences(wanted: &Map<String, Value>, existing: &Value) -> Vec<String> {
    wanted
        .iter()
        .filter(|(field, value)| !same(value, existing.get(field.as_str()).unwrap_or(&Value::Null)))
        .map(|(field, value)| {
            format!(
                "{field} {} → {}",
                short(existing.get(field.as_str())),
                short(Some(value))
            )
        })
        .collect()
}

/// Whether `wanted` says nothing `existing` does not: objects compare on the keys
/// `wanted` names (the server may fill in defaults), everything else exactly.
pub(crate) fn same(wanted: &Value, existing: &Value) -> bool {
    match (wanted, existing) {
        (Value::Object(w), Value::Object(e)) => {
            w.iter().all(|(k, v)| same(v, e.get(k).unwrap_or(&Value::Null)))
        }
        (Value::Number(w), Value::Number(e)) => w.as_f64() == e.as_f64(),
        _ => wanted == existing,
    }
}

pub(crate) fn short(value: Option<&Value>) -> String {
    let text = value.map(Value::to_string).unwrap_or_else(|| "-".into());
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

pub(crate) fn describe(trigger: &Value) -> String {
    let mut object = trigger.as_object().cloned().unwrap_or_default();
    // A webhook's signing secret is never printed.
    if let Some(secret) = object
        .get_mut("signature")
        .and_then(|signature| signature.get_mut("secret"))
    {
        *secret = json!("***");
    }
    object
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A trigger as compared: every carried field, the server's default where left out.
/// A trigger that fired its `max_fires` carries the `end_at` the server set when it
/// ended, not one of its definition: that `end_at` is left out.
pub(crate) fn canonical(trigger: &Value) -> Vec<(String, Value)> {
    let fired_out = matches!(
        (trigger.get("fires").and_then(Value::as_i64), trigger.get("max_fires").and_then(Value::as_i64)),
        (Some(fires), Some(max)) if fires >= max
    );
    trigger_fields()
        .map(|field| {
            let value = trigger
                .get(field)
                .filter(|v| !v.is_null())
                .filter(|_| !(fired_out && field == "end_at"))
                .cloned()
                .unwrap_or_else(|| match field {
                    // A calendar is followed in `exclude` mode unless told otherwise.
                    "calendar_mode" if trigger.get("calendar").is_some_and(|c| !c.is_null()) => {
                        json!("exclude")
                    }
                    _ => trigger_default(field),
                });
            (field.to_owned(), normalize_time(value))
        })
        .collect()
}

/// Instants compared as instants, whatever their notation.
pub(crate) fn normalize_time(value: Value) -> Value {
    match value
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    {
        Some(at) => json!(at.with_timezone(&chrono::Utc).timestamp_millis()),
        None => value,
    }
}

/// Whether the server's webhook settings (`webhook` of its trigger) are those a wanted
/// trigger gives: only the fields it gives are compared, and of `signature` all but the
/// secret, which the server never shows back (a changed secret alone is set with the
/// API, not detected here).
pub(crate) fn same_webhook(wanted: &Value, existing: &Value) -> bool {
    let hook = &existing["webhook"];
    WEBHOOK_FIELDS.iter().all(|field| match wanted.get(*field) {
        None => true,
        Some(given) => match *field {
            "signature" => same_signature(given, hook),
            "params_from" => same(given, &hook["params_from"]) && same(&hook["params_from"], given),
            "rate_per_minute" if given.is_null() => hook["rate_per_minute"] == json!(60),
            "dedup_header" => lowercase(given) == lowercase(&hook["dedup_header"]),
            _ => same(given, &hook[*field]),
        },
    })
}

/// Whether a wanted `signature` (null: unsigned) is the server's, secret aside (header
/// names compared without case, the server's defaults where it leaves one out).
fn same_signature(given: &Value, hook: &Value) -> bool {
    if given.is_null() {
        return hook["signature_header"].is_null();
    }
    lowercase(&given["header"]) == lowercase(&hook["signature_header"])
        && given["prefix"].as_str().unwrap_or_default()
            == hook["signature_prefix"].as_str().unwrap_or_default()
        && given["algorithm"].as_str().unwrap_or("hmac-sha256")
            == hook["signature_algorithm"].as_str().unwrap_or("hmac-sha256")
}

/// A header name as compared (HTTP header names are case-insensitive).
fn lowercase(header: &Value) -> Option<String> {
    header.as_str().map(str::to_ascii_lowercase)
}

/// Whether the server's trigger `existing` is the wanted one as written.
fn same_trigger(wanted: &Value, key: &[(String, Value)], existing: &Value) -> bool {
    canonical(existing) == key && (existing["kind"] != "webhook" || same_webhook(wanted, existing))
}

/// The wanted webhook triggers among `missing` each paired with one of the server's
/// webhook triggers among `stale`, in order: a changed webhook is edited in place, so
/// that its URL (its token) stays. Returns the pairs (wanted index, wanted, server's)
/// and leaves the others in `missing` and `stale`.
pub(crate) fn paired_webhooks<'a>(
    missing: &mut Vec<(usize, &'a Value)>,
    stale: &mut Vec<Value>,
) -> Vec<(usize, &'a Value, Value)> {
    let mut pairs = Vec::new();
    let mut left = Vec::new();
    for (t, wanted) in missing.drain(..) {
        let hook = (wanted["kind"] == "webhook")
            .then(|| stale.iter().position(|e| e["kind"] == "webhook"))
            .flatten();
        match hook {
            Some(found) => pairs.push((t, wanted, stale.remove(found))),
            None => left.push((t, wanted)),
        }
    }
    *missing = left;
    pairs
}

/// The wanted triggers the server lacks (with their index), and the server's triggers
/// no wanted one matches.
pub(crate) fn unmatched_triggers(
    wanted: &[Value],
    mut existing: Vec<Value>,
) -> (Vec<(usize, &Value)>, Vec<Value>) {
    let mut missing = Vec::new();
    for (t, trigger) in wanted.iter().enumerate() {
        let key = canonical(trigger);
        match existing.iter().position(|e| same_trigger(trigger, &key, e)) {
            Some(found) => {
                existing.remove(found);
            }
            None => missing.push((t, trigger)),
        }
    }
    (missing, existing)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::canonical;

    #[test]
    fn a_trigger_that_fired_out_compares_without_the_end_it_was_given() {
        let wanted = json!({"kind": "interval", "interval_secs": 60, "max_fires": 3});
        let ended = json!({"kind": "interval", "interval_secs": 60, "max_fires": 3, "fires": 3,
                           "end_at": "2026-11-26T12:00:00Z"});
        assert_eq!(canonical(&wanted), canonical(&ended));
        let bounded = json!({"kind": "interval", "interval_secs": 60, "max_fires": 3, "fires": 1,
                             "end_at": "2026-11-26T12:00:00Z"});
        assert_ne!(
            canonical(&wanted),
            canonical(&bounded),
            "an end the definition gave counts"
        );
    }
}
