//! Capped exponential backoff with full jitter, and a retry loop bounded by a deadline.
//!
//! # Why jitter
//!
//! When several executors want the same lock, they all fail at nearly the same instant.
//! If each then sleeps a *fixed* time, they all wake at nearly the same instant again and
//! collide again, round after round: the contention never thins out, and the tighter the
//! sleep the more CPU the losers burn. That was the outage of the system probactr
//! replaces (see "Lessons kept" in `docs/design.md`).
//!
//! Full jitter spreads the retries out. Before retry `n` (counting from 0) a contender
//! sleeps a uniformly random time in `[0, min(cap, base · 2ⁿ)]`:
//!
//! - the *exponential* ceiling makes a crowd back off quickly, so a hot key sees fewer
//!   attempts per second the longer the contention lasts;
//! - the *cap* keeps a patient contender from sleeping so long that it misses a free slot;
//! - the *random* draw over the whole range (not `ceiling ± a little`) decorrelates the
//!   contenders completely, so two of them rarely wake together twice.
//!
//! [`Backoff::Fixed`] exists only so a benchmark can show the difference.
//!
//! # Retrying
//!
//! [`retry_until`] runs an operation until it succeeds, fails for good, or a deadline
//! passes. The operation classifies its own failures with [`Retry`]: [`Retry::Again`] for
//! what may succeed later (a busy lock, a dropped connection), [`Retry::Fatal`] for what
//! never will (bad input). The loop never sleeps past the deadline: the last sleep is cut
//! short so that one final attempt happens at the deadline, and then it gives up with
//! [`RetryError::DeadlineExceeded`], carrying the attempt count and the last failure.
//!
//! The deadline bounds the *waiting*, not the operation itself: an attempt in flight is
//! never cancelled (cancelling a lock request halfway could leave a lock taken with nobody
//! knowing its token). Give the operation its own timeout if it can hang.

use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{format_duration, parse_duration};

/// How long to wait before each retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// Sleep a random time in `[0, min(cap, base · 2^attempt)]`: the right choice.
    FullJitter {
        /// Ceiling of the first retry's sleep; doubles with every attempt.
        base: Duration,
        /// The ceiling never grows past this.
        cap: Duration,
    },
    /// Sleep the same time before every retry. Kept only to show, in a benchmark, why
    /// synchronized retries are bad; never use it for real contention.
    Fixed(Duration),
}

impl Backoff {
    /// Default ceiling of the first retry's sleep.
    pub const DEFAULT_BASE: Duration = Duration::from_millis(50);
    /// Default cap of every sleep.
    pub const DEFAULT_CAP: Duration = Duration::from_secs(2);

    /// Full jitter with the given base and cap.
    pub const fn full_jitter(base: Duration, cap: Duration) -> Self {
        Backoff::FullJitter { base, cap }
    }

    /// The longest sleep before retry `attempt` (0 for the first retry): `min(cap, base · 2^attempt)`
    /// for full jitter, the constant for a fixed backoff. Never overflows.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::FullJitter { base, cap } => exponential(base, attempt).min(cap),
            Backoff::Fixed(delay) => delay,
        }
    }

    /// The sleep before retry `attempt` (0 for the first retry): uniformly random in
    /// `[0, ceiling(attempt)]` for full jitter, the constant for a fixed backoff.
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::FullJitter { .. } => uniform_up_to(self.ceiling(attempt)),
            Backoff::Fixed(delay) => delay,
        }
    }
}

impl Default for Backoff {
    /// Full jitter with [`Backoff::DEFAULT_BASE`] and [`Backoff::DEFAULT_CAP`].
    fn default() -> Self {
        Backoff::full_jitter(Self::DEFAULT_BASE, Self::DEFAULT_CAP)
    }
}

/// `base · 2^attempt`, saturating at `Duration::MAX`.
fn exponential(base: Duration, attempt: u32) -> Duration {
    match 2u32.checked_pow(attempt) {
        Some(factor) => base.saturating_mul(factor),
        None if base.is_zero() => Duration::ZERO,
        None => Duration::MAX,
    }
}

