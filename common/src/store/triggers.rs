//! `triggers` and `misfires`: creating triggers with their first instant, listing,
//! version-checked updates (which also move `next_fire_at`) and deletes (every write wakes
//! the executors through the `triggers_changed` database trigger), and the statements of the firing transaction (claim due, insert runs, record
//! misfires, advance).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};

use super::StoreError;
use uuid::Uuid;

use crate::model::{Misfire, Run, RunState, Trigger, TriggerKind};
use crate::schedule::{ScheduleError, TriggerSchedule};

/// What it takes to create a trigger.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTrigger {
    /// cron, interval or once.
    pub kind: TriggerKind,
    /// The cron text (kind = cron).
    pub cron: Option<String>,
    /// IANA zone of the cron text.
    pub timezone: String,
    /// Seconds between instants (kind = interval).
    pub interval_secs: Option<i64>,
    /// The instant (kind = once).
    pub at: Option<DateTime<Utc>>,
    /// No instant before this.
    pub start_at: Option<DateTime<Utc>>,
    /// No instant after this.
    pub end_at: Option<DateTime<Utc>>,
    /// What to do with instants that passed unfired.
    pub misfire: Misfire,
    /// Seconds of lateness after which an instant counts as misfired.
    pub misfire_threshold_secs: i32,
    /// Created paused?
    pub paused: bool,
    /// Runs of this trigger claimed or running at once (None: no cap of its own).
    #[serde(default)]
    pub max_concurrency: Option<i32>,
}

impl NewTrigger {
    /// An interval trigger with the schema's defaults.
    pub fn interval(secs: i64) -> NewTrigger {
        NewTrigger {
            interval_secs: Some(secs),
            ..NewTrigger::base(TriggerKind::Interval)
        }
    }

    /// A cron trigger with the schema's defaults.
    pub fn cron(text: impl Into<String>, timezone: impl Into<String>) -> NewTrigger {
        NewTrigger {
            cron: Some(text.into()),
            timezone: timezone.into(),
            ..NewTrigger::base(TriggerKind::Cron)
        }
    }

    /// A one-shot trigger.
    pub fn once(at: DateTime<Utc>) -> NewTrigger {
        NewTrigger {
            at: Some(at),
            ..NewTrigger::base(TriggerKind::Once)
        }
    }

    fn base(kind: TriggerKind) -> NewTrigger {
        NewTrigger {
            kind,
            cron: None,
            timezone: "UTC".to_owned(),
            interval_secs: None,
            at: None,
            start_at: None,
            end_at: None,
            misfire: Misfire::FireOnce,
            misfire_threshold_secs: 60,
            paused: false,
            max_concurrency: None,
        }
    }

    /// The schedule this definition describes, validated; `anchor` is the creation time
    /// (intervals count from `start_at`, else from it).
    pub fn schedule(&self, anchor: DateTime<Utc>) -> Result<TriggerSchedule, ScheduleError> {
        TriggerSchedule::from_parts(
            self.kind,
            self.cron.as_deref(),
            &self.timezone,
            self.interval_secs,
            self.at,
            self.start_at,
            self.end_at,
            anchor,
        )
    }
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
    let schedule = trigger.schedule(now)?;
    let next_fire_at = schedule.first_at_or_after(now);
    let row = sqlx::query_as!(
        Trigger,
        r#"INSERT INTO triggers (job_id, kind, cron, timezone, interval_secs, at, start_at, end_at,
                                misfire, misfire_threshold_secs, paused, next_fire_at, created_at,
                                max_concurrency)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
           RETURNING id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency"#,
        job_id,
trigger.kind as TriggerKind,
        trigger.cron,
        trigger.timezone,
        trigger.interval_secs,
        trigger.at,
        trigger.start_at,
        trigger.end_at,
        trigger.misfire as Misfire,
        trigger.misfire_threshold_secs,
        trigger.paused,
        next_fire_at,
        now,
        trigger.max_concurrency
    )
    .fetch_one(db)
    .await
    .map_err(StoreError::from)?;
    Ok(row)
}

