//! Triggers: create (with the first instant), read, edit (version-checked; a changed
//! schedule recomputes `next_fire_at`), delete, pause, resume, and the schedule preview.
//! Every write wakes the executors through the database's NOTIFY trigger.

use chrono::{DateTime, Utc};
use probactr_common::calendar::{CalendarMode, CalendarRule};
use probactr_common::maintenance::{self, JobFacts};
use probactr_common::model::{JobMode, Trigger, TriggerKind};
use probactr_common::schedule::Schedule;
use probactr_common::store::audit::Change;
use probactr_common::store::trigger_webhooks::Webhook;
use probactr_common::store::triggers::Extras;
use probactr_common::store::{self, triggers::CreateTriggerError};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;
use std::collections::HashMap;

use super::jobs::{stale, stale_by};
use super::snapshot;
use super::webhooks::HookUrl;
use super::Handles;
use crate::auth::Principal;
use crate::command::trigger::{checked_params, Definition, ExtrasDraft, PreviewRequest};
use crate::command::{TriggerDraft, TriggerPatch};
use crate::error::ApiError;
use probactr_common::params_schema::masked;
use probactr_common::secrets::Keyring;

/// Instants the preview lists when `count` is not given.
pub const DEFAULT_PREVIEW: i64 = 5;
/// The most instants one preview lists.
pub const MAX_PREVIEW: i64 = 100;

/// A trigger as the API shows it: its row, its runs' default parameters, and a webhook
/// trigger's settings (its URL only in the answer that made the URL).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TriggerView {
    /// The trigger.
    #[serde(flatten)]
    pub trigger: Trigger,
    /// Parameters of its runs, under those given to a run.
    #[schema(value_type = Object)]
    pub params: Value,
    /// A webhook trigger's settings (its secret only as `has_secret`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
    /// A webhook trigger's URL, in the answer that creates it only: keep it, it is not
    /// shown again (`POST /api/v1/triggers/{id}/rotate-token` makes a new one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<HookUrl>,
    /// Its calendar, jitter and number of fires.
    #[serde(flatten)]
    pub extras: Extras,
}

/// A trigger just created, with the token of its URL when it is a webhook.
#[derive(Debug, Clone)]
pub struct Created {
    /// The trigger.
    pub trigger: Trigger,
    /// A webhook trigger's token, shown once.
    pub webhook_token: Option<String>,
}

/// `triggers` with their parameters.
pub async fn with_params(handles: &Handles, triggers: Vec<Trigger>) -> Result<Vec<TriggerView>, ApiError> {
    with_params_from(&mut *handles.pool.acquire().await?, triggers).await
}

/// [`with_params`], read through `db` (a transaction's connection).
pub async fn with_params_from(
    db: &mut PgConnection,
    triggers: Vec<Trigger>,
) -> Result<Vec<TriggerView>, ApiError> {
    let ids: Vec<i64> = triggers.iter().map(|trigger| trigger.id).collect();
    let params: HashMap<i64, Value> = store::triggers::params_of(&mut *db, &ids)
        .await?
        .into_iter()
        .collect();
    let hook_ids: Vec<i64> = triggers
        .iter()
        .filter(|trigger| trigger.timing.kind == TriggerKind::Webhook)
        .map(|trigger| trigger.id)
        .collect();
    let mut extras: HashMap<i64, Extras> = store::triggers::extras_of(&mut *db, &ids)
        .await?
        .into_iter()
        .collect();
    let mut hooks: HashMap<i64, Webhook> = HashMap::new();
    if !hook_ids.is_empty() {
        hooks.extend(
            store::trigger_webhooks::of_triggers(&mut *db, &hook_ids)
                .await?
                .into_iter()
                .map(|hook| (hook.trigger_id, hook)),
        );
    }
    Ok(triggers
        .into_iter()
        .map(|trigger| TriggerView {
            params: params.get(&trigger.id).map(masked).unwrap_or_else(|| json!({})),
            webhook: hooks.remove(&trigger.id),
            webhook_url: None,
            extras: extras.remove(&trigger.id).unwrap_or_default(),
            trigger,
        })
        .collect())
}

/// One trigger with its parameters.
pub async fn view(handles: &Handles, trigger: Trigger) -> Result<TriggerView, ApiError> {
    let mut views = with_params(handles, vec![trigger]).await?;
    views
        .pop()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a trigger vanished")))
}

/// One trigger `who` sees.
pub async fn get(handles: &Handles, who: &Principal, id: i64) -> Result<Trigger, ApiError> {
    let trigger = store::triggers::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    namespace_of(&mut *handles.pool.acquire().await?, who, &trigger).await?;
    Ok(trigger)
}

