//! Bounds on long-lived responses (the live output streams): how many one user may hold
//! open at once on this manager (`PROBACTR_SSE_PER_USER`), and how long each lives
//! (`PROBACTR_SSE_MAX_SECS`). Each open stream holds a task, a connection and a database
//! read every half second; without a bound one user (or one stolen token) could hold
//! them all. The count is per manager process: the bound is what one process can be made
//! to carry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often an open stream checks that the session or token it was opened with still
/// opens the API (logged out, revoked, expired, user disabled: the stream ends).
pub const RECHECK_EVERY: Duration = Duration::from_secs(5);

/// The open streams of this manager, per user.
#[derive(Debug)]
pub struct Streams {
    per_user: usize,
    max_age: Duration,
    open: Arc<Mutex<HashMap<i64, usize>>>,
}

impl Default for Streams {
    fn default() -> Self {
        Streams::new(10, Duration::from_secs(3600))
    }
}

impl Streams {
    /// At most `per_user` streams per user, each ending after `max_age`.
    pub fn new(per_user: u32, max_age: Duration) -> Streams {
        Streams {
            per_user: usize::try_from(per_user).unwrap_or(usize::MAX).max(1),
            max_age,
            open: Arc::default(),
        }
    }

    /// How long a stream may stay open.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// How many streams a user may hold.
    pub fn per_user(&self) -> usize {
        self.per_user
    }

    /// A place for one more stream of `user_id`, or None when the user holds the most
    /// allowed. The place is given back when the permit is dropped (the stream ended, or
    /// its client went away).
    pub fn open(&self, user_id: i64) -> Option<StreamPermit> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(user_id).or_default();
        if *count >= self.per_user {
            return None;
        }
        *count += 1;
        Some(StreamPermit {
            user_id,
            open: self.open.clone(),
        })
    }
}

/// One open stream's place in its user's count.
#[derive(Debug)]
pub struct StreamPermit {
    user_id: i64,
    open: Arc<Mutex<HashMap<i64, usize>>>,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.user_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.user_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_holds_at_most_the_bound_and_gets_places_back() {
        let streams = Streams::new(2, Duration::from_secs(1));
        let first = streams.open(1);
        let second = streams.open(1);
        assert!(first.is_some() && second.is_some());
        assert!(streams.open(1).is_none(), "a third of the same user");
        assert!(
            streams.open(2).is_some(),
            "another user is not counted with the first"
        );
        drop(first);
        assert!(
            streams.open(1).is_some(),
            "a place is given back when a stream ends"
        );
    }
}
