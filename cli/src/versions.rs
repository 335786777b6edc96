//! `history` and `restore` of a job, a workflow or a trigger: the definitions it had, kept as
//! versions by the manager.

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
