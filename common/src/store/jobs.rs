//! Queries over `jobs`, including the fencing-token counter.

use serde::{Deserialize, Serialize};
use sqlx::PgExecutor;

use super::StoreError;
use crate::model::{Job, JobKind, Overlap};

/// What it takes to create a job; the database fills in ids, fence, version and times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewJob {
    /// Unique name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// What it runs.
    pub kind: JobKind,
    /// Kind-specific definition (see the executor's `job` module).
    pub spec: serde_json::Value,
    /// May attempts run at the same time?
    pub parallel: bool,
    /// Bound on concurrent attempts of a parallel job (None: unbounded).
    pub max_concurrency: Option<i32>,
    /// What to do when the lock or permit cannot be had.
    pub overlap: Overlap,
    /// Seconds an attempt may run.
    pub timeout_secs: i32,
    /// Attempts in all, the first included.
    pub retry_max_attempts: i32,
    /// Seconds between attempts (doubled each time).
    pub retry_backoff_secs: i32,
    /// Created paused?
    pub paused: bool,
}

impl NewJob {
    /// A job of `kind` with the defaults the schema gives.
    pub fn new(name: impl Into<String>, kind: JobKind, spec: serde_json::Value) -> NewJob {
        NewJob {
            name: name.into(),
            description: String::new(),
            kind,
            spec,
            parallel: false,
            max_concurrency: None,
            overlap: Overlap::Skip,
            timeout_secs: 3600,
            retry_max_attempts: 1,
            retry_backoff_secs: 10,
            paused: false,
        }
    }
}

/// Inserts a job and returns the stored row.
pub async fn insert(db: impl PgExecutor<'_>, job: &NewJob) -> Result<Job, StoreError> {
    let row = sqlx::query_as::<_, Job>(
        "INSERT INTO jobs (name, description, kind, spec, parallel, max_concurrency, overlap,
                           timeout_secs, retry_max_attempts, retry_backoff_secs, paused)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         RETURNING *",
    )
    .bind(&job.name)
    .bind(&job.description)
    .bind(job.kind.as_str())
    .bind(&job.spec)
    .bind(job.parallel)
    .bind(job.max_concurrency)
    .bind(job.overlap.as_str())
    .bind(job.timeout_secs)
    .bind(job.retry_max_attempts)
    .bind(job.retry_backoff_secs)
    .bind(job.paused)
    .fetch_one(db)
    .await?;
    Ok(row)
}

/// One job by id.
pub async fn get(db: impl PgExecutor<'_>, id: i64) -> Result<Option<Job>, StoreError> {
    Ok(sqlx::query_as::<_, Job>("SELECT * FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?)
}

/// Sets a job's paused flag; returns the new row (None when the job does not exist).
pub async fn set_paused(db: impl PgExecutor<'_>, id: i64, paused: bool) -> Result<Option<Job>, StoreError> {
    Ok(sqlx::query_as::<_, Job>(
        "UPDATE jobs SET paused = $2, version = version + 1, updated_at = now() WHERE id = $1 RETURNING *",
    )
    .bind(id)
    .bind(paused)
    .fetch_optional(db)
    .await?)
}

/// Several jobs by id (the ones that exist).
pub async fn get_many(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<Vec<Job>, StoreError> {
    Ok(sqlx::query_as::<_, Job>("SELECT * FROM jobs WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(db)
        .await?)
}
