//! `triggers` and `misfires`: creating triggers with their first instant, listing,
//! version-checked updates (which also move `next_fire_at`) and deletes (every write wakes
//! the executors through the `triggers_changed` database trigger), and the statements of the firing transaction (claim due, record misfires, advance;
//! the fired runs themselves are born in [`crate::store::runs::insert_fired_runs`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};

use super::StoreError;

use crate::calendar::CalendarMode;
use crate::model::{Misfire, Trigger, TriggerKind, TriggerTiming};
use crate::schedule::{hash_seed, ScheduleError, TriggerSchedule};

/// What it takes to create a trigger.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTrigger {
    /// When it fires.
    #[serde(flatten)]
    pub timing: TriggerTiming,
    /// Created paused?
    pub paused: bool,
    /// Runs of this trigger claimed or running at once (None: no cap of its own).
    #[serde(default)]
    pub max_concurrency: Option<i32>,
}

impl NewTrigger {
    /// An interval trigger with the schema's defaults.
    pub fn interval(secs: i64) -> NewTrigger {
        NewTrigger::with(TriggerTiming::interval(secs))
    }

    /// A cron trigger with the schema's defaults.
    pub fn cron(text: impl Into<String>, timezone: impl Into<String>) -> NewTrigger {
        NewTrigger::with(TriggerTiming {
            cron: Some(text.into()),
            timezone: timezone.into(),
            ..TriggerTiming::of_kind(TriggerKind::Cron)
        })
    }

    /// A one-shot trigger.
    pub fn once(at: DateTime<Utc>) -> NewTrigger {
        NewTrigger::with(TriggerTiming {
            at: Some(at),
            ..TriggerTiming::of_kind(TriggerKind::Once)
        })
    }

    /// An unpaused trigger without a cap of its own that fires as `timing` says.
    pub fn with(timing: TriggerTiming) -> NewTrigger {
        NewTrigger {
            timing,
            paused: false,
            max_concurrency: None,
        }
    }

    /// Its schedule (see [`TriggerTiming::schedule`]).
    pub fn schedule(
        &self,
        anchor: DateTime<Utc>,
        seed: Option<u64>,
    ) -> Result<TriggerSchedule, ScheduleError> {
        self.timing.schedule(anchor, seed)
    }
}

/// A statement on a trigger table (a job's or a workflow's) that binds the schedule of a
/// [`NewTrigger`] in the order both tables' statements list it: `$pre` first, then kind to
/// paused, then `$post`.
macro_rules! query_schedule {
    ($sql:tt, $trigger:ident, [$($pre:expr),*], [$($post:expr),*]) => {
        sqlx::query!(
            $sql,
            $($pre,)*
            $trigger.timing.kind as TriggerKind,
            $trigger.timing.cron,
            $trigger.timing.timezone,
            $trigger.timing.interval_secs,
            $trigger.timing.at,
            $trigger.timing.start_at,
            $trigger.timing.end_at,
            $trigger.timing.misfire as Misfire,
            $trigger.timing.misfire_threshold_secs,
            $trigger.paused,
            $($post),*
        )
    };
}
pub(crate) use query_schedule;

/// The [`TriggerTiming`] of a row of a checked statement that returns the timing columns
/// (the checking macros fill only flat structs).
macro_rules! timing_of {
    ($row:ident) => {
        TriggerTiming {
            kind: $row.kind,
            cron: $row.cron,
            timezone: $row.timezone,
            interval_secs: $row.interval_secs,
            at: $row.at,
            start_at: $row.start_at,
            end_at: $row.end_at,
            misfire: $row.misfire,
            misfire_threshold_secs: $row.misfire_threshold_secs,
        }
    };
}
pub(crate) use timing_of;

/// The [`Trigger`] of a row of a checked statement that returns every column of `triggers`.
macro_rules! trigger_of {
    ($row:ident) => {
        Trigger {
            id: $row.id,
            job_id: $row.job_id,
            timing: timing_of!($row),
            paused: $row.paused,
            next_fire_at: $row.next_fire_at,
            last_fired_at: $row.last_fired_at,
            version: $row.version,
            created_at: $row.created_at,
            updated_at: $row.updated_at,
            max_concurrency: $row.max_concurrency,
        }
    };
}

