//! Queries over `executors`: registration, heartbeats, cordon and drain, and the one
//! conditional UPDATE by which a monitor declares silent processes dead.

use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;
use crate::labels::Labels;
use crate::model::{Process, ProcessRole, ProcessState};

/// Who a process is, as it registers.
#[derive(Debug, Clone)]
pub struct Registration {
    /// A fresh id (a process that was declared dead registers again under a new one).
    pub id: Uuid,
    /// Executor or monitor.
    pub role: ProcessRole,
    /// Host name.
    pub host: String,
    /// Process id on that host.
    pub pid: i32,
    /// probactr version.
    pub version: String,
    /// Runs it executes at once (0 for a monitor).
    pub capacity: i32,
    /// Its labels (`PROBACTR_EXECUTOR_LABELS`; none for a monitor).
    pub labels: Labels,
}

impl Registration {
    /// This process, under a new id.
    pub fn this_process(role: ProcessRole, capacity: i32) -> Registration {
        Registration {
            id: Uuid::new_v4(),
            role,
            host: host_name(),
            pid: std::process::id() as i32,
            version: crate::VERSION.to_owned(),
            capacity,
            labels: Labels::new(),
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Inserts the process's row, alive, heartbeating now. A row with this id already there
/// is this process's own: ids are drawn at random per process, so it can only be an
/// earlier attempt that was stored while its answer was lost (a registration timed out
/// under load retried into a duplicate key forever). That is a registration like any
/// other; should a monitor have declared it dead meanwhile, the next heartbeat says so.
pub async fn register(db: impl PgExecutor<'_>, who: &Registration) -> Result<(), StoreError> {
    let inserted = sqlx::query!(
        "INSERT INTO executors (id, role, host, pid, version, capacity, labels)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        who.id,
        who.role as ProcessRole,
        who.host,
        who.pid,
        who.version,
        who.capacity,
        serde_json::json!(who.labels)
    )
    .execute(db)
    .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(err) if super::is_unique_violation(&err, "executors_pkey") => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// Recorded; the process is alive (or draining) in the cluster's eyes.
    Alive,
    /// Recorded, and someone asked this executor to drain: finish or hand over its runs,
    /// then exit.
    DrainRequested,
    /// A monitor declared this process dead: it must stop its runs and re-register.
    DeclaredDead,
}

/// Records a heartbeat, unless a monitor declared the process dead meanwhile.
pub async fn heartbeat(db: impl PgExecutor<'_>, id: Uuid) -> Result<Heartbeat, StoreError> {
    let drain_requested = sqlx::query_scalar!(
        "UPDATE executors SET last_heartbeat_at = now() WHERE id = $1 AND state IN ('alive', 'draining')
         RETURNING drain_requested",
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(match drain_requested {
        Some(false) => Heartbeat::Alive,
        Some(true) => Heartbeat::DrainRequested,
        None => Heartbeat::DeclaredDead,
    })
}

/// What an operator asks of an executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// Claim no new runs (those running go on).
    Cordon,
    /// Claim runs again.
    Uncordon,
    /// Cordon, and finish or hand over the running runs, then exit.
    Drain,
}

/// Cordons, uncordons or drains a live executor; returns its row (None when no live
/// executor has that id: unknown, a monitor, dead or stopped). Uncordoning an executor
/// that was asked to drain leaves it draining.
pub async fn route(
    db: impl PgExecutor<'_>,
    id: Uuid,
    change: Routing,
) -> Result<Option<Process>, StoreError> {
    let (cordon, drain) = match change {
        Routing::Cordon => (true, false),
        Routing::Uncordon => (false, false),
        Routing::Drain => (true, true),
    };
    Ok(sqlx::query_as!(
        Process,
        r#"UPDATE executors SET cordoned = $2 OR drain_requested, drain_requested = drain_requested OR $3
           WHERE id = $1 AND role = 'executor' AND state IN ('alive', 'draining')
           RETURNING id, role AS "role: ProcessRole", host, pid, version, capacity, state AS "state: ProcessState",
                     started_at, last_heartbeat_at, declared_dead_at, reaped_by, labels, cordoned, drain_requested"#,
        id,
        cordon,
        drain
    )
    .fetch_optional(db)
    .await?)
}

/// Selector and labels as the claim compares them: whether a live, uncordoned executor
/// carries every label of `selector` (an empty selector: any live executor).
pub async fn any_may_claim(
    db: impl PgExecutor<'_>,
    selector: &serde_json::Value,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM executors
                          WHERE role = 'executor' AND state = 'alive' AND NOT cordoned
                            AND labels @> $1) AS "any!""#,
        selector
    )
    .fetch_one(db)
    .await?)
}

/// Moves a live process to `draining` or `stopped` (never revives a dead one).
pub async fn set_state(db: impl PgExecutor<'_>, id: Uuid, state: ProcessState) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE executors SET state = $2, last_heartbeat_at = now()
         WHERE id = $1 AND state IN ('alive', 'draining')",
        id,
        state as ProcessState
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Declares dead every live process silent for longer than `timeout`, by the database's
/// clock, in one conditional UPDATE: a process is declared dead by exactly one monitor
/// however many run. Returns the ids this monitor declared.
pub async fn declare_dead(
    db: impl PgExecutor<'_>,
    monitor_id: Uuid,
    timeout: Duration,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar!(
        "UPDATE executors SET state = 'dead', declared_dead_at = now(), reaped_by = $1
         WHERE state IN ('alive', 'draining')
           AND last_heartbeat_at < now() - make_interval(secs => $2)
         RETURNING id",
        monitor_id,
        timeout.as_secs_f64()
    )
    .fetch_all(db)
    .await?)
}

/// One process by id.
pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<Process>, StoreError> {
    Ok(sqlx::query_as!(
        Process,
        r#"SELECT id, role AS "role: ProcessRole", host, pid, version, capacity, state AS "state: ProcessState",
                  started_at, last_heartbeat_at, declared_dead_at, reaped_by, labels, cordoned, drain_requested
           FROM executors WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Every registered process of a role, newest first.
pub async fn list(db: impl PgExecutor<'_>, role: ProcessRole) -> Result<Vec<Process>, StoreError> {
    Ok(sqlx::query_as!(
        Process,
        r#"SELECT id, role AS "role: ProcessRole", host, pid, version, capacity, state AS "state: ProcessState",
                  started_at, last_heartbeat_at, declared_dead_at, reaped_by, labels, cordoned, drain_requested
           FROM executors WHERE role = $1 ORDER BY started_at DESC"#,
        role as ProcessRole
    )
    .fetch_all(db)
    .await?)
}
