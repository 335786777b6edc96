//! The commands: each turns its arguments into API calls and prints the answer.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Subcommand;
use serde_json::{json, Value};

use crate::client::{Client, ClientError};
use crate::credentials;
use crate::output::{self, Format};
use crate::versions::DefinitionCommand;
use crate::{alerts, instants, secrets, teams, versions, watch, workflows, Command};

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0.
    Success,
    /// 1: what was asked did not succeed (a run that failed, under `--wait`).
    Failure,
}

/// `probactr jobs …`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs, by name.
    List {
        /// Only jobs whose name or description contains this.
        #[arg(long)]
        q: Option<String>,
    },
    /// Show a job.
    Get {
        /// Its name.
        name: String,
    },
    #[command(flatten)]
    Definition(DefinitionCommand),
    /// Delete a job and its triggers; its run history stays readable unless erased.
    Delete {
        /// Its name.
        name: String,
        /// Also erase its run history.
        #[arg(long)]
        erase_history: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Run a job now.
    Run {
        /// Its name.
        name: String,
        /// A parameter of the run, `KEY=VALUE` (repeatable).
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// Follow the run to its end: exit 0 when it succeeds, 1 otherwise.
        #[arg(long)]
        wait: bool,
    },
}

/// `probactr runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only this job's runs (by name).
        #[arg(long)]
        job: Option<String>,
        /// Only runs in this state.
        #[arg(long)]
        state: Option<String>,
        /// How many (1–500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show a run.
    Get {
        /// Its id.
        id: i64,
    },
    /// Print a run's output (stdout to standard output, stderr to standard error).
    Logs {
        /// Its id.
        id: i64,
        /// Follow the output while the run runs; exit when it ends.
        #[arg(long)]
        follow: bool,
    },
    /// Cancel a run.
    Cancel {
        /// Its id.
        id: i64,
    },
    /// Run a run's job again with the parameters that run saw.
    Rerun {
        /// Its id.
        id: i64,
    },
}

/// `probactr triggers …`.
#[derive(Debug, Subcommand)]
pub enum TriggersCommand {
    /// List triggers (of one job, or of every job).
    List {
        /// Only this job's triggers (by name).
        #[arg(long)]
        job: Option<String>,
    },
    /// List a trigger's kept versions, newest first: who changed what, and when.
    History {
        /// Its id (see `triggers list`).
        id: i64,
    },
    /// Make an earlier version of a trigger its definition again (as a new version).
    Restore {
        /// Its id (see `triggers list`).
        id: i64,
        /// The version to bring back (see `triggers history`).
        #[arg(long)]
        version: i64,
    },
}

/// `probactr executors …`.
#[derive(Debug, Subcommand)]
pub enum ExecutorsCommand {
    /// List executors.
    List,
    /// Stop an executor claiming new runs (those running go on).
    Cordon {
        /// The executor's id.
        id: String,
    },
    /// Let a cordoned executor claim runs again.
    Uncordon {
        /// The executor's id.
        id: String,
    },
    /// Cordon an executor, let its running jobs finish (or hand them over), then have it exit.
    Drain {
        /// The executor's id.
        id: String,
    },
}

impl ExecutorsCommand {
    /// The API's name of a cordon, uncordon or drain, with the executor; None for a list.
    fn routing(&self) -> Option<(&'static str, &str)> {
        match self {
            ExecutorsCommand::List => None,
            ExecutorsCommand::Cordon { id } => Some(("cordon", id)),
            ExecutorsCommand::Uncordon { id } => Some(("uncordon", id)),
            ExecutorsCommand::Drain { id } => Some(("drain", id)),
        }
    }
}

