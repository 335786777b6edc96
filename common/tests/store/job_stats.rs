//! Job statistics: all-time counters kept by statement-level triggers on runs.

use super::*;

/// A row of `job_stats`, as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
struct JobStats {
    runs: i64,
    successes: i64,
    failures: i64,
    cancelled: i64,
    not_run: i64,
    last_run_id: Option<i64>,
    last_state: Option<String>,
}

impl JobStats {
    /// Counts as (runs, successes, failures, cancelled, not_run).
    fn counts(&self) -> (i64, i64, i64, i64, i64) {
        (
            self.runs,
            self.successes,
            self.failures,
            self.cancelled,
            self.not_run,
        )
    }
}

async fn job_stats(pool: &PgPool, job_id: i64) -> Option<JobStats> {
    sqlx::query_as(
        "SELECT runs, successes, failures, cancelled, not_run, last_run_id, last_state
         FROM job_stats WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_optional(pool)
    .await
    .expect("job_stats")
}

/// The counts of a job's row, which must exist.
async fn stats_counts(pool: &PgPool, job_id: i64) -> (i64, i64, i64, i64, i64) {
    job_stats(pool, job_id).await.expect("a job_stats row").counts()
}

/// Asserts that every job's counters equal a count over its runs (valid while no run has
/// been deleted), and that its latest end is the run that ended last.
async fn assert_stats_match_runs(pool: &PgPool) {
    let mismatched: Vec<(i64, String)> = sqlx::query_as(
        "WITH counted AS (
             SELECT jobs.id AS job_id,
                    count(runs.id) AS runs,
                    count(*) FILTER (WHERE runs.state = 'succeeded') AS successes,
                    count(*) FILTER (WHERE runs.state IN ('failed', 'timed_out', 'abandoned')) AS failures,
                    count(*) FILTER (WHERE runs.state = 'cancelled') AS cancelled,
                    count(*) FILTER (WHERE runs.state IN ('skipped', 'missed')) AS not_run,
                    (array_agg(runs.id ORDER BY runs.finished_at DESC, runs.id DESC))[1] AS last_run_id
             FROM jobs LEFT JOIN runs ON runs.job_id = jobs.id
                                     AND runs.state NOT IN ('queued', 'claimed', 'running')
             GROUP BY jobs.id)
         SELECT counted.job_id, format('counted %s, stored %s', counted, stats)
         FROM counted LEFT JOIN job_stats AS stats USING (job_id)
         WHERE (counted.runs, counted.successes, counted.failures, counted.cancelled, counted.not_run)
               IS DISTINCT FROM (stats.runs, stats.successes, stats.failures, stats.cancelled, stats.not_run)
            OR counted.last_run_id IS DISTINCT FROM stats.last_run_id",
    )
    .fetch_all(pool)
    .await
    .expect("compare");
    assert!(
        mismatched.is_empty(),
        "job_stats disagree with runs: {mismatched:?}"
    );
}

