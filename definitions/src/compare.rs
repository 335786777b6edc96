//! How an object of the files is compared with the server's: on the fields the file
//! names, the server's defaults where it leaves one out, instants as instants.

use serde_json::{json, Map, Value};

use crate::fields::{trigger_default, TRIGGER_FIELDS};

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
    let object = trigger.as_object().cloned().unwrap_or_default();
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
pub(crate) fn canonical(trigger: &Value) -> Vec<(String, Value)> {
    TRIGGER_FIELDS
        .iter()
        .map(|field| {
            let value = trigger
                .get(*field)
                .filter(|v| !v.is_null())
                .cloned()
                .unwrap_or_else(|| match *field {
                    // A calendar is followed in `exclude` mode unless told otherwise.
                    "calendar_mode" if trigger.get("calendar").is_some_and(|c| !c.is_null()) => {
                        json!("exclude")
                    }
                    _ => trigger_default(field),
                });
            ((*field).to_owned(), normalize_time(value))
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

/// The wanted triggers the server lacks (with their index), and the server's triggers
/// no wanted one matches.
pub(crate) fn unmatched_triggers(
    wanted: &[Value],
    mut existing: Vec<Value>,
) -> (Vec<(usize, &Value)>, Vec<Value>) {
    let mut missing = Vec::new();
    for (t, trigger) in wanted.iter().enumerate() {
        let key = canonical(trigger);
        match existing.iter().position(|e| canonical(e) == key) {
            Some(found) => {
                existing.remove(found);
            }
            None => missing.push((t, trigger)),
        }
    }
    (missing, existing)
}
