//! `alert_conditions`: conditions that are not one state change (a run running too long,
//! a job without success, no executor, a capacity shortfall ahead, failures in a row, a job failing until it
//! recovers), raised once per occurrence. Each `raise_*` function records the occurrences
//! it finds and puts an event for each new one in the outbox, in one statement, so two
//! monitors evaluating the same rule raise it once.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};

use crate::store::{rows_written, StoreError};

/// What a rule with a duration watches: its jobs (one, or every job of its namespace) and
/// how long they may run, or go without success.
#[derive(Debug, Clone, Copy)]
pub struct DurationWatch {
    /// The rule.
    pub rule_id: i64,
    /// The job it watches; None: every job of its namespace.
    pub job_id: Option<i64>,
    /// The duration.
    pub duration_secs: i32,
}

/// Raises `run_too_long` for every run of the rule's jobs running longer than
/// `duration_secs`; returns how many were new.
pub async fn raise_runs_too_long(db: impl PgExecutor<'_>, watch: DurationWatch) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"WITH long AS (
               SELECT id, job_id, trigger_id, executor_id, started_at FROM runs
               WHERE state = 'running' AND started_at < now() - make_interval(secs => $3)
                 AND ($2::bigint IS NULL OR job_id = $2)
                 -- Only jobs of the rule's namespace.
                 AND job_id IN (SELECT jobs.id FROM jobs JOIN alert_rules ON alert_rules.namespace = jobs.namespace
                                WHERE alert_rules.id = $1)),
           raised AS (
               INSERT INTO alert_conditions (rule_id, event, job_id, run_id)
               SELECT $1, 'run_too_long', long.job_id, long.id FROM long
               ON CONFLICT DO NOTHING RETURNING run_id)
           INSERT INTO alert_events (event, rule_id, job_id, trigger_id, run_id, executor_id, detail)
           SELECT 'run_too_long', $1, long.job_id, long.trigger_id, long.id, long.executor_id,
                  jsonb_build_object('started_at', long.started_at, 'duration_secs', $3::float8,
                                     'running_secs', floor(extract(epoch FROM now() - long.started_at)))
           -- The raised runs by id, not joined back: a join of two CTEs may be planned as
           -- a rescan per row, 1.4 s when 3,000 runs become too long at once.
           FROM long WHERE long.id = ANY (ARRAY(SELECT run_id FROM raised))"#,
        watch.rule_id,
        watch.job_id,
        f64::from(watch.duration_secs)
    );
    rows_written(db, statement).await
}

/// Raises `no_success_within` for every unpaused job of the rule that has not succeeded
/// for `duration_secs` (counted from its creation, or the rule's, when it never did).
pub async fn raise_no_success_within(
    db: impl PgExecutor<'_>,
    watch: DurationWatch,
) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"WITH quiet AS (
               SELECT jobs.id, last.success_at
               FROM jobs
               CROSS JOIN LATERAL (SELECT max(last_success_at) AS success_at FROM job_stat_shards
                                   WHERE job_stat_shards.job_id = jobs.id) AS last
               WHERE NOT jobs.paused AND ($2::bigint IS NULL OR jobs.id = $2)
                 AND jobs.namespace = (SELECT namespace FROM alert_rules WHERE id = $1)
                 AND greatest(coalesce(last.success_at, jobs.created_at),
                              (SELECT created_at FROM alert_rules WHERE id = $1))
                     < now() - make_interval(secs => $3)),
           raised AS (
               INSERT INTO alert_conditions (rule_id, event, job_id)
               SELECT $1, 'no_success_within', quiet.id FROM quiet
               ON CONFLICT DO NOTHING RETURNING job_id)
           INSERT INTO alert_events (event, rule_id, job_id, detail)
           SELECT 'no_success_within', $1, quiet.id,
                  jsonb_build_object('last_success_at', quiet.success_at, 'duration_secs', $3::float8)
           FROM quiet WHERE quiet.id = ANY (ARRAY(SELECT job_id FROM raised))"#,
        watch.rule_id,
        watch.job_id,
        f64::from(watch.duration_secs)
    );
    rows_written(db, statement).await
}

