//! The hot-path queries use their partial indexes.

use super::*;

/// The claim queries, as the store runs them.
use probactr_common::store::triggers::CLAIM_DUE_SQL;

use probactr_common::store::runs::CLAIM_QUEUED_SQL;

/// The plan of `EXPLAIN <sql>` with the parameters `bind` gives, as text.
async fn explain<F>(pool: &PgPool, sql: &'static str, bind: F) -> String
where
    F: for<'q> FnOnce(
        sqlx::query::QueryAs<'q, sqlx::Postgres, (String,), sqlx::postgres::PgArguments>,
    )
        -> sqlx::query::QueryAs<'q, sqlx::Postgres, (String,), sqlx::postgres::PgArguments>,
{
    let query = sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")));
    let rows = bind(query).fetch_all(pool).await.expect("explain");
    rows.into_iter()
        .map(|(line,)| line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The generic plan of `sql` (what a connection with `plan_cache_mode =
/// force_generic_plan` runs, as executors do), executed with `values`.
async fn explain_generic(pool: &PgPool, sql: &str, types: &str, values: &str) -> String {
    explain_generic_as(pool, "", sql, types, values).await
}

/// `EXPLAIN <options>` of the generic plan of `sql` with `values`, in a transaction rolled
/// back (`ANALYZE` executes the statement).
async fn explain_generic_as(pool: &PgPool, options: &str, sql: &str, types: &str, values: &str) -> String {
    let mut tx = pool.begin().await.expect("transaction");
    let types = if types.is_empty() {
        String::new()
    } else {
        format!("({types})")
    };
    let values = if values.is_empty() {
        String::new()
    } else {
        format!("({values})")
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET LOCAL plan_cache_mode = force_generic_plan; PREPARE generic {types} AS {sql}"
    )))
    .execute(&mut *tx)
    .await
    .expect("prepare");
    let rows: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {options} EXECUTE generic {values}"
    )))
    .fetch_all(&mut *tx)
    .await
    .expect("explain");
    sqlx::raw_sql("DEALLOCATE generic")
        .execute(&mut *tx)
        .await
        .expect("deallocate");
    tx.rollback().await.expect("rollback");
    rows.into_iter()
        .map(|(line,)| line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn claim_queries_use_their_partial_indexes(pool: PgPool) {
    // 50 jobs (5 paused); 5,000 triggers mostly scheduled over the next weeks, some due,
    // some paused; 20,000 runs mostly finished, 100 queued.
    sqlx::query(
        "INSERT INTO jobs (name, kind, paused) SELECT 'job-' || g, 'noop', g % 10 = 0 FROM generate_series(1, 50) AS g",
    )
    .execute(&pool)
    .await
    .expect("jobs");
    sqlx::query(
        "INSERT INTO triggers (job_id, kind, interval_secs, paused, next_fire_at)
         SELECT (SELECT min(id) FROM jobs) + g % 50, 'interval', 60, g % 20 = 0,
                CASE WHEN g % 100 = 1 THEN now() - make_interval(secs => g)
                     ELSE now() + make_interval(secs => g * 300) END
         FROM generate_series(1, 5000) AS g",
    )
    .execute(&pool)
    .await
    .expect("triggers");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, state, finished_at, queued_at, available_at)
         SELECT (SELECT min(id) FROM jobs) + (g / 7) % 50, now() - make_interval(secs => g),
                CASE WHEN g % 200 = 0 THEN 'queued' ELSE 'succeeded' END,
                CASE WHEN g % 200 = 0 THEN NULL ELSE now() END,
                now() - make_interval(secs => g), now() - make_interval(secs => g)
         FROM generate_series(1, 20000) AS g",
    )
    .execute(&pool)
    .await
    .expect("runs");
    // A backlog of a paused job waiting out its backoff (an hour from now): the live runs
    // are many enough for an index to beat reading them all, and none is claimable.
    sqlx::query(
        "WITH held AS (INSERT INTO jobs (name, kind, paused) VALUES ('held', 'noop', true) RETURNING id)
         INSERT INTO runs (job_id, scheduled_at, available_at)
         SELECT held.id, now(), now() + interval '1 hour' FROM held, generate_series(1, 5000)",
    )
    .execute(&pool)
    .await
    .expect("backlog");
    // Pause the job of the oldest queued run, so the claim has runs to pass over.
    sqlx::query("UPDATE jobs SET paused = true WHERE id = (SELECT job_id FROM runs WHERE state = 'queued' ORDER BY id LIMIT 1)")
        .execute(&pool)
        .await
        .expect("pause a job with queued runs");
    sqlx::query("ANALYZE jobs, triggers, runs")
        .execute(&pool)
        .await
        .expect("analyze");

    let due_plan = explain(&pool, CLAIM_DUE_SQL, |q| {
        q.bind(16_i64).bind(0.0_f64).bind(None::<Vec<String>>)
    })
    .await;
    println!("EXPLAIN claim_due:\n{due_plan}\n");
    assert!(
        due_plan.contains("triggers_due"),
        "claim_due does not use triggers_due:\n{due_plan}"
    );

    let queued_plan = explain(&pool, CLAIM_QUEUED_SQL, |q| {
        q.bind(Uuid::new_v4())
            .bind(16_i64)
            .bind(true)
            .bind(16_i64)
            .bind(None::<Vec<String>>)
            .bind(16_i64)
    })
    .await;
    println!("EXPLAIN claim_queued:\n{queued_plan}\n");
    assert!(
        queued_plan.contains("runs_queued"),
        "claim_queued does not use runs_queued:\n{queued_plan}"
    );

    // Executors run them with generic plans (planned once per connection): those walk
    // the same indexes.
    let due_generic = explain_generic(&pool, CLAIM_DUE_SQL, "bigint, float8, text[]", "16, 0, NULL").await;
    assert!(
        due_generic.contains("triggers_due"),
        "claim_due's generic plan does not use triggers_due:\n{due_generic}"
    );
    let queued_generic = explain_generic(
        &pool,
        CLAIM_QUEUED_SQL,
        "uuid, bigint, boolean, bigint, text[], bigint",
        &format!("'{}', 16, true, 16, NULL, 16", Uuid::new_v4()),
    )
    .await;
    assert!(
        queued_generic.contains("Index Scan using runs_queued"),
        "claim_queued's generic plan does not walk runs_queued:\n{queued_generic}"
    );

    // The queries planned are the queries that run: on this data they find what is due.
    let mut tx = pool.begin().await.expect("begin");
    let due = triggers::claim_due(&mut tx, 1000, Duration::ZERO)
        .await
        .expect("claim due");
    assert_eq!(
        due.len(),
        50,
        "the 50 due triggers (g % 100 = 1: unpaused, of an unpaused job)"
    );
    tx.rollback().await.expect("rollback");
    let (claimable,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state = 'queued' AND NOT jobs.paused",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert!(
        claimable > 50 && claimable < 100,
        "some queued runs belong to paused jobs: {claimable}"
    );
    let claimed = runs::claim_queued(&pool, make_executor(&pool).await, 1000)
        .await
        .expect("claim queued");
    assert_eq!(
        i64::try_from(claimed.len()).expect("small"),
        claimable,
        "every queued run of an unpaused job"
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn every_live_run_column_has_statistics(pool: PgPool) {
    // Without them PostgreSQL guesses that a test like `pinned_to IS NULL` holds for half
    // a percent of the rows and plans the claim as a read and sort of the whole backlog.
    // A migration adding a column to `runs` must give it statistics (see migration
    // 2026112901000001).
    let missing: Vec<String> = sqlx::query_scalar(
        "SELECT attname::text FROM pg_attribute
         WHERE attrelid = 'runs_live'::regclass AND attnum > 0 AND NOT attisdropped
           AND NOT EXISTS (SELECT 1 FROM pg_stats
                           WHERE schemaname = 'public' AND tablename = 'runs_live'
                             AND pg_stats.attname = pg_attribute.attname)
         ORDER BY attnum",
    )
    .fetch_all(&pool)
    .await
    .expect("columns without statistics");
    assert!(
        missing.is_empty(),
        "runs_live columns without statistics: {missing:?}"
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_backlog_is_claimed_by_an_ordered_walk_before_any_analyze(pool: PgPool) {
    // One job's backlog queued at once into a cluster just migrated: the claim must walk
    // the queue's index from its head and stop after the runs it takes, not read and sort
    // the backlog (nor start from the job and read all of its runs).
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (name, kind, parallel) VALUES ('busy', 'noop', true) RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .expect("job");
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT $1, now() FROM generate_series(1, 8000)")
        .bind(job)
        .execute(&pool)
        .await
        .expect("backlog");
    let plan = explain(&pool, CLAIM_QUEUED_SQL, |q| {
        q.bind(Uuid::new_v4())
            .bind(256_i64)
            .bind(true)
            .bind(256_i64)
            .bind(None::<Vec<String>>)
            .bind(256_i64)
    })
    .await;
    println!("EXPLAIN claim_queued:\n{plan}\n");
    assert!(
        plan.contains("Index Scan using runs_queued on runs_live runs "),
        "the claim does not walk the queue's index:\n{plan}"
    );
    for whole_read in [
        "Seq Scan on runs_live runs ",
        "Bitmap Heap Scan on runs_live runs ",
    ] {
        assert!(
            !plan.contains(whole_read),
            "the claim reads the backlog ({whole_read}):\n{plan}"
        );
    }
}

/// The next-attempt policy is written once (`probactr_next_attempt`) and costs the
/// statements ending runs nothing: the planner inlines it into each of them, so no plan
/// calls it as a function.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn every_way_a_run_ends_inlines_the_next_attempt_policy(pool: PgPool) {
    let finish_many = include_str!("../../src/store/runs/sql/finish_many.sql");
    let abandon = include_str!("../../src/store/runs/sql/abandon.sql");
    let endings = [
        (
            "finish_many",
            finish_many,
            "bigint[], uuid[], bigint[], text[], text[], int[], int[], text[], text[], bool[], timestamptz[]",
            "'{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}'",
        ),
        ("abandon (stuck)", abandon, "float8", "30"),
        ("abandon (orphans)", abandon, "float8", "NULL"),
    ];
    for (name, sql, types, values) in endings {
        assert!(
            sql.contains("probactr_next_attempt("),
            "{name} asks the one policy"
        );
        let plan = explain_generic(&pool, sql, types, values).await;
        assert!(
            !plan.contains("probactr_next_attempt"),
            "{name}'s plan calls the policy instead of inlining it:\n{plan}"
        );
    }
}

/// Every pool the processes open runs without PostgreSQL's JIT: a large backlog raises
/// the claim's estimated cost past `jit_above_cost`, and compiling it at each execution
/// cost ten times the statement.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn no_pool_compiles_statements_just_in_time(
    _pool_options: sqlx::postgres::PgPoolOptions,
    options: sqlx::postgres::PgConnectOptions,
) {
    let url = probactr_testkit::database_url(&options);
    let pools = [
        probactr_common::store::pool(&url, 1).expect("pool"),
        probactr_common::store::hot_path_pool(&url, 1, Duration::from_secs(5)).expect("hot-path pool"),
    ];
    for pool in pools {
        let jit: String = sqlx::query_scalar("SHOW jit")
            .fetch_one(&pool)
            .await
            .expect("show jit");
        assert_eq!(jit, "off");
        pool.close().await;
    }
}

/// A run no trigger fired (by hand, by an API call, a parent job or a workflow) costs the
/// instant index nothing: its NULL key could never conflict. The lookups of the fire path
/// name a trigger, so they still find the index.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_instant_index_holds_only_runs_a_trigger_fired(pool: PgPool) {
    let definition: String =
        sqlx::query_scalar("SELECT indexdef FROM pg_indexes WHERE indexname = 'runs_trigger_instant'")
            .fetch_one(&pool)
            .await
            .expect("index definition");
    assert!(definition.contains("trigger_id IS NOT NULL"), "{definition}");

    let mut conn = pool.acquire().await.expect("connection");
    sqlx::raw_sql("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .expect("set");
    let plan: Vec<(String,)> = sqlx::query_as(
        "EXPLAIN SELECT 1 FROM runs_live WHERE trigger_id = $1 AND scheduled_at = $2 AND attempt = 1",
    )
    .bind(1_i64)
    .bind(Utc::now())
    .fetch_all(&mut *conn)
    .await
    .expect("explain");
    let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
    assert!(
        plan.iter().any(|line| line.contains("runs_trigger_instant")),
        "{plan:#?}"
    );
}

/// The reaper's statement reads the running runs a bounded number of times, whatever its
/// statistics say. Planned as if the live runs were none (analyzed while empty), as after
/// a quiet hour, it once joined the runs it picked back to every running run and picked
/// them again for each: 15 s a reap with 3,000 running, for nothing to abandon.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn abandoning_reads_the_running_runs_a_bounded_number_of_times(pool: PgPool) {
    const RUNNING: i64 = 400;
    sqlx::query("ANALYZE runs_live")
        .execute(&pool)
        .await
        .expect("analyze the empty live runs");
    let job = make_job(&pool, "long", |j| j.parallel = true).await;
    let live = make_executor(&pool).await;
    let dead = make_executor(&pool).await;
    sqlx::query("UPDATE executors SET state = 'dead' WHERE id = $1")
        .bind(dead)
        .execute(&pool)
        .await
        .expect("a dead executor");
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, available_at, state, executor_id, claimed_at, started_at)
         SELECT $1, now(), now(), 'running', $2, now(), now() FROM generate_series(1, $3)",
    )
    .bind(job.id)
    .bind(live)
    .bind(RUNNING)
    .execute(&pool)
    .await
    .expect("running runs");
    let abandon = include_str!("../../src/store/runs/sql/abandon.sql");
    for (name, values) in [("orphans", "NULL"), ("stuck", "30")] {
        let plan = explain_generic_as(&pool, "(ANALYZE, BUFFERS)", abandon, "float8", values).await;
        let read = plan
            .split("shared hit=")
            .skip(1)
            .filter_map(|rest| {
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse::<i64>()
                    .ok()
            })
            .max()
            .unwrap_or(0);
        assert!(
            read < 20 * RUNNING,
            "abandoning ({name}) read {read} buffers for {RUNNING} running runs:\n{plan}"
        );
    }
}

