//! `/api/v1/forecast/capacity`: whether the coming hours' runs fit on the executors.

use axum::extract::State;
use axum::Json;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::capacity::{self, CapacityForecast, MAX_HOURS};
use crate::state::AppState;

/// How many runs will be running in each 5-minute bucket of the coming hours, per set of
/// executor labels the jobs need, against the capacity of the live executors that carry
/// them; buckets whose demand exceeds it are flagged.
#[utoipa::path(get, path = "/forecast/capacity", operation_id = "capacity_forecast", tag = "triggers",
    params(("hours" = Option<i64>, Query, description = "How far ahead (1 to 168; default 24)")),
    responses(
        (status = OK, description = "The forecast", body = CapacityForecast),
        (status = UNPROCESSABLE_ENTITY, description = "A bad parameter, named", body = ErrorBody),
        (status = "default", description = "Not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn capacity_forecast(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
) -> Result<Json<CapacityForecast>, ApiError> {
    let mut errors = FieldErrors::new();
    let hours = query.int("hours", 1, MAX_HOURS, &mut errors).unwrap_or(24);
    check(errors)?;
    Ok(Json(capacity::forecast(&state.handles, &who, hours).await?))
}
