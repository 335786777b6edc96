//! `/alerts` and `/notifications`: alert rules (operators), channels (admins) with their
//! test button, and the delivery log. Rules and channels are created, edited (`/alerts/
//! rules/{id}`, `/alerts/channels/{id}`: the page with that one's form filled) and
//! deleted. The forms become the same commands as API bodies ([`crate::command::alert`]),
//! so they get the same checks and field names.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::model::{AlertEvent, ChannelKind, NotificationState};
use probactr_common::store::alerts::notifications::Filter;
use probactr_common::store::{self, Page};
use serde_json::{json, Map, Value};

use super::{render_status, AdminError, AdminUser, FormData, FormPost};
use crate::api::Id;
use crate::command::alert::{self, ChannelCommand};
use crate::error::{ApiError, FieldErrors};
use crate::input::QueryParams;
use crate::service::alerts;
use crate::state::AppState;

/// What the page shows besides the lists: a form being corrected, its errors, a notice.
#[derive(Default)]
struct Feedback {
    status: Option<StatusCode>,
    /// The form the values and errors are for.
    target: Target,
    form: HashMap<String, String>,
    errors: FieldErrors,
    notice: Option<String>,
    problem: Option<String>,
}

/// Which of the page's two forms is filled, and whether it edits an existing object.
#[derive(Default, Clone, Copy)]
enum Target {
    #[default]
    NewRule,
    NewChannel,
    Rule(i64),
    Channel(i64),
}

impl Target {
    /// The template's view: the rule form's and the channel form's values are apart.
    fn context(self) -> Value {
        match self {
            Target::NewRule => json!({"form": "rule"}),
            Target::NewChannel => json!({"form": "channel"}),
            Target::Rule(id) => json!({"form": "rule", "id": id}),
            Target::Channel(id) => json!({"form": "channel", "id": id}),
        }
    }
}

