//! The cluster summary behind `GET /api/v1/status` and the dashboard, computed at most
//! once per [`STATUS_MAX_AGE`] by each manager however many people and scripts watch it.
//!
//! Its counts of the last hour's runs read every run of that hour, so their cost grows
//! with the cluster's load; a summary a second old is as good to a viewer, and with it
//! the database pays for one computation a second, not one per viewer. One request
//! recomputes a stale summary; the others meanwhile get the stale one rather than wait
//! (the computation reads a whole hour of runs, and every viewer stalling on it once a
//! second was most of the endpoint's slowest answers). A computation is bounded by
//! [`STATUS_COMPUTE_TIMEOUT`], so a summary served is at most that much older than
//! [`STATUS_MAX_AGE`]; with none kept (the first, or after a failure) requests wait.

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use probactr_common::labels::{self, Labels};
use probactr_common::model::{Process, ProcessRole};
use probactr_common::store::audit::{self, Change, Entry};
use probactr_common::store::processes::Routing;
use probactr_common::store::{self, cluster::Metrics, cluster::Status, Page};
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use super::Handles;
use super::Paged;
use crate::auth::Principal;
use crate::error::{ApiError, FieldErrors};
use crate::input::QueryParams;

/// How old a served summary may be.
pub const STATUS_MAX_AGE: Duration = Duration::from_secs(1);

/// How long computing a summary may take; a database that does not answer by then makes
/// the request fail rather than every viewer wait for the request timeout.
pub const STATUS_COMPUTE_TIMEOUT: Duration = Duration::from_secs(5);

/// The latest attempt at a summary and when it ended: a failure is kept as long as a
/// summary would be, so that requests waiting behind a failed computation (a database
/// outage) fail at once instead of each trying again in turn.
#[derive(Debug, Default)]
pub struct StatusCache {
    latest: std::sync::Mutex<Option<Kept>>,
    /// Held by the one request computing a summary.
    computing: Mutex<()>,
}

/// A computed summary, or why there is none.
type Outcome = Result<Arc<Status>, String>;

/// An outcome and when it was reached.
type Kept = (Instant, Outcome);

