//! One function per scenario; each builds its cluster, measures, tears down, and returns
//! its figures (the JSON keys the benchmark documents).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::beside;
use crate::cluster::Cluster;
use crate::measure::{percentiles, redis_commands, rss_mib, CpuClock, CpuSplit};
use crate::options::Options;

/// Runs one scenario on a fresh cluster.
pub async fn run(scenario: &str, options: &Options) -> anyhow::Result<Value> {
    if scenario == "backlog" {
        // A fresh cluster per size.
        return backlog(options).await;
    }
    let mut cluster = Cluster::create().await?;
    if options.beside_features {
        beside::configure(&cluster.pool).await?;
    }
    let figures = match scenario {
        "throughput" => throughput(&mut cluster, options).await,
        "fire-storm" => fire_storm(&mut cluster, options).await,
        "scale" => scale(&mut cluster, options).await,
        "contention" => contention(&mut cluster, options).await,
        "failover" => failover(&mut cluster, options).await,
        "admin" => admin(&mut cluster, options).await,
        "memory" => memory(&mut cluster, options).await,
        other => Err(anyhow::anyhow!("unknown scenario {other}")),
    };
    cluster.teardown().await?;
    figures
}

fn progress(options: &Options, message: &str) {
    if !options.json {
        eprintln!("  … {message}");
    }
}

async fn insert_job(
    pool: &PgPool,
    name: &str,
    kind: &str,
    spec: Value,
    parallel: bool,
    overlap: &str,
) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO jobs (name, kind, spec, parallel, overlap, retry_max_attempts, retry_backoff_secs)
         VALUES ($1, $2, $3, $4, $5, 2, 0) RETURNING id",
    )
    .bind(name)
    .bind(kind)
    .bind(spec)
    .bind(parallel)
    .bind(overlap)
    .fetch_one(pool)
    .await?)
}

/// How many runs of the measured jobs are queued, claimed or running (a scan of every live
/// run: for progress reports only).
async fn unfinished(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM runs WHERE state IN ('queued', 'claimed', 'running')
               AND job_id NOT IN (SELECT id FROM jobs WHERE starts_with(name, $1))",
    )
    .bind(beside::PREFIX)
    .fetch_one(pool)
    .await?)
}

/// Whether any run of the measured jobs is queued, claimed or running. The poll asked every
/// 20 ms while the cluster drains, so it must cost the cluster next to nothing, like the
/// peer's (a few counters in Redis): the newest queued run, from the end of the claim
/// order's index where the claims have not yet left dead entries, and any active run,
/// from the index of active runs. Counting the live runs instead scanned all of them
/// each time: 4 ms of PostgreSQL a poll with 20,000 queued, a whole core at 200,000.
async fn any_unfinished(pool: &PgPool) -> anyhow::Result<bool> {
    Ok(sqlx::query_scalar(
        "SELECT (SELECT id FROM runs_live
                  WHERE state = 'queued' AND job_id NOT IN (SELECT id FROM jobs WHERE starts_with(name, $1))
                  ORDER BY claim_order DESC, id DESC LIMIT 1) IS NOT NULL
             OR EXISTS (SELECT 1 FROM runs_live
                         WHERE state IN ('claimed', 'running')
                           AND job_id NOT IN (SELECT id FROM jobs WHERE starts_with(name, $1)))",
    )
    .bind(beside::PREFIX)
    .fetch_one(pool)
    .await?)
}

