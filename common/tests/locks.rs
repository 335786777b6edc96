//! The Redis mutex and permit set against a real Redis (`REDIS_URL`, default
//! `redis://127.0.0.1:6379`).
//!
//! Each test works under its own random key prefix, so the tests run in parallel with each
//! other (and with anything else using that Redis) without colliding, and deletes its keys
//! at the end. The contention tests last `LOCKS_CONTENTION_SECS` seconds (default 10).
//!
//! Overlap is checked with a witness independent of the lock code: every holder `INCR`s a
//! witness key right after acquiring and `DECR`s it right before releasing, so the value
//! returned by `INCR` is the number of holders at that moment, as Redis itself saw it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::lock::{mutex_key, permit_key, Acquire, Lease, LockError, Locks, Renewal, Want};
use probactr_testkit::redis_url;
use redis::aio::ConnectionManager;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const CONTENDERS: usize = 32;
const CONNECTIONS: usize = 4;
const JOB: i64 = 42;

fn contention_time() -> Duration {
    let secs = std::env::var("LOCKS_CONTENTION_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    Duration::from_secs_f64(secs)
}

/// One test's private corner of Redis.
struct Space {
    prefix: String,
    raw: ConnectionManager,
}

impl Space {
    async fn new() -> Self {
        let prefix = format!("test:{}:", uuid::Uuid::new_v4().simple());
        let client = redis::Client::open(redis_url()).unwrap();
        let raw = ConnectionManager::new(client)
            .await
            .expect("a Redis must run at REDIS_URL");
        Space { prefix, raw }
    }

    /// A `Locks` on its own connection, as a separate executor would have.
    async fn locks(&self) -> Locks {
        Locks::connect(&redis_url(), &self.prefix).await.unwrap()
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    async fn get(&self, key: &str) -> Option<String> {
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.raw.clone())
            .await
            .unwrap()
    }

    async fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.raw.clone())
            .await
            .unwrap()
    }

    async fn zcard(&self, key: &str) -> i64 {
        redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut self.raw.clone())
            .await
            .unwrap()
    }

    async fn exists(&self, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query_async::<i64>(&mut self.raw.clone())
            .await
            .unwrap()
            == 1
    }

    /// Deletes every key under this test's prefix.
    async fn clean(self) {
        let mut conn = self.raw.clone();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query_async(&mut conn)
            .await
            .unwrap();
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(keys)
                .query_async::<i64>(&mut conn)
                .await
                .unwrap();
        }
    }
}

fn acquired(outcome: Acquire) -> Lease {
    match outcome {
        Acquire::Acquired(lease) => lease,
        Acquire::Busy { attempts } => panic!("expected to acquire, was busy after {attempts} attempts"),
    }
}

fn assert_busy(outcome: Acquire) {
    assert!(
        matches!(outcome, Acquire::Busy { .. }),
        "expected busy, got {outcome:?}"
    );
}

/// What the contenders of a contention test saw.
#[derive(Default)]
struct Witnessed {
    acquisitions: AtomicU64,
    most_holders: AtomicU64,
    too_many: AtomicU64,
    failed_releases: AtomicU64,
}

