//! The database functions and triggers (`store::functions`): one file each, installed
//! idempotently after the migrations, and the behaviours no other test exercises.

use std::collections::{BTreeMap, BTreeSet};

use probactr_common::store::functions::{self, FUNCTIONS};
use probactr_common::store::{self, RUNS_CHANNEL, TRIGGERS_CHANNEL};
use sqlx::postgres::PgListener;

use super::*;

/// Every function of the public schema and every trigger a migration or a file created,
/// with its definition as PostgreSQL prints it and its object id.
async fn definitions(pool: &PgPool) -> BTreeMap<String, (String, u32)> {
    let rows: Vec<(String, String, sqlx::postgres::types::Oid)> = sqlx::query_as(
        "SELECT 'function ' || p.proname, pg_get_functiondef(p.oid), p.oid
         FROM pg_proc AS p WHERE p.pronamespace = 'public'::regnamespace
         UNION ALL
         SELECT 'trigger ' || t.tgname, pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text, t.oid
         FROM pg_trigger AS t
         JOIN pg_class AS c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal AND c.relnamespace = 'public'::regnamespace",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut by_name = BTreeMap::new();
    for (name, definition, oid) in rows {
        assert!(
            by_name.insert(name.clone(), (definition, oid.0)).is_none(),
            "{name} is defined twice (an overload, or a trigger name on two tables)"
        );
    }
    by_name
}

/// What the files define, by the same names as [`definitions`].
fn files_define() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for function in FUNCTIONS {
        assert!(
            names.insert(format!("function {}", function.name())),
            "{} is listed twice",
            function.path
        );
        assert!(
            function
                .sql
                .contains(&format!("CREATE OR REPLACE FUNCTION {}(", function.name())),
            "{} defines the function it is named after, with CREATE OR REPLACE",
            function.path
        );
        for trigger in function.triggers() {
            assert!(
                names.insert(format!("trigger {trigger}")),
                "trigger {trigger} has two files"
            );
        }
    }
    names
}

/// Start-up's migration leaves exactly the objects of the files (no function or trigger
/// without its file, no file without its object), and installing them again changes
/// nothing: no definition, no object id.
#[sqlx::test(migrations = false)]
async fn every_function_and_trigger_has_one_file_and_installing_twice_changes_nothing(pool: PgPool) {
    store::migrate(&pool).await.expect("migrate and install");
    let installed = definitions(&pool).await;
    let in_database: BTreeSet<String> = installed.keys().cloned().collect();
    assert_eq!(
        in_database,
        files_define(),
        "the database's objects and the files' differ"
    );
    for function in FUNCTIONS {
        assert!(
            !function.sql.contains("CREATE FUNCTION") && !function.sql.contains("CREATE TRIGGER"),
            "{}: only CREATE OR REPLACE, so that installing again succeeds",
            function.path
        );
    }

    functions::install(&pool).await.expect("install again");
    store::migrate(&pool).await.expect("start-up again");
    assert_eq!(
        definitions(&pool).await,
        installed,
        "installing again changed something"
    );
}

/// A test's database (`TEST_MIGRATOR`) holds what start-up installs.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn test_databases_hold_the_installed_functions(pool: PgPool) {
    let migrated = definitions(&pool).await;
    store::migrate(&pool).await.expect("start-up on a test database");
    assert_eq!(definitions(&pool).await, migrated);
}

