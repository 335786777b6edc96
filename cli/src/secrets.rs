//! `probactr secrets …`: secrets by name (their values are never shown), set from
//! standard input or a file so they stay out of the shell's history, and deleted.

use std::io::Read;

use anyhow::{bail, Context};
use clap::Subcommand;
use serde_json::json;

use crate::client::Client;
use crate::commands::{encode, items, Exit};
use crate::output::{self, Format};

/// `probactr secrets …` (namespace admins).
#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// List secrets: names, when and by whom they were set; never values.
    List,
    /// Set a secret (create or replace) from standard input, or from a file.
    Set {
        /// Its name.
        name: String,
        /// Read the value from this file instead of standard input.
        #[arg(long)]
        file: Option<std::path::PathBuf>,
    },
    /// Delete a secret (jobs that use it then fail, saying so).
    Delete {
        /// Its name.
        name: String,
    },
}

/// Runs a `secrets` command; `-n` names the namespace (else `default`).
pub async fn secrets(client: &Client, command: SecretsCommand, format: Format) -> anyhow::Result<Exit> {
    let namespace = client.namespace().unwrap_or("default").to_owned();
    match command {
        SecretsCommand::List => {
            let columns = [
                ("name", "NAME"),
                ("namespace", "NAMESPACE"),
                ("updated_by", "SET BY"),
                ("updated_at", "SET"),
            ];
            output::list(format, &items(&client.get("/secrets").await?), &columns);
        }
        SecretsCommand::Set { name, file } => {
            let value = match &file {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("--file: cannot read {}", path.display()))?,
                None => {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .context("cannot read the value from standard input")?;
                    text
                }
            };
            // A value typed or echoed ends with a newline that is not part of it.
            let value = value.strip_suffix('\n').unwrap_or(&value);
            let value = value.strip_suffix('\r').unwrap_or(value);
            if value.is_empty() {
                bail!("the value of secret {name} is empty: give it on standard input or with --file");
            }
            client
                .post(
                    "/secrets",
                    &json!({"name": name, "namespace": namespace, "value": value}),
                )
                .await?;
            eprintln!("Secret {name} set in namespace {namespace}");
        }
        SecretsCommand::Delete { name } => {
            client
                .delete(&format!(
                    "/secrets/{}?namespace={}",
                    encode(&name),
                    encode(&namespace)
                ))
                .await?;
            eprintln!("Secret {name} deleted from namespace {namespace}");
        }
    }
    Ok(Exit::Success)
}
