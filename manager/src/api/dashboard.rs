//! `/api/v1/dashboard`: the history the admin's dashboard charts.

use axum::extract::State;
use axum::Json;
use probactr_common::store::dashboard::Dashboard;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service;
use crate::state::AppState;

/// Runs that ended in the range per bucket (1 minute for `1h`, 15 minutes for `24h`,
/// 2 hours for `7d`), by outcome: succeeded; failed, timed out or abandoned; skipped,
/// missed or cancelled. With the slowest jobs (95th percentile duration) and the most
/// failing jobs (failures, then failure ratio) of the range.
#[utoipa::path(get, path = "/dashboard", operation_id = "dashboard", tag = "cluster",
    params(
        ("range" = Option<String>, Query, description = "1h (default), 24h or 7d"),
        ("namespace" = Option<String>, Query, description = "Only this namespace's jobs (default: every namespace the caller sees)"),
    ),
    responses(
        (status = OK, description = "The range's history", body = Dashboard),
        (status = UNPROCESSABLE_ENTITY, description = "A bad range, named", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn dashboard(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<Dashboard>, ApiError> {
    let mut errors = FieldErrors::new();
    let range = service::dashboard::range(&query, &mut errors);
    check(errors)?;
    Ok(Json(
        service::dashboard::dashboard(&state.handles, &who, range, query.text("namespace")).await?,
    ))
}