/// Every path of the store that ends a run counts it once; rewriting an ended run, a
/// fenced-off write and the losing monitor of a reaping race count nothing.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn every_way_a_run_ends_is_counted_once(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "single", |j| j.retry_max_attempts = 2).await;
    assert_eq!(
        stats_counts(&pool, job.id).await,
        (0, 0, 0, 0, 0),
        "a new job has its row"
    );

    // finish: a success, then a failure that queues a retry (queued: not counted).
    let (ok, _, _) = run_to_end(&pool, job.id, ex, RunState::Succeeded).await;
    let (bad, f, retry) = run_to_end(&pool, job.id, ex, RunState::Failed).await;
    let retry = retry.retry_run_id.expect("a retry");
    assert_eq!(stats_counts(&pool, job.id).await, (2, 1, 1, 0, 0));
    let stats = job_stats(&pool, job.id).await.expect("row");
    assert_eq!(
        (stats.last_run_id, stats.last_state.as_deref()),
        (Some(bad.id), Some("failed"))
    );

    // The same finish again is fenced (the run is no longer running): nothing counted.
    let again = runs::finish(&pool, bad.id, ex, Some(f), &ended(RunState::Succeeded))
        .await
        .expect("finish again");
    assert_eq!(again.write, Write::Fenced);
    // A cancel request on an ended run rewrites the row, terminal to terminal: nothing.
    assert_eq!(
        runs::request_cancel(&mut pool.acquire().await.unwrap(), ok.id, "too late")
            .await
            .expect("cancel"),
        Some(RunState::Succeeded)
    );
    // Statements that end nothing: a cancel request on a running run only flags it.
    let (flagged, f) = running_exclusive(&pool, job.id, ex).await;
    assert_eq!(
        runs::request_cancel(&mut pool.acquire().await.unwrap(), flagged.id, "stop")
            .await
            .expect("cancel"),
        Some(RunState::Running)
    );
    assert_eq!(stats_counts(&pool, job.id).await, (2, 1, 1, 0, 0));
    // ... its executor then records it cancelled; the queued retry is cancelled at once.
    runs::finish(&pool, flagged.id, ex, Some(f), &ended(RunState::Cancelled))
        .await
        .expect("finish");
    assert_eq!(
        runs::request_cancel(&mut pool.acquire().await.unwrap(), retry, "not wanted")
            .await
            .expect("cancel"),
        Some(RunState::Cancelled)
    );
    assert_eq!(stats_counts(&pool, job.id).await, (4, 1, 1, 2, 0));
    let stats = job_stats(&pool, job.id).await.expect("row");
    assert_eq!(
        (stats.last_run_id, stats.last_state.as_deref()),
        (Some(retry), Some("cancelled"))
    );

    // end_claim: skipped by the overlap policy.
    let skipped = claimed_run(&pool, job.id, ex).await;
    assert!(runs::end_claim(&pool, skipped.id, ex, RunState::Skipped, "busy")
        .await
        .expect("end claim"));
    assert!(!runs::end_claim(&pool, skipped.id, ex, RunState::Skipped, "busy")
        .await
        .expect("end claim again"));
    assert_eq!(stats_counts(&pool, job.id).await, (5, 1, 1, 2, 1));

    // Grouped finish over runs of two jobs, with one fenced-off ending in the group.
    let p = make_job(&pool, "p", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
        // Its reaped run is not taken over: the claims below take the runs they queue.
        j.on_executor_lost = probactr_common::model::OnExecutorLost::Fail;
    })
    .await;
    let q = make_job(&pool, "q", |j| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    })
    .await;
    let mut endings = Vec::new();
    for (job_id, state) in [
        (q.id, RunState::Succeeded),
        (p.id, RunState::Succeeded),
        (q.id, RunState::TimedOut),
        (p.id, RunState::Failed),
        (p.id, RunState::Succeeded),
    ] {
        let r = claimed_run(&pool, job_id, ex).await;
        runs::start(&pool, &start_request(&r, ex, false, false))
            .await
            .expect("start");
        endings.push(runs::RunEnd {
            run_id: r.id,
            executor_id: ex,
            fence: None,
            finish: ended(state),
            started_at: None,
        });
    }
    let mut stale = endings[0].clone();
    stale.executor_id = Uuid::new_v4();
    let mut group = vec![stale];
    group.extend(endings[1..].iter().cloned());
    let finished = runs::finish_many(&pool, &group).await.expect("finish many");
    assert_eq!(finished[0].write, Write::Fenced);
    assert_eq!(stats_counts(&pool, p.id).await, (3, 2, 1, 0, 0));
    assert_eq!(stats_counts(&pool, q.id).await, (1, 0, 1, 0, 0));
    runs::finish_many(&pool, &endings).await.expect("finish the rest");
    assert_eq!(
        stats_counts(&pool, p.id).await,
        (3, 2, 1, 0, 0),
        "p's runs are counted once"
    );
    assert_eq!(stats_counts(&pool, q.id).await, (2, 1, 1, 0, 0));

    // Reaping: two monitors abandon a dead executor's run at once (staged as in section
    // 9); the run is counted once.
    let dead = make_executor(&pool).await;
    let orphan = claimed_run(&pool, p.id, dead).await;
    runs::start(&pool, &start_request(&orphan, dead, false, false))
        .await
        .expect("start");
    assert!(processes::set_state(&pool, dead, ProcessState::Dead)
        .await
        .expect("declare dead"));
    let mut tx = pool.begin().await.expect("begin");
    let first = runs::abandon_orphans(&mut *tx).await.expect("monitor 1");
    let (second, ()) = tokio::join!(runs::abandon_orphans(&pool), async {
        wait_until_blocked(&pool).await;
        tx.commit().await.expect("commit monitor 1");
    });
    assert_eq!((first.len(), second.expect("monitor 2").len()), (1, 0));
    assert_eq!(stats_counts(&pool, p.id).await, (4, 2, 2, 0, 0));
    // abandon_stuck: a run whose executor does not stop it.
    let stuck = claimed_run(&pool, q.id, ex).await;
    runs::start(&pool, &start_request(&stuck, ex, false, false))
        .await
        .expect("start");
    sqlx::query("UPDATE runs SET cancel_requested_at = now() - interval '1 hour' WHERE id = $1")
        .bind(stuck.id)
        .execute(&pool)
        .await
        .expect("flag long ago");
    let abandoned = runs::abandon_stuck(&pool, Duration::from_secs(60))
        .await
        .expect("abandon stuck");
    assert_eq!(abandoned.len(), 1);
    assert_eq!(stats_counts(&pool, q.id).await, (3, 1, 2, 0, 0));

    // expire_stale_queued: a fired instant that waited past its misfire threshold.
    let trigger = triggers::create(&pool, q.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let mut conn = pool.acquire().await.expect("connection");
    insert_queued(&mut conn, &[q.id], &[trigger.id], &[instant(0)])
        .await
        .expect("fire");
    drop(conn);
    sqlx::query(
        "UPDATE runs SET queued_at = now() - interval '1 hour', available_at = now() - interval '1 hour'
         WHERE state = 'queued' AND job_id = $1",
    )
    .bind(q.id)
    .execute(&pool)
    .await
    .expect("age");
    assert_eq!(runs::expire_stale_queued(&pool).await.expect("expire").len(), 1);
    assert_eq!(stats_counts(&pool, q.id).await, (4, 1, 2, 0, 1));

    // Runs inserted already ended count at once; one inserted queued beside them does not.
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, reason, finished_at)
         VALUES ($1, now(), 'skipped', 'job paused', now()), ($2, now(), 'missed', 'late', now()),
                ($1, now(), 'queued', NULL, NULL)",
    )
    .bind(p.id)
    .bind(q.id)
    .execute(&pool)
    .await
    .expect("insert ended runs");
    assert_eq!(stats_counts(&pool, p.id).await, (5, 2, 2, 0, 1));
    assert_eq!(stats_counts(&pool, q.id).await, (5, 1, 2, 0, 2));

    // Claims, starts and returns to the queue end nothing; the totals match the runs.
    let requeued = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    for r in &requeued {
        runs::unclaim(&pool, r.id, ex, Duration::ZERO)
            .await
            .expect("unclaim");
    }
    assert_stats_match_runs(&pool).await;
}

