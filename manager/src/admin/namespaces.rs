//! `/namespaces` (cluster admins): the namespaces, created, their quotas edited, the
//! empty ones deleted (a namespace still holding objects says what is left).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde_json::{json, Map, Value};

use super::{render_status, AdminError, AdminUser, FormData, FormPost};
use crate::error::{ApiError, FieldErrors};
use crate::service::namespaces;
use crate::state::AppState;

async fn namespaces_page(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    errors: FieldErrors,
    conflict: Option<String>,
) -> Result<Response, AdminError> {
    user.0.require_cluster_admin("manage namespaces")?;
    let list = namespaces::list(&state.handles, &user.0).await?;
    let ctx = context! { namespaces_list => list, errors, conflict, ..user.layout("namespaces") };
    render_status(state, status, "namespaces.html", ctx)
}

/// `GET /namespaces`.
pub async fn page(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    namespaces_page(&state, &user, StatusCode::OK, FieldErrors::new(), None).await
}

/// The form's fields as an API body: blank quotas are none.
fn body_of(form: &FormData, with_name: bool) -> Value {
    let mut body = Map::new();
    if with_name {
        body.insert("name".into(), json!(form.get("name").unwrap_or_default().trim()));
    }
    body.insert(
        "description".into(),
        json!(form.get("description").unwrap_or_default()),
    );
    for key in ["max_running", "max_jobs"] {
        let text = form.get(key).unwrap_or_default().trim();
        let value = if text.is_empty() {
            Value::Null
        } else {
            text.parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| json!(text))
        };
        body.insert(key.into(), value);
    }
    Value::Object(body)
}

async fn answer(
    state: &AppState,
    user: &AdminUser,
    outcome: Result<(), ApiError>,
) -> Result<Response, AdminError> {
    match outcome {
        Ok(()) => Ok(Redirect::to("/namespaces").into_response()),
        Err(ApiError::Invalid(errors)) => {
            namespaces_page(state, user, StatusCode::UNPROCESSABLE_ENTITY, errors, None).await
        }
        Err(ApiError::Conflict(message)) => {
            namespaces_page(
                state,
                user,
                StatusCode::CONFLICT,
                FieldErrors::new(),
                Some(message),
            )
            .await
        }
        Err(err) => Err(err.into()),
    }
}

/// `POST /namespaces`: creates one.
pub async fn create(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let outcome = namespaces::create(&state.handles, &user.0, body_of(&form, true))
        .await
        .map(drop);
    answer(&state, &user, outcome).await
}

/// `POST /namespaces/{name}`: its description and quotas.
pub async fn update(
    State(state): State<AppState>,
    FormPost(user, Path(name), form): FormPost<Path<String>>,
) -> Result<Response, AdminError> {
    let outcome = namespaces::update(&state.handles, &user.0, &name, body_of(&form, false))
        .await
        .map(drop);
    answer(&state, &user, outcome).await
}

/// `POST /namespaces/{name}/delete`.
pub async fn delete(
    State(state): State<AppState>,
    FormPost(user, Path(name), _): FormPost<Path<String>>,
) -> Result<Response, AdminError> {
    let outcome = namespaces::delete(&state.handles, &user.0, &name).await;
    answer(&state, &user, outcome).await
}
