//! `probactr alerts rules|channels …`: list, show and delete alert rules and the channels
//! they notify (made with `apply` or in the admin), by name or id.

use anyhow::bail;
use clap::Subcommand;
use serde_json::Value;

use crate::client::Client;
use crate::commands::{items, Exit};
use crate::output::{self, Format};

/// `probactr alerts …`.
#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// Alert rules: which events of which jobs notify which channels.
    #[command(subcommand)]
    Rules(AlertObjectCommand),
    /// Alert channels: where notifications go (namespace admins).
    #[command(subcommand)]
    Channels(AlertObjectCommand),
}

/// What is done to rules or channels.
#[derive(Debug, Subcommand)]
pub enum AlertObjectCommand {
    /// List them.
    List,
    /// Show one.
    Get {
        /// Its name or id.
        name: String,
    },
    /// Delete one.
    Delete {
        /// Its name or id.
        name: String,
    },
}

/// The API's collection and columns of rules or channels.
struct Kind {
    what: &'static str,
    path: &'static str,
    columns: &'static [(&'static str, &'static str)],
}

const RULES: Kind = Kind {
    what: "alert rule",
    path: "/alert-rules",
    columns: &[
        ("id", "ID"),
        ("name", "NAME"),
        ("namespace", "NAMESPACE"),
        ("events", "EVENTS"),
        ("job_id", "JOB"),
        ("channel_ids", "CHANNELS"),
        ("enabled", "ENABLED"),
    ],
};

const CHANNELS: Kind = Kind {
    what: "alert channel",
    path: "/channels",
    columns: &[
        ("id", "ID"),
        ("name", "NAME"),
        ("kind", "KIND"),
        ("has_secret", "SECRET"),
        ("updated_at", "UPDATED"),
    ],
};

/// Runs an `alerts` command.
pub async fn alerts(client: &Client, command: AlertsCommand, format: Format) -> anyhow::Result<Exit> {
    let (kind, command) = match command {
        AlertsCommand::Rules(command) => (&RULES, command),
        AlertsCommand::Channels(command) => (&CHANNELS, command),
    };
    match command {
        AlertObjectCommand::List => output::list(format, &listed(client, kind).await?, kind.columns),
        AlertObjectCommand::Get { name } => output::one(format, &named(client, kind, &name).await?),
        AlertObjectCommand::Delete { name } => {
            let found = named(client, kind, &name).await?;
            client.delete(&format!("{}/{}", kind.path, found["id"])).await?;
            eprintln!(
                "{} {} deleted",
                capitalized(kind.what),
                found["name"].as_str().unwrap_or(&name)
            );
        }
    }
    Ok(Exit::Success)
}

/// The rules or channels the caller sees, only the client's namespace's when it has one
/// and the objects say theirs (rules do).
async fn listed(client: &Client, kind: &Kind) -> anyhow::Result<Vec<Value>> {
    let all = items(&client.get(kind.path).await?);
    Ok(match client.namespace() {
        Some(namespace) => all
            .into_iter()
            .filter(|item| item.get("namespace").is_none_or(|of| of == namespace))
            .collect(),
        None => all,
    })
}

/// The rule or channel with this name (or id).
async fn named(client: &Client, kind: &Kind, name: &str) -> anyhow::Result<Value> {
    let all = listed(client, kind).await?;
    let id: Option<i64> = name.parse().ok();
    let mut found: Vec<Value> = all
        .into_iter()
        .filter(|item| item["name"] == name || (id.is_some() && item["id"].as_i64() == id))
        .collect();
    match found.len() {
        0 => bail!("no {} is named {name:?}", kind.what),
        1 => Ok(found.remove(0)),
        _ => bail!(
            "several {}s are named {name:?}: give its id, or say the namespace with -n",
            kind.what
        ),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
