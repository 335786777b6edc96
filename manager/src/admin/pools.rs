//! `/pools`: the pools of the namespaces the user sees, with their occupancy, the runs
//! holding their slots and how many runs wait for them (read-only; the API changes them).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;

use super::{render_status, AdminError, AdminUser};
use crate::service::pools;
use crate::state::AppState;

/// `GET /pools`.
pub async fn list(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    let listed = pools::list_with_holders(&state.handles, &user.0, user.namespace()).await?;
    let ctx = context! { pools => listed, ..user.layout("pools") };
    render_status(&state, StatusCode::OK, "pools.html", ctx)
}
