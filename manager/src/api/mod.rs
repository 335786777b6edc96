//! The REST API under `/api/v1` (JSON), and the operational endpoints `/healthz`,
//! `/readyz` and `/metrics`.
//!
//! Handlers are thin: extract, call [`crate::service`], wrap the answer. Every route but
//! `POST /api/v1/auth/token`, the OpenAPI document and the operational endpoints needs a
//! [`crate::auth::Principal`].

mod auth;
mod cluster;
mod health;
mod jobs;
pub mod openapi;
mod runs;
mod triggers;
mod users;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::Router;

use crate::error::ApiError;
use crate::state::AppState;

/// Routes of the API and the operational endpoints.
pub fn router() -> Router<AppState> {
    let v1 = Router::new()
        .route("/auth/token", post(auth::create_token).delete(auth::revoke_token))
        .route("/me", get(auth::me))
        .route("/me/password", post(users::change_password))
        .route("/users", get(users::list).post(users::create))
        .route("/users/{id}", axum::routing::patch(users::update))
        .route("/tokens", get(users::tokens).post(users::create_token))
        .route("/tokens/{id}", axum::routing::delete(users::revoke_token))
        .route("/jobs", get(jobs::list).post(jobs::create))
        .route(
            "/jobs/{id}",
            get(jobs::get).patch(jobs::update).delete(jobs::delete),
        )
        .route("/jobs/{id}/pause", post(jobs::pause))
        .route("/jobs/{id}/resume", post(jobs::resume))
        .route("/jobs/{id}/run", post(jobs::run_now))
        .route("/jobs/{id}/triggers", get(triggers::list).post(triggers::create))
        .route(
            "/triggers/{id}",
            get(triggers::get)
                .patch(triggers::update)
                .delete(triggers::delete),
        )
        .route("/triggers/{id}/pause", post(triggers::pause))
        .route("/triggers/{id}/resume", post(triggers::resume))
        .route("/runs", get(runs::list))
        .route("/runs/{id}", get(runs::get))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/executors", get(cluster::executors))
        .route("/monitors", get(cluster::monitors))
        .route("/status", get(cluster::status))
        .route("/audit", get(cluster::audit))
        .route("/schedule/preview", post(triggers::preview))
        .route("/openapi.json", get(openapi::document))
        .fallback(not_found);
    Router::new()
        .nest("/api/v1", v1)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
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
