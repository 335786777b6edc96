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
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{RedisError, RetryMethod, Script};
use tokio::time::Instant;

use crate::backoff::{retry_until, Backoff, Retry, RetryError};

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

/// Shared Lua helpers, prepended to the scripts that need them.
///
/// `now_ms` reads the server clock. `expire_with_last_member` keeps a permit set alive
/// exactly as long as its longest lease, so an idle set disappears on its own.
const LUA_HELPERS: &str = r#"
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local function expire_with_last_member(key, now)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(last[2]) - now)))
  end
end
"#;

/// KEYS[1] mutex, ARGV[1] token, ARGV[2] lease ms. Returns 1 if we hold it now.
/// Taking a lock we already hold (same token: a retry whose first reply was lost) re-arms it.
const MUTEX_ACQUIRE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"#;

/// KEYS[1] mutex, ARGV[1] token, ARGV[2] lease ms. Compare-and-PEXPIRE: 1 if renewed.
const MUTEX_RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// KEYS[1] mutex, ARGV[1] token. Compare-and-delete: 1 if we held it.
const MUTEX_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// KEYS[1] permit set, ARGV[1] token, ARGV[2] max holders, ARGV[3] lease ms. 1 if we hold one.
const PERMIT_ACQUIRE: &str = r#"
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
expire_with_last_member(KEYS[1], now)
return 1
"#;

/// KEYS[1] permit set, ARGV[1] token, ARGV[2] lease ms. 1 if renewed, 0 if expired or gone.
const PERMIT_RENEW: &str = r#"
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
expire_with_last_member(KEYS[1], now)
return 1
"#;

/// KEYS[1] permit set, ARGV[1] token. 1 if we held an unexpired permit.
const PERMIT_RELEASE: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
return redis.call('ZREM', KEYS[1], ARGV[1])
"#;

/// The scripts, hashed once. `Script` sends `EVALSHA` and falls back to loading the
/// script when Redis answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
struct Scripts {
    mutex_acquire: Script,
    mutex_renew: Script,
    mutex_release: Script,
    permit_acquire: Script,
    permit_renew: Script,
    permit_release: Script,
}

impl Scripts {
    fn new() -> Self {
        let with_helpers = |body: &str| Script::new(&format!("{LUA_HELPERS}{body}"));
        Scripts {
            mutex_acquire: Script::new(MUTEX_ACQUIRE),
            mutex_renew: Script::new(MUTEX_RENEW),
            mutex_release: Script::new(MUTEX_RELEASE),
            permit_acquire: with_helpers(PERMIT_ACQUIRE),
            permit_renew: with_helpers(PERMIT_RENEW),
            permit_release: with_helpers(PERMIT_RELEASE),
        }
    }
}

/// Why one acquisition attempt did not take the lock.
enum Miss {
    Busy,
    Failed(RedisError),
}

/// The job locks of one cluster (one key prefix). Cheap to clone; clones share the
/// connection and the counters.
#[derive(Clone)]
pub struct Locks {
    conn: ConnectionManager,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
    counters: Arc<Counters>,
    health: Arc<Health>,
}

/// Whether Redis answered the last call, and when an unreachable Redis was last probed.
#[derive(Debug)]
struct Health {
    reachable: std::sync::atomic::AtomicBool,
    since: Instant,
    last_probe_ms: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            reachable: std::sync::atomic::AtomicBool::new(true),
            since: Instant::now(),
            last_probe_ms: AtomicU64::new(0),
        }
    }
}

