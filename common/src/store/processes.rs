//! Queries over `executors`: registration, heartbeats, and the one conditional UPDATE
//! by which a monitor declares silent processes dead.

use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;
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

/// Inserts the process's row, alive, heartbeating now.
pub async fn register(db: impl PgExecutor<'_>, who: &Registration) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO executors (id, role, host, pid, version, capacity) VALUES ($1, $2, $3, $4, $5, $6)",
        who.id,
        who.role as ProcessRole,
        who.host,
        who.pid,
        who.version,
        who.capacity
    )
    .execute(db)
    .await?;
    Ok(())
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// Recorded; the process is alive (or draining) in the cluster's eyes.
    Alive,
    /// A monitor declared this process dead: it must stop its runs and re-register.
    DeclaredDead,
}

/// Records a heartbeat, unless a monitor declared the process dead meanwhile.
pub async fn heartbeat(db: impl PgExecutor<'_>, id: Uuid) -> Result<Heartbeat, StoreError> {
    let done = sqlx::query!(
        "UPDATE executors SET last_heartbeat_at = now() WHERE id = $1 AND state IN ('alive', 'draining')",
        id
    )
    .execute(db)
    .await?;
    Ok(if done.rows_affected() == 1 {
        Heartbeat::Alive
    } else {
        Heartbeat::DeclaredDead
    })
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
                  started_at, last_heartbeat_at, declared_dead_at, reaped_by
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
                  started_at, last_heartbeat_at, declared_dead_at, reaped_by
           FROM executors WHERE role = $1 ORDER BY started_at DESC"#,
        role as ProcessRole
    )
    .fetch_all(db)
    .await?)
}