/// The counters are all-time: pruning runs leaves them, and deleting the job removes its
/// row.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn job_stats_outlive_pruned_runs_and_go_with_their_job(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "pruned", |_| {}).await;
    for state in [RunState::Succeeded, RunState::Failed, RunState::Succeeded] {
        run_to_end(&pool, job.id, ex, state).await;
    }
    let before = job_stats(&pool, job.id).await.expect("row");
    assert_eq!(before.counts(), (3, 2, 1, 0, 0));
    sqlx::query("UPDATE runs SET queued_at = now() - interval '30 days' WHERE job_id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("age");
    let week = Duration::from_secs(7 * 24 * 3600);
    assert_eq!(
        housekeeping::prune_runs(&pool, week, 100).await.expect("prune"),
        3
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        0
    );
    assert_eq!(
        job_stats(&pool, job.id).await,
        Some(before),
        "pruning lowers nothing"
    );

    // A run ending after the pruning adds to the all-time counts.
    run_to_end(&pool, job.id, ex, RunState::TimedOut).await;
    assert_eq!(stats_counts(&pool, job.id).await, (4, 2, 2, 0, 0));

    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("delete job");
    assert_eq!(
        job_stats(&pool, job.id).await,
        None,
        "deleting the job deletes its row"
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM job_stats WHERE job_id = $1", job.id).await,
        0
    );
}

/// Two transactions finishing runs of the same two jobs, each group listing them in the
/// opposite order, both commit: the counters' rows are locked in job_id order whatever
/// the order of the group. Staged so that a trigger locking in the group's order would
/// deadlock: a third transaction holds the first job's row; the first group waits for it
/// first; the second group (second job first) arrives next; then the holder commits.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn opposite_grouped_finishes_of_the_same_jobs_do_not_deadlock(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let parallel = |j: &mut NewJob| {
        j.parallel = true;
        j.max_concurrency = Some(10);
    };
    let a = make_job(&pool, "a", parallel).await;
    let b = make_job(&pool, "b", parallel).await;
    assert!(a.id < b.id);
    let mut running = Vec::new();
    for job_id in [a.id, a.id, b.id, b.id] {
        let r = claimed_run(&pool, job_id, ex).await;
        runs::start(&pool, &start_request(&r, ex, false, false))
            .await
            .expect("start");
        running.push(runs::RunEnd {
            run_id: r.id,
            executor_id: ex,
            fence: None,
            finish: ended(RunState::Succeeded),
            started_at: None,
        });
    }
    let a_then_b = vec![running[0].clone(), running[2].clone()];
    let b_then_a = vec![running[3].clone(), running[1].clone()];

    // a's counters are split over shards (one per group of sessions): hold every one.
    let mut holder = pool.begin().await.expect("begin holder");
    sqlx::query(
        "INSERT INTO job_stat_shards (job_id, shard) SELECT $1, g FROM generate_series(0, 7) AS g
         ON CONFLICT DO NOTHING",
    )
    .bind(a.id)
    .execute(&mut *holder)
    .await
    .expect("every shard of a");
    sqlx::query("SELECT 1 FROM job_stat_shards WHERE job_id = $1 FOR UPDATE")
        .bind(a.id)
        .execute(&mut *holder)
        .await
        .expect("hold a's rows");
    let waiting_sessions = || async {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&pool)
        .await
        .expect("pg_stat_activity");
        n
    };
    let finish_in_tx = |group: Vec<runs::RunEnd>| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await?;
            let finished = runs::finish_many(&mut *tx, &group).await.map_err(|e| match e {
                StoreError::Database(e) => e,
                other => panic!("{other}"),
            })?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(finished)
        }
    };
    let first = tokio::spawn(finish_in_tx(a_then_b));
    for _ in 0..500 {
        if waiting_sessions().await >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting_sessions().await, 1, "the first group waits for a's row");
    let second = tokio::spawn(finish_in_tx(b_then_a));
    for _ in 0..500 {
        if waiting_sessions().await >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting_sessions().await, 2, "the second group waits too");
    holder.commit().await.expect("release a's row");

    for (name, task) in [("a then b", first), ("b then a", second)] {
        let finished = task
            .await
            .expect("task")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            finished.iter().all(|f| f.write == Write::Stored),
            "{name}: {finished:?}"
        );
    }
    assert_eq!(stats_counts(&pool, a.id).await, (2, 2, 0, 0, 0));
    assert_eq!(stats_counts(&pool, b.id).await, (2, 2, 0, 0, 0));
    assert_stats_match_runs(&pool).await;
}

/// The migration counts the runs that ended before it: a database holding history is
/// migrated up to the schema before `job_stats`, then the rest of the way.
#[sqlx::test(migrations = false)]
async fn the_migration_backfills_job_stats_from_existing_runs(pool: PgPool) {
    const BEFORE_JOB_STATS: i64 = 20261121000003;
    let migrator = &probactr_common::store::MIGRATOR;
    assert!(
        migrator.iter().any(|m| m.version > BEFORE_JOB_STATS),
        "job_stats comes later"
    );
    migrator
        .run_to(BEFORE_JOB_STATS, &pool)
        .await
        .expect("migrate before job_stats");
    sqlx::query("INSERT INTO jobs (name, kind) SELECT 'job-' || g, 'noop' FROM generate_series(1, 4) AS g")
        .execute(&pool)
        .await
        .expect("jobs");
    // The fourth job has no runs; every state appears, with ties on finished_at.
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at)
         SELECT (SELECT min(id) FROM jobs) + g % 3, now(), state,
                CASE WHEN state IN ('queued', 'claimed', 'running') THEN NULL
                     ELSE now() - make_interval(secs => (g / 4) % 50) END
         FROM generate_series(1, 3000) AS g,
              LATERAL (SELECT (ARRAY['succeeded', 'failed', 'timed_out', 'cancelled', 'skipped',
                                     'missed', 'abandoned', 'queued'])[1 + g % 8] AS state) AS s",
    )
    .execute(&pool)
    .await
    .expect("history");
    probactr_common::store::migrate(&pool)
        .await
        .expect("migrate the rest");
    assert_stats_match_runs(&pool).await;
    let (rows, jobs): (i64, i64) =
        sqlx::query_as("SELECT (SELECT count(*) FROM job_stats), (SELECT count(*) FROM jobs)")
            .fetch_one(&pool)
            .await
            .expect("rows");
    assert_eq!(rows, jobs, "every job has its row, with or without runs");
}

