//! A trigger's versions: its whole definition (schedule, misfire policy, cap, parameters,
//! calendar, jitter, number of fires, the job it waits for) as each create, edit and
//! restore left it, and restoring an earlier one (which makes a new version, so a restore
//! can itself be undone).
//!
//! The definition is kept as the body of an edit, so a restore is an edit of that body,
//! checked as any edit is. What is the trigger's state rather than its definition is not
//! kept and a restore leaves it: its pause, its fires so far, and a webhook trigger's
//! token and secret. A secret parameter keeps its current sealed value on a restore (the
//! kept one is only ever shown masked).

use probactr_common::model::Trigger;
use probactr_common::params_schema::masked;
use probactr_common::store::versions::{Kind, Version as TriggerVersion};
use probactr_common::store::{self};
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::triggers::{self, TriggerView};
use super::versions::{history_of, kept, shown_list, HistoryEntry, Versioned};
use super::Handles;
use crate::auth::Principal;
use crate::command::TriggerPatch;
use crate::error::ApiError;

/// The definition `trigger` has now, as an edit's body without its `version`: what a
/// version keeps and a restore sends back.
pub async fn definition(conn: &mut PgConnection, trigger: &Trigger) -> Result<Value, ApiError> {
    let params = store::triggers::params_of(&mut *conn, &[trigger.id])
        .await?
        .pop()
        .map_or_else(|| json!({}), |(_, params)| params);
    let extras = store::triggers::extras_of(&mut *conn, &[trigger.id])
        .await?
        .pop()
        .map(|(_, extras)| extras)
        .unwrap_or_default();
    let mut definition = json!({
        "kind": trigger.timing.kind,
        "cron": trigger.timing.cron,
        "timezone": trigger.timing.timezone,
        "interval_secs": trigger.timing.interval_secs,
        "at": trigger.timing.at,
        "start_at": trigger.timing.start_at,
        "end_at": trigger.timing.end_at,
        "misfire": trigger.timing.misfire,
        "misfire_threshold_secs": trigger.timing.misfire_threshold_secs,
        "max_concurrency": trigger.max_concurrency,
        "params": params,
        "calendar": extras.calendar,
        "jitter_secs": extras.jitter_secs,
        "max_fires": extras.max_fires,
        "after": extras.after,
    });
    // An edit refuses a null mode: without a calendar it is left out.
    if let Some(mode) = extras.calendar_mode {
        definition["calendar_mode"] = json!(mode);
    }
    Ok(definition)
}

/// Keeps the definition `trigger` now has as its version, made by `who` (`action`:
/// `create`, `update` or `restore`).
pub async fn keep(
    conn: &mut PgConnection,
    who: &Principal,
    trigger: &Trigger,
    action: &str,
    restored_from: Option<i64>,
) -> Result<(), ApiError> {
    let definition = definition(conn, trigger).await?;
    super::versions::keep(conn, who, versioned(trigger), &definition, action, restored_from).await
}

/// Keeps the version a trigger has before it changes, when it is not kept yet (a trigger
/// made before versions were kept, or one paused since its last edit).
pub async fn keep_before(conn: &mut PgConnection, trigger: &Trigger) -> Result<(), ApiError> {
    let definition = definition(conn, trigger).await?;
    super::versions::keep_before(conn, versioned(trigger), &definition).await
}

/// The version `trigger` has.
fn versioned(trigger: &Trigger) -> Versioned {
    Versioned {
        kind: Kind::Trigger,
        id: trigger.id,
        version: trigger.version,
    }
}

/// The kept versions of trigger `id`, newest first, secret parameters masked.
pub async fn list(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<TriggerVersion>, ApiError> {
    triggers::get(handles, who, id).await?;
    shown_list(&handles.pool, Kind::Trigger, id, masked_params).await
}

/// Version `version` of trigger `id`, secret parameters masked.
pub async fn get(
    handles: &Handles,
    who: &Principal,
    id: i64,
    version: i64,
) -> Result<TriggerVersion, ApiError> {
    triggers::get(handles, who, id).await?;
    let mut conn = handles.pool.acquire().await?;
    Ok(masked_params(kept(&mut conn, Kind::Trigger, id, version).await?))
}

/// Makes version `version` of trigger `id` its definition again, as a new version,
/// checked as an edit is (its calendar and the job it waits for must still exist); its
/// pause stays.
pub async fn restore(
    handles: &Handles,
    who: &Principal,
    id: i64,
    version: i64,
) -> Result<TriggerView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let current = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    triggers::namespace_of(&mut tx, who, &current).await?;
    let kept = kept(&mut tx, Kind::Trigger, id, version).await?;
    let mut body = masked_params(kept).definition;
    body["version"] = json!(current.version);
    let restored = triggers::update_made(
        &mut tx,
        handles.secret_keys.as_deref(),
        who,
        id,
        TriggerPatch::from_json(body),
        Some(version),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(
        trigger.id = id,
        restored_from = version,
        version = restored.version,
        "trigger version restored"
    );
    triggers::view(handles, restored).await
}

/// The trigger's versions, newest first, each with what it changed.
pub async fn history(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<HistoryEntry>, ApiError> {
    Ok(history_of(&list(handles, who, id).await?))
}

/// A version as shown (and as a restore sends it: a masked secret keeps its current
/// value): the secret values of its parameters masked.
fn masked_params(mut version: TriggerVersion) -> TriggerVersion {
    if let Some(params) = version.definition.get("params") {
        version.definition["params"] = masked(params);
    }
    version
}