/// One trigger by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Trigger>, StoreError> {
    Ok(
        sqlx::query_as!(Trigger, r#"SELECT id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency FROM triggers WHERE id = $1"#, id)
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
    /// cap restricts where and how many run: its runs can start as they are fired.
    pub lock_free: bool,
    /// Its job's route fans an instant out to several runs (broadcast, shard).
    pub fan_out: bool,
    /// `jobs.version` of its job (the firing executor may have that definition already).
    pub job_version: i64,
    /// The database's clock, which decides what is due.
    pub db_now: DateTime<Utc>,
}

/// The due-trigger claim (`$1` batch, `$2` seconds of fire-ahead): up to a batch of
/// triggers of unpaused jobs due now or within the fire-ahead window, earliest first;
/// triggers another executor is firing are skipped, not waited for. It also silences the
/// change notification for the transaction (peers need no wake-up for instants this
/// executor handles) and reads the database's clock.
pub const CLAIM_DUE_SQL: &str = "WITH quiet AS (SELECT set_config('probactr.quiet', 'on', true))
     SELECT triggers.*,
            (jobs.parallel AND jobs.max_concurrency IS NULL AND triggers.max_concurrency IS NULL
             AND jobs.selector = '{}'::jsonb AND jobs.route = 'any' AND jobs.mode = 'batch') AS lock_free,
            jobs.route <> 'any' AS fan_out,
            jobs.version AS job_version, now() AS db_now
     FROM triggers JOIN jobs ON jobs.id = triggers.job_id CROSS JOIN quiet
     WHERE NOT triggers.paused AND triggers.next_fire_at <= now() + make_interval(secs => $2)
       AND NOT jobs.paused
     ORDER BY triggers.next_fire_at
     LIMIT $1
     FOR UPDATE OF triggers SKIP LOCKED";

/// Locks up to `batch` triggers due within `ahead` (see [`CLAIM_DUE_SQL`]).
pub async fn claim_due(
    conn: &mut PgConnection,
    batch: i64,
    ahead: std::time::Duration,
) -> Result<Vec<DueTrigger>, StoreError> {
    Ok(sqlx::query_as::<_, DueTrigger>(CLAIM_DUE_SQL)
        .bind(batch)
        .bind(ahead.as_secs_f64())
        .fetch_all(conn)
        .await?)
}

/// The first attempts of fired instants, in columns.
#[derive(Debug, Clone, Default)]
pub struct FiredRuns {
    /// Each run's job.
    pub job_ids: Vec<i64>,
    /// Each run's trigger.
    pub trigger_ids: Vec<i64>,
    /// Each run's instant.
    pub instants: Vec<DateTime<Utc>>,
    /// Whether the firing executor starts the run itself (it has a free slot and the job
    /// needs no lock): such a run is inserted `running` on that executor.
    pub owned: Vec<bool>,
    /// Instants of jobs whose route fans out (broadcast, shard): each becomes the runs
    /// `probactr_run_targets` lists, all queued.
    pub fanned_out: FannedOut,
}

/// Instants whose job's route makes several runs of each.
#[derive(Debug, Clone, Default)]
pub struct FannedOut {
    /// Each instant's job.
    pub job_ids: Vec<i64>,
    /// Each instant's trigger.
    pub trigger_ids: Vec<i64>,
    /// The instants.
    pub instants: Vec<DateTime<Utc>>,
}

impl FiredRuns {
    /// Adds one run.
    pub fn push(&mut self, job_id: i64, trigger_id: i64, instant: DateTime<Utc>, owned: bool) {
        self.job_ids.push(job_id);
        self.trigger_ids.push(trigger_id);
        self.instants.push(instant);
        self.owned.push(owned);
    }

    /// Adds an instant of a job whose route fans out.
    pub fn push_fanned_out(&mut self, job_id: i64, trigger_id: i64, instant: DateTime<Utc>) {
        self.fanned_out.job_ids.push(job_id);
        self.fanned_out.trigger_ids.push(trigger_id);
        self.fanned_out.instants.push(instant);
    }
}

/// Inserts the first attempts of fired instants; an instant that already has a run is
/// left alone (invariant 1). Owned runs start on `executor_id` in the same statement
/// (unless it is cordoned: then they are queued like the others).
/// A run fired ahead of its instant waits in the queue until it: it is claimable, and
/// counts as queued (for the misfire threshold), from its instant.
/// Returns the inserted rows.
pub async fn insert_fired_runs(
    conn: &mut PgConnection,
    runs: &FiredRuns,
    executor_id: Uuid,
) -> Result<Vec<Run>, StoreError> {
    let mut inserted = insert_single_runs(&mut *conn, runs, executor_id).await?;
    inserted.extend(insert_fanned_out_runs(&mut *conn, &runs.fanned_out).await?);
    Ok(inserted)
}

async fn insert_single_runs(
    conn: &mut PgConnection,
    runs: &FiredRuns,
    executor_id: Uuid,
) -> Result<Vec<Run>, StoreError> {
    if runs.trigger_ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as!(
        Run,
        r#"INSERT INTO runs (job_id, trigger_id, scheduled_at, queued_at, available_at, state, executor_id,
                           claimed_at, started_at, heartbeat_at)
         SELECT fired.job_id, fired.trigger_id, fired.at, greatest(fired.at, now()), greatest(fired.at, now()),
                CASE WHEN fired.owned AND me.may_own THEN 'running' ELSE 'queued' END,
                CASE WHEN fired.owned AND me.may_own THEN $5::uuid END,
                CASE WHEN fired.owned AND me.may_own THEN now() END,
                CASE WHEN fired.owned AND me.may_own THEN now() END,
                CASE WHEN fired.owned AND me.may_own THEN now() END
         FROM UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bool[]) AS fired (job_id, trigger_id, at, owned)
         -- A cordoned executor starts nothing itself, not even what it fires.
         CROSS JOIN (SELECT NOT EXISTS (SELECT 1 FROM executors WHERE id = $5 AND cordoned) AS may_own) AS me
         -- An instant whose first attempt already ended is in `runs_done`, which the live
         -- partition's unique index cannot see.
         WHERE NOT EXISTS (SELECT 1 FROM runs_done AS done
                           WHERE done.trigger_id = fired.trigger_id AND done.scheduled_at = fired.at
                             AND done.attempt = 1)
         ON CONFLICT DO NOTHING
         RETURNING id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica"#,
        &runs.job_ids,
        &runs.trigger_ids,
        &runs.instants,
        &runs.owned,
        executor_id
    )
    .fetch_all(conn)
    .await?)
}