/// The namespace of a trigger (its job's), when `who` sees it; a 404 for the trigger
/// otherwise.
pub(crate) async fn namespace_of(
    conn: &mut PgConnection,
    who: &Principal,
    trigger: &Trigger,
) -> Result<String, ApiError> {
    let job = store::jobs::get(&mut *conn, trigger.job_id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", trigger.id))?;
    who.role_for(&job.namespace, "trigger", trigger.id)?;
    Ok(job.namespace)
}

/// A job's triggers (404 when the job does not exist or `who` does not see it).
pub async fn list_for_job(handles: &Handles, who: &Principal, job_id: i64) -> Result<Vec<Trigger>, ApiError> {
    super::jobs::visible(&mut *handles.pool.acquire().await?, who, job_id, false).await?;
    Ok(store::triggers::list_for_job(&handles.pool, job_id).await?)
}

/// Creates a trigger of a job.
pub async fn create(
    handles: &Handles,
    who: &Principal,
    job_id: i64,
    draft: TriggerDraft,
) -> Result<Created, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let created = create_in(&mut tx, handles.secret_keys.as_deref(), who, job_id, draft).await?;
    tx.commit().await?;
    tracing::info!(job.id = job_id, trigger.id = created.trigger.id, next_fire_at = ?created.trigger.next_fire_at,
        "trigger created");
    Ok(created)
}

/// The view of a trigger just created: with its webhook's URL, shown this once.
pub async fn created_view(handles: &Handles, created: Created) -> Result<TriggerView, ApiError> {
    let mut view = view(handles, created.trigger).await?;
    view.webhook_url = created
        .webhook_token
        .map(|token| super::webhooks::url_of(handles, &token));
    Ok(view)
}

/// [`create`] in the caller's transaction (its audit row included).
pub async fn create_in(
    conn: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    job_id: i64,
    draft: TriggerDraft,
) -> Result<Created, ApiError> {
    let job = super::jobs::visible(conn, who, job_id, false).await?;
    who.require_operator(&job.namespace, "create triggers")?;
    let Definition {
        trigger,
        params,
        webhook,
        extras,
        ..
    } = draft.definition(None, Utc::now(), job_id)?;
    // A webhook's runs get their parameters from each delivery, checked then.
    let creating = trigger.timing.kind != TriggerKind::Webhook;
    let params = checked_params(job.params_schema.as_ref(), params, creating, None, keys)?;
    if job.mode == JobMode::Service {
        return Err(ApiError::field(
            "job_id",
            format!(
                "job {} is a service: it runs continuously and takes no triggers",
                job.name
            ),
        ));
    }
    // The first instant is computed from PostgreSQL's clock, like every firing decision.
    let db_now = store::db_now(&mut *conn).await?;
    let created = store::triggers::create(&mut *conn, job_id, &trigger, db_now)
        .await
        .map_err(|err| match err {
            CreateTriggerError::Invalid(err) => ApiError::field(err.field, err.message),
            CreateTriggerError::Store(err) => err.into(),
        })?;
    if let Some(params) = &params {
        store::triggers::set_params(&mut *conn, created.id, params).await?;
    }
    if extras.given() {
        set_extras(
            &mut *conn,
            created.id,
            &job.namespace,
            &extras,
            &Extras::default(),
        )
        .await?;
    }
    let webhook_token = match created.timing.kind {
        TriggerKind::Webhook => {
            Some(super::webhooks::create_in(&mut *conn, keys, created.id, &webhook).await?)
        }
        _ => None,
    };
    super::trigger_versions::keep(&mut *conn, who, &created, "create", None).await?;
    let change = Change {
        action: "trigger.create",
        object_type: "trigger",
        object_id: Some(created.id),
        before: None,
        after: snapshot(&created),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(Created {
        trigger: created,
        webhook_token,
    })
}

/// Edits a trigger; the patch must carry the `version` the caller read.
pub async fn update(
    handles: &Handles,
    who: &Principal,
    id: i64,
    patch: TriggerPatch,
) -> Result<Trigger, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let after = update_in(&mut tx, handles.secret_keys.as_deref(), who, id, patch).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, next_fire_at = ?after.next_fire_at, "trigger updated");
    Ok(after)
}

/// [`update`] in the caller's transaction (its audit row included).
pub async fn update_in(
    tx: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    id: i64,
    patch: TriggerPatch,
) -> Result<Trigger, ApiError> {
    update_made(tx, keys, who, id, patch, None).await
}

