//! The dashboard's history over a range (`1h`, `24h`, `7d`): ended runs per bucket by
//! outcome, the slowest and the most failing jobs. Shared by `GET /api/v1/dashboard` and
//! the admin's dashboard.

use probactr_common::store::{self, dashboard::Dashboard, dashboard::Range};

use super::Handles;
use crate::auth::Principal;
use crate::error::{ApiError, FieldErrors};
use crate::input::QueryParams;

/// The `range` of a query (`1h` when absent); a bad one is named in `errors`.
pub fn range(query: &QueryParams, errors: &mut FieldErrors) -> Range {
    query.choice("range", errors).unwrap_or_default()
}

/// The history over `range` of the jobs `who` sees, of namespace `asked` when given.
pub async fn dashboard(
    handles: &Handles,
    who: &Principal,
    range: Range,
    asked: Option<&str>,
) -> Result<Dashboard, ApiError> {
    let only = who.access.listing(asked);
    Ok(store::dashboard::dashboard(handles.read_pool(who), range, only.as_deref()).await?)
}
