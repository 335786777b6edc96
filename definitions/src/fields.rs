//! The fields each kind of object carries in a definition file, and how they are picked
//! out of the server's objects (nulls left out, ids named).

use std::collections::HashMap;

use probactr_common::model::TriggerTiming;
use serde_json::{json, Map, Value};

/// The fields of an alert channel a definition carries (its secret and its URL never:
/// a webhook or Slack URL is itself a credential; both are set in the admin or the API,
/// and kept when a file leaves them out).
pub(crate) const CHANNEL_FIELDS: &[&str] = &["name", "kind", "config"];
/// The fields of an alert rule a definition carries; `job` and `channels` by name.
pub(crate) const RULE_FIELDS: &[&str] = &[
    "name",
    "events",
    "job",
    "channels",
    "threshold",
    "duration_secs",
    "throttle_secs",
    "enabled",
];
/// The sections of a definition file.
pub(crate) const SECTIONS: &[&str] = &["namespace", "jobs", "channels", "alert_rules", "workflows"];
/// A job's child lists, carried by job name (ids differ from cluster to cluster).
pub(crate) const CHILD_FIELDS: &[&str] = &["on_success", "on_failure", "on_finish"];

/// The fields of a job a definition carries (besides `triggers`).
pub(crate) const JOB_FIELDS: &[&str] = &[
    "name",
    "kind",
    "description",
    "spec",
    "parallel",
    "max_concurrency",
    "overlap",
    "timeout_secs",
    "retry",
    "paused",
    "on_executor_lost",
    "max_takeovers",
    "stop_grace_secs",
    "selector",
    "priority",
    "route",
    "shards",
    "mode",
    "replicas",
    "params_schema",
    "pool",
    "pool_slots",
    "rate",
];
/// The fields of a trigger a definition carries besides its timing's
/// ([`TriggerTiming::FIELDS`]).
const TRIGGER_OWN_FIELDS: &[&str] = &[
    "paused",
    "max_concurrency",
    "params",
    "calendar",
    "calendar_mode",
    "jitter_secs",
    "max_fires",
    "after",
];

/// The fields of a trigger a definition carries: its timing's, then its own.
pub(crate) fn trigger_fields() -> impl Iterator<Item = &'static str> {
    TriggerTiming::FIELDS
        .into_iter()
        .chain(TRIGGER_OWN_FIELDS.iter().copied())
}

/// Whether a definition's trigger carries `key` (see [`trigger_fields`]).
pub(crate) fn is_trigger_field(key: &str) -> bool {
    trigger_fields().any(|field| field == key)
}

/// The fields of a webhook trigger a definition carries besides [`trigger_fields`]
/// (`signature` with its secret: the server never shows it back).
pub(crate) const WEBHOOK_FIELDS: &[&str] = &["signature", "params_from", "dedup_header", "rate_per_minute"];

/// A trigger's value of `field` when a definition leaves it out (the server's default).
pub(crate) fn trigger_default(field: &str) -> Value {
    match field {
        "timezone" => json!("UTC"),
        "misfire" => json!("fire_once"),
        "misfire_threshold_secs" => json!(60),
        "paused" => json!(false),
        "params" => json!({}),
        _ => Value::Null,
    }
}

/// A trigger's definition: its carried fields, empty parameters left out.
pub(crate) fn trigger_definition(trigger: &Value) -> Value {
    let mut definition = pick(trigger, &trigger_fields().collect::<Vec<_>>());
    if definition
        .get("params")
        .is_some_and(|p| p.as_object().is_some_and(Map::is_empty))
    {
        definition.remove("params");
    }
    Value::Object(definition)
}

/// Puts the definitions of `triggers` (a job's or a workflow's, as the server lists them)
/// under `triggers` of `definition`, which names none when there are none.
pub(crate) fn put_triggers(definition: &mut Map<String, Value>, triggers: &[Value]) {
    let triggers: Vec<Value> = triggers.iter().map(trigger_definition).collect();
    if !triggers.is_empty() {
        definition.insert("triggers".into(), Value::Array(triggers));
    }
}

/// A job's child lists by job name (children since deleted left out).
pub(crate) fn child_names(job: &Value, names: &HashMap<i64, String>) -> Vec<(&'static str, Vec<String>)> {
    CHILD_FIELDS
        .iter()
        .map(|field| {
            let listed = job[*field].as_array().cloned().unwrap_or_default();
            let named = listed
                .iter()
                .filter_map(|id| id.as_i64().and_then(|id| names.get(&id)).cloned())
                .collect();
            (*field, named)
        })
        .collect()
}

pub(crate) fn names_by_id(objects: &[Value]) -> HashMap<i64, String> {
    objects
        .iter()
        .filter_map(|o| Some((o["id"].as_i64()?, o["name"].as_str()?.to_owned())))
        .collect()
}

/// The listed fields of an object that are set (nulls left out, to keep files short).
pub(crate) fn pick(object: &Value, fields: &[&str]) -> Map<String, Value> {
    fields
        .iter()
        .filter_map(|field| {
            let value = object.get(*field)?;
            (!value.is_null()).then(|| ((*field).to_owned(), value.clone()))
        })
        .collect()
}
