//! `GET /api/v1/openapi.json`: the API's OpenAPI document, generated from the code.
//!
//! Each handler carries a `#[utoipa::path]` description and is routed by a `routes!` line
//! of [`super::documented_router`], which collects the descriptions as it routes; the
//! schemas come from the types the handlers answer with (`#[derive(ToSchema)]`) and, for
//! request bodies, from the commands they become ([`crate::command`]) or, for bodies read
//! where they are handled, from [`super::bodies`]. The document is built once, on first
//! request.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, SecurityRequirement, Tag};

/// The document's frame: what the routes do not say (title, version, how to sign in).
/// Every operation needs a bearer token (or the admin's session cookie) unless its own
/// description says `security(())`.
pub fn skeleton() -> OpenApi {
    let bearer = SecurityScheme::Http(
        HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "A token from `POST /api/v1/auth/token` or the admin's API tokens page. \
                 Browser sessions use the session cookie plus the `X-CSRF-Token` header instead.",
            ))
            .build(),
    );
    let tags = [
        ("auth", "Tokens and the caller"),
        ("jobs", "What runs"),
        ("triggers", "When it runs"),
        ("runs", "Each execution and its outcome"),
        ("cluster", "Executors, monitors, status and the audit log"),
        ("users", "Users and API tokens"),
        ("workflows", "DAGs of jobs: steps, workflow runs, retries"),
        (
            "secrets",
            "Named values jobs reference as {{ secrets.NAME }}; write-only",
        ),
        (
            "pools",
            "Scarce things jobs share: a pool's slots bound its jobs' runs at once",
        ),
        (
            "calendars",
            "Named sets of days a namespace's triggers skip or keep to",
        ),
        (
            "maintenance",
            "Windows in which instants are skipped or deferred; the cluster pause",
        ),
        (
            "operations",
            "Health, readiness and metrics, without authentication",
        ),
    ]
    .map(|(name, description)| {
        let mut tag = Tag::new(name);
        tag.description = Some(description.to_owned());
        tag
    });
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("probactr manager API")
                .version(probactr_common::VERSION)
                .description(Some(
                    "Jobs, triggers and runs of a probactr cluster. Errors are \
                     `{\"error\": {\"code\", \"message\", \"fields\"}}`; invalid input is a 422 naming \
                     every bad field, and changes nothing. Every `POST` honours an `Idempotency-Key` \
                     header: the same key and request within 24 h answer the first answer again \
                     (`Idempotent-Replayed: true`), the same key with another request is a 422. Jobs, \
                     triggers and workflows answer with `ETag: \"VERSION\"`; `PATCH` and `PUT` honour \
                     `If-Match` (412 when stale). Concurrency never answers 500: work the database \
                     aborted (deadlock, serialization failure) is retried, then answered 503 `busy` \
                     with `Retry-After`.",
                ))
                .build(),
        )
        .components(Some(
            ComponentsBuilder::new().security_scheme("bearer", bearer).build(),
        ))
        .security(Some([SecurityRequirement::new("bearer", Vec::<String>::new())]))
        .tags(Some(tags))
        .build()
}

/// The whole document, as JSON text.
pub fn document_json() -> &'static str {
    static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
        let (_router, document) = super::documented_router().split_for_parts();
        document
            .to_json()
            .unwrap_or_else(|err| format!("{{\"error\": \"cannot serialize the document: {err}\"}}"))
    });
    &DOCUMENT
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", operation_id = "openapi", tag = "operations", security(()),
    responses((status = OK, description = "The OpenAPI 3.1 document of this API", content_type = "application/json")))]
pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document_json())
}
