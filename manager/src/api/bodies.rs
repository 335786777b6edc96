//! The JSON bodies the API reads and the small answers it writes, as OpenAPI schemas.
//!
//! Request bodies become commands ([`crate::command`]), read field by field so that every
//! bad field is named; these types describe the same fields for the generated document.
//! The service never builds the request types: they derive `Serialize` only so that
//! `#[serde(flatten)]` and `#[serde(untagged)]` shape their schemas. A test posts every
//! documented field of every documented body and fails if the service calls one of them
//! unknown, so the two cannot drift.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use probactr_common::model::{JobKind, JobMode, Misfire, OnExecutorLost, Overlap, Route, TriggerKind};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Role;

/// `POST /api/v1/jobs`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewJobBody {
    /// Unique, at most 200 characters.
    pub name: String,
    /// What the job does; `shell` and `http` jobs are created by admins only.
    pub kind: JobKind,
    /// The rest of the definition, each with its default.
    #[serde(flatten)]
    pub fields: JobFields,
}

/// `PATCH /api/v1/jobs/{id}`: the fields to change, and the `version` that was read.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobPatchBody {
    /// The job's `version` as read; a stale one answers 409 and changes nothing.
    pub version: i64,
    /// New name.
    pub name: Option<String>,
    /// New kind (send its `spec` too).
    pub kind: Option<JobKind>,
    /// The fields to change.
    #[serde(flatten)]
    pub fields: JobFields,
}

/// The optional fields of a job, on create and on edit.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobFields {
    /// Free text.
    pub description: Option<String>,
    /// The kind's definition (`noop` takes none).
    pub spec: Option<SpecBody>,
    /// May attempts overlap? Default false.
    pub parallel: Option<bool>,
    /// Bound on overlapping attempts of a parallel job; null for none.
    pub max_concurrency: Option<i32>,
    /// When a non-parallel job is busy: `skip` the new run, `queue` it, `replace` the
    /// running attempt (stopped with SIGTERM, `stop_grace_secs`, SIGKILL; then the new one
    /// starts), or `buffer_one` (one run waits behind the running one; later ones are
    /// skipped). Default skip.
    pub overlap: Option<Overlap>,
    /// Seconds an attempt may run. Default 3600.
    pub timeout_secs: Option<i32>,
    /// Retry policy.
    pub retry: Option<RetryBody>,
    /// Paused? Default false.
    pub paused: Option<bool>,
    /// Who manages the definition: `probactr apply` sets it; null for people.
    pub managed_by: Option<String>,
    /// A run whose executor died: `rerun` it at once on another executor (a takeover,
    /// even without retries; default) or leave it to the retry policy (`fail`).
    pub on_executor_lost: Option<OnExecutorLost>,
    /// Takeovers of one run at most (0–100, default 3).
    pub max_takeovers: Option<i32>,
    /// When an executor must stop a run (cancel, timeout, lost lock, drain deadline), the
    /// seconds between SIGTERM to its process group and SIGKILL (0–3600, default 10).
    pub stop_grace_secs: Option<i32>,
    /// Labels an executor must all carry to claim the job's runs (`{"gpu": "1"}`; `{}`,
    /// the default: any executor).
    pub selector: Option<BTreeMap<String, String>>,
    /// When slots are scarce, higher goes first (-100 to 100, default 0; each point counts
    /// as a minute of waiting, so lower priorities are not starved).
    pub priority: Option<i32>,
    /// Where the runs of one instant go: `any` (default: one run), `broadcast` (one run
    /// per live executor that may take it, each pinned to it) or `shard` (`shards` runs,
    /// spread over the live executors). Each fanned-out run sees `PROBACTR_SHARD_INDEX` and
    /// `PROBACTR_SHARD_TOTAL`.
    pub route: Option<Route>,
    /// Runs per instant of a `shard` route (1–1000, default 1).
    pub shards: Option<i32>,
    /// `batch` (default: runs when triggered or run now) or `service`: `replicas`
    /// instances kept running on distinct executors where possible, restarted with backoff
    /// when they end or their executor dies (`PROBACTR_REPLICA_INDEX` tells each its slot).
    pub mode: Option<JobMode>,
    /// Instances of a service (1–100, default 1).
    pub replicas: Option<i32>,
    /// Declared run parameters, by name (letters, digits, `_`, `-`): run now, trigger and
    /// workflow step parameters are checked against them (a 422 names `params.NAME`),
    /// undeclared ones refused, defaults filled in. Null: parameters are free.
    pub params_schema: Option<std::collections::BTreeMap<String, ParamDeclaration>>,
    /// A pool of the job's namespace (`/api/v1/pools`) whose slots its runs hold: runs
    /// wait queued while it is full. Null: none.
    pub pool: Option<String>,
    /// The slots of `pool` each run holds (1 to the pool's slots, default 1).
    pub pool_slots: Option<i32>,
    /// At most `limit` of its runs start in any window of `per_secs` seconds, across
    /// the cluster (limit 1 to 10000, per_secs 1 to 604800); runs past it wait queued.
    /// Null: no bound.
    pub rate: Option<probactr_common::model::Rate>,
    /// Child jobs queued when a run succeeds, by id or name; each child run gets the
    /// parent run's parameters and `PROBACTR_PARENT_RUN_ID`. A list that would loop back
    /// to the job is refused.
    pub on_success: Option<Vec<JobRef>>,
    /// Child jobs queued when a run fails, times out or is abandoned.
    pub on_failure: Option<Vec<JobRef>>,
    /// Child jobs queued whenever a run ends, cancelled included.
    pub on_finish: Option<Vec<JobRef>>,
}