/// The history keeps no foreign keys; its triggers do what their actions did: deleting
/// an executor or a trigger keeps its ended runs without it, deleting a job erases them.
/// The live runs keep none to `executors` either: a process without a row claims nothing,
/// an executor still owning a live run cannot be deleted (as under the key), and
/// housekeeping leaves such an executor's row alone.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn deleting_an_executor_or_a_trigger_keeps_its_history_and_a_job_erases_it(pool: PgPool) {
    let job = make_job(&pool, "history", |_| {}).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let executor = make_executor(&pool).await;
    let ended: i64 = sqlx::query_scalar(
        "INSERT INTO runs (job_id, trigger_id, executor_id, scheduled_at, state, started_at, finished_at)
         VALUES ($1, $2, $3, now(), 'succeeded', now(), now()) RETURNING id",
    )
    .bind(job.id)
    .bind(trigger.id)
    .bind(executor)
    .fetch_one(&pool)
    .await
    .expect("an ended run");
    let in_history = |pool: PgPool| async move {
        sqlx::query_as::<_, (Option<i64>, Option<Uuid>)>(
            "SELECT trigger_id, executor_id FROM runs_done WHERE id = $1",
        )
        .bind(ended)
        .fetch_optional(&pool)
        .await
        .expect("history")
    };
    assert_eq!(
        in_history(pool.clone()).await,
        Some((Some(trigger.id), Some(executor)))
    );
    let live = runs::queue_now(&pool, job.id).await.expect("queue run");
    let unregistered = runs::claim_queued(&pool, Uuid::new_v4(), 1).await.expect("claim");
    assert!(unregistered.is_empty(), "an unknown process claims nothing");
    let claimed = runs::claim_queued(&pool, executor, 1).await.expect("claim");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0].id, live.id);

    let owner = sqlx::query("DELETE FROM executors WHERE id = $1")
        .bind(executor)
        .execute(&pool)
        .await;
    assert!(owner.is_err(), "an executor owning a live run stays");
    sqlx::query(
        "UPDATE executors SET state = 'dead', last_heartbeat_at = now() - interval '1 day' WHERE id = $1",
    )
    .bind(executor)
    .execute(&pool)
    .await
    .expect("the executor died long ago");
    housekeeping::prune_records(&pool, Duration::from_secs(60))
        .await
        .expect("housekeeping passes over an executor owning a live run");
    let executors_of = |pool: PgPool| async move {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM executors WHERE id = $1")
            .bind(executor)
            .fetch_one(&pool)
            .await
            .expect("count")
    };
    assert_eq!(executors_of(pool.clone()).await, 1, "the owner is kept");
    assert!(runs::unclaim(&pool, live.id, executor, Duration::ZERO)
        .await
        .expect("unclaim"));
    housekeeping::prune_records(&pool, Duration::from_secs(60))
        .await
        .expect("housekeeping deletes the executor");
    assert_eq!(
        executors_of(pool.clone()).await,
        0,
        "a dead executor owning nothing is deleted"
    );
    assert_eq!(
        in_history(pool.clone()).await,
        Some((Some(trigger.id), None)),
        "the executor is forgotten"
    );
    sqlx::query("DELETE FROM triggers WHERE id = $1")
        .bind(trigger.id)
        .execute(&pool)
        .await
        .expect("delete the trigger");
    assert_eq!(
        in_history(pool.clone()).await,
        Some((None, None)),
        "the trigger is forgotten"
    );
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("delete the job");
    assert_eq!(
        in_history(pool.clone()).await,
        None,
        "the job's history is erased"
    );
}

/// The next notification, as (channel, payload).
async fn next(listener: &mut PgListener) -> (String, String) {
    let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a notification in time")
        .expect("receive");
    (
        notification.channel().to_owned(),
        notification.payload().to_owned(),
    )
}

/// Changing a trigger and queueing a claimable run wake the executors; a transaction
/// marked `probactr.quiet` (an executor advancing the triggers it just fired) does not.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn changed_triggers_and_queued_runs_notify_unless_quiet(pool: PgPool) {
    let mut listener = PgListener::connect_with(&pool).await.expect("listener");
    listener
        .listen_all([TRIGGERS_CHANNEL, RUNS_CHANNEL])
        .await
        .expect("listen");
    let job = make_job(&pool, "wakes", |_| {}).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    assert_eq!(
        next(&mut listener).await,
        (TRIGGERS_CHANNEL.to_owned(), String::new())
    );
    runs::queue_now(&pool, job.id).await.expect("run now");
    assert_eq!(
        next(&mut listener).await,
        (RUNS_CHANNEL.to_owned(), String::new())
    );

    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("SET LOCAL probactr.quiet = 'on'")
        .execute(&mut *tx)
        .await
        .expect("quiet");
    sqlx::query("UPDATE triggers SET next_fire_at = next_fire_at + interval '1 minute' WHERE id = $1")
        .bind(trigger.id)
        .execute(&mut *tx)
        .await
        .expect("advance");
    tx.commit().await.expect("commit");
    sqlx::query("SELECT pg_notify($1, 'marker')")
        .bind(TRIGGERS_CHANNEL)
        .execute(&pool)
        .await
        .expect("marker");
    assert_eq!(
        next(&mut listener).await,
        (TRIGGERS_CHANNEL.to_owned(), "marker".to_owned()),
        "the quiet transaction notified nothing"
    );
}

