//! Recording attempts' ends in groups: the strong end of "weak start, strong end".
//!
//! Attempts hand their end to the recorder and wait for its answer. Ends are written in
//! groups, one fenced statement each ([`runs::finish_many`]), so a thousand runs ending
//! in the same second cost a handful of statements, by one of two writers:
//!
//! - the claim loop, which takes the ends waiting when it claims and writes them in the
//!   claim's own transaction ([`runs::finish_and_claim`]): a drain of short jobs then
//!   pays one commit (one WAL flush) per cycle instead of two. Only ends of runs that
//!   hold no quota (a namespace's, a trigger cap's, a pool's) ride along, since their
//!   release locks the rows a claim locks, and the two statements in one transaction
//!   could then wait for each other across executors;
//! - the recording task, which writes what the claim loop did not take: everything that
//!   queued up while it was busy, or arrived within a few milliseconds of the first.
//!
//! A write that fails (PostgreSQL unreachable) is retried with full jitter until it is
//! stored or fenced off; the ends wait in memory meanwhile, bounded by the executor's
//! capacity since each waiting attempt holds its slot.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::fence::Write;
use probactr_common::store::runs::{self, Finished, RunEnd};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// The most ends written in one statement.
const MAX_GROUP: usize = 1000;

/// An end waiting to be written, and the attempt waiting for its answer.
#[derive(Debug)]
struct Waiting {
    ending: RunEnd,
    reply: oneshot::Sender<Finished>,
    /// The run holds a place in a quota: only the recording task writes its end.
    holds_quota: bool,
}

/// The handle attempts record through and the claim loop takes ends from.
#[derive(Debug, Clone)]
pub struct Recorder {
    waiting: Arc<Mutex<Vec<Waiting>>>,
    /// One message per end handed in; the recording task stops when every handle is gone.
    arrivals: mpsc::UnboundedSender<()>,
}

/// Ends taken by the claim loop to be written in its transaction: answered once it
/// commits, or given back to the recording task when it does not.
#[derive(Debug, Default)]
pub struct TakenEnds {
    endings: Vec<RunEnd>,
    replies: Vec<oneshot::Sender<Finished>>,
}

impl TakenEnds {
    /// The ends to write.
    pub fn endings(&self) -> &[RunEnd] {
        &self.endings
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.endings.is_empty()
    }

