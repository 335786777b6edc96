//! Namespace quotas (`max_running`) held by the claim, and executors dedicated to
//! namespaces.

use probactr_common::store::runs::quota;

use super::*;

/// Namespace `name` with `max_running` (None: no quota).
async fn make_namespace(pool: &PgPool, name: &str, max_running: Option<i32>) {
    sqlx::query("INSERT INTO namespaces (name, max_running) VALUES ($1, $2)")
        .bind(name)
        .bind(max_running)
        .execute(pool)
        .await
        .expect("namespace");
}

/// A job in `namespace` queued `runs` times; `parallel` jobs need no lock, so the claim
/// starts their runs.
async fn queued_job(pool: &PgPool, name: &str, namespace: &str, parallel: bool, runs: usize) -> Job {
    let job = make_job(pool, name, |j| j.parallel = parallel).await;
    sqlx::query("UPDATE jobs SET namespace = $2 WHERE id = $1")
        .bind(job.id)
        .bind(namespace)
        .execute(pool)
        .await
        .expect("move the job");
    for _ in 0..runs {
        runs::queue_now(pool, job.id).await.expect("queue");
    }
    job
}

async fn in_flight(pool: &PgPool, job_id: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM runs WHERE job_id = $1 AND state IN ('claimed', 'running')")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .expect("count")
}

