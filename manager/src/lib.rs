//! probactr's manager: the web admin and the REST API.
//!
//! Any number of managers can run side by side: they keep no state of their own. Users,
//! sessions, API tokens, login failures and the audit log live in PostgreSQL next to the
//! jobs, triggers and runs they manage, so a request may land on any replica.
//!
//! # Layout
//!
//! - [`run`]: the process entry: pool, migrations, first admin, listener, graceful shutdown.
//! - [`app`]: the whole site as an [`axum::Router`] over an [`AppState`]; tests drive it
//!   with `tower::ServiceExt::oneshot`.
//! - [`state`]: what every handler shares (pool, Redis client, templates).
//! - [`error`]: [`error::ApiError`], the one error type of handlers, and its JSON form.
//! - [`idempotency`]: `Idempotency-Key` on `POST`s: the same request acts once.
//! - [`input`]: field-by-field reading of JSON input, so every bad field is named.
//! - [`auth`]: passwords, sessions, API tokens, roles, the [`auth::Principal`] extractor,
//!   single sign-on ([`auth::oidc`]).
//! - [`service`]: the operations (create a job, pause a trigger, cancel a run…), with
//!   their permission checks and audit records; the API and the admin both call them.
//! - [`db`]: the manager's own queries (listing with filters, versioned updates, users,
//!   audit log).
//! - [`api`]: the REST API under `/api/v1`, plus `/healthz`, `/readyz`, `/metrics`.
//! - [`admin`]: the server-rendered web admin.
//! - [`layers`]: tower-http middleware and security headers.
//! - [`retry`]: runs a request again when the database aborted it for concurrency.
//! - [`streams`]: the bounds on live output streams (per user, in time).
//! - [`sealing`]: sealed values bound to their owners (re-sealed at start), channel URLs
//!   masked.

pub mod admin;
pub mod api;
pub mod auth;
pub mod command;
pub mod error;
pub mod idempotency;
pub mod input;
pub mod layers;
pub mod retry;
pub mod sealing;
pub mod service;
pub mod startup;
pub mod state;
pub mod streams;

pub use startup::run;
pub use state::AppState;

/// The whole site: REST API, health endpoints and web admin, with the middleware stack.
pub fn app(state: AppState) -> axum::Router {
    let api = api::router().layer(axum::middleware::from_fn_with_state(
        state.clone(),
        idempotency::honour,
    ));
    let router = axum::Router::new()
        .merge(api)
        .merge(admin::router())
        .layer(axum::middleware::from_fn_with_state(
            state.handles.reads.clone(),
            service::reads::note_writes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.tokens.clone(),
            auth::tokens::forget_after_access_changes,
        ))
        .with_state(state);
    layers::apply(router)
}