/// Raises `no_executor` when triggers of unpaused jobs are due and no executor is alive.
pub async fn raise_no_executor(db: impl PgExecutor<'_>, rule_id: i64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"WITH outage AS (
               SELECT count(*) AS due FROM triggers JOIN jobs ON jobs.id = triggers.job_id
               WHERE NOT triggers.paused AND NOT jobs.paused AND triggers.next_fire_at <= now()
               HAVING count(*) > 0
                  AND NOT EXISTS (SELECT 1 FROM executors WHERE role = 'executor' AND state = 'alive')),
           raised AS (
               INSERT INTO alert_conditions (rule_id, event)
               SELECT $1, 'no_executor' FROM outage
               ON CONFLICT DO NOTHING RETURNING rule_id)
           INSERT INTO alert_events (event, rule_id, detail)
           SELECT 'no_executor', $1, jsonb_build_object('due_triggers', outage.due)
           FROM outage, raised"#,
        rule_id
    );
    rows_written(db, statement).await
}

/// Raises `capacity_shortfall` for the rule unless it is already raised; `detail`
/// describes the bucket. Returns how many events were raised (0 or 1).
pub async fn raise_capacity_shortfall(
    db: impl PgExecutor<'_>,
    rule_id: i64,
    detail: &serde_json::Value,
) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"WITH raised AS (
               INSERT INTO alert_conditions (rule_id, event) VALUES ($1, 'capacity_shortfall')
               ON CONFLICT DO NOTHING RETURNING rule_id)
           INSERT INTO alert_events (event, rule_id, detail)
           SELECT 'capacity_shortfall', $1, $2 FROM raised"#,
        rule_id,
        detail
    );
    rows_written(db, statement).await
}

/// Ends the rule's `capacity_shortfall` (the forecast fits again): a later shortfall is a
/// new occurrence.
pub async fn end_capacity_shortfall(db: impl PgExecutor<'_>, rule_id: i64) -> Result<(), StoreError> {
    sqlx::query!(
        "DELETE FROM alert_conditions WHERE rule_id = $1 AND event = 'capacity_shortfall'",
        rule_id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The job's failures in a row: final attempts that failed since its last success.
pub async fn failures_in_a_row(db: impl PgExecutor<'_>, job_id: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM runs JOIN jobs ON jobs.id = runs.job_id
           WHERE runs.job_id = $1 AND runs.state IN ('failed', 'timed_out', 'abandoned')
             AND runs.attempt >= jobs.retry_max_attempts
             AND runs.finished_at > coalesce(
                 (SELECT max(last_success_at) FROM job_stat_shards WHERE job_stat_shards.job_id = $1),
                 '-infinity')"#,
        job_id
    )
    .fetch_one(db)
    .await?)
}

/// Records that the rule's condition `event` holds for the job since `since`; true when
/// it was not already raised (the occurrence is new).
pub async fn raise(
    conn: &mut PgConnection,
    rule_id: i64,
    event: &str,
    job_id: i64,
    since: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "INSERT INTO alert_conditions (rule_id, event, job_id, raised_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING",
        rule_id,
        event,
        job_id,
        since
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Ends what a success ends: a job's failing state (raising `recovered` for its rule),
/// its failures in a row and its silence, for jobs that succeeded after they were raised.
pub async fn recover(db: impl PgExecutor<'_>) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"WITH healed AS (
               DELETE FROM alert_conditions AS c
               WHERE c.event IN ('failing', 'consecutive_failures', 'no_success_within')
                 AND (SELECT max(last_success_at) FROM job_stat_shards
                      WHERE job_stat_shards.job_id = c.job_id) > c.raised_at
               RETURNING c.rule_id, c.event, c.job_id)
           INSERT INTO alert_events (event, rule_id, job_id, detail)
           SELECT 'recovered', healed.rule_id, healed.job_id,
                  jsonb_build_object('succeeded_at', (SELECT max(last_success_at) FROM job_stat_shards
                                                      WHERE job_stat_shards.job_id = healed.job_id))
           FROM healed WHERE healed.event = 'failing'"#
    );
    rows_written(db, statement).await
}

/// Forgets occurrences that are over: runs no longer running, outages an executor ended.
pub async fn clear_ended(db: impl PgExecutor<'_>) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        r#"DELETE FROM alert_conditions AS c
           WHERE (c.event = 'run_too_long'
                  AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = c.run_id AND runs.state = 'running'))
              OR (c.event = 'no_executor'
                  AND EXISTS (SELECT 1 FROM executors WHERE role = 'executor' AND state = 'alive'))"#
    );
    rows_written(db, statement).await
}