async fn counted(pool: &PgPool, namespace: &str) -> i32 {
    sqlx::query_scalar("SELECT running FROM namespaces WHERE name = $1")
        .bind(namespace)
        .fetch_one(pool)
        .await
        .expect("running")
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn concurrent_claims_never_exceed_max_running_and_every_way_out_gives_room_back(pool: PgPool) {
    make_namespace(&pool, "capped", Some(3)).await;
    let fast = queued_job(&pool, "fast", "capped", true, 12).await;
    let free = queued_job(&pool, "free", "default", true, 5).await;
    let executors = [
        make_executor(&pool).await,
        make_executor(&pool).await,
        make_executor(&pool).await,
    ];

    // Three claimers at once, each asking for everything, several times over.
    for _ in 0..3 {
        let claims = executors.map(|ex| {
            let pool = pool.clone();
            tokio::spawn(async move { runs::claim_queued(&pool, ex, 20).await })
        });
        for claim in claims {
            claim.await.expect("join").expect("claim");
        }
    }
    assert_eq!(in_flight(&pool, fast.id).await, 3, "exactly the quota in flight");
    assert_eq!(counted(&pool, "capped").await, 3);
    assert_eq!(in_flight(&pool, free.id).await, 5, "no quota: all of them");
    assert_eq!(
        counted(&pool, "default").await,
        0,
        "runs without a quota are not counted"
    );
    let free_marked: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runs WHERE job_id = $1 AND quota_namespace IS NOT NULL")
            .bind(free.id)
            .fetch_one(&pool)
            .await
            .expect("marked");
    assert_eq!(free_marked, 0);

    let waiting: i64 = sqlx::query_scalar("SELECT min(id) FROM runs WHERE job_id = $1 AND state = 'queued'")
        .bind(fast.id)
        .fetch_one(&pool)
        .await
        .expect("a queued run");
    assert_eq!(
        quota::queued_reason(&pool, waiting)
            .await
            .expect("reason")
            .as_deref(),
        Some("namespace quota 3/3")
    );

    // An end (a move out of the live runs) gives one place back: one more is claimed.
    sqlx::query(
        "UPDATE runs SET state = 'succeeded', finished_at = now()
         WHERE id = (SELECT min(id) FROM runs WHERE job_id = $1 AND state = 'running')",
    )
    .bind(fast.id)
    .execute(&pool)
    .await
    .expect("end one");
    assert_eq!(counted(&pool, "capped").await, 2);
    assert_eq!(quota::queued_reason(&pool, waiting).await.expect("reason"), None);
    assert_eq!(
        runs::claim_queued(&pool, executors[0], 20)
            .await
            .expect("claim")
            .len(),
        1
    );
    assert_eq!(counted(&pool, "capped").await, 3);

    // Back to the queue (a dead executor's runs taken over) and deleted with its job.
    sqlx::query(
        "UPDATE runs SET state = 'queued', executor_id = NULL, started_at = NULL, heartbeat_at = NULL
         WHERE id = (SELECT min(id) FROM runs WHERE job_id = $1 AND state = 'running')",
    )
    .bind(fast.id)
    .execute(&pool)
    .await
    .expect("requeue one");
    assert_eq!(counted(&pool, "capped").await, 2);
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(fast.id)
        .execute(&pool)
        .await
        .expect("delete the job");
    assert_eq!(counted(&pool, "capped").await, 0);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn claimed_runs_count_until_unclaimed_or_ended_and_a_quota_set_later_counts_runs_in_flight(
    pool: PgPool,
) {
    make_namespace(&pool, "team", None).await;
    // Not parallel: claimed, not started, by the claim.
    let locked = queued_job(&pool, "locked", "team", false, 1).await;
    let parallel = queued_job(&pool, "parallel", "team", true, 4).await;
    let ex = make_executor(&pool).await;
    assert_eq!(runs::claim_queued(&pool, ex, 3).await.expect("claim").len(), 3);
    assert_eq!(counted(&pool, "team").await, 0);

    // A quota set now counts what is already in flight; nothing more is taken.
    sqlx::query("UPDATE namespaces SET max_running = 3 WHERE name = 'team'")
        .execute(&pool)
        .await
        .expect("set the quota");
    assert_eq!(counted(&pool, "team").await, 3);
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    assert_eq!(
        quota::of_namespace(&pool, "team").await.expect("quota"),
        Some(quota::QuotaUse {
            namespace: "team".into(),
            running: 3,
            max_running: 3
        })
    );

    // Lowering it below the count takes effect as runs end.
    sqlx::query("UPDATE namespaces SET max_running = 1 WHERE name = 'team'")
        .execute(&pool)
        .await
        .expect("lower the quota");
    let claimed: Vec<i64> = sqlx::query_scalar("SELECT id FROM runs WHERE state = 'claimed'")
        .fetch_all(&pool)
        .await
        .expect("claimed");
    for id in &claimed {
        runs::unclaim(&pool, *id, ex, Duration::ZERO)
            .await
            .expect("unclaim");
    }
    let running: Vec<i64> = sqlx::query_scalar("SELECT id FROM runs WHERE state = 'running' ORDER BY id")
        .fetch_all(&pool)
        .await
        .expect("running");
    assert_eq!(counted(&pool, "team").await, running.len() as i32);
    sqlx::query("UPDATE runs SET state = 'cancelled', finished_at = now() WHERE id = ANY ($1)")
        .bind(&running)
        .execute(&pool)
        .await
        .expect("end them");
    assert_eq!(counted(&pool, "team").await, 0);
    assert_eq!(runs::claim_queued(&pool, ex, 10).await.expect("claim").len(), 1);
    assert_eq!(counted(&pool, "team").await, 1);
    assert_eq!(
        in_flight(&pool, locked.id).await + in_flight(&pool, parallel.id).await,
        1
    );

    // Removing the quota: the other two are claimed freely; the runs counted give their
    // places back.
    sqlx::query("UPDATE namespaces SET max_running = NULL WHERE name = 'team'")
        .execute(&pool)
        .await
        .expect("remove the quota");
    assert_eq!(runs::claim_queued(&pool, ex, 10).await.expect("claim").len(), 2);
    sqlx::query(
        "UPDATE runs SET state = 'succeeded', finished_at = now() WHERE state IN ('claimed', 'running')",
    )
    .execute(&pool)
    .await
    .expect("end all");
    assert_eq!(counted(&pool, "team").await, 0);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_dedicated_executor_claims_and_starts_only_its_namespaces(pool: PgPool) {
    make_namespace(&pool, "a", None).await;
    make_namespace(&pool, "b", None).await;
    let of_a = queued_job(&pool, "of-a", "a", true, 2).await;
    let of_b = queued_job(&pool, "of-b", "b", true, 2).await;
    let ex = make_executor(&pool).await;
    let only_a = ["a".to_owned()];
    let claimed = runs::claim_in_namespaces(&pool, ex, &runs::ClaimLimits::runs(10), Some(&only_a))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 2);
    assert!(claimed.iter().all(|claimed| claimed.run.job_id == of_a.id));
    assert_eq!(in_flight(&pool, of_b.id).await, 0);

    // Firing: a dedicated executor may start as it fires only its namespaces' runs.
    for job in [&of_a, &of_b] {
        sqlx::query(
            "INSERT INTO triggers (job_id, kind, interval_secs, next_fire_at) VALUES ($1, 'interval', 60, now())",
        )
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("trigger");
    }
    let mut tx = pool.begin().await.expect("begin");
    let due = triggers::claim_due_for(&mut tx, 10, Duration::ZERO, Some(&only_a))
        .await
        .expect("claim due");
    let lock_free: BTreeSet<(i64, bool)> = due
        .iter()
        .map(|due| (due.trigger.job_id, due.lock_free))
        .collect();
    assert_eq!(lock_free, BTreeSet::from([(of_a.id, true), (of_b.id, false)]));
    tx.rollback().await.expect("rollback");

    // Nor runs of a capped namespace, whoever fires them: the claim holds the quota.
    sqlx::query("UPDATE namespaces SET max_running = 5 WHERE name = 'a'")
        .execute(&pool)
        .await
        .expect("cap a");
    let mut tx = pool.begin().await.expect("begin");
    let due = triggers::claim_due(&mut tx, 10, Duration::ZERO)
        .await
        .expect("claim due");
    let lock_free: BTreeSet<(i64, bool)> = due
        .iter()
        .map(|due| (due.trigger.job_id, due.lock_free))
        .collect();
    assert_eq!(lock_free, BTreeSet::from([(of_a.id, false), (of_b.id, true)]));
    tx.rollback().await.expect("rollback");
}

/// One commit per cycle (`finish_and_claim`): the ends a claim carries are recorded in its
/// transaction, and each run claimed says whether it holds a quota's place (whose end the
/// executor never carries in a claim: releasing it locks what claims lock).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_claim_records_the_ends_it_carries_and_says_which_runs_hold_a_quota(pool: PgPool) {
    make_namespace(&pool, "capped", Some(1)).await;
    let capped = queued_job(&pool, "capped", "capped", true, 2).await;
    let free = queued_job(&pool, "free", "default", true, 3).await;
    let executor = make_executor(&pool).await;
    let limits = runs::ClaimLimits::runs(10);

    let (nothing, first) = runs::finish_and_claim(&pool, &[], executor, &limits, None)
        .await
        .expect("claim");
    assert!(nothing.is_empty());
    let holding: Vec<i64> = first
        .iter()
        .filter(|claimed| claimed.holds_quota)
        .map(|claimed| claimed.run.job_id)
        .collect();
    assert_eq!(
        holding,
        vec![capped.id],
        "the capped run holds its namespace's place"
    );
    assert_eq!(first.len(), 4, "one capped run, every free one");

    runs::queue_now(&pool, free.id).await.expect("queue");
    let mut ends: Vec<runs::RunEnd> = first
        .iter()
        .filter(|claimed| !claimed.holds_quota)
        .map(|claimed| runs::RunEnd {
            run_id: claimed.run.id,
            executor_id: executor,
            fence: None,
            finish: ended(RunState::Succeeded),
            started_at: None,
        })
        .collect();
    ends[0].executor_id = Uuid::new_v4();
    let (finished, second) = runs::finish_and_claim(&pool, &ends, executor, &limits, None)
        .await
        .expect("finish and claim");
    let writes: Vec<Write> = finished.iter().map(|finished| finished.write).collect();
    assert_eq!(
        writes,
        vec![Write::Fenced, Write::Stored, Write::Stored],
        "each end fenced on its own"
    );
    assert_eq!(
        second.len(),
        1,
        "the claim in the same transaction took the new run"
    );
    assert_eq!(second[0].run.job_id, free.id);
    assert!(!second[0].holds_quota);
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'succeeded'")
            .bind(free.id)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(succeeded, 2, "the stored ends committed with the claim");
    assert_eq!(
        counted(&pool, "capped").await,
        1,
        "the capped run's place still held"
    );
}
