//! `workflows`, `workflow_steps`, `workflow_runs` and `workflow_run_steps`: DAGs of jobs
//! and their runs. A workflow run copies its workflow's steps and starts the steps that
//! need nothing; from then on it advances in the transaction of each step's last attempt
//! ending (the trigger `runs_advance` and `probactr_workflow_advance`, in the migration
//! `2026112505000001_workflows.sql`), so a crash never loses nor doubles a step. The
//! functions here start runs, retry a step, cancel and read them, each under the workflow
//! run's row lock, which every advance takes first.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::model::{Misfire, Trigger, TriggerKind, TriggerTiming};
use crate::store::triggers::{query_schedule, timing_of, NewTrigger};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};

use super::StoreError;

/// A workflow's definition (without its steps).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Workflow {
    /// Id.
    pub id: i64,
    /// Unique name within its namespace.
    pub name: String,
    /// The namespace it belongs to (never changes); its steps' jobs are in it too.
    pub namespace: String,
    /// What it is for.
    pub description: String,
    /// A paused workflow starts no new run (runs under way go on).
    pub paused: bool,
    /// Bumped by every change.
    pub version: i64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// Its declared run parameters (see `params_schema`); None: free parameters.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub params_schema: Option<Value>,
}

/// One step of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    /// Unique within the workflow.
    pub name: String,
    /// The job it runs.
    pub job_id: i64,
    /// The steps that must be done first.
    pub depends_on: Vec<String>,
    /// `all_success`, `all_done` or `any_failed`: what of its upstream steps it needs.
    pub when: String,
    /// Parameters of its runs, over the workflow run's.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params: Value,
}

/// A workflow run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkflowRun {
    /// Id.
    pub id: i64,
    /// Its workflow.
    pub workflow_id: i64,
    /// `running`, `succeeded`, `failed` (a step failed) or `cancelled`.
    pub state: String,
    /// The parameters every step gets.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params: Value,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
}

/// A step of a workflow run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunStep {
    /// The step.
    pub name: String,
    /// Its job.
    pub job_id: i64,
    /// Its upstream steps.
    pub depends_on: Vec<String>,
    /// What of them it needs.
    pub when: String,
    /// `pending`, `running`, `succeeded`, `failed`, `skipped` or `cancelled`.
    pub state: String,
    /// The first attempt of its current run.
    pub run_id: Option<i64>,
    /// The first attempts of every run it had (a retried step has several).
    pub run_ids: Vec<i64>,
    /// What its run wrote to `PROBACTR_OUTPUT_FILE`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub output: Option<Value>,
    /// When its current run was queued.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
}

/// Creates a workflow and its steps in the namespace `default` (in the caller's
/// transaction).
pub async fn create(
    conn: &mut PgConnection,
    name: &str,
    description: &str,
    steps: &[Step],
) -> Result<Workflow, StoreError> {
    create_in(conn, super::namespaces::DEFAULT, name, description, steps).await
}

/// Creates a workflow and its steps in `namespace` (in the caller's transaction).
pub async fn create_in(
    conn: &mut PgConnection,
    namespace: &str,
    name: &str,
    description: &str,
    steps: &[Step],
) -> Result<Workflow, StoreError> {
    let workflow = sqlx::query_as!(
        Workflow,
        "INSERT INTO workflows (name, description, namespace) VALUES ($1, $2, $3)
         RETURNING id, name, namespace, description, paused, version, created_at, updated_at, params_schema",
        name,
        description,
        namespace
    )
    .fetch_one(&mut *conn)
    .await?;
    insert_steps(conn, workflow.id, steps).await?;
    Ok(workflow)
}