impl StatusCache {
    /// A summary at most `max_age` old, computed by `compute` (within `limit`) when the
    /// kept one is older; while another request computes it, a summary kept less than
    /// `max_age + limit` ago is served as it is.
    async fn get_or_compute<F, Fut>(
        &self,
        max_age: Duration,
        limit: Duration,
        compute: F,
    ) -> Result<Arc<Status>, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Status, ApiError>>,
    {
        let kept = self.kept();
        if let Some(fresh) = kept.as_ref().and_then(|kept| younger(kept, max_age)) {
            return fresh.map_err(unavailable);
        }
        let stale = kept
            .as_ref()
            .and_then(|kept| younger(kept, max_age + limit))
            .and_then(Result::ok);
        let _computing = match (self.computing.try_lock(), stale) {
            (Ok(guard), _) => guard,
            (Err(_), Some(stale)) => return Ok(stale),
            (Err(_), None) => self.computing.lock().await,
        };
        // Whoever held the lock before may have just computed it.
        if let Some(fresh) = self.kept().as_ref().and_then(|kept| younger(kept, max_age)) {
            return fresh.map_err(unavailable);
        }
        let outcome = match tokio::time::timeout(limit, compute()).await {
            Ok(Ok(status)) => Ok(Arc::new(status)),
            // The cause, kept for the log lines of the requests that share it.
            Ok(Err(ApiError::Internal(cause))) => Err(format!("{cause:#}")),
            Ok(Err(err)) => Err(err.to_string()),
            Err(_) => Err(format!("not computed within {limit:?}")),
        };
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), outcome.clone()));
        outcome.map_err(unavailable)
    }

    fn kept(&self) -> Option<Kept> {
        self.latest.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The kept outcome, if it was reached less than `age` ago.
fn younger((at, outcome): &Kept, age: Duration) -> Option<Outcome> {
    (at.elapsed() < age).then(|| outcome.clone())
}

fn unavailable(why: String) -> ApiError {
    ApiError::Internal(anyhow::anyhow!("the cluster summary is unavailable: {why}"))
}

/// The cluster summary, at most [`STATUS_MAX_AGE`] old.
pub async fn status(handles: &Handles) -> Result<Arc<Status>, ApiError> {
    handles
        .status_cache
        .get_or_compute(handles.status_max_age, STATUS_COMPUTE_TIMEOUT, || async {
            Ok(store::cluster::status(&handles.pool).await?)
        })
        .await
}

/// The cluster summary as `who` may read it: whoever does not see every namespace gets
/// the run counts, failures and next instants of their namespaces (and neither the
/// per-minute counts nor the missed instants, which are cluster-wide).
pub async fn status_for(handles: &Handles, who: &Principal) -> Result<Arc<Status>, ApiError> {
    let status = status(handles).await?;
    let sees_all = who.access.cluster_admin
        || store::namespaces::names(&handles.pool)
            .await?
            .iter()
            .all(|name| who.access.sees(name));
    if sees_all {
        return Ok(status);
    }
    let only = who.access.visible().unwrap_or_default();
    let scoped = store::dashboard::scoped(&handles.pool, &only).await?;
    Ok(Arc::new(Status {
        processes: status.processes.clone(),
        runs_last_hour: scoped.runs_last_hour,
        runs_per_minute: Vec::new(),
        recent_failures: scoped.recent_failures,
        next_fires: scoped.next_fires,
        missed_last_day: 0,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn summary() -> Status {
        Status {
            processes: BTreeMap::new(),
            runs_last_hour: BTreeMap::new(),
            runs_per_minute: Vec::new(),
            recent_failures: Vec::new(),
            next_fires: Vec::new(),
            missed_last_day: 0,
        }
    }

    #[tokio::test]
    async fn a_fresh_summary_is_shared_and_a_stale_one_recomputed() {
        let cache = Arc::new(StatusCache::default());
        let computed = Arc::new(AtomicUsize::new(0));
        let ask = |max_age: Duration| {
            let cache = Arc::clone(&cache);
            let computed = Arc::clone(&computed);
            async move {
                cache
                    .get_or_compute(max_age, Duration::from_secs(60), || async {
                        computed.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok(summary())
                    })
                    .await
                    .map(|_| ())
            }
        };
        let together: Vec<_> = (0..8)
            .map(|_| tokio::spawn(ask(Duration::from_secs(60))))
            .collect();
        for request in together {
            request.await.expect("task").expect("summary");
        }
        assert_eq!(
            computed.load(Ordering::SeqCst),
            1,
            "concurrent requests share one computation"
        );
        ask(Duration::ZERO).await.expect("summary");
        assert_eq!(
            computed.load(Ordering::SeqCst),
            2,
            "a stale summary is recomputed"
        );
    }

    #[tokio::test]
    async fn a_stale_summary_is_served_while_another_request_recomputes_it() {
        let cache = Arc::new(StatusCache::default());
        let long = Duration::from_secs(60);
        cache
            .get_or_compute(long, long, || async { Ok(summary()) })
            .await
            .expect("first summary");
        let (started, start) = tokio::sync::oneshot::channel();
        let recomputing = tokio::spawn({
            let cache = Arc::clone(&cache);
            async move {
                cache
                    .get_or_compute(Duration::ZERO, long, || async {
                        let _ = started.send(());
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        Ok(summary())
                    })
                    .await
            }
        });
        start.await.expect("the recomputation started");
        let served = cache
            .get_or_compute(Duration::ZERO, long, || async {
                Err(ApiError::Conflict("computed twice".into()))
            })
            .await;
        assert!(served.is_ok(), "the stale summary, at once: {served:?}");
        assert!(!recomputing.is_finished());
        recomputing.abort();
    }

    #[tokio::test]
    async fn a_failure_is_shared_like_a_summary_then_retried() {
        let cache = StatusCache::default();
        let long = Duration::from_secs(60);
        let failed = cache
            .get_or_compute(long, long, || async { Err(ApiError::Conflict("down".into())) })
            .await;
        assert!(failed.is_err());
        let waiting_behind_it = cache.get_or_compute(long, long, || async { Ok(summary()) }).await;
        assert!(
            waiting_behind_it.is_err(),
            "a fresh failure is not retried at once"
        );
        let later = cache
            .get_or_compute(Duration::ZERO, long, || async { Ok(summary()) })
            .await;
        assert!(later.is_ok(), "a stale failure is retried");
    }

    #[tokio::test]
    async fn a_computation_that_hangs_fails_after_its_limit() {
        let cache = StatusCache::default();
        let hung = cache
            .get_or_compute(Duration::from_secs(60), Duration::from_millis(50), || async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(summary())
            })
            .await;
        assert!(hung.is_err());
    }
}

/// A registered executor or monitor as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ProcessView {
    /// Id (a new one at each registration).
    pub id: Uuid,
    /// Host name.
    pub host: String,
    /// Process id on that host.
    pub pid: i32,
    /// probactr version.
    pub version: String,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its latest heartbeat.
    pub last_heartbeat_at: DateTime<Utc>,
    /// alive, draining, dead or stopped.
    pub state: String,
    /// Runs it is executing or starting (executors only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<i64>,
    /// Runs it executes at once (executors only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<i32>,
    /// Its labels (`PROBACTR_EXECUTOR_LABELS`), which job selectors match.
    pub labels: Labels,
    /// Claims no new runs (cordoned, or draining).
    pub cordoned: bool,
    /// Asked to drain: it finishes or hands over its runs, then exits.
    pub drain_requested: bool,
}

/// Every registered process of `role`, newest first, executors with their running counts
/// (of the runs of the namespaces `who` sees).
pub async fn processes(
    handles: &Handles,
    who: &Principal,
    role: ProcessRole,
) -> Result<Vec<ProcessView>, ApiError> {
    let processes = store::processes::list(&handles.pool, role).await?;
    let running = match (role, who.access.visible()) {
        (ProcessRole::Executor, None) => store::runs::history::active_by_executor(&handles.pool).await?,
        (ProcessRole::Executor, Some(only)) => {
            store::runs::history::active_by_executor_in(&handles.pool, &only).await?
        }
        (ProcessRole::Monitor, _) => BTreeMap::new(),
    };
    Ok(processes.into_iter().map(|p| view(p, role, &running)).collect())
}

fn view(process: Process, role: ProcessRole, running: &BTreeMap<Uuid, i64>) -> ProcessView {
    let executor = role == ProcessRole::Executor;
    ProcessView {
        running: executor.then(|| running.get(&process.id).copied().unwrap_or(0)),
        capacity: executor.then_some(process.capacity),
        id: process.id,
        host: process.host,
        pid: process.pid,
        version: process.version,
        started_at: process.started_at,
        last_heartbeat_at: process.last_heartbeat_at,
        state: process.state.to_string(),
        labels: labels::from_json(&process.labels),
        cordoned: process.cordoned,
        drain_requested: process.drain_requested,
    }
}

/// Why a queued run waits: its namespace's quota is full ("namespace quota 5/5"), its
/// pool ("pool licence-server 3/3"), a rate ("rate nightly-api 20/10s"), or
/// [`why_waiting`] of its job.
pub async fn why_run_waits(handles: &Handles, run_id: i64, job_id: i64) -> Result<Option<String>, ApiError> {
    if let Some(quota) = store::runs::quota::queued_reason(&handles.pool, run_id).await? {
        return Ok(Some(quota));
    }
    if let Some(pool) = store::pools::queued_reason(&handles.pool, run_id).await? {
        return Ok(Some(pool));
    }
    if let Some(rate) = store::rates::queued_reason(&handles.pool, run_id).await? {
        return Ok(Some(rate));
    }
    why_waiting(handles, job_id).await
}

/// Why the queued runs of a job wait although slots may be free: no live, uncordoned
/// executor carries its selector's labels ("no live executor matches gpu=1"), or none
/// is live at all. None when some executor may claim them (or the job is gone).
pub async fn why_waiting(handles: &Handles, job_id: i64) -> Result<Option<String>, ApiError> {
    let Some(job) = store::jobs::get(&handles.pool, job_id).await? else {
        return Ok(None);
    };
    if store::processes::any_may_claim(&handles.pool, &job.selector).await? {
        return Ok(None);
    }
    let selector = labels::from_json(&job.selector);
    Ok(Some(if selector.is_empty() {
        "no live executor takes new runs".to_owned()
    } else {
        format!("no live executor matches {}", labels::describe(&selector))
    }))
}

/// What an operator asks of an executor, as the API and the admin name it.
pub fn routing_named(name: &str) -> Option<Routing> {
    match name {
        "cordon" => Some(Routing::Cordon),
        "uncordon" => Some(Routing::Uncordon),
        "drain" => Some(Routing::Drain),
        _ => None,
    }
}

/// Cordons (no new claims), uncordons or drains (cordon, finish or hand over the running
/// runs, exit) a live executor; audited. A cordon takes effect at the next claim; a drain
/// at the executor's next heartbeat.
pub async fn route_executor(
    handles: &Handles,
    who: &Principal,
    id: Uuid,
    change: Routing,
) -> Result<ProcessView, ApiError> {
    let action = match change {
        Routing::Cordon => "executor.cordon",
        Routing::Uncordon => "executor.uncordon",
        Routing::Drain => "executor.drain",
    };
    who.require_cluster_admin("cordon, uncordon or drain executors")?;
    let mut tx = handles.pool.begin().await?;
    let Some(process) = store::processes::route(&mut *tx, id, change).await? else {
        return Err(match store::processes::get(&mut *tx, id).await? {
            Some(process) if process.role == ProcessRole::Executor => ApiError::Conflict(format!(
                "executor {id} is {}: only a live executor can be cordoned, uncordoned or drained",
                process.state
            )),
            _ => ApiError::not_found("executor", id),
        });
    };
    let change = Change {
        action,
        object_type: "executor",
        object_id: None,
        before: None,
        after: Some(json!({"executor_id": id, "cordoned": process.cordoned,
                           "drain_requested": process.drain_requested})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(executor.id = %id, action, cordoned = process.cordoned,
        drain_requested = process.drain_requested, "executor routing changed");
    let running = store::runs::history::active_by_executor(&handles.pool).await?;
    Ok(view(process, ProcessRole::Executor, &running))
}

/// A page of the audit log, newest first, of the entries `filter` selects.
pub async fn audit_log(
    handles: &Handles,
    who: &Principal,
    filter: &audit::Filter,
    page: Page,
) -> Result<Paged<Entry>, ApiError> {
    let mut filter = filter.clone();
    filter.visible = audit_scope(who)?;
    let (items, total) = store::audit::list(&handles.pool, &filter, page).await?;
    Ok(Paged { items, total })
}

/// The namespaces whose audit entries `who` reads (None: every entry, cluster-wide ones
/// included, for a cluster admin); 403 for whoever is an admin nowhere.
pub fn audit_scope(who: &Principal) -> Result<Option<Vec<String>>, ApiError> {
    if who.access.cluster_admin {
        return Ok(None);
    }
    let admin_of: Vec<String> = who
        .access
        .roles
        .iter()
        .filter(|(_, role)| role.is_admin())
        .map(|(name, _)| name.clone())
        .collect();
    if admin_of.is_empty() {
        return Err(ApiError::Forbidden(
            "only a namespace's admins may read its audit log".into(),
        ));
    }
    Ok(Some(admin_of))
}

/// The longest text an audit filter accepts.
const MAX_AUDIT_FILTER_CHARS: usize = 200;

/// The audit log's filters from a query (`user`, `object_type`, `object`, `action`); a bad
/// one is named in `errors`.
pub fn audit_filter(query: &QueryParams, errors: &mut FieldErrors) -> audit::Filter {
    let mut text = |key: &str| {
        let value = query.text(key)?.trim();
        if value.chars().count() > MAX_AUDIT_FILTER_CHARS {
            errors.insert(
                key.to_owned(),
                format!("must be at most {MAX_AUDIT_FILTER_CHARS} characters"),
            );
            return None;
        }
        Some(value.to_owned())
    };
    audit::Filter {
        user: text("user"),
        object_type: text("object_type"),
        object: text("object"),
        action: text("action"),
        namespace: text("namespace"),
        visible: None,
    }
}

/// The names of the users the audit entries `who` reads mention (the admin's filter
/// choices).
pub async fn audit_actors(handles: &Handles, who: &Principal) -> Result<Vec<String>, ApiError> {
    let scope = audit_scope(who)?;
    Ok(store::audit::actors(&handles.pool, scope.as_deref()).await?)
}

/// The numbers `/metrics` exports.
pub async fn metrics(handles: &Handles) -> Result<Metrics, ApiError> {
    Ok(store::cluster::metrics(&handles.pool).await?)
}