/// Waits until no run is queued, claimed or running; reports progress every 5 s.
async fn wait_drained(pool: &PgPool, options: &Options, within: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last_report = Instant::now();
    while any_unfinished(pool).await? {
        if started.elapsed() > within {
            bail!(
                "{} runs still unfinished after {within:?}",
                unfinished(pool).await?
            );
        }
        if !options.json && last_report.elapsed() > Duration::from_secs(5) {
            progress(options, &format!("{} runs left", unfinished(pool).await?));
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn db_now(pool: &PgPool) -> anyhow::Result<DateTime<Utc>> {
    Ok(sqlx::query_scalar("SELECT now()").fetch_one(pool).await?)
}

fn round(value: f64, places: i32) -> f64 {
    let factor = 10f64.powi(places);
    (value * factor).round() / factor
}

/// Starts E executors and one monitor (a cluster as deployed: the monitor keeps the
/// live runs vacuumed and analyzed).
async fn start_workers(cluster: &mut Cluster, options: &Options) -> anyhow::Result<()> {
    let env = cluster.env(options.capacity);
    cluster.start_executors(options.executors, &env).await?;
    cluster.spawn("probactr-monitor", "monitor", &env)?;
    cluster.wait_registered("monitor", 1).await
}

/// N run-now noop runs drained by E executors.
async fn throughput(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    let runs = options.jobs.unwrap_or(20_000) as i64;
    start_workers(cluster, options).await?;
    let cpu = CpuSplit::now(&cluster.pids());
    let started = Instant::now();
    if options.parallel {
        let job = insert_job(&cluster.pool, "throughput", "noop", json!({}), true, "queue").await?;
        sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2)")
            .bind(job)
            .bind(runs)
            .execute(&cluster.pool)
            .await?;
    } else {
        let mut tx = cluster.pool.begin().await?;
        sqlx::query(
            "INSERT INTO jobs (name, kind, parallel, overlap) SELECT 'mutex-' || g, 'noop', false, 'queue'
             FROM generate_series(1, $1) AS g",
        )
        .bind(runs)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT id, now() FROM jobs WHERE starts_with(name, 'mutex-')")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    // The peer's drain (bench/peers) starts its clock with the jobs already queued: the
    // drain alone, from the insert's commit, is the figure to set beside it.
    let queue_seconds = started.elapsed().as_secs_f64();
    progress(options, &format!("{runs} runs queued"));
    wait_drained(&cluster.pool, options, Duration::from_secs(600)).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_ms_per_run = cpu.per_unit_since(runs as f64);
    let drain_seconds = (seconds - queue_seconds).max(f64::EPSILON);
    let succeeded: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'succeeded'")
        .fetch_one(&cluster.pool)
        .await?;
    Ok(json!({
        "variant": if options.parallel { "parallel" } else { "non-parallel" },
        "executors": options.executors,
        "capacity": cluster.executor_capacity().await?,
        "runs": runs,
        "succeeded": succeeded,
        "seconds": round(seconds, 2),
        "runs_per_sec": round(runs as f64 / seconds, 0),
        "queue_seconds": round(queue_seconds, 2),
        "drain_runs_per_sec": round(runs as f64 / drain_seconds, 0),
        "cpu_ms_per_run": cpu_ms_per_run,
    }))
}

/// The same noop drain with 2,000, 20,000 and 200,000 runs (`--sizes`) queued before
/// it starts, each on a fresh cluster: the cost of a run must not grow with the backlog.
async fn backlog(options: &Options) -> anyhow::Result<Value> {
    let mut drains = Vec::new();
    for &size in &options.sizes {
        let mut cluster = Cluster::create().await?;
        if options.beside_features {
            beside::configure(&cluster.pool).await?;
        }
        let drained = drain_backlog(&mut cluster, options, size as i64).await;
        cluster.teardown().await?;
        drains.push(drained?);
    }
    let figure = |drain: &Value, key: &str| drain[key].as_f64().unwrap_or(f64::NAN);
    let cpu = |drain: &Value| drain["cpu_ms_per_run"]["machine"].as_f64().unwrap_or(f64::NAN);
    let (Some(smallest), Some(largest)) = (drains.first(), drains.last()) else {
        bail!("--sizes is empty");
    };
    Ok(json!({
        "ratio_runs_per_sec": round(figure(smallest, "runs_per_sec") / figure(largest, "runs_per_sec"), 2),
        "ratio_cpu_per_run": round(cpu(largest) / cpu(smallest), 2),
        "drains": drains,
    }))
}

/// Queues `size` runs claimable a moment later, lets executors and a monitor settle,
/// then times the drain from the instant the runs become claimable (the executors are
/// woken then, as a queued run wakes them), so that neither the insert nor the start of
/// the processes is counted.
async fn drain_backlog(cluster: &mut Cluster, options: &Options, size: i64) -> anyhow::Result<Value> {
    let job = insert_job(&cluster.pool, "backlog", "noop", json!({}), true, "queue").await?;
    start_workers(cluster, options).await?;
    let opens_at = db_now(&cluster.pool).await? + chrono::TimeDelta::seconds(2);
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, available_at) SELECT $1, $2, $2 FROM generate_series(1, $3)",
    )
    .bind(job)
    .bind(opens_at)
    .bind(size)
    .execute(&cluster.pool)
    .await?;
    progress(options, &format!("{size} runs queued"));
    let wait = (opens_at - db_now(&cluster.pool).await?)
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(wait).await;
    let cpu = CpuSplit::now(&cluster.pids());
    let started = Instant::now();
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(probactr_common::store::RUNS_CHANNEL)
        .execute(&cluster.pool)
        .await?;
    wait_drained(&cluster.pool, options, Duration::from_secs(900)).await?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "runs": size,
        "capacity": cluster.executor_capacity().await?,
        "executors": options.executors,
        "seconds": round(seconds, 2),
        "runs_per_sec": round(size as f64 / seconds, 0),
        "cpu_ms_per_run": cpu.per_unit_since(size as f64),
    }))
}

