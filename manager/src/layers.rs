//! The middleware stack: the retry of requests the database aborted for concurrency
//! ([`crate::retry`]), then from tower-http: request tracing, a request timeout (so a
//! draining manager cannot hang), compression, a request body limit, and the security
//! headers of every response (a strict Content-Security-Policy: only this site's own
//! script file and stylesheet; no inline script or style, no foreign origin), and
//! `Cache-Control: no-store` on everything but the static files. Request spans carry
//! the path with a webhook URL's token hidden ([`loggable_path`]).

use std::borrow::Cow;
use std::time::Duration;

use axum::extract::Request;

use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::Router;
use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// The longest a request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest request body accepted.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The Content-Security-Policy of every response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What is compressed: tower-http's defaults, except HTML. Admin pages hold a CSRF token
/// and echo user input (a search box); compressing both together would let an attacker
/// who can make a browser send requests and watch response sizes guess the token byte
/// by byte (BREACH). JSON, CSS and JavaScript hold no such secret.
fn compressible() -> impl Predicate {
    DefaultPredicate::new().and(NotForContentType::const_new("text/html"))
}

/// Where a webhook's URL starts; what follows is its token, a credential.
const HOOKS_PATH: &str = "/hooks/";

/// `path` fit for logs: the token of a webhook URL (`/hooks/{token}`) is a credential,
/// so it and anything after it are written `***`.
pub fn loggable_path(path: &str) -> Cow<'_, str> {
    match path.find(HOOKS_PATH) {
        Some(at) if path.len() > at + HOOKS_PATH.len() => {
            Cow::Owned(format!("{}{HOOKS_PATH}***", &path[..at]))
        }
        _ => Cow::Borrowed(path),
    }
}

/// The span of a request (tower-http's default fields, the path made loggable).
fn request_span(request: &Request) -> tracing::Span {
    let query = request.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
    tracing::debug_span!(
        "request",
        method = %request.method(),
        uri = %format_args!("{}{query}", loggable_path(request.uri().path())),
        version = ?request.version(),
    )
}

/// Wraps the router in the middleware stack.
pub fn apply(router: Router) -> Router {
    let headers: [(HeaderName, &'static str); 5] = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ];
    // Pages and API answers carry what their caller may see (jobs, runs, tokens): no
    // cache keeps them. The static files set their own caching, which is kept.
    // Innermost: a request the database aborted for concurrency runs again before any
    // other layer sees its answer.
    let router = router.layer(axum::middleware::from_fn(crate::retry::retry_aborted));
    let mut router = router.layer(SetResponseHeaderLayer::if_not_present(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    ));
    for (name, value) in headers {
        router = router.layer(SetResponseHeaderLayer::overriding(
            name,
            HeaderValue::from_static(value),
        ));
    }
    router
        .layer(CompressionLayer::new().compress_when(compressible()))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
}

#[cfg(test)]
mod tests {
    use super::loggable_path;

    #[test]
    fn a_webhook_token_never_reaches_the_logs() {
        assert_eq!(loggable_path("/hooks/whk_0123abcd"), "/hooks/***");
        assert_eq!(loggable_path("/hooks/whk_0123abcd/extra"), "/hooks/***");
        assert_eq!(loggable_path("//hooks/whk_0123abcd"), "//hooks/***");
        assert_eq!(loggable_path("/api/v1/jobs/7"), "/api/v1/jobs/7");
        assert_eq!(loggable_path("/hooks/"), "/hooks/");
    }
}
