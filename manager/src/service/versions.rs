//! What the histories of jobs, workflows and triggers share: keeping a version, reading
//! one back, and each kept version with what it changed from the one before it
//! ([`super::job_versions`], [`super::workflow_versions`], [`super::trigger_versions`]).

use probactr_common::store::versions::{self, Kind, Made, Version};
use serde::Serialize;
use sqlx::PgConnection;

use crate::auth::Principal;
use crate::error::ApiError;

/// A version of an object: which object, and its version number.
#[derive(Debug, Clone, Copy)]
pub struct Versioned {
    /// Its kind.
    pub kind: Kind,
    /// Its id.
    pub id: i64,
    /// The version it has.
    pub version: i64,
}

/// Keeps `definition` as the version `object` now has, made by `who` (`action`: `create`,
/// `update` or `restore`; `restored_from`: the version a restore brought back).
pub async fn keep(
    conn: &mut PgConnection,
    who: &Principal,
    object: Versioned,
    definition: &(impl Serialize + Sync),
    action: &str,
    restored_from: Option<i64>,
) -> Result<(), ApiError> {
    let made = Made {
        actor: &who.username,
        action,
        restored_from,
    };
    versions::record(conn, object.kind, object.id, object.version, definition, made).await?;
    Ok(())
}

/// Keeps the version an object has before it changes, when it is not kept yet (an object
/// made before versions were kept, or one paused since its last edit; its author unknown).
pub async fn keep_before(
    conn: &mut PgConnection,
    object: Versioned,
    definition: &(impl Serialize + Sync),
) -> Result<(), ApiError> {
    let made = Made {
        actor: "unknown",
        action: "before",
        restored_from: None,
    };
    versions::record(conn, object.kind, object.id, object.version, definition, made).await?;
    Ok(())
}

/// The kept versions of the `kind` object `id`, newest first, each as `shown` shows it
/// (secret values masked).
pub async fn shown_list(
    db: impl sqlx::PgExecutor<'_>,
    kind: Kind,
    id: i64,
    shown: fn(Version) -> Version,
) -> Result<Vec<Version>, ApiError> {
    Ok(versions::list(db, kind, id)
        .await?
        .into_iter()
        .map(shown)
        .collect())
}

/// Version `version` of the `kind` object `id`: a 404 naming it when it is not kept.
pub async fn kept(conn: &mut PgConnection, kind: Kind, id: i64, version: i64) -> Result<Version, ApiError> {
    versions::get(conn, kind, id, version)
        .await?
        .ok_or_else(|| ApiError::not_found(version_of(kind), version))
}

/// What a 404 calls a version of `kind`.
pub fn version_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Job => "job version",
        Kind::Workflow => "workflow version",
        Kind::Trigger => "trigger version",
    }
}

/// A version in a history: who made it, how, when, and what it changed from the version
/// before it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HistoryEntry {
    /// The version.
    pub version: i64,
    /// Who.
    pub actor: String,
    /// `create`, `update`, `restore` or `before`.
    pub action: String,
    /// The version a restore brought back.
    pub restored_from: Option<i64>,
    /// When.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Each field it changed: name, before, after (as JSON text).
    pub changes: Vec<(String, String, String)>,
}

/// `versions` (newest first) as a history, each with what it changed.
pub fn history_of(versions: &[Version]) -> Vec<HistoryEntry> {
    versions
        .iter()
        .enumerate()
        .map(|(at, version)| {
            let previous = versions.get(at + 1).map(|older| &older.definition);
            HistoryEntry {
                version: version.version,
                actor: version.actor.clone(),
                action: version.action.clone(),
                restored_from: version.restored_from,
                created_at: version.created_at,
                changes: previous
                    .map(|before| changes(before, &version.definition))
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// The top-level fields that differ between two definitions.
fn changes(before: &serde_json::Value, after: &serde_json::Value) -> Vec<(String, String, String)> {
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut fields: Vec<&String> = before.keys().chain(after.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let (old, new) = (before.get(field), after.get(field));
            (old != new).then(|| {
                let text = |value: Option<&serde_json::Value>| {
                    value.map_or_else(|| "—".to_owned(), ToString::to_string)
                };
                (field.clone(), text(old), text(new))
            })
        })
        .collect()
}

/// A kept definition read back for a restore: a 409 naming the version when it cannot be.
pub fn read_back<T: serde::de::DeserializeOwned>(
    what: &str,
    id: i64,
    version: &Version,
) -> Result<T, ApiError> {
    serde_json::from_value(version.definition.clone()).map_err(|err| {
        ApiError::Conflict(format!(
            "version {} of {what} {id} cannot be read back ({err}); edit the {what} instead",
            version.version
        ))
    })
}
