//! `pools`: scarce things jobs share, by namespace and name, each with its `slots`. A job
//! of the namespace takes a pool and a weight (`jobs.pool`, `jobs.pool_slots`); the claim
//! holds the bound (see `CLAIM_QUEUED_SQL` and migration `2026120201000001`), this module
//! keeps the pools and says what they hold and why a queued run waits for one.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::types::Json;
use sqlx::PgExecutor;

use super::StoreError;
use crate::model::Rate;

/// A pool as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pool {
    /// The namespace it belongs to (the jobs of that namespace may take it).
    pub namespace: String,
    /// Its name, as jobs name it (`pool: NAME`).
    pub name: String,
    /// The weight of runs it holds at once.
    pub slots: i32,
    /// The slots held now by runs claimed or running.
    pub used: i32,
    /// At most `limit` runs of its jobs start in any window of `per_secs` seconds
    /// (null: no bound).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Rate>))]
    pub rate: Option<Json<Rate>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its slots last changed.
    pub updated_at: DateTime<Utc>,
}

impl Pool {
    /// The reason shown on a queued run waiting for it: "pool licence-server 3/3".
    pub fn reason(&self) -> String {
        format!("pool {} {}/{}", self.name, self.used, self.slots)
    }
}

/// Creates pool `name` in `namespace`; None when the namespace already has one so named.
pub async fn create(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    slots: i32,
    rate: Option<Rate>,
) -> Result<Option<Pool>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"INSERT INTO pools (namespace, name, slots, rate) VALUES ($1, $2, $3, $4)
         ON CONFLICT (namespace, name) DO NOTHING
         RETURNING namespace, name, slots, used, rate AS "rate: Json<Rate>", created_at, updated_at"#,
        namespace,
        name,
        slots,
        rate.map(Json) as Option<Json<Rate>>
    )
    .fetch_optional(db)
    .await?)
}

/// The pools of `namespaces` (None: of every namespace), by namespace and name.
pub async fn list(db: impl PgExecutor<'_>, namespaces: Option<&[String]>) -> Result<Vec<Pool>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"SELECT namespace, name, slots, used, rate AS "rate: Json<Rate>", created_at, updated_at FROM pools
         WHERE $1::text[] IS NULL OR namespace = ANY ($1) ORDER BY namespace, name"#,
        namespaces
    )
    .fetch_all(db)
    .await?)
}

/// Pool `name` of `namespace` (None: no such pool).
pub async fn get(db: impl PgExecutor<'_>, namespace: &str, name: &str) -> Result<Option<Pool>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"SELECT namespace, name, slots, used, rate AS "rate: Json<Rate>", created_at, updated_at FROM pools
         WHERE namespace = $1 AND name = $2"#,
        namespace,
        name
    )
    .fetch_optional(db)
    .await?)
}

/// Pool `name` of `namespace`, its row share-locked until the transaction ends so that a
/// concurrent resize waits for the caller (None: no such pool).
pub async fn get_for_share(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
) -> Result<Option<Pool>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"SELECT namespace, name, slots, used, rate AS "rate: Json<Rate>", created_at, updated_at FROM pools
         WHERE namespace = $1 AND name = $2 FOR SHARE"#,
        namespace,
        name
    )
    .fetch_optional(db)
    .await?)
}

/// Sets the slots of pool `name` of `namespace` (None: no such pool). Runs already holding
/// slots keep them; fewer slots than are used hold new runs back until enough end.
pub async fn set_slots(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    slots: i32,
) -> Result<Option<Pool>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"UPDATE pools SET slots = $3, updated_at = now() WHERE namespace = $1 AND name = $2
         RETURNING namespace, name, slots, used, rate AS "rate: Json<Rate>", created_at, updated_at"#,
        namespace,
        name,
        slots
    )
    .fetch_optional(db)
    .await?)
}

