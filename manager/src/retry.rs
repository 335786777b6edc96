//! Runs a request again when the database aborted its work for concurrency.
//!
//! Every handler does its writes in one transaction (a service call); when PostgreSQL
//! chooses it as the victim of a deadlock or a serialization failure, the transaction
//! was rolled back whole and the handler answers [`ApiError::Busy`](crate::error::ApiError::Busy),
//! marked [`Busy`]. This middleware, innermost in the stack, keeps the request's head and
//! body and runs the handler again through the one retry policy of every process
//! ([`probactr_common::store::retry`]: bounded attempts, full jitter, each retry logged).
//! Only when every attempt was aborted does the client see the 503 with `Retry-After`.

use std::fmt;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use probactr_common::store::retry::{retry_transient, Transient};

use crate::error::{ApiError, Busy};
use crate::layers::{loggable_path, BODY_LIMIT};

/// A response marked [`Busy`], as a failure the retry loop recognizes.
struct Aborted(Response);

impl Transient for Aborted {
    fn is_transient(&self) -> bool {
        true
    }
}

impl fmt::Display for Aborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "answered {} busy", self.0.status())
    }
}

/// The middleware: see the module's documentation.
pub async fn retry_aborted(request: Request, next: Next) -> Response {
    let (head, body) = request.into_parts();
    let body: Bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::Rejected {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!("the request body is larger than {BODY_LIMIT} bytes or was cut"),
            }
            .into_response()
        }
    };
    let what = format!("{} {}", head.method, loggable_path(head.uri.path()));
    let outcome = retry_transient(&what, || {
        let request = Request::from_parts(head.clone(), Body::from(body.clone()));
        let next = next.clone();
        async move {
            let response = next.run(request).await;
            if response.extensions().get::<Busy>().is_some() {
                Err(Aborted(response))
            } else {
                Ok(response)
            }
        }
    })
    .await;
    match outcome {
        Ok(response) | Err(Aborted(response)) => response,
    }
}
