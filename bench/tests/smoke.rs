//! Runs every benchmark scenario at a tiny size so the tool cannot rot: the figures must
//! be well-formed, and duplicates and missed instants must be zero. Speed is not judged.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

#[test]
fn every_scenario_runs_at_a_tiny_size() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_probactr-bench"))
        .args(["all", "--tiny", "--trigger-jobs", "5", "--json"])
        .output()
        .expect("probactr-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "probactr-bench failed:\n{stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let scenario = |name: &str| -> &Value {
        let line = lines.iter().find(|line| line["scenario"] == name);
        &line.unwrap_or_else(|| panic!("no figures for {name}:\n{stderr}"))["figures"]
    };
    let number = |figures: &Value, key: &str| -> f64 {
        let mut value = figures;
        for part in key.split('.') {
            value = &value[part];
        }
        value
            .as_f64()
            .unwrap_or_else(|| panic!("{key} is not a number in {figures}"))
    };

    let throughput = scenario("throughput");
    assert_eq!(number(throughput, "runs"), number(throughput, "succeeded"));
    assert!(number(throughput, "runs_per_sec") > 0.0);
    assert!(number(throughput, "cpu_ms_per_run.machine") >= 0.0);

    assert!(number(throughput, "capacity") >= 1.0);
    assert!(number(throughput, "cpu_ms_per_run.machine") >= number(throughput, "cpu_ms_per_run.postgres"));

    let backlog = scenario("backlog");
    let drains = backlog["drains"].as_array().expect("one drain per size");
    assert_eq!(drains.len(), 2, "the tiny sizes");
    for drain in drains {
        assert!(number(drain, "runs_per_sec") > 0.0);
        for kind in [
            "machine", "probactr", "postgres", "redis", "bench", "other", "steal",
        ] {
            assert!(number(drain, &format!("cpu_ms_per_run.{kind}")) >= 0.0, "{kind}");
        }
    }
    assert!(number(backlog, "ratio_runs_per_sec") > 0.0);
    assert!(number(backlog, "ratio_cpu_per_run") >= 0.0);

    let storm = scenario("fire-storm");
    assert_eq!(
        number(storm, "jobs"),
        5.0,
        "the triggers spread over the jobs asked for"
    );
    assert_eq!(number(storm, "duplicates"), 0.0);
    assert_eq!(number(storm, "missed"), 0.0);
    assert!(number(storm, "fires") > 0.0);
    for key in [
        "lag_ms.p50",
        "lag_ms.p95",
        "lag_ms.p99",
        "lag_ms.max",
        "fires_per_sec",
        "cpu_ms_per_fire",
    ] {
        assert!(number(storm, key) >= 0.0, "{key}");
    }

    let scale = scenario("scale");
    assert_eq!(number(scale, "duplicates"), 0.0);
    assert_eq!(number(scale, "missed"), 0.0);
    assert!(number(scale, "large.claim_ms") >= 0.0);

    let contention = scenario("contention");
    assert_eq!(number(contention, "runs"), number(contention, "succeeded"));
    assert!(number(contention, "lock_attempts_per_acquisition") >= 1.0);
    assert!(number(contention, "redis_commands") > 0.0);

    let failover = scenario("failover");
    assert!(number(failover, "failover_seconds.median") > 0.0);

    let admin = scenario("admin");
    assert!(number(admin, "requests_per_sec") > 0.0);
    assert_eq!(number(admin, "errors"), 0.0);

    let memory = scenario("memory");
    assert!(number(memory, "rss_mib_idle") > 0.0);
    assert!(number(memory, "rss_mib_busy") >= number(memory, "rss_mib_idle") * 0.5);
}
