//! PostgreSQL access: the pool, the migrator, and the named queries over the model.
//!
//! Every query is a named function in one of the submodules, with its SQL written out;
//! nothing is assembled from user strings. Functions take `impl PgExecutor` (a pool, a
//! connection or a transaction) where one statement suffices, and `&mut PgConnection`
//! where they run several statements that must share a transaction.
//!
//! Time is the database's: every comparison that decides firing or deadness uses
//! PostgreSQL's `now()`, so a process with a wrong local clock cannot misjudge either.

pub mod alerts;
pub mod api_tokens;
pub mod archived_outputs;
pub mod audit;
pub mod backfills;
pub mod calendars;
pub mod checkpoints;
pub mod cluster;
pub mod dashboard;
pub mod definitions;
pub mod functions;
pub mod housekeeping;
pub mod idempotency;
pub mod jobs;
pub mod login_failures;
pub mod maintenance;
pub mod namespaces;
pub mod oidc_logins;
pub mod pools;
pub mod processes;
pub mod rates;
pub mod replication;
pub mod retry;
pub mod run_inputs;
pub mod run_output;
pub mod run_progress;
pub mod runs;
pub mod secrets;
pub mod services;
pub mod sessions;
pub mod trigger_webhooks;
pub mod triggers;
pub mod user_roles;
pub mod users;
pub mod versions;
pub mod webhook_deliveries;
pub mod workflows;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// Channel notified when triggers change (created, edited, paused, resumed, deleted).
pub const TRIGGERS_CHANNEL: &str = "probactr_triggers";
/// Channel notified when runs are queued.
pub const RUNS_CHANNEL: &str = "probactr_runs";
/// Channel announcing when runs fired ahead of their instant become claimable.
pub const RUNS_AT_CHANNEL: &str = "probactr_runs_at";

/// Bounds of a listed page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// At most this many items (1 to [`Page::MAX_LIMIT`], default [`Page::DEFAULT_LIMIT`]).
    pub limit: i64,
    /// Items skipped.
    pub offset: i64,
}

impl Page {
    /// Items per page when `limit` is not given.
    pub const DEFAULT_LIMIT: i64 = 50;
    /// The largest `limit` accepted.
    pub const MAX_LIMIT: i64 = 500;
}

/// The schema migrations, embedded in every binary. They change the schema only: the
/// database's functions and triggers are [`functions`], applied after them by [`migrate`].
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

pub use functions::TEST_MIGRATOR;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or failed a query.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying migrations failed.
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Opens a pool of at most `max_connections`; connecting is lazy, so a process starts
/// even while PostgreSQL is down and connects when it returns.
pub fn pool(database_url: &str, max_connections: u32) -> Result<PgPool, StoreError> {
    let options: PgConnectOptions = database_url.parse()?;
    Ok(lazy_pool(options, max_connections))
}

/// Every session runs with PostgreSQL's JIT compilation off. Our statements are short and
/// index-driven, but a plan's estimated cost grows with the rows it might read: with
/// 200,000 runs queued the claim's estimate passes `jit_above_cost`, and each execution
/// then compiled about 340 functions (0.3 s, seconds on a busy machine) to run a 45 ms
/// statement. JIT code is not kept between executions, so it never paid back.
fn lazy_pool(options: PgConnectOptions, max_connections: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(options.application_name("probactr").options([("jit", "off")]))
}

/// Like [`pool`], for loops that run a fixed set of hot statements over and over (an
/// executor's, a monitor's reap pass): each is planned once per connection
/// (`plan_cache_mode = force_generic_plan`) instead of at every execution. Their plans do
/// not depend on the values bound (ids, limits, the clock), and planning the claim cost
/// more than running it. A loop that owns a pool of one connection also always meets the
/// session that planned its statements: a shared pool hands its idle connections out in
/// turn, and once a vacuum of the live runs invalidated the plans (every few seconds), a
/// statement run once a pass was planned anew on nearly every connection it met.
///
/// A session left inside a transaction for `idle_in_transaction` is ended by PostgreSQL.
/// An executor cut off from the database mid-transaction (a stalled network, a paused
/// VM) would otherwise hold the row locks of the runs it was ending until TCP gave up,
/// hours later, and the reaper's abandon of its runs would wait on them as long. Given
/// the heartbeat timeout, the locks are gone by the time the executor is declared dead.
pub fn hot_path_pool(
    database_url: &str,
    max_connections: u32,
    idle_in_transaction: Duration,
) -> Result<PgPool, StoreError> {
    let options: PgConnectOptions = database_url.parse()?;
    let idle_ms = idle_in_transaction.as_millis().max(1).to_string();
    Ok(lazy_pool(
        options.options([
            ("plan_cache_mode", "force_generic_plan"),
            ("idle_in_transaction_session_timeout", idle_ms.as_str()),
        ]),
        max_connections,
    ))
}

/// Applies pending migrations, then installs the current body of every database
/// function and trigger ([`functions::install`]). Safe to call from several processes at
/// once: sqlx takes an advisory lock around the migration, and the install one of its own.
pub async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await?;
    functions::install(pool).await
}

/// True when a database error is the violation of the named unique index or constraint.
pub fn is_unique_violation(err: &sqlx::Error, constraint: &str) -> bool {
    match err {
        sqlx::Error::Database(db) => db.is_unique_violation() && db.constraint() == Some(constraint),
        _ => false,
    }
}

/// True when an error means the database is unreachable rather than that it refused the
/// query; callers back off and retry these.
pub fn is_connection_error(err: &sqlx::Error) -> bool {
    matches!(
        err,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_)
    ) || matches!(err, sqlx::Error::Database(db) if db.code().is_some_and(|code| code.starts_with("57P") || code.starts_with("08")))
}

/// Runs a statement and returns how many rows it wrote (inserted, updated or deleted).
pub(crate) async fn rows_written<'q>(
    db: impl sqlx::PgExecutor<'_>,
    statement: impl sqlx::Execute<'q, sqlx::Postgres> + 'q,
) -> Result<u64, StoreError> {
    Ok(db.execute(statement).await?.rows_affected())
}

/// Whether the database answers a trivial query (the manager's readiness probe).
pub async fn ping(db: impl sqlx::PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query!("SELECT 1 AS one").fetch_one(db).await?;
    Ok(())
}

/// The database's clock (every decision about time uses it, not the caller's).
pub async fn db_now(db: impl sqlx::PgExecutor<'_>) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    Ok(sqlx::query_scalar!(r#"SELECT now() AS "now!""#)
        .fetch_one(db)
        .await?)
}
