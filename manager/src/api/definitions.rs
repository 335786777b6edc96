//! `POST /api/v1/definitions/apply`: definitions as code applied by the server, all
//! checked before anything changes (see [`crate::service::definitions`]).

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody, FieldErrors};
use crate::input::{check, QueryParams};
use crate::service::definitions::Definitions;
use crate::state::AppState;

/// What an apply changed, or would change with `dry_run`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApplyReport {
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// One line per change: `+ job NAME`, `~ job NAME: field a → b`, `- job NAME`…
    /// Empty when the server already matches.
    pub changes: Vec<String>,
}

/// Apply definitions (the format of `probactr export`: `jobs`, `workflows`, `channels`,
/// `alert_rules`), as YAML or JSON. Several files may be sent at once as JSON
/// `{"files": {"NAME": "TEXT", …}}` (errors then name each file). Every object is checked
/// first: any problem answers 422 naming each (`FILE:LINE: field`) and changes nothing.
/// Then every change is made in one transaction, committed only when all succeeded.
/// Applies are serialized across managers. The answer is the diff.
#[utoipa::path(post, path = "/definitions/apply", operation_id = "apply_definitions", tag = "jobs",
    params(
        ("dry_run" = Option<bool>, Query, description = "Only say what would change (default false)"),
        ("prune" = Option<bool>, Query, description = "Also delete the jobs apply manages that the files no longer name (in the namespace applied to only)"),
        ("namespace" = Option<String>, Query, description = "The namespace the definitions go to (default `default`)"),
    ),
    request_body(content = String, description = "The definitions, YAML or JSON", content_type = "application/yaml"),
    responses(
        (status = OK, description = "The changes made (or, with dry_run, that would be made)", body = ApplyReport),
        (status = UNPROCESSABLE_ENTITY, description = "Every problem, named by file, line and field (or the object the database refused to write); nothing was changed", body = ErrorBody),
        (status = CONFLICT, description = "An object the file names changed while it was applied; nothing was changed", body = ErrorBody),
        (status = SERVICE_UNAVAILABLE, description = "The database aborted every attempt for concurrency; nothing was changed, try again after `Retry-After`", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn apply(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
    body: Bytes,
) -> Result<Json<ApplyReport>, ApiError> {
    let mut errors = FieldErrors::new();
    let dry_run = query.flag("dry_run", &mut errors);
    let prune = query.flag("prune", &mut errors);
    check(errors)?;
    let text = String::from_utf8(body.to_vec()).map_err(|_| ApiError::field("body", "is not UTF-8 text"))?;
    let report = Definitions::of(&state.handles, &who, query.text("namespace"))?
        .apply(&files_of(text), dry_run, prune)
        .await?;
    Ok(Json(ApplyReport {
        dry_run,
        changes: report.changes,
    }))
}

/// The files of a request: the several of `{"files": {NAME: TEXT}}`, else the body as one.
fn files_of(text: String) -> Vec<(String, String)> {
    if let Ok(Value::Object(top)) = serde_json::from_str::<Value>(&text) {
        if let (1, Some(Value::Object(files))) = (top.len(), top.get("files")) {
            if files.values().all(Value::is_string) {
                return files
                    .iter()
                    .map(|(name, text)| (name.clone(), text.as_str().unwrap_or_default().to_owned()))
                    .collect();
            }
        }
    }
    vec![("request".to_owned(), text)]
}
