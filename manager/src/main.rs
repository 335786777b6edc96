//! `probactr-manager`: the web admin and REST API.

use probactr_common::{cli, config::Config, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::handle_args("probactr-manager", "web admin and REST API");
    let config = Config::from_env_or_exit("probactr-manager");
    let telemetry = telemetry::init(&config, "probactr-manager");
    tracing::info!(config = %config.summary(), "probactr-manager starting");
    let result = probactr_manager::run(config, probactr_common::shutdown::on_signal()).await;
    // The last spans (the shutdown's own) are exported before the process ends.
    telemetry.shutdown();
    result
}
