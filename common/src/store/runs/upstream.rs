//! Runs waiting for another job (a trigger's `after`): held, released, given up.
//!
//! A run of a trigger with `after` is fired queued like any other, then held in the same
//! transaction ([`hold_for_upstream`]): not claimable (`available_at` in the year 9999,
//! which the claim already skips; not `'infinity'`, which no `DateTime` reads back), its
//! reason saying what it waits for, and one row in `run_waits`. The monitors' pass
//! ([`release_ready`], [`fail_overdue`]) reads only `run_waits`, which holds nothing but
//! waiting runs, so runs of other triggers pay nothing for the feature.

use sqlx::{PgConnection, PgExecutor};

use crate::store::StoreError;

/// Holds the given queued runs of triggers with `after`: each waits for a run of the
/// trigger's `after.job` scheduled the same day (in the trigger's time zone) to succeed,
/// at most `after.within_secs` from its instant. Runs of other triggers are left alone.
pub async fn hold_for_upstream(conn: &mut PgConnection, run_ids: &[i64]) -> Result<(), StoreError> {
    if run_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        r#"WITH held AS (
             INSERT INTO run_waits (run_id, upstream_job_id, day_start, day_end, deadline, reason)
             SELECT runs.id, triggers.after_job_id,
                    local.day::timestamp AT TIME ZONE triggers.timezone,
                    (local.day + 1)::timestamp AT TIME ZONE triggers.timezone,
                    runs.scheduled_at + make_interval(secs => triggers.after_within_secs),
                    format('waiting for %s of %s', upstream.name, to_char(local.day, 'YYYY-MM-DD'))
             FROM runs_live AS runs
             JOIN triggers ON triggers.id = runs.trigger_id
             JOIN jobs AS upstream ON upstream.id = triggers.after_job_id
             CROSS JOIN LATERAL (SELECT (runs.scheduled_at AT TIME ZONE triggers.timezone)::date AS day) AS local
             WHERE runs.id = ANY ($1) AND runs.state = 'queued'
             ON CONFLICT (run_id) DO NOTHING
             RETURNING run_id, reason)
           UPDATE runs_live SET available_at = '9999-01-01T00:00:00Z', reason = held.reason
           FROM held WHERE runs_live.id = held.run_id"#,
        run_ids
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Makes claimable at once the waiting runs whose job waited for has a succeeded run
/// scheduled on their day, and wakes the executors when there are any; returns their
/// ids. Rows of runs no longer queued (cancelled, deleted with their job) are dropped on
/// the way. The released runs are found by an array of ids: joined to `ready`, a plan
/// made while `run_waits` looked empty read it again for every queued run.
pub async fn release_ready(conn: &mut PgConnection) -> Result<Vec<i64>, StoreError> {
    let released = sqlx::query_scalar!(
        r#"WITH ready AS (
             DELETE FROM run_waits AS waits
             WHERE EXISTS (SELECT 1 FROM runs_done AS upstream
                           WHERE upstream.job_id = waits.upstream_job_id AND upstream.state = 'succeeded'
                             AND upstream.scheduled_at >= waits.day_start
                             AND upstream.scheduled_at < waits.day_end)
                OR NOT EXISTS (SELECT 1 FROM runs_live AS runs
                               WHERE runs.id = waits.run_id AND runs.state = 'queued')
             RETURNING run_id)
           UPDATE runs_live SET available_at = now(), reason = NULL
           WHERE runs_live.id = ANY (ARRAY(SELECT run_id FROM ready)) AND runs_live.state = 'queued'
           RETURNING runs_live.id"#
    )
    .fetch_all(&mut *conn)
    .await?;
    if !released.is_empty() {
        sqlx::query!("SELECT pg_notify($1, '')", crate::store::RUNS_CHANNEL)
            .execute(&mut *conn)
            .await?;
    }
    Ok(released)
}

/// Ends `failed` the waiting runs past their deadline, the reason saying what they waited
/// for (see `sql/fail_overdue_waits.sql`); returns their ids.
pub async fn fail_overdue(db: impl PgExecutor<'_>) -> Result<Vec<i64>, StoreError> {
    Ok(
        sqlx::query_file_scalar!("src/store/runs/sql/fail_overdue_waits.sql")
            .fetch_all(db)
            .await?,
    )
}
