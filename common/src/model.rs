//! The data model as Rust types: rows read from PostgreSQL and the enums stored in its
//! CHECK-constrained text columns.
//!
//! The states of a run and the transitions between them are drawn, and made, in
//! [`crate::store::runs`]; [`RunState::may_become`] states which are allowed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Declares a string-backed enum whose text form is what the database stores.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The text stored in the database and used in the API.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue {
                        value: other.to_owned(),
                        expected: &[$($text),+],
                    }),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = UnknownValue;
            fn try_from(s: String) -> Result<Self, Self::Error> { s.parse() }
        }

        // Stored as text: read and written as its text form, so checked queries can
        // name the column's Rust type (`kind AS "kind: JobKind"`).
        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <str as sqlx::Type<sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        // Lists of them are `text[]` columns (an alert rule's events).
        impl sqlx::postgres::PgHasArrayType for $name {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
            fn array_compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <&str as sqlx::postgres::PgHasArrayType>::array_compatible(ty)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                Ok(<&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?.parse::<$name>()?)
            }
        }

        impl sqlx::Encode<'_, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }
    };
}

/// A text that is not one of an enum's values.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown value {value:?}, expected one of: {}", expected.join(", "))]
pub struct UnknownValue {
    /// What was given.
    pub value: String,
    /// What would have been accepted.
    pub expected: &'static [&'static str],
}

text_enum! {
    /// What a job runs.
    JobKind {
        /// A program with an argument list (no implicit shell).
        Shell => "shell",
        /// An HTTP request.
        Http => "http",
        /// Does nothing and succeeds; for tests and benchmarks.
        Noop => "noop",
        /// Sleeps `spec.millis`; for tests, demos and benchmarks.
        Sleep => "sleep",
    }
}

text_enum! {
    /// What to do with a run whose job's lock or permit cannot be had in time.
    Overlap {
        /// Record the run as skipped, with the reason.
        Skip => "skip",
        /// Leave it queued for a later claim.
        Queue => "queue",
        /// Stop the running attempt (SIGTERM, the job's `stop_grace_secs`, SIGKILL), then
        /// start this one.
        Replace => "replace",
        /// Leave one run waiting behind the running one; skip later ones, with the reason.
        BufferOne => "buffer_one",
    }
}

text_enum! {
    /// How the delay before a retry grows with the attempts.
    RetryBackoff {
        /// The same delay every time.
        Fixed => "fixed",
        /// The delay doubles with each attempt.
        Exponential => "exponential",
    }
}

text_enum! {
    /// Whether the delay before a retry is randomised (so that jobs failing together do
    /// not retry together).
    RetryJitter {
        /// A random delay between zero and the computed one.
        Full => "full",
        /// Exactly the computed delay.
        None => "none",
    }
}

/// Which failures a job retries (a job without one retries every failure). A failure is
/// retried when it matches any of them; a run abandoned by its executor always is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetryOn {
    /// Exit codes of a shell job that are retried.
    #[serde(default)]
    pub exit_codes: Vec<i32>,
    /// HTTP statuses of an HTTP job that are retried.
    #[serde(default)]
    pub http_statuses: Vec<i32>,
    /// Whether a timed-out attempt is retried.
    #[serde(default)]
    pub timeouts: bool,
}

impl RetryOn {
    /// Whether it names no failure at all (then every failure is retried).
    pub fn is_empty(&self) -> bool {
        self.exit_codes.is_empty() && self.http_statuses.is_empty() && !self.timeouts
    }
}

text_enum! {
    /// What happens to a run whose executor died (a job's takeover policy).
    OnExecutorLost {
        /// Start it again at once on another executor, up to `max_takeovers` times.
        Rerun => "rerun",
        /// Leave it to the retry policy.
        Fail => "fail",
    }
}

text_enum! {
    /// Where the runs of one instant of a job go.
    Route {
        /// One run, on any executor that may take it.
        Any => "any",
        /// One run per live executor that may take it, each pinned to it.
        Broadcast => "broadcast",
        /// `shards` runs, each with its index, spread over the live executors.
        Shard => "shard",
    }
}

text_enum! {
    /// Whether a job runs when triggered or is kept running.
    JobMode {
        /// Runs are made by triggers and run-now, and end.
        Batch => "batch",
        /// `replicas` long-lived instances, on distinct executors where possible, restarted
        /// with backoff when they end or their executor dies.
        Service => "service",
    }
}

