//! `/api/v1/executors`, `/api/v1/monitors`, `/api/v1/status`, `/api/v1/audit`.

use axum::extract::State;
use axum::Json;
use probactr_common::model::ProcessRole;

use crate::auth::Principal;
use crate::db::{self, audit::Entry, cluster::ProcessView, cluster::Status};
use crate::error::{ApiError, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::Paged;
use crate::state::AppState;

async fn processes(state: &AppState, role: ProcessRole) -> Result<Json<Paged<ProcessView>>, ApiError> {
    let items = db::cluster::processes(&state.pool, role).await?;
    let total = items.len() as i64;
    Ok(Json(Paged { items, total }))
}

/// `GET /api/v1/executors`.
pub async fn executors(
    State(state): State<AppState>,
    _who: Principal,
) -> Result<Json<Paged<ProcessView>>, ApiError> {
    processes(&state, ProcessRole::Executor).await
}

/// `GET /api/v1/monitors`.
pub async fn monitors(
    State(state): State<AppState>,
    _who: Principal,
) -> Result<Json<Paged<ProcessView>>, ApiError> {
    processes(&state, ProcessRole::Monitor).await
}

/// `GET /api/v1/status`.
pub async fn status(State(state): State<AppState>, _who: Principal) -> Result<Json<Status>, ApiError> {
    Ok(Json(db::cluster::status(&state.pool).await?))
}

/// `GET /api/v1/audit?limit=&offset=` (admin).
pub async fn audit(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<Paged<Entry>>, ApiError> {
    who.require(who.role.is_admin(), "read the audit log")?;
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    check(errors)?;
    let (items, total) = db::audit::list(&state.pool, None, page).await?;
    Ok(Json(Paged { items, total }))
}
