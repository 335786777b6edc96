//! Recording attempts' ends in groups: the strong end of "weak start, strong end".
//!
//! Attempts hand their end to one recorder task and wait for its answer. The task
//! writes everything that queued up while it was busy, or arrived within a few
//! milliseconds of the first, in one fenced statement
//! ([`runs::finish_many`]), so a thousand runs ending in the same second cost a handful
//! of statements. A write that fails (PostgreSQL unreachable) is retried with full
//! jitter until it is stored or fenced off; the ends wait in memory meanwhile, bounded by
//! the executor's capacity since each waiting attempt holds its slot.

use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::fence::Write;
use probactr_common::store::runs::{self, Finished, RunEnd};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// The most ends written in one statement.
const MAX_GROUP: usize = 500;

type Request = (RunEnd, oneshot::Sender<Finished>);

/// The handle attempts record through.
#[derive(Debug, Clone)]
pub struct Recorder {
    requests: mpsc::UnboundedSender<Request>,
}

impl Recorder {
    /// Starts the recording task on `pool`.
    pub fn start(pool: PgPool) -> Recorder {
        let (requests, inbox) = mpsc::unbounded_channel();
        tokio::spawn(record_loop(pool, inbox));
        Recorder { requests }
    }

    /// Records one end; returns once PostgreSQL stored it or fenced it off.
    pub async fn record(&self, ending: RunEnd) -> Finished {
        let (reply, answer) = oneshot::channel();
        if self.requests.send((ending, reply)).is_err() {
            tracing::error!("the recorder stopped; an end could not be recorded");
            return Finished {
                write: Write::Fenced,
                retry_run_id: None,
            };
        }
        answer.await.unwrap_or(Finished {
            write: Write::Fenced,
            retry_run_id: None,
        })
    }
}

/// How long the first end of a group waits for others before the group is written,
/// when ends come in quick succession: arriving one at a time (runs spread over the
/// second) they would otherwise cost a statement and a commit each. An end that comes
/// after a quiet spell (one job's runs one after another) is written at once.
const GROUP_WINDOW: Duration = Duration::from_millis(5);

async fn record_loop(pool: PgPool, mut inbox: mpsc::UnboundedReceiver<Request>) {
    let mut previous_arrival: Option<tokio::time::Instant> = None;
    while let Some(first) = inbox.recv().await {
        let arrived = tokio::time::Instant::now();
        let busy = previous_arrival.is_some_and(|previous| arrived - previous < GROUP_WINDOW);
        previous_arrival = Some(arrived);
        let mut group = vec![first];
        let window = tokio::time::sleep(if busy { GROUP_WINDOW } else { Duration::ZERO });
        tokio::pin!(window);
        while group.len() < MAX_GROUP {
            tokio::select! {
                biased;
                request = inbox.recv() => match request {
                    Some(request) => {
                        previous_arrival = Some(tokio::time::Instant::now());
                        group.push(request);
                    }
                    None => break,
                },
                _ = &mut window => break,
            }
        }
        let (endings, replies): (Vec<RunEnd>, Vec<_>) = group.into_iter().unzip();
        let results = write_until_stored(&pool, &endings).await;
        for (reply, result) in replies.into_iter().zip(results) {
            let _ = reply.send(result);
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
