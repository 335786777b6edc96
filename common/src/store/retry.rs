//! Retrying work that PostgreSQL aborted for concurrency: a serialization failure
//! (SQLSTATE `40001`) or a deadlock (`40P01`). PostgreSQL rolls the victim's transaction
//! back and expects it to be run again; nothing of it was kept, so running it again is
//! safe. Every process retries such failures the same way, through [`retry_transient`]:
//! a bounded number of attempts ([`MAX_ATTEMPTS`]), with full jitter between them (so
//! two victims of the same cycle do not collide again), each retry logged with what was
//! retried. Only when the attempts are spent does the failure reach the caller, which
//! says so as "busy, try again" (the manager's 503 with `Retry-After`), never as a bug.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use super::StoreError;
use crate::backoff::Backoff;

/// SQLSTATE of a serialization failure.
pub const SERIALIZATION_FAILURE: &str = "40001";
/// SQLSTATE of a detected deadlock.
pub const DEADLOCK_DETECTED: &str = "40P01";

/// Attempts in all (the first and its retries) before the failure is given up.
pub const MAX_ATTEMPTS: u32 = 5;

/// The sleep before each retry: short, since the other party of a deadlock has usually
/// finished by then, and random, so that the victims spread out.
pub const BACKOFF: Backoff = Backoff::full_jitter(Duration::from_millis(10), Duration::from_millis(400));

/// Errors that can tell whether they are a transaction aborted for concurrency.
pub trait Transient {
    /// True for a serialization failure or a deadlock: running the work again may succeed.
    fn is_transient(&self) -> bool;
}

impl Transient for sqlx::Error {
    fn is_transient(&self) -> bool {
        match self {
            sqlx::Error::Database(db) => db
                .code()
                .is_some_and(|code| code == SERIALIZATION_FAILURE || code == DEADLOCK_DETECTED),
            _ => false,
        }
    }
}

impl Transient for StoreError {
    fn is_transient(&self) -> bool {
        match self {
            StoreError::Database(err) => err.is_transient(),
            StoreError::Migrate(_) => false,
        }
    }
}

/// True when `err` or one of its causes is a transaction aborted for concurrency (for
/// error types that wrap store errors, such as `anyhow::Error` through its `chain()`).
pub fn caused_by_transient(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        let transient = err
            .downcast_ref::<sqlx::Error>()
            .is_some_and(Transient::is_transient)
            || err
                .downcast_ref::<StoreError>()
                .is_some_and(Transient::is_transient);
        if transient {
            return true;
        }
        cause = err.source();
    }
    false
}

/// Runs `work` (one whole transaction, begun and committed inside it) until it succeeds,
/// fails for another reason, or [`MAX_ATTEMPTS`] attempts were aborted for concurrency;
/// then returns its last result. `what` names the work in the log.
pub async fn retry_transient<T, E, F, Fut>(what: &str, mut work: F) -> Result<T, E>
where
    E: Transient + Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match work().await {
            Err(err) if err.is_transient() && attempt < MAX_ATTEMPTS => {
                let pause = BACKOFF.delay(attempt - 1);
                tracing::warn!(work = what, attempt, error = %err, pause_ms = pause.as_millis() as u64,
                               "transaction aborted for concurrency; running it again");
                tokio::time::sleep(pause).await;
                attempt += 1;
            }
            Err(err) if err.is_transient() => {
                tracing::warn!(work = what, attempts = attempt, error = %err,
                               "transaction aborted for concurrency at every attempt; giving up");
                return Err(err);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fake(bool);

    impl Display for Fake {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "fake")
        }
    }

    impl Transient for Fake {
        fn is_transient(&self) -> bool {
            self.0
        }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_a_bounded_number_of_times() {
        let mut calls = 0;
        let result: Result<(), Fake> = retry_transient("test", || {
            calls += 1;
            async { Err(Fake(true)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, MAX_ATTEMPTS);
    }

    #[tokio::test]
    async fn other_failures_and_successes_are_not_retried() {
        let mut calls = 0;
        let result: Result<(), Fake> = retry_transient("test", || {
            calls += 1;
            async { Err(Fake(false)) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 1);
        let mut calls = 0;
        let result: Result<u32, Fake> = retry_transient("test", || {
            calls += 1;
            let fail = calls < 3;
            async move {
                if fail {
                    Err(Fake(true))
                } else {
                    Ok(7)
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some(7));
        assert_eq!(calls, 3);
    }
}