/// Sets the rate of pool `name` of `namespace` (None: no bound); the starts already
/// counted stay, so a new rate counts them too (None: no such pool).
pub async fn set_rate(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    rate: Option<Rate>,
) -> Result<Option<Pool>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"UPDATE pools SET rate = $3, updated_at = now() WHERE namespace = $1 AND name = $2
         RETURNING namespace, name, slots, used, rate AS "rate: Json<Rate>", created_at, updated_at"#,
        namespace,
        name,
        rate.map(Json) as Option<Json<Rate>>
    )
    .fetch_optional(db)
    .await?)
}

/// Deletes pool `name` of `namespace` when no job takes it; true when it was deleted.
/// (A job taking it keeps it: see [`jobs_using`].)
pub async fn delete_unused(db: impl PgExecutor<'_>, namespace: &str, name: &str) -> Result<bool, StoreError> {
    let deleted = sqlx::query!(
        "DELETE FROM pools WHERE namespace = $1 AND name = $2
           AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.namespace = $1 AND jobs.pool = $2)",
        namespace,
        name
    )
    .execute(db)
    .await?;
    Ok(deleted.rows_affected() == 1)
}

/// The names of the jobs taking pool `name` of `namespace`, sorted.
pub async fn jobs_using(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT name FROM jobs WHERE namespace = $1 AND pool = $2 ORDER BY name",
        namespace,
        name
    )
    .fetch_all(db)
    .await?)
}

/// The jobs taking pool `name` of `namespace` whose runs each hold more than `slots`, by
/// name, with the slots each run holds (what a resize to `slots` would leave unclaimable).
pub async fn jobs_wider_than(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
    slots: i32,
) -> Result<Vec<(String, i32)>, StoreError> {
    Ok(sqlx::query!(
        "SELECT name, pool_slots FROM jobs WHERE namespace = $1 AND pool = $2 AND pool_slots > $3
         ORDER BY name",
        namespace,
        name,
        slots
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| (row.name, row.pool_slots))
    .collect())
}

/// Why queued run `run_id` waits for its job's pool: "pool licence-server 3/3" while the
/// run's weight does not fit in what is left (None when it is not queued, its job takes
/// no pool, or it fits).
pub async fn queued_reason(db: impl PgExecutor<'_>, run_id: i64) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_as!(
        Pool,
        r#"SELECT pools.namespace, pools.name, pools.slots, pools.used, pools.rate AS "rate: Json<Rate>", pools.created_at, pools.updated_at
         FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
         JOIN pools ON pools.namespace = jobs.namespace AND pools.name = jobs.pool
         WHERE runs.id = $1 AND runs.state = 'queued' AND pools.used + jobs.pool_slots > pools.slots"#,
        run_id
    )
    .fetch_optional(db)
    .await?
    .map(|pool| pool.reason()))
}

/// A run holding slots of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Holder {
    /// The run.
    pub run_id: i64,
    /// Its job.
    pub job: String,
    /// The slots it holds.
    pub slots: i32,
    /// Its state (claimed or running).
    pub state: String,
}

/// The runs holding slots of pool `name` of `namespace`, oldest claim first.
pub async fn holders(
    db: impl PgExecutor<'_>,
    namespace: &str,
    name: &str,
) -> Result<Vec<Holder>, StoreError> {
    Ok(sqlx::query_as!(
        Holder,
        r#"SELECT runs.id AS run_id, jobs.name AS job, runs.quota_pool_slots AS "slots!", runs.state
           FROM pools JOIN runs_live AS runs ON runs.quota_pool = pools.id
           JOIN jobs ON jobs.id = runs.job_id
           WHERE pools.namespace = $1 AND pools.name = $2 AND runs.state IN ('claimed', 'running')
           ORDER BY runs.claimed_at, runs.id"#,
        namespace,
        name
    )
    .fetch_all(db)
    .await?)
}

/// How many runs of jobs taking pool `name` of `namespace` are queued.
pub async fn waiting(db: impl PgExecutor<'_>, namespace: &str, name: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "waiting!" FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
           WHERE jobs.namespace = $1 AND jobs.pool = $2 AND runs.state = 'queued'"#,
        namespace,
        name
    )
    .fetch_one(db)
    .await?)
}