/// Recording a group of failures that all retry reads each retry once, whatever the
/// statistics say. Planned as if the live runs were none, it once joined the ended runs to
/// their retries by a rescan of the retries for each: 0.4-1.0 s for a group of 1,000.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn recording_failures_that_retry_reads_each_retry_once(pool: PgPool) {
    const FAILED: i64 = 300;
    sqlx::query("ANALYZE runs_live")
        .execute(&pool)
        .await
        .expect("analyze the empty live runs");
    let job = make_job(&pool, "flaky", |j| {
        j.parallel = true;
        j.retry_max_attempts = 3;
    })
    .await;
    let executor = make_executor(&pool).await;
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO runs (job_id, scheduled_at, available_at, state, executor_id, claimed_at, started_at)
         SELECT $1, now(), now(), 'running', $2, now(), now() FROM generate_series(1, $3) RETURNING id",
    )
    .bind(job.id)
    .bind(executor)
    .bind(FAILED)
    .fetch_all(&pool)
    .await
    .expect("running runs");
    let list = |value: &str| format!("'{{{}}}'", vec![value; ids.len()].join(","));
    let ids_list = format!(
        "'{{{}}}'",
        ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
    );
    let values = [
        ids_list,
        list(&executor.to_string()),
        list("NULL"),
        list("failed"),
        list("NULL"),
        list("1"),
        list("NULL"),
        list("NULL"),
        list("NULL"),
        list("false"),
        list("NULL"),
    ]
    .join(", ");
    let finish_many = include_str!("../../src/store/runs/sql/finish_many.sql");
    let plan = explain_generic_as(
        &pool,
        "(ANALYZE)",
        finish_many,
        "bigint[], uuid[], bigint[], text[], text[], int[], int[], text[], text[], bool[], timestamptz[]",
        &values,
    )
    .await;
    for line in plan.lines().filter(|line| line.contains("CTE Scan on retry ")) {
        assert!(
            line.contains("loops=1)"),
            "the retries are read again per ended run:\n{plan}"
        );
    }
    let retried = plan
        .lines()
        .find(|line| line.contains("CTE Scan on retry "))
        .unwrap_or_default();
    assert!(
        retried.contains(&format!("rows={FAILED} ")),
        "each failure is retried once:\n{plan}"
    );
}