/// The live runs keep no foreign keys (an insert pays one check per statement, not one
/// per run), yet a live run names only a job and a trigger that exist, and goes with
/// them: a deleted trigger is cleared from it, a deleted job deletes it.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn live_runs_name_jobs_and_triggers_that_exist_and_go_with_them(pool: PgPool) {
    let keys: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_constraint WHERE conrelid = 'runs_live'::regclass AND contype = 'f'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(keys, 0, "no per-run key checks on the live runs");
    let job = make_job(&pool, "keys", |_| {}).await;
    let trigger = triggers::create(&pool, job.id, &NewTrigger::interval(60), Utc::now())
        .await
        .expect("trigger");
    let insert = |job_id: i64, trigger_id: Option<i64>| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO runs (job_id, trigger_id, scheduled_at) VALUES ($1, $2, now()) RETURNING id",
            )
            .bind(job_id)
            .bind(trigger_id)
            .fetch_one(&pool)
            .await
        }
    };
    let fired = insert(job.id, Some(trigger.id)).await.expect("a fired run");
    let retry_of_another = sqlx::query_scalar::<_, i64>(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id)
         VALUES ($1, $2, now(), 2, $3) RETURNING id",
    )
    .bind(job.id)
    .bind(trigger.id)
    .bind(fired)
    .fetch_one(&pool)
    .await
    .expect("a retry");
    let err = insert(job.id + 1_000, None).await.expect_err("no such job");
    assert_violation(&err, "23503", "runs_live_job_exists");
    let err = insert(job.id, Some(trigger.id + 1_000))
        .await
        .expect_err("no such trigger");
    assert_violation(&err, "23503", "runs_live_trigger_exists");
    let mixed = sqlx::query("INSERT INTO runs (job_id, scheduled_at) SELECT unnest($1::bigint[]), now()")
        .bind(vec![job.id, job.id + 1_000])
        .execute(&pool)
        .await
        .expect_err("one missing job refuses the statement");
    assert_violation(&mixed, "23503", "runs_live_job_exists");
    let live_of = |pool: PgPool| async move {
        sqlx::query_as::<_, (i64, Option<i64>)>(
            "SELECT id, trigger_id FROM runs_live WHERE job_id = $1 ORDER BY id",
        )
        .bind(job.id)
        .fetch_all(&pool)
        .await
        .expect("live runs")
    };
    assert_eq!(
        live_of(pool.clone()).await,
        vec![(fired, Some(trigger.id)), (retry_of_another, Some(trigger.id))],
        "nothing of a refused statement stays"
    );
    sqlx::query("DELETE FROM triggers WHERE id = $1")
        .bind(trigger.id)
        .execute(&pool)
        .await
        .expect("delete the trigger");
    assert_eq!(
        live_of(pool.clone()).await,
        vec![(fired, None), (retry_of_another, None)],
        "the trigger is cleared from its live runs"
    );
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job.id)
        .execute(&pool)
        .await
        .expect("delete the job");
    assert!(
        live_of(pool.clone()).await.is_empty(),
        "the job's live runs go with it"
    );
}

/// Runs `sql` with `id` bound on a connection of its own; the caller waits for it to
/// block on a lock ([`wait_until_blocked`]) and then for its result.
fn in_background(
    pool: &PgPool,
    sql: &'static str,
    id: i64,
) -> tokio::task::JoinHandle<Result<sqlx::postgres::PgQueryResult, sqlx::Error>> {
    let pool = pool.clone();
    tokio::spawn(async move { sqlx::query(sql).bind(id).execute(&pool).await })
}

/// A firing under way: its transaction, holding the trigger it claimed (of a new job
/// with one trigger due).
struct Firing {
    job_id: i64,
    trigger_id: i64,
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    claimed: triggers::DueTrigger,
}

impl Firing {
    /// Claims the due trigger of a new job `name`, as a firing's transaction does.
    async fn claim(pool: &PgPool, name: &str) -> Firing {
        let job = make_job(pool, name, |_| {}).await;
        let trigger = triggers::create(pool, job.id, &NewTrigger::interval(60), Utc::now())
            .await
            .expect("trigger");
        let mut tx = pool.begin().await.expect("begin");
        let claimed = triggers::claim_due(&mut tx, 10, Duration::from_secs(120))
            .await
            .expect("claim")
            .into_iter()
            .find(|due| due.trigger.id == trigger.id)
            .expect("the trigger is due");
        Firing {
            job_id: job.id,
            trigger_id: trigger.id,
            tx,
            claimed,
        }
    }