async fn alerts_page(state: &AppState, user: &AdminUser, feedback: Feedback) -> Result<Response, AdminError> {
    let who = &user.0;
    let rules = alerts::list_rules(&state.handles, who).await?;
    let channels = match alerts::list_channels(&state.handles, who).await {
        Err(crate::error::ApiError::Forbidden(_)) => Vec::new(),
        listed => listed?,
    };
    let channel_names: HashMap<String, String> = channels
        .iter()
        .map(|c| (c.id.to_string(), c.name.clone()))
        .collect();
    let jobs: Vec<Value> = store::jobs::names(&state.handles.pool, user.listing().as_deref())
        .await?
        .into_iter()
        .map(|(id, name)| json!({"id": id.to_string(), "name": name}))
        .collect();
    let job_names: HashMap<String, String> = jobs
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap_or("").to_owned(),
                j["name"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let events: Vec<&str> = AlertEvent::ALL.iter().map(|e| e.as_str()).collect();
    let kinds: Vec<&str> = ChannelKind::ALL.iter().map(|k| k.as_str()).collect();
    let ctx = context! {
        rules, channels, channel_names, jobs, job_names, events, kinds,
        rule_namespaces => user.namespaces_where(|role| role.can_operate()),
        channel_namespaces => user.namespaces_where(|role| role.is_admin()),
        form => feedback.form, errors => feedback.errors, notice => feedback.notice,
        target => feedback.target.context(),
        problem => feedback.problem,
        ..user.layout("alerts")
    };
    render_status(
        state,
        feedback.status.unwrap_or(StatusCode::OK),
        "alerts.html",
        ctx,
    )
}

/// `GET /alerts`.
pub async fn page(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    alerts_page(&state, &user, Feedback::default()).await
}

/// A failed form: its fields kept (never a secret, nor a channel URL: it is one), its
/// errors shown.
async fn rejected(
    state: &AppState,
    user: &AdminUser,
    target: Target,
    form: &FormData,
    err: ApiError,
) -> Result<Response, AdminError> {
    let mut kept = form.0.clone();
    kept.remove("secret");
    kept.remove("url");
    kept.remove("csrf");
    let feedback = match err {
        ApiError::Invalid(errors) => Feedback {
            status: Some(StatusCode::UNPROCESSABLE_ENTITY),
            target,
            form: kept,
            errors: errors
                .into_iter()
                .map(|(field, message)| (field.trim_start_matches("config.").to_owned(), message))
                .collect(),
            ..Feedback::default()
        },
        ApiError::Conflict(message) => Feedback {
            status: Some(StatusCode::CONFLICT),
            problem: Some(message),
            ..Feedback::default()
        },
        other => return Err(other.into()),
    };
    alerts_page(state, user, feedback).await
}

/// Back to the page after a change, or the page again with what was wrong.
async fn back_or_rejected(
    state: &AppState,
    user: &AdminUser,
    target: Target,
    form: &FormData,
    outcome: Result<(), ApiError>,
) -> Result<Response, AdminError> {
    match outcome {
        Ok(()) => Ok(Redirect::to("/alerts").into_response()),
        Err(err) => rejected(state, user, target, form, err).await,
    }
}

/// The channel form as the body the API takes.
fn channel_body(form: &FormData) -> Value {
    let mut config = Map::new();
    match form.get("kind").unwrap_or_default() {
        "email" => {
            let to: Vec<&str> = form
                .get("to")
                .unwrap_or_default()
                .split([',', '\n'])
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .collect();
            config.insert("to".into(), json!(to));
        }
        _ => {
            config.insert("url".into(), json!(form.get("url").unwrap_or_default().trim()));
            if let Some(secret) = form.get("secret").filter(|s| !s.is_empty()) {
                config.insert("secret".into(), json!(secret));
            }
        }
    }
    let mut body = json!({"name": form.get("name").unwrap_or_default(), "kind": form.get("kind").unwrap_or_default(), "config": config});
    with_namespace(&mut body, form);
    body
}

/// The form's namespace, when it chose one (else the API's default).
fn with_namespace(body: &mut Value, form: &FormData) {
    if let Some(namespace) = form.get("namespace").map(str::trim).filter(|n| !n.is_empty()) {
        body["namespace"] = json!(namespace);
    }
}

/// The rule form as the body the API takes (a new rule is enabled; an edited one as its
/// checkbox says).
fn rule_body(form: &FormData, editing: bool) -> Value {
    let picked = |prefix: &str| -> Vec<String> {
        let mut picked: Vec<String> = form
            .0
            .keys()
            .filter_map(|key| key.strip_prefix(prefix).map(str::to_owned))
            .collect();
        picked.sort();
        picked
    };
    let number = |key: &str| -> Value {
        match form.get(key).map(str::trim).filter(|v| !v.is_empty()) {
            None => Value::Null,
            Some(text) => text
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| json!(text)),
        }
    };
    let channel_ids: Vec<Value> = picked("channel.")
        .iter()
        .map(|id| id.parse::<i64>().map(Value::from).unwrap_or_else(|_| json!(id)))
        .collect();
    let mut body = json!({
        "name": form.get("name").unwrap_or_default(),
        "events": picked("event."),
        "job_id": number("job_id"),
        "channel_ids": channel_ids,
        "threshold": number("threshold"),
        "duration_secs": number("duration_secs"),
        "enabled": !editing || form.checked("enabled"),
    });
    if let Value::Number(throttle) = number("throttle_secs") {
        body["throttle_secs"] = Value::Number(throttle);
    } else if form.get("throttle_secs").is_some_and(|v| !v.trim().is_empty()) {
        body["throttle_secs"] = json!(form.get("throttle_secs"));
    }
    with_namespace(&mut body, form);
    body
}

/// `POST /alerts/channels`.
pub async fn create_channel(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let saved = match ChannelCommand::read(channel_body(&form)) {
        Ok(command) => alerts::create_channel(&state.handles, &user.0, command)
            .await
            .map(drop),
        Err(err) => Err(err),
    };
    back_or_rejected(&state, &user, Target::NewChannel, &form, saved).await
}

