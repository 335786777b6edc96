//! `probactr workflows …`: list and show workflows, start a run, pause and resume one,
//! cancel a workflow run, list a workflow's versions and restore one.

use anyhow::{bail, Context};
use clap::Subcommand;
use serde_json::{json, Value};

use crate::client::Client;
use crate::commands::{items, run_params, Exit};
use crate::output::{self, Format};
use crate::versions::DefinitionCommand;

/// `probactr workflows …`.
#[derive(Debug, Subcommand)]
pub enum WorkflowsCommand {
    /// List workflows, by name.
    List,
    /// Show a workflow: its steps and last runs.
    Get {
        /// Its name.
        name: String,
    },
    /// Start a run of a workflow now.
    Run {
        /// Its name.
        name: String,
        /// A parameter every step gets, `KEY=VALUE` (repeatable).
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
    },
    #[command(flatten)]
    Definition(DefinitionCommand),
    /// Cancel a workflow run: pending steps will not start, running ones are cancelled.
    Cancel {
        /// The workflow run's id (`workflows get NAME` lists the last ones).
        run_id: i64,
    },
}

const WORKFLOW_COLUMNS: &[(&str, &str)] = &[
    ("name", "NAME"),
    ("namespace", "NAMESPACE"),
    ("paused", "PAUSED"),
    ("steps", "STEPS"),
    ("last_state", "LAST"),
    ("updated_at", "UPDATED"),
];

/// Runs a `workflows` command.
pub async fn workflows(client: &Client, command: WorkflowsCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        WorkflowsCommand::List => {
            let listed: Vec<Value> = items(&client.get("/workflows").await?)
                .into_iter()
                .map(summarized)
                .collect();
            output::list(format, &listed, WORKFLOW_COLUMNS);
        }
        WorkflowsCommand::Get { name } => {
            let workflow = workflow_named(client, &name).await?;
            if format != Format::Table {
                output::one(format, &workflow);
                return Ok(Exit::Success);
            }
            let mut head = workflow.as_object().cloned().unwrap_or_default();
            for field in ["steps", "last_runs", "params_schema"] {
                head.remove(field);
            }
            print!("{}", output::fields(&head));
            println!("\nSTEPS");
            let steps: Vec<Value> = workflow["steps"].as_array().cloned().unwrap_or_default();
            print!(
                "{}",
                output::table(
                    &steps,
                    &[
                        ("name", "NAME"),
                        ("job_id", "JOB"),
                        ("depends_on", "AFTER"),
                        ("when", "WHEN")
                    ]
                )
            );
            println!("\nLAST RUNS");
            let runs = workflow["last_runs"].as_array().cloned().unwrap_or_default();
            print!(
                "{}",
                output::table(
                    &runs,
                    &[
                        ("id", "ID"),
                        ("state", "STATE"),
                        ("created_at", "STARTED"),
                        ("finished_at", "FINISHED")
                    ]
                )
            );
        }
        WorkflowsCommand::Run { name, params } => {
            let params = run_params(&params)?;
            let workflow = workflow_named(client, &name).await?;
            let started = client
                .post_once(
                    &format!("/workflows/{}/run", workflow["id"]),
                    &json!({"params": params}),
                )
                .await?;
            let id = started["workflow_run_id"]
                .as_i64()
                .context("the manager answered without a workflow run id")?;
            eprintln!("Workflow {name} started: workflow run #{id}");
            if format != Format::Table {
                output::one(format, &started);
            }
        }
        WorkflowsCommand::Definition(command) => {
            let workflow = workflow_named(client, command.name()).await?;
            let path = format!("/workflows/{}", workflow["id"]);
            command
                .run(client, format, &path, &format!("Workflow {}", command.name()))
                .await?;
        }
        WorkflowsCommand::Cancel { run_id } => {
            let run = client
                .post(&format!("/workflow-runs/{run_id}/cancel"), &json!({}))
                .await?;
            if format == Format::Table {
                eprintln!(
                    "Workflow run #{run_id} of {}: {}",
                    run["workflow_name"].as_str().unwrap_or("its workflow"),
                    run["state"].as_str().unwrap_or("cancelled")
                );
            } else {
                output::one(format, &run);
            }
        }
    }
    Ok(Exit::Success)
}

/// A listed workflow with what its table row shows: how many steps, its last run's state.
fn summarized(mut workflow: Value) -> Value {
    let steps = workflow["steps"].as_array().map_or(0, Vec::len);
    let last = workflow["last_runs"][0]["state"].clone();
    workflow["steps"] = json!(steps);
    workflow["last_state"] = last;
    workflow
}

/// The workflow named `name`, in the client's namespace or the one namespace the caller
/// sees that has a workflow of that name.
async fn workflow_named(client: &Client, name: &str) -> anyhow::Result<Value> {
    let mut named: Vec<Value> = items(&client.get("/workflows").await?)
        .into_iter()
        .filter(|workflow| workflow["name"] == name)
        .collect();
    match named.len() {
        0 => bail!("no workflow is named {name:?} (`probactr workflows list` shows them)"),
        1 => Ok(named.remove(0)),
        _ => {
            let namespaces: Vec<&str> = named
                .iter()
                .filter_map(|workflow| workflow["namespace"].as_str())
                .collect();
            bail!(
                "workflows named {name:?} exist in namespaces {}: say which with -n NAMESPACE",
                namespaces.join(", ")
            )
        }
    }
}