/// [`update_in`], or with `restored_from` the restore of that version (its definition as
/// `patch`), kept and audited as such.
pub async fn update_made(
    tx: &mut PgConnection,
    keys: Option<&Keyring>,
    who: &Principal,
    id: i64,
    patch: TriggerPatch,
    restored_from: Option<i64>,
) -> Result<Trigger, ApiError> {
    let schedule_changed = patch.draft.changes_schedule();
    let before = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let namespace = namespace_of(&mut *tx, who, &before).await?;
    who.require_operator(&namespace, "edit triggers")?;
    let now = store::db_now(&mut *tx).await?;
    let (
        version,
        Definition {
            trigger,
            schedule: next,
            params,
            webhook,
            extras,
        },
    ) = patch.definition(&before)?;
    if version != before.version {
        return Err(stale_by(&mut *tx, "trigger", id, version, before.version).await);
    }
    let schema = store::jobs::get(&mut *tx, before.job_id)
        .await?
        .and_then(|job| job.params_schema);
    let stored = store::triggers::params_of(&mut *tx, &[id])
        .await?
        .pop()
        .map(|(_, params)| params);
    let params = checked_params(schema.as_ref(), params, false, stored.as_ref(), keys)?;
    let next_fire_at = if schedule_changed {
        next.first_at_or_after(now)
    } else {
        before.next_fire_at
    };
    super::trigger_versions::keep_before(&mut *tx, &before).await?;
    let after = store::triggers::update(&mut *tx, id, version, &trigger, next_fire_at)
        .await?
        .ok_or_else(|| stale("trigger", id, version, before.version))?;
    if let Some(params) = &params {
        store::triggers::set_params(&mut *tx, id, params).await?;
    }
    super::webhooks::update_in(&mut *tx, keys, id, &webhook).await?;
    if extras.given() {
        let stored = store::triggers::extras_of(&mut *tx, &[id])
            .await?
            .pop()
            .map(|(_, extras)| extras)
            .unwrap_or_default();
        set_extras(&mut *tx, id, &namespace, &extras, &stored).await?;
    }
    let (made, action) = match restored_from {
        Some(_) => ("restore", "trigger.restore"),
        None => ("update", "trigger.update"),
    };
    super::trigger_versions::keep(&mut *tx, who, &after, made, restored_from).await?;
    let change = Change {
        action,
        object_type: "trigger",
        object_id: Some(id),
        before: snapshot(&before),
        after: snapshot(&after),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    Ok(after)
}

/// Sets a trigger's calendar (a calendar of `namespace`, by name), jitter, `max_fires`
/// and the job it waits for (a job of `namespace`, by name) as `draft` lays them over
/// `stored`; 422 naming `calendar` or `after.job` when the namespace has no such
/// calendar or job.
async fn set_extras(
    conn: &mut PgConnection,
    id: i64,
    namespace: &str,
    draft: &ExtrasDraft,
    stored: &Extras,
) -> Result<(), ApiError> {
    let (calendar, jitter_secs, max_fires, after) = draft.over(stored)?;
    let calendar = match calendar {
        Some((name, mode)) => {
            let found = store::calendars::get_to_follow(&mut *conn, namespace, &name)
                .await?
                .ok_or_else(|| {
                    ApiError::field(
                        "calendar",
                        format!("namespace {namespace} has no calendar {name}"),
                    )
                })?;
            Some((found.id, mode))
        }
        None => None,
    };
    store::triggers::set_extras(&mut *conn, id, calendar, jitter_secs, max_fires).await?;
    if draft.after.is_some() {
        let after = match after {
            Some(after) => Some((
                upstream_job(conn, namespace, &after.job).await?,
                after.within_secs,
            )),
            None => None,
        };
        store::triggers::set_after(&mut *conn, id, after).await?;
    }
    Ok(())
}

/// The id of the job of `namespace` a trigger's `after` names; 422 naming `after.job`
/// when there is none.
async fn upstream_job(conn: &mut PgConnection, namespace: &str, name: &str) -> Result<i64, ApiError> {
    store::jobs::id_by_name(&mut *conn, namespace, name)
        .await?
        .ok_or_else(|| ApiError::field("after.job", format!("namespace {namespace} has no job {name}")))
}

/// Deletes a trigger (its runs stay).
pub async fn delete(handles: &Handles, who: &Principal, id: i64) -> Result<i64, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let job_id = delete_in(&mut tx, who, id).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, "trigger deleted");
    Ok(job_id)
}