/// Inserts the runs of instants whose job fans out (see migration
/// `2026112601000001_routes_and_services.sql`): one per live executor, or one per shard,
/// all queued; an instant that has a first attempt ended is left alone, like any other.
async fn insert_fanned_out_runs(conn: &mut PgConnection, fanned: &FannedOut) -> Result<Vec<Run>, StoreError> {
    if fanned.trigger_ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as!(
        Run,
        r#"INSERT INTO runs (job_id, trigger_id, scheduled_at, queued_at, available_at, shard, shard_total, pinned_to)
         SELECT fired.job_id, fired.trigger_id, fired.at, greatest(fired.at, now()), greatest(fired.at, now()),
                target.shard, target.shard_total, target.pinned_to
         FROM UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[]) AS fired (job_id, trigger_id, at)
         CROSS JOIN LATERAL probactr_run_targets(fired.job_id) AS target
         WHERE NOT EXISTS (SELECT 1 FROM runs_done AS done
                           WHERE done.trigger_id = fired.trigger_id AND done.scheduled_at = fired.at
                             AND done.attempt = 1)
         ON CONFLICT DO NOTHING
         RETURNING id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state AS "state: RunState", reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica"#,
        &fanned.job_ids,
        &fanned.trigger_ids,
        &fanned.instants
    )
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
pub async fn seconds_until_earliest_due(db: impl PgExecutor<'_>) -> Result<Option<f64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT EXTRACT(EPOCH FROM (min(next_fire_at) - clock_timestamp()))::float8 FROM (
             SELECT triggers.next_fire_at FROM triggers JOIN jobs ON jobs.id = triggers.job_id
             WHERE NOT triggers.paused AND triggers.next_fire_at IS NOT NULL AND NOT jobs.paused
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
    Ok(sqlx::query_as!(
        Trigger,
        r#"UPDATE triggers SET paused = $2, version = version + 1, updated_at = now() WHERE id = $1
           RETURNING id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency"#,
        id,
        paused
    )
    .fetch_optional(db)
    .await?)
}

/// A job's triggers, oldest first.
pub async fn list_for_job(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<Trigger>, StoreError> {
    Ok(
        sqlx::query_as!(Trigger, r#"SELECT id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency FROM triggers WHERE job_id = $1 ORDER BY id"#, job_id)
            .fetch_all(db)
            .await?,
    )
}

/// One trigger, locked for the rest of the transaction.
pub async fn get_for_update(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Trigger>, StoreError> {
    Ok(
        sqlx::query_as!(Trigger, r#"SELECT id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency FROM triggers WHERE id = $1 FOR UPDATE"#, id)
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
    Ok(sqlx::query_as!(
        Trigger,
        r#"UPDATE triggers SET kind = $3, cron = $4, timezone = $5, interval_secs = $6, at = $7,
                               start_at = $8, end_at = $9, misfire = $10, misfire_threshold_secs = $11,
                               paused = $12, next_fire_at = $13, max_concurrency = $14,
                               version = version + 1, updated_at = now()
           WHERE id = $1 AND version = $2
           RETURNING id, job_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at, misfire AS "misfire: Misfire", misfire_threshold_secs, paused, next_fire_at, last_fired_at, version, created_at, updated_at, max_concurrency"#,
        id,
        version,
        trigger.kind as TriggerKind,
        trigger.cron,
        trigger.timezone,
        trigger.interval_secs,
        trigger.at,
        trigger.start_at,
        trigger.end_at,
        trigger.misfire as Misfire,
        trigger.misfire_threshold_secs,
        trigger.paused,
        next_fire_at,
        trigger.max_concurrency
    )
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
            trigger: Trigger {
                id: row.id,
                job_id: row.job_id,
                kind: row.kind,
                cron: row.cron,
                timezone: row.timezone,
                interval_secs: row.interval_secs,
                at: row.at,
                start_at: row.start_at,
                end_at: row.end_at,
                misfire: row.misfire,
                misfire_threshold_secs: row.misfire_threshold_secs,
                paused: row.paused,
                next_fire_at: row.next_fire_at,
                last_fired_at: row.last_fired_at,
                version: row.version,
                created_at: row.created_at,
                updated_at: row.updated_at,
                max_concurrency: row.max_concurrency,
            },
            job_updated_at: row.job_updated_at,
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