/// An executor's poll for stops asked of its runs reads only such runs: it once read every
/// run the executor had in flight, every 400 ms, to find none.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_stop_poll_reads_only_runs_asked_to_stop(pool: PgPool) {
    let job = make_job(&pool, "long", |j| j.parallel = true).await;
    let executor = make_executor(&pool).await;
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at, available_at, state, executor_id, claimed_at, started_at,
                           cancel_requested_at)
         SELECT $1, now(), now(), 'running', $2, now(), now(), CASE WHEN g = 1 THEN now() END
         FROM generate_series(1, 500) AS g",
    )
    .bind(job.id)
    .bind(executor)
    .execute(&pool)
    .await
    .expect("running runs");
    // Compacted and analyzed: a few hundred live runs in a few pages, as the monitor's
    // vacuum and analyze leave them in a steady cluster.
    sqlx::query("VACUUM (FULL, ANALYZE) runs_live")
        .execute(&pool)
        .await
        .expect("vacuum and analyze");
    let poll = include_str!("../../src/store/runs/sql/cancel_requested.sql");
    let plan = explain_generic_as(&pool, "(ANALYZE)", poll, "uuid", &format!("'{executor}'")).await;
    assert!(
        plan.contains("runs_cancel_requested") && !plan.contains("Rows Removed"),
        "the poll reads runs no one asked to stop:\n{plan}"
    );
    let asked = runs::cancel_requested(&pool, executor).await.expect("poll");
    assert_eq!(asked.len(), 1);
}

