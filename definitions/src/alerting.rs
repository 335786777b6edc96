//! Alert channels and rules in definition files: exported with names for ids, applied
//! back (a channel's URL and secret never travel in a file).

use serde_json::{json, Map, Value};

use crate::apply::located_in;
use crate::compare::{put_or_skip, same};
use crate::fields::{names_by_id, pick, CHANNEL_FIELDS};
use crate::source::{section, Source};
use crate::{fail, DefinitionError, Registry};

/// The fields of a rule that a file and the API both carry as they are (its job and
/// channels go by name in a file, by id in the API).
const RULE_VALUE_FIELDS: &[&str] = &[
    "name",
    "events",
    "threshold",
    "duration_secs",
    "throttle_secs",
    "enabled",
];

/// Adds the alert channels (when the caller may see them) and rules, with names for ids.
pub(crate) async fn export_alerting(
    registry: &impl Registry,
    document: &mut Map<String, Value>,
) -> Result<(), DefinitionError> {
    let channels = registry.channels().await?.unwrap_or_default();
    let job_names = names_by_id(&registry.jobs().await?);
    let channel_names = names_by_id(&channels);
    let rules: Vec<Value> = registry
        .rules()
        .await?
        .iter()
        .map(|rule| {
            let mut definition = pick(rule, RULE_VALUE_FIELDS);
            if let Some(job) = rule["job_id"].as_i64().and_then(|id| job_names.get(&id)) {
                definition.insert("job".into(), json!(job));
            }
            let channels: Vec<Value> = rule["channel_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| {
                    id.as_i64()
                        .and_then(|id| channel_names.get(&id))
                        .map(|n| json!(n))
                })
                .collect();
            definition.insert("channels".into(), Value::Array(channels));
            Value::Object(definition)
        })
        .collect();
    if !channels.is_empty() {
        let listed = channels
            .iter()
            .map(|c| {
                let mut definition = pick(c, CHANNEL_FIELDS);
                // Even masked: a file that carries no URL keeps the channel's.
                if let Some(Value::Object(config)) = definition.get_mut("config") {
                    config.remove("url");
                }
                Value::Object(definition)
            })
            .collect();
        document.insert("channels".into(), Value::Array(listed));
    }
    if !rules.is_empty() {
        document.insert("alert_rules".into(), Value::Array(rules));
    }
    Ok(())
}

/// Creates the channels the file names that do not exist, and replaces those that differ.
pub(crate) async fn apply_channels(
    registry: &impl Registry,
    source: &Source,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let wanted = section(source, "channels");
    if wanted.is_empty() {
        return Ok(());
    }
    let Some(existing) = registry.channels().await? else {
        return fail(format!(
            "{}: channels: only admins manage alert channels",
            source.at("/channels")
        ));
    };
    for (i, channel) in wanted.iter().enumerate() {
        let found = existing.iter().find(|c| c["name"] == channel["name"]);
        let unchanged = found.is_some_and(|current| same(&as_shown(channel), current));
        let Some(id) = put_or_skip("channel", channel, found, unchanged, changes) else {
            continue;
        };
        if !dry_run {
            registry
                .put_channel(id, channel.clone())
                .await
                .map_err(|err| located_in(source, &format!("/channels/{i}"), err, "/config"))?;
        }
    }
    Ok(())
}

/// A channel of a file as the server shows it: its URL, sealed there, masked (the masked
/// form's fingerprint tells whether the file names the same URL).
pub(crate) fn as_shown(channel: &Value) -> Value {
    let mut shown = channel.clone();
    if let Some(url) = shown.pointer_mut("/config/url") {
        if let Some(text) = url
            .as_str()
            .filter(|text| !probactr_common::masked_url::is_masked(text))
        {
            *url = Value::String(probactr_common::masked_url::masked(text));
        }
    }
    shown
}

/// Creates or replaces the alert rules the file names, their job and channels by name.
pub(crate) async fn apply_rules(
    registry: &impl Registry,
    source: &Source,
    dry_run: bool,
    changes: &mut Vec<String>,
) -> Result<(), DefinitionError> {
    let wanted = section(source, "alert_rules");
    if wanted.is_empty() {
        return Ok(());
    }
    let jobs = registry.jobs().await?;
    let channels = registry.channels().await?.unwrap_or_default();
    let existing = registry.rules().await?;
    for (i, rule) in wanted.iter().enumerate() {
        let at = format!("/alert_rules/{i}");
        let name = rule["name"].as_str().unwrap_or_default();
        let body = match rule_body(rule, &jobs, &channels) {
            Ok(body) => body,
            Err((field, problem)) if !dry_run => {
                return fail(format!(
                    "{}: alert_rules[{i}].{field}: {problem}",
                    source.at(&format!("{at}/{field}"))
                ))
            }
            Err(_) => {
                changes.push(format!("+ alert rule {name}"));
                continue;
            }
        };
        let found = existing.iter().find(|r| r["name"] == name);
        let unchanged = found.is_some_and(|current| same_rule(&body, current));
        let Some(id) = put_or_skip("alert rule", rule, found, unchanged, changes) else {
            continue;
        };
        if !dry_run {
            registry
                .put_rule(id, body)
                .await
                .map_err(|err| located_in(source, &at, err, ""))?;
        }
    }
    Ok(())
}

/// A rule of a file as the API takes it: its job and channels from their names.
pub(crate) fn rule_body(rule: &Value, jobs: &[Value], channels: &[Value]) -> Result<Value, (String, String)> {
    let id_of = |objects: &[Value], name: &Value| {
        objects
            .iter()
            .find(|o| o["name"] == *name)
            .and_then(|o| o["id"].as_i64())
    };
    let mut body = pick(rule, RULE_VALUE_FIELDS);
    if let Some(job) = rule.get("job").filter(|j| !j.is_null()) {
        let id = id_of(jobs, job).ok_or_else(|| ("job".to_owned(), format!("no job is named {job}")))?;
        body.insert("job_id".into(), json!(id));
    }
    let mut ids = Vec::new();
    for channel in rule["channels"].as_array().into_iter().flatten() {
        let id = id_of(channels, channel)
            .ok_or_else(|| ("channels".to_owned(), format!("no channel is named {channel}")))?;
        ids.push(id);
    }
    body.insert("channel_ids".into(), json!(ids));
    Ok(Value::Object(body))
}

/// Whether a rule's body says what the stored rule does (defaults where left out).
pub(crate) fn same_rule(body: &Value, current: &Value) -> bool {
    let sorted = |v: &Value| {
        let mut items: Vec<String> = v.as_array().into_iter().flatten().map(Value::to_string).collect();
        items.sort();
        items
    };
    let or = |v: &Value, default: Value| if v.is_null() { default } else { v.clone() };
    sorted(&body["events"]) == sorted(&current["events"])
        && sorted(&body["channel_ids"]) == sorted(&current["channel_ids"])
        && body["job_id"] == current["job_id"]
        && body["threshold"] == current["threshold"]
        && body["duration_secs"] == current["duration_secs"]
        && or(&body["throttle_secs"], json!(300)) == current["throttle_secs"]
        && or(&body["enabled"], json!(true)) == current["enabled"]
}
