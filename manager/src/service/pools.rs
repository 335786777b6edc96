//! Pools: scarce things a namespace's jobs share (`{name, slots, rate}`), listed with what
//! holds them, created, resized and deleted (admins of the namespace; anyone with a role
//! there reads them). A pool a job takes cannot be deleted: the answer names the jobs.

use probactr_common::model::Rate;
use probactr_common::store::{self, audit::Change, pools::Holder, pools::Pool};
use serde::Serialize;
use serde_json::json;

use super::Handles;
use crate::auth::Principal;
use crate::error::ApiError;

/// The most slots a pool may have.
pub const MAX_SLOTS: i64 = 100_000;

/// A pool with what holds it and what waits for it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PoolView {
    /// The pool.
    #[serde(flatten)]
    pub pool: Pool,
    /// Queued runs of the jobs taking it.
    pub waiting: i64,
    /// The runs holding its slots.
    pub holders: Vec<Holder>,
}

/// The pools of `namespace`, or of every namespace the caller sees.
pub async fn list(
    handles: &Handles,
    who: &Principal,
    namespace: Option<&str>,
) -> Result<Vec<Pool>, ApiError> {
    let shown = who.access.listing(namespace);
    Ok(store::pools::list(&handles.pool, shown.as_deref()).await?)
}

/// [`list`], each pool with its holders and waiting runs (the admin's pools page).
pub async fn list_with_holders(
    handles: &Handles,
    who: &Principal,
    namespace: Option<&str>,
) -> Result<Vec<PoolView>, ApiError> {
    let mut views = Vec::new();
    for pool in list(handles, who, namespace).await? {
        views.push(get(handles, who, &pool.namespace, &pool.name).await?);
    }
    Ok(views)
}

/// Pool `name` of `namespace` with its holders and waiting runs (404 when the caller
/// has no role there, as when it does not exist).
pub async fn get(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
) -> Result<PoolView, ApiError> {
    who.role_for(namespace, "pool", name)?;
    let pool = store::pools::get(&handles.pool, namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("pool", name))?;
    let holders = store::pools::holders(&handles.pool, namespace, name).await?;
    let waiting = store::pools::waiting(&handles.pool, namespace, name).await?;
    Ok(PoolView {
        pool,
        waiting,
        holders,
    })
}

/// Creates pool `name` with `slots` (and a `rate`, if given) in `namespace` (admins);
/// 409 when the name is taken.
pub async fn create(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
    slots: i32,
    rate: Option<Rate>,
) -> Result<Pool, ApiError> {
    who.role_for(namespace, "namespace", namespace)?;
    who.require_admin(namespace, "manage pools")?;
    if !is_valid_name(name) {
        return Err(ApiError::field(
            "name",
            "must be 1 to 63 lowercase letters, digits or `-`, starting and ending with a letter or digit",
        ));
    }
    let mut tx = handles.pool.begin().await?;
    let pool = store::pools::create(&mut *tx, namespace, name, slots, rate)
        .await?
        .ok_or_else(|| ApiError::Conflict(format!("namespace {namespace} already has a pool {name}")))?;
    let change = Change {
        action: "pool.create",
        object_type: "pool",
        object_id: None,
        before: None,
        after: Some(json!({"name": name, "slots": slots, "rate": rate})),
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(namespace), change).await?;
    tx.commit().await?;
    tracing::info!(
        pool.namespace = namespace,
        pool.name = name,
        slots,
        rate = ?rate,
        "pool created"
    );
    Ok(pool)
}

/// What an edit of a pool changes (None: left as it is).
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolChange {
    /// Its slots.
    pub slots: Option<i32>,
    /// Its rate (`Some(None)`: no bound any more).
    pub rate: Option<Option<Rate>>,
}