/// Why a trigger could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateTriggerError {
    /// The definition is invalid (the error names the field).
    #[error(transparent)]
    Invalid(#[from] ScheduleError),
    /// The database failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Validates and inserts a trigger, with its first instant at or after `now`.
pub async fn create(
    db: impl PgExecutor<'_>,
    job_id: i64,
    trigger: &NewTrigger,
    now: DateTime<Utc>,
) -> Result<Trigger, CreateTriggerError> {
    let schedule = trigger.schedule(now, Some(hash_seed(job_id)))?;
    let next_fire_at = schedule.first_at_or_after(now);
    let row = query_schedule!(
        r#"INSERT INTO triggers (job_id, kind, cron, timezone, interval_secs, at, start_at, end_at,
                                misfire, misfire_threshold_secs, paused, next_fire_at, created_at,
                                max_concurrency)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
           RETURNING id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency"#,
        trigger,
        [job_id],
        [next_fire_at, now, trigger.max_concurrency]
    )
    .map(|row| trigger_of!(row))
    .fetch_one(db)
    .await
    .map_err(StoreError::from)?;
    Ok(row)
}

/// One trigger by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Trigger>, StoreError> {
    Ok(
        sqlx::query!( r#"SELECT id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency FROM triggers WHERE id = $1"#, id)
            .map(|row| trigger_of!(row))
            .fetch_optional(db)
            .await?,
    )
}

/// A due trigger locked for firing, with what the firing needs to know besides it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DueTrigger {
    /// The trigger.
    #[sqlx(flatten)]
    pub trigger: Trigger,
    /// Its job needs no lock (parallel, unbounded), and neither a selector nor a trigger
    /// cap nor a namespace quota restricts where and how many run, and this executor
    /// takes its namespace: its runs can start as they are fired.
    pub lock_free: bool,
    /// Its job's route fans an instant out to several runs (broadcast, shard).
    pub fan_out: bool,
    /// Its job runs in the executor's process (not a shell job's process).
    pub in_process: bool,
    /// `jobs.version` of its job (the firing executor may have that definition already).
    pub job_version: i64,
    /// `jobs.priority` of its job, which its runs take at birth.
    pub job_priority: i32,
    /// The database's clock, which decides what is due.
    pub db_now: DateTime<Utc>,
    /// Its calendar (`triggers.calendar_id`): only triggers that have one make the firing
    /// read calendars.
    pub calendar_id: Option<i64>,
    /// Up to how many seconds each instant's run is delayed (fixed per instant).
    pub jitter_secs: Option<i32>,
    /// The instants after which it ends, and how many it has fired.
    pub max_fires: Option<i64>,
    /// Instants fired so far (counted only for triggers with `max_fires`).
    pub fires: i64,
    /// The job its runs wait for (`after`): only triggers that have one make the firing
    /// hold their runs.
    pub after_job_id: Option<i64>,
}

/// The due-trigger claim (`$1` batch, `$2` seconds of fire-ahead, `$3` the namespaces
/// whose runs this executor may start as it fires them, NULL: all): up to a batch of
/// triggers of unpaused jobs due now or within the fire-ahead window, earliest first;
/// triggers another executor is firing are skipped, not waited for. It also silences the
/// change notification for the transaction (peers need no wake-up for instants this
/// executor handles) and reads the database's clock.
pub const CLAIM_DUE_SQL: &str = include_str!("triggers/sql/claim_due.sql");

// Checked at build time like every other statement: the macro below is never run. Its
// rows are read with `FromRow` instead, because `DueTrigger` embeds a `Trigger`, which
// the checking macros cannot fill.
const _: fn() = || {
    let _ = sqlx::query_file!(
        "src/store/triggers/sql/claim_due.sql",
        0_i64,
        0.0_f64,
        None::<&[String]>
    );
};

