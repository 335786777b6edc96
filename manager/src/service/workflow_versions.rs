//! A workflow's versions: its whole definition (name, description, steps, declared
//! parameters) as each create, edit and restore left it, and restoring an earlier one
//! (which makes a new version, so a restore can itself be undone).

use probactr_common::params_schema::masked;
use probactr_common::store::versions::{Kind, Version as WorkflowVersion};
use probactr_common::store::workflows::{Step, Workflow};
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::versions::{history_of, kept, shown_list, HistoryEntry, Versioned};
use super::workflows::{self, WorkflowView};
use super::Handles;
use crate::auth::Principal;
use crate::command::workflow::ValidWorkflow;
use crate::error::ApiError;

/// A workflow's definition as a create's body: what a version keeps and a restore sends.
pub fn definition(workflow: &ValidWorkflow) -> Value {
    definition_of(
        &workflow.name,
        &workflow.description,
        &workflow.steps,
        workflow.params_schema.as_ref(),
    )
}

fn definition_of(name: &str, description: &str, steps: &[Step], params_schema: Option<&Value>) -> Value {
    json!({"name": name, "description": description, "steps": steps, "params_schema": params_schema})
}

/// Keeps `definition` as the version `workflow` now has, made by `who` (`action`:
/// `create`, `update` or `restore`).
pub async fn keep(
    conn: &mut PgConnection,
    who: &Principal,
    workflow: &Workflow,
    definition: &Value,
    action: &str,
    restored_from: Option<i64>,
) -> Result<(), ApiError> {
    super::versions::keep(conn, who, versioned(workflow), definition, action, restored_from).await
}

/// Keeps the version a workflow had before it changes, when it is not kept yet (a
/// workflow made before versions were kept, or one paused since its last edit).
pub async fn keep_before(
    conn: &mut PgConnection,
    workflow: &Workflow,
    steps: &[Step],
) -> Result<(), ApiError> {
    let definition = definition_of(
        &workflow.name,
        &workflow.description,
        steps,
        workflow.params_schema.as_ref(),
    );
    super::versions::keep_before(conn, versioned(workflow), &definition).await
}

/// The version `workflow` has.
fn versioned(workflow: &Workflow) -> Versioned {
    Versioned {
        kind: Kind::Workflow,
        id: workflow.id,
        version: workflow.version,
    }
}

/// The kept versions of workflow `id`, newest first, secret parameters masked.
pub async fn list(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<WorkflowVersion>, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    workflows::visible(&mut conn, who, id).await?;
    shown_list(&mut *conn, Kind::Workflow, id, masked_steps).await
}

/// Version `version` of workflow `id`, secret parameters masked.
pub async fn get(
    handles: &Handles,
    who: &Principal,
    id: i64,
    version: i64,
) -> Result<WorkflowVersion, ApiError> {
    let mut conn = handles.pool.acquire().await?;
    workflows::visible(&mut conn, who, id).await?;
    Ok(masked_steps(kept(&mut conn, Kind::Workflow, id, version).await?))
}

/// Makes version `version` of workflow `id` its definition again, as a new version,
/// checked as an edit is (its steps' jobs must still exist); its pause and triggers stay.
pub async fn restore(
    handles: &Handles,
    who: &Principal,
    id: i64,
    version: i64,
) -> Result<WorkflowView, ApiError> {
    let mut tx = handles.pool.begin().await?;
    workflows::visible(&mut tx, who, id).await?;
    let kept = kept(&mut tx, Kind::Workflow, id, version).await?;
    let restored = workflows::replace_made(
        &mut tx,
        handles.secret_keys.as_deref(),
        who,
        id,
        kept.definition,
        None,
        Some(version),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(
        workflow.id = id,
        restored_from = version,
        version = restored.version,
        "workflow version restored"
    );
    workflows::get(handles, who, id).await
}

/// The workflow's versions, newest first, each with what it changed.
pub async fn history(handles: &Handles, who: &Principal, id: i64) -> Result<Vec<HistoryEntry>, ApiError> {
    Ok(history_of(&list(handles, who, id).await?))
}

/// A version as shown: the secret values of its steps' parameters masked.
fn masked_steps(mut version: WorkflowVersion) -> WorkflowVersion {
    if let Some(steps) = version.definition.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            if let Some(params) = step.get("params") {
                step["params"] = masked(params);
            }
        }
    }
    version
}
