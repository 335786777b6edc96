//! Jobs: create, read, list, edit (version-checked), delete, pause, resume, run now.
//! Pausing or resuming wakes the executors (the job's triggers become due or stop being
//! due without a row of `triggers` changing).

use std::sync::Arc;

use chrono::Utc;
use probactr_common::jobspec::redact_secrets;
use probactr_common::model::{Job, JobMode};
use probactr_common::store::services::ReplicaHolder;
use probactr_common::store::{self, StoreError};
use probactr_common::store::{audit::Change, jobs::JobChildren, jobs::JobFilter};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::Handles;
use super::{snapshot, Paged};
use crate::auth::Principal;
use crate::command::job::{with_children, ChildDraft, KnownJobs};
use crate::command::params;
use crate::command::{JobDraft, JobPatch};
use crate::error::ApiError;
use crate::input::Page;
use probactr_common::params_schema::masked;

mod view;

pub use view::{JobView, RetryView};

/// A store error, with the name's uniqueness turned into a field error.
pub(super) fn name_taken(err: StoreError) -> ApiError {
    match &err {
        StoreError::Database(db) if store::is_unique_violation(db, "jobs_name_unique") => {
            ApiError::field("name", "is already taken by another job")
        }
        _ => err.into(),
    }
}

/// One job, with statistics, as `who` may see it.
pub async fn get(handles: &Handles, who: &Principal, id: i64) -> Result<JobView, ApiError> {
    let db = handles.read_pool(who);
    let row = store::jobs::get_with_stats(db, id)
        .await?
        .ok_or_else(|| ApiError::not_found("job", id))?;
    who.role_for(&row.job.namespace, "job", id)?;
    Ok(JobView::from(row).visible_to(who))
}

/// One job `who` sees (a 404 for any other); `lock` takes it FOR UPDATE.
pub async fn visible(conn: &mut PgConnection, who: &Principal, id: i64, lock: bool) -> Result<Job, ApiError> {
    let job = if lock {
        store::jobs::get_for_update(&mut *conn, id).await?
    } else {
        store::jobs::get(&mut *conn, id).await?
    };
    let job = job.ok_or_else(|| ApiError::not_found("job", id))?;
    who.role_for(&job.namespace, "job", id)?;
    Ok(job)
}

/// 422 naming each secret the job's spec refers to (`{{ secrets.NAME }}`) that does not
/// exist in the job's namespace: secrets are looked up in the job's own namespace only.
pub(super) async fn check_secrets(
    conn: &mut PgConnection,
    job: &store::jobs::NewJob,
) -> Result<(), ApiError> {
    let mut named = probactr_common::secrets::references(&job.spec.to_string());
    named.sort();
    named.dedup();
    if named.is_empty() {
        return Ok(());
    }
    let present = store::namespaces::secrets_present(&mut *conn, &job.namespace, &named).await?;
    let missing: Vec<&String> = named.iter().filter(|name| !present.contains(name)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|name| name.as_str()).collect();
    Err(ApiError::field(
        "spec",
        format!("no secret {} in namespace {}", names.join(", "), job.namespace),
    ))
}

/// A page of jobs, as `who` may see them. Requests for the same page while it is being
/// read share that read ([`super::single_flight`]).
pub async fn list(
    handles: &Handles,
    who: &Principal,
    filter: &JobFilter,
    page: Page,
) -> Result<Paged<JobView>, ApiError> {
    let db = handles.read_pool(who);
    let mut filter = filter.clone();
    filter.namespaces = scoped(who, filter.namespaces.take());
    let key = PageKey {
        q: filter.q.clone(),
        kind: filter.kind.map(|kind| kind.as_str()),
        paused: filter.paused,
        namespaces: filter.namespaces.clone(),
        limit: page.limit,
        offset: page.offset,
        from_primary: std::ptr::eq(db, &handles.pool),
    };
    let read = || async move {
        let (rows, total) = store::jobs::list_with_stats(db, &filter, page).await?;
        Ok::<_, StoreError>(Paged {
            items: rows.into_iter().map(JobView::from).collect(),
            total,
        })
    };
    // Only reads of the primary are shared: a replica's read begun before it replayed a
    // user's change could otherwise be joined by that user once it has.
    let shared = if key.from_primary {
        handles
            .job_pages
            .read(key, handles.reads.writes_served(), read)
            .await?
    } else {
        Arc::new(read().await?)
    };
    Ok(Paged {
        items: shared
            .items
            .iter()
            .map(|job| job.clone().visible_to(who))
            .collect(),
        total: shared.total,
    })
}

