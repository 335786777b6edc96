//! What an alert says: the JSON payload stored with each notification (and POSTed, with
//! its delivery id, to webhooks), and the texts made from it for mail and chat.

use probactr_common::model::AlertEvent;
use probactr_common::store::alerts::outbox::{ClosedWindow, OutboxEvent};
use probactr_common::store::alerts::rules::Rule;
use serde_json::{json, Value};

/// The payload of the first message of a window: one event.
pub fn for_event(event: &OutboxEvent, rule: &Rule, public_url: &str) -> Value {
    let mut payload = json!({
        "event": event.event.as_str(),
        "follow_up": false,
        "rule": {"id": rule.id, "name": rule.fields.name},
        "job": event.job_id.map(|id| json!({"id": id, "name": event.job_name})),
        "trigger": event.trigger_id.map(|id| json!({"id": id})),
        "run": event.run_id.map(|id| run_of(id, &event.detail)),
        "executor": event.executor_id.map(|id| json!({"id": id, "host": event.detail.get("host")})),
        "error": error_of(&event.detail),
        "counts": {"events": 1, "suppressed": 0},
        "occurred_at": event.occurred_at,
        "detail": event.detail,
        "links": links(public_url, event.job_id, event.run_id),
    });
    let summary = summarize(&payload);
    payload["summary"] = Value::String(summary);
    payload
}

/// The payload of a follow-up: the events folded in a window, described by the last.
pub fn for_follow_up(window: &ClosedWindow, rule: &Rule, public_url: &str) -> Value {
    let last = window.last_event.clone().unwrap_or(Value::Null);
    let mut payload = json!({
        "event": window.event.as_str(),
        "follow_up": true,
        "rule": {"id": rule.id, "name": rule.fields.name},
        "job": last.get("job").cloned().unwrap_or(Value::Null),
        "trigger": last.get("trigger").cloned().unwrap_or(Value::Null),
        "run": last.get("run").cloned().unwrap_or(Value::Null),
        "executor": last.get("executor").cloned().unwrap_or(Value::Null),
        "error": last.get("error").cloned().unwrap_or(Value::Null),
        "counts": {"events": window.suppressed, "suppressed": window.suppressed},
        "since": window.opened_at,
        "occurred_at": last.get("occurred_at").cloned().unwrap_or(Value::Null),
        "detail": last.get("detail").cloned().unwrap_or(Value::Null),
        "links": links(
            public_url,
            window.job_id,
            last.pointer("/run/id").and_then(Value::as_i64),
        ),
    });
    let summary = summarize(&payload);
    payload["summary"] = Value::String(summary);
    payload
}

/// The payload of a channel's test message.
pub fn for_test(channel: &str, public_url: &str) -> Value {
    json!({
        "event": "test",
        "follow_up": false,
        "summary": format!("Test message from probactr to channel {channel}"),
        "counts": {"events": 1, "suppressed": 0},
        "links": {"notifications": format!("{public_url}/notifications")},
    })
}

fn run_of(id: i64, detail: &Value) -> Value {
    let mut run = json!({"id": id});
    for field in [
        "state",
        "attempt",
        "max_attempts",
        "scheduled_at",
        "finished_at",
        "started_at",
        "exit_code",
    ] {
        if let Some(value) = detail.get(field).filter(|v| !v.is_null()) {
            run[field] = value.clone();
        }
    }
    run
}

fn error_of(detail: &Value) -> Value {
    ["error", "reason"]
        .iter()
        .find_map(|field| detail.get(*field).filter(|v| v.is_string()).cloned())
        .unwrap_or(Value::Null)
}

fn links(public_url: &str, job_id: Option<i64>, run_id: Option<i64>) -> Value {
    let mut links = json!({"notifications": format!("{public_url}/notifications")});
    if let Some(job) = job_id {
        links["job"] = Value::String(format!("{public_url}/jobs/{job}"));
    }
    if let Some(run) = run_id {
        links["run"] = Value::String(format!("{public_url}/runs/{run}"));
    }
    links
}

