//! Users and API tokens: cluster admins manage users (create, roles per namespace,
//! disable, reset a password); everyone changes their own password and manages their own
//! tokens (scoped to namespaces and a role, never more than their own). A password change
//! or disabling ends the user's sessions; the last enabled cluster admin cannot lose that
//! flag or be disabled (nobody could administer the cluster any more).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use probactr_common::store::namespaces::DEFAULT;
use probactr_common::store::user_roles::Grant;
use serde::Serialize;
use sqlx::PgConnection;

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

/// A user as the API shows it: the account and its grant.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct UserView {
    /// Id.
    pub id: i64,
    /// Login name.
    pub username: String,
    /// A disabled user cannot log in and its tokens stop working.
    pub disabled: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Manages users, namespaces and executors, and is an admin in every namespace.
    pub cluster_admin: bool,
    /// The user's role in each namespace where they have one.
    #[schema(value_type = BTreeMap<String, String>)]
    pub namespaces: BTreeMap<String, Role>,
    /// The role in `default` (kept for clients made before namespaces; null: none).
    pub role: Option<Role>,
}

impl UserView {
    fn new(user: User, grant: Grant) -> UserView {
        UserView {
            id: user.id,
            username: user.username,
            disabled: user.disabled,
            created_at: user.created_at,
            cluster_admin: grant.cluster_admin,
            role: grant.roles.get(DEFAULT).copied(),
            namespaces: grant.roles,
        }
    }
}

/// A user with their grant.
async fn view(conn: &mut PgConnection, user: User) -> Result<UserView, ApiError> {
    let grant = store::user_roles::get(conn, user.id).await?;
    Ok(UserView::new(user, grant))
}

/// Every user (cluster admin).
pub async fn list(handles: &Handles, who: &Principal) -> Result<Vec<UserView>, ApiError> {
    who.require_cluster_admin("manage users")?;
    let mut conn = handles.pool.acquire().await?;
    let mut views = Vec::new();
    for user in store::users::list(&mut *conn).await? {
        views.push(view(&mut conn, user).await?);
    }
    Ok(views)
}

/// One user (cluster admin).
pub async fn get(handles: &Handles, who: &Principal, id: i64) -> Result<UserView, ApiError> {
    who.require_cluster_admin("manage users")?;
    let mut conn = handles.pool.acquire().await?;
    let user = store::users::get(&mut *conn, id)
        .await?
        .ok_or_else(|| ApiError::not_found("user", id))?;
    view(&mut conn, user).await
}

/// Reads a grant's parts: `cluster_admin` and `namespaces` (`{NAME: ROLE}`), and the
/// older `role` (the role in `default`). Absent parts are None.
fn read_grant(input: &mut Input) -> (Option<bool>, Option<BTreeMap<String, Role>>, Option<Role>) {
    let cluster_admin = input.boolean("cluster_admin");
    let cluster_admin = input.not_null("cluster_admin", cluster_admin);
    let role = input.choice::<Role>("role");
    let role = input.not_null("role", role);
    let namespaces = match input.raw("namespaces") {
        None => None,
        Some(Value::Object(map)) => {
            let mut roles = BTreeMap::new();
            for (name, value) in map {
                match value.as_str().and_then(|text| text.parse::<Role>().ok()) {
                    Some(role) => {
                        roles.insert(name, role);
                    }
                    None => input.error(&format!("namespaces.{name}"), "must be viewer, operator or admin"),
                }
            }
            Some(roles)
        }
        Some(_) => {
            input.error(
                "namespaces",
                "must be an object of roles by namespace, e.g. {\"payments\": \"operator\"}",
            );
            None
        }
    };
    (cluster_admin, namespaces, role)
}

/// 422 naming each namespace of `roles` that does not exist.
async fn check_namespaces(conn: &mut PgConnection, roles: &BTreeMap<String, Role>) -> Result<(), ApiError> {
    let known = store::namespaces::names(&mut *conn).await?;
    let mut errors = FieldErrors::new();
    for name in roles.keys().filter(|name| !known.contains(name)) {
        errors.insert(format!("namespaces.{name}"), format!("no namespace {name}"));
    }
    check(errors)
}

/// 409 when `id`, an enabled cluster admin, would stop being one (flag removed or
/// disabled) while no other enabled cluster admin exists.
async fn keep_a_cluster_admin(
    conn: &mut PgConnection,
    id: i64,
    was: (bool, bool),
    becomes: (bool, bool),
) -> Result<(), ApiError> {
    let (was_admin, was_disabled) = was;
    let (admin, disabled) = becomes;
    let loses = was_admin && !was_disabled && (!admin || disabled);
    if loses && store::users::other_active_cluster_admins(&mut *conn, id).await? == 0 {
        return Err(ApiError::Conflict(
            "the last enabled cluster admin cannot lose that role or be disabled".into(),
        ));
    }
    Ok(())
}

