//! `probactr-executor`: fires due triggers and runs jobs.

use probactr_common::{cli, config::Config, telemetry};

fn main() -> anyhow::Result<()> {
    cli::handle_args(
        "probactr-executor",
        "fires due triggers and runs jobs under locks",
    );
    let config = Config::from_env_or_exit("probactr-executor");
    check_http_ranges(&config);
    config.secret_keys_or_exit("probactr-executor");
    // Still one thread: the environment may be changed safely. Nothing a job can read
    // of this process holds a secret from here on.
    if let Err(err) = probactr_executor::hardening::protect_process() {
        eprintln!("probactr-executor: cannot make this process non-dumpable: {err}");
        std::process::exit(2);
    }
    probactr_executor::job::inherit_environment(&config.job_env_passthrough);
    if let Err((var, err)) = probactr_executor::job::account::configure(&config) {
        eprintln!("probactr-executor: configuration error: {var}: {err}");
        std::process::exit(2);
    }
    // Before any thread starts: the whole process moves into its own cgroup.
    let containment = probactr_executor::job::cgroup::configure(&config.cgroup).unwrap_or_else(|err| {
        eprintln!("probactr-executor: configuration error: PROBACTR_CGROUP: {err}");
        std::process::exit(2);
    });
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let telemetry = telemetry::init(&config, "probactr-executor");
            tracing::info!(config = %config.summary(), "probactr-executor starting");
            tracing::info!(%containment, "run containment");
            if let Err(err) = probactr_executor::workdir::init(config.work_dir.as_deref()) {
                anyhow::bail!("cannot make the working directory of shell runs: {err} (PROBACTR_WORK_DIR)");
            }
            let result = probactr_executor::run(config, probactr_common::shutdown::on_signal()).await;
            // The last attempts' spans are exported before the process ends.
            telemetry.shutdown();
            result
        })
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