/// Locks up to `batch` triggers due within `ahead` (see [`CLAIM_DUE_SQL`]).
pub async fn claim_due(
    conn: &mut PgConnection,
    batch: i64,
    ahead: std::time::Duration,
) -> Result<Vec<DueTrigger>, StoreError> {
    claim_due_for(conn, batch, ahead, None).await
}

/// Like [`claim_due`], for an executor that starts only runs of jobs in `namespaces`
/// (None: every namespace): the others' runs are fired queued.
pub async fn claim_due_for(
    conn: &mut PgConnection,
    batch: i64,
    ahead: std::time::Duration,
    namespaces: Option<&[String]>,
) -> Result<Vec<DueTrigger>, StoreError> {
    Ok(sqlx::query_as::<_, DueTrigger>(CLAIM_DUE_SQL)
        .bind(batch)
        .bind(ahead.as_secs_f64())
        .bind(namespaces)
        .fetch_all(conn)
        .await?)
}

/// Tells every executor, when the transaction commits, the instants at which runs fired
/// ahead become claimable (the queue's own notification covers only runs claimable at
/// once). The payload is their epoch milliseconds, comma-separated, at most
/// [`MAX_ANNOUNCED`] of them, the earliest first.
pub async fn announce_runs_at(conn: &mut PgConnection, instants: &[DateTime<Utc>]) -> Result<(), StoreError> {
    let mut millis: Vec<i64> = instants.iter().map(DateTime::timestamp_millis).collect();
    millis.sort_unstable();
    millis.dedup();
    if millis.is_empty() {
        return Ok(());
    }
    let payload = millis
        .iter()
        .take(MAX_ANNOUNCED)
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    sqlx::query!("SELECT pg_notify($1, $2)", super::RUNS_AT_CHANNEL, payload)
        .execute(conn)
        .await?;
    Ok(())
}

/// The most instants one announcement carries (a notification's payload is bounded);
/// executors find later ones by their once-a-second look at the queue.
pub const MAX_ANNOUNCED: usize = 400;

/// A stretch of instants of one trigger that will not run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedInstants {
    /// The trigger.
    pub trigger_id: i64,
    /// Its job.
    pub job_id: i64,
    /// The first missed instant.
    pub first: DateTime<Utc>,
    /// The last missed instant.
    pub last: DateTime<Utc>,
    /// How many.
    pub count: i64,
    /// The policy that decided.
    pub policy: Misfire,
    /// Why, in words.
    pub reason: String,
}

impl MissedInstants {
    /// The stretch of `count` instants of `trigger` from `first` to `last`, missed under
    /// its misfire policy for `reason`.
    pub fn of(
        trigger: &Trigger,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        count: i64,
        reason: String,
    ) -> MissedInstants {
        MissedInstants {
            trigger_id: trigger.id,
            job_id: trigger.job_id,
            first,
            last,
            count,
            policy: trigger.timing.misfire,
            reason,
        }
    }
}

