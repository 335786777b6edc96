//! Alerts: channels (admins), rules (operators), the delivery log (everyone signed in),
//! and channel tests. Channel secrets and URLs go from the request into their sealed form
//! (bound to the channel's id) and are never returned, logged or audited: a URL only in
//! its masked form.

use std::time::Duration;

use probactr_common::model::{ChannelKind, NotificationState};
use probactr_common::secrets::{Keyring, Owner, Sealed};
use probactr_common::store::alerts::channels::{self, Channel, Deleted, NewChannel, SecretChange};
use probactr_common::store::alerts::notifications::{self, Filter, NewNotification, Notification};
use probactr_common::store::alerts::rules::{self, Rule};
use probactr_common::store::{self, audit::Change, is_unique_violation, Page};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;

use super::snapshot;
use super::Handles;
use crate::auth::Principal;
use crate::command::alert::{self, ChannelCommand, RuleCommand, SecretInput};
use crate::error::ApiError;
use crate::sealing;

/// How long a channel test waits for a monitor to make its first attempt.
const TEST_WAIT: Duration = Duration::from_secs(20);

/// The namespace of channel `id` when `who` sees it (a 404 otherwise).
async fn channel_namespace(conn: &mut PgConnection, who: &Principal, id: i64) -> Result<String, ApiError> {
    let namespace = channels::get(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel", id))?
        .namespace;
    who.role_for(&namespace, "channel", id)?;
    Ok(namespace)
}

/// The namespace of rule `id` when `who` sees it (a 404 otherwise).
async fn rule_namespace(conn: &mut PgConnection, who: &Principal, id: i64) -> Result<String, ApiError> {
    let namespace = rules::get(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("alert rule", id))?
        .namespace;
    who.role_for(&namespace, "alert rule", id)?;
    Ok(namespace)
}

/// The namespace a new channel or rule goes to: the one its body names, else `default`;
/// a 404 when `who` has no role there.
fn new_object_namespace<'a>(who: &Principal, named: Option<&'a str>) -> Result<&'a str, ApiError> {
    let namespace = named.unwrap_or(store::namespaces::DEFAULT);
    who.role_for(namespace, "namespace", namespace)?;
    Ok(namespace)
}

/// A change naming another namespace than the object's: objects do not move.
fn stays_in(namespace: &str, named: Option<&str>, object: &str) -> Result<(), ApiError> {
    match named {
        Some(other) if other != namespace => Err(ApiError::field(
            "namespace",
            format!("the {object} is in namespace {namespace}; it cannot move (create it in {other})"),
        )),
        _ => Ok(()),
    }
}

fn keys(handles: &Handles) -> Result<&Keyring, ApiError> {
    handles.secret_keys.as_deref().ok_or_else(|| {
        ApiError::Conflict(
            "the manager has no PROBACTR_SECRET_KEY to seal the channel's secret and URL".into(),
        )
    })
}

/// The channel's secret as it is to be stored, sealed for channel `id`.
fn sealed_secret(handles: &Handles, id: i64, secret: &SecretInput) -> Result<SecretChange, ApiError> {
    Ok(match secret {
        SecretInput::Keep => SecretChange::Keep,
        SecretInput::Clear => SecretChange::Clear,
        SecretInput::Set(value) => SecretChange::Set(keys(handles)?.seal(&Owner::ChannelSecret(id), value)),
    })
}

/// The channel's URL sealed for channel `id`, and the configuration showing it masked.
fn sealed_url(
    handles: &Handles,
    id: i64,
    config: &serde_json::Value,
    url: &str,
) -> Result<(Sealed, serde_json::Value), ApiError> {
    let sealed = keys(handles)?.seal(&Owner::ChannelUrl(id), url);
    Ok((sealed, sealing::with_masked_url(config, url)))
}

fn has_url(kind: ChannelKind) -> bool {
    matches!(kind, ChannelKind::Webhook | ChannelKind::Slack)
}

fn name_taken(err: &sqlx::Error, constraint: &str) -> Option<ApiError> {
    is_unique_violation(err, constraint).then(|| ApiError::field("name", "is already taken"))
}