    /// Hands each attempt what became of its end (`results` in the order of
    /// [`endings`](Self::endings)).
    pub fn answer(self, results: Vec<Finished>) {
        metrics::histogram!("probactr_record_group_size").record(self.endings.len() as f64);
        for (reply, result) in self.replies.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

impl Recorder {
    /// Starts the recording task on `pool`.
    pub fn start(pool: PgPool) -> Recorder {
        let (arrivals, arrived) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(record_loop(pool, waiting.clone(), arrived));
        Recorder { waiting, arrivals }
    }

    /// Records one end; returns once PostgreSQL stored it or fenced it off.
    pub async fn record(&self, ending: RunEnd, holds_quota: bool) -> Finished {
        let (reply, answer) = oneshot::channel();
        self.hand_in(Waiting {
            ending,
            reply,
            holds_quota,
        });
        answer.await.unwrap_or(Finished {
            write: Write::Fenced,
            retry_run_id: None,
        })
    }

    /// Takes the ends the claim loop may write in its transaction (at most a group).
    pub fn take_for_claim(&self) -> TakenEnds {
        let mut waiting = self.lock();
        let mut taken = TakenEnds::default();
        if waiting.is_empty() {
            return taken;
        }
        let mut kept = Vec::new();
        for end in waiting.drain(..) {
            if end.holds_quota || taken.endings.len() == MAX_GROUP {
                kept.push(end);
            } else {
                taken.endings.push(end.ending);
                taken.replies.push(end.reply);
            }
        }
        *waiting = kept;
        taken
    }

    /// Gives back ends the claim loop could not write: the recording task writes them.
    pub fn give_back(&self, taken: TakenEnds) {
        for (ending, reply) in taken.endings.into_iter().zip(taken.replies) {
            self.hand_in(Waiting {
                ending,
                reply,
                holds_quota: false,
            });
        }
    }

    fn hand_in(&self, end: Waiting) {
        self.lock().push(end);
        if self.arrivals.send(()).is_err() {
            tracing::error!("the recorder stopped; an end could not be recorded");
            // Dropping the reply answers the attempt `Fenced`.
            self.lock().clear();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Ends closer together than this come in quick succession (a busy executor); one that
/// comes after a longer quiet spell (one job's runs one after another, each waiting for
/// the end of the one before) is written at once.
const QUICK_SUCCESSION: Duration = Duration::from_millis(5);

/// How long the first end of a group waits for others before the group is written,
/// when ends come in quick succession: arriving one at a time (runs spread over the
/// second) they would otherwise cost a statement and a commit each, whose fixed cost
/// (about 0.5 ms of PostgreSQL's CPU, the job counters' upsert included) outweighs a
/// few runs' own. Only the record waits: the runs started on time, and their slots
/// are free. At 1,000 runs a second spread over it, 50 ms rather than 20 cost 0.85× the
/// machine's CPU per run (about 35 ends a statement instead of 19).
const GROUP_WINDOW: Duration = Duration::from_millis(50);

/// Waits up to [`GROUP_WINDOW`] for more ends to join the group, and no longer once an
/// end that releases a lock (a fenced run: a one-at-a-time job's, whose next run waits
/// for this record) is among them.
async fn gather(waiting: &Mutex<Vec<Waiting>>) {
    let deadline = tokio::time::Instant::now() + GROUP_WINDOW;
    loop {
        let releases_a_lock = waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|end| end.ending.fence.is_some());
        let now = tokio::time::Instant::now();
        if releases_a_lock || now >= deadline {
            return;
        }
        tokio::time::sleep(QUICK_SUCCESSION.min(deadline - now)).await;
    }
}

async fn record_loop(
    pool: PgPool,
    waiting: Arc<Mutex<Vec<Waiting>>>,
    mut arrived: mpsc::UnboundedReceiver<()>,
) {
    let mut previous_arrival: Option<tokio::time::Instant> = None;
    while arrived.recv().await.is_some() {
        let now = tokio::time::Instant::now();
        let busy = previous_arrival.is_some_and(|previous| now - previous < QUICK_SUCCESSION);
        previous_arrival = Some(now);
        if busy {
            // Ends arriving meanwhile join the group (or a claim takes them first).
            gather(&waiting).await;
        }
        // Every end whose arrival is consumed here is already waiting (handed in first,
        // announced second), so the groups taken below include it.
        while arrived.try_recv().is_ok() {}
        let mut written = 0;
        loop {
            let group: Vec<Waiting> = {
                let mut waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
                let take = waiting.len().min(MAX_GROUP);
                waiting.drain(..take).collect()
            };
            if group.is_empty() {
                break;
            }
            let (endings, replies): (Vec<RunEnd>, Vec<_>) =
                group.into_iter().map(|end| (end.ending, end.reply)).unzip();
            let results = write_until_stored(&pool, &endings).await;
            written += endings.len();
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
            // Ends that arrived during the write form the next group, gathered like any
            // other: writing them at once would write, while ends keep coming, a group
            // of the few that came during each write, one statement and commit each.
            if endings.len() < MAX_GROUP {
                break;
            }
        }
        if written > 1 {
            // Several ends were written together: they came in quick succession, and an
            // end arriving during or just after the write continues it.
            previous_arrival = Some(tokio::time::Instant::now());
        }
    }
}

async fn write_until_stored(pool: &PgPool, endings: &[RunEnd]) -> Vec<Finished> {
    let backoff = Backoff::full_jitter(Duration::from_millis(50), Duration::from_secs(5));
    let mut failures = 0u32;
    loop {
        match runs::finish_many(pool, endings).await {
            Ok(results) => {
                metrics::histogram!("probactr_record_group_size").record(endings.len() as f64);
                return results;
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %err, failures, runs = endings.len(),
                    "cannot record runs' ends yet; retrying");
                tokio::time::sleep(backoff.delay(failures.min(10))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use probactr_common::model::RunState;
    use probactr_common::store::runs::Finish;

    fn waiting(fence: Option<i64>) -> Waiting {
        let (reply, _answer) = oneshot::channel();
        Waiting {
            ending: RunEnd {
                run_id: 1,
                executor_id: uuid::Uuid::nil(),
                fence,
                finish: Finish {
                    state: RunState::Succeeded,
                    reason: None,
                    exit_code: None,
                    http_status: None,
                    error: None,
                    output: None,
                    output_truncated: false,
                },
                started_at: None,
            },
            reply,
            holds_quota: false,
        }
    }

    #[tokio::test]
    async fn a_group_gathers_for_the_window_unless_an_end_releases_a_lock() {
        let plain = Mutex::new(vec![waiting(None)]);
        let started = tokio::time::Instant::now();
        gather(&plain).await;
        assert!(started.elapsed() >= GROUP_WINDOW);

        let locked = Mutex::new(vec![waiting(None), waiting(Some(7))]);
        let started = tokio::time::Instant::now();
        gather(&locked).await;
        assert!(
            started.elapsed() < QUICK_SUCCESSION,
            "a one-at-a-time job's next run waits for this end: it is written at once"
        );
    }
}