/// Runs a command other than `completions`.
pub async fn run(command: Command, format: Format, namespace: Option<String>) -> anyhow::Result<Exit> {
    let connect = || connect(namespace.clone());
    match command {
        Command::Login {
            url,
            user,
            password_stdin,
        } => login(&url, user, password_stdin).await,
        Command::Logout => logout().await,
        Command::Jobs(jobs) => jobs_command(&connect()?, jobs, format).await,
        Command::Runs(runs) => runs_command(&connect()?, runs, format).await,
        Command::Triggers(TriggersCommand::List { job }) => triggers(&connect()?, job, format).await,
        Command::Triggers(TriggersCommand::History { id }) => {
            versions::history(&connect()?, format, &format!("/triggers/{id}")).await?;
            Ok(Exit::Success)
        }
        Command::Triggers(TriggersCommand::Restore { id, version }) => {
            versions::restore(
                &connect()?,
                &format!("/triggers/{id}"),
                &format!("Trigger {id}"),
                version,
            )
            .await?;
            Ok(Exit::Success)
        }
        Command::Executors(command) => executors_command(&connect()?, command, format).await,
        Command::Namespaces(command) => teams::namespaces(&connect()?, command, format).await,
        Command::Users(command) => teams::users(&connect()?, command, format).await,
        Command::Tokens(command) => teams::tokens(&connect()?, command, format).await,
        Command::Workflows(command) => workflows::workflows(&connect()?, command, format).await,
        Command::Secrets(command) => secrets::secrets(&connect()?, command, format).await,
        Command::Alerts(command) => alerts::alerts(&connect()?, command, format).await,
        Command::Ledger(span) => instants::ledger(&connect()?, span, format).await,
        Command::Forecast(span) => instants::forecast(&connect()?, span, format).await,
        Command::Pause { all: _ } => {
            let window = connect()?.post("/cluster/pause", &json!({})).await?;
            match format {
                Format::Table => eprintln!("Cluster paused (maintenance window {})", window["id"]),
                _ => output::one(format, &window),
            }
            Ok(Exit::Success)
        }
        Command::Resume { all: _ } => {
            let answer = connect()?.post("/cluster/resume", &json!({})).await?;
            match format {
                Format::Table => eprintln!("Cluster resumed ({} window(s) ended)", answer["ended"]),
                _ => output::one(format, &answer),
            }
            Ok(Exit::Success)
        }
        Command::Status => {
            let status = connect()?.get("/status").await?;
            match format {
                Format::Table => print!("{}", status_summary(&status)),
                _ => output::one(format, &status),
            }
            Ok(Exit::Success)
        }
        Command::Export { job } => {
            let definitions = probactr_definitions::export(&connect()?, job.as_deref()).await?;
            match format {
                Format::Json => output::one(Format::Json, &definitions),
                _ => println!("{}", output::yaml(&definitions)),
            }
            Ok(Exit::Success)
        }
        Command::Apply { file, dry_run, prune } => {
            // The server checks every object of every file before it changes anything,
            // and applies them all or none (`POST /api/v1/definitions/apply`).
            let files = definition_files(&file)?;
            let path = format!("/definitions/apply?dry_run={dry_run}&prune={prune}");
            let report = connect()?.post(&path, &json!({"files": files})).await?;
            let changes: Vec<String> = report["changes"]
                .as_array()
                .map(|changes| {
                    changes
                        .iter()
                        .filter_map(|change| change.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            for change in &changes {
                println!("{change}");
            }
            if changes.is_empty() {
                eprintln!("Nothing to change: the server matches the files");
            } else if dry_run {
                eprintln!("Dry run: nothing was changed");
            }
            Ok(Exit::Success)
        }
        Command::Completions { .. } => Ok(Exit::Success),
    }
}

/// `probactr status` for people: processes and runs in counts, then the latest failures
/// and the next instants to fire.
fn status_summary(status: &Value) -> String {
    let counts = |map: &Value| -> String {
        let counted: Vec<String> = map
            .as_object()
            .map(|map| map.iter().map(|(what, n)| format!("{n} {what}")).collect())
            .unwrap_or_default();
        if counted.is_empty() {
            "none".to_owned()
        } else {
            counted.join(", ")
        }
    };
    let mut text = String::new();
    for (role, states) in status["processes"].as_object().into_iter().flatten() {
        text.push_str(&format!("{:<20}{}\n", format!("{role}s:"), counts(states)));
    }
    text.push_str(&format!(
        "{:<20}{}\n",
        "runs, last hour:",
        counts(&status["runs_last_hour"])
    ));
    text.push_str(&format!(
        "{:<20}{}\n",
        "missed, last 24 h:", status["missed_last_day"]
    ));
    let failures = status["recent_failures"].as_array().cloned().unwrap_or_default();
    if !failures.is_empty() {
        text.push_str("\nRecent failures\n");
        text.push_str(&output::table(
            &failures,
            &[
                ("run_id", "RUN"),
                ("job_name", "JOB"),
                ("state", "STATE"),
                ("finished_at", "FINISHED"),
                ("error", "ERROR"),
            ],
        ));
    }
    let next = status["next_fires"].as_array().cloned().unwrap_or_default();
    if !next.is_empty() {
        text.push_str("\nNext to fire\n");
        text.push_str(&output::table(
            &next,
            &[
                ("job_name", "JOB"),
                ("trigger_id", "TRIGGER"),
                ("next_fire_at", "AT"),
            ],
        ));
    }
    text
}

/// The definition files of `path` (a file, or every `.yaml`/`.yml` file of a directory)
/// by name, with their text.
fn definition_files(path: &std::path::Path) -> anyhow::Result<serde_json::Map<String, Value>> {
    let paths: Vec<std::path::PathBuf> = if path.is_dir() {
        let mut found: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        found.sort();
        found
    } else {
        vec![path.to_owned()]
    };
    let mut files = serde_json::Map::new();
    for file in paths {
        let text =
            std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        files.insert(file.display().to_string(), Value::String(text));
    }
    Ok(files)
}

/// A client of the saved (or `PROBACTR_URL`) manager, confined to `namespace` if given.
fn connect(namespace: Option<String>) -> Result<Client, ClientError> {
    let saved = credentials::load();
    let url = saved.url.ok_or(ClientError::NotLoggedIn)?;
    Ok(Client::new(&url, saved.token)?.in_namespace(namespace))
}

/// A page's objects (`items`).
pub fn items(page: &Value) -> Vec<Value> {
    page.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

async fn login(url: &str, user: Option<String>, password_stdin: bool) -> anyhow::Result<Exit> {
    let username = match user {
        Some(user) => user,
        None => prompt("User: ")?,
    };
    let password = if password_stdin || !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    } else {
        rpassword::prompt_password("Password: ")?
    };
    let client = Client::new(url, None)?;
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "a terminal".into());
    let issued = client
        .post(
            "/auth/token",
            &json!({"username": username, "password": password, "name": format!("probactr CLI on {host}")}),
        )
        .await
        .map_err(|err| match err {
            ClientError::Refused(refusal) if refusal.message.contains("(401") => {
                anyhow::anyhow!("wrong user name or password for {username} at {url}")
            }
            other => other.into(),
        })?;
    let token = issued["token"]
        .as_str()
        .context("the manager answered without a token")?;
    let file = credentials::save(url, token)?;
    eprintln!(
        "Logged in to {url} as {username}; the token is kept in {}",
        file.display()
    );
    Ok(Exit::Success)
}

async fn logout() -> anyhow::Result<Exit> {
    if let Ok(client) = connect(None) {
        // The token may be gone already; forgetting it locally is what matters.
        let _ = client.delete("/auth/token").await;
    }
    credentials::forget()?;
    eprintln!("Logged out");
    Ok(Exit::Success)
}

fn prompt(question: &str) -> anyhow::Result<String> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_owned())
}

