//! The monitor's housekeeping of history: pruning ended runs and old records past the
//! retention, keeping the daily partitions of ended runs ahead and dropping old ones,
//! vacuuming the live runs and analyzing the day's ended ones.

use std::time::Duration;

use sqlx::{AssertSqlSafe, PgExecutor};

use super::{rows_written, StoreError};

/// Deletes up to `batch` finished runs older than `retention`; returns how many. Call it
/// repeatedly: short statements keep locks short.
pub async fn prune_runs(db: impl PgExecutor<'_>, retention: Duration, batch: i64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "DELETE FROM runs WHERE id IN (
             SELECT id FROM runs
             WHERE queued_at < now() - make_interval(secs => $1)
               AND state NOT IN ('queued', 'claimed', 'running')
               AND NOT EXISTS (SELECT 1 FROM runs AS later
                               WHERE later.first_run_id = runs.id
                                 AND later.state IN ('queued', 'claimed', 'running'))
             LIMIT $2)",
        retention.as_secs_f64(),
        batch
    );
    rows_written(db, statement).await
}

/// How many days ahead the daily partitions of ended runs are created.
pub const PARTITION_DAYS_AHEAD: i32 = 7;

/// Keeps the ended runs' daily partitions (migration `20261124000001`): creates the days
/// ahead, and drops whole days past `retention` (all their runs queued before the cutoff,
/// no live retry of theirs). Returns the runs dropped. [`prune_runs`] deletes the rest
/// row by row (the default partition, the boundary day, runs kept by a live retry).
pub async fn maintain_history(db: impl PgExecutor<'_>, retention: Duration) -> Result<u64, StoreError> {
    let dropped = sqlx::query_scalar!(
        r#"SELECT probactr_maintain_run_partitions(make_interval(secs => $1), $2) AS "dropped!""#,
        retention.as_secs_f64(),
        PARTITION_DAYS_AHEAD
    )
    .fetch_one(db)
    .await?;
    Ok(dropped.max(0) as u64)
}

/// Rows of the live runs changed (or dead) since their last vacuum below which the next
/// vacuum is skipped.
pub const VACUUM_AFTER_CHANGES: i64 = 1000;

/// Vacuums and analyzes the live runs' partition: its rows change state several times
/// each and leave dead index entries at the head of the claim's index, and its size and
/// mix of states swing with the backlog. A frequent vacuum of this small table keeps the
/// claim's cost flat, and fresh statistics keep its plan an ordered walk of the queue
/// (autovacuum visits a database only once per `autovacuum_naptime`). Skipped when
/// another vacuum holds the table, and when fewer than [`VACUUM_AFTER_CHANGES`] rows
/// changed or died since the last: each vacuum invalidates every session's plans over the
/// live runs, so a quiet cluster vacuumed every few seconds would keep planning its
/// statements again for nothing. Returns whether it vacuumed.
pub async fn vacuum_live_runs(db: impl PgExecutor<'_> + Copy) -> Result<bool, StoreError> {
    let changed = sqlx::query_scalar!(
        r#"SELECT greatest(n_dead_tup, n_mod_since_analyze) AS "changed!"
           FROM pg_stat_user_tables WHERE relid = 'runs_live'::regclass"#
    )
    .fetch_optional(db)
    .await?;
    if changed.is_some_and(|changed| changed < VACUUM_AFTER_CHANGES) {
        return Ok(false);
    }
    sqlx::query("VACUUM (ANALYZE, SKIP_LOCKED) runs_live")
        .execute(db)
        .await?;
    Ok(true)
}

/// Analyzes today's partition of ended runs when it has changed much since it was last
/// analyzed (more than 1,000 rows and a fifth of its size); returns the partition
/// analyzed. The firing checks each instant it inserts against this partition
/// (invariant 1). One analyzed while empty (or never) looks empty to the planner, which
/// then checks by scanning the whole day for every statement instead of probing its
/// index, and autovacuum, which would analyze it, may be off or a minute away.
pub async fn analyze_todays_history(db: impl PgExecutor<'_> + Copy) -> Result<Option<String>, StoreError> {
    let stale = sqlx::query_scalar!(
        r#"SELECT day.oid::regclass::text AS "partition!"
           FROM pg_class AS day JOIN pg_stat_user_tables AS stats ON stats.relid = day.oid
           WHERE day.oid = to_regclass(format('runs_done_%s', to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')))
             AND stats.n_mod_since_analyze > 1000 + 0.2 * greatest(day.reltuples, 0)"#
    )
    .fetch_optional(db)
    .await?;
    if let Some(partition) = &stale {
        // The name is the catalog's own rendering of a regclass: quoted where needed.
        sqlx::query(AssertSqlSafe(format!("ANALYZE {partition}")))
            .execute(db)
            .await?;
    }
    Ok(stale)
}

/// Deletes misfire records, webhook deliveries and dead or stopped process rows older
/// than `retention`.
pub async fn prune_records(db: impl PgExecutor<'_> + Copy, retention: Duration) -> Result<u64, StoreError> {
    let secs = retention.as_secs_f64();
    let misfires = sqlx::query!(
        "DELETE FROM misfires WHERE recorded_at < now() - make_interval(secs => $1)",
        secs
    )
    .execute(db)
    .await?;
    let processes = sqlx::query!(
        "DELETE FROM executors WHERE state IN ('dead', 'stopped')
           AND last_heartbeat_at < now() - make_interval(secs => $1)
           -- One still owning a live run waits for the reaper to end it: its row is what
           -- the reaper finds the run by.
           AND NOT EXISTS (SELECT 1 FROM runs_live WHERE runs_live.executor_id = executors.id
                                                    AND runs_live.state IN ('claimed', 'running'))",
        secs
    )
    .execute(db)
    .await?;
    let deliveries = super::webhook_deliveries::prune(db, secs).await?;
    Ok(misfires.rows_affected() + processes.rows_affected() + deliveries)
}
