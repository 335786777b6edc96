//! Who this executor is, and the attempts it is executing.
//!
//! The identity changes when a monitor declares this executor dead: every attempt
//! started under the old identity is stopped (it was reaped, its writes are fenced off)
//! and the executor registers again under a new id. Each attempt registers a stop
//! handle here so cancellation, the stop point, liveness loss and shutdown can reach it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::job::Stop;

/// Why an attempt was stopped before it ended on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Cancellation was requested through the database.
    Cancelled,
    /// Lease renewal found the lock gone or owned by another (the stop point).
    LockLost,
    /// The executor was declared dead, or could not heartbeat long enough that it may be.
    ExecutorLost,
    /// The executor is shutting down and the drain timeout passed.
    Shutdown,
}

impl StopReason {
    /// The reason recorded on the run.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Cancelled => "cancelled on request",
            StopReason::LockLost => "lock lost: lease renewal failed (stop point)",
            StopReason::ExecutorLost => "executor lost: could not prove it was alive",
            StopReason::Shutdown => "executor shut down before the run finished",
        }
    }

    /// Whether the job is killed at once rather than given its grace: an executor that
    /// cannot prove it is alive may already have had its runs taken over elsewhere.
    pub fn is_forced(self) -> bool {
        self == StopReason::ExecutorLost
    }
}

/// How to stop one attempt, and why it was stopped.
#[derive(Debug, Clone, Default)]
pub struct StopHandle {
    token: CancellationToken,
    forced: CancellationToken,
    reason: Arc<OnceLock<StopReason>>,
}

impl StopHandle {
    /// Stops the attempt; the first reason given wins, and any forced one kills at once.
    pub fn stop(&self, reason: StopReason) {
        let _ = self.reason.set(reason);
        if reason.is_forced() {
            self.forced.cancel();
        }
        self.token.cancel();
    }

    /// The token cancelled when the attempt is asked to stop.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// What the job watches: asked to stop, or forced.
    pub fn signal(&self) -> Stop {
        Stop {
            asked: self.token.clone(),
            forced: self.forced.clone(),
        }
    }

    /// Why it was stopped, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        self.reason.get().copied()
    }
}

/// The executor's current identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The id registered in `executors`.
    pub id: Uuid,
}

/// Identity and running attempts.
#[derive(Debug)]
pub struct Registry {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    identity: Identity,
    /// By run: the identity it started under, its stop handle, its job's stop grace.
    running: HashMap<i64, (Uuid, StopHandle, Duration)>,
    /// When the last registration or heartbeat PostgreSQL stored was sent, and for which
    /// identity.
    proof: Option<(Uuid, Instant)>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// A registry with a fresh (not yet registered) identity.
    pub fn new() -> Registry {
        Registry {
            state: Mutex::new(State {
                identity: Identity { id: Uuid::new_v4() },
                running: HashMap::new(),
                proof: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this short lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current executor id.
    pub fn id(&self) -> Uuid {
        self.lock().identity.id
    }

    /// Replaces the identity (after being declared dead) and returns the new one.
    pub fn renew_identity(&self) -> Identity {
        let mut state = self.lock();
        state.identity = Identity { id: Uuid::new_v4() };
        state.identity
    }

    /// Notes that PostgreSQL stored a registration or heartbeat of `executor_id` that was
    /// sent at `sent` (ignored if the identity changed meanwhile).
    pub fn proved_alive(&self, executor_id: Uuid, sent: Instant) {
        let mut state = self.lock();
        if state.identity.id == executor_id {
            state.proof = Some((executor_id, sent));
        }
    }

    /// How long since the current identity last proved it was alive (None: never).
    pub fn silent_for(&self) -> Option<std::time::Duration> {
        let state = self.lock();
        match state.proof {
            Some((id, sent)) if id == state.identity.id => Some(sent.elapsed()),
            _ => None,
        }
    }

    /// Whether work under `executor_id` may still start: it is the current identity and
    /// it proved it was alive less than `within` ago. An attempt whose start was
    /// answered late (a stalled connection, a paused process) must not run its job when
    /// a monitor may already have declared its executor dead and re-queued the run.
    pub fn may_act(&self, executor_id: Uuid, within: std::time::Duration) -> bool {
        let state = self.lock();
        state.identity.id == executor_id
            && matches!(state.proof, Some((id, sent)) if id == executor_id && sent.elapsed() < within)
    }

    /// Registers an attempt of `run_id` started under `executor_id`, whose job gets
    /// `stop_grace` between SIGTERM and SIGKILL. A run registered already (held before
    /// it starts: see [`crate::prefetch`]) keeps its handle, and any stop asked of it.
    pub fn track(&self, run_id: i64, executor_id: Uuid, stop_grace: Duration) -> StopHandle {
        let mut state = self.lock();
        let entry = state
            .running
            .entry(run_id)
            .or_insert_with(|| (executor_id, StopHandle::default(), stop_grace));
        entry.0 = executor_id;
        entry.2 = stop_grace;
        entry.1.clone()
    }

    /// The longest stop grace of the running attempts (how long a stop may take).
    pub fn longest_grace(&self) -> Duration {
        let state = self.lock();
        state
            .running
            .values()
            .map(|(_, _, grace)| *grace)
            .max()
            .unwrap_or_default()
    }

    /// Forgets a finished attempt.
    pub fn untrack(&self, run_id: i64) {
        self.lock().running.remove(&run_id);
    }

    /// Stops one attempt; false when it is not running here.
    pub fn stop(&self, run_id: i64, reason: StopReason) -> bool {
        match self.lock().running.get(&run_id) {
            Some((_, handle, _)) => {
                handle.stop(reason);
                true
            }
            None => false,
        }
    }

    /// Stops every attempt started under `executor_id`; returns how many.
    pub fn stop_identity(&self, executor_id: Uuid, reason: StopReason) -> usize {
        let state = self.lock();
        let mut stopped = 0;
        for (owner, handle, _) in state.running.values() {
            if *owner == executor_id {
                handle.stop(reason);
                stopped += 1;
            }
        }
        stopped
    }

    /// Stops every attempt; returns how many.
    pub fn stop_all(&self, reason: StopReason) -> usize {
        let state = self.lock();
        state
            .running
            .values()
            .for_each(|(_, handle, _)| handle.stop(reason));
        state.running.len()
    }

    /// How many attempts are registered.
    pub fn running_count(&self) -> usize {
        self.lock().running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefetched run is registered while it waits for a slot; a cancellation that
    /// reaches it then must still hold when its attempt registers it again.
    #[test]
    fn a_stop_asked_before_the_attempt_registers_is_kept() {
        let registry = Registry::new();
        let executor = registry.id();
        let held = registry.track(7, executor, Duration::from_secs(1));
        assert!(registry.stop(7, StopReason::Cancelled));
        let started = registry.track(7, executor, Duration::from_secs(5));
        assert_eq!(started.reason(), Some(StopReason::Cancelled));
        assert_eq!(held.reason(), Some(StopReason::Cancelled));
        assert_eq!(registry.longest_grace(), Duration::from_secs(5));
        registry.untrack(7);
        assert_eq!(registry.running_count(), 0);
    }
}
