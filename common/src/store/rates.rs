//! Rate limits: at most `limit` starts in any window of `per_secs` seconds, for a job
//! (`jobs.rate`) or a pool (`pools.rate`). The claim holds the bound (see
//! `CLAIM_QUEUED_SQL` and migration `2026120303000001`) on the latest starts kept in
//! `job_rate_windows` and `pools.rate_starts`; this module says why a queued run waits
//! for one.

use sqlx::types::Json;
use sqlx::PgExecutor;

use super::StoreError;
use crate::model::Rate;

/// Why queued run `run_id` waits for a rate: "rate nightly-api 20/10s" while its job's
/// rate, or else its pool's, allows no start now (None when it is not queued, or
/// neither has a rate or is full).
pub async fn queued_reason(db: impl PgExecutor<'_>, run_id: i64) -> Result<Option<String>, StoreError> {
    let full = sqlx::query!(
        r#"SELECT name AS "name!", rate AS "rate!: Json<Rate>" FROM (
               SELECT 1 AS rank, jobs.name, jobs.rate
               FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
               JOIN job_rate_windows AS recent ON recent.job_id = jobs.id
               WHERE runs.id = $1 AND runs.state = 'queued' AND jobs.rate IS NOT NULL
                 AND probactr_rate_room(jobs.rate, recent.starts) = 0
               UNION ALL
               SELECT 2, pools.name, pools.rate
               FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
               JOIN pools ON pools.namespace = jobs.namespace AND pools.name = jobs.pool
               WHERE runs.id = $1 AND runs.state = 'queued' AND pools.rate IS NOT NULL
                 AND probactr_rate_room(pools.rate, pools.rate_starts) = 0) AS full_rates
           ORDER BY rank LIMIT 1"#,
        run_id
    )
    .fetch_optional(db)
    .await?;
    Ok(full.map(|full| full.rate.0.reason(&full.name)))
}
