//! The REST API under `/api/v1` (JSON), and the operational endpoints `/healthz`,
//! `/readyz` and `/metrics`.
//!
//! Handlers are thin: extract, call [`crate::service`], wrap the answer. Every route but
//! `POST /api/v1/auth/token`, the OpenAPI document, the operational endpoints and the
//! webhook deliveries (`POST /hooks/{token}`) needs a [`crate::auth::Principal`].

mod alerts;
mod auth;
pub mod bodies;
mod by_id;
mod calendars;
mod capacity;
mod cluster;
mod cluster_wide;
mod dashboard;
mod definitions;
mod health;
mod hooks;
mod job_versions;
mod jobs;
mod ledger;
mod listing;
mod maintenance;
mod named;
mod namespaces;
pub mod openapi;
mod pools;
pub mod precondition;
mod runs;
mod secrets;
mod trigger_versions;
mod triggers;
mod users;
mod versions;
mod workflow_versions;
mod workflows;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::Router;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::state::AppState;

/// Routes of the API and the operational endpoints.
pub fn router() -> Router<AppState> {
    let (router, _document) = documented_router().split_for_parts();
    router
}

/// Every route with its OpenAPI description: a handler is routed and documented by the
/// same `routes!` line, so the document cannot miss a route (see [`openapi`]).
pub fn documented_router() -> OpenApiRouter<AppState> {
    let v1 = OpenApiRouter::new()
        .routes(routes!(auth::create_token, auth::revoke_token))
        .routes(routes!(auth::me))
        .routes(routes!(users::change_password))
        .routes(routes!(users::list, users::create))
        .routes(routes!(users::update))
        .routes(routes!(users::roles, users::set_roles))
        .routes(routes!(namespaces::list, namespaces::create))
        .routes(routes!(namespaces::get, namespaces::update, namespaces::delete))
        .routes(routes!(users::tokens, users::create_token))
        .routes(routes!(users::revoke_token))
        .routes(routes!(jobs::list, jobs::create))
        .routes(routes!(jobs::get, jobs::update, jobs::delete))
        .routes(routes!(jobs::pause))
        .routes(routes!(jobs::resume))
        .routes(routes!(jobs::replicas))
        .routes(routes!(jobs::run_now))
        .routes(routes!(triggers::list, triggers::create))
        .routes(routes!(triggers::get, triggers::update, triggers::delete))
        .routes(routes!(triggers::pause))
        .routes(routes!(triggers::resume))
        .routes(routes!(triggers::rotate_token))
        .routes(routes!(triggers::deliveries))
        .routes(routes!(trigger_versions::list))
        .routes(routes!(trigger_versions::get))
        .routes(routes!(trigger_versions::restore))
        .routes(routes!(runs::list))
        .routes(routes!(runs::get))
        .routes(routes!(runs::cancel))
        .routes(routes!(runs::rerun))
        .routes(routes!(runs::retry))
        .routes(routes!(job_versions::list))
        .routes(routes!(job_versions::get))
        .routes(routes!(job_versions::restore))
        .routes(routes!(runs::output))
        .routes(routes!(runs::stream))
        .routes(routes!(cluster::executors))
        .routes(routes!(cluster::cordon))
        .routes(routes!(cluster::uncordon))
        .routes(routes!(cluster::drain))
        .routes(routes!(cluster::monitors))
        .routes(routes!(cluster::status))
        .routes(routes!(dashboard::dashboard))
        .routes(routes!(cluster::audit))
        .routes(routes!(triggers::preview))
        .routes(routes!(definitions::apply))
        .routes(routes!(ledger::ledger))
        .routes(routes!(ledger::backfill))
        .routes(routes!(ledger::forecast))
        .routes(routes!(capacity::capacity_forecast))
        .routes(routes!(secrets::list, secrets::create))
        .routes(routes!(secrets::update, secrets::delete))
        .routes(routes!(secrets::rotate))
        .routes(routes!(pools::list, pools::create))
        .routes(routes!(pools::get, pools::update, pools::delete))
        .routes(routes!(calendars::list, calendars::create))
        .routes(routes!(calendars::get, calendars::replace, calendars::delete))
        .routes(routes!(maintenance::list, maintenance::create))
        .routes(routes!(maintenance::delete))
        .routes(routes!(maintenance::pause_cluster))
        .routes(routes!(maintenance::resume_cluster))
        .routes(routes!(alerts::list_channels, alerts::create_channel))
        .routes(routes!(
            alerts::get_channel,
            alerts::update_channel,
            alerts::delete_channel
        ))
        .routes(routes!(alerts::test_channel))
        .routes(routes!(alerts::list_rules, alerts::create_rule))
        .routes(routes!(
            alerts::get_rule,
            alerts::update_rule,
            alerts::delete_rule
        ))
        .routes(routes!(alerts::notifications))
        .routes(routes!(workflows::list, workflows::create))
        .routes(routes!(workflows::get, workflows::replace, workflows::delete))
        .routes(routes!(workflows::pause))
        .routes(routes!(workflows::resume))
        .routes(routes!(workflows::run_now))
        .routes(routes!(workflows::get_run))
        .routes(routes!(workflows::cancel_run))
        .routes(routes!(workflows::retry_step))
        .routes(routes!(workflows::list_triggers, workflows::create_trigger))
        .routes(routes!(workflows::delete_trigger))
        .routes(routes!(workflow_versions::list))
        .routes(routes!(workflow_versions::get))
        .routes(routes!(workflow_versions::restore))
        .routes(routes!(openapi::document))
        .fallback(not_found);
    OpenApiRouter::with_openapi(openapi::skeleton())
        .nest("/api/v1", v1)
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
        .routes(routes!(hooks::deliver))
}

async fn not_found() -> ApiError {
    ApiError::not_found("route", "")
}

/// The numeric id of a path; anything else is a 404 (no such object can exist).
#[derive(Debug, Clone, Copy)]
pub struct Id(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found("object", "?"))?;
        text.parse::<i64>()
            .map(Id)
            .map_err(|_| ApiError::not_found("object", text))
    }
}
