//! The small answers the API writes, and the schemas of the request bodies that are read
//! field by field where they are handled, with no command type of their own (users,
//! tokens, namespaces, secrets, pools, calendars, maintenance windows, run parameters).
//!
//! Each request type here is the one description of its body: it is never built. Bodies
//! that become commands (jobs, triggers, workflows, alert channels) are described by
//! their command types in [`crate::command`]. A test posts every documented field of
//! every documented body and fails if the service calls one of them unknown, so the two
//! cannot drift.

use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Role;

/// `POST /api/v1/auth/token`.
#[derive(Debug, ToSchema)]
pub struct LoginBody {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// A label for the token (shown in the token list), at most 100 characters.
    pub name: Option<String>,
    /// Days until the token stops working by itself (1–3650; none: until revoked). A
    /// login token also ends when the user's password changes.
    pub expires_in_days: Option<i64>,
}

/// A new API token; its secret is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuedToken {
    /// Send as `Authorization: Bearer …`.
    pub token: String,
    /// The token's id, to revoke it.
    pub token_id: i64,
    /// The highest role it acts with anywhere (its roles per namespace are the user's;
    /// see `GET /api/v1/me`).
    pub role: Option<Role>,
}

/// The caller.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// User id.
    pub id: i64,
    /// User name.
    pub username: String,
    /// The highest role the caller has in any namespace (null: none).
    pub role: Option<Role>,
    /// Manages users, namespaces and executors; an admin in every namespace.
    pub cluster_admin: bool,
    /// The caller's role in each namespace (a cluster admin: in every namespace), as the
    /// credentials of this request allow (a scoped token: only its namespaces, capped).
    pub namespaces: std::collections::BTreeMap<String, Role>,
}

/// `POST /api/v1/users` (admin).
#[derive(Debug, ToSchema)]
pub struct NewUserBody {
    /// Unique user name.
    pub username: String,
    /// At least 12 characters.
    pub password: String,
    /// Manages users, namespaces and executors; an admin in every namespace.
    pub cluster_admin: Option<bool>,
    /// The role (`viewer`, `operator`, `admin`) in each namespace.
    pub namespaces: Option<std::collections::BTreeMap<String, Role>>,
    /// The role in `default` (kept for older clients; same as `namespaces: {"default": …}`).
    pub role: Option<Role>,
}

/// `PUT /api/v1/users/{id}/roles` (cluster admin).
#[derive(Debug, ToSchema)]
pub struct RolesBody {
    /// Manages users, namespaces and executors; an admin in every namespace.
    pub cluster_admin: bool,
    /// The role in each namespace (the whole list: namespaces left out lose the role).
    pub namespaces: std::collections::BTreeMap<String, Role>,
}

/// `POST /api/v1/namespaces` and `PATCH /api/v1/namespaces/{name}` (cluster admin).
#[derive(Debug, ToSchema)]
pub struct NamespaceBody {
    /// Lower-case letters, digits and dashes, 1 to 63, starting and ending with a
    /// letter or digit (create only: a name never changes).
    pub name: Option<String>,
    /// Free text, at most 1000 characters.
    pub description: Option<String>,
    /// At most this many of its runs claimed or running at once (null: no quota).
    pub max_running: Option<i32>,
    /// At most this many jobs (null: no quota).
    pub max_jobs: Option<i32>,
}

/// `PATCH /api/v1/users/{id}` (admin).
#[derive(Debug, ToSchema)]
pub struct UserPatchBody {
    /// New role in `default` (older clients).
    pub role: Option<Role>,
    /// Cluster admin or not.
    pub cluster_admin: Option<bool>,
    /// The whole list of roles by namespace.
    pub namespaces: Option<std::collections::BTreeMap<String, Role>>,
    /// Disabling a user ends their sessions and tokens.
    pub disabled: Option<bool>,
    /// A new password (ends their sessions).
    pub password: Option<String>,
}

/// `POST /api/v1/me/password`.
#[derive(Debug, ToSchema)]
pub struct PasswordChangeBody {
    /// The password in use.
    pub current_password: String,
    /// At least 12 characters.
    pub new_password: String,
}

/// `POST /api/v1/tokens`.
#[derive(Debug, ToSchema)]
pub struct NewTokenBody {
    /// A label for the token, at most 100 characters.
    pub name: Option<String>,
    /// Days until the token stops working by itself (1–3650; none: until revoked).
    pub expires_in_days: Option<i64>,
    /// The namespaces it acts in (none: every one the caller may see); each one where the
    /// caller has a role.
    pub namespaces: Option<Vec<String>>,
    /// The most it may do there (none: the caller's role); never more than the caller's.
    /// A token with a scope is never a cluster admin.
    pub role: Option<Role>,
}