/// An executor that cannot reach Redis claims only runs that need no lock: the others
/// stay queued for executors that can take their locks.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_lock_free_claim_leaves_runs_that_need_a_lock(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let exclusive = make_job(&pool, "exclusive", |_| {}).await;
    let bounded = make_job(&pool, "bounded", |j| {
        j.parallel = true;
        j.max_concurrency = Some(2);
    })
    .await;
    let free = make_job(&pool, "free", |j| j.parallel = true).await;
    let mut queued = Vec::new();
    for job in [&exclusive, &bounded, &free] {
        queued.push(runs::queue_now(&pool, job.id).await.expect("queue").id);
    }

    let claimed = runs::claim_queued_lock_free(&pool, ex, 10).await.expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        vec![free.id]
    );
    assert_eq!(
        claimed[0].state,
        RunState::Running,
        "a lock-free run starts in the claim"
    );
    for id in &queued[..2] {
        assert_eq!(
            run(&pool, *id).await.state,
            RunState::Queued,
            "run {id} is left queued"
        );
    }

    let rest = runs::claim_queued(&pool, ex, 10).await.expect("claim the rest");
    let mut jobs: Vec<i64> = rest.iter().map(|r| r.job_id).collect();
    jobs.sort_unstable();
    assert_eq!(jobs, vec![exclusive.id, bounded.id]);
    assert!(rest.iter().all(|r| r.state == RunState::Claimed));
}

/// Splitting `runs` into live and ended partitions keeps every run where it belongs: a
/// database holding runs of every state under the former schema is migrated in place; its
/// runs keep their ids and columns, live ones land in `runs_live`, ended ones in the
/// daily partitions (or the default one, when older than the days given partitions),
/// new ids continue after the old ones, and invariant 1 still holds for old instants.
#[sqlx::test(migrations = false)]
async fn the_partitioning_migration_moves_a_populated_history_in_place(pool: PgPool) {
    const BEFORE_PARTITIONS: i64 = 20261121000004;
    let migrator = &probactr_common::store::MIGRATOR;
    migrator
        .run_to(BEFORE_PARTITIONS, &pool)
        .await
        .expect("migrate before partitioning");
    let job: i64 = sqlx::query_scalar("INSERT INTO jobs (name, kind) VALUES ('old', 'noop') RETURNING id")
        .fetch_one(&pool)
        .await
        .expect("job");
    let trigger: i64 = sqlx::query_scalar(
        "INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'interval', 60) RETURNING id",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .expect("trigger");
    // 1,000 ended first attempts, one a minute back from now, plus one a year old; 50
    // queued runs; one running attempt 2 of the newest instant.
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at, output)
         SELECT $1, $2, date_trunc('minute', now()) - make_interval(mins => g),
                CASE WHEN g % 3 = 0 THEN 'failed' ELSE 'succeeded' END, now(), 'out ' || g
         FROM generate_series(1, 1000) AS g
         UNION ALL SELECT $1, $2, now() - interval '1 year', 'missed', now(), NULL",
    )
    .bind(job)
    .bind(trigger)
    .execute(&pool)
    .await
    .expect("history");
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, 50)")
        .bind(job)
        .execute(&pool)
        .await
        .expect("queued");
    let executor: Uuid = sqlx::query_scalar(
        "INSERT INTO executors (id, host, pid, version) VALUES (gen_random_uuid(), 'h', 1, 'v') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .expect("executor");
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id, state, executor_id, started_at)
         SELECT job_id, trigger_id, scheduled_at, 2, id, 'running', $1, now() FROM runs
         WHERE state = 'failed' ORDER BY scheduled_at DESC LIMIT 1",
    )
    .bind(executor)
    .execute(&pool)
    .await
    .expect("running retry");
    let before: Vec<(i64, String, Option<String>)> =
        sqlx::query_as("SELECT id, state, output FROM runs ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("before");

    probactr_common::store::migrate(&pool)
        .await
        .expect("migrate the rest");

    let after: Vec<(i64, String, Option<String>)> =
        sqlx::query_as("SELECT id, state, output FROM runs ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("after");
    assert_eq!(after, before, "every run kept, with its id and columns");
    let placed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT CASE WHEN tableoid = 'runs_live'::regclass THEN 'live'
                     WHEN tableoid = 'runs_done_default'::regclass THEN 'default'
                     ELSE 'day' END, count(*)
         FROM runs GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("placement");
    assert_eq!(
        placed,
        vec![("day".into(), 1000), ("default".into(), 1), ("live".into(), 51)],
        "live runs apart, ended ones in their days (the year-old one in the default)"
    );
    let newest: i64 =
        sqlx::query_scalar("INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now()) RETURNING id")
            .bind(job)
            .fetch_one(&pool)
            .await
            .expect("a new run");
    assert!(newest > before.iter().map(|(id, _, _)| *id).max().unwrap_or(0));
    // An ended instant cannot get a second first attempt, in the live partition or not.
    let fired = sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at)
         SELECT job_id, trigger_id, scheduled_at, 'skipped', now() FROM runs
         WHERE state = 'succeeded' ORDER BY id LIMIT 1",
    )
    .execute(&pool)
    .await
    .expect_err("a second ended first attempt of an instant");
    let violated = fired.as_database_error().expect("a database error");
    assert_eq!(violated.code().as_deref(), Some(UNIQUE_VIOLATION), "{violated}");
    assert!(
        violated.constraint().is_some_and(|c| c.starts_with("runs_done_")),
        "the day's runs_done_trigger_instant: {violated}"
    );
    let ended_instant: DateTime<Utc> =
        sqlx::query_scalar("SELECT scheduled_at FROM runs WHERE state = 'succeeded' ORDER BY id LIMIT 1")
            .fetch_one(&pool)
            .await
            .expect("an ended instant");
    let mut conn = pool.acquire().await.expect("connection");
    let refired = insert_queued(&mut conn, &[job], &[trigger], &[ended_instant])
        .await
        .expect("fire an ended instant again");
    assert_eq!(refired, 0, "the firing insert sees the ended first attempt");
}