/// The figures of interval triggers firing every second for a while.
struct FireFigures {
    expected: i64,
    fired: i64,
    duplicates: i64,
    missed: i64,
    seconds: f64,
    lag_ms: Value,
    cpu_ms: f64,
    cpu_split: Value,
}

/// Inserts `count` interval triggers (every second, phases spread over the second or
/// aligned) of `jobs` parallel noop jobs (trigger `g` belongs to job `g mod jobs`), lets
/// them fire for `duration`, pauses them, and checks every instant in the window: run
/// once, not twice, none missing.
async fn measure_firing(
    cluster: &Cluster,
    options: &Options,
    count: u64,
    jobs: u64,
    duration: u64,
) -> anyhow::Result<FireFigures> {
    let name = format!("storm-{count}-{}", uuid::Uuid::new_v4().simple());
    let mut job_ids = Vec::new();
    for index in 0..jobs {
        let job_name = if jobs > 1 {
            format!("{name}-{index}")
        } else {
            name.clone()
        };
        job_ids.push(insert_job(&cluster.pool, &job_name, "noop", json!({}), true, "queue").await?);
    }
    let now = db_now(&cluster.pool).await?;
    let base = DateTime::<Utc>::from_timestamp(now.timestamp() + 2, 0).context("time")?;
    sqlx::query(
        "INSERT INTO triggers (job_id, kind, interval_secs, start_at, next_fire_at, created_at, misfire_threshold_secs)
         SELECT ($1::bigint[])[1 + g % cardinality($1::bigint[])], 'interval', 1, at, at, at, 3600 FROM (
             SELECT g, $2::timestamptz + make_interval(secs => CASE WHEN $4 THEN 0 ELSE (g::float8 / $3) END) AS at
             FROM generate_series(0, $3 - 1) AS g) AS phases",
    )
    .bind(&job_ids)
    .bind(base)
    .bind(count as i64)
    .bind(options.aligned)
    .execute(&cluster.pool)
    .await?;
    let end = base + chrono::TimeDelta::seconds(duration as i64);
    let until_base = (base - db_now(&cluster.pool).await?).to_std().unwrap_or_default();
    tokio::time::sleep(until_base).await;
    let cpu = CpuClock::now();
    let split = CpuSplit::now(&cluster.pids());
    progress(options, &format!("{count} triggers firing for {duration} s"));
    // The CPU is read over [base, end) exactly, the instants counted (as the peer's bench
    // does): the triggers go on firing until paused below, so every second of the window,
    // whichever it is, holds a second's firing, starting and recording, and a longer
    // window would divide more than `duration` seconds of work by `duration` seconds of
    // fires.
    let until_end = (end - db_now(&cluster.pool).await?).to_std().unwrap_or_default();
    tokio::time::sleep(until_end).await;
    let (cpu_ms, _) = cpu.since();
    let expected_fires = (count * duration) as f64;
    let cpu_split = split.per_unit_since(expected_fires);
    tokio::time::sleep(Duration::from_millis(500)).await;
    sqlx::query("UPDATE triggers SET paused = true WHERE job_id = ANY ($1)")
        .bind(&job_ids)
        .execute(&cluster.pool)
        .await?;
    wait_drained(&cluster.pool, options, Duration::from_secs(60)).await?;

    // The window [base, end): every trigger's instants in it.
    let (fired, distinct): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT (trigger_id, scheduled_at)) FROM runs
         WHERE job_id = ANY ($1) AND scheduled_at >= $2 AND scheduled_at < $3",
    )
    .bind(&job_ids)
    .bind(base)
    .bind(end)
    .fetch_one(&cluster.pool)
    .await?;
    let expected: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(ceil(EXTRACT(EPOCH FROM ($2 - start_at)))), 0)::bigint FROM triggers WHERE job_id = ANY ($1)",
    )
    .bind(&job_ids)
    .bind(end)
    .fetch_one(&cluster.pool)
    .await?;
    let mut lags: Vec<f64> = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM (started_at - scheduled_at))::float8 * 1000 FROM runs
         WHERE job_id = ANY ($1) AND scheduled_at >= $2 AND scheduled_at < $3 AND started_at IS NOT NULL",
    )
    .bind(&job_ids)
    .bind(base)
    .bind(end)
    .fetch_all(&cluster.pool)
    .await?;
    Ok(FireFigures {
        expected,
        fired,
        duplicates: fired - distinct,
        missed: (expected - distinct).max(0),
        seconds: duration as f64,
        lag_ms: percentiles(&mut lags),
        cpu_ms,
        cpu_split,
    })
}