/// The job named `name` (its id is what the API takes), in the client's namespace, or in
/// the one namespace the caller sees that has a job of that name.
pub async fn job_named(client: &Client, name: &str) -> anyhow::Result<Value> {
    let page = client.get(&format!("/jobs?q={}&limit=500", encode(name))).await?;
    let mut named: Vec<Value> = items(&page)
        .into_iter()
        .filter(|job| job["name"] == name)
        .collect();
    match named.len() {
        0 => bail!(
            "no job is named {name:?}{} (`probactr jobs list` shows them)",
            client
                .namespace()
                .map(|namespace| format!(" in namespace {namespace}"))
                .unwrap_or_default()
        ),
        1 => Ok(named.remove(0)),
        _ => {
            let namespaces: Vec<&str> = named.iter().filter_map(|job| job["namespace"].as_str()).collect();
            bail!(
                "jobs named {name:?} exist in namespaces {}: say which with -n NAMESPACE",
                namespaces.join(", ")
            )
        }
    }
}

/// Percent-encodes a query-string value.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

const JOB_COLUMNS: &[(&str, &str)] = &[
    ("name", "NAME"),
    ("namespace", "NAMESPACE"),
    ("kind", "KIND"),
    ("paused", "PAUSED"),
    ("stats.runs", "RUNS"),
    ("stats.failures", "FAILURES"),
    ("stats.last_state", "LAST"),
    ("stats.last_run_at", "LAST RUN"),
];

