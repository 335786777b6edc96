//! Users and API tokens: admins manage users (create, role, disable, reset a password);
//! everyone changes their own password and manages their own tokens. A password change
//! or disabling ends the user's sessions; the last enabled admin cannot be demoted or
//! disabled (nobody could administer the cluster any more).

use std::time::Duration;

use probactr_common::model::TokenOrigin;
use probactr_common::store::api_tokens::{NewToken, TokenInfo};
use probactr_common::store::{self, audit::Change, users::User};
use serde_json::{json, Value};

use super::snapshot;
use crate::auth::{password, Principal, Role};

use super::Handles;
use crate::auth;
use crate::error::{ApiError, FieldErrors};
use crate::input::{check, Input};

/// The longest user name accepted.
pub const MAX_USERNAME_CHARS: usize = 100;

fn read_password(input: &mut Input, key: &str) -> Option<String> {
    let given = input.text(key);
    let password = input.required(key, given)?;
    match password::check_strength(&password) {
        Ok(()) => Some(password),
        Err(err) => {
            input.error(key, err.to_string());
            None
        }
    }
}

/// Every user (admin).
pub async fn list(handles: &Handles, who: &Principal) -> Result<Vec<User>, ApiError> {
    who.require(who.role.is_admin(), "manage users")?;
    Ok(store::users::list(&handles.pool).await?)
}

