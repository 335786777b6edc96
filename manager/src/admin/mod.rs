//! The web admin: server-rendered HTML over the same [`crate::service`] operations as
//! the API, with plain forms that work without JavaScript.
pub mod templates;

use crate::state::AppState;
use axum::Router;

/// Routes of the web admin.
pub fn router() -> Router<AppState> {
    Router::new()
}