/// A new API token of the caller; its secret is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    /// The token's id.
    pub id: i64,
    /// Send as `Authorization: Bearer …`.
    pub token: String,
}

/// `POST /api/v1/jobs/{id}/run` answers the run it queued.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunQueued {
    /// The new run; follow it at `/api/v1/runs/{run_id}`.
    pub run_id: i64,
}

/// `POST /api/v1/jobs/{id}/run` (the body is optional).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunNowBody {
    /// The run's parameters, a JSON object: the job sees them as `PROBACTR_PARAMS`, each
    /// top-level key as `PROBACTR_PARAM_<KEY>`, and `{{ params.KEY }}` in its definition.
    #[schema(value_type = Object)]
    pub params: Option<serde_json::Value>,
}

/// `POST /api/v1/secrets`.
#[derive(Debug, ToSchema)]
pub struct NewSecretBody {
    /// 1 to 100 letters, digits, `_`, `-` or `.`; jobs of its namespace reference it as
    /// `{{ secrets.NAME }}`.
    pub name: String,
    /// Its namespace (default `default`): only that namespace's jobs can use it.
    pub namespace: Option<String>,
    /// The value (never shown again).
    pub value: String,
}

/// `PUT /api/v1/secrets/{name}`.
#[derive(Debug, ToSchema)]
pub struct SecretValueBody {
    /// The new value (never shown again).
    pub value: String,
}

/// `POST /api/v1/pools`.
#[derive(Debug, ToSchema)]
pub struct NewPoolBody {
    /// 1 to 63 lowercase letters, digits or `-`; jobs of its namespace take it as `pool: NAME`.
    pub name: String,
    /// Its namespace (default `default`): only that namespace's jobs can take it.
    pub namespace: Option<String>,
    /// The weight of runs it holds at once (1 to 100000).
    pub slots: i32,
    /// At most `limit` runs of its jobs start in any window of `per_secs` seconds, across
    /// the cluster (limit 1 to 10000, per_secs 1 to 604800). Null or absent: no bound.
    pub rate: Option<probactr_common::model::Rate>,
}

/// `PATCH /api/v1/pools/{name}`: slots, rate or both.
#[derive(Debug, ToSchema)]
pub struct PoolSlotsBody {
    /// The weight of runs it holds at once (1 to 100000).
    pub slots: Option<i32>,
    /// Its rate, as in `POST`; null removes it.
    pub rate: Option<probactr_common::model::Rate>,
}

/// `POST /api/v1/calendars`, `PUT /api/v1/calendars/{name}` (without `name` and
/// `namespace`).
#[derive(Debug, ToSchema)]
pub struct CalendarBody {
    /// 1 to 63 lowercase letters, digits or `-`; its namespace's triggers follow it as
    /// `calendar: NAME`.
    pub name: String,
    /// Its namespace (default `default`).
    pub namespace: Option<String>,
    /// The IANA zone its days are read in (default UTC).
    pub timezone: Option<String>,
    /// Single dates, `YYYY-MM-DD`.
    pub dates: Option<Vec<String>>,
    /// Inclusive ranges, `{"from": "2026-12-24", "to": "2026-12-26"}`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub ranges: Option<Vec<serde_json::Value>>,
    /// Weekdays: `mon`, `tue`, `wed`, `thu`, `fri`, `sat`, `sun`.
    pub weekdays: Option<Vec<String>>,
    /// An iCalendar file (`BEGIN:VCALENDAR` …): each event's `DTSTART` date joins the dates.
    pub ical: Option<String>,
}

/// `POST /api/v1/maintenance`.
#[derive(Debug, ToSchema)]
pub struct MaintenanceBody {
    /// Its start (RFC 3339; default now).
    pub from: Option<String>,
    /// Its end (exclusive; null or absent: until deleted). Required for `defer`.
    pub until: Option<String>,
    /// `{"all": true}`, `{"jobs": ["name", …]}` or `{"selector": {"label": "value"}}`.
    #[schema(value_type = Object)]
    pub scope: serde_json::Value,
    /// `skip` (the default: covered instants are recorded skipped) or `defer` (each
    /// affected trigger fires once when the window ends).
    pub policy: Option<String>,
    /// Why; shown in the reason of each instant it covers.
    pub reason: Option<String>,
    /// Stop the runs running now in its scope (each with its job's grace).
    pub stop_running: Option<bool>,
}