async fn insert_steps(conn: &mut PgConnection, workflow_id: i64, steps: &[Step]) -> Result<(), StoreError> {
    for (position, step) in steps.iter().enumerate() {
        sqlx::query!(
            "INSERT INTO workflow_steps (workflow_id, name, position, job_id, depends_on, run_when, params)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            workflow_id,
            step.name,
            position as i32,
            step.job_id,
            &step.depends_on,
            step.when,
            step.params
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// One workflow.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Workflow>, StoreError> {
    Ok(sqlx::query_as!(
        Workflow,
        "SELECT id, name, namespace, description, paused, version, created_at, updated_at, params_schema FROM workflows WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?)
}

/// Every workflow, by name; only those of the namespaces `only` when given.
pub async fn list(db: impl PgExecutor<'_>, only: Option<&[String]>) -> Result<Vec<Workflow>, StoreError> {
    Ok(sqlx::query_as!(
        Workflow,
        "SELECT id, name, namespace, description, paused, version, created_at, updated_at, params_schema FROM workflows
         WHERE $1::text[] IS NULL OR namespace = ANY($1) ORDER BY name",
        only
    )
    .fetch_all(db)
    .await?)
}

/// A workflow's steps, in their order.
pub async fn steps(db: impl PgExecutor<'_>, workflow_id: i64) -> Result<Vec<Step>, StoreError> {
    Ok(sqlx::query_as!(
        Step,
        r#"SELECT name, job_id, depends_on, run_when AS "when", params
           FROM workflow_steps WHERE workflow_id = $1 ORDER BY position"#,
        workflow_id
    )
    .fetch_all(db)
    .await?)
}

/// Pauses or resumes a workflow; None when it does not exist.
pub async fn set_paused(
    db: impl PgExecutor<'_>,
    id: i64,
    paused: bool,
) -> Result<Option<Workflow>, StoreError> {
    Ok(sqlx::query_as!(
        Workflow,
        "UPDATE workflows SET paused = $2, version = version + 1, updated_at = now() WHERE id = $1
         RETURNING id, name, namespace, description, paused, version, created_at, updated_at, params_schema",
        id,
        paused
    )
    .fetch_optional(db)
    .await?)
}

/// Starts a run of a workflow with `params`: copies its steps and queues the runs of the
/// steps that need nothing (in the caller's transaction). Returns the workflow run's id.
pub async fn start_run(conn: &mut PgConnection, workflow_id: i64, params: &Value) -> Result<i64, StoreError> {
    let id = sqlx::query_scalar!(
        "INSERT INTO workflow_runs (workflow_id, params) VALUES ($1, $2) RETURNING id",
        workflow_id,
        params
    )
    .fetch_one(&mut *conn)
    .await?;
    begin_steps(conn, id, workflow_id).await?;
    Ok(id)
}

/// Copies a new workflow run's steps and starts those that need nothing.
async fn begin_steps(conn: &mut PgConnection, id: i64, workflow_id: i64) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO workflow_run_steps (workflow_run_id, name, position, job_id, depends_on, run_when, params)
         SELECT $1, name, position, job_id, depends_on, run_when, params
         FROM workflow_steps WHERE workflow_id = $2",
        id,
        workflow_id
    )
    .execute(&mut *conn)
    .await?;
    advance(conn, id).await
}

/// Locks a workflow run (every advance takes this lock first) and advances it.
async fn advance(conn: &mut PgConnection, id: i64) -> Result<(), StoreError> {
    sqlx::query!("SELECT id FROM workflow_runs WHERE id = $1 FOR UPDATE", id)
        .fetch_optional(&mut *conn)
        .await?;
    sqlx::query!("SELECT probactr_workflow_advance($1) AS done", id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(())
}

/// One workflow run.
pub async fn get_run(db: impl PgExecutor<'_>, id: i64) -> Result<Option<WorkflowRun>, StoreError> {
    Ok(sqlx::query_as!(
        WorkflowRun,
        "SELECT id, workflow_id, state, params, created_at, finished_at FROM workflow_runs WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?)
}

/// The latest runs of a workflow, newest first.
pub async fn runs_of(
    db: impl PgExecutor<'_>,
    workflow_id: i64,
    limit: i64,
) -> Result<Vec<WorkflowRun>, StoreError> {
    Ok(sqlx::query_as!(
        WorkflowRun,
        "SELECT id, workflow_id, state, params, created_at, finished_at FROM workflow_runs
         WHERE workflow_id = $1 ORDER BY id DESC LIMIT $2",
        workflow_id,
        limit
    )
    .fetch_all(db)
    .await?)
}

/// A workflow run's steps, in their workflow's order.
pub async fn run_steps(db: impl PgExecutor<'_>, workflow_run_id: i64) -> Result<Vec<RunStep>, StoreError> {
    Ok(sqlx::query_as!(
        RunStep,
        r#"SELECT name, job_id, depends_on, run_when AS "when", state, run_id, run_ids, output,
                  started_at, finished_at
           FROM workflow_run_steps WHERE workflow_run_id = $1 ORDER BY position"#,
        workflow_run_id
    )
    .fetch_all(db)
    .await?)
}

/// What [`retry_step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// The step's new run was queued; the steps it skipped downstream wait again.
    Queued {
        /// The new run.
        run_id: i64,
    },
    /// The step is not failed or cancelled (its state is given).
    NotRetryable(String),
    /// No such workflow run or step.
    Missing,
}

/// Runs a failed (or cancelled) step again and continues the workflow run from there: the
/// steps downstream of it that were skipped wait for it again, and a workflow run that
/// had ended runs again (in the caller's transaction).
pub async fn retry_step(
    conn: &mut PgConnection,
    workflow_run_id: i64,
    step: &str,
) -> Result<Retry, StoreError> {
    let locked = sqlx::query_scalar!(
        "SELECT id FROM workflow_runs WHERE id = $1 FOR UPDATE",
        workflow_run_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if locked.is_none() {
        return Ok(Retry::Missing);
    }
    let state = sqlx::query_scalar!(
        "SELECT state FROM workflow_run_steps WHERE workflow_run_id = $1 AND name = $2",
        workflow_run_id,
        step
    )
    .fetch_optional(&mut *conn)
    .await?;
    match state.as_deref() {
        None => return Ok(Retry::Missing),
        Some("failed" | "cancelled") => {}
        Some(other) => return Ok(Retry::NotRetryable(other.to_owned())),
    }
    sqlx::query!(
        "WITH RECURSIVE downstream (name) AS (
             SELECT s.name FROM workflow_run_steps AS s
             WHERE s.workflow_run_id = $1 AND $2 = ANY (s.depends_on)
             UNION
             SELECT s.name FROM workflow_run_steps AS s JOIN downstream AS d ON d.name = ANY (s.depends_on)
             WHERE s.workflow_run_id = $1)
         UPDATE workflow_run_steps SET state = 'pending', finished_at = NULL
         WHERE workflow_run_id = $1 AND state IN ('skipped', 'cancelled')
           AND name IN (SELECT name FROM downstream)",
        workflow_run_id,
        step
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE workflow_runs SET state = 'running', finished_at = NULL WHERE id = $1",
        workflow_run_id
    )
    .execute(&mut *conn)
    .await?;
    let run_id = sqlx::query_scalar!(
        r#"SELECT probactr_workflow_start_step($1, $2) AS "run_id!""#,
        workflow_run_id,
        step
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(Retry::Queued { run_id })
}

/// Cancels a running workflow run: it ends `cancelled` and its pending steps with it.
/// Returns the first attempts of its running steps (the caller cancels their runs), or
/// None when it is not running.
pub async fn cancel_run(
    conn: &mut PgConnection,
    workflow_run_id: i64,
) -> Result<Option<Vec<i64>>, StoreError> {
    let cancelled = sqlx::query_scalar!(
        "UPDATE workflow_runs SET state = 'cancelled', finished_at = now()
         WHERE id = $1 AND state = 'running' RETURNING id",
        workflow_run_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if cancelled.is_none() {
        return Ok(None);
    }
    sqlx::query!(
        "UPDATE workflow_run_steps SET state = 'cancelled', finished_at = now()
         WHERE workflow_run_id = $1 AND state = 'pending'",
        workflow_run_id
    )
    .execute(&mut *conn)
    .await?;
    Ok(Some(
        sqlx::query_scalar!(
            r#"SELECT run_id AS "run_id!" FROM workflow_run_steps
               WHERE workflow_run_id = $1 AND state = 'running' AND run_id IS NOT NULL"#,
            workflow_run_id
        )
        .fetch_all(&mut *conn)
        .await?,
    ))
}

/// The names of the workflows with a step running job `job_id` (such a job cannot be
/// deleted: `workflow_steps.job_id` restricts it).
pub async fn names_using_job(db: impl PgExecutor<'_>, job_id: i64) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT DISTINCT workflows.name FROM workflows
         JOIN workflow_steps ON workflow_steps.workflow_id = workflows.id
         WHERE workflow_steps.job_id = $1 ORDER BY workflows.name",
        job_id
    )
    .fetch_all(db)
    .await?)
}

/// A trigger of a workflow: a schedule whose every instant starts a workflow run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkflowTrigger {
    /// Id.
    pub id: i64,
    /// Its workflow.
    pub workflow_id: i64,
    /// When it fires.
    #[serde(flatten)]
    pub timing: TriggerTiming,
    /// Paused triggers do not fire.
    pub paused: bool,
    /// Parameters of the workflow runs it starts.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params: Value,
    /// Its next instant (None: none left).
    pub next_fire_at: Option<DateTime<Utc>>,
    /// When it last fired.
    pub last_fired_at: Option<DateTime<Utc>>,
    /// Bumped by every change.
    pub version: i64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl WorkflowTrigger {
    /// Its schedule in the shape of a job's trigger, for the schedule and the firing
    /// plan, which read only the schedule's fields (`job_id` is the workflow's id).
    pub fn schedule_view(&self) -> Trigger {
        Trigger {
            id: self.id,
            job_id: self.workflow_id,
            timing: self.timing.clone(),
            paused: self.paused,
            next_fire_at: self.next_fire_at,
            last_fired_at: self.last_fired_at,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
            max_concurrency: None,
        }
    }
}

/// The [`WorkflowTrigger`] of a row of a checked statement that returns every column of
/// `workflow_triggers` (the checking macros fill only flat structs).
macro_rules! workflow_trigger_of {
    ($row:ident) => {
        WorkflowTrigger {
            id: $row.id,
            workflow_id: $row.workflow_id,
            timing: timing_of!($row),
            paused: $row.paused,
            params: $row.params,
            next_fire_at: $row.next_fire_at,
            last_fired_at: $row.last_fired_at,
            version: $row.version,
            created_at: $row.created_at,
            updated_at: $row.updated_at,
        }
    };
}

/// Creates a trigger of a workflow with its first instant.
pub async fn create_trigger(
    db: impl PgExecutor<'_>,
    workflow_id: i64,
    trigger: &NewTrigger,
    params: &Value,
    next_fire_at: Option<DateTime<Utc>>,
) -> Result<WorkflowTrigger, StoreError> {
    Ok(query_schedule!(
        r#"INSERT INTO workflow_triggers (workflow_id, kind, cron, timezone, interval_secs, at, start_at, end_at,
                                         misfire, misfire_threshold_secs, paused, params, next_fire_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
           RETURNING id, workflow_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at,
                     misfire AS "misfire: Misfire", misfire_threshold_secs, paused, params, next_fire_at,
                     last_fired_at, version, created_at, updated_at"#,
        trigger,
        [workflow_id],
        [params, next_fire_at]
    )
    .map(|row| workflow_trigger_of!(row))
    .fetch_one(db)
    .await?)
}

/// A workflow's triggers, oldest first.
pub async fn triggers_of(
    db: impl PgExecutor<'_>,
    workflow_id: i64,
) -> Result<Vec<WorkflowTrigger>, StoreError> {
    Ok(sqlx::query!(
        r#"SELECT id, workflow_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at,
                  misfire AS "misfire: Misfire", misfire_threshold_secs, paused, params, next_fire_at,
                  last_fired_at, version, created_at, updated_at
           FROM workflow_triggers WHERE workflow_id = $1 ORDER BY id"#,
        workflow_id
    )
    .map(|row| workflow_trigger_of!(row))
    .fetch_all(db)
    .await?)
}

/// Deletes a trigger of a workflow (its runs stay); false when there was none.
pub async fn delete_trigger(db: impl PgExecutor<'_>, workflow_id: i64, id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "DELETE FROM workflow_triggers WHERE id = $1 AND workflow_id = $2",
        id,
        workflow_id
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Locks up to `batch` due triggers of workflows (those a peer holds are passed over),
/// quietly: moving them on wakes no peer.
pub async fn claim_due_triggers(
    conn: &mut PgConnection,
    batch: i64,
) -> Result<Vec<WorkflowTrigger>, StoreError> {
    sqlx::query!("SELECT set_config('probactr.quiet', 'on', true) AS quiet")
        .fetch_one(&mut *conn)
        .await?;
    Ok(sqlx::query!(
        r#"SELECT id, workflow_id, kind AS "kind: TriggerKind", cron, timezone, interval_secs, at, start_at, end_at,
                  misfire AS "misfire: Misfire", misfire_threshold_secs, paused, params, next_fire_at,
                  last_fired_at, version, created_at, updated_at
           FROM workflow_triggers
           WHERE NOT paused AND next_fire_at <= now()
           ORDER BY next_fire_at
           LIMIT $1
           FOR UPDATE SKIP LOCKED"#,
        batch
    )
    .map(|row| workflow_trigger_of!(row))
    .fetch_all(&mut *conn)
    .await?)
}

/// Starts the workflow run of a trigger's instant, unless its workflow is paused or the
/// instant already has its run; returns the run started.
pub async fn start_scheduled_run(
    conn: &mut PgConnection,
    trigger: &WorkflowTrigger,
    instant: DateTime<Utc>,
) -> Result<Option<i64>, StoreError> {
    let id = sqlx::query_scalar!(
        "INSERT INTO workflow_runs (workflow_id, params, trigger_id, scheduled_at)
         SELECT id, $2, $3, $4 FROM workflows WHERE id = $1 AND NOT paused
         ON CONFLICT ON CONSTRAINT workflow_runs_instant_once DO NOTHING
         RETURNING id",
        trigger.workflow_id,
        trigger.params,
        trigger.id,
        instant
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(id) = id {
        begin_steps(conn, id, trigger.workflow_id).await?;
    }
    Ok(id)
}

/// Moves a workflow trigger's next instant on (None: it has none left).
pub async fn advance_trigger(
    conn: &mut PgConnection,
    id: i64,
    next_fire_at: Option<DateTime<Utc>>,
    fired_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE workflow_triggers SET next_fire_at = $2, last_fired_at = $3 WHERE id = $1",
        id,
        next_fire_at,
        fired_at
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Seconds from the database's clock until the earliest instant of an unpaused workflow
/// trigger (negative when overdue), or None when none is scheduled.
pub async fn seconds_until_earliest_trigger(db: impl PgExecutor<'_>) -> Result<Option<f64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT EXTRACT(EPOCH FROM (min(next_fire_at) - clock_timestamp()))::float8
         FROM workflow_triggers WHERE NOT paused AND next_fire_at IS NOT NULL"
    )
    .fetch_one(db)
    .await?)
}

/// Replaces a workflow's name, description and steps (runs under way keep the steps they
/// copied), when it is at `expected_version` if one is given; None when it does not exist
/// or is at another version.
pub async fn replace(
    conn: &mut PgConnection,
    id: i64,
    expected_version: Option<i64>,
    name: &str,
    description: &str,
    steps: &[Step],
) -> Result<Option<Workflow>, StoreError> {
    let Some(workflow) = sqlx::query_as!(
        Workflow,
        "UPDATE workflows SET name = $2, description = $3, version = version + 1, updated_at = now()
         WHERE id = $1 AND ($4::BIGINT IS NULL OR version = $4)
         RETURNING id, name, namespace, description, paused, version, created_at, updated_at, params_schema",
        id,
        name,
        description,
        expected_version
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    sqlx::query!("DELETE FROM workflow_steps WHERE workflow_id = $1", id)
        .execute(&mut *conn)
        .await?;
    insert_steps(conn, id, steps).await?;
    Ok(Some(workflow))
}

/// The parameters holding a sealed value (a secret parameter) of workflow triggers
/// (`trigger`) and workflow steps (`step`), each with its key: the trigger's id, or the
/// workflow's id and the step's name.
pub async fn with_sealed_params(db: impl PgExecutor<'_>) -> Result<Vec<SealedParams>, StoreError> {
    Ok(sqlx::query_as!(
        SealedParams,
        r#"SELECT 'trigger' AS "owner!", id AS "id!", NULL::text AS step, params AS "params!"
           FROM workflow_triggers
           WHERE EXISTS (SELECT 1 FROM jsonb_each(params) AS p
                         WHERE jsonb_typeof(p.value) = 'object' AND p.value ? '$sealed')
           UNION ALL
           SELECT 'step', workflow_id, name, params FROM workflow_steps
           WHERE EXISTS (SELECT 1 FROM jsonb_each(params) AS p
                         WHERE jsonb_typeof(p.value) = 'object' AND p.value ? '$sealed')"#
    )
    .fetch_all(db)
    .await?)
}

/// Parameters of a workflow trigger or step that hold a sealed value.
#[derive(Debug, Clone)]
pub struct SealedParams {
    /// `trigger` or `step`.
    pub owner: String,
    /// The trigger's id, or the step's workflow's.
    pub id: i64,
    /// The step's name.
    pub step: Option<String>,
    /// The parameters.
    pub params: Value,
}

/// Replaces the parameters of a workflow trigger or step (see [`SealedParams`]).
pub async fn reseal_params(
    db: impl PgExecutor<'_>,
    owner: &SealedParams,
    params: &Value,
) -> Result<(), StoreError> {
    sqlx::query!(
        "WITH trigger AS (UPDATE workflow_triggers SET params = $4 WHERE $1 = 'trigger' AND id = $2)
         UPDATE workflow_steps SET params = $4 WHERE $1 = 'step' AND workflow_id = $2 AND name = $3",
        owner.owner,
        owner.id,
        owner.step,
        params
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Sets a workflow's declared run parameters (in the transaction that creates or
/// replaces it).
pub async fn set_params_schema(
    db: impl PgExecutor<'_>,
    id: i64,
    schema: Option<&Value>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE workflows SET params_schema = $2 WHERE id = $1",
        id,
        schema
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Deletes a workflow with its triggers and runs; false when there was none.
pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query!("DELETE FROM workflows WHERE id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}
