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
    /// One permit per run booked for a coming instant past the free slots, held until
    /// its end is recorded ([`Slot::booked`]): apart from `unrecorded`, so that booking
    /// changes nothing of what claims and prefetching take.
    booked: Arc<Semaphore>,
}

impl Slots {
    /// Bounds for `capacity` runs executing at once, and `prefetch` more claimed ahead
    /// ([`crate::prefetch`]): as many more ends may wait to be recorded, so that a claim
    /// carries the ends of about as many runs as it takes.
    /// Runs fired ahead may besides be booked past the free slots, up to
    /// [`BOOKABLE_PER_SLOT`] per slot ([`Slot::booked`]).
    pub fn new(capacity: usize, prefetch: usize) -> Slots {
        Slots {
            capacity: Arc::new(Semaphore::new(capacity)),
            unrecorded: Arc::new(Semaphore::new(capacity * UNRECORDED_PER_SLOT + prefetch)),
            booked: Arc::new(Semaphore::new(capacity * BOOKABLE_PER_SLOT)),
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
/// Runs booked for coming instants past the free slots, per execution slot: an aligned
/// instant of many short runs starts from memory, without a claim, as slots free. Two
/// such instants a second apart may be booked at once (the next one's fired while the
/// last one's ends are being recorded): with eight, 10,000 triggers a second on two
/// executors queued up to 3,900 runs of an instant, started up to 300 ms late.
pub const BOOKABLE_PER_SLOT: usize = 16;

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

    /// A slot booked for a run fired ahead while no execution slot is spare: a place
    /// among the booked runs waiting to start or to be recorded; its execution slot is
    /// taken when its instant comes ([`Slot::take_execution`]).
    pub fn booked(slots: &Slots) -> Option<Slot> {
        let booked = slots.booked.clone().try_acquire_owned().ok()?;
        Some(Slot {
            executing: None,
            _unrecorded: booked,
        })
    }

    /// Whether it holds an execution slot.
    pub fn executes(&self) -> bool {
        self.executing.is_some()
    }

    /// Takes an execution slot for a booked slot if one is free now.
    pub fn try_take_execution(&mut self, slots: &Slots) -> bool {
        if self.executing.is_none() {
            self.executing = slots.capacity.clone().try_acquire_owned().ok();
        }
        self.executing.is_some()
    }

    /// Takes an execution slot, waiting for one to free, for a booked slot. False when
    /// the executor's slots are closed (it is stopping).
    pub async fn take_execution(&mut self, slots: &Slots) -> bool {
        if self.executing.is_none() {
            match slots.capacity.clone().acquire_owned().await {
                Ok(permit) => self.executing = Some(permit),
                Err(_) => return false,
            }
        }
        true
    }

    /// Gives the execution slot back (the job ended) and wakes the claim loop.
    pub fn release_execution(&mut self, wakeups: &Wakeups) {
        if self.executing.take().is_some() {
            wakeups.capacity.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn booked_slots_leave_claims_their_bounds_and_execute_as_slots_free() {
        let slots = Slots::new(2, 1);
        let mut booked: Vec<Slot> = std::iter::from_fn(|| Slot::booked(&slots)).collect();
        assert_eq!(booked.len(), 2 * BOOKABLE_PER_SLOT);
        assert!(booked.iter().all(|slot| !slot.executes()));
        assert_eq!(slots.free(), 2, "claims keep every execution slot");
        assert_eq!(
            slots.unrecorded.available_permits(),
            2 * UNRECORDED_PER_SLOT + 1,
            "and every place among the ends waiting"
        );
        let mut running = Slot::try_take(&slots).expect("a free slot");
        assert!(booked[0].try_take_execution(&slots));
        assert!(booked[0].executes());
        assert!(!booked[1].try_take_execution(&slots), "no third execution slot");
        let waiting = tokio::time::timeout(Duration::from_millis(50), booked[1].take_execution(&slots));
        assert!(waiting.await.is_err(), "it waits for one");
        running.release_execution(&Wakeups::default());
        assert!(
            booked[1].take_execution(&slots).await,
            "a freed slot goes to the booked run"
        );
        assert!(booked[1].executes());
    }
}
