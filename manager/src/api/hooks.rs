//! `POST /hooks/{token}`: a delivery to a webhook trigger. It needs no session or API
//! token (the token in the path is the credential) and reveals nothing: an unknown token
//! is a 404 like any unknown route.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::error::{ApiError, ErrorBody};
use crate::service::webhooks;
use crate::state::AppState;

/// Start a run of a webhook trigger's job. The body is whatever the sender posts (JSON
/// when the trigger maps it to parameters with `params_from`); it is checked against the trigger's signature settings;
/// a delivery id already accepted within 24 h (the trigger's `dedup_header`) answers 200
/// with the first delivery's run and starts nothing.
#[utoipa::path(post, path = "/hooks/{token}", operation_id = "deliver_webhook", tag = "triggers", security(()),
    params(("token" = String, Path, description = "The webhook's token, from its URL")),
    responses(
        (status = ACCEPTED, description = "A run was queued: `{\"run_id\": ID}`"),
        (status = OK, description = "A repeat of an accepted delivery: `{\"run_id\": ID, \"duplicate\": true}`"),
        (status = UNAUTHORIZED, description = "The signature is missing or wrong; nothing was started"),
        (status = CONFLICT, description = "The trigger or its job is paused"),
        (status = UNPROCESSABLE_ENTITY, description = "The body does not give valid parameters (the reason names the parameter)"),
        (status = TOO_MANY_REQUESTS, description = "More deliveries this minute than the trigger's `rate_per_minute`"),
        (status = NOT_FOUND, description = "No webhook has this token", body = ErrorBody),
    ))]
pub async fn deliver(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let reply = webhooks::receive(&state.handles, &token, &headers, &body).await?;
    Ok((reply.status, Json(reply)).into_response())
}
