//! The users page (admin) and the account page (one's password, API tokens and the zone
//! times are shown in).

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use minijinja::context;
use probactr_common::model::TokenOrigin;
use serde_json::json;

use super::{render_status, AdminError, AdminUser, FormData, FormPost};
use crate::api::Id;
use crate::auth::{session, Role};
use crate::error::{ApiError, FieldErrors};
use crate::service::users;
use crate::state::AppState;

/// What the users page shows besides the list.
#[derive(Default)]
struct UsersPage {
    form: HashMap<String, String>,
    errors: FieldErrors,
    conflict: Option<String>,
}

async fn users_page(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    page: UsersPage,
) -> Result<Response, AdminError> {
    let list = users::list(&state.handles, &user.0).await?;
    let roles: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
    let mut form = page.form;
    form.remove("password");
    form.entry("role.default".to_owned())
        .or_insert_with(|| "viewer".to_owned());
    let ctx = context! { users => list, roles, form, errors => page.errors, conflict => page.conflict,
    all_namespaces => user.2.namespaces, ..user.layout("users") };
    render_status(state, status, "users.html", ctx)
}

/// The roles a user form gives, from its `role.NAMESPACE` selects (blank: no role).
fn roles_of(user: &AdminUser, form: &FormData) -> serde_json::Map<String, serde_json::Value> {
    user.2
        .namespaces
        .iter()
        .filter_map(|namespace| {
            let role = form.get(&format!("role.{namespace}")).unwrap_or_default();
            (!role.is_empty()).then(|| (namespace.clone(), json!(role)))
        })
        .collect()
}

/// `GET /users`.
pub async fn list(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    users_page(&state, &user, StatusCode::OK, UsersPage::default()).await
}

/// `POST /users`: creates a user.
pub async fn create(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let body = json!({
        "username": form.get("username").unwrap_or_default(),
        "password": form.get("password").unwrap_or_default(),
        "cluster_admin": form.get("cluster_admin").is_some(),
        "namespaces": roles_of(&user, &form),
    });
    match users::create(&state.handles, &user.0, body).await {
        Ok(_) => Ok(Redirect::to("/users").into_response()),
        Err(ApiError::Invalid(errors)) => {
            let page = UsersPage {
                form: form.values().clone(),
                errors,
                conflict: None,
            };
            users_page(&state, &user, StatusCode::UNPROCESSABLE_ENTITY, page).await
        }
        Err(err) => Err(err.into()),
    }
}

/// `POST /users/{id}`: role, disabled flag, optional new password.
pub async fn update(
    State(state): State<AppState>,
    FormPost(user, Id(id), form): FormPost<Id>,
) -> Result<Response, AdminError> {
    let mut body = json!({
        "cluster_admin": form.get("cluster_admin").is_some(),
        "namespaces": roles_of(&user, &form),
        "disabled": form.get("disabled").is_some(),
    });
    if let Some(password) = form.get("password").filter(|p| !p.is_empty()) {
        body["password"] = json!(password);
    }
    match users::update(&state.handles, &user.0, id, body).await {
        Ok(_) => Ok(Redirect::to("/users").into_response()),
        Err(ApiError::Conflict(message)) => {
            let page = UsersPage {
                conflict: Some(message),
                ..UsersPage::default()
            };
            users_page(&state, &user, StatusCode::CONFLICT, page).await
        }
        Err(ApiError::Invalid(errors)) => {
            let message = errors
                .iter()
                .map(|(f, m)| format!("{f}: {m}"))
                .collect::<Vec<_>>()
                .join("; ");
            let page = UsersPage {
                conflict: Some(message),
                ..UsersPage::default()
            };
            users_page(&state, &user, StatusCode::UNPROCESSABLE_ENTITY, page).await
        }
        Err(err) => Err(err.into()),
    }
}

async fn account_page(
    state: &AppState,
    user: &AdminUser,
    status: StatusCode,
    errors: FieldErrors,
    new_token: Option<String>,
) -> Result<Response, AdminError> {
    let tokens = users::tokens(&state.handles, &user.0).await?;
    let zones: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|zone| zone.name()).collect();
    let ctx = context! { tokens, errors, new_token, zones, ..user.layout("account") };
    render_status(state, status, "account.html", ctx)
}

/// `GET /account`.
pub async fn account(State(state): State<AppState>, user: AdminUser) -> Result<Response, AdminError> {
    account_page(&state, &user, StatusCode::OK, FieldErrors::new(), None).await
}

/// `POST /account/tokens`: makes a token and shows it once.
pub async fn create_token(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let request = users::TokenRequest {
        name: form.get("name").unwrap_or_default().to_owned(),
        origin: TokenOrigin::Personal,
        expires_in_days: None,
        namespaces: None,
        role: None,
    };
    let (_, token) = users::create_token(&state.handles, &user.0, request).await?;
    account_page(&state, &user, StatusCode::OK, FieldErrors::new(), Some(token)).await
}

/// `POST /tokens/{id}/revoke`.
pub async fn revoke_token(
    State(state): State<AppState>,
    FormPost(user, Id(id), _): FormPost<Id>,
) -> Result<Redirect, AdminError> {
    users::revoke_token(&state.handles, &user.0, id).await?;
    Ok(Redirect::to("/account"))
}

/// `POST /account/time-zone`: the zone every page shows times in (empty: the browser's).
pub async fn set_time_zone(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let zone = form.get("time_zone").unwrap_or_default();
    match users::set_own_time_zone(&state.handles, &user.0, zone).await {
        Ok(()) => {
            let said = match zone.trim() {
                "" => "Times are shown in your browser's zone".to_owned(),
                zone => format!("Times are shown in {zone}"),
            };
            Ok(crate::admin::flash::redirect(Redirect::to("/account"), &said))
        }
        Err(ApiError::Invalid(errors)) => {
            account_page(&state, &user, StatusCode::UNPROCESSABLE_ENTITY, errors, None).await
        }
        Err(err) => Err(err.into()),
    }
}

/// `POST /account/password`: on success every session ends, this one too.
pub async fn change_password(
    State(state): State<AppState>,
    FormPost(user, (), form): FormPost,
) -> Result<Response, AdminError> {
    let body = json!({
        "current_password": form.get("current_password").unwrap_or_default(),
        "new_password": form.get("new_password").unwrap_or_default(),
    });
    match users::change_own_password(&state.handles, &user.0, body).await {
        Ok(()) => Ok((
            AppendHeaders([(
                axum::http::header::SET_COOKIE,
                session::clear_cookie(state.cookie_secure),
            )]),
            Redirect::to("/login"),
        )
            .into_response()),
        Err(ApiError::Invalid(errors)) => {
            account_page(&state, &user, StatusCode::UNPROCESSABLE_ENTITY, errors, None).await
        }
        Err(err) => Err(err.into()),
    }
}
