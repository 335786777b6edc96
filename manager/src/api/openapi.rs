//! `GET /api/v1/openapi.json`: the API's OpenAPI 3.1 document.
//!
//! Hand-maintained for now (a generator such as utoipa would add a heavy dependency
//! tree); the test `every_documented_operation_is_routed` checks that each operation
//! listed here is served by [`super::router`]. Add new routes to [`OPERATIONS`].

use axum::Json;
use serde_json::{json, Map, Value};

/// Every documented operation: method, path, summary, success status.
pub const OPERATIONS: &[(&str, &str, &str, u16)] = &[
    (
        "post",
        "/auth/token",
        "Trade a user name and password for a bearer token",
        201,
    ),
    ("delete", "/auth/token", "Revoke the bearer token in use", 204),
    ("get", "/me", "The caller", 200),
    (
        "post",
        "/me/password",
        "Change one's password (ends one's sessions)",
        204,
    ),
    ("get", "/users", "List users (admin)", 200),
    ("post", "/users", "Create a user (admin)", 201),
    (
        "patch",
        "/users/{id}",
        "Change a user's role, disabled flag or password (admin)",
        200,
    ),
    ("get", "/tokens", "The caller's API tokens", 200),
    (
        "post",
        "/tokens",
        "Create an API token; the secret is shown once",
        201,
    ),
    ("delete", "/tokens/{id}", "Revoke an API token", 204),
    ("get", "/jobs", "List jobs (q, kind, paused, limit, offset)", 200),
    ("post", "/jobs", "Create a job (shell and http: admin only)", 201),
    ("get", "/jobs/{id}", "Read a job with its statistics", 200),
    (
        "patch",
        "/jobs/{id}",
        "Edit a job; carries `version`, 409 when stale",
        200,
    ),
    (
        "delete",
        "/jobs/{id}",
        "Delete a job with its triggers and history",
        204,
    ),
    ("post", "/jobs/{id}/pause", "Pause a job", 200),
    ("post", "/jobs/{id}/resume", "Resume a job", 200),
    (
        "post",
        "/jobs/{id}/run",
        "Queue a run now; answers the run's id",
        202,
    ),
    ("get", "/jobs/{id}/triggers", "List a job's triggers", 200),
    (
        "post",
        "/jobs/{id}/triggers",
        "Create a trigger (cron, interval, once)",
        201,
    ),
    ("get", "/triggers/{id}", "Read a trigger", 200),
    (
        "patch",
        "/triggers/{id}",
        "Edit a trigger; carries `version`, 409 when stale",
        200,
    ),
    (
        "delete",
        "/triggers/{id}",
        "Delete a trigger (its runs stay)",
        204,
    ),
    ("post", "/triggers/{id}/pause", "Pause a trigger", 200),
    ("post", "/triggers/{id}/resume", "Resume a trigger", 200),
    (
        "get",
        "/runs",
        "List runs, newest first (job_id, state, since, until, limit, offset)",
        200,
    ),
    ("get", "/runs/{id}", "Read a run with its output", 200),
    (
        "post",
        "/runs/{id}/cancel",
        "Cancel a run; 409 when it already ended",
        200,
    ),
    (
        "get",
        "/executors",
        "Registered executors with running and capacity",
        200,
    ),
    ("get", "/monitors", "Registered monitors", 200),
    ("get", "/status", "Cluster summary", 200),
    ("get", "/audit", "The audit log, newest first (admin)", 200),
    (
        "post",
        "/schedule/preview",
        "The next instants of a trigger definition",
        200,
    ),
    ("get", "/openapi.json", "This document", 200),
];

fn operation(summary: &str, status: u16, path: &str) -> Value {
    let mut op = json!({
        "summary": summary,
        "responses": {
            status.to_string(): {"description": "success"},
            "default": {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        }
    });
    if path.contains("{id}") {
        op["parameters"] =
            json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}]);
    }
    if path != "/auth/token" && path != "/openapi.json" {
        op["security"] = json!([{"bearer": []}]);
    }
    op
}

/// The document.
pub fn build() -> Value {
    let mut paths = Map::new();
    for (method, path, summary, status) in OPERATIONS {
        let entry = paths.entry(format!("/api/v1{path}")).or_insert_with(|| json!({}));
        entry[*method] = operation(summary, *status, path);
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "probactr manager API", "version": probactr_common::VERSION},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "object", "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "fields": {"type": "object", "additionalProperties": {"type": "string"}}
                    }}}
                },
                "Job": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "name": {"type": "string"}, "description": {"type": "string"},
                    "kind": {"enum": ["shell", "http", "noop", "sleep"]}, "spec": {"type": "object"},
                    "parallel": {"type": "boolean"}, "max_concurrency": {"type": ["integer", "null"]},
                    "overlap": {"enum": ["skip", "queue"]}, "timeout_secs": {"type": "integer"},
                    "retry": {"type": "object", "properties": {"max_attempts": {"type": "integer"}, "backoff_secs": {"type": "integer"}}},
                    "paused": {"type": "boolean"}, "version": {"type": "integer"},
                    "stats": {"type": "object",
                        "description": "Counts over the job's latest `window` runs; `capped` when it has more.",
                        "properties": {
                            "runs": {"type": "integer"}, "window": {"type": "integer"}, "capped": {"type": "boolean"},
                            "successes": {"type": "integer"}, "failures": {"type": "integer"},
                            "last_run_at": {"type": ["string", "null"], "format": "date-time"},
                            "next_fire_at": {"type": ["string", "null"], "format": "date-time"}
                        }}
                }},
                "Trigger": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "job_id": {"type": "integer"}, "kind": {"enum": ["cron", "interval", "once"]},
                    "cron": {"type": ["string", "null"]}, "timezone": {"type": "string"},
                    "interval_secs": {"type": ["integer", "null"]}, "at": {"type": ["string", "null"], "format": "date-time"},
                    "start_at": {"type": ["string", "null"]}, "end_at": {"type": ["string", "null"]},
                    "misfire": {"enum": ["fire_once", "skip", "fire_all"]}, "paused": {"type": "boolean"},
                    "next_fire_at": {"type": ["string", "null"]}, "version": {"type": "integer"}
                }}
            }
        }
    })
}

/// `GET /api/v1/openapi.json`.
pub async fn document() -> Json<Value> {
    Json(build())
}
