//! Routes and services on four real executors and a monitor. A service with two
//! replicas has exactly two instances alive at every moment (counted from the instances'
//! own side effects: each rewrites its own beat file every 50 ms), on distinct executors;
//! kill -9 of one holder brings a standby's instance up within the heartbeat timeout
//! plus a reap pass plus a second, never three alive. Broadcast across three executors
//! makes three runs per instant, one on each; four shards over two executors cover
//! indexes 0..3 once per instant.

use super::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use probactr_common::model::{JobMode, Route};
use probactr_common::store::services;

/// How recent a beat counts as alive: several beat periods, far less than a restart.
const ALIVE_WITHIN: Duration = Duration::from_millis(400);

/// Instances whose beat file was written within [`ALIVE_WITHIN`].
fn alive_instances(dir: &Path) -> BTreeSet<String> {
    let now = std::time::SystemTime::now();
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|modified| now.duration_since(modified).ok())
                .is_some_and(|age| age <= ALIVE_WITHIN)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Samples the beat files every 50 ms for `length`; returns the most seen alive at once
/// and the longest stretch with fewer than `wanted` alive.
async fn watch_instances(dir: &Path, wanted: usize, length: Duration) -> (usize, Duration) {
    let started = Instant::now();
    let mut most = 0;
    let mut short_since: Option<Instant> = None;
    let mut longest_short = Duration::ZERO;
    while started.elapsed() < length {
        let alive = alive_instances(dir).len();
        most = most.max(alive);
        if alive < wanted {
            let since = *short_since.get_or_insert_with(Instant::now);
            longest_short = longest_short.max(since.elapsed());
        } else {
            short_since = None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (most, longest_short)
}

fn service_job(name: &str, dir: &Path, replicas: i32) -> NewJob {
    let script = r#"while :; do : > "$1/$PROBACTR_RUN_ID-$PROBACTR_REPLICA_INDEX"; sleep 0.05; done"#;
    let mut job = NewJob::new(
        name,
        JobKind::Shell,
        json!({"program": "sh", "args": ["-c", script, "sh", dir.display().to_string()]}),
    );
    job.mode = JobMode::Service;
    job.parallel = true;
    job.replicas = replicas;
    job
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_service_keeps_its_replicas_alive_and_a_standby_takes_over(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut cluster = Cluster::new("service");
    let env = fast_env(&url, &unique_prefix("service"));
    let beats = cluster.path("beats");
    std::fs::create_dir_all(&beats).unwrap();
    cluster.add_monitor("monitor", &env);
    for i in 0..4 {
        cluster.add_executor(&format!("executor-{i}"), &env);
    }
    let job = jobs::insert(&pool, &service_job("web", &beats, 2)).await.unwrap();

    eventually(Duration::from_secs(20), "two instances alive", || async {
        (alive_instances(&beats).len() == 2).then_some(())
    })
    .await;
    let (most, _) = watch_instances(&beats, 2, Duration::from_secs(3)).await;
    assert_eq!(most, 2, "never more than two instances alive");
    let holders = services::holders(&pool, job.id).await.unwrap();
    let executors: BTreeSet<_> = holders.iter().filter_map(|h| h.executor_id).collect();
    assert_eq!(
        executors.len(),
        2,
        "two instances on two distinct executors: {holders:?}"
    );

    // kill -9 the executor holding replica 0.
    let victim_run = holders.iter().find(|h| h.replica == 0).unwrap().run_id;
    let pid = executor_pid_of_run(&pool, victim_run).await.unwrap();
    let victim = cluster.executor_with_pid(pid);
    let killed = Instant::now();
    cluster.executors[victim].kill9().await;
    let (most, longest_short) = watch_instances(&beats, 2, Duration::from_secs(10)).await;
    assert!(most <= 2, "never three instances alive (saw {most})");
    let budget = Duration::from_secs(3) + Duration::from_secs(1) + Duration::from_secs(1);
    assert!(
        longest_short <= budget + ALIVE_WITHIN,
        "a standby took over within the heartbeat timeout, a reap pass and a second: \
         one replica was missing for {longest_short:?} (killed {:?} ago)",
        killed.elapsed()
    );
    assert_eq!(alive_instances(&beats).len(), 2, "two instances alive again");
    let holders = services::holders(&pool, job.id).await.unwrap();
    let pids: BTreeSet<i32> = {
        let mut pids = BTreeSet::new();
        for holder in &holders {
            pids.insert(executor_pid_of_run(&pool, holder.run_id).await.unwrap());
        }
        pids
    };
    assert_eq!(pids.len(), 2, "again on two distinct executors");
    assert!(!pids.contains(&pid), "none on the killed executor");
    let lost: String = sqlx::query_scalar("SELECT state FROM runs WHERE id = $1")
        .bind(victim_run)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(lost, "abandoned");

    // Pausing the service stops its instances; resuming starts two again.
    jobs::set_paused(&pool, job.id, true).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "no instance alive while paused",
        || async { alive_instances(&beats).is_empty().then_some(()) },
    )
    .await;
    jobs::set_paused(&pool, job.id, false).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "two instances alive after resuming",
        || async { (alive_instances(&beats).len() == 2).then_some(()) },
    )
    .await;
    let (most, _) = watch_instances(&beats, 2, Duration::from_secs(2)).await;
    assert_eq!(most, 2);
}

/// The runs of one instant of a fanned-out job: (shard, total) → executor.
async fn instants_of(pool: &PgPool, job_id: i64) -> BTreeMap<DateTime<Utc>, Vec<(i32, i32, Uuid)>> {
    let rows: Vec<(DateTime<Utc>, i32, i32, Uuid)> = sqlx::query_as(
        "SELECT scheduled_at, shard, shard_total, executor_id FROM runs
         WHERE job_id = $1 AND state = 'succeeded' ORDER BY scheduled_at, shard",
    )
    .bind(job_id)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut instants: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for (at, shard, total, executor) in rows {
        instants.entry(at).or_default().push((shard, total, executor));
    }
    instants
}

fn fanned_out(name: &str, route: Route, shards: i32) -> NewJob {
    let script = r#"test -n "$PROBACTR_SHARD_INDEX" && test -n "$PROBACTR_SHARD_TOTAL""#;
    let mut job = NewJob::new(
        name,
        JobKind::Shell,
        json!({"program": "sh", "args": ["-c", script]}),
    );
    job.parallel = true;
    job.route = route;
    job.shards = shards;
    job
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn broadcast_runs_once_per_executor_and_shards_cover_every_index(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut cluster = Cluster::new("fan-out");
    let env = fast_env(&url, &unique_prefix("fan-out"));
    let mut a_env = env.clone();
    a_env.insert("PROBACTR_EXECUTOR_LABELS".into(), "pool=a".into());
    let mut b_env = env.clone();
    b_env.insert("PROBACTR_EXECUTOR_LABELS".into(), "pool=b".into());
    cluster.add_monitor("monitor", &env);
    let mut pool_a = BTreeSet::new();
    for i in 0..3 {
        let index = cluster.add_executor(&format!("executor-a{i}"), &a_env);
        pool_a.insert(
            cluster.executors[index]
                .registered(&pool, Duration::from_secs(20))
                .await,
        );
    }
    let mut pool_b = BTreeSet::new();
    for i in 0..2 {
        let index = cluster.add_executor(&format!("executor-b{i}"), &b_env);
        pool_b.insert(
            cluster.executors[index]
                .registered(&pool, Duration::from_secs(20))
                .await,
        );
    }

    let mut broadcast = fanned_out("everywhere", Route::Broadcast, 1);
    broadcast.selector = json!({"pool": "a"});
    let broadcast = jobs::insert(&pool, &broadcast).await.unwrap();
    let mut sharded = fanned_out("split", Route::Shard, 4);
    sharded.selector = json!({"pool": "b"});
    let sharded = jobs::insert(&pool, &sharded).await.unwrap();
    for job in [&broadcast, &sharded] {
        triggers::create(&pool, job.id, &NewTrigger::interval(1), Utc::now())
            .await
            .unwrap();
    }

    eventually(Duration::from_secs(30), "five instants of each ran", || async {
        let enough = instants_of(&pool, broadcast.id).await.len() >= 5
            && instants_of(&pool, sharded.id).await.len() >= 5;
        enough.then_some(())
    })
    .await;
    for job in [&broadcast, &sharded] {
        jobs::set_paused(&pool, job.id, true).await.unwrap();
    }
    // Let what was fired end.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let failed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runs WHERE state <> 'succeeded' AND state <> 'queued'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        failed, 0,
        "every fanned-out run succeeded with its index and total"
    );
    for (at, runs) in instants_of(&pool, broadcast.id).await {
        if runs.len() < 3 {
            continue; // the last instant may still be running
        }
        let on: BTreeSet<Uuid> = runs.iter().map(|(_, _, executor)| *executor).collect();
        assert_eq!(
            on, pool_a,
            "instant {at}: one run on each executor of pool a: {runs:?}"
        );
        let shards: Vec<(i32, i32)> = runs.iter().map(|(shard, total, _)| (*shard, *total)).collect();
        assert_eq!(shards, vec![(0, 3), (1, 3), (2, 3)], "instant {at}");
    }
    let mut complete = 0;
    for (at, runs) in instants_of(&pool, sharded.id).await {
        let shards: Vec<(i32, i32)> = runs.iter().map(|(shard, total, _)| (*shard, *total)).collect();
        if shards.len() < 4 {
            continue;
        }
        complete += 1;
        assert_eq!(
            shards,
            vec![(0, 4), (1, 4), (2, 4), (3, 4)],
            "instant {at}: each index once"
        );
        let on: BTreeSet<Uuid> = runs.iter().map(|(_, _, executor)| *executor).collect();
        assert!(on.is_subset(&pool_b), "instant {at}: shards only on pool b");
    }
    assert!(complete >= 4, "at least four complete sharded instants");
    let spread: BTreeSet<Uuid> = instants_of(&pool, sharded.id)
        .await
        .values()
        .flatten()
        .map(|(_, _, executor)| *executor)
        .collect();
    assert_eq!(spread, pool_b, "the shards spread over both executors of pool b");
}