/// `CONTENDERS` tasks over `CONNECTIONS` connections take `want` again and again for
/// `contention_time()`, each holding it a few milliseconds under the witness.
async fn contend(space: &Space, want: Want, allowed_holders: u64) -> (Arc<Witnessed>, Vec<Locks>) {
    let mut pools = Vec::new();
    for _ in 0..CONNECTIONS {
        pools.push(space.locks().await);
    }
    let witness = space.key("witness");
    let seen = Arc::new(Witnessed::default());
    let stop_at = Instant::now() + contention_time();
    let backoff = Backoff::full_jitter(2 * MS, 40 * MS);

    let mut tasks = Vec::new();
    for n in 0..CONTENDERS {
        let locks = pools[n % CONNECTIONS].clone();
        let (witness, seen) = (witness.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = witness_connection().await;
            while Instant::now() < stop_at {
                let outcome = locks
                    .acquire(want, Duration::from_secs(5), 200 * MS, &backoff)
                    .await
                    .unwrap();
                let Acquire::Acquired(lease) = outcome else {
                    continue;
                };
                let holders: u64 = redis::cmd("INCR")
                    .arg(&witness)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                seen.acquisitions.fetch_add(1, Ordering::Relaxed);
                seen.most_holders.fetch_max(holders, Ordering::Relaxed);
                if holders > allowed_holders {
                    seen.too_many.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(rand::random_range(1..=5))).await;
                redis::cmd("DECR")
                    .arg(&witness)
                    .query_async::<i64>(&mut conn)
                    .await
                    .unwrap();
                if !locks.release(&lease).await.unwrap() {
                    seen.failed_releases.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    (seen, pools)
}

/// The witness's own connection, separate from the lock connections.
async fn witness_connection() -> ConnectionManager {
    ConnectionManager::new(redis::Client::open(redis_url()).unwrap())
        .await
        .unwrap()
}

/// Enough acquisitions to prove the contention test really ran: 20 per second at least
/// (a quiet machine makes ~200).
fn minimum_acquisitions() -> u64 {
    (contention_time().as_secs_f64() * 20.0).max(20.0) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn mutex_never_has_two_holders_under_contention() {
    let space = Space::new().await;
    let (seen, pools) = contend(&space, Want::Mutex { job_id: JOB }, 1).await;

    let acquisitions = seen.acquisitions.load(Ordering::Relaxed);
    assert_eq!(seen.too_many.load(Ordering::Relaxed), 0, "two holders overlapped");
    assert_eq!(seen.most_holders.load(Ordering::Relaxed), 1);
    assert_eq!(
        seen.failed_releases.load(Ordering::Relaxed),
        0,
        "a holder lost its lock while holding it"
    );
    assert!(
        acquisitions >= minimum_acquisitions(),
        "only {acquisitions} acquisitions"
    );
    let counted: u64 = pools.iter().map(|locks| locks.stats().acquisitions).sum();
    let attempts: u64 = pools.iter().map(|locks| locks.stats().attempts).sum();
    eprintln!(
        "mutex: {acquisitions} acquisitions, {attempts} attempts in {:?}",
        contention_time()
    );
    assert_eq!(counted, acquisitions, "stats disagree with the witness");
    assert!(
        !space.exists(&mutex_key(&space.prefix, JOB)).await,
        "the mutex outlived its last release"
    );
    space.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn permit_set_never_exceeds_max_holders_and_reaches_it() {
    let space = Space::new().await;
    let (seen, pools) = contend(&space, Want::Permit { job_id: JOB, max: 3 }, 3).await;

    let acquisitions = seen.acquisitions.load(Ordering::Relaxed);
    let attempts: u64 = pools.iter().map(|locks| locks.stats().attempts).sum();
    eprintln!(
        "permits: {acquisitions} acquisitions, {attempts} attempts in {:?}",
        contention_time()
    );
    assert_eq!(
        seen.too_many.load(Ordering::Relaxed),
        0,
        "more than 3 holders at once"
    );
    assert_eq!(
        seen.most_holders.load(Ordering::Relaxed),
        3,
        "3 holders were never reached"
    );
    assert_eq!(seen.failed_releases.load(Ordering::Relaxed), 0);
    assert!(
        acquisitions >= minimum_acquisitions(),
        "only {acquisitions} acquisitions"
    );
    space.clean().await;
}

#[tokio::test]
async fn a_non_owner_can_neither_release_nor_renew_a_mutex() {
    let space = Space::new().await;
    let (owner, stranger) = (space.locks().await, space.locks().await);
    let lease = acquired(owner.try_mutex(JOB, Duration::from_secs(10)).await.unwrap());
    let key = mutex_key(&space.prefix, JOB);

    let forged = Lease::from_parts(
        &space.prefix,
        JOB,
        true,
        "not-the-owner".into(),
        Duration::from_secs(60),
    );
    assert!(!stranger.release(&forged).await.unwrap());
    assert_eq!(stranger.renew(&forged).await.unwrap(), Renewal::Lost);

    assert_eq!(
        space.get(&key).await.as_deref(),
        Some(lease.token()),
        "the owner changed"
    );
    let ttl = space.pttl(&key).await;
    assert!(
        0 < ttl && ttl <= 10_000,
        "ttl {ttl} ms: a stranger extended the lease"
    );
    assert_busy(stranger.try_mutex(JOB, Duration::from_secs(10)).await.unwrap());
    assert!(owner.release(&lease).await.unwrap());
    space.clean().await;
}

#[tokio::test]
async fn a_non_owner_can_neither_release_nor_renew_a_permit() {
    let space = Space::new().await;
    let (owner, stranger) = (space.locks().await, space.locks().await);
    let lease = acquired(owner.try_permit(JOB, 2, Duration::from_secs(10)).await.unwrap());
    let key = permit_key(&space.prefix, JOB);

    let forged = Lease::from_parts(
        &space.prefix,
        JOB,
        false,
        "not-the-owner".into(),
        Duration::from_secs(60),
    );
    assert!(!stranger.release(&forged).await.unwrap());
    assert_eq!(stranger.renew(&forged).await.unwrap(), Renewal::Lost);

    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(&key)
        .arg(0)
        .arg(-1)
        .query_async(&mut space.raw.clone())
        .await
        .unwrap();
    assert_eq!(members, [lease.token().to_owned()], "the holders changed");
    let ttl = space.pttl(&key).await;
    assert!(
        0 < ttl && ttl <= 10_000,
        "ttl {ttl} ms: a stranger extended the set"
    );
    assert!(owner.release(&lease).await.unwrap());
    space.clean().await;
}

#[tokio::test]
async fn an_expired_mutex_goes_to_the_next_and_the_old_owner_cannot_touch_it() {
    let space = Space::new().await;
    let (first, second) = (space.locks().await, space.locks().await);
    let lease = 200 * MS;
    let old = acquired(first.try_mutex(JOB, lease).await.unwrap());
    assert_busy(second.try_mutex(JOB, lease).await.unwrap());

    tokio::time::sleep(300 * MS).await;
    let new = acquired(second.try_mutex(JOB, Duration::from_secs(10)).await.unwrap());

    assert_eq!(
        first.renew(&old).await.unwrap(),
        Renewal::Lost,
        "a stale owner renewed"
    );
    assert!(!first.release(&old).await.unwrap(), "a stale owner released");
    let key = mutex_key(&space.prefix, JOB);
    assert_eq!(space.get(&key).await.as_deref(), Some(new.token()));
    assert!(second.release(&new).await.unwrap());
    space.clean().await;
}

#[tokio::test]
async fn renewal_keeps_a_mutex_past_its_original_expiry() {
    let space = Space::new().await;
    let (holder, other) = (space.locks().await, space.locks().await);
    let lease = acquired(holder.try_mutex(JOB, 300 * MS).await.unwrap());
    assert_eq!(lease.renew_every(), 100 * MS);

    for _ in 0..6 {
        tokio::time::sleep(lease.renew_every()).await;
        assert_eq!(holder.renew(&lease).await.unwrap(), Renewal::Renewed);
        assert_busy(other.try_mutex(JOB, 300 * MS).await.unwrap());
    }
    // 600 ms in: twice the original lease, still held. Now stop renewing.
    tokio::time::sleep(400 * MS).await;
    assert_eq!(holder.renew(&lease).await.unwrap(), Renewal::Lost);
    let taken = acquired(other.try_mutex(JOB, 300 * MS).await.unwrap());
    assert!(other.release(&taken).await.unwrap());
    space.clean().await;
}

#[tokio::test]
async fn a_silent_permit_holder_loses_its_slot_to_another() {
    let space = Space::new().await;
    let locks = space.locks().await;
    let lease = 600 * MS;
    let start = Instant::now();
    let renewing = [
        acquired(locks.try_permit(JOB, 3, lease).await.unwrap()),
        acquired(locks.try_permit(JOB, 3, lease).await.unwrap()),
    ];
    let silent = acquired(locks.try_permit(JOB, 3, lease).await.unwrap());
    assert_busy(locks.try_permit(JOB, 3, lease).await.unwrap());

    // Two renew at 200 and 400 ms (now good until ~1000 ms); the third stays silent.
    for at in [200 * MS, 400 * MS] {
        tokio::time::sleep_until(start + at).await;
        for held in &renewing {
            assert_eq!(locks.renew(held).await.unwrap(), Renewal::Renewed);
        }
    }
    // 750 ms: the silent lease ran out at 600 ms, and nothing touched the set since 400 ms,
    // so the newcomer's own acquisition must sweep the expired permit to get in.
    tokio::time::sleep_until(start + 750 * MS).await;
    let newcomer = acquired(locks.try_permit(JOB, 3, lease).await.unwrap());
    assert_busy(locks.try_permit(JOB, 3, lease).await.unwrap());
    assert_eq!(locks.renew(&silent).await.unwrap(), Renewal::Lost);
    assert!(!locks.release(&silent).await.unwrap());
    for held in &renewing {
        assert_eq!(
            locks.renew(held).await.unwrap(),
            Renewal::Renewed,
            "renewal did not outlast the first lease"
        );
    }
    assert_eq!(space.zcard(&permit_key(&space.prefix, JOB)).await, 3);

    for held in renewing.iter().chain([&newcomer]) {
        assert!(locks.release(held).await.unwrap());
    }
    space.clean().await;
}

/// Expiry is loss: a lease that ran out can be neither renewed back to life nor released,
/// even when no one took its place yet (the holder must stop, as if another had taken it).
#[tokio::test]
async fn an_expired_lease_can_be_neither_renewed_nor_released_even_if_nobody_took_it() {
    let space = Space::new().await;
    let locks = space.locks().await;
    let short = 200 * MS;
    // Long-lived permits keep the permit sets themselves alive past the short leases, so the
    // scripts, not the keys' own expiry, must notice that a member expired. Renewal and
    // release get a set each, so neither can rely on the other having swept the set.
    let (renew_job, release_job) = (JOB, JOB + 1);
    let mut neighbours = Vec::new();
    for job_id in [renew_job, release_job] {
        neighbours.push(acquired(
            locks.try_permit(job_id, 3, Duration::from_secs(5)).await.unwrap(),
        ));
    }
    let to_renew = [
        acquired(locks.try_mutex(renew_job, short).await.unwrap()),
        acquired(locks.try_permit(renew_job, 3, short).await.unwrap()),
    ];
    let to_release = [
        acquired(locks.try_mutex(release_job, short).await.unwrap()),
        acquired(locks.try_permit(release_job, 3, short).await.unwrap()),
    ];
    tokio::time::sleep(300 * MS).await;
    for lease in &to_renew {
        assert_eq!(
            locks.renew(lease).await.unwrap(),
            Renewal::Lost,
            "an expired lease came back: {lease:?}"
        );
    }
    for lease in &to_release {
        assert!(
            !locks.release(lease).await.unwrap(),
            "released an expired lease: {lease:?}"
        );
    }
    for neighbour in &neighbours {
        assert!(locks.release(neighbour).await.unwrap());
    }
    space.clean().await;
}

#[tokio::test]
async fn releasing_a_permit_frees_its_slot_at_once() {
    let space = Space::new().await;
    let locks = space.locks().await;
    let lease = Duration::from_secs(30);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(acquired(locks.try_permit(JOB, 3, lease).await.unwrap()));
    }
    assert_busy(locks.try_permit(JOB, 3, lease).await.unwrap());

    let freed = held.remove(1);
    assert!(locks.release(&freed).await.unwrap());
    assert!(
        !locks.release(&freed).await.unwrap(),
        "a second release must be a no-op"
    );
    held.push(acquired(locks.try_permit(JOB, 3, lease).await.unwrap()));
    assert_busy(locks.try_permit(JOB, 3, lease).await.unwrap());

    for lease in &held {
        assert!(locks.release(lease).await.unwrap());
    }
    assert!(
        !space.exists(&permit_key(&space.prefix, JOB)).await,
        "an empty set stayed behind"
    );
    space.clean().await;
}

#[tokio::test]
async fn an_idle_permit_set_vanishes_after_its_longest_lease() {
    let space = Space::new().await;
    let locks = space.locks().await;
    let key = permit_key(&space.prefix, JOB);
    let _short = acquired(locks.try_permit(JOB, 5, 100 * MS).await.unwrap());
    let _long = acquired(locks.try_permit(JOB, 5, 300 * MS).await.unwrap());
    let ttl = space.pttl(&key).await;
    assert!(
        (200..=300).contains(&ttl),
        "the set's ttl {ttl} ms should follow its longest lease"
    );

    tokio::time::sleep(400 * MS).await;
    assert!(!space.exists(&key).await, "an idle permit set stayed in Redis");
    space.clean().await;
}

#[tokio::test]
async fn a_monitor_releases_a_dead_holders_lock_by_its_token() {
    let space = Space::new().await;
    let (dead, monitor) = (space.locks().await, space.locks().await);
    for exclusive in [true, false] {
        let want = if exclusive {
            Want::Mutex { job_id: JOB }
        } else {
            Want::Permit { job_id: JOB, max: 1 }
        };
        let lease = acquired(
            dead.acquire(want, Duration::from_secs(30), Duration::ZERO, &Backoff::default())
                .await
                .unwrap(),
        );
        // What a run row keeps: job id, exclusive, token.
        let rebuilt = Lease::from_parts(
            monitor.prefix(),
            JOB,
            exclusive,
            lease.token().to_owned(),
            lease.ttl(),
        );
        assert_eq!(rebuilt, lease);
        assert!(monitor.release(&rebuilt).await.unwrap());
        assert!(!space.exists(lease.key()).await);
    }
    space.clean().await;
}

#[tokio::test]
async fn acquire_gives_up_after_its_budget_with_jittered_attempts() {
    let space = Space::new().await;
    let holder = space.locks().await;
    let held = acquired(holder.try_mutex(JOB, Duration::from_secs(30)).await.unwrap());
    let contender = space.locks().await;
    let budget = Duration::from_secs(1);
    let backoff = Backoff::full_jitter(10 * MS, 150 * MS);

    let start = Instant::now();
    let mut waiters = Vec::new();
    for _ in 0..8 {
        let (contender, backoff) = (contender.clone(), backoff);
        waiters.push(tokio::spawn(async move {
            contender
                .acquire(
                    Want::Mutex { job_id: JOB },
                    Duration::from_secs(30),
                    budget,
                    &backoff,
                )
                .await
                .unwrap()
        }));
    }
    let mut attempt_counts = Vec::new();
    for waiter in waiters {
        match waiter.await.unwrap() {
            Acquire::Busy { attempts } => attempt_counts.push(attempts),
            Acquire::Acquired(lease) => panic!("took a held lock: {lease:?}"),
        }
    }
    let elapsed = start.elapsed();

    assert!(elapsed >= budget, "gave up early, after {elapsed:?}");
    assert!(elapsed < budget + 500 * MS, "gave up late, after {elapsed:?}");
    assert!(
        attempt_counts.iter().all(|&n| n > 1),
        "no retries: {attempt_counts:?}"
    );
    let distinct: BTreeSet<u32> = attempt_counts.iter().copied().collect();
    assert!(
        distinct.len() > 1,
        "8 contenders made identical attempt counts {attempt_counts:?}: no jitter?"
    );
    let stats = contender.stats();
    assert_eq!(
        stats.attempts,
        attempt_counts.iter().map(|&n| u64::from(n)).sum::<u64>()
    );
    assert_eq!((stats.acquisitions, stats.gave_up), (0, 8));
    assert!(holder.release(&held).await.unwrap());
    space.clean().await;
}

#[tokio::test]
async fn acquire_takes_the_lock_once_the_holder_releases_it() {
    let space = Space::new().await;
    let holder = space.locks().await;
    let held = acquired(holder.try_mutex(JOB, Duration::from_secs(30)).await.unwrap());
    let releaser = tokio::spawn({
        let holder = holder.clone();
        async move {
            tokio::time::sleep(300 * MS).await;
            holder.release(&held).await.unwrap()
        }
    });

    let start = Instant::now();
    let backoff = Backoff::full_jitter(10 * MS, 100 * MS);
    let outcome = space
        .locks()
        .await
        .acquire(
            Want::Mutex { job_id: JOB },
            Duration::from_secs(30),
            Duration::from_secs(3),
            &backoff,
        )
        .await;
    let lease = acquired(outcome.unwrap());
    assert!(releaser.await.unwrap());
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "waited {:?} for a lock freed after 300 ms",
        start.elapsed()
    );
    assert_eq!(space.get(lease.key()).await.as_deref(), Some(lease.token()));
    space.clean().await;
}

#[tokio::test]
async fn bad_requests_are_refused_before_reaching_redis() {
    let space = Space::new().await;
    let locks = space.locks().await;
    assert!(matches!(
        locks.try_mutex(JOB, Duration::ZERO).await,
        Err(LockError::InvalidLease(_))
    ));
    assert!(matches!(
        locks.try_permit(JOB, 3, 999 * Duration::from_micros(1)).await,
        Err(LockError::InvalidLease(_))
    ));
    assert!(matches!(
        locks.try_permit(JOB, 0, Duration::from_secs(1)).await,
        Err(LockError::NoPermits { job_id: JOB })
    ));
    let budget = Duration::from_secs(1);
    let refused = locks
        .acquire(
            Want::Permit { job_id: JOB, max: 0 },
            Duration::from_secs(1),
            budget,
            &Backoff::default(),
        )
        .await;
    assert!(matches!(refused, Err(LockError::NoPermits { .. })));
    assert_eq!(locks.stats().attempts, 0);
    space.clean().await;
}

#[test]
fn keys_follow_the_documented_layout() {
    assert_eq!(mutex_key("probactr:", 7), "probactr:lock:job:7");
    assert_eq!(permit_key("probactr:", 7), "probactr:permits:job:7");
}