/// Creates a user from `{"username", "password", "cluster_admin", "namespaces"}`
/// (cluster admin); `"role": R` still gives the role R in `default`.
pub async fn create(handles: &Handles, who: &Principal, body: Value) -> Result<UserView, ApiError> {
    who.require_cluster_admin("manage users")?;
    let mut input = Input::new(body)?;
    let username = input.required_text("username").map(|u| u.trim().to_owned());
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
    let (cluster_admin, namespaces, role) = read_grant(&mut input);
    if role.is_none() && namespaces.is_none() && cluster_admin.is_none() {
        input.error(
            "namespaces",
            "give the user's roles (namespaces, cluster_admin, or role in default)",
        );
    }
    input.finish()?;
    let (Some(username), Some(password)) = (username, password) else {
        return Err(ApiError::field("body", "invalid user"));
    };
    let mut roles = namespaces.unwrap_or_default();
    if let Some(role) = role {
        roles.insert(DEFAULT.to_owned(), role);
    }
    // The older `role` alone means what it meant before namespaces: `admin` managed the
    // cluster (as the upgrade made today's admins cluster admins).
    let cluster_admin = cluster_admin.unwrap_or(role == Some(Role::Admin));
    let hash = handles.hasher.hash_blocking(&password).await?;
    let mut tx = handles.pool.begin().await?;
    check_namespaces(&mut tx, &roles).await?;
    let legacy = roles.get(DEFAULT).copied().unwrap_or(Role::Viewer);
    let user = store::users::create(&mut *tx, &username, &hash, legacy)
        .await?
        .ok_or_else(|| ApiError::field("username", "is already taken"))?;
    store::user_roles::replace(&mut tx, user.id, cluster_admin, &roles).await?;
    let created = view(&mut tx, user).await?;
    let change = Change {
        action: "user.create",
        object_type: "user",
        object_id: Some(created.id),
        before: None,
        after: snapshot(&created),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    Ok(created)
}

/// Changes a user's grant (`cluster_admin`, `namespaces`, or `role` in `default`),
/// `disabled` flag and/or `password` (cluster admin).
pub async fn update(handles: &Handles, who: &Principal, id: i64, body: Value) -> Result<UserView, ApiError> {
    who.require_cluster_admin("manage users")?;
    let mut input = Input::new(body)?;
    let (cluster_admin, namespaces, role) = read_grant(&mut input);
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
    let before = view(&mut tx, before).await?;
    let mut roles = namespaces.unwrap_or_else(|| before.namespaces.clone());
    if let Some(role) = role {
        roles.insert(DEFAULT.to_owned(), role);
    }
    check_namespaces(&mut tx, &roles).await?;
    // The older `role` alone means what it meant before namespaces (see `create`).
    let cluster_admin = cluster_admin
        .or(role.map(|role| role == Role::Admin))
        .unwrap_or(before.cluster_admin);
    let disabled = disabled.unwrap_or(before.disabled);
    keep_a_cluster_admin(
        &mut tx,
        id,
        (before.cluster_admin, before.disabled),
        (cluster_admin, disabled),
    )
    .await?;
    let legacy = roles.get(DEFAULT).copied().unwrap_or(Role::Viewer);
    store::users::set_access(&mut *tx, id, legacy, disabled)
        .await?
        .ok_or_else(|| ApiError::not_found("user", id))?;
    store::user_roles::replace(&mut tx, id, cluster_admin, &roles).await?;
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
    let after = store::users::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("user", id))?;
    let after = view(&mut tx, after).await?;
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

/// A user's grant as `GET/PUT /api/v1/users/{id}/roles` carry it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RolesView {
    /// Manages users, namespaces and executors, and is an admin in every namespace.
    pub cluster_admin: bool,
    /// The role in each namespace.
    #[schema(value_type = BTreeMap<String, String>)]
    pub namespaces: BTreeMap<String, Role>,
}

/// A user's roles (cluster admin).
pub async fn roles(handles: &Handles, who: &Principal, id: i64) -> Result<RolesView, ApiError> {
    let user = get(handles, who, id).await?;
    Ok(RolesView {
        cluster_admin: user.cluster_admin,
        namespaces: user.namespaces,
    })
}

