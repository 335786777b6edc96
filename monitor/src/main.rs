//! `probactr-monitor`: reaps executors whose heartbeats stopped.

use probactr_common::{cli, config::Config, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::handle_args(
        "probactr-monitor",
        "reaps dead executors, cleans up their runs and delivers alerts",
    );
    let config = Config::from_env_or_exit("probactr-monitor");
    config.secret_keys_or_exit("probactr-monitor");
    let telemetry = telemetry::init(&config, "probactr-monitor");
    tracing::info!(config = %config.summary(), "probactr-monitor starting");
    let result = probactr_monitor::run(config, probactr_common::shutdown::on_signal()).await;
    // The last spans (the shutdown's own) are exported before the process ends.
    telemetry.shutdown();
    result
}
