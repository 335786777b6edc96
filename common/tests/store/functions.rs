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
