//! Alert channels and rules as commands: read from an API body or an admin form, checked
//! here, every bad field named at once.

use probactr_common::capacity;
use probactr_common::masked_url;
use probactr_common::model::{AlertEvent, ChannelKind};
use probactr_common::store::alerts::rules::RuleFields;
use serde_json::{json, Map, Value};

use crate::error::{ApiError, FieldErrors};
use crate::input::Input;

/// The longest webhook secret accepted.
const MAX_SECRET_BYTES: usize = 1024;
/// The longest channel URL accepted.
const MAX_URL_BYTES: usize = 2048;
/// The most recipients of one email channel.
const MAX_RECIPIENTS: usize = 50;
/// The longest duration a rule may name (a year).
const MAX_DURATION_SECS: i64 = 366 * 86_400;

/// What becomes of a channel's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretInput {
    /// Not given: kept as it is (an edit) or none (a create).
    Keep,
    /// `null`: removed.
    Clear,
    /// A new value, to be sealed.
    Set(String),
}

// Also the OpenAPI schema of the channel body: its docs are the API's documentation.
/// A channel as asked for (created or replaced).
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct ChannelCommand {
    /// Its namespace (default `default`); a replacement may repeat it, never change it.
    pub namespace: Option<String>,
    /// Name, unique within its namespace.
    pub name: String,
    /// `webhook`, `email` or `slack`.
    pub kind: ChannelKind,
    /// `webhook`: `{url, secret?}` (the secret is write-only: absent keeps it, null removes
    /// it); `email`: `{to: [addresses]}`; `slack`: `{url}`. The URL is a credential: it is
    /// stored sealed and answered masked (`https://host/***`); on a replacement, absent or
    /// its masked form keeps it. Once read, the secret and the URL are taken out of it.
    #[schema(value_type = Object)]
    pub config: Value,
    /// The webhook secret (given inside `config`).
    #[schema(ignore)]
    pub secret: SecretInput,
    /// The URL of a webhook or Slack channel, to be sealed; None: not given, or given in
    /// its masked form (kept on a replacement, required on a creation). Given inside
    /// `config`.
    #[schema(ignore)]
    pub url: Option<String>,
}

impl ChannelCommand {
    /// Reads and checks `{name, kind, config}`.
    pub fn read(body: Value) -> Result<ChannelCommand, ApiError> {
        let mut input = Input::new(body)?;
        let (namespace, name) = namespace_and_name(&mut input);
        let kind = input.choice::<ChannelKind>("kind");
        let kind = input.required("kind", kind);
        let config = input.object("config");
        let config = input.required("config", config);
        let mut command = None;
        if let (Some(kind), Some(mut config)) = (kind, config) {
            let (public, secret, url) = read_config(&mut config, kind);
            input.absorb(config);
            command = name.map(|name| ChannelCommand {
                namespace,
                name,
                kind,
                config: public,
                secret,
                url,
            });
        }
        input.finish()?;
        command.ok_or_else(|| ApiError::field("body", "invalid"))
    }
}

fn read_config(config: &mut Input, kind: ChannelKind) -> (Value, SecretInput, Option<String>) {
    let mut public = Map::new();
    let mut secret = SecretInput::Keep;
    let mut sealed_url = None;
    match kind {
        ChannelKind::Webhook | ChannelKind::Slack => {
            match config.text("url") {
                // Absent, or masked as answered: the URL stays as it is.
                None => {}
                Some(Some(url)) if masked_url::is_masked(&url) => {}
                Some(Some(url))
                    if (url.starts_with("http://") || url.starts_with("https://"))
                        && url.len() <= MAX_URL_BYTES =>
                {
                    sealed_url = Some(url);
                }
                Some(_) => config.error(
                    "url",
                    format!("must be an http:// or https:// URL of at most {MAX_URL_BYTES} bytes"),
                ),
            }
            if kind == ChannelKind::Webhook {
                secret = match config.text("secret") {
                    None => SecretInput::Keep,
                    Some(None) => SecretInput::Clear,
                    Some(Some(value)) if value.is_empty() || value.len() > MAX_SECRET_BYTES => {
                        config.error("secret", format!("must be 1 to {MAX_SECRET_BYTES} bytes"));
                        SecretInput::Keep
                    }
                    Some(Some(value)) => SecretInput::Set(value),
                };
            }
        }
        ChannelKind::Email => {
            let to = config.raw("to");
            match to.as_ref().map(recipients) {
                None => config.error("to", "is required"),
                Some(Err(message)) => config.error("to", message),
                Some(Ok(list)) => {
                    public.insert("to".into(), json!(list));
                }
            }
        }
    }
    (Value::Object(public), secret, sealed_url)
}

fn recipients(value: &Value) -> Result<Vec<String>, String> {
    let expected = format!("must be a list of 1 to {MAX_RECIPIENTS} mail addresses");
    let list = value.as_array().ok_or_else(|| expected.clone())?;
    if list.is_empty() || list.len() > MAX_RECIPIENTS {
        return Err(expected);
    }
    list.iter()
        .map(|item| match item.as_str() {
            Some(address) if is_mail_address(address) => Ok(address.to_owned()),
            _ => Err(format!("{item} is not a mail address")),
        })
        .collect()
}

