//! Maintenance windows and the cluster pause (cluster admins): a window skips or defers
//! the instants it covers (see `probactr_common::maintenance`); the firing reads the
//! windows at each batch, so a window takes effect from the next instant on. A window
//! may stop the runs running in its scope when it is made (each is cancelled and
//! stopped with its job's grace). The cluster pause is an open-ended `skip` window over
//! every job; the resume ends it.

use chrono::{DateTime, Utc};
use probactr_common::maintenance::{Policy, Scope, Window, WindowPlan};
use probactr_common::store::{self, audit::Change};
use serde::Serialize;
use serde_json::json;

use super::Handles;
use crate::auth::Principal;
use crate::error::ApiError;

/// The reason of the window a cluster pause opens.
pub const CLUSTER_PAUSE_REASON: &str = "cluster paused";

/// A window as given, before it is checked.
#[derive(Debug, Clone)]
pub struct WindowDraft {
    /// Its start (None: now).
    pub from: Option<DateTime<Utc>>,
    /// Its end (None: until deleted).
    pub until: Option<DateTime<Utc>>,
    /// The scope as given.
    pub scope: serde_json::Value,
    /// skip or defer.
    pub policy: Policy,
    /// Why.
    pub reason: String,
    /// Stop the runs running now in its scope.
    pub stop_running: bool,
}

/// The windows not over: active now, or to come.
pub async fn current(handles: &Handles) -> Result<Vec<Window>, ApiError> {
    let now = store::db_now(&handles.pool).await?;
    Ok(store::maintenance::current(&handles.pool, now).await?)
}

/// The windows active now and the next one to begin, for headers.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct Outlook {
    /// Open now.
    pub active: Vec<Window>,
    /// The next to begin.
    pub next: Option<Window>,
}

/// What is open now and what opens next.
pub async fn outlook(handles: &Handles) -> Result<Outlook, ApiError> {
    let now = store::db_now(&handles.pool).await?;
    let windows = store::maintenance::current(&handles.pool, now).await?;
    let (active, coming): (Vec<Window>, Vec<Window>) = windows.into_iter().partition(|w| w.covers(now));
    Ok(Outlook {
        active,
        next: coming.into_iter().next(),
    })
}

/// Opens a window (cluster admins); every bad field is a 422 naming it.
pub async fn create(handles: &Handles, who: &Principal, draft: WindowDraft) -> Result<Window, ApiError> {
    who.require_cluster_admin("manage maintenance windows")?;
    let now = store::db_now(&handles.pool).await?;
    let window = checked(draft, now)?;
    let mut tx = handles.pool.begin().await?;
    let created = store::maintenance::create(&mut *tx, &window, &who.username).await?;
    let stopped = if window.stop_running {
        stop_running(&mut tx, &created).await?
    } else {
        0
    };
    let change = Change {
        action: "maintenance.create",
        object_type: "maintenance",
        object_id: Some(created.id),
        before: None,
        after: Some(json!(created)),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(maintenance.id = created.id, from = %created.plan.from, until = ?created.plan.until,
        policy = created.plan.policy.as_str(), stopped, "maintenance window opened");
    Ok(created)
}

fn checked(draft: WindowDraft, now: DateTime<Utc>) -> Result<WindowPlan, ApiError> {
    let from = draft.from.unwrap_or(now);
    if draft.until.is_some_and(|until| until <= from) {
        return Err(ApiError::field("until", "must be later than from"));
    }
    if draft.policy == Policy::Defer && draft.until.is_none() {
        return Err(ApiError::field(
            "until",
            "required for defer: the deferred instants fire at the window's end",
        ));
    }
    if draft.reason.chars().count() > 1000 {
        return Err(ApiError::field("reason", "must be at most 1000 characters"));
    }
    let scope: Scope = serde_json::from_value(draft.scope).map_err(|_| scope_error())?;
    let valid = match &scope {
        Scope::All { all } => *all,
        Scope::Jobs { jobs } => !jobs.is_empty(),
        Scope::Selector { selector } => !selector.is_empty(),
    };
    if !valid {
        return Err(scope_error());
    }
    Ok(WindowPlan {
        from,
        until: draft.until,
        scope,
        policy: draft.policy,
        reason: draft.reason,
        stop_running: draft.stop_running,
    })
}

fn scope_error() -> ApiError {
    ApiError::field(
        "scope",
        "must be {\"all\": true}, {\"jobs\": [\"name\", …]} (not empty) or {\"selector\": {\"key\": \"value\"}} (not empty; namespace or executor labels)",
    )
}

/// Asks every running run in the window's scope to stop; returns how many.
async fn stop_running(conn: &mut sqlx::PgConnection, window: &Window) -> Result<usize, ApiError> {
    let reason = window.reason_text();
    let mut stopped = 0;
    for (run_id, job) in store::runs::running_with_jobs(&mut *conn).await? {
        if window.applies_to(Some(job.facts())) {
            store::runs::request_cancel(&mut *conn, run_id, &reason).await?;
            tracing::info!(
                run.id = run_id,
                maintenance.id = window.id,
                "run stopped for maintenance"
            );
            stopped += 1;
        }
    }
    Ok(stopped)
}

/// Deletes a window (cluster admins); the instants it skipped stay recorded.
pub async fn delete(handles: &Handles, who: &Principal, id: i64) -> Result<(), ApiError> {
    who.require_cluster_admin("manage maintenance windows")?;
    let mut tx = handles.pool.begin().await?;
    if !store::maintenance::delete(&mut *tx, id).await? {
        return Err(ApiError::not_found("maintenance window", id));
    }
    let change = Change {
        action: "maintenance.delete",
        object_type: "maintenance",
        object_id: Some(id),
        before: None,
        after: None,
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(maintenance.id = id, "maintenance window deleted");
    Ok(())
}

/// Pauses the cluster: an open-ended `skip` window over every job, from now.
pub async fn pause_cluster(handles: &Handles, who: &Principal) -> Result<Window, ApiError> {
    let draft = WindowDraft {
        from: None,
        until: None,
        scope: json!({"all": true}),
        policy: Policy::Skip,
        reason: CLUSTER_PAUSE_REASON.to_owned(),
        stop_running: false,
    };
    create(handles, who, draft).await
}

/// Resumes the cluster: ends every open-ended window over every job now; returns how
/// many it ended.
pub async fn resume_cluster(handles: &Handles, who: &Principal) -> Result<u64, ApiError> {
    who.require_cluster_admin("manage maintenance windows")?;
    let mut tx = handles.pool.begin().await?;
    let now = store::db_now(&mut *tx).await?;
    let ended = store::maintenance::end_cluster_pauses(&mut *tx, now).await?;
    let change = Change {
        action: "cluster.resume",
        object_type: "maintenance",
        object_id: None,
        before: None,
        after: Some(json!({"ended": ended})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(ended, "cluster resumed");
    Ok(ended)
}