/// What a page of the job list reads: its filters (the namespaces narrowed to those the
/// caller sees), its place, and the database it is read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageKey {
    q: Option<String>,
    kind: Option<&'static str>,
    paused: Option<bool>,
    namespaces: Option<Vec<String>>,
    limit: i64,
    offset: i64,
    from_primary: bool,
}

/// A list's namespaces narrowed to those `who` sees: `asked` holds the namespace the
/// caller asked for (one at most), None for every one they see.
pub fn scoped(who: &Principal, asked: Option<Vec<String>>) -> Option<Vec<String>> {
    let asked = asked.and_then(|names| names.into_iter().next());
    who.access.listing(asked.as_deref())
}

/// A job as the audit log keeps it: its possible secrets redacted.
pub(super) fn audited(job: &Job) -> Option<Value> {
    let mut value = snapshot(job)?;
    if let Some(spec) = value.get("spec") {
        value["spec"] = redact_secrets(spec);
    }
    Some(value)
}

/// How many jobs `who` sees match `filter`.
pub async fn count(handles: &Handles, who: &Principal, filter: &JobFilter) -> Result<i64, ApiError> {
    let mut filter = filter.clone();
    filter.namespaces = scoped(who, filter.namespaces.take());
    Ok(store::jobs::count(&handles.pool, &filter).await?)
}

/// A job's name (None once it is deleted, or when `who` does not see it).
pub async fn name_of(handles: &Handles, who: &Principal, id: i64) -> Result<Option<String>, ApiError> {
    Ok(store::jobs::get(&handles.pool, id)
        .await?
        .filter(|job| who.access.sees(&job.namespace))
        .map(|job| job.name))
}

/// Creates a job.
pub async fn create(handles: &Handles, who: &Principal, draft: JobDraft) -> Result<JobView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let created = create_in(&mut tx, who, draft).await?;
    tx.commit().await?;
    tracing::info!(job.id = created.id, kind = %created.kind, "job created");
    get(handles, who, created.id).await
}

/// Creates a job and its first trigger in one transaction: both or neither. Every bad
/// field of both is reported at once, the trigger's under `trigger.` (`trigger.cron`).
pub async fn create_with_trigger(
    handles: &Handles,
    who: &Principal,
    draft: JobDraft,
    trigger: crate::command::TriggerDraft,
) -> Result<JobView, ApiError> {
    // The trigger's own checks need no job: made first, so that a bad job does not hide
    // a bad schedule.
    let trigger_checked = trigger.clone().definition(None, Utc::now(), 0).map(drop);
    let mut tx = handles.pool.begin().await?;
    let job = create_in(&mut tx, who, draft).await;
    let (job, trigger_checked) = match (job, trigger_checked) {
        (Ok(job), Ok(())) => (job, Ok(())),
        (Err(ApiError::Invalid(mut errors)), Err(ApiError::Invalid(theirs))) => {
            errors.extend(under_trigger(theirs));
            return Err(ApiError::Invalid(errors));
        }
        (Err(err), _) => return Err(err),
        (Ok(job), Err(err)) => (job, Err(err)),
    };
    let created = match trigger_checked {
        Ok(()) => {
            super::triggers::create_in(&mut tx, handles.secret_keys.as_deref(), who, job.id, trigger).await
        }
        Err(err) => Err(err),
    };
    let created = created.map_err(|err| match err {
        ApiError::Invalid(errors) => ApiError::Invalid(under_trigger(errors)),
        other => other,
    })?;
    tx.commit().await?;
    tracing::info!(job.id = job.id, trigger.id = created.trigger.id, kind = %job.kind, "job created with a trigger");
    get(handles, who, job.id).await
}

