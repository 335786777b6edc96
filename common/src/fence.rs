//! Fencing tokens: PostgreSQL's guard against a lock holder that no longer holds its lock.
//!
//! A Redis lease can expire under a holder that paused (GC, SIGSTOP, a frozen VM) and
//! another holder can take it. So after taking the lock an executor draws the next
//! token from `jobs.fence` in the statement that starts its run
//! ([`crate::store::runs::start()`]) and stores it on the run; every later write of that
//! run is conditional on the token still being current (the condition of the statement
//! that records a run's end, `store/runs/sql/finish_many.sql`). A stale holder's writes
//! then match no row and are reported as [`Write::Fenced`] instead of overwriting the
//! newer holder's work.
//!
//! For a parallel job several holders are legitimate at once, so "current" means that
//! the run itself still carries the token and is still running on that executor; for a
//! non-parallel job it also means no newer token was issued for the job.

/// The outcome of a fenced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// The row was written.
    Stored,
    /// The writer's token is stale (or the run was reaped): nothing was written.
    Fenced,
}

impl Write {
    /// `Stored` when a conditional statement touched a row.
    pub fn from_rows(rows_affected: u64) -> Write {
        if rows_affected > 0 {
            Write::Stored
        } else {
            Write::Fenced
        }
    }
}
