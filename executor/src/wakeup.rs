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

/// Alarms ring at most this often: runs that become claimable within one granule are
/// claimed together.
const ALARM_GRANULE_MS: i64 = 5;

/// Wakes the claim loop when each instant (epoch milliseconds) comes, rounded up to
/// [`ALARM_GRANULE_MS`], to claim the runs fired ahead that became claimable then. An
/// alarm goes by this host's clock; one that rings early finds nothing yet (the
/// database's clock decides) and the once-a-second look takes the rest. Alarms still
/// pending when `stop` is cancelled do not ring.
pub fn wake_runs_at(wakeups: &Arc<Wakeups>, stop: &CancellationToken, instants: &[i64]) {
    let mut granules: Vec<i64> = instants
        .iter()
        .map(|millis| (millis + ALARM_GRANULE_MS - 1).div_euclid(ALARM_GRANULE_MS) * ALARM_GRANULE_MS)
        .collect();
    granules.sort_unstable();
    granules.dedup();
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