/// T interval triggers every second, spread or aligned.
async fn fire_storm(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    start_workers(cluster, options).await?;
    let jobs = options.trigger_jobs.min(options.triggers.max(1));
    let figures = measure_firing(cluster, options, options.triggers, jobs, options.duration).await?;
    Ok(json!({
        "triggers": options.triggers,
        "jobs": jobs,
        "phase": if options.aligned { "aligned" } else { "spread" },
        "executors": options.executors,
        "capacity": cluster.executor_capacity().await?,
        "cpu_ms_per_fire_by_process": figures.cpu_split,
        "expected": figures.expected,
        "fires": figures.fired,
        "fires_per_sec": round(figures.fired as f64 / figures.seconds, 0),
        "lag_ms": figures.lag_ms,
        "duplicates": figures.duplicates,
        "missed": figures.missed,
        "cpu_ms_per_fire": round(figures.cpu_ms / figures.fired.max(1) as f64, 4),
    }))
}

/// Idle triggers that are never due during the measurement (due in a day).
async fn store_idle_triggers(pool: &PgPool, count: u64) -> anyhow::Result<()> {
    let name = format!("idle-{count}-{}", uuid::Uuid::new_v4().simple());
    let job = insert_job(pool, &name, "noop", json!({}), true, "queue").await?;
    sqlx::query(
        "INSERT INTO triggers (job_id, kind, interval_secs, next_fire_at)
         SELECT $1, 'interval', 86400, now() + interval '1 day' + make_interval(secs => g)
         FROM generate_series(1, $2) AS g",
    )
    .bind(job)
    .bind(count as i64)
    .execute(pool)
    .await?;
    sqlx::query("ANALYZE triggers").execute(pool).await?;
    Ok(())
}

/// Milliseconds the due-trigger claim takes (EXPLAIN ANALYZE, rolled back).
async fn claim_query_ms(pool: &PgPool) -> anyhow::Result<f64> {
    let mut tx = pool.begin().await?;
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (ANALYZE, FORMAT TEXT)
         SELECT triggers.* FROM triggers JOIN jobs ON jobs.id = triggers.job_id
         WHERE NOT triggers.paused AND triggers.next_fire_at <= now() AND NOT jobs.paused
         ORDER BY triggers.next_fire_at LIMIT 500 FOR UPDATE OF triggers SKIP LOCKED",
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.rollback().await?;
    Ok(plan
        .iter()
        .find_map(|line| line.trim().strip_prefix("Execution Time: "))
        .and_then(|rest| rest.trim_end_matches(" ms").parse().ok())
        .unwrap_or(f64::NAN))
}

