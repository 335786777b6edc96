//! Identical reads in flight at the same moment share one database read.
//!
//! Many operators and scripts watch the same page (the job list a dashboard polls): under
//! that load most requests ask for what another request is already reading. A request
//! that finds the same read in flight waits for it and shares its answer instead of
//! reading again. Nothing is kept once the read ends, so an answer is never older than
//! a read that was under way when the request came.
//!
//! A change served by this manager ends the sharing of reads begun before it: a request
//! made after its own change joins only reads begun after that change (see
//! [`super::reads::Reads::writes_served`]), so nobody saves a job and then gets a list
//! read before the save.
//!
//! When the read waited for fails or its request is dropped, every waiting request reads
//! on its own at once and gets its own answer or error; the flight is forgotten however
//! its read ends.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// The reads in flight, by what they read.
pub struct SingleFlight<K, V> {
    state: Mutex<State<K, V>>,
}

struct State<K, V> {
    flights: HashMap<K, Flight<V>>,
    /// Numbers the flights, so that a read forgets its own flight and not a newer one.
    started: u64,
}

/// One read in flight: the count of changes served before it began, and where its
/// answer is announced (nothing announced when the channel closes: it failed or was
/// dropped).
struct Flight<V> {
    number: u64,
    after_writes: u64,
    answer: watch::Receiver<Option<Arc<V>>>,
}

/// A request's part in a flight: the read itself, or a wait for another's.
enum Role<V> {
    Reader(u64, watch::Sender<Option<Arc<V>>>),
    Waiter(watch::Receiver<Option<Arc<V>>>),
}

impl<K, V> Default for SingleFlight<K, V> {
    fn default() -> Self {
        SingleFlight {
            state: Mutex::new(State {
                flights: HashMap::new(),
                started: 0,
            }),
        }
    }
}

impl<K: Hash + Eq + Clone, V> SingleFlight<K, V> {
    /// The answer of `read` for `key`: shared with a read of the same key in flight
    /// that began after the same `writes_served` changes, else read now. When the read
    /// waited for fails or its request is dropped, each waiting request reads on its own
    /// (at once, not one after another) and gets its own answer or error.
    pub async fn read<E, F, Fut>(&self, key: K, writes_served: u64, read: F) -> Result<Arc<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        match self.join_or_start(&key, writes_served) {
            Role::Waiter(answer) => match announced(answer).await {
                Some(answer) => Ok(answer),
                None => read().await.map(Arc::new),
            },
            Role::Reader(number, announce) => {
                // Forgotten however this ends: answered, failed, or dropped mid-read.
                let _landing = Landing {
                    flights: self,
                    key: &key,
                    number,
                };
                let answer = read().await.map(Arc::new)?;
                announce.send_replace(Some(answer.clone()));
                Ok(answer)
            }
        }
    }

    fn join_or_start(&self, key: &K, writes_served: u64) -> Role<V> {
        let mut state = self.state();
        if let Some(flight) = state.flights.get(key) {
            if flight.after_writes == writes_served {
                return Role::Waiter(flight.answer.clone());
            }
        }
        state.started += 1;
        let number = state.started;
        let (announce, answer) = watch::channel(None);
        state.flights.insert(
            key.clone(),
            Flight {
                number,
                after_writes: writes_served,
                answer,
            },
        );
        Role::Reader(number, announce)
    }

    fn state(&self) -> MutexGuard<'_, State<K, V>> {
        // A panic while holding the lock leaves plain data behind: still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The answer announced on `answer`, or None once it closed without one.
async fn announced<V>(mut answer: watch::Receiver<Option<Arc<V>>>) -> Option<Arc<V>> {
    loop {
        if let Some(value) = answer.borrow_and_update().clone() {
            return Some(value);
        }
        answer.changed().await.ok()?;
    }
}

/// Forgets a flight when its reader is done with it, unless a newer flight replaced it.
struct Landing<'a, K: Hash + Eq + Clone, V> {
    flights: &'a SingleFlight<K, V>,
    key: &'a K,
    number: u64,
}

impl<K: Hash + Eq + Clone, V> Drop for Landing<'_, K, V> {
    fn drop(&mut self) {
        let mut state = self.flights.state();
        if state
            .flights
            .get(self.key)
            .is_some_and(|flight| flight.number == self.number)
        {
            state.flights.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A read that counts itself and takes a while, so others come while it is in flight.
    async fn slow_read(reads: &AtomicUsize, value: u32) -> Result<u32, String> {
        reads.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(value)
    }

    #[tokio::test]
    async fn requests_during_a_read_share_it() {
        let flights = SingleFlight::<&str, u32>::default();
        let reads = AtomicUsize::new(0);
        let answers = tokio::join!(
            flights.read("jobs", 0, || slow_read(&reads, 7)),
            flights.read("jobs", 0, || slow_read(&reads, 8)),
            flights.read("jobs", 0, || slow_read(&reads, 9)),
        );
        let seven = Ok(Arc::new(7));
        assert_eq!(answers, (seven.clone(), seven.clone(), seven));
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert!(
            flights.state().flights.is_empty(),
            "nothing is kept after the read"
        );
    }

    #[tokio::test]
    async fn a_request_after_a_change_or_after_the_read_reads_again() {
        let flights = SingleFlight::<&str, u32>::default();
        let reads = AtomicUsize::new(0);
        let (before, after) = tokio::join!(
            flights.read("jobs", 0, || slow_read(&reads, 1)),
            flights.read("jobs", 1, || slow_read(&reads, 2)),
        );
        assert_eq!((before, after), (Ok(Arc::new(1)), Ok(Arc::new(2))));
        let later = flights.read("jobs", 1, || slow_read(&reads, 3)).await;
        assert_eq!(later, Ok(Arc::new(3)));
        assert_eq!(reads.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn when_the_read_fails_each_waiting_request_reads_on_its_own() {
        let flights = SingleFlight::<&str, u32>::default();
        let reads = AtomicUsize::new(0);
        let failing = || async {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err::<u32, String>("database gone".into())
        };
        let (first, second) = tokio::join!(
            flights.read("jobs", 0, failing),
            flights.read("jobs", 0, || slow_read(&reads, 5)),
        );
        assert_eq!(first, Err("database gone".into()));
        assert_eq!(second, Ok(Arc::new(5)));
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_dropped_read_is_forgotten_and_its_waiters_read_on_their_own() {
        let flights = SingleFlight::<&str, u32>::default();
        let reads = AtomicUsize::new(0);
        let dropped = tokio::time::timeout(
            Duration::from_millis(10),
            flights.read("jobs", 0, || slow_read(&reads, 1)),
        );
        let waiting = async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            flights.read("jobs", 0, || slow_read(&reads, 2)).await
        };
        let (dropped, waiting) = tokio::join!(dropped, waiting);
        assert!(dropped.is_err(), "the first read was dropped");
        assert_eq!(waiting, Ok(Arc::new(2)));
        assert!(
            flights.state().flights.is_empty(),
            "a dropped read leaves nothing behind"
        );
    }
}
