//! `probactr`: the command-line client of probactr's REST API — log in, list and operate
//! jobs, runs, triggers, workflows, secrets, alerts and executors, read the ledger and
//! the forecast, and follow a run to its end. It talks only to the API, with the token
//! `probactr login` saved (or `PROBACTR_URL` and `PROBACTR_TOKEN`).

mod alerts;
mod client;
mod commands;
mod credentials;
mod instants;
mod output;
mod secrets;
mod teams;
mod times;
mod versions;
mod watch;
mod workflows;

use clap::{CommandFactory, Parser, Subcommand};

use output::Format;

/// The command-line client of probactr.
#[derive(Debug, Parser)]
#[command(
    name = "probactr",
    version,
    about = "Operate a probactr cluster through its REST API"
)]
pub struct Cli {
    /// Output: an aligned table, or JSON or YAML for scripts.
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value = "table",
        global = true
    )]
    pub format: Format,
    /// Show and read times in UTC (default: the local zone; tables name it).
    #[arg(long, global = true)]
    pub utc: bool,
    /// Only this namespace: lists show its objects, names are looked up in it, and
    /// definitions are exported from and applied to it.
    #[arg(short = 'n', long = "namespace", env = "PROBACTR_NAMESPACE", global = true)]
    pub namespace: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Log in to a manager and keep the token (mode 0600, in the user's config directory).
    Login {
        /// The manager's address, e.g. http://127.0.0.1:8080.
        url: String,
        /// User name (asked for when absent).
        #[arg(long)]
        user: Option<String>,
        /// Read the password from standard input instead of asking for it.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Revoke the saved token and forget it.
    Logout,
    /// Jobs.
    #[command(subcommand)]
    Jobs(commands::JobsCommand),
    /// Runs.
    #[command(subcommand)]
    Runs(commands::RunsCommand),
    /// Triggers.
    #[command(subcommand)]
    Triggers(commands::TriggersCommand),
    /// Executors.
    #[command(subcommand)]
    Executors(commands::ExecutorsCommand),
    /// Workflows: list, show, run, pause, resume; cancel a workflow run.
    #[command(subcommand)]
    Workflows(workflows::WorkflowsCommand),
    /// Secrets, by name (values are never shown): list, set, delete.
    #[command(subcommand)]
    Secrets(secrets::SecretsCommand),
    /// Alert rules and channels: list, show, delete.
    #[command(subcommand)]
    Alerts(alerts::AlertsCommand),
    /// What became of each instant of the triggers (ran, skipped, missed…), default the
    /// last 24 hours and the next one.
    Ledger(instants::Span),
    /// What will fire when (default the next 24 hours), instants a DST change moves, a
    /// calendar or maintenance window skips, or jitter delays marked.
    Forecast(instants::Span),
    /// Pause the whole cluster: every job's instants are recorded skipped until resumed.
    Pause {
        /// Every job (required: the cluster pause covers them all).
        #[arg(long, required = true)]
        all: bool,
    },
    /// Resume the cluster after `pause --all`.
    Resume {
        /// Every job (required).
        #[arg(long, required = true)]
        all: bool,
    },
    /// Namespaces: teams' shares of the cluster, with their quotas.
    #[command(subcommand)]
    Namespaces(teams::NamespacesCommand),
    /// Users and their roles per namespace.
    #[command(subcommand)]
    Users(teams::UsersCommand),
    /// Your API tokens, optionally scoped to namespaces and a role.
    #[command(subcommand)]
    Tokens(teams::TokensCommand),
    /// The cluster at a glance.
    Status,
    /// Print job definitions (with their triggers) as YAML, to keep in git.
    Export {
        /// Only this job.
        #[arg(long)]
        job: Option<String>,
    },
    /// Make the server match definition files: create what is missing, update what differs.
    Apply {
        /// A YAML file, or a directory of them.
        #[arg(short = 'f', long = "file")]
        file: std::path::PathBuf,
        /// Only say what would change.
        #[arg(long)]
        dry_run: bool,
        /// Also delete the jobs apply manages that the files no longer name (never jobs
        /// made in the admin, unless a file adopted them).
        #[arg(long)]
        prune: bool,
    },
    /// Print shell completions.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    times::choose(cli.utc);
    let result = match cli.command {
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "probactr", &mut std::io::stdout());
            Ok(commands::Exit::Success)
        }
        command => commands::run(command, cli.format, cli.namespace).await,
    };
    match result {
        Ok(commands::Exit::Success) => {}
        Ok(commands::Exit::Failure) => std::process::exit(1),
        Err(err) => {
            eprintln!("probactr: {err:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
