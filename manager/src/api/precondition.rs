//! Optimistic concurrency over HTTP. Jobs, triggers and workflows answer with
//! `ETag: "VERSION"` (their `version`, bumped by every change), and `PATCH` and `PUT`
//! honour `If-Match: "VERSION"`: the change applies only to that version, else 412 and
//! nothing changes. A `PATCH` may instead carry `version` in its body (409 when stale), as
//! before; with both, `If-Match` decides.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::service::jobs::JobView;
use crate::service::triggers::TriggerView;
use crate::service::workflows::WorkflowView;

/// An object with a version.
pub trait Versioned {
    /// The version the object is at.
    fn version(&self) -> i64;
}

impl Versioned for JobView {
    fn version(&self) -> i64 {
        self.version
    }
}

impl Versioned for TriggerView {
    fn version(&self) -> i64 {
        self.trigger.version
    }
}

impl Versioned for WorkflowView {
    fn version(&self) -> i64 {
        self.workflow.version
    }
}

/// The `ETag` of a version.
pub fn etag(version: i64) -> HeaderValue {
    HeaderValue::from(version)
        .to_str()
        .ok()
        .and_then(|digits| HeaderValue::from_str(&format!("\"{digits}\"")).ok())
        .unwrap_or_else(|| HeaderValue::from_static("\"0\""))
}

/// An object answered as JSON with its `ETag`.
#[derive(Debug)]
pub struct Tagged<T>(pub T);

impl<T: Serialize + Versioned> IntoResponse for Tagged<T> {
    fn into_response(self) -> Response {
        let tag = etag(self.0.version());
        let mut response = Json(self.0).into_response();
        response.headers_mut().insert(header::ETAG, tag);
        response
    }
}

/// The version a request's `If-Match` names (None without the header, or for `*`).
#[derive(Debug, Clone, Copy, Default)]
pub struct IfMatch(pub Option<i64>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get(header::IF_MATCH) else {
            return Ok(IfMatch(None));
        };
        let text = value.to_str().unwrap_or("").trim();
        if text == "*" {
            return Ok(IfMatch(None));
        }
        let tag = text.strip_prefix("W/").unwrap_or(text);
        tag.trim_matches('"')
            .parse::<i64>()
            .map(|version| IfMatch(Some(version)))
            .map_err(|_| {
                ApiError::PreconditionFailed(format!(
                    "If-Match {text:?} is not an ETag this API gave (\"VERSION\")"
                ))
            })
    }
}

impl IfMatch {
    /// The body of a `PATCH` with the version to check: the `If-Match` one when given.
    pub fn into_patch(self, mut body: Value) -> Value {
        if let (Some(version), Value::Object(fields)) = (self.0, &mut body) {
            fields.insert("version".to_owned(), Value::from(version));
        }
        body
    }

    /// A stale version is a failed precondition (412) when `If-Match` named it.
    pub fn judge<T>(self, result: Result<T, ApiError>) -> Result<T, ApiError> {
        match result {
            Err(ApiError::Stale(message)) if self.0.is_some() => Err(ApiError::PreconditionFailed(message)),
            other => other,
        }
    }
}