/// One declared run parameter (see `params_schema`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ParamDeclaration {
    /// `string`, `integer`, `number`, `boolean` or `enum`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The values an `enum` takes (texts; required for an enum, refused otherwise).
    pub values: Option<Vec<String>>,
    /// A pattern a `string` must match whole (ASCII classes: `[0-9]`, `(?-u:\\w)`).
    pub pattern: Option<String>,
    /// The least number, or a string's fewest characters.
    pub min: Option<f64>,
    /// The greatest number, or a string's most characters.
    pub max: Option<f64>,
    /// Must every run be given it? (takes no `default`)
    pub required: Option<bool>,
    /// The value of a run given none; checked like a given value.
    #[schema(value_type = Option<Object>)]
    pub default: Option<serde_json::Value>,
    /// A `string` stored sealed, shown as `***` and masked in the run's output; the job
    /// gets it in the clear. Takes no `default`.
    pub secret: Option<bool>,
}

/// A job named by its id or its name.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // a schema only
pub enum JobRef {
    /// Its id.
    Id(i64),
    /// Its name.
    Name(String),
}

/// A job's retry policy as sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetryBody {
    /// Attempts in all, the first included (1–100). Default 1: no retry.
    pub max_attempts: Option<i32>,
    /// `fixed` (the same delay each time) or `exponential` (default: doubled for each
    /// later attempt).
    pub backoff: Option<String>,
    /// Seconds before the second attempt (0–604800). Default 10.
    pub initial_secs: Option<i32>,
    /// The older name of `initial_secs`.
    pub backoff_secs: Option<i32>,
    /// The longest delay, in seconds (at least `initial_secs`; null: no bound).
    pub max_secs: Option<i32>,
    /// `full` (default for a new job: a random delay up to the computed one, so that
    /// jobs failing together do not retry together) or `none`.
    pub jitter: Option<String>,
    /// Which failures are retried: `{"exit_codes": [75], "http_statuses": [503],
    /// "timeouts": true}`; a failure matching any is retried. Null or empty: every
    /// failure. A run abandoned by its executor always is.
    pub retry_on: Option<RetryOnBody>,
}

/// Which failures a job retries, as sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetryOnBody {
    /// Exit codes of a shell job (0–255).
    pub exit_codes: Option<Vec<i32>>,
    /// HTTP statuses of an HTTP job (100–599).
    pub http_statuses: Option<Vec<i32>>,
    /// Whether a timed-out attempt is retried.
    pub timeouts: Option<bool>,
}

/// A job's definition; which one depends on the job's `kind`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // a schema only: the service reads specs with `jobspec::JobSpec::parse`
pub enum SpecBody {
    /// `kind: shell`.
    Shell(ShellSpecBody),
    /// `kind: http`.
    Http(HttpSpecBody),
    /// `kind: sleep`.
    Sleep(SleepSpecBody),
}

/// `kind: shell`: a program run without an implicit shell.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShellSpecBody {
    /// The program (looked up in `PATH` when it has no `/`), or the script when `shell`.
    pub program: String,
    /// Arguments, passed as they are.
    pub args: Option<Vec<String>>,
    /// Variables added to the executor's environment (not `PROBACTR_*`).
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Run `sh -c program sh args…` instead (args become `$1`, `$2`, …).
    pub shell: Option<bool>,
}

/// `kind: http`: one request whose status decides the outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct HttpSpecBody {
    /// GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS. Default GET.
    pub method: Option<String>,
    /// An absolute http or https URL.
    pub url: String,
    /// Request headers (not `X-Probactr-*`).
    pub headers: Option<BTreeMap<String, String>>,
    /// Request body.
    pub body: Option<String>,
    /// Statuses that count as success; default any 2xx.
    pub expect_status: Option<Vec<u16>>,
    /// Which redirects are followed: `same-origin` (default; a redirect elsewhere is the
    /// answer), `any` (across origins without the job's headers and body) or `none`.
    pub follow_redirects: Option<String>,
}

/// `kind: sleep`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SleepSpecBody {
    /// Milliseconds, at most one day.
    pub millis: u64,
}

/// `POST /api/v1/jobs/{id}/triggers`: a schedule for the job.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewTriggerBody {
    /// `cron`, `interval`, `once` or `webhook`; send the kind's own field too.
    pub kind: TriggerKind,
    /// The kind's field and the optional ones.
    #[serde(flatten)]
    pub fields: TriggerFields,
}