/// A trigger's field errors under `trigger.`.
fn under_trigger(errors: crate::error::FieldErrors) -> crate::error::FieldErrors {
    errors
        .into_iter()
        .map(|(field, message)| (format!("trigger.{field}"), message))
        .collect()
}

/// [`create`] in the caller's transaction (its audit row included); the job as written.
pub async fn create_in(conn: &mut PgConnection, who: &Principal, draft: JobDraft) -> Result<Job, ApiError> {
    let asked = match &draft.namespace {
        Some(None) => return Err(ApiError::field("namespace", "must not be null")),
        Some(Some(name)) => Some(name.clone()),
        None => None,
    };
    let namespace = super::namespaces::for_creation(conn, who, asked.as_deref()).await?;
    who.require_operator(&namespace, "create jobs")?;
    if let Some(kind) = draft.requested_kind() {
        who.require_job_kind(&namespace, kind)?;
    }
    let known = known_jobs(conn, &namespace, &draft.children, None).await?;
    let children = draft.children.checked(&JobChildren::default(), None, &known);
    let (mut job, children) = with_children(draft.definition(None), children)?;
    job.namespace = namespace.clone();
    check_secrets(conn, &job).await?;
    check_pool(conn, &job).await?;
    // The namespace's row is locked until the transaction ends, so that concurrent
    // creations are counted one after the other against its quota.
    let quota = store::namespaces::get_for_update(&mut *conn, &namespace)
        .await?
        .ok_or_else(|| ApiError::field("namespace", format!("no namespace {namespace}")))?;
    if let Some(max_jobs) = quota.max_jobs {
        let count = store::namespaces::job_count(&mut *conn, &namespace).await?;
        if count >= i64::from(max_jobs) {
            return Err(ApiError::Conflict(format!(
                "namespace {namespace} holds {count} jobs, its quota (max_jobs {max_jobs})"
            )));
        }
    }
    let created = store::jobs::insert(&mut *conn, &job).await.map_err(name_taken)?;
    store::jobs::set_children(&mut *conn, created.id, &children).await?;
    super::job_versions::keep(&mut *conn, who, &created, &job, "create", None).await?;
    let change = Change {
        action: "job.create",
        object_type: "job",
        object_id: Some(created.id),
        before: None,
        after: audited(&created),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(created)
}

/// Edits a job; the patch must carry the `version` the caller read.
pub async fn update(
    handles: &Handles,
    who: &Principal,
    id: i64,
    patch: JobPatch,
) -> Result<JobView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let after = update_in(&mut tx, who, id, patch).await?;
    tx.commit().await?;
    tracing::info!(job.id = id, version = after.version, "job updated");
    get(handles, who, id).await
}