impl fmt::Debug for Locks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locks")
            .field("prefix", &self.prefix)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Locks {
    /// Locks over an existing connection, under `prefix` (e.g. [`DEFAULT_PREFIX`]).
    pub fn new(conn: ConnectionManager, prefix: impl Into<String>) -> Self {
        Locks {
            conn,
            prefix: Arc::from(prefix.into()),
            scripts: Arc::new(Scripts::new()),
            counters: Arc::new(Counters::default()),
            health: Arc::new(Health::default()),
        }
    }

    /// Connects to `redis_url` (reconnecting by itself later) and uses `prefix`.
    pub async fn connect(redis_url: &str, prefix: &str) -> Result<Self, LockError> {
        let client = redis::Client::open(redis_url)?;
        // Bounded timeouts: a stalled Redis must fail a call (so lease renewal can reach
        // its stop point) rather than hang it.
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_with_config(client, config).await?;
        Ok(Locks::new(conn, prefix))
    }

    /// Connects, retrying with full jitter while Redis is unreachable; None when `stop`
    /// is cancelled first. Processes start even while Redis is down.
    pub async fn connect_patiently(
        redis_url: &str,
        prefix: &str,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Option<Self>, LockError> {
        // A URL that does not parse will never connect: fail at once.
        redis::Client::open(redis_url)?;
        let backoff = Backoff::full_jitter(Duration::from_millis(100), Duration::from_secs(5));
        let mut failures = 0u32;
        loop {
            match Locks::connect(redis_url, prefix).await {
                Ok(locks) => return Ok(Some(locks)),
                Err(err) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %err, failures, "cannot reach Redis yet; retrying");
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(None),
                        _ = tokio::time::sleep(backoff.delay(failures.min(10))) => {}
                    }
                }
            }
        }
    }

    /// Whether Redis answered the last call (any call: acquire, renew, release).
    pub fn reachable(&self) -> bool {
        self.health.reachable.load(Ordering::Relaxed)
    }

    /// Whether a caller should try Redis now: always while it answers; while it does not,
    /// one caller per `probe_every` (the probe that notices its return). Each call to an
    /// unreachable Redis costs a response timeout, so an executor cut off from Redis gives
    /// its claimed runs back at once instead of holding each for seconds.
    pub fn may_try(&self, probe_every: Duration) -> bool {
        if self.reachable() {
            return true;
        }
        let now = u64::try_from(self.health.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.health.last_probe_ms.load(Ordering::Relaxed);
        let every = u64::try_from(probe_every.as_millis()).unwrap_or(u64::MAX);
        now.saturating_sub(last) >= every
            && self
                .health
                .last_probe_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Whether locks can be taken now, answered at once: true while Redis answers. While
    /// it does not, one caller per `probe_every` starts a ping in the background (a
    /// stalled Redis makes it wait out the response timeout, which no caller should), and
    /// its answer decides the next calls.
    pub fn usable(&self, probe_every: Duration) -> bool {
        if self.reachable() {
            return true;
        }
        if self.may_try(probe_every) {
            let locks = self.clone();
            tokio::spawn(async move {
                let pong = redis::cmd("PING")
                    .query_async::<String>(&mut locks.conn.clone())
                    .await;
                if locks.noted(pong).is_ok() {
                    tracing::info!("Redis answers again");
                }
            });
        }
        false
    }

    /// Notes whether Redis answered: a reply, even an error reply, means it did.
    fn noted<T>(&self, result: Result<T, RedisError>) -> Result<T, RedisError> {
        let answered = match &result {
            Ok(_) => true,
            Err(error) => !is_transient(error),
        };
        self.health.reachable.store(answered, Ordering::Relaxed);
        result
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The counters so far, summed over this value and its clones.
    pub fn stats(&self) -> LockStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let c = &self.counters;
        LockStats {
            attempts: read(&c.attempts),
            acquisitions: read(&c.acquisitions),
            gave_up: read(&c.gave_up),
            renewals: read(&c.renewals),
            lost: read(&c.lost),
            releases: read(&c.releases),
        }
    }

    /// One attempt at the job's mutex (`SET NX PX`), with a fresh token.
    pub async fn try_mutex(&self, job_id: i64, lease: Duration) -> Result<Acquire, LockError> {
        self.try_once(Want::Mutex { job_id }, lease).await
    }

    /// One attempt at one of the job's `max` permits, with a fresh token.
    pub async fn try_permit(&self, job_id: i64, max: u32, lease: Duration) -> Result<Acquire, LockError> {
        self.try_once(Want::Permit { job_id, max }, lease).await
    }

    /// Tries to take `want` until it is ours or `budget` has passed, backing off between
    /// attempts. Answers [`Acquire::Busy`] when the budget ran out with the lock still
    /// taken; a Redis failure that outlasts the budget (or cannot heal) is an error.
    /// A zero budget means exactly one attempt.
    pub async fn acquire(
        &self,
        want: Want,
        lease: Duration,
        budget: Duration,
        backoff: &Backoff,
    ) -> Result<Acquire, LockError> {
        check_request(want, lease)?;
        let token = new_token();
        let deadline = deadline_after(budget);
        let (this, token_ref) = (self, token.as_str());
        let outcome = retry_until(backoff, deadline, move || async move {
            match this.attempt(want, token_ref, lease).await {
                Ok(Some(lease)) => Ok(lease),
                Ok(None) => Err(Retry::Again(Miss::Busy)),
                Err(error) if is_transient(&error) => Err(Retry::Again(Miss::Failed(error))),
                Err(error) => Err(Retry::Fatal(Miss::Failed(error))),
            }
        })
        .await;
        match outcome {
            Ok(lease) => Ok(Acquire::Acquired(lease)),
            Err(RetryError::DeadlineExceeded {
                attempts,
                last: Miss::Busy,
            }) => {
                bump(&self.counters.gave_up);
                tracing::debug!(
                    job_id = want.job_id(),
                    attempts,
                    ?budget,
                    "lock still busy at the end of the budget"
                );
                Ok(Acquire::Busy { attempts })
            }
            Err(RetryError::Fatal {
                error: Miss::Busy,
                attempts,
            }) => Ok(Acquire::Busy { attempts }),
            Err(RetryError::DeadlineExceeded {
                last: Miss::Failed(error),
                ..
            })
            | Err(RetryError::Fatal {
                error: Miss::Failed(error),
                ..
            }) => Err(error.into()),
        }
    }

    /// Extends a held lease by its ttl, if it is still ours. [`Renewal::Lost`] means the
    /// lease expired or another holder has it: stop the job now.
    pub async fn renew(&self, lease: &Lease) -> Result<Renewal, LockError> {
        let ttl_ms = lease_millis(lease.ttl)?;
        let script = match lease.kind {
            LockKind::Mutex => &self.scripts.mutex_renew,
            LockKind::Permit => &self.scripts.permit_renew,
        };
        let renewed: i64 = self.noted(
            script
                .key(&lease.key)
                .arg(&lease.token)
                .arg(ttl_ms)
                .invoke_async(&mut self.conn.clone())
                .await,
        )?;
        let renewal = if renewed == 1 {
            Renewal::Renewed
        } else {
            Renewal::Lost
        };
        match renewal {
            Renewal::Renewed => bump(&self.counters.renewals),
            Renewal::Lost => bump(&self.counters.lost),
        }
        tracing::debug!(job_id = lease.job_id, token = token_prefix(&lease.token), key = %lease.key, ?renewal, "lock renewal");
        Ok(renewal)
    }

    /// Gives a lease back, only if it is still ours; `true` if we held it. Never touches
    /// another holder's lock, so it is safe to call with a stale or rebuilt lease.
    pub async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let script = match lease.kind {
            LockKind::Mutex => &self.scripts.mutex_release,
            LockKind::Permit => &self.scripts.permit_release,
        };
        let removed: i64 = self.noted(
            script
                .key(&lease.key)
                .arg(&lease.token)
                .invoke_async(&mut self.conn.clone())
                .await,
        )?;
        let held = removed == 1;
        if held {
            bump(&self.counters.releases);
        }
        tracing::debug!(job_id = lease.job_id, token = token_prefix(&lease.token), key = %lease.key, held, "lock release");
        Ok(held)
    }

    async fn try_once(&self, want: Want, lease: Duration) -> Result<Acquire, LockError> {
        check_request(want, lease)?;
        let token = new_token();
        Ok(match self.attempt(want, &token, lease).await? {
            Some(lease) => Acquire::Acquired(lease),
            None => Acquire::Busy { attempts: 1 },
        })
    }

    /// One round trip: `Some(lease)` if `token` holds `want` now, `None` if busy.
    async fn attempt(&self, want: Want, token: &str, ttl: Duration) -> Result<Option<Lease>, RedisError> {
        bump(&self.counters.attempts);
        // `check_request` ran before any attempt, so the lease is at least 1 ms.
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut conn = self.conn.clone();
        let (kind, key, taken): (LockKind, String, i64) = match want {
            Want::Mutex { job_id } => {
                let key = mutex_key(&self.prefix, job_id);
                let taken = self.noted(
                    self.scripts
                        .mutex_acquire
                        .key(&key)
                        .arg(token)
                        .arg(ttl_ms)
                        .invoke_async(&mut conn)
                        .await,
                )?;
                (LockKind::Mutex, key, taken)
            }
            Want::Permit { job_id, max } => {
                let key = permit_key(&self.prefix, job_id);
                let taken = self.noted(
                    self.scripts
                        .permit_acquire
                        .key(&key)
                        .arg(token)
                        .arg(max)
                        .arg(ttl_ms)
                        .invoke_async(&mut conn)
                        .await,
                )?;
                (LockKind::Permit, key, taken)
            }
        };
        let job_id = want.job_id();
        if taken != 1 {
            tracing::debug!(job_id, token = token_prefix(token), %key, "lock busy");
            return Ok(None);
        }
        bump(&self.counters.acquisitions);
        tracing::debug!(job_id, token = token_prefix(token), %key, ?ttl, "lock acquired");
        Ok(Some(Lease {
            kind,
            job_id,
            key,
            token: token.to_owned(),
            ttl,
        }))
    }
}

fn check_request(want: Want, lease: Duration) -> Result<(), LockError> {
    lease_millis(lease)?;
    match want {
        Want::Permit { job_id, max: 0 } => Err(LockError::NoPermits { job_id }),
        _ => Ok(()),
    }
}

/// The lease in whole milliseconds, refusing anything under 1 ms (`PX 0` is an error).
fn lease_millis(lease: Duration) -> Result<u64, LockError> {
    match u64::try_from(lease.as_millis()) {
        Ok(0) => Err(LockError::InvalidLease(lease)),
        Ok(ms) => Ok(ms),
        Err(_) => Ok(u64::MAX),
    }
}

fn deadline_after(budget: Duration) -> Instant {
    let now = Instant::now();
    // A budget too large to represent means "practically forever".
    now.checked_add(budget)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 86_400)))
        .unwrap_or(now)
}

/// Failures worth another attempt: the connection manager reconnects by itself.
fn is_transient(error: &RedisError) -> bool {
    error.is_io_error() || !matches!(error.retry_method(), RetryMethod::NoRetry)
}

/// 128 random bits as 32 hex digits.
fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Enough of a token to follow it through logs without printing it whole.
fn token_prefix(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}
