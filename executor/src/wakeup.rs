//! Wake-ups from PostgreSQL: one `LISTEN` connection per executor turns notifications on
//! the triggers and runs channels into in-process [`Notify`]s, so a trigger created to
//! fire in one second fires on time even while the executor sleeps for an hour.
//!
//! A lost listener connection is re-opened with jittered backoff; after a reconnect both
//! notifies fire once, since changes made meanwhile were not heard.

use std::sync::Arc;
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::store::{RUNS_AT_CHANNEL, RUNS_CHANNEL, TRIGGERS_CHANNEL};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// In-process wake-ups.
#[derive(Debug, Default)]
pub struct Wakeups {
    /// Triggers changed: re-read the earliest `next_fire_at`.
    pub triggers: Notify,
    /// Runs were queued or became claimable: try to claim.
    pub runs: Notify,
    /// An attempt gave a slot back: claim if runs may be waiting.
    pub capacity: Notify,
}

impl Wakeups {
    fn wake_all(&self) {
        self.triggers.notify_one();
        self.runs.notify_one();
    }
}

/// Listens until `stop` is cancelled.
pub async fn listen(pool: PgPool, wakeups: Arc<Wakeups>, stop: CancellationToken) {
    let backoff = Backoff::FullJitter {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(5),
    };
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        match listen_once(&pool, &wakeups, &stop).await {
            Ok(()) => return,
            Err(err) => {
                tracing::warn!(error = %err, "notification listener lost; reconnecting");
                wakeups.wake_all();
                failures = failures.saturating_add(1);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff.delay(failures.min(10))) => {}
                }
            }
        }
    }
}

async fn listen_once(
    pool: &PgPool,
    wakeups: &Arc<Wakeups>,
    stop: &CancellationToken,
) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener
        .listen_all([TRIGGERS_CHANNEL, RUNS_CHANNEL, RUNS_AT_CHANNEL])
        .await?;
    // Anything that changed while we were not listening was missed: look again.
    wakeups.wake_all();
    loop {
        let notification = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            received = listener.recv() => received?,
        };
        match notification.channel() {
            TRIGGERS_CHANNEL => wakeups.triggers.notify_one(),
            RUNS_AT_CHANNEL => wake_at_announced(wakeups, stop, notification.payload()),
            _ => wakeups.runs.notify_one(),
        }
    }
}

/// Sets an alarm for each instant of a fire-ahead announcement (epoch milliseconds,
/// comma-separated).
fn wake_at_announced(wakeups: &Arc<Wakeups>, stop: &CancellationToken, payload: &str) {
    let instants: Vec<i64> = payload
        .split(',')
        .filter_map(|part| part.trim().parse::<i64>().ok())
        .collect();
    wake_runs_at(wakeups, stop, &instants);
}

/// Alarms ring at most this often while instants are sparse: runs that become claimable
/// within one granule are claimed together.
const FINE_GRANULE_MS: i64 = 5;
/// And at most this often once they are dense (see [`DENSE_ALARMS_PER_SEC`]): at 1,000
/// instants a second spread over it, a claim then takes about twenty runs instead of
/// five, for half the machine's CPU per fire (BENCHMARKS.md, "Coarser alarms").
const COARSE_GRANULE_MS: i64 = 20;
/// Instants that would ring more fine alarms than this a second ring coarse ones: below
/// it each claim's fixed cost is small beside the rest, above it the claims' statements
/// and commits are most of what a fire costs.
const DENSE_ALARMS_PER_SEC: i64 = 100;
/// The shortest span the density is judged over (a fire pass's interval): a handful of
/// instants close together is not a dense load.
const DENSITY_SPAN_MS: i64 = 250;

/// Each instant rounded up to a multiple of `granule`, once each, in order.
fn alarms(instants: &[i64], granule: i64) -> Vec<i64> {
    let mut alarms: Vec<i64> = instants.iter().map(|&millis| round_up(millis, granule)).collect();
    alarms.sort_unstable();
    alarms.dedup();
    alarms
}

/// `millis` rounded up to a multiple of `granule`.
pub fn round_up(millis: i64, granule: i64) -> i64 {
    (millis + granule - 1).div_euclid(granule) * granule
}

/// The alarms for `instants`: fine ones, unless they would ring more than
/// [`DENSE_ALARMS_PER_SEC`] a second, then coarse ones. Instants on whole seconds (or
/// on any multiple of the coarse granule) ring on time either way.
fn alarms_for(instants: &[i64]) -> Vec<i64> {
    let fine = alarms(instants, FINE_GRANULE_MS);
    let (Some(first), Some(last)) = (fine.first(), fine.last()) else {
        return fine;
    };
    let span_ms = (last - first).max(DENSITY_SPAN_MS);
    let per_sec = fine.len() as i64 * 1000 / span_ms;
    if per_sec > DENSE_ALARMS_PER_SEC {
        alarms(instants, COARSE_GRANULE_MS)
    } else {
        fine
    }
}

/// Wakes the claim loop when each instant (epoch milliseconds) comes, rounded up to an
/// alarm granule ([`alarms_for`]), to claim the runs fired ahead that became claimable
/// then. An alarm goes by this host's clock; one that rings early finds nothing yet (the
/// database's clock decides) and the once-a-second look takes the rest. Alarms still
/// pending when `stop` is cancelled do not ring.
pub fn wake_runs_at(wakeups: &Arc<Wakeups>, stop: &CancellationToken, instants: &[i64]) {
    let granules = alarms_for(instants);
    let now = chrono::Utc::now().timestamp_millis();
    for millis in granules {
        let delay = Duration::from_millis(u64::try_from(millis - now).unwrap_or(0));
        let wakeups = wakeups.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(delay) => wakeups.runs.notify_one(),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_instants_ring_within_five_milliseconds() {
        // 50 instants over a second, 20 ms apart, each 3 ms past a multiple of 5.
        let instants: Vec<i64> = (0..50).map(|n| 1_000_003 + n * 20).collect();
        let rung = alarms_for(&instants);
        assert_eq!(rung.len(), 50);
        assert!(rung
            .iter()
            .zip(&instants)
            .all(|(alarm, instant)| alarm - instant == 2));
    }

    #[test]
    fn dense_instants_ring_coarser_and_never_early() {
        // 1,000 instants spread over a second.
        let instants: Vec<i64> = (0..1000).map(|n| 2_000_000 + n).collect();
        let rung = alarms_for(&instants);
        assert_eq!(rung.len(), 1000 / COARSE_GRANULE_MS as usize + 1);
        for instant in &instants {
            let alarm = rung
                .iter()
                .find(|alarm| *alarm >= instant)
                .expect("an alarm at or after it");
            assert!(alarm - instant < COARSE_GRANULE_MS);
        }
    }

    #[test]
    fn aligned_instants_ring_on_time_however_many() {
        let instants = vec![3_000_000; 10_000];
        assert_eq!(alarms_for(&instants), vec![3_000_000]);
        let few_close = [3_000_001, 3_000_002, 3_000_007];
        assert_eq!(alarms_for(&few_close), vec![3_000_005, 3_000_010]);
    }
}
