//! The cluster page and the audit log page.

use axum::extract::{Path, State};
use axum::response::{Html, Redirect};
use minijinja::context;
use probactr_common::model::ProcessRole;
use probactr_common::store;
use serde::Serialize;
use serde_json::Value;

use super::{page_and_filter, render, AdminError, AdminUser, FormPost, Pager};
use crate::error::ApiError;
use crate::input::QueryParams;
use crate::service::cluster::ProcessView;
use crate::service::{self, Paged};
use crate::state::AppState;

/// `GET /executors`: executors and monitors.
pub async fn executors(State(state): State<AppState>, user: AdminUser) -> Result<Html<String>, AdminError> {
    let executors =
        recent(service::cluster::processes(&state.handles, &user.0, ProcessRole::Executor).await?);
    let monitors = recent(service::cluster::processes(&state.handles, &user.0, ProcessRole::Monitor).await?);
    render(
        &state,
        "executors.html",
        context! { executors, monitors, ..user.layout("executors") },
    )
}

/// `POST /executors/{id}/{action}`: cordon, uncordon or drain an executor, then back to
/// the cluster page.
pub async fn route_executor(
    State(state): State<AppState>,
    FormPost(user, Path((id, action)), _): FormPost<Path<(String, String)>>,
) -> Result<Redirect, AdminError> {
    let change = service::cluster::routing_named(&action)
        .ok_or_else(|| ApiError::not_found("executor action", &action))?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ApiError::not_found("executor", &id))?;
    service::cluster::route_executor(&state.handles, &user.0, id, change).await?;
    Ok(Redirect::to("/executors"))
}

/// How long the page still shows a process that stopped or died (retention purges it
/// later; the API lists it until then).
const GONE_SHOWN_FOR: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// The processes worth a look: the live ones, and those gone within [`GONE_SHOWN_FOR`].
fn recent(processes: Vec<ProcessView>) -> Vec<ProcessView> {
    let since = chrono::Utc::now() - GONE_SHOWN_FOR;
    processes
        .into_iter()
        .filter(|p| matches!(p.state.as_str(), "alive" | "draining") || p.last_heartbeat_at > since)
        .collect()
}

/// The audit page's filters, kept in its pager's links.
const AUDIT_FILTERS: &[&str] = &["user", "object_type", "object", "action"];

/// Kinds of object the audit page offers to filter by.
const AUDITED_OBJECTS: &[&str] = &[
    "job",
    "trigger",
    "run",
    "workflow",
    "workflow_run",
    "user",
    "token",
    "secret",
    "channel",
    "alert_rule",
    "executor",
];

/// `GET /audit?user=&object_type=&object=&action=&offset=` (admin).
pub async fn audit(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let (page, mut filter) = page_and_filter(&query, service::cluster::audit_filter)?;
    if filter.namespace.is_none() {
        filter.namespace = user.namespace().map(str::to_owned);
    }
    let Paged { items, total } = service::cluster::audit_log(&state.handles, &user.0, &filter, page).await?;
    let actors = service::cluster::audit_actors(&state.handles, &user.0).await?;
    let pager = Pager::new(page, items.len(), total);
    let entries: Vec<AuditRow> = items.into_iter().map(AuditRow::from).collect();
    let mut page_base = String::from("/audit?");
    let mut filters = std::collections::BTreeMap::new();
    for key in AUDIT_FILTERS {
        if let Some(value) = query.text(key) {
            page_base.push_str(&format!("{key}={}&", super::encode_component(value)));
            filters.insert(*key, value.trim().to_owned());
        }
    }
    render(
        &state,
        "audit.html",
        context! {
            entries, total, page => pager, page_base, filters, actors, objects => AUDITED_OBJECTS,
            ..user.layout("audit")
        },
    )
}

/// One field an audited change touched, its values as short text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct FieldChange {
    field: String,
    before: String,
    after: String,
}