fn is_mail_address(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !text.contains(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | ','))
}

/// The body's `namespace` (None: not given) and its required, checked `name`, as a
/// channel and a rule both begin.
fn namespace_and_name(input: &mut Input) -> (Option<String>, Option<String>) {
    let namespace = input.text("namespace").flatten();
    let name = input.text("name");
    let name = input
        .required("name", name)
        .and_then(|name| checked_name(input, "name", name));
    (namespace, name)
}

fn checked_name(input: &mut Input, field: &str, name: String) -> Option<String> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.chars().count() > 200 {
        input.error(field, "must be 1 to 200 characters");
        None
    } else {
        Some(trimmed.to_owned())
    }
}

/// An alert rule as a request gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleCommand {
    /// The namespace named in the body (a new rule's; None: `default`).
    pub namespace: Option<String>,
    /// What the rule is made of.
    pub fields: RuleFields,
}

/// Reads and checks an alert rule.
pub fn read_rule(body: Value) -> Result<RuleCommand, ApiError> {
    let mut input = Input::new(body)?;
    let (namespace, name) = namespace_and_name(&mut input);
    let events = required_list(&mut input, "events", events);
    let job_id = input.int("job_id", 1, i64::MAX).flatten();
    let channel_ids = required_list(&mut input, "channel_ids", ids);
    let threshold = input.int("threshold", 1, 10_000).flatten();
    let duration_secs = input.int("duration_secs", 1, MAX_DURATION_SECS).flatten();
    let throttle_secs = input.int("throttle_secs", 0, 7 * 86_400).flatten().unwrap_or(300);
    let enabled = input.boolean("enabled").flatten().unwrap_or(true);
    if let Some(events) = &events {
        let ahead_limit = capacity::MAX_HOURS * 3600;
        if events.contains(&AlertEvent::CapacityShortfall)
            && duration_secs.is_some_and(|secs| secs > ahead_limit)
        {
            input.error(
                "duration_secs",
                format!("looks at most {ahead_limit} s ahead for capacity_shortfall"),
            );
        }
        for needs_duration in [AlertEvent::RunTooLong, AlertEvent::NoSuccessWithin] {
            if events.contains(&needs_duration) && duration_secs.is_none() && !input.has_errors() {
                input.error("duration_secs", format!("is required for {needs_duration}"));
            }
        }
    }
    let fields = match (name, events, channel_ids) {
        (Some(name), Some(events), Some(channel_ids)) => Some(RuleFields {
            name,
            events,
            job_id,
            channel_ids,
            threshold: threshold.map(|t| t as i32),
            duration_secs: duration_secs.map(|d| d as i32),
            throttle_secs: throttle_secs as i32,
            enabled,
        }),
        _ => None,
    };
    input.finish()?;
    let fields = fields.ok_or_else(|| ApiError::field("body", "invalid"))?;
    Ok(RuleCommand { namespace, fields })
}

/// The required list `key`, read by `read`; absent, null or bad, it is a field error.
fn required_list<T>(
    input: &mut Input,
    key: &str,
    read: fn(&Value) -> Result<Vec<T>, String>,
) -> Option<Vec<T>> {
    match input.raw(key) {
        None | Some(Value::Null) => {
            input.error(key, "is required");
            None
        }
        Some(value) => read(&value).map_err(|message| input.error(key, message)).ok(),
    }
}

fn events(value: &Value) -> Result<Vec<AlertEvent>, String> {
    let known: Vec<&str> = AlertEvent::ALL.iter().map(|e| e.as_str()).collect();
    let expected = format!("must be a list of events among: {}", known.join(", "));
    let list = value
        .as_array()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| expected.clone())?;
    let mut events = Vec::new();
    for item in list {
        let event = item
            .as_str()
            .and_then(|text| text.parse::<AlertEvent>().ok())
            .ok_or_else(|| format!("{item} is not an event; {expected}"))?;
        if !events.contains(&event) {
            events.push(event);
        }
    }
    Ok(events)
}

fn ids(value: &Value) -> Result<Vec<i64>, String> {
    let expected = "must be a list of one or more channel ids";
    let list = value.as_array().filter(|l| !l.is_empty()).ok_or(expected)?;
    let mut ids = Vec::new();
    for item in list {
        let id = item.as_i64().filter(|id| *id >= 1).ok_or(expected)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Field errors of a rule whose job or channels do not exist.
pub fn missing_references(job_missing: Option<i64>, channels_missing: &[i64]) -> Result<(), ApiError> {
    let mut errors = FieldErrors::new();
    if let Some(job) = job_missing {
        errors.insert("job_id".into(), format!("no job has id {job}"));
    }
    if !channels_missing.is_empty() {
        let list: Vec<String> = channels_missing.iter().map(i64::to_string).collect();
        errors.insert(
            "channel_ids".into(),
            format!("no channel has id {}", list.join(", ")),
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Invalid(errors))
    }
}
