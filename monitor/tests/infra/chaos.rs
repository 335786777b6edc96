//! The long randomized fault run behind `scripts/chaos SECONDS`.
//!
//! A private PostgreSQL and Redis, three executors that each reach both through proxies
//! of their own (so any one can be cut off alone), two monitors, and a workload of
//! interval triggers and non-parallel jobs that record their own effects. Until the
//! duration has passed, one fault after another, at random: `kill -9` an executor (and
//! restart it), freeze one with its jobs (SIGSTOP) and resume it, SIGTERM one (drain) and
//! restart it, restart Redis empty, restart PostgreSQL (immediate shutdown), cut one
//! executor off from Redis or from PostgreSQL, `kill -9` a monitor. Then everything is
//! healed, the cluster settles, and the invariant check runs over the whole history.
//!
//! `PROBACTR_CHAOS_SECONDS` sets the duration (default 60), `PROBACTR_CHAOS_SEED` the
//! random seed (printed, so a run can be replayed as far as timing allows).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use probactr_common::model::{Misfire, Overlap};
use sqlx::postgres::PgPoolOptions;

use super::cluster::Cluster;
use super::proxy::Proxy;
use super::services::{PrivatePostgres, PrivateRedis};
use super::workload::{JobPlan, Report, Workload};
use crate::support::{fast_env, unique_prefix};

/// xorshift64*: small, seedable, good enough to pick faults.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A duration in [lo, hi) milliseconds.
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillExecutor,
    PauseExecutor,
    DrainExecutor,
    RestartRedis,
    RestartPostgres,
    CutFromRedis,
    CutFromPostgres,
    KillMonitor,
}

const FAULTS: [Fault; 8] = [
    Fault::KillExecutor,
    Fault::PauseExecutor,
    Fault::DrainExecutor,
    Fault::RestartRedis,
    Fault::RestartPostgres,
    Fault::CutFromRedis,
    Fault::CutFromPostgres,
    Fault::KillMonitor,
];

struct Links {
    postgres: Proxy,
    redis: Proxy,
}

pub async fn run() {
    let seconds: u64 = std::env::var("PROBACTR_CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("PROBACTR_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(uuid::Uuid::new_v4().as_u128() as u32) | 1);
    eprintln!("chaos: {seconds} s, seed {seed} (PROBACTR_CHAOS_SEED={seed} to replay)");
    let mut rng = Rng(seed.max(1));

    let postgres = PrivatePostgres::start().await;
    let url = postgres.create_database("chaos").await;
    let mut redis = PrivateRedis::start().await;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(3))
        .connect(&url)
        .await
        .expect("connect to the chaos database");
    let mut cluster = Cluster::new("chaos");
    let prefix = unique_prefix("chaos");
    let mut env = fast_env(&url, &prefix);
    env.insert("REDIS_URL".to_owned(), redis.url());
    env.insert(
        "RUST_LOG".to_owned(),
        "warn,probactr_executor=info,probactr_monitor=info".to_owned(),
    );
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 400),
            JobPlan::every("tick-c", 2, 300).overlap(Overlap::Skip),
            JobPlan::every("tick-d", 3, 1000),
            JobPlan::every("strict", 1, 200).misfire(Misfire::Skip, 2),
            JobPlan::every("slow", 4, 3000).overlap(Overlap::Skip).attempts(3),
            JobPlan::every("long-a", 10, 6000)
                .overlap(Overlap::Skip)
                .attempts(3),
            JobPlan::every("long-b", 12, 8000)
                .overlap(Overlap::Skip)
                .attempts(3),
        ],
    )
    .await;

    let mut links = Vec::new();
    for i in 0..3 {
        let link = Links {
            postgres: Proxy::start(postgres.addr()).await,
            redis: Proxy::start(redis.addr()).await,
        };
        let mut executor_env = env.clone();
        executor_env.insert(
            "DATABASE_URL".to_owned(),
            url.replace(
                &format!(":{}/", postgres.port()),
                &format!(":{}/", link.postgres.port()),
            ),
        );
        executor_env.insert(
            "REDIS_URL".to_owned(),
            format!("redis://127.0.0.1:{}", link.redis.port()),
        );
        cluster.add_executor(&format!("executor-{i}"), &executor_env);
        links.push(link);
    }
    for i in 0..2 {
        cluster.add_monitor(&format!("monitor-{i}"), &env);
    }

    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut counts: BTreeMap<Fault, usize> = BTreeMap::new();
    let mut journal = String::new();
    while Instant::now() < deadline {
        tokio::time::sleep(rng.millis(2000, 6000)).await;
        if Instant::now() >= deadline {
            break;
        }
        let fault = FAULTS[rng.below(FAULTS.len() as u64) as usize];
        let length = rng.millis(1000, 6000);
        let executor = rng.below(3) as usize;
        let at = started.elapsed().as_secs_f64();
        let _ = writeln!(journal, "{at:7.1}s  {fault:?} (executor-{executor}, {length:?})");
        eprintln!("chaos {at:7.1}s: {fault:?} executor-{executor} for {length:?}");
        *counts.entry(fault).or_default() += 1;
        match fault {
            Fault::KillExecutor => {
                cluster.executors[executor].kill9().await;
                tokio::time::sleep(length).await;
                cluster.executors[executor].start();
            }
            Fault::PauseExecutor => {
                cluster.executors[executor].pause();
                tokio::time::sleep(length).await;
                cluster.executors[executor].resume();
            }
            Fault::DrainExecutor => {
                cluster.executors[executor]
                    .terminate(Duration::from_secs(30))
                    .await;
                tokio::time::sleep(length.min(Duration::from_secs(2))).await;
                cluster.executors[executor].start();
            }
            Fault::RestartRedis => {
                redis.kill().await;
                tokio::time::sleep(length.min(Duration::from_secs(4))).await;
                redis.start_again().await;
            }
            Fault::RestartPostgres => {
                postgres.crash().await;
                tokio::time::sleep(length.min(Duration::from_secs(4))).await;
                postgres.start_again().await;
            }
            Fault::CutFromRedis => {
                links[executor].redis.stall();
                tokio::time::sleep(length).await;
                links[executor].redis.heal();
            }
            Fault::CutFromPostgres => {
                links[executor].postgres.stall();
                tokio::time::sleep(length).await;
                links[executor].postgres.heal();
            }
            Fault::KillMonitor => {
                let monitor = executor % cluster.monitors.len();
                cluster.monitors[monitor].kill9().await;
                tokio::time::sleep(length.min(Duration::from_secs(3))).await;
                cluster.monitors[monitor].start();
            }
        }
    }
    eprintln!(
        "chaos: faults over after {:?}; letting the cluster settle",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cutoff = workload.wind_down(&pool, Duration::from_secs(90)).await;
    let report = workload.check(&pool, cutoff).await;
    println!("{}", summary(seconds, seed, &counts, &journal, &report));
    report.assert_invariants();
}

fn summary(
    seconds: u64,
    seed: u64,
    counts: &BTreeMap<Fault, usize>,
    journal: &str,
    report: &Report,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n== chaos: {seconds} s, seed {seed}");
    let _ = writeln!(out, "faults injected:");
    for (fault, n) in counts {
        let _ = writeln!(out, "  {:<18} {n}", format!("{fault:?}"));
    }
    let _ = writeln!(out, "journal:\n{journal}");
    let _ = writeln!(out, "{}", report.table());
    out
}