text_enum! {
    /// How a trigger computes its instants.
    TriggerKind {
        /// A cron expression with seconds, in an IANA time zone.
        Cron => "cron",
        /// Every `interval_secs` of real time.
        Interval => "interval",
        /// One instant.
        Once => "once",
        /// No instant: a run per delivery to its secret URL (`POST /hooks/{token}`).
        Webhook => "webhook",
    }
}

text_enum! {
    /// What a trigger does with instants that passed while nobody fired them.
    Misfire {
        /// Run once now; record the others as missed.
        FireOnce => "fire_once",
        /// Record them all as missed.
        Skip => "skip",
        /// Run each of them, up to [`FIRE_ALL_CAP`]; record the rest as missed.
        FireAll => "fire_all",
    }
}

/// The most missed instants one firing of a `fire_all` trigger turns into runs.
pub const FIRE_ALL_CAP: usize = 100;

text_enum! {
    /// Where a run is in its life (see the module doc for the transitions).
    RunState {
        /// Waiting for an executor.
        Queued => "queued",
        /// Owned by an executor that is taking the job's lock.
        Claimed => "claimed",
        /// Executing.
        Running => "running",
        /// Finished with success.
        Succeeded => "succeeded",
        /// Finished with a failure (exit code, HTTP status, error).
        Failed => "failed",
        /// Killed at its job's timeout.
        TimedOut => "timed_out",
        /// Stopped on request.
        Cancelled => "cancelled",
        /// Not run: overlap policy or paused job; `reason` says which.
        Skipped => "skipped",
        /// Not run: its instant passed (misfire policy, stale queue).
        Missed => "missed",
        /// Its executor lost the lock or died; the outcome is unknown.
        Abandoned => "abandoned",
    }
}

impl RunState {
    /// True once the run can no longer change state.
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunState::Queued | RunState::Claimed | RunState::Running)
    }

    /// Whether a run in this state may move to `next` (the table of
    /// [`crate::store::runs`]). A retry is a new run, not a transition.
    pub fn may_become(self, next: RunState) -> bool {
        use RunState::*;
        match self {
            Queued => matches!(next, Claimed | Running | Cancelled | Skipped | Missed | Failed),
            Claimed => matches!(next, Queued | Running | Skipped | Failed | Cancelled),
            // Running → queued only for a run claimed ahead of free slots whose job never
            // started (`give_back_unstarted`).
            Running => matches!(
                next,
                Queued | Succeeded | Failed | TimedOut | Cancelled | Abandoned
            ),
            Succeeded | Failed | TimedOut | Cancelled | Skipped | Missed | Abandoned => false,
        }
    }
}

text_enum! {
    /// Which kind of process a row of `executors` describes.
    ProcessRole {
        /// Runs jobs.
        Executor => "executor",
        /// Reaps dead executors.
        Monitor => "monitor",
    }
}

text_enum! {
    /// A registered process's liveness as the cluster sees it.
    ProcessState {
        /// Heartbeating.
        Alive => "alive",
        /// Shutting down: takes no new work.
        Draining => "draining",
        /// Declared dead by a monitor; its runs were reaped.
        Dead => "dead",
        /// Shut down cleanly.
        Stopped => "stopped",
    }
}

text_enum! {
    /// Where an API token came from, which decides what ends it.
    TokenOrigin {
        /// Made from a user name and password (`POST /api/v1/auth/token`): ends with
        /// every password change.
        Login => "login",
        /// Made by a signed-in user under `/api/v1/tokens`: ends when an admin resets
        /// the password.
        Personal => "personal",
    }
}

text_enum! {
    /// What a user of the manager may do (see the manager's `auth` module for the table).
    Role {
        /// Read only.
        Viewer => "viewer",
        /// Operates jobs; edits only the built-in job kinds.
        Operator => "operator",
        /// Everything.
        Admin => "admin",
    }
}

impl Role {
    /// Pause, resume, run now, cancel, and manage triggers.
    pub fn can_operate(self) -> bool {
        matches!(self, Role::Operator | Role::Admin)
    }

