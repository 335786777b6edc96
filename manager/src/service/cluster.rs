//! The cluster summary behind `GET /api/v1/status` and the dashboard, computed at most
//! once per [`STATUS_MAX_AGE`] by each manager however many people and scripts watch it.
//!
//! Its counts of the last hour's runs read every run of that hour, so their cost grows
//! with the cluster's load; a summary a second old is as good to a viewer, and with it
//! the database pays for one computation a second, not one per viewer. Concurrent
//! requests for a stale summary wait for the one computing it rather than repeat it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use crate::db::{self, cluster::Status};
use crate::error::ApiError;
use crate::state::AppState;

/// How old a served summary may be.
pub const STATUS_MAX_AGE: Duration = Duration::from_secs(1);

/// The latest summary and when it was computed.
#[derive(Debug, Default)]
pub struct StatusCache {
    latest: Mutex<Option<(Instant, Arc<Status>)>>,
}

impl StatusCache {
    /// A summary at most `max_age` old, computed by `compute` when the kept one is older.
    async fn get_or_compute<F, Fut>(&self, max_age: Duration, compute: F) -> Result<Arc<Status>, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Status, ApiError>>,
    {
        let mut latest = self.latest.lock().await;
        if let Some((at, status)) = latest.as_ref() {
            if at.elapsed() < max_age {
                return Ok(Arc::clone(status));
            }
        }
        let status = Arc::new(compute().await?);
        *latest = Some((Instant::now(), Arc::clone(&status)));
        Ok(status)
    }
}

/// The cluster summary, at most [`STATUS_MAX_AGE`] old.
pub async fn status(state: &AppState) -> Result<Arc<Status>, ApiError> {
    state
        .status_cache
        .get_or_compute(state.status_max_age, || async {
            Ok(db::cluster::status(&state.pool).await?)
        })
        .await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn summary() -> Status {
        Status {
            processes: BTreeMap::new(),
            runs_last_hour: BTreeMap::new(),
            runs_per_minute: Vec::new(),
            recent_failures: Vec::new(),
            next_fires: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_fresh_summary_is_shared_and_a_stale_one_recomputed() {
        let cache = Arc::new(StatusCache::default());
        let computed = Arc::new(AtomicUsize::new(0));
        let ask = |max_age: Duration| {
            let cache = Arc::clone(&cache);
            let computed = Arc::clone(&computed);
            async move {
                cache
                    .get_or_compute(max_age, || async {
                        computed.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok(summary())
                    })
                    .await
                    .map(|_| ())
            }
        };
        let together: Vec<_> = (0..8)
            .map(|_| tokio::spawn(ask(Duration::from_secs(60))))
            .collect();
        for request in together {
            request.await.expect("task").expect("summary");
        }
        assert_eq!(
            computed.load(Ordering::SeqCst),
            1,
            "concurrent requests share one computation"
        );
        ask(Duration::ZERO).await.expect("summary");
        assert_eq!(
            computed.load(Ordering::SeqCst),
            2,
            "a stale summary is recomputed"
        );
    }

    #[tokio::test]
    async fn a_failed_computation_is_not_kept() {
        let cache = StatusCache::default();
        let failed = cache
            .get_or_compute(Duration::from_secs(60), || async {
                Err(ApiError::Conflict("down".into()))
            })
            .await;
        assert!(failed.is_err());
        let next = cache
            .get_or_compute(Duration::from_secs(60), || async { Ok(summary()) })
            .await;
        assert!(next.is_ok());
    }
}
