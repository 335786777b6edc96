//! The database's functions and triggers: one current body each, applied after the
//! migrations.
//!
//! Behaviour that lives in PostgreSQL (workflow advance, child jobs, the alert outbox,
//! job statistics, routing, the history's partitions and its integrity) is written once,
//! in `store/<area>/sql/functions/<function>.sql`, next to the store module owning the
//! table or concept. A file holds one function and the triggers that call it, as
//! `CREATE OR REPLACE` statements, so that applying it again changes nothing.
//!
//! [`install`] applies every file, in the order of [`FUNCTIONS`] (a function before what
//! calls it), in one transaction under a transaction-level advisory lock: several
//! managers may start at once, and concurrent `CREATE OR REPLACE` of one function fails
//! rather than waits. [`super::migrate`] runs it right after the migrations, so every
//! start-up leaves the database with these bodies.
//!
//! Migrations change the schema only. The migrations up to `2026112801000002` also
//! created these functions (their bodies were moved here unchanged); sqlx checks applied
//! migrations' checksums, so those stay as they are, and a later change to a function
//! edits its file here, never a new migration. A function or trigger to drop is the one
//! thing a new migration does (and its file goes).
//!
//! `schema.sql` at the repository root is the schema of a database migrated and with
//! these installed (`scripts/schema-dump` writes it; `scripts/test` checks it).
//!
//! Each function and the test that exercises its behaviour (besides
//! `common/tests/store/functions.rs`, which checks that the files and the database list
//! the same objects and that installing twice changes nothing):
//!
//! | function (triggers) | behaviour test |
//! |---|---|
//! | `probactr_claim_order` | `common/tests/store/routing.rs`: `higher_priority_goes_first_and_waiting_long_enough_overtakes_it` |
//! | `probactr_route_live_run` (`runs_live_route`, `runs_live_reorder`) | `common/tests/store/routing.rs`: `a_trigger_cap_bounds_its_runs_in_flight`, `higher_priority_goes_first_and_waiting_long_enough_overtakes_it`, `fired_runs_are_routed_like_runs_queued_any_other_way` |
//! | `probactr_notify_runs` (`runs_queued_notify`) | `common/tests/store/functions.rs`: `changed_triggers_and_queued_runs_notify_unless_quiet` |
//! | `probactr_run_targets` | `monitor/tests/faults/routing.rs`: `broadcast_runs_once_per_executor_and_shards_cover_every_index` |
//! | `probactr_next_attempt` | `common/tests/store/retries.rs`: `failures_queue_retries_up_to_the_limit_with_backoff`, `the_retry_delay_is_fixed_or_doubling_up_to_its_bound_and_jittered`, `retry_on_retries_only_the_failures_it_names`; `common/tests/store/reaping.rs`: `a_run_whose_executor_died_is_taken_over_at_most_max_takeovers_times`; `common/tests/store/hot_path.rs`: `every_way_a_run_ends_inlines_the_next_attempt_policy` |
//! | `probactr_queue_run` | `monitor/tests/faults/workflows.rs`: the diamond, `child_jobs_run_once_after_their_parent_with_its_params` |
//! | `probactr_run_params` | `manager/tests/api/workflows.rs`: `trigger_params_are_defaults_under_a_runs_own`; `monitor/tests/faults/workflows.rs`: `child_jobs_run_once_after_their_parent_with_its_params` |
//! | `probactr_check_run_keys` (`runs_keys_checked`) | `common/tests/store/functions.rs`: `live_runs_name_jobs_and_triggers_that_exist_and_go_with_them`, `a_run_inserted_while_its_job_is_deleted_goes_with_it`, `a_trigger_deleted_while_it_fires_waits_and_forgets_its_run`, `a_job_deleted_while_its_trigger_fires_waits_and_takes_the_run` |
//! | `probactr_erase_job_runs` (`jobs_erase_runs`) | `common/tests/store/functions.rs`: `deleting_an_executor_or_a_trigger_keeps_its_history_and_a_job_erases_it`, `live_runs_name_jobs_and_triggers_that_exist_and_go_with_them`, `a_run_inserted_while_its_job_is_deleted_goes_with_it`; `common/tests/store/job_stats.rs`: `this_releases_migrations_upgrade_a_populated_database` |
//! | `probactr_forget_trigger` (`triggers_forget`) | the same, but the last |
//! | `probactr_forget_executor` (`executors_forget`) | `common/tests/store/functions.rs`: `deleting_an_executor_or_a_trigger_keeps_its_history_and_a_job_erases_it` |
//! | `probactr_quota_release` (`runs_live_quota_left`, `runs_live_quota_requeued`), `probactr_namespace_capped` (`jobs_namespace_capped`, `namespaces_capped`) | `common/tests/store/quota.rs`; `executor/tests/executor/namespaces.rs`: `max_running_holds_with_three_executors_racing` |
//! | `probactr_quota_release` for triggers' caps and pools, `probactr_trigger_capped` (`triggers_capped`) | `common/tests/store/routing.rs`: `a_trigger_cap_bounds_its_runs_in_flight`; `executor/tests/executor/flow.rs`: `a_trigger_cap_holds_with_three_executors_racing`, `a_pool_holds_across_executors_and_a_dead_holders_slot_waits_for_the_reap` |
//! | `probactr_rate_room`, `probactr_rate_stamp`, `probactr_job_rate_window` (`jobs_rate_window`) | `executor/tests/executor/flow.rs`: `a_rate_holds_across_executors` |
//! | `probactr_notify_triggers` (`triggers_changed`, `workflow_triggers_changed`) | `common/tests/store/functions.rs`: `changed_triggers_and_queued_runs_notify_unless_quiet`; `executor/tests/executor/cluster.rs`: `a_new_trigger_wakes_sleeping_executors` |
//! | `probactr_job_stats_created` (`jobs_stats_row`), `probactr_job_stats_count` (`runs_stats_inserted`, `runs_stats_updated`) | `common/tests/store/job_stats.rs`: `every_way_a_run_ends_is_counted_once`, `job_stats_outlive_pruned_runs_and_go_with_their_job`, `opposite_grouped_finishes_of_the_same_jobs_do_not_deadlock` |
//! | `probactr_workflow_start_step`, `probactr_workflow_advance` | `monitor/tests/faults/workflows.rs`: `a_diamond_fans_out_fans_in_skips_and_resumes_after_a_retry`; `manager/tests/api/workflows.rs`: `workflows_are_checked_run_cancelled_retried_and_paused` |
//! | `probactr_runs_advance` (`runs_advance`) | `monitor/tests/faults/workflows.rs`: the diamond, `child_jobs_run_once_after_their_parent_with_its_params` |
//! | `probactr_alert_run_ends` (`runs_alert_events`) | `monitor/tests/alerts/main.rs`: `run_events_failures_in_a_row_and_recovery` |
//! | `probactr_alert_misfires` (`misfires_alert_events`) | `monitor/tests/alerts/main.rs`: `conditions_are_raised_once_per_occurrence`, `the_reconciler_records_each_gap_once` |
//! | `probactr_alert_executor_lost` (`executors_alert_lost`) | `monitor/tests/alerts/main.rs`: `conditions_are_raised_once_per_occurrence` |
//! | `probactr_notify_access` (`api_tokens_access_changed`, `users_access_changed`, `user_roles_access_changed`, `namespaces_access_changed`) | `manager/tests/api/health_auth.rs`: `a_remembered_token_stops_working_when_revoked_or_its_user_disabled` |
//! | `probactr_create_run_partitions`, `probactr_run_partition_blocked_query`, `probactr_maintain_run_partitions` | `common/tests/store/job_stats.rs`: `retention_drops_whole_days_of_ended_runs`; `manager/tests/api/concurrency.rs`: `churn_never_answers_500` (maintenance under load) |

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::migrate::{Migration, Migrator};
use sqlx::{AssertSqlSafe, PgPool, SqlSafeStr};

