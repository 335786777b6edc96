//! What an attempt holds of the executor's capacity, from claim (or fire) to recorded end.

use tokio::sync::OwnedSemaphorePermit;

use crate::Shared;

/// What an attempt holds: one of the runs this executor executes at once
/// (`PROBACTR_EXECUTOR_CAPACITY`), given back as soon as the job itself ended, and one of
/// the attempts it may hold in memory until their end is recorded (a multiple of the
/// capacity), given back once it is. Recording happens in groups, after the job: holding
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
    pub fn try_take(shared: &Shared) -> Option<Slot> {
        let unrecorded = shared.unrecorded.clone().try_acquire_owned().ok()?;
        let executing = shared.capacity.clone().try_acquire_owned().ok()?;
        Some(Slot {
            executing: Some(executing),
            _unrecorded: unrecorded,
        })
    }

    /// Gives the execution slot back (the job ended) and wakes the claim loop.
    pub fn release_execution(&mut self, shared: &Shared) {
        if self.executing.take().is_some() {
            shared.wakeups.capacity.notify_one();
        }
    }
}
