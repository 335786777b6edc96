//! `POST /api/v1/definitions/apply`: definitions as code applied by the server, all
//! checked before anything changes (see [`crate::service::definitions`]).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ErrorBody, ErrorDetail, FieldErrors};
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

/// A refused apply: the usual error body, and every problem in the files' order.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApplyRefusal {
    /// What went wrong; `fields` keys each problem by `FILE:LINE: field`.
    pub error: ErrorDetail,
    /// Every problem, by file and line.
    pub errors: Vec<DefinitionProblem>,
}

/// One problem of a definition file.
#[derive(Debug, Serialize, ToSchema)]
pub struct DefinitionProblem {
    /// The file (`request` for a body sent alone).
    pub file: String,
    /// Its line, when known.
    pub line: Option<u32>,
    /// The field at fault, when one is (`jobs[0].timeout_secs`, `cron`…).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// Apply definitions (the format of `probactr export`: `jobs`, `workflows`, `channels`,
/// `alert_rules`), as YAML or JSON. Several files may be sent at once as JSON
/// `{"files": {"NAME": "TEXT", …}}` (errors then name each file). Every object is checked
/// first: any problem answers 422 naming each (`FILE:LINE: field`) and changes nothing.
/// The answer's `errors` lists every problem, by file and line (a dry run checks as much
/// as an apply). Then every change is made in one transaction, committed only when all
/// succeeded.
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
        (status = UNPROCESSABLE_ENTITY, description = "Every problem, named by file, line and field (or the object the database refused to write); nothing was changed", body = ApplyRefusal),
        (status = CONFLICT, description = "An object the file names changed while it was applied; nothing was changed", body = ErrorBody),
        (status = SERVICE_UNAVAILABLE, description = "The database aborted every attempt for concurrency; nothing was changed, try again after `Retry-After`", body = ErrorBody),
        (status = "default", description = "Not allowed, not signed in, or a server error", body = ErrorBody),
    ))]
pub async fn apply(
    State(state): State<AppState>,
    who: Principal,
    query: QueryParams,
    body: Bytes,
) -> Result<Json<ApplyReport>, Response> {
    let mut errors = FieldErrors::new();
    let dry_run = query.flag("dry_run", &mut errors);
    let prune = query.flag("prune", &mut errors);
    check(errors).map_err(IntoResponse::into_response)?;
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::field("body", "is not UTF-8 text").into_response())?;
    let report = Definitions::of(&state.handles, &who, query.text("namespace"))
        .map_err(IntoResponse::into_response)?
        .apply(&files_of(text), dry_run, prune)
        .await
        .map_err(refused)?;
    Ok(Json(ApplyReport {
        dry_run,
        changes: report.changes,
    }))
}

/// The answer to a refused apply: bad files get [`ApplyRefusal`], the rest the usual body.
fn refused(err: ApiError) -> Response {
    let ApiError::Invalid(fields) = err else {
        return err.into_response();
    };
    let errors = problems_of(&fields);
    let body = ApplyRefusal {
        error: ErrorDetail {
            code: "invalid_input",
            message: "invalid input".to_owned(),
            fields,
        },
        errors,
    };
    (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
}

/// The problems keyed `FILE:LINE: field` (or `FILE:LINE`, or a bare field) as a list in
/// the files' order.
fn problems_of(fields: &FieldErrors) -> Vec<DefinitionProblem> {
    let mut problems: Vec<DefinitionProblem> = fields
        .iter()
        .map(|(at, message)| {
            let (place, field) = match at.split_once(": ") {
                Some((place, field)) => (place, Some(field.to_owned())),
                None => (at.as_str(), None),
            };
            let (file, line) = match place.rsplit_once(':') {
                Some((file, line)) if line.parse::<u32>().is_ok() => (file.to_owned(), line.parse().ok()),
                _ if field.is_none() => ("request".to_owned(), None),
                _ => (place.to_owned(), None),
            };
            let field = field.or_else(|| line.is_none().then(|| at.clone()));
            DefinitionProblem {
                file,
                line,
                field,
                message: message.clone(),
            }
        })
        .collect();
    problems.sort_by(|a, b| (&a.file, a.line, &a.field).cmp(&(&b.file, b.line, &b.field)));
    problems
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
