//! `/secrets` (admins): the secrets jobs may reference, set and deleted; values go in
//! and are never shown.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;

use super::{render_status, AdminError, AdminUser, FormPost};
use probactr_common::store::namespaces::DEFAULT;

use crate::error::{ApiError, FieldErrors};
use crate::service::secrets;
use crate::state::AppState;

async fn secrets_page(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    form: HashMap<String, String>,
    errors: FieldErrors,
    conflict: Option<String>,
) -> Result<Response, AdminError> {
    let list = secrets::list(&state.handles, &user.0, user.namespace()).await?;
    let enabled = state.handles.secret_keys.is_some();
    let namespaces = user.namespaces_where(|role| role.is_admin());
    let ctx =
        context! { secrets => list, form, errors, conflict, enabled, namespaces, ..user.layout("secrets") };
    render_status(state, status, "secrets.html", ctx)
}

/// `GET /secrets`.
pub async fn list(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    secrets_page(
        &state,
        &user,
        StatusCode::OK,
        HashMap::new(),
        FieldErrors::new(),
        None,
    )
    .await
}

/// `POST /secrets`: creates or replaces one.
pub async fn set(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let name = form.get("name").unwrap_or_default().trim().to_owned();
    let namespace = form.get("namespace").unwrap_or(DEFAULT).trim().to_owned();
    let value = form.get("value").filter(|value| !value.is_empty());
    match secrets::set(&state.handles, &user.0, &namespace, &name, value, false).await {
        Ok(_) => Ok(Redirect::to("/secrets").into_response()),
        Err(ApiError::Invalid(errors)) => {
            // The value is never sent back into the page.
            let kept = HashMap::from([("name".to_owned(), name), ("namespace".to_owned(), namespace)]);
            secrets_page(
                &state,
                &user,
                StatusCode::UNPROCESSABLE_ENTITY,
                kept,
                errors,
                None,
            )
            .await
        }
        Err(ApiError::Conflict(message)) => {
            secrets_page(
                &state,
                &user,
                StatusCode::CONFLICT,
                HashMap::new(),
                FieldErrors::new(),
                Some(message),
            )
            .await
        }
        Err(err) => Err(err.into()),
    }
}

/// The secret a delete names: by the path, and its namespace by the query.
type SecretPath = (Path<String>, Query<HashMap<String, String>>);

/// `POST /secrets/{name}/delete?namespace=NAME`.
pub async fn delete(
    State(state): State<AppState>,
    FormPost(user, (Path(name), Query(query)), _): FormPost<SecretPath>,
) -> Result<Redirect, AdminError> {
    let namespace = query.get("namespace").map_or(DEFAULT, String::as_str);
    secrets::delete(&state.handles, &user.0, namespace, &name).await?;
    Ok(Redirect::to("/secrets"))
}