    /// Create, edit or delete a job of `kind`: shell and http jobs run code or reach the
    /// network from executors, so only admins may define them.
    pub fn can_edit_job(self, kind: JobKind) -> bool {
        match self {
            Role::Admin => true,
            Role::Operator => matches!(kind, JobKind::Noop | JobKind::Sleep),
            Role::Viewer => false,
        }
    }

    /// Manage users and read the audit log.
    pub fn is_admin(self) -> bool {
        self == Role::Admin
    }
}

text_enum! {
    /// What an alert rule listens for (see `common::alerts` for when each is raised).
    AlertEvent {
        /// A run failed, timed out or was abandoned on its last allowed attempt.
        RunFailed => "run_failed",
        /// An attempt was killed at its job's timeout.
        RunTimedOut => "run_timed_out",
        /// An attempt's executor was lost.
        RunAbandoned => "run_abandoned",
        /// Instants of a trigger passed without a run.
        FireMissed => "fire_missed",
        /// The job failed `threshold` times in a row.
        ConsecutiveFailures => "consecutive_failures",
        /// A run has been running longer than `duration_secs`.
        RunTooLong => "run_too_long",
        /// The job has not succeeded for `duration_secs`.
        NoSuccessWithin => "no_success_within",
        /// An executor stopped heartbeating and was declared dead.
        ExecutorLost => "executor_lost",
        /// Triggers are due and no executor is alive.
        NoExecutor => "no_executor",
        /// The first success after an alerted failure.
        Recovered => "recovered",
        /// The capacity forecast sees, within `duration_secs` ahead, more runs due at once
        /// than the live executors that may run them can hold.
        CapacityShortfall => "capacity_shortfall",
    }
}

impl AlertEvent {
    /// Events about the cluster rather than one job: they match every rule that lists
    /// them, whatever the rule's job.
    pub fn is_cluster_wide(self) -> bool {
        matches!(self, AlertEvent::ExecutorLost | AlertEvent::NoExecutor)
    }

    /// Events that put a job in a failing state that `recovered` ends.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            AlertEvent::RunFailed
                | AlertEvent::RunTimedOut
                | AlertEvent::RunAbandoned
                | AlertEvent::ConsecutiveFailures
                | AlertEvent::NoSuccessWithin
        )
    }
}

text_enum! {
    /// Where an alert channel delivers.
    ChannelKind {
        /// A JSON POST to a URL, signed when the channel has a secret.
        Webhook => "webhook",
        /// Mail through the SMTP server of `PROBACTR_SMTP_URL`.
        Email => "email",
        /// A Slack or Mattermost incoming webhook.
        Slack => "slack",
    }
}

text_enum! {
    /// Where a notification is in its delivery.
    NotificationState {
        /// Not delivered yet (possibly after failed attempts).
        Pending => "pending",
        /// Delivered.
        Sent => "sent",
        /// Given up on after retrying for `PROBACTR_ALERT_RETRY_FOR`.
        Failed => "failed",
    }
}

/// A row of `jobs`.
#[allow(missing_docs)] // the columns are documented in migrations/
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Job {
    pub id: i64,
    pub name: String,
    /// The namespace it belongs to (never changes; its triggers and runs are in it too).
    pub namespace: String,
    pub description: String,
    #[sqlx(try_from = "String")]
    pub kind: JobKind,
    pub spec: serde_json::Value,
    pub parallel: bool,
    pub max_concurrency: Option<i32>,
    #[sqlx(try_from = "String")]
    pub overlap: Overlap,
    pub timeout_secs: i32,
    pub retry_max_attempts: i32,
    pub retry_backoff_secs: i32,
    pub retry_backoff: RetryBackoff,
    pub retry_max_secs: Option<i32>,
    pub retry_jitter: RetryJitter,
    /// Which failures are retried (None: every failure).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<RetryOn>))]
    pub retry_on: Option<sqlx::types::Json<RetryOn>>,
    pub paused: bool,
    pub fence: i64,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub managed_by: Option<String>,
    #[sqlx(try_from = "String")]
    pub on_executor_lost: OnExecutorLost,
    pub max_takeovers: i32,
    pub stop_grace_secs: i32,
    pub selector: serde_json::Value,
    pub priority: i32,
    pub route: Route,
    pub shards: i32,
    pub mode: JobMode,
    pub replicas: i32,
    /// When the job was deleted with its history kept (None: a job in use).
    pub deleted_at: Option<DateTime<Utc>>,
    /// Its declared run parameters (see `params_schema`); None: free parameters.
    pub params_schema: Option<serde_json::Value>,
    /// The pool of its namespace whose slots its runs hold (None: none).
    pub pool: Option<String>,
    /// The slots of `pool` each of its runs holds.
    pub pool_slots: i32,
    /// At most so many of its runs start in a window (None: no bound).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Rate>))]
    pub rate: Option<sqlx::types::Json<Rate>>,
}

