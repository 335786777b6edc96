//! What a job, a workflow and a trigger are asked alike: `history` and `restore` of the
//! definitions it had, kept as versions by the manager, and `pause` and `resume`.

use serde_json::json;

use crate::client::Client;
use crate::commands::items;
use crate::output::{self, Format};

/// The columns of `jobs history`, `workflows history` and `triggers history`.
const VERSION_COLUMNS: &[(&str, &str)] = &[
    ("version", "VERSION"),
    ("action", "MADE BY"),
    ("actor", "WHO"),
    ("restored_from", "RESTORED FROM"),
    ("created_at", "WHEN"),
];

/// Lists the kept versions of the definition at `path` (`/jobs/ID`), newest first.
pub(crate) async fn history(client: &Client, format: Format, path: &str) -> anyhow::Result<()> {
    let page = client.get(&format!("{path}/versions")).await?;
    output::list(format, &items(&page), VERSION_COLUMNS);
    Ok(())
}

/// Makes `version` of the definition at `path` its definition again; says so of `what`
/// (`Job NAME`).
pub(crate) async fn restore(client: &Client, path: &str, what: &str, version: i64) -> anyhow::Result<()> {
    let restored = client
        .post(&format!("{path}/versions/{version}/restore"), &json!({}))
        .await?;
    eprintln!(
        "{what}: version {version} restored as version {}",
        restored["version"]
    );
    Ok(())
}

/// Pauses (when `pause`) or resumes the definition at `path` (`/jobs/ID`); says so of `what`
/// (`Job NAME`).
pub(crate) async fn set_paused(client: &Client, path: &str, what: &str, pause: bool) -> anyhow::Result<()> {
    let (action, done) = if pause {
        ("pause", "paused")
    } else {
        ("resume", "resumed")
    };
    client.post(&format!("{path}/{action}"), &json!({})).await?;
    eprintln!("{what} {done}");
    Ok(())
}
