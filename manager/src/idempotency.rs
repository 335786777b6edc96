//! `Idempotency-Key`: a `POST` under `/api/v1` sent with this header acts once. The
//! same key with the same request (method, path, query and body) within 24 hours gets
//! the first answer again, status and body (the same run id for a run-now), marked
//! `Idempotent-Replayed: true`; the same key with another request is refused (422); while
//! the first is still running, the second is answered 409 (`Retry-After`).
//!
//! Keys are scoped to the credential that sent them (the digest of the bearer token or
//! session cookie); a request without credentials is not tracked (it is refused anyway).
//! Answers that say "try again" (5xx: busy, unavailable) are not kept: their key is given
//! back, and the retry runs. Keys live in the database ([`store::idempotency`]), so every
//! manager replica honours them.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use probactr_common::store;
use probactr_common::store::idempotency::{Answer, Claim};
use sha2::{Digest, Sha256};

use crate::auth::secret::digest;
use crate::auth::session;
use crate::error::ApiError;
use crate::layers::BODY_LIMIT;
use crate::state::AppState;

/// The request header carrying the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The response header marking a replayed answer.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The longest key accepted.
pub const MAX_KEY_LENGTH: usize = 255;

/// The middleware: see the module's documentation.
pub async fn honour(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !request.headers().contains_key(IDEMPOTENCY_KEY) {
        return next.run(request).await;
    }
    let key = match request.headers().get(IDEMPOTENCY_KEY).map(HeaderValue::to_str) {
        Some(Ok(key)) if !key.trim().is_empty() && key.len() <= MAX_KEY_LENGTH => key.trim().to_owned(),
        _ => {
            return ApiError::field(
                "Idempotency-Key",
                format!("must be 1 to {MAX_KEY_LENGTH} visible ASCII characters"),
            )
            .into_response()
        }
    };
    let (head, body) = request.into_parts();
    let Some(owner) = owner(&head) else {
        return next.run(Request::from_parts(head, body)).await;
    };
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(body) => body,
        Err(_) => {
            return ApiError::Rejected {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!("the request body is larger than {BODY_LIMIT} bytes or was cut"),
            }
            .into_response()
        }
    };
    let fingerprint = fingerprint(
        &head.method,
        head.uri.path_and_query().map_or("", |p| p.as_str()),
        &body,
    );
    match store::idempotency::claim(&state.handles.pool, &owner, &key, &fingerprint).await {
        Ok(Claim::Claimed) => {}
        Ok(Claim::Answered(answer)) => {
            tracing::info!(idempotency_key = %key, status = answer.status, "replaying the first answer");
            return replay(answer);
        }
        Ok(Claim::InProgress) => {
            let mut response = ApiError::Conflict(
                "a request with this Idempotency-Key is still running; try again".to_owned(),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        }
        Ok(Claim::Mismatch) => {
            return ApiError::field(
                "Idempotency-Key",
                "this key was used for another request (another path or body) in the last 24 hours",
            )
            .into_response()
        }
        Err(err) => return ApiError::from(err).into_response(),
    }
    let response = next.run(Request::from_parts(head, Body::from(body))).await;
    let status = response.status();
    if status.is_server_error()
        || status == StatusCode::UNAUTHORIZED
        || status == StatusCode::TOO_MANY_REQUESTS
    {
        // Worth sending again: the key must not pin this answer.
        if let Err(err) = store::idempotency::release(&state.handles.pool, &owner, &key).await {
            tracing::warn!(idempotency_key = %key, error = %err, "cannot give the key back; it is taken over in minutes");
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    let body: Bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(err) => {
            tracing::warn!(idempotency_key = %key, error = %err, "cannot read the answer to keep it");
            let _ = store::idempotency::release(&state.handles.pool, &owner, &key).await;
            return ApiError::Internal(anyhow::anyhow!("answer body: {err}")).into_response();
        }
    };
    let answer = Answer {
        status: parts.status.as_u16(),
        content_type: parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
        body: body.to_vec(),
    };
    if let Err(err) = store::idempotency::complete(&state.handles.pool, &owner, &key, &answer).await {
        // The work is done and answered; a retry would be taken over after
        // `ABANDONED_AFTER` and run again, which is logged here.
        tracing::error!(idempotency_key = %key, error = %err, "cannot keep the answer of an idempotent request");
    }
    Response::from_parts(parts, Body::from(body))
}

/// Whose keys these are: the digest of the request's bearer token or session cookie.
fn owner(head: &axum::http::request::Parts) -> Option<String> {
    if let Some(token) = crate::auth::bearer(head) {
        return Some(format!("token:{}", digest(token)));
    }
    session::cookie(&head.headers).map(|session| format!("session:{}", digest(&session)))
}

/// The request's identity: its method, path and query, and body.
fn fingerprint(method: &Method, path_and_query: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(method.as_str().as_bytes());
    hash.update(b" ");
    hash.update(path_and_query.as_bytes());
    hash.update(b"\n");
    hash.update(body);
    hex::encode(hash.finalize())
}

/// The stored answer, as it was given.
fn replay(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    if let Some(value) = answer
        .content_type
        .as_deref()
        .and_then(|value| HeaderValue::from_str(value).ok())
    {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_tells_requests_apart() {
        let a = fingerprint(&Method::POST, "/api/v1/jobs/1/run", b"{}");
        assert_eq!(a, fingerprint(&Method::POST, "/api/v1/jobs/1/run", b"{}"));
        assert_ne!(a, fingerprint(&Method::POST, "/api/v1/jobs/2/run", b"{}"));
        assert_ne!(
            a,
            fingerprint(&Method::POST, "/api/v1/jobs/1/run", b"{\"params\":{}}")
        );
    }
}
