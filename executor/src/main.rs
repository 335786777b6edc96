//! `probactr-executor`: fires due triggers and runs jobs.

use probactr_common::{cli, config::Config, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::handle_args(
        "probactr-executor",
        "fires due triggers and runs jobs under locks",
    );
    let config = Config::from_env_or_exit("probactr-executor");
    check_http_ranges(&config);
    probactr_executor::job::inherit_environment(&config.job_env_passthrough);
    config.secret_keys_or_exit("probactr-executor");
    telemetry::init(&config);
    tracing::info!(config = %config.summary(), "probactr-executor starting");
    probactr_executor::run(config, probactr_common::shutdown::on_signal()).await
}

/// The CIDR lists are parsed by the HTTP job runner; a bad entry is a configuration
/// error like any other (exit code 2, the variable named).
fn check_http_ranges(config: &Config) {
    let lists = [
        ("PROBACTR_HTTP_ALLOW", &config.http_allow),
        ("PROBACTR_HTTP_DENY", &config.http_deny),
    ];
    for (var, list) in lists {
        let checked = if var == "PROBACTR_HTTP_ALLOW" {
            probactr_executor::job::HttpPolicy::from_lists(list, &[])
        } else {
            probactr_executor::job::HttpPolicy::from_lists(&[], list)
        };
        if let Err(err) = checked {
            eprintln!("probactr-executor: configuration error: invalid {var}: {err}; expected CIDR ranges like 10.0.0.0/8,fd00::/8");
            std::process::exit(2);
        }
    }
}
