//! The one error type of the manager's handlers and how it answers.
//!
//! Every failure becomes JSON `{"error": {"code", "message", "fields": {field: message}}}`
//! (the admin renders the same [`ApiError`] as a page or as inline field errors). The
//! policy:
//!
//! - input errors are 422 and name every bad field; nothing was changed;
//! - 401 without credentials, 403 when the caller's role may not do it, 404 for an id that
//!   does not exist, 409 when a `PATCH` carried a stale `version`, 429 for a login that
//!   hit the rate limit or a caller past the open live output streams allowed;
//! - database and unexpected errors are logged with their cause chain and answered with a
//!   generic 500 that leaks nothing.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use probactr_common::store::StoreError;

/// Messages per field name (`name`, `spec.program`, `cron.minute`, `retry.max_attempts`…).
pub type FieldErrors = BTreeMap<String, String>;

/// The body of every error answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong, for people (`message`), programs (`code`) and forms (`fields`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code: `invalid_input`, `bad_request`, `unauthorized`,
    /// `forbidden`, `not_found`, `conflict`, `too_many_requests`, `internal`.
    #[schema(value_type = String)]
    pub code: &'static str,
    /// A sentence saying what happened.
    pub message: String,
    /// For invalid input, a message per bad field; empty otherwise.
    pub fields: BTreeMap<String, String>,
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Invalid input; each bad field is named.
    #[error("invalid input")]
    Invalid(FieldErrors),
    /// The request could not be read at all (malformed JSON, wrong content type, too
    /// large); the status is the extractor's (400, 413, 415).
    #[error("{message}")]
    Rejected {
        /// The status to answer with.
        status: StatusCode,
        /// What was wrong.
        message: String,
    },
    /// No valid credentials.
    #[error("authentication required")]
    Unauthorized,
    /// Valid credentials, insufficient role (or a missing CSRF token).
    #[error("{0}")]
    Forbidden(String),
    /// No such object.
    #[error("{what} {id} not found")]
    NotFound {
        /// What kind of object.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The object changed since the caller read it.
    #[error("{0}")]
    Conflict(String),
    /// Too many failed logins for this user from this address.
    #[error("too many failed logins; try again in {retry_after_secs} s")]
    TooManyAttempts {
        /// Seconds until the oldest counted failure leaves the window.
        retry_after_secs: u64,
    },
    /// The caller holds as many of something as allowed (open live output streams).
    #[error("{0}")]
    TooMany(String),
    /// Nothing could do it now (no monitor to deliver a test message).
    #[error("{0}")]
    Unavailable(String),
    /// A dependency failed or a bug: logged, answered generically.
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    /// A 422 naming one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::Invalid(FieldErrors::from([(field.into(), message.into())]))
    }

    /// A 404 for an object of kind `what`.
    pub fn not_found(what: &'static str, id: impl ToString) -> ApiError {
        ApiError::NotFound {
            what,
            id: id.to_string(),
        }
    }

    /// The HTTP status of this error.
    pub fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Rejected { status, .. } => *status,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooManyAttempts { .. } | ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Invalid(_) => "invalid_input",
            ApiError::Rejected { .. } => "bad_request",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound { .. } => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::TooManyAttempts { .. } | ApiError::TooMany(_) => "too_many_requests",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    /// The field errors (empty unless [`ApiError::Invalid`]).
    pub fn fields(&self) -> FieldErrors {
        match self {
            ApiError::Invalid(fields) => fields.clone(),
            _ => FieldErrors::new(),
        }
    }

    /// Logs internal errors with their cause chain (other errors are the caller's).
    pub fn log(&self) {
        if let ApiError::Internal(err) = self {
            tracing::error!(error = ?err, "request failed");
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        ApiError::Internal(err.into())
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        ApiError::Internal(err.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.to_string(),
                fields: self.fields(),
            },
        };
        let mut response = (self.status_code(), Json(body)).into_response();
        match &self {
            ApiError::Unauthorized => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::TooManyAttempts { retry_after_secs } => {
                if let Ok(value) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
            }
            _ => {}
        }
        response
    }
}
