//! The job definitions this executor read last, keyed by job id with their version.
//!
//! Every claim answers the current `jobs.version` of each claimed run's job; a job whose
//! cached version matches is not read again. An edit bumps the version, so a run never
//! executes an outdated definition, and a claim of runs of known jobs costs one round
//! trip instead of two.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use probactr_common::model::Job;
use probactr_common::store::{jobs, StoreError};
use sqlx::PgPool;

/// Beyond this many cached jobs the cache starts afresh (a bound, not a policy: an
/// executor seldom runs that many distinct jobs in a short while).
const MAX_CACHED: usize = 10_000;

/// Job definitions by id.
#[derive(Debug, Default)]
pub struct JobCache {
    /// Shared with the attempts that run them: a run takes a reference, not a copy of
    /// the definition's strings and JSON.
    jobs: Mutex<HashMap<i64, Arc<Job>>>,
}

impl JobCache {
    /// The jobs of `wanted` (job id, version at the claim), read from PostgreSQL only
    /// where the cache lacks that version. A job deleted since the claim is missing.
    pub async fn get(
        &self,
        pool: &PgPool,
        wanted: &[(i64, i64)],
    ) -> Result<HashMap<i64, Arc<Job>>, StoreError> {
        let mut stale: Vec<i64> = {
            let cached = self.lock();
            wanted
                .iter()
                .filter(|(id, version)| cached.get(id).is_none_or(|job| job.version != *version))
                .map(|(id, _)| *id)
                .collect()
        };
        stale.sort_unstable();
        stale.dedup();
        if !stale.is_empty() {
            let fresh = jobs::get_many(pool, &stale).await?;
            let mut cached = self.lock();
            if cached.len() + fresh.len() > MAX_CACHED {
                cached.clear();
            }
            cached.extend(fresh.into_iter().map(|job| (job.id, Arc::new(job))));
        }
        let cached = self.lock();
        Ok(wanted
            .iter()
            .filter_map(|(id, _)| cached.get(id).map(|job| (*id, job.clone())))
            .collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<Job>>> {
        // A panic while holding the lock leaves a usable map (entries are whole jobs).
        self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
