//! [`Locks`]: acquiring, renewing and releasing job locks and permits against Redis.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{FromRedisValue, RedisError, RetryMethod, ScriptInvocation};
use tokio::time::Instant;

use super::link::Link;
use super::scripts::Scripts;
use super::*;
use crate::backoff::{retry_until, Backoff, Retry, RetryError};

/// Why one acquisition attempt did not take the lock.
enum Miss {
    Busy,
    Failed(RedisError),
}

/// The job locks of one cluster (one key prefix). Cheap to clone; clones share the
/// connection and the counters.
#[derive(Clone)]
pub struct Locks {
    link: Arc<Link>,
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
        Locks::over(Link::over(conn), prefix)
    }

    fn over(link: Link, prefix: impl Into<String>) -> Self {
        Locks {
            link: Arc::new(link),
            prefix: Arc::from(prefix.into()),
            scripts: Arc::new(Scripts::new()),
            counters: Arc::new(Counters::default()),
            health: Arc::new(Health::default()),
        }
    }

    /// Connects to `redis_url` (reconnecting by itself later) and uses `prefix`. The URL
    /// may be `rediss://` with certificate files, or name sentinels
    /// ([`target`](super::target)); with sentinels the master is found again after a
    /// failover.
    pub async fn connect(redis_url: &str, prefix: &str) -> Result<Self, LockError> {
        let server = super::target::server(redis_url)?;
        Ok(Locks::over(Link::open(server).await?, prefix))
    }

    /// Connects, retrying with full jitter while Redis is unreachable; None when `stop`
    /// is cancelled first. Processes start even while Redis is down.
    pub async fn connect_patiently(
        redis_url: &str,
        prefix: &str,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Option<Self>, LockError> {
        // A URL that does not parse (or names unreadable certificates) will never
        // connect: fail at once.
        super::target::server(redis_url)?;
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
                    .query_async::<String>(&mut locks.link.connection())
                    .await;
                if let Err(error) = &pong {
                    locks.link.failed(error).await;
                }
                if locks.noted(pong).is_ok() {
                    tracing::info!("Redis answers again");
                }
            });
        }
        false
    }

    /// Runs a script over the current connection; a failure lets the link look for a
    /// moved master before the caller retries.
    async fn invoke<T: FromRedisValue>(&self, invocation: &ScriptInvocation<'_>) -> Result<T, RedisError> {
        let result = invocation.invoke_async(&mut self.link.connection()).await;
        if let Err(error) = &result {
            self.link.failed(error).await;
        }
        self.noted(result)
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
        let renewed: i64 = self
            .invoke(script.key(&lease.key).arg(&lease.token).arg(ttl_ms))
            .await?;
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
        let removed: i64 = self.invoke(script.key(&lease.key).arg(&lease.token)).await?;
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
        let (kind, key, taken): (LockKind, String, i64) = match want {
            Want::Mutex { job_id } => {
                let key = mutex_key(&self.prefix, job_id);
                let script = &self.scripts.mutex_acquire;
                let taken = self.invoke(script.key(&key).arg(token).arg(ttl_ms)).await?;
                (LockKind::Mutex, key, taken)
            }
            Want::Permit { job_id, max } => {
                let key = permit_key(&self.prefix, job_id);
                let script = &self.scripts.permit_acquire;
                let taken = self
                    .invoke(script.key(&key).arg(token).arg(max).arg(ttl_ms))
                    .await?;
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
pub(super) fn is_transient(error: &RedisError) -> bool {
    error.is_io_error() || !matches!(error.retry_method(), RetryMethod::NoRetry)
}

/// 128 random bits as 32 hex digits.
fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Enough of a token to follow it through logs without printing it whole.
pub(super) fn token_prefix(token: &str) -> &str {
    token.get(..8).unwrap_or(token)
}