/// Records missed stretches, one row each.
pub async fn record_misfires(conn: &mut PgConnection, missed: &[MissedInstants]) -> Result<(), StoreError> {
    if missed.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&MissedInstants) -> String| missed.iter().map(f).collect::<Vec<_>>();
    sqlx::query!(
        "INSERT INTO misfires (trigger_id, job_id, first_instant, last_instant, instants, policy, reason)
         SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[],
                              $5::bigint[], $6::text[], $7::text[])",
        &missed.iter().map(|m| m.trigger_id).collect::<Vec<_>>(),
        &missed.iter().map(|m| m.job_id).collect::<Vec<_>>(),
        &missed.iter().map(|m| m.first).collect::<Vec<_>>(),
        &missed.iter().map(|m| m.last).collect::<Vec<_>>(),
        &missed.iter().map(|m| m.count).collect::<Vec<_>>(),
        &column(|m| m.policy.as_str().to_owned()),
        &column(|m| m.reason.clone())
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Counts the instants fired by triggers that end after a number of them (`max_fires`),
/// `last` being the latest each fired: a trigger that reached its number ends there
/// (its `end_at` becomes that instant, so no later one is ever due, missed or forecast).
pub async fn count_fires(
    conn: &mut PgConnection,
    trigger_ids: &[i64],
    fired: &[i64],
    last: &[DateTime<Utc>],
) -> Result<(), StoreError> {
    if trigger_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE triggers SET fires = fires + counted.fired,
                             end_at = CASE WHEN fires + counted.fired >= max_fires
                                           THEN greatest(counted.last, start_at + interval '1 microsecond')
                                           ELSE end_at END
         FROM UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[]) AS counted (id, fired, last)
         WHERE triggers.id = counted.id",
        trigger_ids,
        fired,
        last
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Moves each trigger's `next_fire_at` on (NULL when it has no instant left).
pub async fn advance(
    conn: &mut PgConnection,
    trigger_ids: &[i64],
    next_fire_at: &[Option<DateTime<Utc>>],
    fired_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    if trigger_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE triggers SET next_fire_at = advanced.next, last_fired_at = $3
         FROM UNNEST($1::bigint[], $2::timestamptz[]) AS advanced (id, next)
         WHERE triggers.id = advanced.id",
        trigger_ids,
        next_fire_at as &[Option<DateTime<Utc>>],
        fired_at
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets each trigger's `next_fire_at` without firing anything (a resume skipping the
/// instants that passed while paused).
pub async fn move_next_fire_at(
    conn: &mut PgConnection,
    trigger_ids: &[i64],
    next_fire_at: &[Option<DateTime<Utc>>],
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE triggers SET next_fire_at = moved.next
         FROM UNNEST($1::bigint[], $2::timestamptz[]) AS moved (id, next)
         WHERE triggers.id = moved.id",
        trigger_ids,
        next_fire_at as &[Option<DateTime<Utc>>]
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Seconds from the database's clock until the earliest due instant of any unpaused
/// trigger of an unpaused job (negative when overdue), or None when nothing is scheduled.
/// Each trigger's job is looked up by its key, as in the due-trigger claim.
pub async fn seconds_until_earliest_due(db: impl PgExecutor<'_>) -> Result<Option<f64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT EXTRACT(EPOCH FROM (min(next_fire_at) - clock_timestamp()))::float8 FROM (
             SELECT triggers.next_fire_at FROM triggers
             WHERE NOT triggers.paused AND triggers.next_fire_at IS NOT NULL
               AND EXISTS (SELECT FROM jobs WHERE jobs.id = triggers.job_id AND NOT jobs.paused OFFSET 0)
             ORDER BY triggers.next_fire_at LIMIT 1) AS first"
    )
    .fetch_one(db)
    .await?)
}

/// Sets a trigger's paused flag. Resuming keeps `next_fire_at`, so instants that passed
/// while paused go through the misfire policy.
/// Returns the new row (None when the trigger does not exist).
pub async fn set_paused(
    db: impl PgExecutor<'_>,
    id: i64,
    paused: bool,
) -> Result<Option<Trigger>, StoreError> {
    Ok(sqlx::query!(
        r#"UPDATE triggers SET paused = $2, version = version + 1, updated_at = now() WHERE id = $1
           RETURNING id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency"#,
        id,
        paused
    )
    .map(|row| trigger_of!(row))
    .fetch_optional(db)
    .await?)
}