/// `PATCH /api/v1/triggers/{id}`: the fields to change, and the `version` that was read.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerPatchBody {
    /// The trigger's `version` as read; a stale one answers 409 and changes nothing.
    pub version: i64,
    /// New kind (send its own field too).
    pub kind: Option<TriggerKind>,
    /// The fields to change (null clears `start_at` and `end_at`).
    #[serde(flatten)]
    pub fields: TriggerFields,
}

/// `POST /api/v1/schedule/preview`: a trigger definition and how many instants to show.
/// A trigger's body previews as it is: `misfire` and `paused` are accepted and ignored.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewBody {
    /// How many instants (1–100). Default 5.
    pub count: Option<i64>,
    /// List instants from this one on. Default now.
    pub after: Option<DateTime<Utc>>,
    /// The job the trigger is for: required for a cron with `H`, whose values its id
    /// fixes (a trigger's `H` is seeded by its job's id, or its workflow's).
    pub job_id: Option<i64>,
    /// The workflow the trigger is for, instead of `job_id`.
    pub workflow_id: Option<i64>,
    /// `cron`, `interval` or `once`.
    pub kind: TriggerKind,
    /// The definition.
    #[serde(flatten)]
    pub fields: TriggerFields,
}

/// A trigger's fields besides its kind.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerFields {
    /// For `cron`: six fields with seconds (`0 */5 * * * *`) or five without; `H`,
    /// `H(a-b)`, `H/n` take values fixed by the job's id (the workflow's for a workflow
    /// trigger), so triggers written `H H * * *` spread over the day.
    pub cron: Option<String>,
    /// For `cron`: an IANA time zone. Default UTC.
    pub timezone: Option<String>,
    /// For `interval`: seconds between instants.
    pub interval_secs: Option<i64>,
    /// For `once`: the instant, RFC 3339.
    pub at: Option<DateTime<Utc>>,
    /// No instant before this one.
    pub start_at: Option<DateTime<Utc>>,
    /// No instant after this one.
    pub end_at: Option<DateTime<Utc>>,
    /// What to do with instants missed while nothing could fire them. Default fire_once.
    pub misfire: Option<Misfire>,
    /// How late an instant may fire before it counts as missed.
    pub misfire_threshold_secs: Option<i32>,
    /// Paused?
    pub paused: Option<bool>,
    /// Runs of this trigger claimed or running at once (null, the default: only the job's
    /// bound applies).
    pub max_concurrency: Option<i32>,
    /// Parameters of its runs (an object): defaults that a run's own parameters override.
    #[schema(value_type = Option<Object>)]
    pub params: Option<serde_json::Value>,
    /// For `webhook`: check each delivery's signature (null: unsigned deliveries).
    pub signature: Option<WebhookSignatureBody>,
    /// For `webhook`: run parameter name to a path into the JSON body, such as
    /// `{"ref": "$.ref", "sha": "$.head_commit.id"}` (`$`, `.name`, `[index]`).
    #[schema(value_type = Option<Object>)]
    pub params_from: Option<serde_json::Value>,
    /// For `webhook`: the header naming a delivery (`X-GitHub-Delivery`); a repeat within
    /// 24 h answers with the first run and starts nothing.
    pub dedup_header: Option<String>,
    /// For `webhook`: deliveries accepted per minute (default 60); more answer 429.
    pub rate_per_minute: Option<i32>,
}

/// How a webhook trigger checks a delivery's signature: an HMAC-SHA256 of the body (of
/// `t.body` when the header carries a `t=` time, as Stripe's does), in hex, after
/// `prefix`, in `header`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookSignatureBody {
    /// The header carrying it: `X-Hub-Signature-256` (GitHub), `Stripe-Signature`.
    pub header: String,
    /// The shared secret (write-only: sealed, never shown).
    pub secret: String,
    /// `hmac-sha256` (the default and only one).
    pub algorithm: Option<String>,
    /// What precedes the hex MAC: `sha256=` (GitHub), `v1=` (Stripe). Default none.
    pub prefix: Option<String>,
}

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

/// `POST /api/v1/workflows`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewWorkflowBody {
    /// Unique, at most 200 characters.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// The steps: a DAG (no cycles), each name unique.
    pub steps: Vec<WorkflowStepBody>,
    /// Declared parameters of its runs (as a job's `params_schema`): run now and trigger
    /// parameters are checked against them.
    pub params_schema: Option<std::collections::BTreeMap<String, ParamDeclaration>>,
}

/// One step of `POST /api/v1/workflows`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowStepBody {
    /// 1 to 100 letters, digits, `_` or `-`; unique within the workflow.
    pub name: String,
    /// The job it runs.
    pub job_id: i64,
    /// The steps that must be done before it starts.
    pub depends_on: Option<Vec<String>>,
    /// `all_success` (the default: every upstream step succeeded), `all_done` (they all
    /// ended, whatever their end) or `any_failed` (one failed); otherwise it is skipped.
    pub when: Option<String>,
    /// Parameters of its runs, over the workflow run's; checked against its job's
    /// `params_schema` (none required here: the workflow run's may give them).
    #[schema(value_type = Option<Object>)]
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
