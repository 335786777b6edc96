//! Births of fired instants: the first attempts a firing transaction inserts, one per
//! instant, or as many as the job's route fans out to. An instant that already has a run,
//! live or ended, gets no second one (invariant 1).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::model::{Run, RunState};
use crate::store::triggers::DueTrigger;
use crate::store::StoreError;

/// The first attempts of fired instants, in columns.
#[derive(Debug, Clone, Default)]
pub struct FiredRuns {
    /// Each run's job.
    pub job_ids: Vec<i64>,
    /// Each run's trigger.
    pub trigger_ids: Vec<i64>,
    /// Each run's instant.
    pub instants: Vec<DateTime<Utc>>,
    /// Each run's priority: its job's, as the due-trigger claim read it.
    pub priorities: Vec<i32>,
    /// Each run's trigger cap (`triggers.max_concurrency`), as the claim, which holds the
    /// trigger locked, read it.
    pub trigger_caps: Vec<Option<i32>>,
    /// Whether the firing executor starts the run itself (it has a free slot and the job
    /// needs no lock): such a run is inserted `running` on that executor, started as of
    /// its instant; one fired ahead is held there until it comes (see the executor's
    /// `fired_ahead`).
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
    /// Adds the run of one instant of a claimed trigger.
    pub fn push(&mut self, due: &DueTrigger, instant: DateTime<Utc>, owned: bool) {
        self.push_run(
            due.trigger.job_id,
            due.trigger.id,
            instant,
            due.job_priority,
            due.trigger.max_concurrency,
            owned,
        );
    }

    /// Adds one run, with what it takes at birth: its job's priority and its trigger's cap.
    pub fn push_run(
        &mut self,
        job_id: i64,
        trigger_id: i64,
        instant: DateTime<Utc>,
        priority: i32,
        trigger_cap: Option<i32>,
        owned: bool,
    ) {
        self.job_ids.push(job_id);
        self.trigger_ids.push(trigger_id);
        self.instants.push(instant);
        self.priorities.push(priority);
        self.trigger_caps.push(trigger_cap);
        self.owned.push(owned);
    }

    /// Adds an instant of a claimed trigger whose job's route fans out.
    pub fn push_fanned_out(&mut self, due: &DueTrigger, instant: DateTime<Utc>) {
        self.fanned_out.job_ids.push(due.trigger.job_id);
        self.fanned_out.trigger_ids.push(due.trigger.id);
        self.fanned_out.instants.push(instant);
    }
}

/// Inserts the first attempts of fired instants; an instant that already has a run is
/// left alone (invariant 1). Owned runs start on `executor_id` in the same statement
/// (unless it is cordoned: then they are queued like the others), as of their instants:
/// the executor holds one fired ahead until its instant, and records when its job really
/// started with its end.
/// A queued run fired ahead of its instant waits in the queue until it: it is claimable,
/// and counts as queued (for the misfire threshold), from its instant.
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
                           claimed_at, started_at, heartbeat_at, priority, trigger_cap, claim_order)
         SELECT fired.job_id, fired.trigger_id, fired.at, greatest(fired.at, now()), greatest(fired.at, now()),
                CASE WHEN fired.owned AND me.may_own THEN 'running' ELSE 'queued' END,
                CASE WHEN fired.owned AND me.may_own THEN $5::uuid END,
                CASE WHEN fired.owned AND me.may_own THEN now() END,
                CASE WHEN fired.owned AND me.may_own THEN greatest(fired.at, now()) END,
                CASE WHEN fired.owned AND me.may_own THEN now() END,
                -- Routed here from what the due-trigger claim read, rather than by
                -- `runs_live_route` (a PL/pgSQL call per row, which stays out of an insert
                -- giving a claim order) or a lookup of the job and the trigger per row.
                fired.priority, fired.trigger_cap, probactr_claim_order(greatest(fired.at, now()), fired.priority)
         FROM UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bool[], $6::int[], $7::int[])
             AS fired (job_id, trigger_id, at, owned, priority, trigger_cap)
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
        executor_id,
        &runs.priorities,
        &runs.trigger_caps as &[Option<i32>]
    )
    .fetch_all(conn)
    .await?)
}

/// Inserts the runs of instants whose job fans out (see `probactr_run_targets`): one per live executor, or one per shard,
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

/// Delays queued first attempts by their trigger's jitter: each becomes claimable at its
/// instant plus its delay, and says so in its reason (so the run records its jitter).
pub async fn delay_by_jitter(
    conn: &mut PgConnection,
    run_ids: &[i64],
    delay_secs: &[i64],
) -> Result<(), StoreError> {
    if run_ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE runs_live SET available_at = greatest(runs_live.available_at,
                                                      runs_live.scheduled_at + make_interval(secs => delayed.secs)),
                              reason = format('jitter: +%ss', delayed.secs)
         FROM UNNEST($1::bigint[], $2::bigint[]) AS delayed (id, secs)
         WHERE runs_live.id = delayed.id AND runs_live.state = 'queued'",
        run_ids,
        delay_secs
    )
    .execute(conn)
    .await?;
    Ok(())
}
