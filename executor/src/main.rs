//! `probactr-executor`: fires due triggers and runs jobs.

use probactr_common::{cli, config::Config, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::handle_args(
        "probactr-executor",
        "fires due triggers and runs jobs under locks",
    );
    let config = Config::from_env_or_exit("probactr-executor");
    telemetry::init(&config);
    tracing::info!(config = %config.summary(), "probactr-executor starting");
    probactr_executor::run(config, probactr_common::shutdown::on_signal()).await
}
