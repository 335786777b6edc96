//! Runs: list, read, cancel.

use probactr_common::store;
use serde::Serialize;
use serde_json::json;

use super::Paged;
use crate::auth::Principal;
use crate::db::{self, audit::Change, runs::RunFilter, runs::RunSummary, runs::RunView};
use crate::error::ApiError;
use crate::input::Page;
use crate::state::AppState;

/// One run, output included.
pub async fn get(state: &AppState, id: i64) -> Result<RunView, ApiError> {
    store::runs::get(&state.pool, id)
        .await?
        .map(RunView::from)
        .ok_or_else(|| ApiError::not_found("run", id))
}

/// A page of runs, newest first.
pub async fn list(state: &AppState, filter: &RunFilter, page: Page) -> Result<Paged<RunSummary>, ApiError> {
    let (items, total) = db::runs::list(&state.pool, filter, page).await?;
    Ok(Paged { items, total })
}

/// The answer of a cancel request.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Cancelled {
    /// The run.
    pub id: i64,
    /// Its state after the request: `cancelled` when it had not started; still `running`
    /// when it had, until its executor stops it (shortly).
    pub state: String,
}

/// Asks for a run to stop; 409 when it already ended.
pub async fn cancel(state: &AppState, who: &Principal, id: i64) -> Result<Cancelled, ApiError> {
    who.require_operator("cancel runs")?;
    let mut tx = state.pool.begin().await?;
    let before = store::runs::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    if before.state.is_terminal() {
        return Err(ApiError::Conflict(format!(
            "run {id} already ended ({})",
            before.state
        )));
    }
    let reason = format!("cancelled by {}", who.username);
    let after = store::runs::request_cancel(&mut *tx, id, &reason)
        .await?
        .ok_or_else(|| ApiError::not_found("run", id))?;
    let change = Change {
        action: "run.cancel",
        object_type: "run",
        object_id: Some(id),
        before: Some(json!({"state": before.state})),
        after: Some(json!({"state": after})),
    };
    db::audit::record(&mut *tx, who, change).await?;
    tx.commit().await?;
    tracing::info!(run.id = id, state = %after, "cancel requested");
    Ok(Cancelled {
        id,
        state: after.to_string(),
    })
}
