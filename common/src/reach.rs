//! Start-up's wait for PostgreSQL and Redis: each is tried until it answers, with a log
//! line per failed attempt naming the address (its password hidden), for at most
//! `PROBACTR_CONNECT_TIMEOUT`; past that the process exits with an error naming the
//! service, instead of waiting in silence. Once a process runs, losing either is handled
//! where it is used (backoff and retry), not here.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::Connection;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::{retry_until, Backoff, Retry};
use crate::config::{format_duration, redact_url};

/// How long one attempt may take: a server that accepts the connection but never answers
/// costs this, not the whole wait.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a service was not reached at start-up.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// It did not answer within `PROBACTR_CONNECT_TIMEOUT`.
    #[error(
        "{service} at {address} did not answer within {} (PROBACTR_CONNECT_TIMEOUT) after {attempts} attempts: {last}",
        format_duration(*.waited)
    )]
    TimedOut {
        /// `PostgreSQL` or `Redis`.
        service: &'static str,
        /// Its URL, password hidden.
        address: String,
        /// The bound that passed.
        waited: Duration,
        /// How many attempts failed.
        attempts: u32,
        /// The last attempt's failure.
        last: String,
    },
    /// Its URL cannot be used at all (it does not parse, names unreadable certificates).
    #[error("{service} at {address}: {error}")]
    Unusable {
        /// `PostgreSQL` or `Redis`.
        service: &'static str,
        /// Its URL, password hidden.
        address: String,
        /// What is wrong with it.
        error: String,
    },
}

/// Waits until PostgreSQL at `url` accepts a connection. `Ok(false)` when `stop` came
/// first.
pub async fn postgres(url: &str, within: Duration, stop: &CancellationToken) -> Result<bool, ReachError> {
    let options: PgConnectOptions = url.parse().map_err(|err: sqlx::Error| ReachError::Unusable {
        service: "PostgreSQL",
        address: redact_url(url),
        error: err.to_string(),
    })?;
    let options = options.application_name("probactr");
    until_answered("PostgreSQL", url, within, stop, || async {
        let connection = sqlx::PgConnection::connect_with(&options).await?;
        connection.close().await
    })
    .await
}

/// Waits until Redis at `url` answers a `PING` (for a `redis+sentinel://` URL: the
/// master the sentinels name). `Ok(false)` when `stop` came first.
pub async fn redis(url: &str, within: Duration, stop: &CancellationToken) -> Result<bool, ReachError> {
    let target = crate::lock::target::RedisTarget::parse(url).map_err(|err| ReachError::Unusable {
        service: "Redis",
        address: redact_url(url),
        error: err.to_string(),
    })?;
    until_answered("Redis", url, within, stop, || target.ping()).await
}

/// Runs `attempt` until it succeeds, logging each failure, for at most `within`.
async fn until_answered<T, E, F, Fut>(
    service: &'static str,
    url: &str,
    within: Duration,
    stop: &CancellationToken,
    mut attempt: F,
) -> Result<bool, ReachError>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let address = redact_url(url);
    let started = Instant::now();
    let deadline = started + within;
    let backoff = Backoff::full_jitter(Duration::from_millis(200), Duration::from_secs(2));
    let failures = AtomicU32::new(0);
    let tries = retry_until(&backoff, deadline, || {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let bound = ATTEMPT_TIMEOUT.min(remaining).max(Duration::from_millis(100));
        let once = tokio::time::timeout(bound, attempt());
        let address = &address;
        let failures = &failures;
        async move {
            let error = match once.await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(err)) => err.to_string(),
                Err(_) => format!("no answer within {}", format_duration(bound)),
            };
            let number = failures.fetch_add(1, Ordering::Relaxed) + 1;
            let left = deadline.saturating_duration_since(Instant::now());
            tracing::warn!(
                service,
                address = %address,
                attempt = number,
                error = %error,
                "{service} at {address} does not answer yet ({error}); attempt {}, giving up in {}",
                number,
                format_duration(Duration::from_secs(left.as_secs()))
            );
            Err(Retry::Again(error))
        }
    });
    let outcome = tokio::select! {
        _ = stop.cancelled() => return Ok(false),
        outcome = tries => outcome,
    };
    match outcome {
        Ok(()) => {
            if failures.load(Ordering::Relaxed) > 0 {
                tracing::info!(service, address = %address, waited = ?started.elapsed(), "{service} at {address} answers");
            }
            Ok(true)
        }
        Err(err) => {
            let attempts = err.attempts();
            Err(ReachError::TimedOut {
                service,
                address,
                waited: within,
                attempts,
                last: err.into_error(),
            })
        }
    }
}