/// Every channel.
pub async fn list_channels(handles: &Handles, who: &Principal) -> Result<Vec<Channel>, ApiError> {
    let admin_somewhere = who.access.cluster_admin || who.access.roles.values().any(|role| role.is_admin());
    if !admin_somewhere {
        return Err(ApiError::Forbidden(
            "only a namespace's admins may manage its alert channels".into(),
        ));
    }
    let mut list = channels::list(&handles.pool).await?;
    // Channels hold webhook addresses and mail recipients: their namespace's admins only.
    list.retain(|channel| {
        who.access
            .role_in(&channel.namespace)
            .is_some_and(|role| role.is_admin())
    });
    Ok(list)
}

/// One channel.
pub async fn get_channel(handles: &Handles, who: &Principal, id: i64) -> Result<Channel, ApiError> {
    let namespace = channel_namespace(&mut *handles.pool.acquire().await?, who, id).await?;
    who.require_admin(&namespace, "manage alert channels")?;
    channels::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel", id))
}

/// Creates a channel.
pub async fn create_channel(
    handles: &Handles,
    who: &Principal,
    command: ChannelCommand,
) -> Result<Channel, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let channel = create_channel_in(&mut tx, handles, who, command).await?;
    tx.commit().await?;
    tracing::info!(channel.id = channel.id, channel.kind = %channel.kind, "alert channel created");
    Ok(channel)
}

/// [`create_channel`] in the caller's transaction (its audit row included).
pub async fn create_channel_in(
    conn: &mut PgConnection,
    handles: &Handles,
    who: &Principal,
    command: ChannelCommand,
) -> Result<Channel, ApiError> {
    let namespace = new_object_namespace(who, command.namespace.as_deref())?;
    who.require_admin(namespace, "manage alert channels")?;
    if has_url(command.kind) && command.url.is_none() {
        return Err(ApiError::field("config.url", "is required"));
    }
    // The id first: the channel's sealed values are bound to it.
    let id = channels::reserve_id(&mut *conn).await?;
    let secret = match sealed_secret(handles, id, &command.secret)? {
        SecretChange::Set(sealed) => Some(sealed),
        _ => None,
    };
    let (url, config) = match &command.url {
        Some(url) if has_url(command.kind) => {
            let (sealed, config) = sealed_url(handles, id, &command.config, url)?;
            (Some(sealed), config)
        }
        _ => (None, command.config.clone()),
    };
    let new = NewChannel {
        id,
        namespace,
        name: &command.name,
        kind: command.kind,
        config: &config,
        secret: secret.as_ref(),
        url: url.as_ref(),
    };
    let channel = channels::create(&mut *conn, &new)
        .await
        .map_err(|err| match err {
            store::StoreError::Database(db) => name_taken(&db, "alert_channels_name_unique")
                .unwrap_or_else(|| store::StoreError::Database(db).into()),
            other => other.into(),
        })?;
    audit(conn, who, "channel.create", channel.id, None, snapshot(&channel)).await?;
    Ok(channel)
}

/// Replaces a channel's name and configuration (its secret kept unless given).
pub async fn update_channel(
    handles: &Handles,
    who: &Principal,
    id: i64,
    command: ChannelCommand,
) -> Result<Channel, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let channel = update_channel_in(&mut tx, handles, who, id, command).await?;
    tx.commit().await?;
    tracing::info!(channel.id = id, "alert channel updated");
    Ok(channel)
}

/// [`update_channel`] in the caller's transaction (its audit row included).
pub async fn update_channel_in(
    conn: &mut PgConnection,
    handles: &Handles,
    who: &Principal,
    id: i64,
    command: ChannelCommand,
) -> Result<Channel, ApiError> {
    let namespace = channel_namespace(conn, who, id).await?;
    who.require_admin(&namespace, "manage alert channels")?;
    stays_in(&namespace, command.namespace.as_deref(), "channel")?;
    let before = channels::get(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("channel", id))?;
    if before.kind != command.kind {
        return Err(ApiError::field(
            "kind",
            format!("cannot change from {} (create a new channel)", before.kind),
        ));
    }
    let secret = sealed_secret(handles, id, &command.secret)?;
    let (url, config) = match &command.url {
        Some(url) if has_url(command.kind) => {
            let (sealed, config) = sealed_url(handles, id, &command.config, url)?;
            (Some(sealed), config)
        }
        // Kept: so is its masked form.
        _ => {
            let mut config = command.config.clone();
            if let (Some(masked), serde_json::Value::Object(map)) = (before.config.get("url"), &mut config) {
                map.insert("url".into(), masked.clone());
            }
            (None, config)
        }
    };
    let channel = channels::update(&mut *conn, id, &command.name, &config, &secret, url.as_ref())
        .await
        .map_err(|err| match err {
            store::StoreError::Database(db) => name_taken(&db, "alert_channels_name_unique")
                .unwrap_or_else(|| store::StoreError::Database(db).into()),
            other => other.into(),
        })?
        .ok_or_else(|| ApiError::not_found("channel", id))?;
    audit(
        conn,
        who,
        "channel.update",
        id,
        snapshot(&before),
        snapshot(&channel),
    )
    .await?;
    Ok(channel)
}

