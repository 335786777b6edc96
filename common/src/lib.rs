//! Shared ground of every probactr process.
//!
//! probactr's processes never talk to each other: they meet in PostgreSQL (the source of
//! truth) and Redis (locks). This crate holds what they must agree on.
//!
//! # Layout
//!
//! - [`config`]: every setting, read from environment variables, with errors that name
//!   the variable.
//! - [`model`]: the rows and enums of the data model (jobs, triggers, runs, executors).
//! - [`reach`]: start-up's bounded wait for PostgreSQL and Redis.
//! - [`store`]: the connection pool, the migrator and the named queries over the model.
//! - [`schedule`]: cron (with seconds and a time zone), interval and one-shot instants.
//! - [`capacity`]: the capacity forecast (demand of the coming hours against the live
//!   executors), shared by the manager's API and the monitor's `capacity_shortfall` alert.
//! - [`calendar`]: calendars of days a trigger skips or keeps to, and the iCalendar import.
//! - [`maintenance`]: maintenance windows (skip or defer the instants they cover).
//! - [`backoff`]: capped exponential backoff with full jitter, and a deadline-bounded retry.
//! - [`lock`]: the Redis mutex and permit set (efficiency: contention stays cheap).
//! - [`jobspec`]: typed, validated job definitions (shell, http, noop, sleep).
//! - [`template`]: `{{ params.KEY }}` / `{{ steps.NAME.output.KEY }}`, encoded for where
//!   they land; [`masking`]: secret values (and their encoded forms) out of what runs leave.
//! - [`secrets`]: sealing values (bound to what they seal), `{{ secrets.NAME }}`, masking;
//!   [`masked_url`]: how a sealed URL (a channel's, a credential) is shown.
//! - [`fence`]: PostgreSQL fencing tokens (correctness: a stale holder cannot write).
//! - [`telemetry`]: one `init()` for structured logs.
//! - [`shutdown`]: a cancellation token cancelled on SIGTERM or Ctrl-C.
//! - `archive` (feature `archive`): runs' full output in S3-compatible storage.
//! - [`cli`]: `--help` / `--version` handling shared by the three binaries.

pub mod account;
#[cfg(feature = "archive")]
pub mod archive;
pub mod backoff;
pub mod calendar;
pub mod capacity;
pub mod cidr;
pub mod cli;
pub mod config;
pub mod fence;
#[cfg(feature = "http-guard")]
pub mod http_guard;
pub mod jobspec;
pub mod json_path;
pub mod labels;
pub mod ledger;
pub mod lock;
pub mod maintenance;
pub mod masked_url;
pub mod masking;
pub mod model;
pub mod params_schema;
pub mod reach;
pub mod run_trace;
pub mod schedule;
pub mod secrets;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod template;

/// The version every process reports (registration rows, `--version`, logs).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