/// A rate limit of a job or a pool: at most `limit` starts (claims) in any window of
/// `per_secs` seconds, across the cluster. Runs past it stay queued until the window
/// allows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rate {
    /// Starts allowed in a window (at least 1).
    pub limit: i32,
    /// The window, in seconds (at least 1).
    pub per_secs: i32,
}

impl Rate {
    /// The reason shown on a queued run held back by the rate of `name` (a job or a
    /// pool): "rate nightly-api 20/10s".
    pub fn reason(&self, name: &str) -> String {
        format!("rate {name} {}/{}s", self.limit, self.per_secs)
    }
}

/// When a trigger fires: its kind and schedule, the window it fires in, and what becomes
/// of instants that passed unfired. A job's and a workflow's triggers, and the definitions
/// that create them, all carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerTiming {
    /// cron, interval, once or webhook.
    #[sqlx(try_from = "String")]
    pub kind: TriggerKind,
    /// The cron text (kind = cron).
    pub cron: Option<String>,
    /// IANA zone of the cron text.
    pub timezone: String,
    /// Seconds between instants (kind = interval).
    pub interval_secs: Option<i64>,
    /// The instant (kind = once).
    pub at: Option<DateTime<Utc>>,
    /// No instant before this.
    pub start_at: Option<DateTime<Utc>>,
    /// No instant after this.
    pub end_at: Option<DateTime<Utc>>,
    /// What to do with instants that passed unfired.
    #[sqlx(try_from = "String")]
    pub misfire: Misfire,
    /// Seconds of lateness after which an instant counts as misfired.
    pub misfire_threshold_secs: i32,
}

impl TriggerTiming {
    /// Its fields' names as they read in JSON (and in a definition): the schedule's (kind
    /// to the window's end), then the misfire policy's.
    pub const FIELDS: [&'static str; 9] = [
        "kind",
        "cron",
        "timezone",
        "interval_secs",
        "at",
        "start_at",
        "end_at",
        "misfire",
        "misfire_threshold_secs",
    ];

    /// The names of the schedule's fields, without the misfire policy's.
    pub fn schedule_fields() -> &'static [&'static str] {
        &TriggerTiming::FIELDS[..7]
    }

    /// The schema's defaults for a trigger of `kind` (its schedule still to be set).
    pub fn of_kind(kind: TriggerKind) -> TriggerTiming {
        TriggerTiming {
            kind,
            cron: None,
            timezone: "UTC".to_owned(),
            interval_secs: None,
            at: None,
            start_at: None,
            end_at: None,
            misfire: Misfire::FireOnce,
            misfire_threshold_secs: 60,
        }
    }

    /// Every `secs` seconds, with the schema's defaults.
    pub fn interval(secs: i64) -> TriggerTiming {
        TriggerTiming {
            interval_secs: Some(secs),
            ..TriggerTiming::of_kind(TriggerKind::Interval)
        }
    }

    /// The schedule this timing describes, validated; `anchor` is the creation time
    /// (intervals count from `start_at`, else from it); `seed` fixes its `H` items (see
    /// [`crate::schedule::hash_seed`]; None refuses an `H`).
    pub fn schedule(
        &self,
        anchor: DateTime<Utc>,
        seed: Option<u64>,
    ) -> Result<crate::schedule::TriggerSchedule, crate::schedule::ScheduleError> {
        crate::schedule::TriggerSchedule::from_parts(
            self.kind,
            self.cron.as_deref(),
            &self.timezone,
            self.interval_secs,
            self.at,
            self.start_at,
            self.end_at,
            anchor,
            seed,
        )
    }
}

/// A row of `triggers`.
#[allow(missing_docs)] // the columns are documented in migrations/
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Trigger {
    pub id: i64,
    pub job_id: i64,
    #[serde(flatten)]
    #[sqlx(flatten)]
    pub timing: TriggerTiming,
    pub paused: bool,
    pub next_fire_at: Option<DateTime<Utc>>,
    pub last_fired_at: Option<DateTime<Utc>>,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub max_concurrency: Option<i32>,
}