    /// Inserts the run of the claimed trigger's next instant; returns its id.
    async fn fire(&mut self) -> i64 {
        let instant = self.claimed.trigger.next_fire_at.expect("a next instant");
        let mut fired = runs::FiredRuns::default();
        fired.push(&self.claimed, instant, false);
        let inserted = runs::insert_fired_runs(&mut self.tx, &fired, Uuid::new_v4())
            .await
            .expect("fire");
        assert_eq!(inserted.len(), 1);
        inserted[0].id
    }
}

/// A firing inserts its runs without locking their triggers again (it holds them since
/// its claim): a delete of the trigger still waits for the firing's commit, then forgets
/// the run it fired, which stays queued with no trigger.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_trigger_deleted_while_it_fires_waits_and_forgets_its_run(pool: PgPool) {
    let mut firing = Firing::claim(&pool, "fired-while-deleted").await;
    let run_id = firing.fire().await;
    let deleting = in_background(&pool, "DELETE FROM triggers WHERE id = $1", firing.trigger_id);
    wait_until_blocked(&pool).await;
    let job_id = firing.job_id;
    firing.tx.commit().await.expect("commit the firing");
    let deleted = deleting.await.unwrap().expect("delete the trigger");
    assert_eq!(deleted.rows_affected(), 1);
    let live: Vec<(i64, Option<i64>)> =
        sqlx::query_as("SELECT id, trigger_id FROM runs_live WHERE job_id = $1")
            .bind(job_id)
            .fetch_all(&pool)
            .await
            .expect("live runs");
    assert_eq!(live, vec![(run_id, None)], "the fired run stays, with no trigger");
}

/// A job deleted while its trigger fires waits for the firing and takes its run along,
/// rather than deadlocking with it: the firing holds the trigger the delete cascades to,
/// and its insert does not lock the job (as it did before, waiting for the delete that
/// waited for it).
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_job_deleted_while_its_trigger_fires_waits_and_takes_the_run(pool: PgPool) {
    let mut firing = Firing::claim(&pool, "job-deleted-while-fired").await;
    let deleting = in_background(&pool, "DELETE FROM jobs WHERE id = $1", firing.job_id);
    wait_until_blocked(&pool).await;
    firing.fire().await;
    let job_id = firing.job_id;
    firing.tx.commit().await.expect("commit the firing");
    let deleted = deleting.await.unwrap().expect("delete the job");
    assert_eq!(deleted.rows_affected(), 1);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0, "the fired run went with its job");
}

/// A run inserted while its job is being deleted is never left behind: the insert locks
/// its job until it commits, so a delete waits for it and takes the run along, and an
/// insert behind a delete is refused once the delete commits.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_run_inserted_while_its_job_is_deleted_goes_with_it(pool: PgPool) {
    let live_runs = |pool: PgPool, job_id: i64| async move {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM runs_live WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(&pool)
            .await
            .expect("count")
    };
    // The insert first: the delete waits for its commit, then deletes the run.
    let job = make_job(&pool, "insert-first", |_| {}).await;
    let mut inserting = pool.begin().await.expect("begin");
    sqlx::query("INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now())")
        .bind(job.id)
        .execute(&mut *inserting)
        .await
        .expect("insert");
    let deleting = in_background(&pool, "DELETE FROM jobs WHERE id = $1", job.id);
    wait_until_blocked(&pool).await;
    inserting.commit().await.expect("commit the run");
    let deleted = deleting.await.unwrap().expect("delete the job");
    assert_eq!(deleted.rows_affected(), 1);
    assert_eq!(
        live_runs(pool.clone(), job.id).await,
        0,
        "the run went with its job"
    );

    // The delete first: the insert waits for its commit, then is refused.
    let job = make_job(&pool, "delete-first", |_| {}).await;
    let mut deleting = pool.begin().await.expect("begin");
    sqlx::query("DELETE FROM jobs WHERE id = $1")
        .bind(job.id)
        .execute(&mut *deleting)
        .await
        .expect("delete");
    let inserting = in_background(
        &pool,
        "INSERT INTO runs (job_id, scheduled_at) VALUES ($1, now())",
        job.id,
    );
    wait_until_blocked(&pool).await;
    deleting.commit().await.expect("commit the delete");
    let refused = inserting.await.unwrap().expect_err("a run of a deleted job");
    assert_violation(&refused, "23503", "runs_live_job_exists");
    assert_eq!(live_runs(pool.clone(), job.id).await, 0);
}
