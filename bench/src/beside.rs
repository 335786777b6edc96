//! `--beside-features`: every feature of the second wave configured on other jobs of the
//! cluster, so a scenario measures what they cost the runs that use none of them.
//!
//! Beside the measured job: a namespace with a quota and a job in it, a pool with a rate
//! and a job drawing on it, a job with a rate of its own, a job with child jobs and an
//! alert rule, a workflow of two steps, a job taking parameters, a trigger with a cap,
//! and runs no executor may take (a selector nobody matches, a high priority) that every
//! claim walks past. None of these jobs runs during the scenario.

use anyhow::Context;
use sqlx::PgPool;

/// The prefix of the jobs configured here; the drain does not wait for their runs.
pub const PREFIX: &str = "beside-";

/// Runs queued for a selector nobody matches, ahead of every other run in claim order.
const UNCLAIMABLE_RUNS: i64 = 20;

/// Configures every feature on jobs named [`PREFIX`]…, none of which runs.
pub async fn configure(pool: &PgPool) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    for statement in SETUP {
        sqlx::query(sqlx::AssertSqlSafe(*statement))
            .execute(&mut *tx)
            .await
            .with_context(|| format!("configuring the features beside: {statement}"))?;
    }
    sqlx::query(
        "INSERT INTO runs (job_id, scheduled_at)
         SELECT id, now() FROM jobs, generate_series(1, $1) WHERE name = 'beside-selected'",
    )
    .bind(UNCLAIMABLE_RUNS)
    .execute(&mut *tx)
    .await
    .context("queueing the unclaimable runs")?;
    tx.commit().await?;
    Ok(())
}

/// Idle jobs: paused, so that nothing they have ever runs, except where the feature is
/// in the claim's path (the selected job's runs are queued, and passed over).
const SETUP: &[&str] = &[
    "INSERT INTO namespaces (name, max_running) VALUES ('beside-quota', 5)",
    "INSERT INTO jobs (name, kind, namespace, paused) VALUES ('beside-quota', 'noop', 'beside-quota', true)",
    "INSERT INTO pools (name, slots, rate) VALUES ('beside-pool', 4, '{\"limit\": 10, \"per_secs\": 1}')",
    "INSERT INTO jobs (name, kind, pool, paused) VALUES ('beside-pooled', 'noop', 'beside-pool', true)",
    "INSERT INTO jobs (name, kind, rate, paused) VALUES ('beside-rated', 'noop', '{\"limit\": 5, \"per_secs\": 1}', true)",
    "INSERT INTO jobs (name, kind, selector, priority, parallel)
     VALUES ('beside-selected', 'noop', '{\"zone\": \"nowhere\"}', 10, true)",
    "INSERT INTO jobs (name, kind, paused) VALUES ('beside-child', 'noop', true)",
    "INSERT INTO jobs (name, kind, paused, on_success, on_failure, on_finish)
     SELECT 'beside-parent', 'noop', true, ARRAY[id], ARRAY[id], ARRAY[id] FROM jobs WHERE name = 'beside-child'",
    "INSERT INTO alert_rules (name, events, job_id, threshold)
     SELECT 'beside-failures', ARRAY['run_failed', 'consecutive_failures'], id, 3 FROM jobs WHERE name = 'beside-parent'",
    "INSERT INTO workflows (name) VALUES ('beside-flow')",
    "INSERT INTO workflow_steps (workflow_id, name, position, job_id, depends_on)
     SELECT workflows.id, step.name, step.position, jobs.id, step.depends_on
     FROM workflows, jobs,
          (VALUES ('first', 1, '{}'::text[]), ('second', 2, '{first}'::text[])) AS step (name, position, depends_on)
     WHERE workflows.name = 'beside-flow' AND jobs.name = 'beside-child'",
    "INSERT INTO jobs (name, kind, paused, params_schema)
     VALUES ('beside-params', 'noop', true, '{\"type\": \"object\", \"properties\": {\"day\": {\"type\": \"string\"}}}')",
    "INSERT INTO triggers (job_id, kind, interval_secs, next_fire_at, max_concurrency)
     SELECT id, 'interval', 3600, now() + interval '1 hour', 2 FROM jobs WHERE name = 'beside-parent'",
];