impl Trigger {
    /// Trigger `id` of job `job_id` as it is stored when created at `created_at`: unpaused,
    /// at version 1, without a cap of its own, its first instant not yet computed.
    pub fn created(id: i64, job_id: i64, timing: TriggerTiming, created_at: DateTime<Utc>) -> Trigger {
        Trigger {
            id,
            job_id,
            timing,
            paused: false,
            next_fire_at: None,
            last_fired_at: None,
            version: 1,
            created_at,
            updated_at: created_at,
            max_concurrency: None,
        }
    }
}

/// A row of `runs`.
#[allow(missing_docs)] // the columns are documented in migrations/
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Run {
    pub id: i64,
    pub job_id: i64,
    pub trigger_id: Option<i64>,
    pub scheduled_at: DateTime<Utc>,
    pub attempt: i32,
    pub first_run_id: Option<i64>,
    #[sqlx(try_from = "String")]
    pub state: RunState,
    pub reason: Option<String>,
    pub exclusive: bool,
    pub executor_id: Option<Uuid>,
    pub lock_token: Option<String>,
    pub fence: Option<i64>,
    pub queued_at: DateTime<Utc>,
    pub available_at: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub cancel_requested_at: Option<DateTime<Utc>>,
    pub exit_code: Option<i32>,
    pub http_status: Option<i32>,
    pub error: Option<String>,
    pub output: Option<String>,
    pub output_truncated: bool,
    /// A fanned-out run's index among the runs of its instant (`route` broadcast or shard).
    pub shard: Option<i32>,
    /// How many runs its instant fanned out to.
    pub shard_total: Option<i32>,
    /// The executor this run should run on (a broadcast's only; a shard's while it lives).
    pub pinned_to: Option<Uuid>,
    /// A service instance's slot (0 to the job's replicas - 1).
    pub replica: Option<i32>,
}

/// A row of `executors` (executors and monitors both register there).
#[allow(missing_docs)] // the columns are documented in migrations/
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Process {
    pub id: Uuid,
    #[sqlx(try_from = "String")]
    pub role: ProcessRole,
    pub host: String,
    pub pid: i32,
    pub version: String,
    pub capacity: i32,
    #[sqlx(try_from = "String")]
    pub state: ProcessState,
    pub started_at: DateTime<Utc>,
    pub last_heartbeat_at: DateTime<Utc>,
    pub declared_dead_at: Option<DateTime<Utc>>,
    pub reaped_by: Option<Uuid>,
    pub labels: serde_json::Value,
    pub cordoned: bool,
    pub drain_requested: bool,
}

#[cfg(test)]
mod tests {
    use super::{RunState, TriggerKind, TriggerTiming};

    #[test]
    fn a_trigger_timings_field_names_are_its_json_keys() {
        let json = serde_json::to_value(TriggerTiming::of_kind(TriggerKind::Cron)).expect("serializes");
        let keys: Vec<&str> = json
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted_names = TriggerTiming::FIELDS.to_vec();
        sorted_names.sort_unstable();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_unstable();
        assert_eq!(sorted_keys, sorted_names);
        assert_eq!(TriggerTiming::schedule_fields().last(), Some(&"end_at"));
    }

    #[test]
    fn terminal_states_have_no_way_out_and_live_ones_end_somewhere() {
        for &from in RunState::ALL {
            let exits: Vec<RunState> = RunState::ALL
                .iter()
                .copied()
                .filter(|&to| from.may_become(to))
                .collect();
            assert_eq!(from.is_terminal(), exits.is_empty(), "{from}: {exits:?}");
            assert!(!from.may_become(from), "{from} may not become itself");
        }
    }

    #[test]
    fn a_run_starts_only_from_a_claim_or_the_claim_itself() {
        let into_running: Vec<RunState> = RunState::ALL
            .iter()
            .copied()
            .filter(|&from| from.may_become(RunState::Running))
            .collect();
        assert_eq!(into_running, vec![RunState::Queued, RunState::Claimed]);
        assert!(
            !RunState::Queued.may_become(RunState::Abandoned),
            "only a running run is abandoned"
        );
    }
}