/// A job's triggers, oldest first.
pub async fn list_for_job(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<Trigger>, StoreError> {
    Ok(
        sqlx::query!( r#"SELECT id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency FROM triggers WHERE job_id = $1 ORDER BY id"#, job_id)
            .map(|row| trigger_of!(row))
            .fetch_all(db)
            .await?,
    )
}

/// One trigger, locked for the rest of the transaction.
pub async fn get_for_update(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Trigger>, StoreError> {
    Ok(
        sqlx::query!( r#"SELECT id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency FROM triggers WHERE id = $1 FOR UPDATE"#, id)
            .map(|row| trigger_of!(row))
            .fetch_optional(db)
            .await?,
    )
}

/// Replaces a trigger's definition if its version is still `version`; None on a lost race.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: i64,
    version: i64,
    trigger: &NewTrigger,
    next_fire_at: Option<DateTime<Utc>>,
) -> Result<Option<Trigger>, StoreError> {
    Ok(query_schedule!(
        r#"UPDATE triggers SET kind = $3, cron = $4, timezone = $5, interval_secs = $6, at = $7,
                               start_at = $8, end_at = $9, misfire = $10, misfire_threshold_secs = $11,
                               paused = $12, next_fire_at = $13, max_concurrency = $14,
                               version = version + 1, updated_at = now()
           WHERE id = $1 AND version = $2
           RETURNING id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency"#,
        trigger,
        [id, version],
        [next_fire_at, trigger.max_concurrency]
    )
    .map(|row| trigger_of!(row))
    .fetch_optional(db)
    .await?)
}

/// Deletes a job's triggers (their runs stay, with `trigger_id` NULL).
pub async fn delete_for_job(db: impl PgExecutor<'_>, job_id: i64) -> Result<u64, StoreError> {
    let done = sqlx::query!("DELETE FROM triggers WHERE job_id = $1", job_id)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes a trigger (its runs stay, with `trigger_id` NULL).
pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM triggers WHERE id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The recorded misfires of a trigger that overlap `[from, to)`.
pub async fn misfires_between(
    db: impl PgExecutor<'_>,
    trigger_id: i64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MissedInstants>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT trigger_id, job_id, first_instant, last_instant, instants, policy AS "policy: Misfire", reason
           FROM misfires WHERE trigger_id = $1 AND last_instant >= $2 AND first_instant < $3
           ORDER BY first_instant"#,
        trigger_id,
        from,
        to
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| MissedInstants {
            trigger_id: row.trigger_id,
            job_id: row.job_id,
            first: row.first_instant,
            last: row.last_instant,
            count: row.instants,
            policy: row.policy,
            reason: row.reason,
        })
        .collect())
}

/// A trigger with what the reconciler needs of its job: triggers that are not paused,
/// of jobs that are not paused, and since when both have been as they are.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The trigger.
    pub trigger: Trigger,
    /// The last change of its job (a pause or an edit moves what was due).
    pub job_updated_at: DateTime<Utc>,
}

/// Every trigger whose instants are due to fire: not paused, of a job not paused.
pub async fn watched(db: impl PgExecutor<'_>) -> Result<Vec<Watched>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT triggers.id, triggers.job_id, triggers.kind AS "kind: TriggerKind", cron, timezone, interval_secs, at,
                  start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, triggers.paused,
                  next_fire_at, last_fired_at, triggers.version, triggers.created_at, triggers.updated_at,
                  triggers.max_concurrency, jobs.updated_at AS job_updated_at
           FROM triggers JOIN jobs ON jobs.id = triggers.job_id
           WHERE NOT triggers.paused AND NOT jobs.paused
           ORDER BY triggers.id"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Watched {
            job_updated_at: row.job_updated_at,
            trigger: trigger_of!(row),
        })
        .collect())
}

/// The default parameters of the given triggers' runs (`probactr_run_params` lays a run's
/// own over them), by trigger id.
pub async fn params_of(
    db: impl PgExecutor<'_>,
    ids: &[i64],
) -> Result<Vec<(i64, serde_json::Value)>, StoreError> {
    Ok(
        sqlx::query!("SELECT id, params FROM triggers WHERE id = ANY($1)", ids)
            .fetch_all(db)
            .await?
            .into_iter()
            .map(|row| (row.id, row.params))
            .collect(),
    )
}

