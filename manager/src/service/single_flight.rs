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
//! A read that fails, or whose request is dropped, is read again by the next waiting
//! request; each request gets its own error.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

/// The reads in flight, by what they read.
pub struct SingleFlight<K, V> {
    flights: Mutex<HashMap<K, Arc<Flight<V>>>>,
}

/// One read in flight, and the count of changes served before it began.
struct Flight<V> {
    after_writes: u64,
    answer: OnceCell<Arc<V>>,
}

impl<K, V> Default for SingleFlight<K, V> {
    fn default() -> Self {
        SingleFlight {
            flights: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, V> SingleFlight<K, V> {
    /// The answer of `read` for `key`: shared with a read of the same key in flight
    /// that began after the same `writes_served` changes, else read now.
    pub async fn read<E, F, Fut>(&self, key: K, writes_served: u64, read: F) -> Result<Arc<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let flight = self.join_or_start(&key, writes_served);
        let answer = flight
            .answer
            .get_or_try_init(|| async { read().await.map(Arc::new) })
            .await
            .cloned();
        self.land(&key, &flight);
        answer
    }

    fn join_or_start(&self, key: &K, writes_served: u64) -> Arc<Flight<V>> {
        let mut flights = self.flights();
        match flights.get(key) {
            Some(flight) if flight.after_writes == writes_served => flight.clone(),
            _ => {
                let flight = Arc::new(Flight {
                    after_writes: writes_served,
                    answer: OnceCell::new(),
                });
                flights.insert(key.clone(), flight.clone());
                flight
            }
        }
    }

    /// Forgets the flight once it ended, unless a newer one replaced it. Requests still
    /// waiting on it keep it: they take its answer, or read again if it failed.
    fn land(&self, key: &K, flight: &Arc<Flight<V>>) {
        let mut flights = self.flights();
        if flights
            .get(key)
            .is_some_and(|current| Arc::ptr_eq(current, flight))
        {
            flights.remove(key);
        }
    }

    fn flights(&self) -> MutexGuard<'_, HashMap<K, Arc<Flight<V>>>> {
        // A panic while holding the lock leaves plain data behind: still usable.
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
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
        assert!(flights.flights().is_empty(), "nothing is kept after the read");
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
    async fn a_failed_read_is_read_again_by_the_next_waiting_request() {
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
}