/// A claim takes no more shell runs (processes) than it is allowed; the shell runs it
/// passes over stay queued, and the other kinds fill the rest of the claim.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_claim_takes_no_more_shell_runs_than_processes_to_spare(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let shell = make_job(&pool, "shell", |j| {
        j.kind = JobKind::Shell;
        j.spec = serde_json::json!({"program": "true"});
        j.parallel = true;
    })
    .await;
    let noop = make_job(&pool, "noop", |j| j.parallel = true).await;
    runs::queue_many_now(&pool, shell.id, 5)
        .await
        .expect("queue shell");
    runs::queue_many_now(&pool, noop.id, 5).await.expect("queue noop");
    let limits = runs::ClaimLimits {
        processes: 2,
        ..runs::ClaimLimits::runs(10)
    };
    let claimed = runs::claim_within(&pool, ex, &limits).await.expect("claim");
    let of = |job: i64| claimed.iter().filter(|claimed| claimed.run.job_id == job).count();
    assert_eq!((of(shell.id), of(noop.id)), (2, 5), "2 processes, the rest noop");
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM runs WHERE job_id = $1 AND state = 'queued'",
            shell.id
        )
        .await,
        3,
        "the shell runs passed over are still queued"
    );
}

/// Today's ended runs are analyzed once they have grown well past what the planner last
/// saw of them (the firing's check against them must probe the index, not hash the day),
/// and not again until they grow again.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn todays_ended_runs_are_analyzed_once_they_have_grown(pool: PgPool) {
    let job = make_job(&pool, "busy", |_| {}).await;
    assert_eq!(
        housekeeping::analyze_todays_history(&pool)
            .await
            .expect("analyze"),
        None,
        "nothing changed yet"
    );
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at)
         SELECT $1, ((now() AT TIME ZONE 'UTC')::date::timestamp AT TIME ZONE 'UTC') + make_interval(secs => g),
                'succeeded', now()
         FROM generate_series(1, 1500) AS g",
    )
    .bind(job.id)
    .execute(&pool)
    .await
    .expect("ended runs");
    // The insert's counts reach the statistics views when its session reports them.
    let mut analyzed = None;
    for _ in 0..50 {
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&pool)
            .await
            .expect("flush");
        analyzed = housekeeping::analyze_todays_history(&pool)
            .await
            .expect("analyze");
        if analyzed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let today: String =
        sqlx::query_scalar("SELECT 'runs_done_' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')")
            .fetch_one(&pool)
            .await
            .expect("today");
    assert_eq!(analyzed, Some(today.clone()));
    let seen: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = $1")
        .bind(&today)
        .fetch_one(&pool)
        .await
        .expect("statistics");
    assert!(seen >= 1500.0, "the planner sees {seen} rows");
    assert_eq!(
        housekeeping::analyze_todays_history(&pool)
            .await
            .expect("analyze"),
        None,
        "just analyzed"
    );
}

/// The live runs are vacuumed once enough of them changed, and not while the cluster is
/// quiet (a vacuum invalidates every session's plans over them).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_live_runs_are_vacuumed_once_they_changed(pool: PgPool) {
    // Whatever the migrations changed is vacuumed first.
    housekeeping::vacuum_live_runs(&pool).await.expect("vacuum");
    assert!(
        !housekeeping::vacuum_live_runs(&pool).await.expect("vacuum"),
        "nothing changed since"
    );
    let job = make_job(&pool, "busy", |_| {}).await;
    let mut conn = pool.acquire().await.expect("connection");
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, $2)")
        .bind(job.id)
        .bind(housekeeping::VACUUM_AFTER_CHANGES)
        .execute(&mut *conn)
        .await
        .expect("queued runs");
    // The insert's counts reach the statistics views when its session reports them.
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(&mut *conn)
        .await
        .expect("flush");
    let mut vacuumed = false;
    for _ in 0..50 {
        vacuumed = housekeeping::vacuum_live_runs(&pool).await.expect("vacuum");
        if vacuumed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(vacuumed, "a thousand runs queued since the last vacuum");
    assert!(
        !housekeeping::vacuum_live_runs(&pool).await.expect("vacuum"),
        "just vacuumed"
    );
}

