//! Redis locks: a mutex for non-parallel jobs and a permit set for parallel ones.
//!
//! # Efficiency here, correctness in PostgreSQL
//!
//! These locks keep contention cheap and fair: an executor that cannot take a job's lock
//! learns it in one round trip and backs off, instead of racing others through the
//! database. They are *not* what guarantees that a non-parallel job never overlaps:
//! a Redis restart forgets every lock, and a paused process can outlive its lease.
//! PostgreSQL does that (fencing tokens and a unique index over running runs, see
//! `docs/design.md`). So every decision below errs on the side of "busy": losing a lock may
//! delay work, never duplicate it.
//!
//! # Keys
//!
//! Every key starts with a configurable prefix (default [`DEFAULT_PREFIX`]) so several
//! clusters, or parallel tests, can share one Redis:
//!
//! - mutex: `{prefix}lock:job:{job_id}`, a string holding the owner's token;
//! - permit set: `{prefix}permits:job:{job_id}`, a sorted set of owner tokens scored by
//!   their expiry in milliseconds of the Redis server's clock.
//!
//! # The mutex protocol
//!
//! - **Acquire**: `SET key token NX PX lease`. `NX` makes it atomic: exactly one of many
//!   simultaneous callers creates the key. `PX` makes a dead owner's lock vanish by itself
//!   after its lease. The token is 128 random bits, unique to this acquisition.
//! - **Renew** every lease/3: a Lua compare-and-`PEXPIRE`, extending the key only if it
//!   still holds *our* token.
//! - **Release**: a Lua compare-and-`DEL`, deleting the key only if it still holds our token.
//!
//! Why compare first? Suppose our lease expired (a long GC pause, a slow network) and
//! another executor took the lock. A plain `DEL` or `PEXPIRE` would now delete or extend
//! *their* lock, letting a third one in or keeping a dead one alive. Comparing the token
//! and acting in one Lua script, which Redis runs atomically, makes that impossible:
//! **never delete a key you do not own**. A renewal that finds another token (or none)
//! answers [`Renewal::Lost`]: the caller must stop the job at once (the "stop point").
//!
//! # The permit set protocol (at most N holders)
//!
//! One Lua script per operation, all reading the time with the server's `TIME` (never a
//! local clock, so executors with skewed clocks agree on who expired):
//!
//! - **Acquire**: remove expired members (`ZREMRANGEBYSCORE -inf now`), then add our token
//!   with score `now + lease` if `ZCARD < max`. A holder that died simply expires.
//! - **Renew**: drop expired members; if our token is still there (`ZSCORE`), move its
//!   expiry (`ZADD XX`). A token that expired is lost even if nobody took its place yet,
//!   exactly like an expired mutex.
//! - **Release**: `ZREM` our own token, freeing the slot at once.
//!
//! After every add or renewal the set itself gets a `PEXPIRE` up to its latest member's
//! expiry, so the set of an idle job disappears from Redis on its own.
//!
//! # Retrying busy locks
//!
//! [`Locks::acquire`] retries a busy lock (and transient Redis failures) within a start
//! budget, sleeping with [`Backoff`] full jitter between attempts. All attempts of one
//! call use the same token, so an attempt whose reply was lost but which did take the
//! lock is recognised by the next attempt instead of leaving an orphan lock behind.
//! [`Locks::stats`] counts attempts and acquisitions, so a benchmark can show how many
//! round trips each acquisition cost under a given backoff.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::RedisError;

mod client;
mod link;
mod scripts;
pub mod target;

pub use client::Locks;
use client::{is_transient, token_prefix};

/// The key prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "probactr:";

/// The mutex key of a non-parallel job.
pub fn mutex_key(prefix: &str, job_id: i64) -> String {
    format!("{prefix}lock:job:{job_id}")
}

/// The permit set key of a parallel job.
pub fn permit_key(prefix: &str, job_id: i64) -> String {
    format!("{prefix}permits:job:{job_id}")
}

/// What a caller wants to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The job's mutex: one holder at most.
    Mutex {
        /// The job.
        job_id: i64,
    },
    /// One of the job's `max` permits: `max` holders at most.
    Permit {
        /// The job.
        job_id: i64,
        /// How many holders may run at once (at least 1).
        max: u32,
    },
}

impl Want {
    /// The job this lock belongs to.
    pub fn job_id(&self) -> i64 {
        match *self {
            Want::Mutex { job_id } | Want::Permit { job_id, .. } => job_id,
        }
    }
}

