//! The capacity forecast for a caller: the span asked for, checked, over the jobs the
//! caller sees (a cluster admin sees the whole cluster); the forecast itself is
//! `probactr_common::capacity`, which the monitor's `capacity_shortfall` alert shares.

use chrono::Utc;
use probactr_common::capacity;
pub use probactr_common::capacity::{CapacityForecast, MAX_HOURS};

use super::Handles;
use crate::auth::Principal;
use crate::error::ApiError;

/// The forecast of the next `hours` hours from now.
pub async fn forecast(handles: &Handles, who: &Principal, hours: i64) -> Result<CapacityForecast, ApiError> {
    if !(1..=MAX_HOURS).contains(&hours) {
        return Err(ApiError::field("hours", format!("must be 1 to {MAX_HOURS}")));
    }
    let from = capacity::bucket_start(Utc::now());
    Ok(capacity::forecast(&handles.pool, who.access.visible().as_deref(), from, hours).await?)
}