/// [`delete`] in the caller's transaction (its audit row included); the trigger's job.
pub async fn delete_in(conn: &mut PgConnection, who: &Principal, id: i64) -> Result<i64, ApiError> {
    let before = store::triggers::get_for_update(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let namespace = namespace_of(conn, who, &before).await?;
    who.require_operator(&namespace, "delete triggers")?;
    store::triggers::delete(&mut *conn, id).await?;
    let change = Change {
        action: "trigger.delete",
        object_type: "trigger",
        object_id: Some(id),
        before: snapshot(&before),
        after: None,
    };
    store::audit::record_in(&mut *conn, who.actor(), Some(&namespace), change).await?;
    Ok(before.job_id)
}

/// Pauses (true) or resumes (false) a trigger.
pub async fn set_paused(
    handles: &Handles,
    who: &Principal,
    id: i64,
    paused: bool,
) -> Result<Trigger, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let before = store::triggers::get_for_update(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    let namespace = namespace_of(&mut tx, who, &before).await?;
    who.require_operator(
        &namespace,
        if paused {
            "pause triggers"
        } else {
            "resume triggers"
        },
    )?;
    let mut after = store::triggers::set_paused(&mut *tx, id, paused)
        .await?
        .ok_or_else(|| ApiError::not_found("trigger", id))?;
    if before.paused && !paused {
        super::resume::skip_paused_instants(&mut tx, std::slice::from_ref(&after)).await?;
        after = store::triggers::get(&mut *tx, id)
            .await?
            .ok_or_else(|| ApiError::not_found("trigger", id))?;
    }
    let change = Change {
        action: if paused { "trigger.pause" } else { "trigger.resume" },
        object_type: "trigger",
        object_id: Some(id),
        before: Some(json!({"paused": before.paused, "version": before.version})),
        after: Some(json!({"paused": after.paused, "version": after.version})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(trigger.id = id, paused, "trigger pause flag set");
    Ok(after)
}

/// The answer of the schedule preview.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Preview {
    /// The next instants, in order (fewer when the schedule runs out).
    pub instants: Vec<DateTime<Utc>>,
    /// The cron expression its `H` items resolve to for the job or workflow named
    /// (absent when the cron holds no `H`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_cron: Option<String>,
    /// The instants among them that will not run, and why (the calendar excludes them,
    /// a maintenance window covers them); absent when every one runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedInstant>,
}

/// An instant that will be recorded skipped.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SkippedInstant {
    /// The instant.
    pub instant: DateTime<Utc>,
    /// Why.
    pub reason: String,
}

/// The next instants of a definition: up to `count` (default [`DEFAULT_PREVIEW`]) from
/// `after` (default now), with those its calendar or a maintenance window hold back.
pub async fn preview(
    handles: &Handles,
    who: &Principal,
    request: PreviewRequest,
) -> Result<Preview, ApiError> {
    let job_id = request.job_id.flatten();
    let (count, after, Definition { schedule, extras, .. }) =
        request.definition(DEFAULT_PREVIEW, MAX_PREVIEW)?;
    let resolved_cron = match &schedule.schedule {
        Schedule::Cron(spec) => spec.resolved_expression(),
        _ => None,
    };
    let count = usize::try_from(count).unwrap_or(1);
    // Like a trigger created at `after`: its first instant may be `after` itself.
    let first = schedule.first_at_or_after(after);
    let mut instants: Vec<DateTime<Utc>> = first.into_iter().collect();
    if let Some(first) = first {
        instants.extend(schedule.upcoming(first, count.saturating_sub(1)));
    }
    let skipped = skipped_of(handles, who, job_id, &extras, &instants).await?;
    Ok(Preview {
        instants,
        resolved_cron,
        skipped,
    })
}

/// The previewed instants held back: by the calendar named (of the job's namespace) and
/// by the maintenance windows over the job.
async fn skipped_of(
    handles: &Handles,
    who: &Principal,
    job_id: Option<i64>,
    extras: &ExtrasDraft,
    instants: &[DateTime<Utc>],
) -> Result<Vec<SkippedInstant>, ApiError> {
    let (Some(first), Some(last)) = (instants.first(), instants.last()) else {
        return Ok(Vec::new());
    };
    let job = match job_id {
        Some(id) => Some(super::jobs::visible(&mut *handles.pool.acquire().await?, who, id, false).await?),
        None => None,
    };
    let rule = match (extras.calendar.clone().flatten(), &job) {
        (Some(name), Some(job)) => {
            let stored = store::calendars::get(&handles.pool, &job.namespace, &name)
                .await?
                .ok_or_else(|| {
                    ApiError::field(
                        "calendar",
                        format!("namespace {} has no calendar {name}", job.namespace),
                    )
                })?;
            let calendar = stored
                .calendar()
                .map_err(|err| ApiError::field("calendar", err.to_string()))?;
            let mode = extras.calendar_mode.flatten().unwrap_or(CalendarMode::Exclude);
            Some(CalendarRule { calendar, mode })
        }
        (Some(_), None) => {
            return Err(ApiError::field(
                "job_id",
                "required to preview a calendar: it names the namespace",
            ))
        }
        (None, _) => None,
    };
    let windows = store::maintenance::overlapping(&handles.pool, *first, *last).await?;
    let facts = job.as_ref().map(|job| JobFacts {
        name: &job.name,
        namespace: &job.namespace,
        selector: &job.selector,
    });
    Ok(instants
        .iter()
        .filter_map(|instant| {
            maintenance::held(*instant, facts, &windows, rule.as_ref()).map(|held| SkippedInstant {
                instant: *instant,
                reason: held.reason(),
            })
        })
        .collect())
}