/// The outcome of an attempt to take a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an acquired lease must be renewed and released"]
pub enum Acquire {
    /// We hold it until the lease expires, unless renewed.
    Acquired(Lease),
    /// Someone else holds it (every permit is taken).
    Busy {
        /// How many times we asked Redis before giving up.
        attempts: u32,
    },
}

impl Acquire {
    /// The lease, if acquired.
    pub fn into_lease(self) -> Option<Lease> {
        match self {
            Acquire::Acquired(lease) => Some(lease),
            Acquire::Busy { .. } => None,
        }
    }

    /// Whether the lock was acquired.
    pub fn is_acquired(&self) -> bool {
        matches!(self, Acquire::Acquired(_))
    }
}

/// Which kind of lock a lease is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// A job's mutex (non-parallel job).
    Mutex,
    /// One permit of a job's permit set (parallel job).
    Permit,
}

/// A held lock: enough to renew or release it, even from another process.
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    kind: LockKind,
    job_id: i64,
    key: String,
    token: String,
    ttl: Duration,
}

impl Lease {
    /// Rebuilds a lease from what a run row stores (job id, whether it is a mutex or a
    /// permit, token), so a monitor can release a dead executor's lock by its own token.
    pub fn from_parts(prefix: &str, job_id: i64, exclusive: bool, token: String, ttl: Duration) -> Lease {
        let (kind, key) = if exclusive {
            (LockKind::Mutex, mutex_key(prefix, job_id))
        } else {
            (LockKind::Permit, permit_key(prefix, job_id))
        };
        Lease {
            kind,
            job_id,
            key,
            token,
            ttl,
        }
    }

    /// The owner token, unique to this acquisition (store it on the run).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Mutex or permit.
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// `true` for a mutex, `false` for a permit (what a run row stores).
    pub fn is_exclusive(&self) -> bool {
        self.kind == LockKind::Mutex
    }

    /// The job this lock belongs to.
    pub fn job_id(&self) -> i64 {
        self.job_id
    }

    /// The Redis key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How long the lock lives after each acquisition or renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often to renew: a third of the lease, so two renewals may fail before it expires.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("kind", &self.kind)
            .field("job_id", &self.job_id)
            .field("key", &self.key)
            .field("token", &token_prefix(&self.token))
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// The outcome of a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a lost lock means the job must stop at once"]
pub enum Renewal {
    /// Still ours, for another full lease.
    Renewed,
    /// Expired or taken by another: stop the job now.
    Lost,
}

/// Why a lock operation failed (as opposed to answering busy or lost).
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Redis failed or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    /// `REDIS_URL` names TLS files that are unusable, or misplaced parameters.
    #[error("REDIS_URL: {0}")]
    Target(target::TargetError),
    /// A lease must last at least one millisecond.
    #[error("a lock lease must last at least 1 ms, not {0:?}")]
    InvalidLease(Duration),
    /// A permit set needs at least one permit.
    #[error("job {job_id}: a permit set needs at least 1 permit")]
    NoPermits {
        /// The job.
        job_id: i64,
    },
}

impl From<target::TargetError> for LockError {
    fn from(error: target::TargetError) -> Self {
        match error {
            target::TargetError::Redis(error) => LockError::Redis(error),
            other => LockError::Target(other),
        }
    }
}

impl LockError {
    /// Whether Redis could not be reached or did not answer in time (as opposed to
    /// answering with an error): nothing was learnt about the lock.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, LockError::Redis(error) if is_transient(error))
    }
}

/// A snapshot of the lock counters of a [`Locks`] and its clones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Acquisition attempts sent to Redis (each retry counts).
    pub attempts: u64,
    /// Attempts that took the lock.
    pub acquisitions: u64,
    /// [`Locks::acquire`] calls that ran out of budget and answered busy.
    pub gave_up: u64,
    /// Renewals that kept the lock.
    pub renewals: u64,
    /// Renewals that found the lock lost.
    pub lost: u64,
    /// Releases that freed a lock we held.
    pub releases: u64,
}

impl LockStats {
    /// Round trips per successful acquisition (`None` before the first one).
    pub fn attempts_per_acquisition(&self) -> Option<f64> {
        (self.acquisitions > 0).then(|| self.attempts as f64 / self.acquisitions as f64)
    }
}

#[derive(Debug, Default)]
struct Counters {
    attempts: AtomicU64,
    acquisitions: AtomicU64,
    gave_up: AtomicU64,
    renewals: AtomicU64,
    lost: AtomicU64,
    releases: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