/// An audit entry as the page shows it: the fields that changed when there is a before
/// and an after, else the whole object (created or deleted) to unfold.
#[derive(Debug, Clone, Serialize)]
struct AuditRow {
    #[serde(flatten)]
    entry: store::audit::Entry,
    changes: Vec<FieldChange>,
    snapshot: Option<String>,
}

impl From<store::audit::Entry> for AuditRow {
    fn from(entry: store::audit::Entry) -> Self {
        let (changes, snapshot) = match (&entry.before, &entry.after) {
            (Some(Value::Object(before)), Some(Value::Object(after))) => {
                let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
                let changes = keys
                    .into_iter()
                    .filter(|key| !IMPLIED_BY_A_CHANGE.contains(&key.as_str()))
                    .filter(|key| before.get(*key) != after.get(*key))
                    .map(|key| FieldChange {
                        field: key.clone(),
                        before: short(before.get(key)),
                        after: short(after.get(key)),
                    })
                    .collect();
                (changes, None)
            }
            (before, after) => {
                let shown = after.as_ref().or(before.as_ref());
                (
                    Vec::new(),
                    shown.and_then(|v| serde_json::to_string_pretty(v).ok()),
                )
            }
        };
        AuditRow {
            entry,
            changes,
            snapshot,
        }
    }
}

/// Fields every change moves; listing them would hide the ones that matter.
const IMPLIED_BY_A_CHANGE: &[&str] = &["updated_at"];

/// A JSON value as at most 120 characters of text (strings without their quotes).
fn short(value: Option<&Value>) -> String {
    let text = match value {
        None => "—".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    if text.chars().count() > 120 {
        let mut cut: String = text.chars().take(119).collect();
        cut.push('…');
        cut
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_rows_list_what_changed() {
        let entry = |before: Option<Value>, after: Option<Value>| store::audit::Entry {
            id: 1,
            at: chrono::Utc::now(),
            actor_id: Some(1),
            actor: "admin".into(),
            action: "job.update".into(),
            object_type: "job".into(),
            object_id: Some(1),
            object_name: Some("a".into()),
            namespace: Some("default".into()),
            before,
            after,
        };
        let update = AuditRow::from(entry(
            Some(serde_json::json!({"paused": false, "version": 1, "name": "a", "updated_at": "x"})),
            Some(serde_json::json!({"paused": true, "version": 2, "name": "a", "updated_at": "y"})),
        ));
        let fields: Vec<&str> = update.changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["paused", "version"]);
        assert_eq!(
            (
                update.changes[0].before.as_str(),
                update.changes[0].after.as_str()
            ),
            ("false", "true")
        );
        assert!(update.snapshot.is_none());
        let created = AuditRow::from(entry(None, Some(serde_json::json!({"name": "new"}))));
        assert!(created.changes.is_empty());
        assert!(created.snapshot.unwrap_or_default().contains("\"name\": \"new\""));
        assert_eq!(short(Some(&Value::String("x".repeat(200)))).chars().count(), 120);
    }

    #[test]
    fn long_gone_processes_leave_the_page() {
        let process = |state: &str, minutes_ago: i64| ProcessView {
            id: uuid::Uuid::new_v4(),
            host: "h".into(),
            pid: 1,
            version: "v".into(),
            started_at: chrono::Utc::now(),
            last_heartbeat_at: chrono::Utc::now() - chrono::TimeDelta::minutes(minutes_ago),
            state: state.into(),
            running: None,
            capacity: None,
            labels: Default::default(),
            cordoned: false,
            drain_requested: false,
        };
        let shown: Vec<String> = recent(vec![
            process("alive", 0),
            process("draining", 300),
            process("stopped", 5),
            process("stopped", 300),
            process("dead", 300),
        ])
        .into_iter()
        .map(|p| p.state)
        .collect();
        assert_eq!(shown, ["alive", "draining", "stopped"]);
    }
}