/// `POST /alerts/channels/{id}/test`: waits for a monitor's attempt and says how it went.
pub async fn test_channel(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Response, AdminError> {
    let feedback = match alerts::test_channel(&state.handles, &user.0, id).await {
        Ok(result) if result.delivered => Feedback {
            notice: Some(format!(
                "Test message delivered through {}.",
                result.notification.channel_name.unwrap_or_default()
            )),
            ..Feedback::default()
        },
        Ok(result) => Feedback {
            problem: Some(format!(
                "Test message to {} failed: {}",
                result.notification.channel_name.unwrap_or_default(),
                result.notification.last_error.unwrap_or_default()
            )),
            ..Feedback::default()
        },
        Err(ApiError::Unavailable(message)) => Feedback {
            problem: Some(message),
            ..Feedback::default()
        },
        Err(err) => return Err(err.into()),
    };
    alerts_page(&state, &user, feedback).await
}

/// `POST /alerts/channels/{id}/delete`.
pub async fn delete_channel(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let deleted = alerts::delete_channel(&state.handles, &user.0, id).await;
    back_or_rejected(&state, &user, Target::NewChannel, &form, deleted).await
}

/// `POST /alerts/rules`.
pub async fn create_rule(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    save_rule_form(&state, &user, None, &form).await
}

/// Creates (`id` None) or replaces a rule from its form.
async fn save_rule_form(
    state: &AppState,
    user: &AdminUser,
    id: Option<i64>,
    form: &FormData,
) -> Result<Response, AdminError> {
    let saved = match alert::read_rule(rule_body(form, id.is_some())) {
        Ok(fields) => alerts::save_rule(&state.handles, &user.0, id, fields)
            .await
            .map(drop),
        Err(err) => Err(err),
    };
    let target = id.map_or(Target::NewRule, Target::Rule);
    back_or_rejected(state, user, target, form, saved).await
}

/// The page with one form filled with an object's values, to edit it.
async fn editing(
    state: &AppState,
    user: &AdminUser,
    target: Target,
    form: HashMap<String, String>,
) -> Result<Response, AdminError> {
    let feedback = Feedback {
        target,
        form,
        ..Feedback::default()
    };
    alerts_page(state, user, feedback).await
}

/// `GET /alerts/rules/{id}`: the page with the rule's form filled.
pub async fn edit_rule(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let rule = alerts::get_rule(&state.handles, &user.0, id).await?;
    let mut form: HashMap<String, String> = [
        ("name", rule.fields.name.clone()),
        (
            "job_id",
            rule.fields.job_id.map(|j| j.to_string()).unwrap_or_default(),
        ),
        (
            "threshold",
            rule.fields.threshold.map(|t| t.to_string()).unwrap_or_default(),
        ),
        (
            "duration_secs",
            rule.fields
                .duration_secs
                .map(|d| d.to_string())
                .unwrap_or_default(),
        ),
        ("throttle_secs", rule.fields.throttle_secs.to_string()),
    ]
    .map(|(key, value)| (key.to_owned(), value))
    .into();
    let ticked = rule
        .fields
        .events
        .iter()
        .map(|event| format!("event.{}", event.as_str()))
        .chain(rule.fields.channel_ids.iter().map(|id| format!("channel.{id}")))
        .chain(rule.fields.enabled.then(|| "enabled".to_owned()));
    form.extend(ticked.map(|key| (key, "on".to_owned())));
    editing(&state, &user, Target::Rule(id), form).await
}

/// `POST /alerts/rules/{id}`: replaces the rule with the form's.
pub async fn update_rule(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    save_rule_form(&state, &user, Some(id), &form).await
}

/// `GET /alerts/channels/{id}`: the page with the channel's form filled (its URL in its
/// masked form, which keeps it; its secret never shown, an empty one kept).
pub async fn edit_channel(
    State(state): State<AppState>,
    user: AdminUser,
    Id(id): Id,
) -> Result<Response, AdminError> {
    let channel = alerts::get_channel(&state.handles, &user.0, id).await?;
    let text = |key: &str| match &channel.config[key] {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    };
    let form: HashMap<String, String> = [
        ("name", channel.name.clone()),
        ("kind", channel.kind.as_str().to_owned()),
        ("url", text("url")),
        ("to", text("to")),
    ]
    .map(|(key, value)| (key.to_owned(), value))
    .into();
    editing(&state, &user, Target::Channel(id), form).await
}

/// `POST /alerts/channels/{id}`: the channel's new name and configuration.
pub async fn update_channel(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let saved = match ChannelCommand::read(channel_body(&form)) {
        Ok(command) => alerts::update_channel(&state.handles, &user.0, id, command)
            .await
            .map(drop),
        Err(err) => Err(err),
    };
    back_or_rejected(&state, &user, Target::Channel(id), &form, saved).await
}

/// `POST /alerts/rules/{id}/delete`.
pub async fn delete_rule(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Redirect, AdminError> {
    alerts::delete_rule(&state.handles, &user.0, id).await?;
    Ok(Redirect::to("/alerts"))
}

/// `GET /notifications`: the delivery log, for every job or one (`?job_id=`), by state.
pub async fn notifications(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Response, AdminError> {
    let mut errors = FieldErrors::new();
    let filter = Filter {
        id: None,
        job_id: query.int("job_id", 1, i64::MAX, &mut errors),
        state: query.choice::<NotificationState>("state", &mut errors),
        namespaces: None,
    };
    let page = query.page(&mut errors);
    let page = if errors.is_empty() {
        page
    } else {
        Page {
            limit: 100,
            offset: 0,
        }
    };
    let items = alerts::notifications(&state.handles, &user.0, &filter, page).await?;
    let states: Vec<&str> = NotificationState::ALL.iter().map(|s| s.as_str()).collect();
    let ctx = context! {
        notifications => items, states, errors,
        state_filter => filter.state.map(|s| s.as_str()), job_filter => filter.job_id,
        ..user.layout("alerts")
    };
    render_status(&state, StatusCode::OK, "notifications.html", ctx)
}
