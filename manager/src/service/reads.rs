//! Reads served by a streaming replica (`DATABASE_READ_URL`) while it keeps up.
//!
//! Lists, run pages, output and the dashboard are what many operators watch at once; a
//! replica takes that load off the primary the executors claim from. Every other
//! statement goes to the primary. The replica is trusted only as far as it is measured:
//! every [`SAMPLE_EVERY`] the watcher reads the primary's position in the write-ahead log,
//! then the replica's replayed position, and keeps the moment up to which the replica is
//! known to hold everything ([`State::replayed_as_of`]). A replica further behind than
//! `PROBACTR_READ_MAX_LAG`, or not answering, serves nothing until it catches up.
//!
//! A user who has just changed something reads from the primary until the replica has
//! replayed past the end of that request ([`note_writes`]), so nobody saves a job and then
//! finds it missing from the list.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::{Request, State as AxumState};
use axum::middleware::Next;
use axum::response::Response;
use probactr_common::store::replication;
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;

/// How often the replica's lag is measured.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// How long one measurement may take before the replica counts as not answering.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the manager's reads go. Without a replica, everything goes to the primary.
#[derive(Default)]
pub struct Reads {
    replica: Option<Replica>,
    /// Requests that may have changed something answered so far (see
    /// [`Reads::writes_served`]).
    writes_served: AtomicU64,
}

struct Replica {
    pool: PgPool,
    max_lag: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Everything the primary had committed by this moment is on the replica (None:
    /// not measured yet, or the replica does not answer).
    replayed_as_of: Option<Instant>,
    /// The primary's positions sampled, oldest first (only as far back as is useful).
    samples: VecDeque<(Instant, i64)>,
    /// When each user's last change ended, until the replica has replayed it.
    writes: HashMap<i64, Instant>,
}

impl Reads {
    /// Reads from `replica` while it lags at most `max_lag`.
    pub fn with_replica(replica: PgPool, max_lag: Duration) -> Reads {
        Reads {
            replica: Some(Replica {
                pool: replica,
                max_lag,
                state: Mutex::default(),
            }),
            writes_served: AtomicU64::default(),
        }
    }

    /// How many requests that may have changed something this manager has answered: a
    /// read begun before the count moved is not shared with a request made after it
    /// ([`super::single_flight`]).
    pub fn writes_served(&self) -> u64 {
        self.writes_served.load(Ordering::Acquire)
    }

    /// Whether a replica is configured.
    pub fn has_replica(&self) -> bool {
        self.replica.is_some()
    }

    /// The pool `who`'s read should use: the replica when it keeps up and holds this
    /// user's last change, else `primary` (always within a changing request).
    pub fn pool<'a>(&'a self, primary: &'a PgPool, who: &Principal) -> &'a PgPool {
        match &self.replica {
            Some(replica) if !who.changing && replica.serves(who.user_id) => &replica.pool,
            _ => primary,
        }
    }

    /// Notes that `user_id` has just changed something.
    pub fn note_write(&self, user_id: i64) {
        if let Some(replica) = &self.replica {
            replica.state().writes.insert(user_id, Instant::now());
        }
    }

    /// Measures the replica's lag every [`SAMPLE_EVERY`] until `stop` is cancelled.
    pub async fn watch(self: Arc<Self>, primary: PgPool, stop: CancellationToken) {
        let Some(replica) = &self.replica else { return };
        let mut serving = false;
        loop {
            replica.measure(&primary).await;
            let now_serving = replica.usable(Instant::now());
            if now_serving != serving {
                serving = now_serving;
                if serving {
                    tracing::info!("the read replica keeps up: lists, run pages and output are read from it");
                } else {
                    tracing::warn!(max_lag = ?replica.max_lag,
                        "the read replica lags or does not answer: reads go to the primary");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(SAMPLE_EVERY) => {}
            }
        }
    }
}

impl Replica {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn usable(&self, now: Instant) -> bool {
        self.state()
            .replayed_as_of
            .is_some_and(|replayed| now.saturating_duration_since(replayed) <= self.max_lag)
    }

    fn serves(&self, user_id: i64) -> bool {
        let now = Instant::now();
        let state = self.state();
        let Some(replayed) = state.replayed_as_of else {
            return false;
        };
        now.saturating_duration_since(replayed) <= self.max_lag
            && state.writes.get(&user_id).is_none_or(|wrote| *wrote <= replayed)
    }

    /// One measurement: the primary's position now, then the replica's (read after it,
    /// so a replica at or past it holds everything committed before this moment).
    async fn measure(&self, primary: &PgPool) {
        let sampled_at = Instant::now();
        let primary_at = tokio::time::timeout(SAMPLE_TIMEOUT, replication::wal_position(primary)).await;
        let Ok(Ok(Some(primary_at))) = primary_at else {
            // The primary not answering says nothing about the replica; measure again.
            return;
        };
        let replica_at = tokio::time::timeout(SAMPLE_TIMEOUT, replication::wal_position(&self.pool)).await;
        let mut state = self.state();
        state.samples.push_back((sampled_at, primary_at));
        match replica_at {
            Ok(Ok(Some(replica_at))) => {
                let replayed = state
                    .samples
                    .iter()
                    .rev()
                    .find(|(_, position)| *position <= replica_at)
                    .map(|(at, _)| *at);
                if replayed.is_some() {
                    state.replayed_as_of = replayed;
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "cannot read the replica's position");
                state.replayed_as_of = None;
            }
            Err(_) => state.replayed_as_of = None,
        }
        self.forget_old(&mut state, sampled_at);
    }

    /// Keeps the samples that may still name the replica's position within the bound,
    /// and the writes it has not replayed yet.
    fn forget_old(&self, state: &mut State, now: Instant) {
        let horizon = self.max_lag + SAMPLE_EVERY * 4;
        while state.samples.len() > 1
            && state
                .samples
                .front()
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) > horizon)
        {
            state.samples.pop_front();
        }
        if let Some(replayed) = state.replayed_as_of {
            state.writes.retain(|_, wrote| *wrote > replayed);
        }
    }
}

/// The user a changing request was made by, filled in by [`Principal`]'s extraction.
#[derive(Clone, Default)]
pub struct Writer(Arc<Mutex<Option<i64>>>);

impl Writer {
    /// Records who makes the request.
    pub fn set(&self, user_id: i64) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(user_id);
    }

    fn take(&self) -> Option<i64> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// Middleware: after a request that may change something (any method but `GET`,
/// `HEAD`, `OPTIONS`), its user reads from the primary until the replica has it. The
/// time noted is the end of the request, after its transaction committed. Every such
/// request, with a replica or without, also ends the sharing of reads begun before it.
pub async fn note_writes(
    AxumState(reads): AxumState<Arc<Reads>>,
    mut request: Request,
    next: Next,
) -> Response {
    if request.method().is_safe() {
        return next.run(request).await;
    }
    let writer = reads.has_replica().then(Writer::default);
    if let Some(writer) = &writer {
        request.extensions_mut().insert(writer.clone());
    }
    let response = next.run(request).await;
    if let Some(user_id) = writer.and_then(|writer| writer.take()) {
        reads.note_write(user_id);
    }
    reads.writes_served.fetch_add(1, Ordering::AcqRel);
    response
}