use super::{StoreError, MIGRATOR};

/// One file of [`FUNCTIONS`]: a function and the triggers that call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseFunction {
    /// The file, relative to `common/src/store/`.
    pub path: &'static str,
    /// Its statements.
    pub sql: &'static str,
}

impl DatabaseFunction {
    /// The function the file defines: the file's name without `.sql`.
    pub fn name(&self) -> &'static str {
        let file = self.path.rsplit('/').next().unwrap_or(self.path);
        file.strip_suffix(".sql").unwrap_or(file)
    }

    /// The triggers the file defines, by name.
    pub fn triggers(&self) -> Vec<&'static str> {
        self.sql
            .lines()
            .filter_map(|line| line.strip_prefix("CREATE OR REPLACE TRIGGER "))
            .filter_map(|rest| rest.split_whitespace().next())
            .collect()
    }
}

macro_rules! function {
    ($path:literal) => {
        DatabaseFunction {
            path: $path,
            sql: include_str!($path),
        }
    };
}

/// Every database function, in the order they are applied: a function before the
/// functions and triggers that call it (SQL-language bodies are checked when created).
pub const FUNCTIONS: &[DatabaseFunction] = &[
    // Runs: claim order and routing of live runs, wake-ups, where an instant's runs go,
    // a run's parameters, and the integrity of live runs and history without foreign keys.
    function!("runs/sql/functions/probactr_claim_order.sql"),
    function!("runs/sql/functions/probactr_route_live_run.sql"),
    function!("runs/sql/functions/probactr_notify_runs.sql"),
    function!("runs/sql/functions/probactr_run_targets.sql"),
    function!("runs/sql/functions/probactr_run_params.sql"),
    function!("runs/sql/functions/probactr_next_attempt.sql"),
    function!("runs/sql/functions/probactr_queue_run.sql"),
    function!("runs/sql/functions/probactr_check_run_keys.sql"),
    function!("runs/sql/functions/probactr_erase_job_runs.sql"),
    function!("runs/sql/functions/probactr_forget_trigger.sql"),
    function!("runs/sql/functions/probactr_forget_executor.sql"),
    function!("runs/sql/functions/probactr_quota_release.sql"),
    function!("runs/sql/functions/probactr_namespace_capped.sql"),
    function!("runs/sql/functions/probactr_trigger_capped.sql"),
    function!("runs/sql/functions/probactr_rate_room.sql"),
    function!("runs/sql/functions/probactr_rate_stamp.sql"),
    // Triggers: wake-ups when they change.
    function!("triggers/sql/functions/probactr_notify_triggers.sql"),
    // Jobs: the statistics counters.
    function!("jobs/sql/functions/probactr_job_stats_created.sql"),
    function!("jobs/sql/functions/probactr_job_stats_count.sql"),
    function!("jobs/sql/functions/probactr_job_rate_window.sql"),
    // Workflows and child jobs: what an ended run starts.
    function!("workflows/sql/functions/probactr_workflow_start_step.sql"),
    function!("workflows/sql/functions/probactr_workflow_advance.sql"),
    function!("workflows/sql/functions/probactr_runs_advance.sql"),
    // Alerts: the outbox of events.
    function!("alerts/sql/functions/probactr_alert_run_ends.sql"),
    function!("alerts/sql/functions/probactr_alert_misfires.sql"),
    function!("alerts/sql/functions/probactr_alert_executor_lost.sql"),
    // Access: managers forget the tokens they verified when rights change.
    function!("api_tokens/sql/functions/probactr_notify_access.sql"),
    // Housekeeping: the history's day partitions.
    function!("housekeeping/sql/functions/probactr_create_run_partitions.sql"),
    function!("housekeeping/sql/functions/probactr_run_partition_blocked_query.sql"),
    function!("housekeeping/sql/functions/probactr_maintain_run_partitions.sql"),
];