/// Changes the slots and the rate of pool `name` of `namespace` (admins); 409 naming the
/// jobs whose runs each hold more than the new slots (their runs could never be claimed
/// again).
pub async fn update(
    handles: &Handles,
    who: &Principal,
    namespace: &str,
    name: &str,
    change: PoolChange,
) -> Result<Pool, ApiError> {
    who.role_for(namespace, "pool", name)?;
    who.require_admin(namespace, "manage pools")?;
    let mut tx = handles.pool.begin().await?;
    let before = store::pools::get(&mut *tx, namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("pool", name))?;
    let mut pool = before.clone();
    if let Some(slots) = change.slots {
        // The update locks the pool's row first: a job edit checks its weight under a
        // share lock on it (see `jobs::check_pool`), so the jobs read next are all there are.
        pool = store::pools::set_slots(&mut *tx, namespace, name, slots)
            .await?
            .ok_or_else(|| ApiError::not_found("pool", name))?;
        refuse_stranding(&mut tx, namespace, name, slots).await?;
    }
    if let Some(rate) = change.rate {
        pool = store::pools::set_rate(&mut *tx, namespace, name, rate)
            .await?
            .ok_or_else(|| ApiError::not_found("pool", name))?;
    }
    let change = Change {
        action: "pool.update",
        object_type: "pool",
        object_id: None,
        before: Some(json!({"name": name, "slots": before.slots, "rate": before.rate})),
        after: Some(json!({"name": name, "slots": pool.slots, "rate": pool.rate})),
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(namespace), change).await?;
    tx.commit().await?;
    tracing::info!(
        pool.namespace = namespace,
        pool.name = name,
        slots = pool.slots,
        rate = ?pool.rate.map(|rate| rate.0),
        "pool changed"
    );
    Ok(pool)
}

/// A resize to `slots` must leave room for a run of every job taking the pool: the claim
/// needs `used + pool_slots <= slots`, so a wider job would queue forever.
async fn refuse_stranding(
    conn: &mut sqlx::PgConnection,
    namespace: &str,
    name: &str,
    slots: i32,
) -> Result<(), ApiError> {
    let wider = store::pools::jobs_wider_than(&mut *conn, namespace, name, slots).await?;
    if wider.is_empty() {
        return Ok(());
    }
    let jobs: Vec<String> = wider
        .iter()
        .map(|(job, pool_slots)| format!("{job} (pool_slots {pool_slots})"))
        .collect();
    Err(ApiError::Conflict(format!(
        "pool {name} cannot shrink to {slots} slots: job(s) {} take more per run; lower their pool_slots first",
        jobs.join(", ")
    )))
}

/// Deletes pool `name` of `namespace` (admins); 409 naming the jobs that take it.
pub async fn delete(handles: &Handles, who: &Principal, namespace: &str, name: &str) -> Result<(), ApiError> {
    who.role_for(namespace, "pool", name)?;
    who.require_admin(namespace, "manage pools")?;
    let mut tx = handles.pool.begin().await?;
    if store::pools::get(&mut *tx, namespace, name).await?.is_none() {
        return Err(ApiError::not_found("pool", name));
    }
    if !store::pools::delete_unused(&mut *tx, namespace, name).await? {
        let jobs = store::pools::jobs_using(&mut *tx, namespace, name).await?;
        return Err(ApiError::Conflict(format!(
            "pool {name} is taken by job(s) {}: give them another pool or none first",
            jobs.join(", ")
        )));
    }
    let change = Change {
        action: "pool.delete",
        object_type: "pool",
        object_id: None,
        before: Some(json!({"name": name})),
        after: None,
    };
    store::audit::record_in(&mut *tx, who.actor(), Some(namespace), change).await?;
    tx.commit().await?;
    tracing::info!(pool.namespace = namespace, pool.name = name, "pool deleted");
    Ok(())
}

/// A pool's name: like a namespace's (lowercase letters, digits, inner `-`, 1 to 63).
pub(crate) fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&bytes.len())
        && bytes.iter().all(inner)
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
}