/// Creates a user from `{"username", "password", "role"}` (admin).
pub async fn create(handles: &Handles, who: &Principal, body: Value) -> Result<User, ApiError> {
    who.require(who.role.is_admin(), "manage users")?;
    let mut input = Input::new(body)?;
    let username = input.text("username");
    let username = input.required("username", username).map(|u| u.trim().to_owned());
    if let Some(name) = &username {
        if name.is_empty() || name.chars().count() > MAX_USERNAME_CHARS || name.chars().any(char::is_control)
        {
            input.error(
                "username",
                format!("must be 1 to {MAX_USERNAME_CHARS} printable characters"),
            );
        }
    }
    let password = read_password(&mut input, "password");
    let role = input.choice::<Role>("role");
    let role = input.required("role", role);
    input.finish()?;
    let (Some(username), Some(password), Some(role)) = (username, password, role) else {
        return Err(ApiError::field("body", "invalid user"));
    };
    let hash = handles.hasher.hash_blocking(&password).await?;
    let mut tx = handles.pool.begin().await?;
    let user = store::users::create(&mut *tx, &username, &hash, role)
        .await?
        .ok_or_else(|| ApiError::field("username", "is already taken"))?;
    let change = Change {
        action: "user.create",
        object_type: "user",
        object_id: Some(user.id),
        before: None,
        after: snapshot(&user),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    Ok(user)
}

/// Changes a user's `role`, `disabled` flag and/or `password` (admin).
pub async fn update(handles: &Handles, who: &Principal, id: i64, body: Value) -> Result<User, ApiError> {
    who.require(who.role.is_admin(), "manage users")?;
    let mut input = Input::new(body)?;
    let role = input.choice::<Role>("role");
    let role = input.not_null("role", role);
    let disabled = input.boolean("disabled");
    let disabled = input.not_null("disabled", disabled);
    let new_password = if input.has("password") {
        read_password(&mut input, "password")
    } else {
        None
    };
    input.finish()?;
    let mut tx = handles.pool.begin().await?;
    let before = store::users::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("user", id))?;
    let role = role.unwrap_or(before.role());
    let disabled = disabled.unwrap_or(before.disabled);
    let loses_admin = before.role() == Role::Admin && !before.disabled && (role != Role::Admin || disabled);
    if loses_admin && store::users::other_active_admins(&mut *tx, id).await? == 0 {
        return Err(ApiError::Conflict(
            "the last enabled admin cannot be demoted or disabled".into(),
        ));
    }
    let after = store::users::set_access(&mut *tx, id, role, disabled)
        .await?
        .ok_or_else(|| ApiError::not_found("user", id))?;
    if let Some(password) = &new_password {
        store::users::set_password(&mut *tx, id, &handles.hasher.hash_blocking(password).await?).await?;
    }
    if new_password.is_some() || (disabled && !before.disabled) {
        // A reset by an admin or a disabling ends every way in: sessions, and tokens of
        // both origins (a disabled user's tokens stay dead when they are enabled again).
        store::sessions::delete_of_user(&mut *tx, id).await?;
        let ended = store::api_tokens::revoke_of_user(&mut *tx, id, TokenOrigin::ALL).await?;
        tracing::info!(user.id = id, tokens = ended, "sessions and API tokens ended");
    }
    let mut after_json = snapshot(&after).unwrap_or(Value::Null);
    if new_password.is_some() {
        after_json["password"] = json!("changed");
    }
    let change = Change {
        action: "user.update",
        object_type: "user",
        object_id: Some(id),
        before: snapshot(&before),
        after: Some(after_json),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    Ok(after)
}

/// Changes the caller's own password from `{"current_password", "new_password"}`; ends
/// every session of the caller (log in again).
pub async fn change_own_password(handles: &Handles, who: &Principal, body: Value) -> Result<(), ApiError> {
    let mut input = Input::new(body)?;
    let current = input.text("current_password");
    let current = input.required("current_password", current);
    let new_password = read_password(&mut input, "new_password");
    input.finish()?;
    let (Some(current), Some(new_password)) = (current, new_password) else {
        return Err(ApiError::field("body", "invalid password change"));
    };
    let user = store::users::get(&handles.pool, who.user_id)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    if !handles
        .hasher
        .verify_blocking(&current, Some(&user.password_hash))
        .await
    {
        return Err(ApiError::field(
            "current_password",
            "is not your current password",
        ));
    }
    let hash = handles.hasher.hash_blocking(&new_password).await?;
    let mut tx = handles.pool.begin().await?;
    store::users::set_password(&mut *tx, who.user_id, &hash).await?;
    store::sessions::delete_of_user(&mut *tx, who.user_id).await?;
    // Tokens made from the old password end with it; personal tokens stay.
    store::api_tokens::revoke_of_user(&mut *tx, who.user_id, &[TokenOrigin::Login]).await?;
    let change = Change {
        action: "user.password",
        object_type: "user",
        object_id: Some(who.user_id),
        before: None,
        after: Some(json!({"password": "changed"})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    Ok(())
}

/// The caller's tokens.
pub async fn tokens(handles: &Handles, who: &Principal) -> Result<Vec<TokenInfo>, ApiError> {
    Ok(store::api_tokens::of_user(&handles.pool, who.user_id).await?)
}

/// The longest token label.
pub const MAX_TOKEN_NAME_CHARS: usize = 100;
/// The longest token lifetime, in days.
pub const MAX_TOKEN_DAYS: i64 = 3650;

/// What a caller asks of a new token.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// A label.
    pub name: String,
    /// How it is made (a login, or a signed-in user's personal token).
    pub origin: TokenOrigin,
    /// Days until it stops working by itself (None: until revoked).
    pub expires_in_days: Option<i64>,
}

/// Makes a token for the caller; returns its id and the secret, shown once.
pub async fn create_token(
    handles: &Handles,
    who: &Principal,
    request: TokenRequest,
) -> Result<(i64, String), ApiError> {
    let name = request.name.trim();
    let mut errors = FieldErrors::new();
    if name.chars().count() > MAX_TOKEN_NAME_CHARS {
        errors.insert(
            "name".into(),
            format!("must be at most {MAX_TOKEN_NAME_CHARS} characters"),
        );
    }
    if let Some(days) = request
        .expires_in_days
        .filter(|days| !(1..=MAX_TOKEN_DAYS).contains(days))
    {
        errors.insert(
            "expires_in_days".into(),
            format!("must be from 1 to {MAX_TOKEN_DAYS} days, not {days}"),
        );
    }
    check(errors)?;
    let lifetime = request
        .expires_in_days
        .map(|days| Duration::from_secs(days.unsigned_abs() * 24 * 3600));
    let mut tx = handles.pool.begin().await?;
    let new = NewToken {
        user_id: who.user_id,
        name,
        origin: request.origin,
        lifetime,
        token_hash: "",
    };
    let (id, token) = auth::issue_token(&mut *tx, new).await?;
    // A login's token is the login's own entry, not a token of its own.
    let change = if request.origin == TokenOrigin::Login {
        login_change(
            who.user_id,
            &who.username,
            json!({"via": "api", "token_id": id, "expires_in_days": request.expires_in_days}),
        )
    } else {
        Change {
            action: "token.create",
            object_type: "token",
            object_id: Some(id),
            before: None,
            after: Some(
                json!({"name": name, "user_id": who.user_id, "origin": request.origin,
                               "expires_in_days": request.expires_in_days}),
            ),
        }
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(token.id = id, user.id = who.user_id, origin = %request.origin, "API token created");
    Ok((id, token))
}

/// Records a login to the web admin: one audit entry per login (an API login's is written
/// with its token, by [`create_token`]).
pub async fn record_admin_login(handles: &Handles, user: &User) -> Result<(), ApiError> {
    let change = login_change(user.id, &user.username, json!({"via": "admin"}));
    let who = store::audit::Actor {
        id: user.id,
        name: &user.username,
    };
    store::audit::record(&handles.pool, who, change).await?;
    Ok(())
}

/// The audit entry of a user logging in; `details` say how.
fn login_change(user_id: i64, username: &str, mut details: Value) -> Change<'static> {
    details["username"] = json!(username);
    Change {
        action: "user.login",
        object_type: "user",
        object_id: Some(user_id),
        before: None,
        after: Some(details),
    }
}

/// Revokes a token: one's own, or anyone's for an admin.
pub async fn revoke_token(handles: &Handles, who: &Principal, id: i64) -> Result<(), ApiError> {
    let token = store::api_tokens::get(&handles.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("token", id))?;
    if token.user_id != who.user_id && !who.role.is_admin() {
        return Err(ApiError::not_found("token", id));
    }
    let mut tx = handles.pool.begin().await?;
    store::api_tokens::revoke(&mut *tx, id).await?;
    let change = Change {
        action: "token.revoke",
        object_type: "token",
        object_id: Some(id),
        before: None,
        after: Some(json!({"user_id": token.user_id})),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    Ok(())
}
