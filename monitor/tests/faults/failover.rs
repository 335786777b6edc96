//! Failovers of the servers themselves: the Redis master fails and the sentinels promote
//! its replica; the PostgreSQL primary fails and its streaming replica is promoted. Both
//! under load, both ending with the workload's invariant check: no instant ran twice,
//! none was lost without a recorded reason, no non-parallel job overlapped itself.

use super::*;

use infra::failover::{redis_query, PostgresPair, SentinelGroup, Switch};

/// Lets the workload wind down and checks its invariants and that no stale effect ran.
async fn invariants_hold(pool: &PgPool, workload: &Workload) {
    let cutoff = workload.wind_down(pool, Duration::from_secs(40)).await;
    let report = workload.check(pool, cutoff).await;
    eprintln!("{}", report.table());
    report.assert_invariants();
    report.assert_no_stale_effects();
}

/// Clients of the Redis server on `port` other than sentinels and the asking connection.
async fn application_clients(port: u16) -> usize {
    let list: String = redis_query(port, &["CLIENT", "LIST"]).await.unwrap_or_default();
    list.lines()
        .filter(|line| !line.contains("name=sentinel-") && !line.contains("cmd=client|list"))
        .count()
}

/// Executors and a monitor reach Redis through three sentinels; the master is killed
/// with `kill -9` while interval triggers and non-parallel jobs run. The sentinels promote
/// the replica; every process finds the new master by asking the sentinels again (its
/// calls fail, or answer READONLY), and locking goes on there: every job succeeds after
/// the failover, no instant runs twice, none is lost without a recorded reason, no job
/// overlaps itself. (A lock taken on the old master in its last moments may not have
/// reached the replica: PostgreSQL's fencing still keeps a second holder from running.)
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn redis_sentinel_failover_duplicates_and_loses_nothing(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let mut group = SentinelGroup::start().await;
    let [master, replica] = group.data_ports;
    let mut cluster = Cluster::new("sentinel-failover");
    let env = env_with(&url, &group.url(), &unique_prefix("sentinel-failover"));
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 400),
            JobPlan::every("tick-c", 1, 300).overlap(Overlap::Skip),
            JobPlan::every("slow-a", 2, 2500).overlap(Overlap::Skip),
            JobPlan::on_demand("long", 6000).attempts(3),
        ],
    )
    .await;
    let long = start_under_load(&pool, &mut cluster, &env, &workload).await;
    assert!(
        group.calls(master, "evalsha").await > 0,
        "the locks are taken on the first master"
    );

    group.kill(master).await;
    let killed = db_now(&pool).await;
    eventually(
        Duration::from_secs(30),
        "the sentinels promote the replica",
        || async { (group.master_port().await == Some(replica)).then_some(()) },
    )
    .await;
    let promoted = db_now(&pool).await;
    eprintln!(
        "Redis master {master} killed; replica {replica} promoted after {:?}",
        (promoted - killed).to_std().unwrap()
    );
    let before = group.calls(replica, "evalsha").await + group.calls(replica, "eval").await;

    every_trigger_succeeds_after(&pool, &workload, promoted, Duration::from_secs(30)).await;
    chain_succeeded(&pool, long, Duration::from_secs(40)).await;
    let after = group.calls(replica, "evalsha").await + group.calls(replica, "eval").await;
    assert!(
        after > before,
        "locks are taken on the promoted replica ({before} -> {after} script calls)"
    );
    let clients = application_clients(replica).await;
    assert!(
        clients >= 2,
        "both executors are connected to the new master ({clients} clients)"
    );

    invariants_hold(&pool, &workload).await;
}

/// The PostgreSQL primary crashes under load and, 4 s later, its streaming replica
/// (synchronous, so every acknowledged commit is on it) is promoted; the address every
/// process uses moves to it (a TCP switch standing for a moved virtual IP or DNS name;
/// sqlx connects to one host per URL). Every process reconnects by itself; the runs in flight when the
/// primary died are stopped by their executors, which could not prove they were alive,
/// and retried; no instant runs twice, none is lost without a recorded reason, no job
/// overlaps itself, and every job runs again after the switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_switch_to_a_promoted_replica_duplicates_and_loses_nothing() {
    let (pair, direct_url) = PostgresPair::start("probactr").await;
    let switch = Switch::start(pair.primary.port()).await;
    let url = direct_url.replace(
        &format!(":{}/", pair.primary.port()),
        &format!(":{}/", switch.port()),
    );
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(3))
        .connect(&url)
        .await
        .unwrap();
    let mut cluster = Cluster::new("pg-promote");
    let env = fast_env(&url, &unique_prefix("pg-promote"));
    let workload = Workload::create(
        &pool,
        &cluster.path("effects.log"),
        &[
            JobPlan::every("tick-a", 1, 200),
            JobPlan::every("tick-b", 1, 300),
            JobPlan::every("slow-a", 2, 1500).overlap(Overlap::Skip),
            JobPlan::on_demand("long", 6000).attempts(3),
        ],
    )
    .await;
    let long = start_under_load(&pool, &mut cluster, &env, &workload).await;

    pair.primary.crash().await;
    let crashed = Utc::now();
    // The outage, as long as a failover takes: longer than the heartbeat timeout.
    tokio::time::sleep(Duration::from_secs(4)).await;
    pair.replica.promote().await;
    switch.point_to(pair.replica.port());
    let switched = Utc::now();
    eprintln!(
        "PostgreSQL primary down; replica promoted and reachable after {:?}",
        (switched - crashed).to_std().unwrap()
    );
    let port: i32 = eventually(
        Duration::from_secs(15),
        "the pool reaches the promoted replica",
        || async {
            sqlx::query_scalar("SELECT inet_server_port() WHERE NOT pg_is_in_recovery()")
                .fetch_optional(&pool)
                .await
                .ok()
                .flatten()
        },
    )
    .await;
    assert_eq!(port, i32::from(pair.replica.port()));

    every_trigger_succeeds_after(&pool, &workload, switched, Duration::from_secs(30)).await;
    chain_succeeded(&pool, long, Duration::from_secs(40)).await;
    // In flight when the primary died: its executor could not heartbeat, stopped the
    // job, recorded it abandoned on the promoted replica, and the retry ran it again.
    let first = get_run(&pool, long).await;
    assert_eq!(first.state, RunState::Abandoned, "{first:?}");
    let alive: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM executors WHERE declared_dead_at IS NULL AND last_heartbeat_at > now() - interval '2 seconds'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        alive >= 2,
        "both executors heartbeat on the promoted replica ({alive})"
    );

    invariants_hold(&pool, &workload).await;
}