/// 1,000 due triggers a second among 10,000, then among `--stored` (1,000,000).
async fn scale(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    let active = options.triggers.min(options.stored / 10).max(1);
    let small = active * 10;
    let env = cluster.env(options.capacity);
    cluster.start_executors(options.executors, &env).await?;
    store_idle_triggers(&cluster.pool, small - active).await?;
    let at_small = measure_firing(cluster, options, active, 1, options.duration).await?;
    let claim_small = claim_query_ms(&cluster.pool).await?;
    progress(
        options,
        &format!("storing {} idle triggers", options.stored - small),
    );
    store_idle_triggers(&cluster.pool, options.stored - small).await?;
    let at_large = measure_firing(cluster, options, active, 1, options.duration).await?;
    let claim_large = claim_query_ms(&cluster.pool).await?;
    let p99 = |figures: &FireFigures| figures.lag_ms["p99"].as_f64().unwrap_or(f64::NAN);
    Ok(json!({
        "due_per_sec": active,
        "small": { "stored": small, "lag_ms": at_small.lag_ms, "claim_ms": claim_small,
                   "duplicates": at_small.duplicates, "missed": at_small.missed },
        "large": { "stored": options.stored, "lag_ms": at_large.lag_ms, "claim_ms": claim_large,
                   "duplicates": at_large.duplicates, "missed": at_large.missed },
        "lag_p99_ratio": round(p99(&at_large) / p99(&at_small).max(0.1), 2),
        "duplicates": at_small.duplicates + at_large.duplicates,
        "missed": at_small.missed + at_large.missed,
    }))
}

