//! `probactr-bench`: measures probactr on a real cluster — real `probactr-executor`
//! (and, for some scenarios, monitor and manager) processes on the local PostgreSQL and
//! Redis, with a fresh database and key prefix per run.
//!
//! Layout: [`options`] reads the command line, [`cluster`] creates the database and
//! starts the processes, [`measure`] reads CPU, memory and percentiles, [`scenarios`]
//! holds one function per scenario, each returning its figures as a JSON object.

mod beside;
mod cluster;
mod measure;
mod options;
mod scenarios;

use options::Options;

#[tokio::main]
async fn main() {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("probactr-bench: {message}\n\n{}", options::USAGE);
            std::process::exit(2);
        }
    };
    let mut failed = false;
    for scenario in options.scenarios() {
        match scenarios::run(scenario, &options).await {
            Ok(figures) => report(scenario, &figures, options.json),
            Err(err) => {
                failed = true;
                eprintln!("probactr-bench: scenario {scenario} failed: {err:#}");
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

/// Prints one scenario's figures: a JSON line with `--json`, else a readable table.
fn report(scenario: &str, figures: &serde_json::Value, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::json!({ "scenario": scenario, "figures": figures })
        );
        return;
    }
    println!("\n{scenario}");
    println!("{}", "-".repeat(scenario.len()));
    for (key, value) in flatten("", figures) {
        println!("  {key:<36} {value}");
    }
}

fn flatten(prefix: &str, value: &serde_json::Value) -> Vec<(String, String)> {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .flat_map(|(key, inner)| {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&name, inner)
            })
            .collect(),
        serde_json::Value::Number(n) => {
            let text = match n.as_f64() {
                Some(f) if n.is_f64() => format!("{f:.2}"),
                _ => n.to_string(),
            };
            vec![(prefix.to_owned(), text)]
        }
        other => vec![(prefix.to_owned(), other.to_string())],
    }
}