/// Retention drops a whole day of ended runs once every run in it was queued before the
/// cutoff, keeps a day holding a run queued later (a late retry or backfill of an old
/// instant), and creates the days ahead.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn retention_drops_whole_days_of_ended_runs(pool: PgPool) {
    let job = make_job(&pool, "old", |_| {}).await;
    sqlx::query(
        "SELECT probactr_create_run_partitions((now() AT TIME ZONE 'UTC')::date - 40,
                                               (now() AT TIME ZONE 'UTC')::date - 39)",
    )
    .execute(&pool)
    .await
    .expect("old days");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, queued_at, state, finished_at)
         VALUES ($1, date_trunc('day', now() - interval '40 days') + interval '1 hour',
                 now() - interval '40 days', 'succeeded', now() - interval '40 days'),
                ($1, date_trunc('day', now() - interval '39 days') + interval '1 hour',
                 now(), 'succeeded', now())",
    )
    .bind(job.id)
    .execute(&pool)
    .await
    .expect("old runs");
    let day_exists = |pool: PgPool, days_ago: i32| async move {
        sqlx::query_scalar::<_, bool>(
            "SELECT to_regclass('runs_done_' || to_char((now() AT TIME ZONE 'UTC')::date - $1, 'YYYYMMDD')) IS NOT NULL",
        )
        .bind(days_ago)
        .fetch_one(&pool)
        .await
        .expect("partition")
    };
    let month = Duration::from_secs(30 * 24 * 3600);
    assert_eq!(
        housekeeping::maintain_history(&pool, month)
            .await
            .expect("maintain"),
        1
    );
    assert!(
        !day_exists(pool.clone(), 40).await,
        "the day past retention is dropped"
    );
    assert!(
        day_exists(pool.clone(), 39).await,
        "the day with a recent run is kept"
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM runs WHERE job_id = $1", job.id).await,
        1,
        "the day holding a recently queued run is kept"
    );
    let ahead: bool = sqlx::query_scalar(
        "SELECT to_regclass('runs_done_' || to_char((now() AT TIME ZONE 'UTC')::date + $1, 'YYYYMMDD')) IS NOT NULL",
    )
    .bind(housekeeping::PARTITION_DAYS_AHEAD)
    .fetch_one(&pool)
    .await
    .expect("ahead");
    assert!(ahead, "the days ahead exist");
}

/// A run fired ahead of its instant waits in the queue until the instant: it is not
/// claimable before, counts as queued from the instant, and is claimable once it comes.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_run_fired_ahead_waits_for_its_instant(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "ahead", |j| j.parallel = true).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let soon = probactr_common::store::db_now(&pool).await.expect("now") + TimeDelta::milliseconds(400);
    let mut conn = pool.acquire().await.expect("connection");
    assert_eq!(
        insert_queued(&mut conn, &[job.id], &[trigger.id], &[soon])
            .await
            .expect("fire ahead"),
        1
    );
    drop(conn);
    let (queued_at, available_at): (DateTime<Utc>, DateTime<Utc>) =
        sqlx::query_as("SELECT queued_at, available_at FROM runs WHERE job_id = $1")
            .bind(job.id)
            .fetch_one(&pool)
            .await
            .expect("run");
    assert_eq!((queued_at, available_at), (soon, soon));
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs::claim_queued(&pool, ex, 10).await.expect("claim").len(), 1);
}

/// The migrations of labels, priorities, checkpoints, live output and workflows upgrade a
/// database holding jobs, triggers and runs in place: the queued run keeps its place in the
/// claim (its claim order derived from its `available_at` at priority 0), jobs take the
/// new defaults (route `any`, mode `batch`, not deleted), invariant 1 still holds for the
/// ended instant, and the run is still claimed.
#[sqlx::test(migrations = false)]
async fn the_routing_and_workflow_migrations_upgrade_a_populated_database(pool: PgPool) {
    const BEFORE_ROUTING: i64 = 20261124000010;
    let migrator = &probactr_common::store::MIGRATOR;
    migrator
        .run_to(BEFORE_ROUTING, &pool)
        .await
        .expect("migrate to the former schema");
    let job: i64 = sqlx::query_scalar("INSERT INTO jobs (name, kind) VALUES ('old', 'noop') RETURNING id")
        .fetch_one(&pool)
        .await
        .expect("job");
    let trigger: i64 = sqlx::query_scalar(
        "INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'interval', 60) RETURNING id",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .expect("trigger");
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at)
         VALUES ($1, $2, now() - interval '2 minutes', 'succeeded', now())",
    )
    .bind(job)
    .bind(trigger)
    .execute(&pool)
    .await
    .expect("an ended run");
    let queued: i64 = sqlx::query_scalar(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at) VALUES ($1, $2, now() - interval '1 minute') RETURNING id",
    )
    .bind(job)
    .bind(trigger)
    .fetch_one(&pool)
    .await
    .expect("a queued run");

    probactr_common::store::migrate(&pool)
        .await
        .expect("migrate to the current schema");

    let (priority, in_order): (i32, bool) =
        sqlx::query_as("SELECT priority, claim_order = available_at FROM runs_live WHERE id = $1")
            .bind(queued)
            .fetch_one(&pool)
            .await
            .expect("the queued run is live");
    assert_eq!((priority, in_order), (0, true));
    let (grace, selector, job_priority): (i32, serde_json::Value, i32) =
        sqlx::query_as("SELECT stop_grace_secs, selector, priority FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .expect("the job");
    assert_eq!((grace, selector, job_priority), (10, serde_json::json!({}), 0));
    let placement: (String, i32, String, i32, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT route, shards, mode, replicas, deleted_at FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .expect("the job's route and mode");
    assert_eq!(placement, ("any".into(), 1, "batch".into(), 1, None));
    // Invariant 1's rebuilt index still refuses a second first attempt of an ended instant.
    let again = sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at)
         SELECT job_id, trigger_id, scheduled_at, 'succeeded', now() FROM runs WHERE state = 'succeeded'",
    )
    .execute(&pool)
    .await;
    assert!(again.is_err(), "an ended instant has one first attempt");
    let ended: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'succeeded'")
        .fetch_one(&pool)
        .await
        .expect("history");
    assert_eq!(ended, 1, "the history is kept");
    let executor = make_executor(&pool).await;
    let claimed = runs::claim_queued(&pool, executor, 4).await.expect("claim");
    assert_eq!(claimed.iter().map(|run| run.id).collect::<Vec<_>>(), [queued]);
}