/// Scrapes the executors' metrics and sums one counter.
async fn scrape_sum(ports: &[u16], metric: &str) -> f64 {
    let mut sum = 0.0;
    for port in ports {
        let Ok(reply) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await else {
            continue;
        };
        let Ok(body) = reply.text().await else { continue };
        sum += body
            .lines()
            .filter(|line| line.starts_with(metric) && !line.starts_with('#'))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    sum
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// 1,000 runs of one non-parallel job due at the same instant.
async fn contention(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    let runs = options.jobs.unwrap_or(1000).min(100_000) as i64;
    let mut ports = Vec::new();
    for i in 0..options.executors {
        let mut env = cluster.env(Some(options.capacity.unwrap_or(64).min(64)));
        let port = free_port()?;
        ports.push(port);
        env.insert("PROBACTR_METRICS_LISTEN".into(), format!("127.0.0.1:{port}"));
        if let Some(retry) = &options.retry {
            env.insert("PROBACTR_LOCK_RETRY".into(), retry.clone());
        }
        cluster.spawn("probactr-executor", &format!("executor-{i}"), &env)?;
    }
    cluster
        .wait_registered("executor", options.executors as i64)
        .await?;
    let job = insert_job(&cluster.pool, "contended", "noop", json!({}), false, "queue").await?;
    let commands_before = redis_commands(&cluster.redis_url).await?;
    let cpu = CpuClock::now();
    let started = Instant::now();
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2)")
        .bind(job)
        .bind(runs)
        .execute(&cluster.pool)
        .await?;
    wait_drained(&cluster.pool, options, Duration::from_secs(900)).await?;
    let seconds = started.elapsed().as_secs_f64();
    let (cpu_ms, _) = cpu.since();
    let commands = redis_commands(&cluster.redis_url)
        .await?
        .saturating_sub(commands_before);
    // The executors export their lock counters every second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let attempts = scrape_sum(&ports, "probactr_lock_attempts_total").await;
    let acquisitions = scrape_sum(&ports, "probactr_lock_acquisitions_total").await;
    let succeeded: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'succeeded'")
        .fetch_one(&cluster.pool)
        .await?;
    Ok(json!({
        "retry": options.retry.clone().unwrap_or_else(|| "jitter (default)".into()),
        "runs": runs,
        "succeeded": succeeded,
        "drain_seconds": round(seconds, 2),
        "lock_attempts": attempts,
        "lock_attempts_per_acquisition": round(attempts / acquisitions.max(1.0), 2),
        "redis_commands": commands,
        "cpu_ms": round(cpu_ms, 0),
    }))
}

/// kill -9 the executor running a long non-parallel job; time until the retry starts.
async fn failover(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    let env = cluster.env(Some(16));
    cluster.start_executors(2, &env).await?;
    cluster.spawn("probactr-monitor", "monitor", &env)?;
    cluster.wait_registered("monitor", 1).await?;
    let job = insert_job(
        &cluster.pool,
        "long",
        "sleep",
        json!({ "millis": 600_000 }),
        false,
        "queue",
    )
    .await?;
    let mut times = Vec::new();
    for trial in 0..options.trials {
        let first: i64 =
            sqlx::query_scalar("INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now()) RETURNING id")
                .bind(job)
                .fetch_one(&cluster.pool)
                .await?;
        let pid = wait_running_pid(&cluster.pool, first).await?;
        let killed_at = db_now(&cluster.pool).await?;
        let index = cluster
            .processes
            .iter()
            .position(|(_, child)| child.id() == Some(pid as u32))
            .context("runner")?;
        let (_, mut child) = cluster.processes.remove(index);
        child.kill().await?;
        let retry_started = wait_retry_started(&cluster.pool, first).await?;
        let seconds = (retry_started - killed_at).num_milliseconds() as f64 / 1000.0;
        progress(options, &format!("trial {}: failover {seconds:.2} s", trial + 1));
        times.push(seconds);
        sqlx::query("UPDATE runs SET cancel_requested_at = now() WHERE state = 'running'")
            .execute(&cluster.pool)
            .await?;
        wait_drained(&cluster.pool, options, Duration::from_secs(30)).await?;
        cluster.spawn("probactr-executor", &format!("replacement-{trial}"), &env)?;
        cluster.wait_registered("executor", 2).await?;
    }
    times.sort_by(f64::total_cmp);
    Ok(json!({
        "trials": times.len(),
        "heartbeat_timeout_secs": 3,
        "failover_seconds": { "median": round(times[times.len() / 2], 2), "max": round(times[times.len() - 1], 2) },
    }))
}

async fn wait_running_pid(pool: &PgPool, run: i64) -> anyhow::Result<i32> {
    for _ in 0..400 {
        let pid: Option<i32> = sqlx::query_scalar(
            "SELECT executors.pid FROM runs JOIN executors ON executors.id = runs.executor_id
             WHERE runs.id = $1 AND runs.state = 'running'",
        )
        .bind(run)
        .fetch_optional(pool)
        .await?;
        if let Some(pid) = pid {
            return Ok(pid);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    bail!("run {run} never started")
}

async fn wait_retry_started(pool: &PgPool, first: i64) -> anyhow::Result<DateTime<Utc>> {
    for _ in 0..2400 {
        let started: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT started_at FROM runs WHERE first_run_id = $1 AND started_at IS NOT NULL",
        )
        .bind(first)
        .fetch_optional(pool)
        .await?;
        if let Some(started) = started {
            return Ok(started);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bail!("the retry of run {first} never started")
}

/// Concurrent API clients on a manager over a large run history.
async fn admin(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    let history = options.history as i64;
    progress(options, &format!("storing {history} runs of history"));
    sqlx::query(
        "INSERT INTO jobs (name, kind, parallel) SELECT 'history-' || g, 'noop', true FROM generate_series(1, 100) AS g",
    )
    .execute(&cluster.pool)
    .await?;
    store_history(&cluster.pool, history).await?;
    sqlx::query("ANALYZE").execute(&cluster.pool).await?;
    let port = free_port()?;
    let password = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let mut env = cluster.env(Some(16));
    env.insert("PROBACTR_MANAGER_LISTEN".into(), format!("127.0.0.1:{port}"));
    env.insert("PROBACTR_ADMIN_PASSWORD".into(), password.clone());
    cluster.spawn("probactr-manager", "manager", &env)?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let token = login(&client, &base, &password).await?;
    let clients = if options.tiny { 4 } else { 32 };
    let deadline = Instant::now() + Duration::from_secs(options.duration);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..clients {
        let client = client.clone();
        let token = token.clone();
        let url = if i % 2 == 0 {
            format!("{base}/api/v1/status")
        } else {
            format!("{base}/api/v1/jobs")
        };
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            while Instant::now() < deadline {
                let sent = Instant::now();
                match client.get(&url).bearer_auth(&token).send().await {
                    Ok(reply) if reply.status().is_success() => {
                        let _ = reply.bytes().await;
                        latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    // Even clients ask for the status, odd ones for the job list; each endpoint's figures
    // are also given apart, since they cost very differently.
    let mut latencies = Vec::new();
    let mut by_endpoint = [Vec::new(), Vec::new()];
    let mut errors = 0;
    for (i, task) in tasks.into_iter().enumerate() {
        let (mine, failed) = task.await?;
        by_endpoint[i % 2].extend_from_slice(&mine);
        latencies.extend(mine);
        errors += failed;
    }
    let seconds = started.elapsed().as_secs_f64();
    let requests = latencies.len();
    let spread = percentiles(&mut latencies);
    let figures = |latencies: &mut Vec<f64>| {
        let spread = percentiles(latencies);
        json!({
            "requests_per_sec": round(latencies.len() as f64 / seconds, 0),
            "p50_ms": spread["p50"],
            "p99_ms": spread["p99"],
        })
    };
    let [status, jobs] = &mut by_endpoint;
    Ok(json!({
        "history_runs": history,
        "clients": clients,
        "requests": requests,
        "errors": errors,
        "requests_per_sec": round(requests as f64 / seconds, 0),
        "p50_ms": spread["p50"],
        "p99_ms": spread["p99"],
        "status": figures(status),
        "jobs": figures(jobs),
    }))
}

/// `count` ended runs, one every second back from now, or closer together when that
/// would reach past 25 days (inside the default retention: a larger history is a busier
/// month, not an older one). Stored a million at a time so no statement's transition
/// tables grow without bound.
async fn store_history(pool: &sqlx::PgPool, count: i64) -> anyhow::Result<()> {
    const SPAN_SECS: f64 = 25.0 * 86_400.0;
    const CHUNK: i64 = 1_000_000;
    let spacing = (SPAN_SECS / count.max(1) as f64).min(1.0);
    let mut first = 1;
    while first <= count {
        let last = (first + CHUNK - 1).min(count);
        sqlx::query(
            "INSERT INTO runs (job_id, scheduled_at, state, queued_at, started_at, finished_at)
             SELECT (SELECT min(id) FROM jobs) + g % 100, t, CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, t, t, t
             FROM (SELECT g, now() - make_interval(secs => g * $3) AS t FROM generate_series($1, $2) AS g) AS history",
        )
        .bind(first)
        .bind(last)
        .bind(spacing)
        .execute(pool)
        .await?;
        first = last + 1;
    }
    Ok(())
}

async fn login(client: &reqwest::Client, base: &str, password: &str) -> anyhow::Result<String> {
    for _ in 0..200 {
        if let Ok(reply) = client
            .post(format!("{base}/api/v1/auth/token"))
            .header("content-type", "application/json")
            .body(json!({ "username": "admin", "password": password }).to_string())
            .send()
            .await
        {
            if reply.status().is_success() {
                let body: Value = serde_json::from_slice(&reply.bytes().await?)?;
                return body["token"]
                    .as_str()
                    .map(str::to_owned)
                    .context("a token in the reply");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the manager did not hand out a token")
}

/// Executor memory idle and with 1,000 concurrent sleep jobs.
async fn memory(cluster: &mut Cluster, options: &Options) -> anyhow::Result<Value> {
    let busy_runs: i64 = if options.tiny { 100 } else { 1000 };
    let env = cluster.env(Some(busy_runs as u32 + 10));
    let pids = cluster.start_executors(1, &env).await?;
    let pid = pids[0];
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss_mib(pid);
    let job = insert_job(
        &cluster.pool,
        "sleepers",
        "sleep",
        json!({ "millis": 30_000 }),
        true,
        "queue",
    )
    .await?;
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2)")
        .bind(job)
        .bind(busy_runs)
        .execute(&cluster.pool)
        .await?;
    for _ in 0..600 {
        let running: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'running'")
            .fetch_one(&cluster.pool)
            .await?;
        if running >= busy_runs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let busy = rss_mib(pid);
    sqlx::query("UPDATE runs SET cancel_requested_at = now() WHERE state = 'running'")
        .execute(&cluster.pool)
        .await?;
    wait_drained(&cluster.pool, options, Duration::from_secs(30)).await?;
    Ok(json!({
        "concurrent_jobs": busy_runs,
        "rss_mib_idle": round(idle, 1),
        "rss_mib_busy": round(busy, 1),
    }))
}