/// A uniformly random duration in `[0, ceiling]`, at nanosecond resolution.
fn uniform_up_to(ceiling: Duration) -> Duration {
    let ceiling_nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::random_range(0..=ceiling_nanos))
}

impl fmt::Display for Backoff {
    /// Writes the form [`Backoff::from_str`] reads: `jitter:BASE:CAP` or `fixed:DELAY`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Backoff::FullJitter { base, cap } => {
                write!(f, "jitter:{}:{}", format_duration(base), format_duration(cap))
            }
            Backoff::Fixed(delay) => write!(f, "fixed:{}", format_duration(delay)),
        }
    }
}

impl FromStr for Backoff {
    type Err = String;

    /// Reads `jitter` (the defaults), `jitter:BASE:CAP` (e.g. `jitter:50ms:2s`) or
    /// `fixed:DELAY` (e.g. `fixed:100ms`). Durations as in [`crate::config::parse_duration`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.trim().split(':').collect();
        match parts.as_slice() {
            ["jitter"] => Ok(Backoff::default()),
            ["jitter", base, cap] => parse_full_jitter(base, cap),
            ["fixed", delay] => Ok(Backoff::Fixed(parse_duration(delay)?)),
            _ => Err(format!(
                "{text:?} is not a backoff (expected `jitter`, `jitter:BASE:CAP` or `fixed:DELAY`)"
            )),
        }
    }
}

fn parse_full_jitter(base: &str, cap: &str) -> Result<Backoff, String> {
    let base = parse_duration(base)?;
    let cap = parse_duration(cap)?;
    if base.is_zero() {
        return Err("the jitter base must be greater than 0".to_owned());
    }
    if cap < base {
        return Err(format!(
            "the jitter cap ({}) must not be below its base ({})",
            format_duration(cap),
            format_duration(base)
        ));
    }
    Ok(Backoff::full_jitter(base, cap))
}

/// How an attempt failed, as judged by the operation itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry<E> {
    /// May succeed later (busy, transient failure): back off and try again.
    Again(E),
    /// Will never succeed: stop now.
    Fatal(E),
}

/// Why [`retry_until`] gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryError<E> {
    /// The deadline came while the operation still failed with [`Retry::Again`].
    #[error("gave up at the deadline after {attempts} attempts")]
    DeadlineExceeded {
        /// How many times the operation ran.
        attempts: u32,
        /// The failure of the last attempt.
        last: E,
    },
    /// The operation failed with [`Retry::Fatal`].
    #[error("failed for good after {attempts} attempts")]
    Fatal {
        /// How many times the operation ran (the last one included).
        attempts: u32,
        /// The fatal failure.
        error: E,
    },
}

impl<E> RetryError<E> {
    /// How many times the operation ran.
    pub fn attempts(&self) -> u32 {
        match self {
            RetryError::DeadlineExceeded { attempts, .. } | RetryError::Fatal { attempts, .. } => *attempts,
        }
    }

    /// The failure that ended the loop.
    pub fn into_error(self) -> E {
        match self {
            RetryError::DeadlineExceeded { last, .. } => last,
            RetryError::Fatal { error, .. } => error,
        }
    }
}