/// Replaces a user's roles from `{"cluster_admin": B, "namespaces": {NAME: ROLE}}`
/// (cluster admin; both required).
pub async fn set_roles(
    handles: &Handles,
    who: &Principal,
    id: i64,
    body: Value,
) -> Result<RolesView, ApiError> {
    who.require_cluster_admin("manage users")?;
    let mut input = Input::new(body)?;
    let (cluster_admin, namespaces, role) = read_grant(&mut input);
    if role.is_some() {
        input.error("role", "give the role in default under namespaces");
    }
    if cluster_admin.is_none() {
        input.error("cluster_admin", "is required");
    }
    if namespaces.is_none() && !input.has_errors() {
        input.error("namespaces", "is required");
    }
    input.finish()?;
    let (Some(cluster_admin), Some(namespaces)) = (cluster_admin, namespaces) else {
        return Err(ApiError::field("body", "invalid roles"));
    };
    let mut tx = handles.pool.begin().await?;
    let user = store::users::get(&mut *tx, id)
        .await?
        .ok_or_else(|| ApiError::not_found("user", id))?;
    let before = view(&mut tx, user).await?;
    check_namespaces(&mut tx, &namespaces).await?;
    keep_a_cluster_admin(
        &mut tx,
        id,
        (before.cluster_admin, before.disabled),
        (cluster_admin, before.disabled),
    )
    .await?;
    store::user_roles::replace(&mut tx, id, cluster_admin, &namespaces).await?;
    let after = RolesView {
        cluster_admin,
        namespaces,
    };
    let change = Change {
        action: "user.roles",
        object_type: "user",
        object_id: Some(id),
        before: Some(json!({"cluster_admin": before.cluster_admin, "namespaces": before.namespaces})),
        after: snapshot(&after),
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(user.id = id, cluster_admin, "roles replaced");
    Ok(after)
}

/// Changes the caller's own password from `{"current_password", "new_password"}`; ends
/// every session of the caller (log in again).
pub async fn change_own_password(handles: &Handles, who: &Principal, body: Value) -> Result<(), ApiError> {
    let mut input = Input::new(body)?;
    let current = input.required_text("current_password");
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

/// The zone the caller reads times in (None: the browser's own).
pub async fn own_time_zone(handles: &Handles, who: &Principal) -> Result<Option<String>, ApiError> {
    Ok(store::users::time_zone(&handles.pool, who.user_id).await?)
}

/// Sets the zone the caller reads times in: an IANA name, or empty for the browser's.
pub async fn set_own_time_zone(handles: &Handles, who: &Principal, zone: &str) -> Result<(), ApiError> {
    let zone = zone.trim();
    let chosen = if zone.is_empty() {
        None
    } else if zone.parse::<chrono_tz::Tz>().is_ok() {
        Some(zone)
    } else {
        return Err(ApiError::field(
            "time_zone",
            format!("{zone:?} is not a time zone: use an IANA name such as Europe/Paris, or leave it empty"),
        ));
    };
    store::users::set_time_zone(&handles.pool, who.user_id, chosen).await?;
    tracing::info!(
        user.id = who.user_id,
        time_zone = chosen.unwrap_or("browser"),
        "time zone chosen"
    );
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
    /// The namespaces it may act in (None: every one the caller may see).
    pub namespaces: Option<Vec<String>>,
    /// The most it may do there (None: the caller's role).
    pub role: Option<Role>,
}

/// Makes a token for the caller; returns its id and the secret, shown once.
pub async fn create_token(
    handles: &Handles,
    who: &Principal,
    request: TokenRequest,
) -> Result<(i64, String), ApiError> {
    if who.access.scoped {
        return Err(ApiError::Forbidden(
            "a scoped token may not make tokens (the new one could do more than it)".into(),
        ));
    }
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
    check_scope(who, &request, &mut errors);
    check(errors)?;
    if let Some(role) = request.role {
        // Asking for more than one's own is refused, not silently narrowed.
        let names = request
            .namespaces
            .clone()
            .unwrap_or_else(|| who.access.roles.keys().cloned().collect());
        for name in &names {
            if let Some(own) = who.access.role_in(name) {
                if crate::auth::access::rank(role) > crate::auth::access::rank(own) {
                    return Err(ApiError::Forbidden(format!(
                        "a token may not have more than your own role in namespace {name} ({own})"
                    )));
                }
            }
        }
    }
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
        namespaces: request.namespaces.clone(),
        role: request.role,
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
                               "expires_in_days": request.expires_in_days,
                               "namespaces": request.namespaces, "role": request.role}),
            ),
        }
    };
    store::audit::record(&mut *tx, who.actor(), change).await?;
    tx.commit().await?;
    tracing::info!(token.id = id, user.id = who.user_id, origin = %request.origin, "API token created");
    Ok((id, token))
}

/// Names in `errors` each namespace of a token's scope the caller has no role in (as if
/// it did not exist), and an empty list.
fn check_scope(who: &Principal, request: &TokenRequest, errors: &mut FieldErrors) {
    let Some(names) = &request.namespaces else {
        return;
    };
    if names.is_empty() {
        errors.insert("namespaces".into(), "must name at least one namespace".into());
    }
    for name in names {
        if !who.access.sees(name) {
            errors.insert(
                format!("namespaces.{name}"),
                format!("no namespace {name} where you have a role"),
            );
        }
    }
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
    if token.user_id != who.user_id && !who.access.cluster_admin {
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