async fn executors_command(
    client: &Client,
    command: ExecutorsCommand,
    format: Format,
) -> anyhow::Result<Exit> {
    let Some((action, id)) = command.routing() else {
        let page = client.get("/executors").await?;
        let columns = [
            ("id", "ID"),
            ("host", "HOST"),
            ("pid", "PID"),
            ("state", "STATE"),
            ("cordoned", "CORDONED"),
            ("running", "RUNNING"),
            ("capacity", "CAPACITY"),
            ("last_heartbeat_at", "LAST HEARTBEAT"),
        ];
        output::list(format, &items(&page), &columns);
        return Ok(Exit::Success);
    };
    let executor = client
        .post(&format!("/executors/{}/{action}", encode(id)), &json!({}))
        .await?;
    if format == Format::Table {
        let done = match action {
            "cordon" => "cordoned: it claims no new runs",
            "uncordon" => "uncordoned: it claims runs again",
            _ => "asked to drain: it finishes its running jobs, then exits",
        };
        eprintln!("Executor {id} {done}");
    } else {
        output::one(format, &executor);
    }
    Ok(Exit::Success)
}

async fn jobs_command(client: &Client, command: JobsCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        JobsCommand::List { q } => {
            let query = q.map(|q| format!("&q={}", encode(&q))).unwrap_or_default();
            let page = client.get(&format!("/jobs?limit=500{query}")).await?;
            output::list(format, &items(&page), JOB_COLUMNS);
        }
        JobsCommand::Get { name } => output::one(format, &job_named(client, &name).await?),
        JobsCommand::Definition(command) => {
            let job = job_named(client, command.name()).await?;
            let path = format!("/jobs/{}", job["id"]);
            command
                .run(client, format, &path, &format!("Job {}", command.name()))
                .await?;
        }
        JobsCommand::Delete {
            name,
            erase_history,
            yes,
        } => {
            let job = job_named(client, &name).await?;
            if !yes && !confirm(&name, erase_history)? {
                bail!("not deleted: type the job's name to confirm, or pass --yes");
            }
            let path = if erase_history {
                format!("/jobs/{}?erase_history=true", job["id"])
            } else {
                format!("/jobs/{}", job["id"])
            };
            client.delete(&path).await?;
            if erase_history {
                eprintln!("Job {name} deleted with its history");
            } else {
                eprintln!("Job {name} deleted; its history is kept");
            }
        }
        JobsCommand::Run { name, params, wait } => {
            let given = run_params(&params)?;
            let job = job_named(client, &name).await?;
            let params = typed_params(given, &job["params_schema"]);
            let queued = client
                .post_once(&format!("/jobs/{}/run", job["id"]), &json!({"params": params}))
                .await?;
            let run_id = queued["run_id"]
                .as_i64()
                .context("the manager answered without a run id")?;
            eprintln!("Run #{run_id} of {name} queued");
            if wait {
                let run = watch::follow(client, run_id).await?;
                let summary = watch::summary(&run, &name);
                if format == Format::Table {
                    println!("{summary}");
                } else {
                    eprintln!("{summary}");
                    output::one(format, &run);
                }
                return Ok(if run["state"] == "succeeded" {
                    Exit::Success
                } else {
                    Exit::Failure
                });
            }
            output::one(format, &json!({"run_id": run_id}));
        }
    }
    Ok(Exit::Success)
}

