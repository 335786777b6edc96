//! The one error type of the manager's handlers and how it answers.
//!
//! Every failure becomes JSON `{"error": {"code", "message", "fields": {field: message}}}`
//! (the admin renders the same [`ApiError`] as a page or as inline field errors). The
//! policy:
//!
//! - input errors are 422 and name every bad field; nothing was changed;
//! - 401 without credentials, 403 when the caller's role may not do it, 404 for an id that
//!   does not exist, 409 when a `PATCH` carried a stale `version`, 412 when its
//!   `If-Match` was stale, 429 for a login that hit the rate limit or a caller past the
//!   open live output streams allowed;
//! - a transaction PostgreSQL aborted for concurrency (serialization failure, deadlock)
//!   is 503 `busy` with `Retry-After` (a pool with no free connection: 503
//!   `unavailable`): the request
//!   changed nothing and may be sent again. The response carries [`Busy`] so that
//!   [`crate::retry`] runs the request again first; clients see it only when every
//!   attempt was aborted. Never a 500;
//! - database and unexpected errors are logged with their cause chain and answered with a
//!   generic 500 that leaks nothing.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use probactr_common::store::retry::{caused_by_transient, Transient};
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
    /// `forbidden`, `not_found`, `conflict`, `precondition_failed`, `too_many_requests`,
    /// `unavailable`, `busy`, `internal`.
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
    /// The request conflicts with the object's state.
    #[error("{0}")]
    Conflict(String),
    /// The object changed since the caller read it (a stale `version` in the body: 409).
    #[error("{0}")]
    Stale(String),
    /// The object changed since the caller read it (a stale `If-Match`: 412).
    #[error("{0}")]
    PreconditionFailed(String),
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
    /// The database aborted the work for concurrency: nothing changed, try again.
    #[error("the database is busy with concurrent changes; nothing was changed, try again")]
    Busy,
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
            ApiError::Conflict(_) | ApiError::Stale(_) => StatusCode::CONFLICT,
            ApiError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::TooManyAttempts { .. } | ApiError::TooMany(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) | ApiError::Busy => StatusCode::SERVICE_UNAVAILABLE,
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
            ApiError::Conflict(_) | ApiError::Stale(_) => "conflict",
            ApiError::PreconditionFailed(_) => "precondition_failed",
            ApiError::TooManyAttempts { .. } | ApiError::TooMany(_) => "too_many_requests",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Busy => "busy",
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
        match err {
            StoreError::Database(err) => err.into(),
            other => ApiError::Internal(other.into()),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        if err.is_transient() {
            tracing::debug!(error = %err, "transaction aborted for concurrency");
            ApiError::Busy
        } else if matches!(err, sqlx::Error::PoolTimedOut) {
            // Not run again here (that would add load to a saturated pool): the client
            // is told to come back.
            ApiError::Unavailable("no database connection is free; try again".to_owned())
        } else {
            ApiError::Internal(err.into())
        }
    }
}

impl ApiError {
    /// This error with an aborted transaction found in an internal error's cause chain
    /// (errors that went through `anyhow`) made [`ApiError::Busy`].
    pub fn normalized(self) -> ApiError {
        match self {
            ApiError::Internal(err) if err.chain().any(caused_by_transient) => ApiError::Busy,
            other => other,
        }
    }
}

/// Marks a response as the answer to work the database aborted for concurrency
/// ([`ApiError::Busy`]): [`crate::retry`] runs such requests again.
#[derive(Debug, Clone, Copy)]
pub struct Busy;

/// Seconds a client should wait before sending a request answered busy again.
pub const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// Adds what every busy answer carries: `Retry-After` and the [`Busy`] mark.
pub fn mark_busy(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_AFTER_SECS));
    response.extensions_mut().insert(Busy);
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let this = self.normalized();
        this.log();
        let body = ErrorBody {
            error: ErrorDetail {
                code: this.code(),
                message: this.to_string(),
                fields: this.fields(),
            },
        };
        let mut response = (this.status_code(), Json(body)).into_response();
        match &this {
            ApiError::Busy => mark_busy(&mut response),
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