/// Tries of [`install`] when it meets a lock conflict (a deadlock with the traffic, or
/// the lock timeout) before giving up.
const INSTALL_ATTEMPTS: u32 = 5;

/// Every file of [`FUNCTIONS`], in order, as one script.
pub fn script() -> String {
    FUNCTIONS
        .iter()
        .map(|function| function.sql)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Applies every function and trigger (see the module's documentation). Idempotent, and
/// safe to run from several processes at once.
///
/// Replacing a trigger locks its table against writes for a moment (SHARE ROW
/// EXCLUSIVE), so a start-up while others work can meet their transactions: a deadlock
/// or a lock wait past the timeout rolls the whole install back, and it is tried again.
pub async fn install(pool: &PgPool) -> Result<(), StoreError> {
    let mut attempt = 1;
    loop {
        match install_once(pool).await {
            Err(StoreError::Database(err)) if attempt < INSTALL_ATTEMPTS && is_lock_conflict(&err) => {
                tracing::warn!(attempt, error = %err, "installing the database functions met a lock conflict; trying again");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn install_once(pool: &PgPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('probactr_install_functions'))")
        .execute(&mut *tx)
        .await?;
    // Waiting long for a table's lock would hold every writer of it queued behind this
    // transaction: give up and try again instead.
    sqlx::query("SET LOCAL lock_timeout = '5s'")
        .execute(&mut *tx)
        .await?;
    for function in FUNCTIONS {
        sqlx::raw_sql(function.sql).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A deadlock (40P01) or a lock not obtained in time (55P03).
fn is_lock_conflict(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("40P01" | "55P03")))
}

/// [`MIGRATOR`]'s migrations with [`script`] run at the end of the last one, for
/// `#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]`: a test's database
/// then has what [`super::migrate`] makes.
///
/// The last migration keeps its version and checksum, so the database records exactly
/// the migrations a production one does, and a process started on it (a manager running
/// [`super::migrate`]) finds them applied and unchanged.
pub static TEST_MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrations: Vec<Migration> = MIGRATOR.iter().cloned().collect();
    if let Some(last) = migrations.last_mut() {
        let sql = format!("{}\n{}", last.sql.as_str(), script());
        last.sql = AssertSqlSafe(sql).into_sql_str();
    }
    Migrator::with_migrations(migrations)
});