/// This release's migrations upgrade a populated database: the history loses its foreign
/// keys but keeps every row, and the triggers that replace the keys' actions behave as
/// the keys did (deleting a trigger forgets it in the history, deleting a job erases its
/// ended and live runs); secrets sealed before binding are marked unbound, to be
/// re-sealed by the manager; everything goes to the namespace `default`, today's admins
/// become cluster admins and admins of `default`, the others keep their role there, and
/// the audit entries of namespaced objects are of `default`.
#[sqlx::test(migrations = false)]
async fn this_releases_migrations_upgrade_a_populated_database(pool: PgPool) {
    const BEFORE_RELEASE: i64 = 2026112603000001;
    let migrator = &probactr_common::store::MIGRATOR;
    migrator
        .run_to(BEFORE_RELEASE, &pool)
        .await
        .expect("migrate to the previous release");
    let job: i64 = sqlx::query_scalar("INSERT INTO jobs (name, kind) VALUES ('old', 'noop') RETURNING id")
        .fetch_one(&pool)
        .await
        .expect("job");
    let trigger: i64 = sqlx::query_scalar(
        "INSERT INTO triggers (job_id, kind, interval_secs) VALUES ($1, 'interval', 60) RETURNING id",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .expect("trigger");
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at)
         SELECT $1, $2, date_trunc('minute', now()) - make_interval(mins => g), 'succeeded', now()
         FROM generate_series(1, 20) AS g",
    )
    .bind(job)
    .bind(trigger)
    .execute(&pool)
    .await
    .expect("history");
    sqlx::query("INSERT INTO runs (job_id, trigger_id, scheduled_at) VALUES ($1, $2, now())")
        .bind(job)
        .bind(trigger)
        .execute(&pool)
        .await
        .expect("a queued run");
    sqlx::query(
        "INSERT INTO secrets (name, key_id, nonce, ciphertext, updated_by) VALUES ('token', 'k', '\\x00', '\\x00', 'test')",
    )
    .execute(&pool)
    .await
    .expect("secret");
    sqlx::query(
        "INSERT INTO users (username, password_hash, role)
         VALUES ('root', 'x', 'admin'), ('olga', 'x', 'operator'), ('vic', 'x', 'viewer')",
    )
    .execute(&pool)
    .await
    .expect("users");
    sqlx::query(
        "INSERT INTO audit_log (actor, action, object_type, object_id)
         VALUES ('root', 'job.create', 'job', $1), ('root', 'user.create', 'user', 1)",
    )
    .bind(job)
    .execute(&pool)
    .await
    .expect("audit entries");
    // Versions kept before they moved to one table for every kind.
    const BEFORE_ONE_VERSIONS_TABLE: i64 = 2026120603000001;
    migrator
        .run_to(BEFORE_ONE_VERSIONS_TABLE, &pool)
        .await
        .expect("migrate to the separate versions tables");
    let workflow: i64 = sqlx::query_scalar("INSERT INTO workflows (name) VALUES ('flow') RETURNING id")
        .fetch_one(&pool)
        .await
        .expect("workflow");
    sqlx::query(
        "INSERT INTO job_versions (job_id, version, definition, actor, action)
         VALUES ($1, 1, '{\"name\": \"old\"}', 'root', 'create')",
    )
    .bind(job)
    .execute(&pool)
    .await
    .expect("job versions");
    sqlx::query(
        "INSERT INTO workflow_versions (workflow_id, version, definition, actor, action, restored_from)
         VALUES ($1, 1, '{\"name\": \"flow\"}', 'olga', 'create', NULL),
                ($1, 2, '{\"name\": \"flow\"}', 'olga', 'restore', 1)",
    )
    .bind(workflow)
    .execute(&pool)
    .await
    .expect("workflow versions");

    // A live run held by an executor while the live runs still had a key to executors.
    let executor = Uuid::new_v4();
    sqlx::query("INSERT INTO executors (id, host, pid, version) VALUES ($1, 'old-host', 1, 'old')")
        .bind(executor)
        .execute(&pool)
        .await
        .expect("executor");
    let held: i64 = sqlx::query_scalar(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, executor_id, claimed_at, started_at)
         VALUES ($1, $2, now(), 'running', $3, now(), now()) RETURNING id",
    )
    .bind(job)
    .bind(trigger)
    .bind(executor)
    .fetch_one(&pool)
    .await
    .expect("a running run");
    // A run no trigger fired, claimed while the instant index still held such runs.
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, executor_id, claimed_at)
         VALUES ($1, now(), 'claimed', $2, now())",
    )
    .bind(job)
    .bind(executor)
    .execute(&pool)
    .await
    .expect("a run started by hand");

    probactr_common::store::migrate(&pool)
        .await
        .expect("migrate the rest");

    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .expect(sql)
        }
    };
    assert_eq!(
        count("SELECT count(*) FROM runs_done").await,
        20,
        "the history kept"
    );
    assert_eq!(
        count("SELECT count(*) FROM runs_live").await,
        3,
        "the live runs kept"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f'
               AND conrelid = 'runs_live'::regclass AND confrelid = 'executors'::regclass"
        )
        .await,
        0,
        "the live runs carry no key to executors"
    );
    let holder: Option<Uuid> = sqlx::query_scalar("SELECT executor_id FROM runs_live WHERE id = $1")
        .bind(held)
        .fetch_one(&pool)
        .await
        .expect("the running run");
    assert_eq!(holder, Some(executor), "the running run keeps its executor");
    // The rebuilt instant index still refuses a second first attempt of a live instant.
    let twice = sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at) SELECT job_id, trigger_id, scheduled_at
         FROM runs_live WHERE id = $1",
    )
    .bind(held)
    .execute(&pool)
    .await
    .expect_err("one first attempt per trigger instant");
    assert!(twice.to_string().contains("runs_trigger_instant"), "{twice}");
    let refused = sqlx::query("DELETE FROM executors WHERE id = $1")
        .bind(executor)
        .execute(&pool)
        .await
        .expect_err("an executor owning a live run stays");
    assert_eq!(
        refused.as_database_error().and_then(|err| err.code()).as_deref(),
        Some("23503"),
        "refused as the key refused: {refused}"
    );
    assert_eq!(
        count("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = 'runs_done'::regclass")
            .await,
        0,
        "the history carries no foreign keys"
    );
    assert_eq!(
        count("SELECT count(*) FROM secrets WHERE NOT bound").await,
        1,
        "old secrets unbound"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM pg_attribute
             WHERE attrelid = 'runs_live'::regclass AND attnum > 0 AND NOT attisdropped
               AND NOT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = 'runs_live'
                                 AND pg_stats.attname = pg_attribute.attname)"
        )
        .await,
        0,
        "every live run column has statistics (the live runs analyzed)"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM pg_indexes
             WHERE indexname IN ('jobs_with_followers', 'workflow_run_steps_running')"
        )
        .await,
        2,
        "the partial indexes of the follow-ups exist"
    );
    assert_eq!(
        count("SELECT count(*) FROM jobs WHERE namespace = 'default'").await
            + count("SELECT count(*) FROM secrets WHERE namespace = 'default'").await,
        2,
        "existing objects are in default"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM users JOIN user_roles ON user_roles.user_id = users.id
             WHERE user_roles.namespace = 'default'
               AND ((username = 'root' AND cluster_admin AND user_roles.role = 'admin')
                 OR (username = 'olga' AND NOT cluster_admin AND user_roles.role = 'operator')
                 OR (username = 'vic' AND NOT cluster_admin AND user_roles.role = 'viewer'))"
        )
        .await,
        3,
        "admins became cluster admins and admins of default; the others kept their role there"
    );
    assert_eq!(count("SELECT count(*) FROM user_roles").await, 3, "one role each");
    assert_eq!(
        count(
            "SELECT count(*) FROM audit_log
             WHERE (object_type = 'job' AND namespace = 'default') OR (object_type = 'user' AND namespace IS NULL)"
        )
        .await,
        2,
        "audit entries of namespaced objects are of default; cluster-wide ones of none"
    );
    assert_eq!(
        count("SELECT count(*) FROM jobs WHERE params_schema IS NULL").await,
        1,
        "an existing job declares no parameters: its parameters stay free"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('probactr_next_attempt', 'probactr_queue_run')"
        )
        .await,
        2,
        "the run state machine's database functions are installed on an upgraded cluster"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM namespaces
             WHERE name = 'default' AND max_running IS NULL AND max_jobs IS NULL AND running = 0"
        )
        .await,
        1,
        "default has no quota, and its counter of running runs starts at zero (the run is queued)"
    );
    assert_eq!(
        count("SELECT count(*) FROM jobs WHERE NOT namespace_capped").await,
        1,
        "an existing job is not capped: its claims pay nothing for quotas"
    );
    assert_eq!(
        count("SELECT count(*) FROM run_inputs WHERE rerun_of IS NOT NULL").await,
        0,
        "no run becomes a re-run"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM versions
             WHERE (kind, version, actor, action, definition->>'name') = ('job', 1, 'root', 'create', 'old')"
        )
        .await,
        1,
        "a job keeps its version, and no version is invented for it"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM versions
             WHERE kind = 'workflow' AND actor = 'olga' AND definition->>'name' = 'flow'
               AND ((version, action) = (1, 'create') AND restored_from IS NULL
                    OR (version, action, restored_from) = (2, 'restore', 1))"
        )
        .await,
        2,
        "a workflow keeps its versions, each as it was"
    );
    assert_eq!(
        count("SELECT count(*) FROM versions").await,
        3,
        "only the kept versions moved"
    );
    assert_eq!(
        count("SELECT count(*) FROM triggers WHERE after_job_id IS NULL AND after_within_secs IS NULL").await,
        1,
        "an existing trigger waits for nobody"
    );
    assert_eq!(count("SELECT count(*) FROM run_waits").await, 0, "no run is held");
    assert_eq!(
        count("SELECT count(*) FROM users WHERE time_zone IS NULL").await,
        3,
        "existing users read times in their browser's zone"
    );
    assert_eq!(
        count("SELECT count(*) FROM runs_live WHERE state = 'queued' AND available_at < '9999-01-01'").await,
        1,
        "the queued run stays claimable"
    );
    // The counters were kept by three functions before this release, and by one after it:
    // runs ended on either side are each counted once.
    assert_eq!(
        count(
            "SELECT count(*) FROM pg_proc WHERE proname IN
               ('probactr_job_stats_add', 'probactr_job_stats_inserted', 'probactr_job_stats_updated')"
        )
        .await,
        0,
        "the counting functions this release replaces are gone"
    );
    sqlx::query(
        "UPDATE runs SET state = 'succeeded', started_at = coalesce(started_at, now()), finished_at = now()
         WHERE state IN ('claimed', 'running')",
    )
    .execute(&pool)
    .await
    .expect("end the held runs");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at) VALUES ($1, now(), 'failed', now())",
    )
    .bind(job)
    .execute(&pool)
    .await
    .expect("an ended run recorded after the upgrade");
    assert_stats_match_runs(&pool).await;
    assert_eq!(
        stats_counts(&pool, job).await,
        (23, 22, 1, 0, 0),
        "the history, the two held runs and the new failure"
    );

    sqlx::query("DELETE FROM triggers WHERE id = $1")
        .bind(trigger)
        .execute(&pool)
        .await
        .expect("delete the trigger");
    assert_eq!(
        count("SELECT count(*) FROM runs WHERE trigger_id IS NOT NULL").await,
        0,
        "a deleted trigger is forgotten in the history and the live runs"
    );
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job)
        .execute(&pool)
        .await
        .expect("delete the job");
    assert_eq!(
        count("SELECT count(*) FROM runs").await,
        0,
        "a deleted job's runs are erased"
    );
}
