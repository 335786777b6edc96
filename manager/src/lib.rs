//! probactr's manager: the web admin and the REST API.

use probactr_common::config::Config;
use tokio_util::sync::CancellationToken;

/// Runs the manager until `shutdown` is cancelled.
pub async fn run(_config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    shutdown.cancelled().await;
    Ok(())
}
