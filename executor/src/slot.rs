//! What an attempt holds of the executor's capacity, from claim (or fire) to recorded end.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::wakeup::Wakeups;

/// The two bounds slots are taken from; claiming and firing each hold a clone.
#[derive(Debug, Clone)]
pub struct Slots {
    /// One permit per run this executor may execute at once (`PROBACTR_EXECUTOR_CAPACITY`).
    pub capacity: Arc<Semaphore>,
    /// One permit per attempt held until its end is recorded.
    pub unrecorded: Arc<Semaphore>,
}

impl Slots {
    /// Bounds for `capacity` runs executing at once, and `prefetch` more claimed ahead
    /// ([`crate::prefetch`]): as many more ends may wait to be recorded, so that a claim
    /// carries the ends of about as many runs as it takes.
    pub fn new(capacity: usize, prefetch: usize) -> Slots {
        Slots {
            capacity: Arc::new(Semaphore::new(capacity)),
            unrecorded: Arc::new(Semaphore::new(capacity * UNRECORDED_PER_SLOT + prefetch)),
        }
    }

    /// How many slots could be taken now.
    pub fn free(&self) -> usize {
        self.capacity
            .available_permits()
            .min(self.unrecorded.available_permits())
    }
}

/// What an attempt holds: one of the runs this executor executes at once
/// (`PROBACTR_EXECUTOR_CAPACITY`), given back as soon as the job itself ended, and one of
/// the attempts it may hold in memory until their end is recorded (a multiple of the
/// capacity, plus the prefetch), given back once it is. Recording happens in groups, after the job: holding
/// the execution slot until then would let the round trip to PostgreSQL, not the jobs,
/// bound the throughput of short jobs; the second bound keeps the ends waiting for a slow
/// or absent PostgreSQL finite.
#[derive(Debug)]
pub struct Slot {
    executing: Option<OwnedSemaphorePermit>,
    _unrecorded: OwnedSemaphorePermit,
}

/// Attempts held until recorded, per execution slot.
pub const UNRECORDED_PER_SLOT: usize = 2;

impl Slot {
    /// Takes a slot when both bounds allow one.
    pub fn try_take(slots: &Slots) -> Option<Slot> {
        let unrecorded = slots.unrecorded.clone().try_acquire_owned().ok()?;
        let executing = slots.capacity.clone().try_acquire_owned().ok()?;
        Some(Slot {
            executing: Some(executing),
            _unrecorded: unrecorded,
        })
    }

    /// A slot for an attempt that was asked to stop before its job started: it only
    /// records that end, so it takes no execution slot, only a place among the ends
    /// waiting to be recorded.
    pub fn for_ending(slots: &Slots) -> Option<Slot> {
        let unrecorded = slots.unrecorded.clone().try_acquire_owned().ok()?;
        Some(Slot {
            executing: None,
            _unrecorded: unrecorded,
        })
    }

    /// Gives the execution slot back (the job ended) and wakes the claim loop.
    pub fn release_execution(&mut self, wakeups: &Wakeups) {
        if self.executing.take().is_some() {
            wakeups.capacity.notify_one();
        }
    }
}