fn confirm(name: &str, erase_history: bool) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    let what = if erase_history {
        "with its triggers and history"
    } else {
        "and its triggers (its history is kept)"
    };
    Ok(prompt(&format!("Delete job {name} {what}? Type its name: "))? == name)
}

/// `--param KEY=VALUE` options as the run's parameters (a JSON object of strings).
pub fn run_params(given: &[String]) -> anyhow::Result<serde_json::Map<String, Value>> {
    let mut params = serde_json::Map::new();
    for pair in given {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--param {pair:?}: expected KEY=VALUE");
        };
        if key.trim().is_empty() {
            bail!("--param {pair:?}: the key is empty");
        }
        params.insert(key.trim().to_owned(), Value::String(value.to_owned()));
    }
    Ok(params)
}

/// `--param` texts read as the job's declared types (`params_schema`): integers, numbers
/// and booleans become JSON numbers and booleans; a text that does not read as its type
/// is sent as it is, for the manager to say what is wrong with it.
fn typed_params(
    mut params: serde_json::Map<String, Value>,
    schema: &Value,
) -> serde_json::Map<String, Value> {
    for (name, value) in params.iter_mut() {
        let Some(text) = value.as_str() else { continue };
        let typed = match schema[name.as_str()]["type"].as_str() {
            Some("integer") => text.parse::<i64>().ok().map(Value::from),
            Some("number") => text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
            Some("boolean") => text.parse::<bool>().ok().map(Value::Bool),
            _ => None,
        };
        if let Some(typed) = typed {
            *value = typed;
        }
    }
    params
}

