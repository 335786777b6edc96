//! Built-in jobs for tests, demos and benchmarks: `noop` and `sleep`.
//!
//! They exercise everything around a job (firing, claiming, locks, fencing, recording)
//! without any of a real job's cost or noise, and `sleep` behaves like a real job under
//! a timeout or a stop: it ends as timed out or stopped, at once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{timed_out_error, Ending, Execution, Limits, STOPPED_ERROR};

/// Succeeds at once.
pub(super) fn noop() -> Execution {
    Execution::ended(Ending::Succeeded)
}

/// Sleeps `duration`, unless the timeout or the stop token comes first.
pub(super) async fn sleep(duration: Duration, limits: &Limits, stop: &CancellationToken) -> Execution {
    tokio::select! {
        biased;
        () = stop.cancelled() => Execution::ended(Ending::Stopped).with_error(STOPPED_ERROR),
        () = tokio::time::sleep(duration), if duration <= limits.timeout => Execution::ended(Ending::Succeeded),
        () = tokio::time::sleep(limits.timeout) => {
            Execution::ended(Ending::TimedOut).with_error(timed_out_error(limits.timeout))
        }
    }
}