/// One line saying what happened, for subjects, chat messages and the delivery log.
pub fn summarize(payload: &Value) -> String {
    let text = |pointer: &str| payload.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let number = |pointer: &str| payload.pointer(pointer).and_then(Value::as_i64);
    let job = match (text("/job/name"), number("/job/id")) {
        ("", Some(id)) => format!("job #{id}"),
        ("", None) => String::new(),
        (name, _) => format!("job {name}"),
    };
    let run = number("/run/id")
        .map(|id| format!("run #{id}"))
        .unwrap_or_default();
    let error = Some(text("/error"))
        .filter(|e| !e.is_empty())
        .map(|e| format!(": {}", first_line(e)));
    let what = match text("/event").parse::<AlertEvent>() {
        Ok(AlertEvent::RunFailed) => format!(
            "{job} failed ({run}, no attempt left){}",
            error.unwrap_or_default()
        ),
        Ok(AlertEvent::RunTimedOut) => format!("{job} timed out ({run})"),
        Ok(AlertEvent::RunAbandoned) => format!("{job} lost its executor ({run})"),
        Ok(AlertEvent::FireMissed) => {
            let instants = number("/detail/instants").unwrap_or(1);
            format!("{job} missed {instants} scheduled instant(s)")
        }
        Ok(AlertEvent::ConsecutiveFailures) => {
            let count = number("/detail/failures").unwrap_or(0);
            format!("{job} failed {count} times in a row")
        }
        Ok(AlertEvent::RunTooLong) => {
            let secs = number("/detail/running_secs").unwrap_or(0);
            format!("{job} has been running for {secs} s ({run})")
        }
        Ok(AlertEvent::NoSuccessWithin) => {
            let secs = payload
                .pointer("/detail/duration_secs")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            format!("{job} has not succeeded for {secs} s")
        }
        Ok(AlertEvent::ExecutorLost) => {
            let host = text("/executor/host");
            format!("executor on {host} was lost (stopped heartbeating)")
        }
        Ok(AlertEvent::NoExecutor) => "triggers are due and no executor is alive".to_owned(),
        Ok(AlertEvent::Recovered) => format!("{job} recovered: it succeeded again"),
        Ok(AlertEvent::CapacityShortfall) => {
            let demand = number("/detail/demand").unwrap_or(0);
            let capacity = number("/detail/capacity").unwrap_or(0);
            let start = text("/detail/start");
            format!("capacity shortfall ahead: {demand} runs at once from {start}, executors hold {capacity}")
        }
        Err(_) => return text("/summary").to_owned(),
    };
    if payload.get("follow_up").and_then(Value::as_bool) == Some(true) {
        let count = number("/counts/suppressed").unwrap_or(0);
        format!("{count} more: {what} (folded since the last message)")
    } else {
        what
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    line.chars().take(200).collect()
}

/// The mail subject.
pub fn subject(payload: &Value) -> String {
    format!(
        "[probactr] {}",
        payload.get("summary").and_then(Value::as_str).unwrap_or("alert")
    )
}

/// The plain-text mail body.
pub fn plain_text(payload: &Value) -> String {
    let mut body = String::new();
    body.push_str(payload.get("summary").and_then(Value::as_str).unwrap_or(""));
    body.push_str("\n\n");
    for (label, pointer) in FIELDS {
        if let Some(value) = shown(payload, pointer) {
            body.push_str(&format!("{label}: {value}\n"));
        }
    }
    body
}

/// The HTML mail body (every value escaped).
pub fn html(payload: &Value) -> String {
    let mut rows = String::new();
    for (label, pointer) in FIELDS {
        if let Some(value) = shown(payload, pointer) {
            let cell = if value.starts_with("http://") || value.starts_with("https://") {
                format!("<a href=\"{0}\">{0}</a>", escape(&value))
            } else {
                escape(&value)
            };
            rows.push_str(&format!(
                "<tr><th align=\"left\">{label}</th><td>{cell}</td></tr>"
            ));
        }
    }
    format!(
        "<html><body><p><strong>{}</strong></p><table>{rows}</table></body></html>",
        escape(payload.get("summary").and_then(Value::as_str).unwrap_or(""))
    )
}

/// The Slack/Mattermost message body.
pub fn slack(payload: &Value) -> Value {
    let summary = payload.get("summary").and_then(Value::as_str).unwrap_or("");
    let link = payload
        .pointer("/links/run")
        .or_else(|| payload.pointer("/links/job"))
        .and_then(Value::as_str);
    let text = match link {
        Some(link) => format!(":rotating_light: {summary} <{link}|open>"),
        None => format!(":rotating_light: {summary}"),
    };
    json!({ "text": text })
}

const FIELDS: &[(&str, &str)] = &[
    ("Event", "/event"),
    ("Job", "/job/name"),
    ("Run", "/run/id"),
    ("State", "/run/state"),
    ("Attempt", "/run/attempt"),
    ("Error", "/error"),
    ("Executor", "/executor/host"),
    ("Events in this message", "/counts/events"),
    ("Occurred at", "/occurred_at"),
    ("Rule", "/rule/name"),
    ("Run page", "/links/run"),
    ("Job page", "/links/job"),
];

fn shown(payload: &Value, pointer: &str) -> Option<String> {
    match payload.pointer(pointer)? {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
