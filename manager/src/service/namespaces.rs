//! Namespaces: cluster admins create them, set their quotas (`max_running`, `max_jobs`)
//! and delete the empty ones; everyone lists the ones they have a role in. A namespace's
//! name never changes (objects refer to it).

use probactr_common::store::namespaces::{Namespace, NamespaceFields};
use probactr_common::store::{self, audit::Change};
use serde_json::Value;

use super::{snapshot, Handles};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::input::{Given, Input};

/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// The largest quota accepted.
pub const MAX_QUOTA: i64 = 1_000_000;

/// Whether `name` is a valid namespace name (what the table's CHECK accepts).
pub fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&bytes.len())
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// The namespaces the caller sees: every one for a cluster admin, else those where they
/// have a role.
pub async fn list(handles: &Handles, who: &Principal) -> Result<Vec<Namespace>, ApiError> {
    Ok(store::namespaces::list(&handles.pool, who.access.visible().as_deref()).await?)
}

/// One namespace the caller sees.
pub async fn get(handles: &Handles, who: &Principal, name: &str) -> Result<Namespace, ApiError> {
    if !who.access.sees(name) {
        return Err(ApiError::not_found("namespace", name));
    }
    store::namespaces::get(&handles.pool, name)
        .await?
        .ok_or_else(|| ApiError::not_found("namespace", name))
}

/// A 404 for a namespace the caller has no role in (a 403 would say it exists).
fn hidden(who: &Principal, name: &str) -> Result<(), ApiError> {
    if who.access.sees(name) {
        Ok(())
    } else {
        Err(ApiError::not_found("namespace", name))
    }
}

/// Reads a quota field: absent, null (no quota) or an integer from `min`.
fn quota(input: &mut Input, key: &str, min: i64) -> Given<i32> {
    input
        .int(key, min, MAX_QUOTA)
        .map(|given| given.and_then(|value| i32::try_from(value).ok()))
}

/// Reads description and quotas over `current` (a create starts from none).
fn read_fields(input: &mut Input, current: &NamespaceFields) -> NamespaceFields {
    let description = input.text("description");
    let description = input.not_null("description", description);
    if description
        .as_ref()
        .is_some_and(|text| text.chars().count() > MAX_DESCRIPTION_CHARS)
    {
        input.error(
            "description",
            format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
        );
    }
    let max_running = quota(input, "max_running", 1);
    let max_jobs = quota(input, "max_jobs", 0);
    NamespaceFields {
        description: description.unwrap_or_else(|| current.description.clone()),
        max_running: max_running.unwrap_or(current.max_running),
        max_jobs: max_jobs.unwrap_or(current.max_jobs),
    }
}

/// Creates a namespace from `{"name", "description", "max_running", "max_jobs"}`
/// (cluster admin).
pub async fn create(handles: &Handles, who: &Principal, body: Value) -> Result<Namespace, ApiError> {
    who.require_cluster_admin("manage namespaces")?;
    let mut input = Input::new(body)?;
    let name = input.required_text("name");
    if name.as_deref().is_some_and(|name| !valid_name(name)) {
        input.error(
            "name",
            "must be 1 to 63 lower-case letters, digits or dashes, starting and ending with a letter or digit",
        );
    }
    let empty = NamespaceFields {
        description: String::new(),
        max_running: None,
        max_jobs: None,
    };
    let fields = read_fields(&mut input, &empty);
    input.finish()?;
    let Some(name) = name else {
        return Err(ApiError::field("name", "is required"));
    };
    let mut tx = handles.pool.begin().await?;
    let created = store::namespaces::create(&mut *tx, &name, &fields)
        .await?
        .ok_or_else(|| ApiError::field("name", format!("namespace {name} already exists")))?;
    let change = Change {
        action: "namespace.create",
        object_type: "namespace",
        object_id: None,
        before: None,
        after: snapshot(&created),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(namespace = %name, "namespace created");
    Ok(created)
}

/// Changes a namespace's description and quotas (null removes a quota) (cluster admin).
pub async fn update(
    handles: &Handles,
    who: &Principal,
    name: &str,
    body: Value,
) -> Result<Namespace, ApiError> {
    hidden(who, name)?;
    who.require_cluster_admin("manage namespaces")?;
    let mut input = Input::new(body)?;
    if input.has("name") {
        let given = input.text("name").flatten();
        if given.as_deref() != Some(name) {
            input.error("name", "a namespace's name cannot change");
        }
    }
    let mut tx = handles.pool.begin().await?;
    let before = store::namespaces::get_for_update(&mut *tx, name)
        .await?
        .ok_or_else(|| ApiError::not_found("namespace", name))?;
    let current = NamespaceFields {
        description: before.description.clone(),
        max_running: before.max_running,
        max_jobs: before.max_jobs,
    };
    let fields = read_fields(&mut input, &current);
    input.finish()?;
    let after = store::namespaces::update(&mut *tx, name, &fields)
        .await?
        .ok_or_else(|| ApiError::not_found("namespace", name))?;
    let change = Change {
        action: "namespace.update",
        object_type: "namespace",
        object_id: None,
        before: snapshot(&before),
        after: snapshot(&after),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(namespace = %name, "namespace updated");
    Ok(after)
}

/// Deletes an empty namespace (cluster admin); 409 naming what it still holds.
pub async fn delete(handles: &Handles, who: &Principal, name: &str) -> Result<(), ApiError> {
    hidden(who, name)?;
    who.require_cluster_admin("manage namespaces")?;
    if name == store::namespaces::DEFAULT {
        return Err(ApiError::Conflict(
            "namespace default cannot be deleted: objects made without a namespace go there".into(),
        ));
    }
    let mut tx = handles.pool.begin().await?;
    let before = store::namespaces::get_for_update(&mut *tx, name)
        .await?
        .ok_or_else(|| ApiError::not_found("namespace", name))?;
    let left = store::namespaces::contents(&mut *tx, name).await?;
    if !left.is_empty() {
        let what: Vec<String> = left
            .iter()
            .map(|(kind, count)| format!("{count} {kind}{}", if *count == 1 { "" } else { "s" }))
            .collect();
        return Err(ApiError::Conflict(format!(
            "namespace {name} still holds {}",
            what.join(", ")
        )));
    }
    store::namespaces::delete(&mut *tx, name).await?;
    let change = Change {
        action: "namespace.delete",
        object_type: "namespace",
        object_id: None,
        before: snapshot(&before),
        after: None,
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(namespace = %name, "namespace deleted");
    Ok(())
}

/// The namespace a new object goes to: `asked` or `default`. 422 when it does not exist,
/// 404 when the caller has no role there (as if it did not exist to them).
pub async fn for_creation(
    conn: &mut sqlx::PgConnection,
    who: &Principal,
    asked: Option<&str>,
) -> Result<String, ApiError> {
    let name = asked.unwrap_or(store::namespaces::DEFAULT);
    if !who.access.sees(name) {
        return Err(ApiError::not_found("namespace", name));
    }
    if store::namespaces::get(&mut *conn, name).await?.is_none() {
        return Err(ApiError::field("namespace", format!("no namespace {name}")));
    }
    Ok(name.to_owned())
}
