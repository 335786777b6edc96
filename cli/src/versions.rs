//! What a job, a workflow and a trigger are asked alike: `history` and `restore` of the
//! definitions it had, kept as versions by the manager, and `pause` and `resume`.

use clap::Subcommand;
use serde_json::json;

use crate::client::Client;
use crate::commands::items;
use crate::output::{self, Format};

/// What `jobs` and `workflows` ask of one definition, found by its name.
#[derive(Debug, Subcommand)]
pub enum DefinitionCommand {
    /// Pause it: its triggers stop starting it.
    Pause {
        /// Its name.
        name: String,
    },
    /// Resume it after a pause.
    Resume {
        /// Its name.
        name: String,
    },
    /// List its kept versions, newest first: who changed what, and when.
    History {
        /// Its name.
        name: String,
    },
    /// Make an earlier version its definition again (as a new version).
    Restore {
        /// Its name.
        name: String,
        /// The version to bring back (see `history`).
        #[arg(long)]
        version: i64,
    },
}

impl DefinitionCommand {
    /// The name of the definition it is about.
    pub fn name(&self) -> &str {
        match self {
            DefinitionCommand::Pause { name }
            | DefinitionCommand::Resume { name }
            | DefinitionCommand::History { name }
            | DefinitionCommand::Restore { name, .. } => name,
        }
    }

    /// Runs it on the definition at `path` (`/jobs/ID`), saying so of `what` (`Job NAME`).
    pub(crate) async fn run(
        &self,
        client: &Client,
        format: Format,
        path: &str,
        what: &str,
    ) -> anyhow::Result<()> {
        match self {
            DefinitionCommand::Pause { .. } => set_paused(client, path, what, true).await,
            DefinitionCommand::Resume { .. } => set_paused(client, path, what, false).await,
            DefinitionCommand::History { .. } => history(client, format, path).await,
            DefinitionCommand::Restore { version, .. } => restore(client, path, what, *version).await,
        }
    }
}

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
