//! `run_inputs` and `run_outputs`: what a run is given (its parameters, the run whose end
//! queued it, the workflow step it is, the run it re-runs) and what an attempt hands on (the JSON object it
//! wrote to `PROBACTR_OUTPUT_FILE`). Inputs are keyed by the first attempt of a chain, so
//! retries and takeovers see the same; a trigger's `params` are defaults under them.

use serde_json::Value;
use sqlx::PgExecutor;

use super::StoreError;

/// What one attempt runs with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    /// The parameters: the trigger's defaults merged under the run's own (a JSON object).
    pub params: Value,
    /// The run whose end queued this one (a child job).
    pub parent_run_id: Option<i64>,
    /// The workflow run this run is a step of.
    pub workflow_run_id: Option<i64>,
    /// Its step's name.
    pub step_name: Option<String>,
    /// The outputs of the steps upstream of its step (ancestors included), step name →
    /// output (a JSON object; `null` for a step that left none).
    pub upstream: Value,
}

/// Records the parameters of a run queued by hand (its first attempt), in the
/// transaction that queues it.
pub async fn set_params(db: impl PgExecutor<'_>, run_id: i64, params: &Value) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO run_inputs (run_id, params) VALUES ($1, $2)
         ON CONFLICT (run_id) DO UPDATE SET params = EXCLUDED.params",
        run_id,
        params
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Gives the first attempt `run_id` of a re-run the parameters the run `original` saw
/// (the chain `original_chain`, with its trigger's defaults merged in, so the re-run sees
/// the same without its trigger) and records which run it repeats.
pub async fn set_rerun(
    db: impl PgExecutor<'_>,
    run_id: i64,
    original: i64,
    original_chain: i64,
    original_trigger: Option<i64>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO run_inputs (run_id, params, rerun_of) VALUES ($1, probactr_run_params($3, $4), $2)",
        run_id,
        original,
        original_chain,
        original_trigger
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The run the chain `chain_id` re-runs, if it is a re-run.
pub async fn rerun_of(db: impl PgExecutor<'_>, chain_id: i64) -> Result<Option<i64>, StoreError> {
    Ok(
        sqlx::query_scalar!("SELECT rerun_of FROM run_inputs WHERE run_id = $1", chain_id)
            .fetch_optional(db)
            .await?
            .flatten(),
    )
}

/// The parameters a run sees (its trigger's defaults under its own; `{}` without any).
pub async fn params_of(
    db: impl PgExecutor<'_>,
    chain_id: i64,
    trigger_id: Option<i64>,
) -> Result<Value, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT probactr_run_params($1, $2) AS "params!""#,
        chain_id,
        trigger_id
    )
    .fetch_one(db)
    .await?)
}

/// Everything an attempt of the chain `chain_id` runs with.
pub async fn for_attempt(
    db: &mut sqlx::PgConnection,
    chain_id: i64,
    trigger_id: Option<i64>,
) -> Result<Inputs, StoreError> {
    let row = sqlx::query!(
        r#"SELECT probactr_run_params($1, $2) AS "params!",
                  inputs.parent_run_id, inputs.workflow_run_id, inputs.step_name
           FROM (SELECT 1) AS one
           LEFT JOIN run_inputs AS inputs ON inputs.run_id = $1"#,
        chain_id,
        trigger_id
    )
    .fetch_one(&mut *db)
    .await?;
    let upstream = match (row.workflow_run_id, &row.step_name) {
        (Some(workflow_run_id), Some(step)) => upstream_outputs(&mut *db, workflow_run_id, step).await?,
        _ => Value::Object(Default::default()),
    };
    Ok(Inputs {
        params: row.params,
        parent_run_id: row.parent_run_id,
        workflow_run_id: row.workflow_run_id,
        step_name: row.step_name,
        upstream,
    })
}

/// The outputs of every step upstream of `step` (its ancestors, not only its parents):
/// step name → output, `null` for a step that wrote none.
async fn upstream_outputs(
    db: &mut sqlx::PgConnection,
    workflow_run_id: i64,
    step: &str,
) -> Result<Value, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"WITH RECURSIVE ancestors (name) AS (
               SELECT unnest(depends_on) FROM workflow_run_steps
               WHERE workflow_run_id = $1 AND name = $2
               UNION
               SELECT unnest(up.depends_on) FROM workflow_run_steps AS up
               JOIN ancestors ON ancestors.name = up.name
               WHERE up.workflow_run_id = $1)
           SELECT coalesce(jsonb_object_agg(name, output), '{}'::jsonb) AS "upstream!"
           FROM workflow_run_steps
           WHERE workflow_run_id = $1 AND name IN (SELECT name FROM ancestors)"#,
        workflow_run_id,
        step
    )
    .fetch_one(db)
    .await?)
}

/// A run chain that is a workflow's step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOf {
    /// The chain's first run.
    pub chain_id: i64,
    /// The workflow run.
    pub workflow_run_id: i64,
    /// The step's name.
    pub step: String,
}

/// Which of the chains `chain_ids` are workflow steps (for their traces: asked only when
/// traces are exported).
pub async fn workflow_steps(db: impl PgExecutor<'_>, chain_ids: &[i64]) -> Result<Vec<StepOf>, StoreError> {
    Ok(sqlx::query_as!(
        StepOf,
        r#"SELECT run_id AS chain_id, workflow_run_id AS "workflow_run_id!", step_name AS "step!"
           FROM run_inputs
           WHERE run_id = ANY($1) AND workflow_run_id IS NOT NULL AND step_name IS NOT NULL"#,
        chain_ids
    )
    .fetch_all(db)
    .await?)
}

/// Stores what an attempt wrote to its output file (before its end is recorded, so the
/// workflow that advances with the end reads it). A second write replaces the first.
pub async fn set_output(db: impl PgExecutor<'_>, run_id: i64, output: &Value) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO run_outputs (run_id, output) VALUES ($1, $2)
         ON CONFLICT (run_id) DO UPDATE SET output = EXCLUDED.output",
        run_id,
        output
    )
    .execute(db)
    .await?;
    Ok(())
}

/// What an attempt wrote to its output file, if anything.
pub async fn output_of(db: impl PgExecutor<'_>, run_id: i64) -> Result<Option<Value>, StoreError> {
    Ok(
        sqlx::query_scalar!("SELECT output FROM run_outputs WHERE run_id = $1", run_id)
            .fetch_optional(db)
            .await?,
    )
}

/// Deletes the inputs and outputs older than `retention_secs` (their runs went with the
/// history); returns how many rows went.
pub async fn prune(db: impl PgExecutor<'_>, retention_secs: f64) -> Result<u64, StoreError> {
    let done = sqlx::query_scalar!(
        r#"WITH inputs AS (DELETE FROM run_inputs WHERE created_at < now() - make_interval(secs => $1) RETURNING 1),
                outputs AS (DELETE FROM run_outputs WHERE created_at < now() - make_interval(secs => $1) RETURNING 1)
           SELECT (SELECT count(*) FROM inputs) + (SELECT count(*) FROM outputs) AS "gone!""#,
        retention_secs
    )
    .fetch_one(db)
    .await?;
    Ok(u64::try_from(done).unwrap_or(0))
}