/// Deletes a channel no rule sends to.
pub async fn delete_channel(handles: &Handles, who: &Principal, id: i64) -> Result<(), ApiError> {
    let mut tx = handles.pool.begin().await?;
    let namespace = channel_namespace(&mut tx, who, id).await?;
    who.require_admin(&namespace, "manage alert channels")?;
    match channels::delete(&mut tx, id).await? {
        Deleted::Yes => {}
        Deleted::NotFound => return Err(ApiError::not_found("channel", id)),
        Deleted::InUse(rules) => {
            return Err(ApiError::Conflict(format!(
                "the channel is used by the rule(s) {}; change them first",
                rules.join(", ")
            )))
        }
    }
    let change = Change {
        action: "channel.delete",
        object_type: "channel",
        object_id: Some(id),
        before: None,
        after: None,
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(&namespace), change).await?;
    tx.commit().await?;
    tracing::info!(channel.id = id, "alert channel deleted");
    Ok(())
}

/// What a channel test did.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TestResult {
    /// Whether the message was delivered.
    pub delivered: bool,
    /// The notification, as the delivery log shows it (its error, if any).
    pub notification: Notification,
}

/// Queues a test message to a channel and waits for a monitor's first attempt.
pub async fn test_channel(handles: &Handles, who: &Principal, id: i64) -> Result<TestResult, ApiError> {
    let channel = get_channel(handles, who, id).await?;
    let payload = json!({
        "event": "test",
        "follow_up": false,
        "summary": format!("Test message from probactr to channel {}", channel.name),
        "counts": {"events": 1, "suppressed": 0},
    });
    let mut tx = handles.pool.begin().await?;
    let ids = notifications::queue(
        &mut tx,
        &[id],
        &NewNotification {
            rule_id: None,
            event: "test",
            job_id: None,
            run_id: None,
            suppressed: 0,
            payload: &payload,
        },
    )
    .await?;
    tx.commit().await?;
    let notification_id = ids
        .first()
        .copied()
        .ok_or_else(|| ApiError::not_found("channel", id))?;
    tracing::info!(
        channel.id = id,
        notification.id = notification_id,
        "alert channel test queued"
    );
    let deadline = tokio::time::Instant::now() + TEST_WAIT;
    loop {
        let notification = notifications::get(&handles.pool, notification_id)
            .await?
            .ok_or_else(|| ApiError::not_found("notification", notification_id))?;
        if notification.attempts > 0 || notification.state != NotificationState::Pending {
            return Ok(TestResult {
                delivered: notification.state == NotificationState::Sent,
                notification,
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::Unavailable(format!(
                "no monitor attempted the test message within {} s (notification {notification_id} stays queued): is a monitor running?",
                TEST_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every rule.
pub async fn list_rules(handles: &Handles, who: &Principal) -> Result<Vec<Rule>, ApiError> {
    let mut list = rules::list(&handles.pool).await?;
    list.retain(|rule| who.access.sees(&rule.namespace));
    Ok(list)
}

/// One rule.
pub async fn get_rule(handles: &Handles, who: &Principal, id: i64) -> Result<Rule, ApiError> {
    rule_namespace(&mut *handles.pool.acquire().await?, who, id).await?;
    rules::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("alert rule", id))
}

/// Creates a rule (`id` None) or replaces one.
pub async fn save_rule(
    handles: &Handles,
    who: &Principal,
    id: Option<i64>,
    command: RuleCommand,
) -> Result<Rule, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let rule = save_rule_in(&mut tx, who, id, command).await?;
    tx.commit().await?;
    tracing::info!(rule.id = rule.id, created = id.is_none(), "alert rule saved");
    Ok(rule)
}

/// [`save_rule`] in the caller's transaction (its audit row included).
pub async fn save_rule_in(
    conn: &mut PgConnection,
    who: &Principal,
    id: Option<i64>,
    command: RuleCommand,
) -> Result<Rule, ApiError> {
    let RuleCommand {
        namespace: named,
        fields,
    } = command;
    let namespace = match id {
        Some(id) => {
            let namespace = rule_namespace(conn, who, id).await?;
            stays_in(&namespace, named.as_deref(), "rule")?;
            namespace
        }
        None => new_object_namespace(who, named.as_deref())?.to_owned(),
    };
    who.require_operator(&namespace, "manage alert rules")?;
    // A rule names a job and channels of its own namespace: others are unknown to it.
    let job_missing = match fields.job_id {
        Some(job) => match store::jobs::get(&mut *conn, job).await? {
            Some(found) if found.namespace == namespace => None,
            _ => Some(job),
        },
        None => None,
    };
    let channel_namespaces = channels::namespaces(&mut *conn).await?;
    let mut channels_missing = channels::missing(&mut *conn, &fields.channel_ids).await?;
    for id in &fields.channel_ids {
        if channel_namespaces
            .get(id)
            .is_some_and(|theirs| *theirs != namespace)
        {
            channels_missing.push(*id);
        }
    }
    alert::missing_references(job_missing, &channels_missing)?;
    let before = match id {
        Some(id) => Some(
            rules::get(&mut *conn, id)
                .await?
                .ok_or_else(|| ApiError::not_found("alert rule", id))?,
        ),
        None => None,
    };
    let saved = match id {
        None => rules::create(conn, &namespace, &fields).await.map(Some),
        Some(id) => rules::replace(conn, id, &fields).await,
    }
    .map_err(|err| match err {
        store::StoreError::Database(db) => name_taken(&db, "alert_rules_name_unique")
            .unwrap_or_else(|| store::StoreError::Database(db).into()),
        other => other.into(),
    })?;
    let rule = saved.ok_or_else(|| ApiError::not_found("alert rule", id.unwrap_or_default()))?;
    let action = if before.is_some() {
        "alert_rule.update"
    } else {
        "alert_rule.create"
    };
    audit(
        conn,
        who,
        action,
        rule.id,
        before.as_ref().and_then(snapshot),
        snapshot(&rule),
    )
    .await?;
    Ok(rule)
}

/// Deletes a rule.
pub async fn delete_rule(handles: &Handles, who: &Principal, id: i64) -> Result<(), ApiError> {
    let mut tx = handles.pool.begin().await?;
    let namespace = rule_namespace(&mut tx, who, id).await?;
    who.require_operator(&namespace, "manage alert rules")?;
    let before = rules::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("alert rule", id))?;
    rules::delete(&mut *tx, id).await?;
    let change = Change {
        action: "alert_rule.delete",
        object_type: "alert_rule",
        object_id: Some(id),
        before: snapshot(&before),
        after: None,
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(&namespace), change).await?;
    tx.commit().await?;
    tracing::info!(rule.id = id, "alert rule deleted");
    Ok(())
}

/// The delivery log, newest first.
pub async fn notifications(
    handles: &Handles,
    who: &Principal,
    filter: &Filter,
    page: Page,
) -> Result<Vec<Notification>, ApiError> {
    // A message is seen in its channel's namespace (a deleted channel's: cluster admins),
    // filtered before paging so a page is full.
    let filter = Filter {
        namespaces: who.access.visible(),
        ..filter.clone()
    };
    Ok(notifications::list(&handles.pool, &filter, page).await?)
}

async fn audit(
    tx: &mut sqlx::PgConnection,
    who: &Principal,
    action: &str,
    id: i64,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
) -> Result<(), ApiError> {
    let object_type = action.split('.').next().unwrap_or("alert");
    let change = Change {
        action,
        object_type,
        object_id: Some(id),
        before,
        after,
    };
    store::audit::record(tx, who.actor(), change).await?;
    Ok(())
}