/// Runs `op` until it succeeds, fails with [`Retry::Fatal`], or `deadline` passes, sleeping
/// [`Backoff::delay`] between attempts.
///
/// The operation always runs at least once, even if the deadline has already passed. A
/// sleep that would end after the deadline is cut to end at it, and one last attempt runs
/// there; so the loop returns shortly after the deadline, never long after it.
pub async fn retry_until<T, E, F, Fut>(
    backoff: &Backoff,
    deadline: Instant,
    mut op: F,
) -> Result<T, RetryError<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Retry<E>>>,
{
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        let last = match op().await {
            Ok(value) => return Ok(value),
            Err(Retry::Fatal(error)) => return Err(RetryError::Fatal { attempts, error }),
            Err(Retry::Again(error)) => error,
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(RetryError::DeadlineExceeded { attempts, last });
        }
        let wake = now
            .checked_add(backoff.delay(attempts - 1))
            .map_or(deadline, |wake| wake.min(deadline));
        tokio::time::sleep_until(wake).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::collections::BTreeSet;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ceiling_doubles_then_stops_at_the_cap() {
        let backoff = Backoff::full_jitter(10 * MS, 1000 * MS);
        let ceilings: Vec<u128> = (0..9).map(|n| backoff.ceiling(n).as_millis()).collect();
        assert_eq!(ceilings, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }

    #[test]
    fn ceiling_never_overflows_for_huge_attempts() {
        let backoff = Backoff::full_jitter(Duration::from_secs(3600), Duration::from_secs(60));
        for attempt in [31, 32, 33, 64, 1000, u32::MAX] {
            assert_eq!(backoff.ceiling(attempt), Duration::from_secs(60));
            assert!(backoff.delay(attempt) <= Duration::from_secs(60));
        }
        let uncapped = Backoff::full_jitter(Duration::from_secs(1), Duration::MAX);
        assert_eq!(uncapped.ceiling(u32::MAX), Duration::MAX);
        let _ = uncapped.delay(u32::MAX);
    }

    #[test]
    fn delays_stay_within_the_ceiling_and_the_ceiling_within_the_cap() {
        let cap = 500 * MS;
        let backoff = Backoff::full_jitter(3 * MS, cap);
        for attempt in 0..40 {
            let ceiling = backoff.ceiling(attempt);
            assert!(ceiling <= cap, "attempt {attempt}: ceiling {ceiling:?} above cap");
            for _ in 0..200 {
                let delay = backoff.delay(attempt);
                assert!(delay <= ceiling, "attempt {attempt}: {delay:?} > {ceiling:?}");
            }
        }
    }

    /// Guards against a fixed sleep coming back: the delays must be many distinct values
    /// spread over the whole range, not a constant or a narrow band.
    #[test]
    fn delays_are_spread_over_the_whole_range() {
        let backoff = Backoff::full_jitter(Duration::from_secs(1), Duration::from_secs(1));
        let samples: Vec<Duration> = (0..2000).map(|_| backoff.delay(0)).collect();
        let distinct: BTreeSet<Duration> = samples.iter().copied().collect();
        assert!(distinct.len() > 1900, "only {} distinct delays", distinct.len());

        // Ten equal buckets over [0, 1 s]: each should get ~200; demand at least 100.
        let mut buckets = [0u32; 10];
        for delay in &samples {
            let bucket = (delay.as_millis() / 100).min(9) as usize;
            buckets[bucket] += 1;
        }
        assert!(buckets.iter().all(|&n| n >= 100), "uneven spread: {buckets:?}");

        let mean = samples.iter().sum::<Duration>() / 2000;
        assert!(
            (400..600).contains(&mean.as_millis()),
            "mean {mean:?} is not ~500 ms"
        );
    }

    #[test]
    fn fixed_returns_the_constant() {
        let backoff = Backoff::Fixed(100 * MS);
        for attempt in [0, 1, 5, 100, u32::MAX] {
            assert_eq!(backoff.delay(attempt), 100 * MS);
            assert_eq!(backoff.ceiling(attempt), 100 * MS);
        }
    }

    #[test]
    fn parses_and_displays_every_form() {
        assert_eq!("jitter".parse::<Backoff>().unwrap(), Backoff::default());
        let jitter: Backoff = "jitter:50ms:5s".parse().unwrap();
        assert_eq!(jitter, Backoff::full_jitter(50 * MS, Duration::from_secs(5)));
        assert_eq!(jitter.to_string(), "jitter:50ms:5s");
        let fixed: Backoff = "fixed:100ms".parse().unwrap();
        assert_eq!(fixed, Backoff::Fixed(100 * MS));
        assert_eq!(fixed.to_string().parse::<Backoff>().unwrap(), fixed);
    }

    #[test]
    fn rejects_bad_text_with_a_reason() {
        for bad in [
            "",
            "jitter:1s",
            "jitter:5s:1s",
            "jitter:0ms:1s",
            "fixed",
            "fixed:soon",
            "exp:1s:2s",
        ] {
            let error = bad.parse::<Backoff>().unwrap_err();
            assert!(!error.is_empty(), "{bad:?} gave an empty error");
        }
    }

    // The retry tests run on the real clock with short times (pausing tokio's clock needs
    // its `test-util` feature); the tolerances leave room for a loaded machine.
    const SLACK: Duration = Duration::from_millis(150);

    #[tokio::test]
    async fn succeeds_once_the_operation_does() {
        let mut calls = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        let result: Result<u32, RetryError<&str>> =
            retry_until(&Backoff::full_jitter(MS, 5 * MS), deadline, || {
                calls += 1;
                let outcome = if calls < 4 {
                    Err(Retry::Again("busy"))
                } else {
                    Ok(calls)
                };
                async move { outcome }
            })
            .await;
        assert_eq!(result, Ok(4));
    }

    #[tokio::test]
    async fn stops_at_once_on_a_fatal_failure() {
        let start = Instant::now();
        let backoff = Backoff::Fixed(Duration::from_secs(10));
        let result: Result<(), _> = retry_until(&backoff, start + Duration::from_secs(60), || async {
            Err(Retry::Fatal("bad input"))
        })
        .await;
        assert_eq!(
            result,
            Err(RetryError::Fatal {
                attempts: 1,
                error: "bad input"
            })
        );
        assert!(start.elapsed() < SLACK, "a fatal failure must not sleep");
    }

    #[tokio::test]
    async fn honours_the_deadline_and_counts_attempts() {
        let backoff = Backoff::full_jitter(5 * MS, Duration::from_secs(5));
        let start = Instant::now();
        let deadline = start + 300 * MS;
        let mut calls = 0u32;
        let mut late_calls = 0u32;
        let result: Result<(), _> = retry_until(&backoff, deadline, || {
            calls += 1;
            if Instant::now() > deadline + SLACK {
                late_calls += 1;
            }
            async move { Err(Retry::Again(calls)) }
        })
        .await;
        let elapsed = start.elapsed();
        assert!(elapsed >= 300 * MS, "gave up early, after {elapsed:?}");
        assert!(elapsed < 300 * MS + SLACK, "slept past the deadline: {elapsed:?}");
        assert_eq!(late_calls, 0, "an attempt started well after the deadline");
        assert!(calls > 2, "expected several attempts, got {calls}");
        assert_eq!(
            result,
            Err(RetryError::DeadlineExceeded {
                attempts: calls,
                last: calls
            })
        );
    }

    /// A sleep longer than the time left is cut at the deadline, followed by one last try.
    #[tokio::test]
    async fn cuts_a_long_sleep_at_the_deadline() {
        let start = Instant::now();
        let result: Result<(), _> = retry_until(
            &Backoff::Fixed(Duration::from_secs(10)),
            start + 200 * MS,
            || async { Err(Retry::Again("busy")) },
        )
        .await;
        let elapsed = start.elapsed();
        assert_eq!(
            result,
            Err(RetryError::DeadlineExceeded {
                attempts: 2,
                last: "busy"
            })
        );
        assert!(
            (200 * MS..200 * MS + SLACK).contains(&elapsed),
            "took {elapsed:?}"
        );
    }

    #[tokio::test]
    async fn runs_once_when_the_deadline_already_passed() {
        let deadline = Instant::now();
        tokio::time::sleep(5 * MS).await;
        let start = Instant::now();
        let result: Result<(), _> =
            retry_until(&Backoff::Fixed(Duration::from_secs(10)), deadline, || async {
                Err(Retry::Again("busy"))
            })
            .await;
        assert_eq!(
            result,
            Err(RetryError::DeadlineExceeded {
                attempts: 1,
                last: "busy"
            })
        );
        assert!(start.elapsed() < SLACK);
    }
}
