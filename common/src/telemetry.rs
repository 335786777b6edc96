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

/// Installs the Prometheus recorder. With `listen` set (`PROBACTR_METRICS_LISTEN`) it
/// serves `/metrics` there; the returned handle renders the text for a process that
/// serves it itself (the manager). A second call returns None (the recorder is global).
pub fn install_metrics(
    listen: Option<std::net::SocketAddr>,
) -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    let builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    match listen {
        Some(address) => {
            let (recorder, exporter) = match builder.with_http_listener(address).build() {
                Ok(built) => built,
                Err(err) => {
                    tracing::error!(%address, error = %err, "cannot serve metrics");
                    return None;
                }
            };
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                return None;
            }
            tokio::spawn(async move {
                if let Err(err) = exporter.await {
                    tracing::error!(error = ?err, "metrics listener stopped");
                }
            });
            tracing::info!(%address, "serving Prometheus metrics at /metrics");
            Some(handle)
        }
        None => builder.install_recorder().ok(),
    }
}
