//! `POST /api/v1/auth/token` (a bearer token for scripts, under the login rate limit),
//! `DELETE /api/v1/auth/token` (revoke the token in use), `GET /api/v1/me`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::auth::ratelimit::{self, ClientAddr};
use crate::auth::{Principal, Via};
use crate::db::{self, audit::Change};
use crate::error::ApiError;
use crate::input::{ApiJson, Input};
use crate::state::AppState;

/// Trades a user name and password for a new API token.
pub async fn create_token(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut input = Input::new(body)?;
    let username = input.text("username");
    let username = input.required("username", username);
    let password = input.text("password");
    let password = input.required("password", password);
    let name = input.text("name");
    let name = input.not_null("name", name).unwrap_or_default();
    input.finish()?;
    let (Some(username), Some(password)) = (username, password) else {
        return Err(ApiError::field("body", "username and password are required"));
    };
    let user = ratelimit::authenticate(&state, &username, &password, &address).await?;
    let who = Principal {
        user_id: user.id,
        username: user.username.clone(),
        role: user.role(),
        via: Via::Token(0),
    };
    let mut tx = state.pool.begin().await?;
    let (token_id, token) = db::sessions::create_token(&mut *tx, user.id, &name).await?;
    let change = Change {
        action: "token.create",
        object_type: "token",
        object_id: Some(token_id),
        before: None,
        after: Some(json!({"name": name, "user_id": user.id})),
    };
    db::audit::record(&mut *tx, &who, change).await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"token": token, "token_id": token_id, "role": user.role})),
    ))
}

/// Revokes the bearer token of the request.
pub async fn revoke_token(State(state): State<AppState>, who: Principal) -> Result<StatusCode, ApiError> {
    let Via::Token(token_id) = who.via else {
        return Err(ApiError::field(
            "authorization",
            "only a bearer token can revoke itself",
        ));
    };
    let mut tx = state.pool.begin().await?;
    db::sessions::revoke_token(&mut *tx, token_id).await?;
    let change = Change {
        action: "token.revoke",
        object_type: "token",
        object_id: Some(token_id),
        before: None,
        after: None,
    };
    db::audit::record(&mut *tx, &who, change).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who the caller is.
pub async fn me(who: Principal) -> Json<Value> {
    Json(json!({"id": who.user_id, "username": who.username, "role": who.role}))
}