/// The triggers whose parameters hold a sealed value (a secret parameter), with them.
pub async fn with_sealed_params(
    db: impl PgExecutor<'_>,
) -> Result<Vec<(i64, serde_json::Value)>, StoreError> {
    Ok(sqlx::query!(
        r#"SELECT id, params FROM triggers
           WHERE EXISTS (SELECT 1 FROM jsonb_each(params) AS p
                         WHERE jsonb_typeof(p.value) = 'object' AND p.value ? '$sealed')"#
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| (row.id, row.params))
    .collect())
}

/// Replaces a trigger's default parameters (a JSON object).
pub async fn set_params(
    db: impl PgExecutor<'_>,
    id: i64,
    params: &serde_json::Value,
) -> Result<(), StoreError> {
    sqlx::query!("UPDATE triggers SET params = $2 WHERE id = $1", id, params)
        .execute(db)
        .await?;
    Ok(())
}

/// A trigger's settings beyond its schedule: its calendar, jitter, number of fires and
/// the job it waits for. Kept apart from [`Trigger`]: the firing reads them only for triggers that have them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Extras {
    /// The calendar of its namespace it follows (None: none).
    pub calendar: Option<String>,
    /// Whether it skips the calendar's days (`exclude`) or fires on them only (`only`).
    pub calendar_mode: Option<CalendarMode>,
    /// Each instant's run waits a delay of up to this many seconds, fixed per instant.
    pub jitter_secs: Option<i32>,
    /// It ends after this many instants.
    pub max_fires: Option<i64>,
    /// The instants it has fired (counted when it has `max_fires`).
    pub fires: i64,
    /// The job of its namespace each instant's run waits for.
    pub after: Option<After>,
}

/// A trigger's dependency on another job: each instant's run waits until a run of `job`
/// scheduled the same day (in the trigger's time zone) has succeeded, then runs once;
/// `within_secs` after its instant it ends failed instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct After {
    /// The name of the job waited for (same namespace).
    pub job: String,
    /// How long a run waits at most, from its instant.
    pub within_secs: i32,
}

/// The [`Extras`] of the given triggers, by id.
pub async fn extras_of(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<Vec<(i64, Extras)>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT triggers.id AS "id!", calendars.name AS "calendar?", triggers.calendar_mode, triggers.jitter_secs,
                  triggers.max_fires, triggers.fires AS "fires!", upstream.name AS "after_job?",
                  triggers.after_within_secs
           FROM triggers LEFT JOIN calendars ON calendars.id = triggers.calendar_id
                LEFT JOIN jobs AS upstream ON upstream.id = triggers.after_job_id
           WHERE triggers.id = ANY ($1)"#,
        ids
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let extras = Extras {
                calendar: row.calendar,
                calendar_mode: row.calendar_mode.and_then(|mode| mode.parse().ok()),
                jitter_secs: row.jitter_secs,
                max_fires: row.max_fires,
                fires: row.fires,
                after: row
                    .after_job
                    .zip(row.after_within_secs)
                    .map(|(job, within_secs)| After { job, within_secs }),
            };
            (row.id, extras)
        })
        .collect())
}

/// Sets a trigger's extras: its calendar (by id, with its mode), jitter and `max_fires`.
pub async fn set_extras(
    db: impl PgExecutor<'_>,
    id: i64,
    calendar: Option<(i64, CalendarMode)>,
    jitter_secs: Option<i32>,
    max_fires: Option<i64>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE triggers SET calendar_id = $2, calendar_mode = $3, jitter_secs = $4, max_fires = $5
         WHERE id = $1",
        id,
        calendar.map(|(calendar_id, _)| calendar_id),
        calendar.map(|(_, mode)| mode.as_str()),
        jitter_secs,
        max_fires
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Sets the job a trigger's runs wait for (by id) and for how many seconds at most
/// (None: they wait for nothing).
pub async fn set_after(
    db: impl PgExecutor<'_>,
    id: i64,
    after: Option<(i64, i32)>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE triggers SET after_job_id = $2, after_within_secs = $3 WHERE id = $1",
        id,
        after.map(|(job_id, _)| job_id),
        after.map(|(_, within)| within)
    )
    .execute(db)
    .await?;
    Ok(())
}