/// Recording ends reads no table whole to learn that no job has followers and no workflow
/// step runs, whatever the statistics say. With `jobs` never analyzed (autovacuum off, or
/// not yet come), asking whether any job has followers read every job at each recorded
/// group: 3.6 ms with 10,000 jobs.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn recording_ends_reads_neither_jobs_nor_steps_whole_before_any_analyze(pool: PgPool) {
    sqlx::query("INSERT INTO jobs (name, kind, parallel) SELECT 'many-' || g, 'noop', true FROM generate_series(1, 2000) AS g")
        .execute(&pool)
        .await
        .expect("jobs");
    let job = make_job(&pool, "recorded", |j| j.parallel = true).await;
    let executor = make_executor(&pool).await;
    let ids = running_runs(&pool, job.id, executor, 10).await;
    let ends = succeeded_ends(&ids, executor);
    let mut tx = pool.begin().await.expect("transaction");
    let tables = ["jobs", "workflow_run_steps"];
    let mut before = Vec::new();
    for table in tables {
        before.push(seq_scans(&mut tx, table).await);
    }
    let recorded = runs::finish_many(&mut *tx, &ends).await.expect("record the ends");
    assert!(recorded.iter().all(|f| f.write == Write::Stored), "{recorded:?}");
    let mut whole_reads = Vec::new();
    for (table, before) in tables.into_iter().zip(before) {
        let reads = seq_scans(&mut tx, table).await - before;
        if reads > 0 {
            whole_reads.push((table, reads));
        }
    }
    tx.commit().await.expect("commit");
    assert!(
        whole_reads.is_empty(),
        "recording ends read whole tables: {whole_reads:?}"
    );
}