/// [`update`] in the caller's transaction (its audit row included); the job as written.
pub async fn update_in(
    conn: &mut PgConnection,
    who: &Principal,
    id: i64,
    patch: JobPatch,
) -> Result<Job, ApiError> {
    let before = visible(conn, who, id, true).await?;
    let namespace = before.namespace.clone();
    who.require_operator(&namespace, "edit jobs")?;
    who.require_job_kind(&namespace, before.kind)?;
    if let Some(kind) = patch.draft.requested_kind() {
        who.require_job_kind(&namespace, kind)?;
    }
    let children_before = store::jobs::children(&mut *conn, id).await?.unwrap_or_default();
    let known = known_jobs(conn, &namespace, &patch.draft.children, Some(id)).await?;
    let children = patch.draft.children.checked(&children_before, Some(id), &known);
    let ((version, job), children) = with_children(patch.definition(&before), children)?;
    who.require_job_kind(&namespace, job.kind)?;
    check_secrets(conn, &job).await?;
    check_pool(conn, &job).await?;
    refuse_deleted(&before)?;
    if version != before.version {
        return Err(stale_by(conn, "job", id, version, before.version).await);
    }
    refuse_triggered_service(conn, &before, &job).await?;
    super::job_versions::keep_before(&mut *conn, &before).await?;
    let after = store::jobs::update(&mut *conn, id, version, &job)
        .await
        .map_err(name_taken)?
        .ok_or_else(|| stale("job", id, version, before.version))?;
    store::jobs::set_children(&mut *conn, id, &children).await?;
    super::job_versions::keep(&mut *conn, who, &after, &job, "update", None).await?;
    let change = Change {
        action: "job.update",
        object_type: "job",
        object_id: Some(id),
        before: audited(&before),
        after: audited(&after),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(after)
}

/// A job becoming a service must have no triggers (a service is kept running, not fired).
pub(crate) async fn refuse_triggered_service(
    conn: &mut PgConnection,
    before: &Job,
    job: &store::jobs::NewJob,
) -> Result<(), ApiError> {
    if job.mode != JobMode::Service || before.mode == JobMode::Service {
        return Ok(());
    }
    let triggers = store::triggers::list_for_job(&mut *conn, before.id).await?;
    if triggers.is_empty() {
        return Ok(());
    }
    Err(ApiError::field(
        "mode",
        format!(
            "a service takes no triggers: delete the job's {} trigger(s) first",
            triggers.len()
        ),
    ))
}

/// A job's pool must be one of its namespace's, with at least the slots each run holds.
/// The pool stays share-locked until the caller's transaction ends, so that a concurrent
/// resize (which refuses to strand a job) sees this job's weight.
pub(crate) async fn check_pool(conn: &mut PgConnection, job: &store::jobs::NewJob) -> Result<(), ApiError> {
    let Some(name) = &job.pool else {
        return Ok(());
    };
    let pool = store::pools::get_for_share(&mut *conn, &job.namespace, name)
        .await?
        .ok_or_else(|| ApiError::field("pool", format!("no pool {name} in namespace {}", job.namespace)))?;
    if job.pool_slots > pool.slots {
        return Err(ApiError::field(
            "pool_slots",
            format!("must be at most the {} slots of pool {name}", pool.slots),
        ));
    }
    Ok(())
}

/// The jobs the child lists of a draft may name (those of its namespace); for an edit of
/// job `own_id`, which of the named ones lead back to it.
async fn known_jobs(
    conn: &mut PgConnection,
    namespace: &str,
    children: &ChildDraft,
    own_id: Option<i64>,
) -> Result<KnownJobs, ApiError> {
    let mut known = KnownJobs::default();
    if !children.any_given() {
        return Ok(known);
    }
    known.by_name = store::jobs::names(&mut *conn, Some(std::slice::from_ref(&namespace.to_owned())))
        .await?
        .into_iter()
        .map(|(id, name)| (name, id))
        .collect();
    if let Some(own_id) = own_id {
        for id in children.named_ids(&known) {
            if store::jobs::children_reach(&mut *conn, &[id], own_id).await? {
                known.leading_back.insert(id);
            }
        }
    }
    Ok(known)
}

/// One of a job's child lists, named, for its page.
#[derive(Debug, Clone, Serialize)]
pub struct NamedChildren {
    /// What the list is.
    pub label: &'static str,
    /// Its jobs: id and name.
    pub jobs: Vec<NamedJob>,
}

/// A job's id and name.
#[derive(Debug, Clone, Serialize)]
pub struct NamedJob {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
}

/// A job's non-empty child lists with the children's names.
pub async fn children_named(handles: &Handles, job: &JobView) -> Result<Vec<NamedChildren>, ApiError> {
    let lists = [
        ("Then, on success", &job.on_success),
        ("Then, on failure", &job.on_failure),
        ("Then, whatever the end", &job.on_finish),
    ];
    let ids: Vec<i64> = lists.iter().flat_map(|(_, ids)| ids.iter().copied()).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let names: std::collections::HashMap<i64, String> = store::jobs::get_many(&handles.pool, &ids)
        .await?
        .into_iter()
        .map(|child| (child.id, child.name))
        .collect();
    Ok(lists
        .into_iter()
        .filter(|(_, ids)| !ids.is_empty())
        .map(|(label, ids)| NamedChildren {
            label,
            jobs: ids
                .iter()
                .filter_map(|id| {
                    names.get(id).map(|name| NamedJob {
                        id: *id,
                        name: name.clone(),
                    })
                })
                .collect(),
        })
        .collect())
}

/// [`stale`], saying who made the change that won and when (from the audit log), so that
/// an admin form can tell its user whose change they would have overwritten.
pub async fn stale_by(db: &mut PgConnection, what: &str, id: i64, sent: i64, current: i64) -> ApiError {
    match store::audit::last_change(db, what, id).await {
        Ok(Some((actor, at))) => ApiError::Stale(format!(
            "{what} {id} was changed by {actor} at {} (now version {current}; you edited version {sent}): \
             your change was not saved; reload to see theirs and edit again",
            at.format("%Y-%m-%d %H:%M:%S UTC")
        )),
        _ => stale(what, id, sent, current),
    }
}

/// The 409 of a stale `version`.
pub fn stale(what: &str, id: i64, sent: i64, current: i64) -> ApiError {
    ApiError::Stale(format!(
        "{what} {id} changed since it was read (version {sent} sent, {current} current); reload and retry"
    ))
}

/// Deletes a job. With `erase_history` its runs go with it; without, the job is retired
/// (see `store::jobs::retire`): its triggers are removed, its live runs cancelled, and
/// its history stays readable under "NAME (deleted #ID)". A retired job can still be
/// erased.
pub async fn delete(
    handles: &Handles,
    who: &Principal,
    id: i64,
    erase_history: bool,
) -> Result<(), ApiError> {
    let mut tx = handles.pool.begin().await?;
    delete_in(&mut tx, who, id, erase_history).await?;
    tx.commit().await?;
    tracing::info!(job.id = id, erase_history, "job deleted");
    Ok(())
}

/// [`delete`] in the caller's transaction (its audit row included).
pub async fn delete_in(
    conn: &mut PgConnection,
    who: &Principal,
    id: i64,
    erase_history: bool,
) -> Result<(), ApiError> {
    let before = visible(conn, who, id, true).await?;
    who.require_operator(&before.namespace, "delete jobs")?;
    who.require_job_kind(&before.namespace, before.kind)?;
    let workflows = store::workflows::names_using_job(&mut *conn, id).await?;
    if !workflows.is_empty() {
        return Err(ApiError::Conflict(format!(
            "job {} is a step of the workflows {}: take it out of them first",
            before.name,
            workflows.join(", ")
        )));
    }
    if erase_history {
        store::jobs::forget_child(&mut *conn, id).await?;
        store::jobs::delete(&mut *conn, id).await?;
    } else if before.deleted_at.is_some() {
        return Err(ApiError::Conflict(format!(
            "{} is already deleted; erase its history to remove it for good",
            before.name
        )));
    } else {
        store::jobs::forget_child(&mut *conn, id).await?;
        store::triggers::delete_for_job(&mut *conn, id).await?;
        for run_id in store::runs::live_of_job(&mut *conn, id).await? {
            store::runs::request_cancel(&mut *conn, run_id, "its job was deleted").await?;
        }
        store::jobs::retire(&mut *conn, id).await?;
    }
    let change = Change {
        action: "job.delete",
        object_type: "job",
        object_id: Some(id),
        before: audited(&before),
        after: (!erase_history).then(|| json!({"history": "kept"})),
    };
    store::audit::record(&mut *conn, who.actor(), change).await?;
    Ok(())
}

/// Refuses changes to a deleted job (its history is only there to be read).
pub(super) fn refuse_deleted(job: &Job) -> Result<(), ApiError> {
    match job.deleted_at {
        Some(_) => Err(ApiError::Conflict(format!(
            "{} was deleted; its history is kept to be read, not changed",
            job.name
        ))),
        None => Ok(()),
    }
}

/// Pauses (true) or resumes (false) a job.
pub async fn set_paused(
    handles: &Handles,
    who: &Principal,
    id: i64,
    paused: bool,
) -> Result<JobView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let before = visible(&mut tx, who, id, true).await?;
    who.require_operator(
        &before.namespace,
        if paused { "pause jobs" } else { "resume jobs" },
    )?;
    refuse_deleted(&before)?;
    let after = store::jobs::set_paused(&mut *tx, id, paused)
        .await?
        .ok_or_else(|| ApiError::not_found("job", id))?;
    if before.paused && !paused {
        let resumed: Vec<_> = store::triggers::list_for_job(&mut *tx, id)
            .await?
            .into_iter()
            .filter(|trigger| !trigger.paused)
            .collect();
        super::resume::skip_paused_instants(&mut tx, &resumed).await?;
    }
    store::jobs::notify_schedule_changed(&mut *tx).await?;
    let change = Change {
        action: if paused { "job.pause" } else { "job.resume" },
        object_type: "job",
        object_id: Some(id),
        before: Some(json!({"paused": before.paused, "version": before.version})),
        after: Some(json!({"paused": after.paused, "version": after.version})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(job.id = id, paused, "job pause flag set");
    get(handles, who, id).await
}

/// Reads run-now parameters: a JSON object given as `{"params": {...}}` (API) or as the
/// object's text (the admin's params editor); nothing (or blank) means none.
pub fn read_params(text: &str, wrapped: bool) -> Result<Value, ApiError> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    let value: Value = serde_json::from_str(text).map_err(|err| {
        ApiError::field(
            if wrapped { "body" } else { "params" },
            format!("not JSON: {err}"),
        )
    })?;
    let params = if wrapped {
        match value {
            Value::Object(mut body) => body.remove("params").unwrap_or_else(|| json!({})),
            _ => return Err(ApiError::field("body", "must be a JSON object")),
        }
    } else {
        value
    };
    if !params.is_object() {
        return Err(ApiError::field("params", "must be a JSON object"));
    }
    Ok(params)
}

/// Queues a run of a job now with `params` (a JSON object, `{}` for none); returns the
/// run's id (the first of the instant's runs when the job's route fans out).
pub async fn run_now(handles: &Handles, who: &Principal, id: i64, params: &Value) -> Result<i64, ApiError> {
    let mut tx = handles.pool.begin().await?;
    let job = visible(&mut tx, who, id, false).await?;
    who.require_operator(&job.namespace, "run jobs")?;
    check_runnable_by_hand(&job)?;
    let params = &params::checked(
        job.params_schema.as_ref(),
        params,
        params::Given::Whole,
        handles.secret_keys.as_deref(),
        "params",
    )?;
    let runs = store::runs::queue_now_fanned_out(&mut *tx, id).await?;
    let Some(run) = runs.first().cloned() else {
        return Err(ApiError::not_found("job", id));
    };
    let given = params.as_object().is_some_and(|params| !params.is_empty());
    if given {
        for run in &runs {
            store::run_inputs::set_params(&mut *tx, run.id, params).await?;
        }
    }
    let change = Change {
        action: "job.run",
        object_type: "job",
        object_id: Some(id),
        before: None,
        after: Some(if given {
            json!({"run_id": run.id, "params": masked(params)})
        } else {
            json!({"run_id": run.id})
        }),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(job.id = id, run.id = run.id, "run queued by hand");
    Ok(run.id)
}

/// Refuses a run by hand of a job that would not run it: a paused job (its runs are not
/// claimed: queued now, one would wait unseen) or a service (its replicas run
/// continuously).
pub fn check_runnable_by_hand(job: &Job) -> Result<(), ApiError> {
    if job.paused {
        return Err(ApiError::Conflict(format!(
            "job {} is paused: resume it to run it",
            job.name
        )));
    }
    if job.mode == JobMode::Service {
        return Err(ApiError::Conflict(format!(
            "job {} is a service: its replicas run continuously (pause, resume or change replicas instead)",
            job.name
        )));
    }
    Ok(())
}

/// Which executor holds each live instance of a service (empty for a batch job).
pub async fn replicas(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<ReplicaHolder>, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    visible(&mut conn, who, id, false).await?;
    Ok(store::services::holders(&handles.pool, id).await?)
}
