//! `/healthz` (the process answers), `/readyz` (PostgreSQL and Redis answer) and
//! `/metrics` (Prometheus text). None needs authentication; none reveals job data.

use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use probactr_common::store;

use crate::error::ApiError;
use crate::service;
use crate::state::AppState;

/// How long a readiness check waits for each dependency.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The process is up (it does not look at PostgreSQL or Redis).
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "operations", security(()),
    responses((status = OK, description = "`{\"status\": \"ok\"}`", content_type = "application/json")))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

async fn postgres(state: &AppState) -> Result<(), String> {
    let ping = store::ping(&state.handles.pool);
    match tokio::time::timeout(CHECK_TIMEOUT, ping).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

async fn redis(state: &AppState) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, state.redis.ping()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

fn verdict(result: &Result<(), String>) -> serde_json::Value {
    match result {
        Ok(()) => json!("ok"),
        Err(err) => json!({"error": err}),
    }
}

/// Ready to serve: both PostgreSQL and Redis answer within 2 s.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "operations", security(()),
    responses(
        (status = OK, description = "Both answer", content_type = "application/json"),
        (status = SERVICE_UNAVAILABLE, description = "Which one does not, and why", content_type = "application/json"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let (pg, rd) = tokio::join!(postgres(&state), redis(&state));
    let ready = pg.is_ok() && rd.is_ok();
    if !ready {
        tracing::warn!(postgres = ?pg, redis = ?rd, "not ready");
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({"status": if ready { "ok" } else { "unavailable" }, "postgres": verdict(&pg), "redis": verdict(&rd)});
    (status, Json(body)).into_response()
}

/// Cluster numbers read from PostgreSQL (runs by state, processes, jobs, overdue
/// triggers), in Prometheus text format.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tag = "operations", security(()),
    responses((status = OK, description = "Prometheus text exposition", content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let m = service::cluster::metrics(&state.handles).await?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP probactr_runs Runs kept in history, by state.\n# TYPE probactr_runs gauge"
    );
    for (run_state, count) in &m.runs_by_state {
        let _ = writeln!(out, "probactr_runs{{state=\"{run_state}\"}} {count}");
    }
    let _ = writeln!(
        out,
        "# HELP probactr_processes Registered processes, by role and state.\n# TYPE probactr_processes gauge"
    );
    for (role, process_state, count) in &m.processes {
        let _ = writeln!(
            out,
            "probactr_processes{{role=\"{role}\",state=\"{process_state}\"}} {count}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP probactr_jobs Jobs defined.\n# TYPE probactr_jobs gauge\nprobactr_jobs {}",
        m.jobs
    );
    let _ = writeln!(out, "# HELP probactr_jobs_paused Paused jobs.\n# TYPE probactr_jobs_paused gauge\nprobactr_jobs_paused {}", m.jobs_paused);
    let _ = writeln!(
        out,
        "# HELP probactr_triggers_overdue Unpaused triggers more than 5 s past their instant.\n# TYPE probactr_triggers_overdue gauge\nprobactr_triggers_overdue {}",
        m.triggers_overdue
    );
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
        .into_response())
}