/// `count` runs of `job`, running on `executor`; their ids.
async fn running_runs(pool: &PgPool, job: i64, executor: Uuid, count: i64) -> Vec<i64> {
    sqlx::query_scalar(
        "INSERT INTO runs (job_id, scheduled_at, available_at, state, executor_id, claimed_at, started_at)
         SELECT $1, now(), now(), 'running', $2, now(), now() FROM generate_series(1, $3) RETURNING id",
    )
    .bind(job)
    .bind(executor)
    .bind(count)
    .fetch_all(pool)
    .await
    .expect("running runs")
}

/// The successful ends of `runs`, as `executor` records them.
fn succeeded_ends(runs: &[i64], executor: Uuid) -> Vec<runs::RunEnd> {
    runs.iter()
        .map(|&run_id| runs::RunEnd {
            run_id,
            executor_id: executor,
            fence: None,
            finish: ended(RunState::Succeeded),
            started_at: None,
        })
        .collect()
}

/// The generic plan of the recording (the executors' pools force generic plans) finds the
/// ended runs by id, however many live runs the partition holds: it read all of them
/// once a few hundred were live and analyzed.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn recording_ends_finds_them_by_id_among_many_live_runs(pool: PgPool) {
    let job = make_job(&pool, "recorded", |j| j.parallel = true).await;
    let executor = make_executor(&pool).await;
    let ids = running_runs(&pool, job.id, executor, 600).await;
    // Compacted and analyzed: a few hundred live runs in a few pages, as the monitor's
    // vacuum and analyze leave them in a steady cluster.
    sqlx::query("VACUUM (FULL, ANALYZE) runs_live")
        .execute(&pool)
        .await
        .expect("vacuum and analyze");
    let ends = succeeded_ends(&ids[..20], executor);
    let mut tx = pool.begin().await.expect("transaction");
    sqlx::query("SET LOCAL plan_cache_mode = force_generic_plan")
        .execute(&mut *tx)
        .await
        .expect("generic plans");
    let before = seq_scans(&mut tx, "runs_live").await;
    let recorded = runs::finish_many(&mut *tx, &ends).await.expect("record the ends");
    assert!(recorded.iter().all(|f| f.write == Write::Stored), "{recorded:?}");
    let whole_reads = seq_scans(&mut tx, "runs_live").await - before;
    tx.commit().await.expect("commit");
    assert_eq!(whole_reads, 0, "recording 20 ends read every live run");
}

/// Sequential reads of `table` this session has counted and not yet reported. Only a
/// difference means anything: a session reports its counts at most once a second, so they
/// may still hold an earlier statement's reads (a vacuum's: the table and each index
/// rebuilt).
async fn seq_scans(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>, table: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(seq_scan), 0)::bigint FROM pg_stat_xact_user_tables WHERE relname = $1",
    )
    .bind(table)
    .fetch_one(&mut **tx)
    .await
    .expect("table reads")
}