/// How often `runs logs --follow` asks for more output while nothing new came.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Prints a run's output: without `follow`, the whole of it (`full=true`: from the output
/// archive when the cluster keeps one); with `follow`, page after page while the run
/// runs, until it has ended and all its output is printed.
async fn print_output(client: &Client, run_id: i64, follow: bool) -> anyhow::Result<()> {
    if !follow {
        let page = client.get(&format!("/runs/{run_id}/output?full=true")).await?;
        return print_chunks(&page["chunks"].as_array().cloned().unwrap_or_default());
    }
    let mut offset = 0;
    let mut reported = (Value::Null, Value::Null);
    loop {
        let page = client
            .get(&format!("/runs/{run_id}/output?offset={offset}"))
            .await?;
        let chunks = page["chunks"].as_array().cloned().unwrap_or_default();
        print_chunks(&chunks)?;
        let progress = &page["progress"];
        let report = (progress["percent"].clone(), progress["message"].clone());
        if progress.is_object() && report != reported {
            eprintln!("{}", describe_progress(progress));
            reported = report;
        }
        let next = page["next_offset"].as_i64().unwrap_or(offset);
        let ended = page["ended"].as_bool().unwrap_or(true);
        if ended || (!follow && chunks.is_empty()) {
            return Ok(());
        }
        if next == offset {
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        offset = next;
    }
}

/// A progress line: `[progress 42% rows 420/1000 · ends about 2030-01-01T10:00:00Z]`.
fn describe_progress(progress: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(percent) = progress["percent"].as_f64() {
        parts.push(format!("{percent:.0}%"));
    }
    if let Some(message) = progress["message"].as_str().filter(|message| !message.is_empty()) {
        parts.push(message.to_owned());
    }
    let mut line = format!("[progress {}", parts.join(" "));
    if let Some(end) = progress["estimated_end"].as_str() {
        line.push_str(&format!(" · ends about {end}"));
    }
    line.push(']');
    line
}

/// Writes chunks as they come: stderr's to standard error, the rest to standard output.
fn print_chunks(chunks: &[Value]) -> anyhow::Result<()> {
    use std::io::Write;
    let (mut stdout, mut stderr) = (std::io::stdout().lock(), std::io::stderr().lock());
    for chunk in chunks {
        let text = chunk["text"].as_str().unwrap_or_default();
        match chunk["stream"].as_str() {
            Some("stderr") => stderr.write_all(text.as_bytes())?,
            _ => stdout.write_all(text.as_bytes())?,
        }
    }
    stdout.flush()?;
    stderr.flush()?;
    Ok(())
}

const RUN_COLUMNS: &[(&str, &str)] = &[
    ("id", "ID"),
    ("job_name", "JOB"),
    ("state", "STATE"),
    ("attempt", "ATTEMPT"),
    ("scheduled_at", "SCHEDULED"),
    ("finished_at", "FINISHED"),
    ("error", "ERROR"),
];

async fn runs_command(client: &Client, command: RunsCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        RunsCommand::List { job, state, limit } => {
            let mut query = format!("/runs?limit={limit}");
            if let Some(name) = job {
                query.push_str(&format!("&job_id={}", job_named(client, &name).await?["id"]));
            }
            if let Some(state) = state {
                query.push_str(&format!("&state={}", encode(&state)));
            }
            output::list(format, &items(&client.get(&query).await?), RUN_COLUMNS);
        }
        RunsCommand::Get { id } => output::one(format, &client.get(&format!("/runs/{id}")).await?),
        RunsCommand::Logs { id, follow } => {
            print_output(client, id, follow).await?;
            let run = client.get(&format!("/runs/{id}")).await?;
            if let Some(error) = run["error"].as_str() {
                eprintln!(
                    "run #{} {}: {error}",
                    run["id"],
                    run["state"].as_str().unwrap_or_default()
                );
            }
        }
        RunsCommand::Rerun { id } => {
            let queued = client.post(&format!("/runs/{id}/rerun"), &json!({})).await?;
            eprintln!("Run #{} queued: a re-run of #{id}", queued["run_id"]);
            println!("{}", queued["run_id"]);
        }
        RunsCommand::Cancel { id } => {
            let answer = client.post(&format!("/runs/{id}/cancel"), &json!({})).await?;
            eprintln!(
                "Run #{id}: {}",
                answer["state"].as_str().unwrap_or("cancel requested")
            );
        }
    }
    Ok(Exit::Success)
}

async fn triggers(client: &Client, job: Option<String>, format: Format) -> anyhow::Result<Exit> {
    let jobs = match job {
        Some(name) => vec![job_named(client, &name).await?],
        None => items(&client.get("/jobs?limit=500").await?),
    };
    let mut all = Vec::new();
    for job in jobs {
        let page = client.get(&format!("/jobs/{}/triggers", job["id"])).await?;
        for mut trigger in items(&page) {
            trigger["job_name"] = job["name"].clone();
            all.push(trigger);
        }
    }
    let columns = [
        ("id", "ID"),
        ("job_name", "JOB"),
        ("kind", "KIND"),
        ("cron", "CRON"),
        ("interval_secs", "EVERY (S)"),
        ("timezone", "ZONE"),
        ("paused", "PAUSED"),
        ("next_fire_at", "NEXT"),
    ];
    output::list(format, &all, &columns);
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn params_are_read_as_their_declared_types() {
        let given = run_params(&[
            "n=5".into(),
            "ratio=0.5".into(),
            "dry=true".into(),
            "day=5".into(),
            "bad=x".into(),
        ])
        .expect("good pairs");
        let schema = json!({"n": {"type": "integer"}, "ratio": {"type": "number"}, "dry": {"type": "boolean"},
                            "day": {"type": "string"}, "bad": {"type": "integer"}});
        assert_eq!(
            Value::Object(typed_params(given, &schema)),
            json!({"n": 5, "ratio": 0.5, "dry": true, "day": "5", "bad": "x"})
        );
    }
}
