//! One `init()` for structured logs: an env filter (`RUST_LOG`, default `info`) and text
//! or JSON lines (`PROBACTR_LOG_FORMAT`). Spans carry `job.id`, `run.id`, `executor.id`.

use std::io::IsTerminal;

use crate::config::{Config, LogFormat};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call does nothing (tests start processes
/// in-process more than once).
pub fn init(config: &Config) {
    let filter = EnvFilter::try_new(&config.log_filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let colours = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours);
    let _already_set = match config.log_format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.with_target(false).try_init(),
    };
}
