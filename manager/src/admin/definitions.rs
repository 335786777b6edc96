//! `/definitions`: the jobs and their triggers as YAML — download them, or upload YAML,
//! see the changes it would make, and apply them (the same as `probactr apply`).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;

use super::{render_status, AdminError, AdminUser, FormPost};
use crate::service::definitions::Definitions;
use crate::state::AppState;

/// What the page shows under the form.
#[derive(Default)]
struct Outcome {
    text: String,
    changes: Option<Vec<String>>,
    applied: bool,
    problem: Option<String>,
}

fn page_of(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    outcome: Outcome,
) -> Result<Response, AdminError> {
    let ctx = context! {
        text => outcome.text, changes => outcome.changes, applied => outcome.applied,
        problem => outcome.problem,
        ..user.layout("jobs")
    };
    render_status(state, status, "definitions.html", ctx)
}

/// `GET /definitions`.
pub async fn page(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    let text = Definitions::of(&state.handles, &user.0, user.definitions_namespace())?
        .export_yaml()
        .await?;
    page_of(
        &state,
        &user,
        StatusCode::OK,
        Outcome {
            text,
            ..Outcome::default()
        },
    )
}

/// `GET /definitions.yaml`: every job with its triggers, as a file.
pub async fn download(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    let text = Definitions::of(&state.handles, &user.0, user.definitions_namespace())?
        .export_yaml()
        .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/yaml; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"probactr-jobs.yaml\"",
            ),
        ],
        text,
    )
        .into_response())
}

/// `POST /definitions`: previews (`action=preview`) or applies uploaded YAML.
pub async fn upload(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let text = form.get("yaml").unwrap_or_default().to_owned();
    let apply = form.get("action") == Some("apply");
    let prune = form.get("prune").is_some();
    let definitions = Definitions::of(&state.handles, &user.0, user.definitions_namespace())?;
    let (status, outcome) = match definitions.apply_yaml(&text, !apply, prune).await {
        Ok(report) => {
            if apply {
                tracing::info!(
                    user.id = user.0.user_id,
                    changes = report.changes.len(),
                    "definitions applied"
                );
            }
            (
                StatusCode::OK,
                Outcome {
                    text,
                    changes: Some(report.changes),
                    applied: apply,
                    problem: None,
                },
            )
        }
        Err((status, problem)) => (
            status,
            Outcome {
                text,
                problem: Some(problem),
                ..Outcome::default()
            },
        ),
    };
    page_of(&state, &user, status, outcome)
}
