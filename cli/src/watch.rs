//! Following a run to its end (`jobs run --wait`): each change of state and the output's
//! lines as they come, on standard error, then a one-line summary (state, duration, exit
//! code). Retries are followed to the last attempt.

use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::client::Client;
use crate::commands::items;
use crate::times;

/// How often the run and its output are asked for while nothing new came.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// States a run leaves on its own.
const LIVE: [&str; 3] = ["queued", "claimed", "running"];

/// Follows run `run_id` (and its retries) to its end, showing its progress on standard
/// error; returns the last attempt.
pub async fn follow(client: &Client, run_id: i64) -> anyhow::Result<Value> {
    let mut current = run_id;
    let mut printer = Lines::default();
    loop {
        let run = follow_attempt(client, current, &mut printer).await?;
        match retry_of(client, &run).await? {
            Some(next) => {
                progress(&format!(
                    "attempt {} {}{}; attempt {} is run #{next}",
                    run["attempt"],
                    state_of(&run),
                    run["error"]
                        .as_str()
                        .map(|error| format!(": {error}"))
                        .unwrap_or_default(),
                    run["attempt"].as_i64().unwrap_or(1) + 1,
                ));
                current = next;
            }
            None => return Ok(run),
        }
    }
}

/// Shows one attempt's states and output until it has ended and all its output is shown.
async fn follow_attempt(client: &Client, run_id: i64, printer: &mut Lines) -> anyhow::Result<Value> {
    let mut shown_state = String::new();
    let mut offset = 0;
    loop {
        let run = client.get(&format!("/runs/{run_id}")).await?;
        let state = state_of(&run).to_owned();
        if state != shown_state {
            progress(&describe_state(&run));
            shown_state = state.clone();
        }
        let ended = !LIVE.contains(&state.as_str());
        // Read the output until it has nothing new; once the run has ended, that is all.
        loop {
            let page = client
                .get(&format!("/runs/{run_id}/output?offset={offset}"))
                .await?;
            let chunks = page["chunks"].as_array().cloned().unwrap_or_default();
            for chunk in &chunks {
                printer.push(chunk["text"].as_str().unwrap_or_default());
            }
            let next = page["next_offset"].as_i64().unwrap_or(offset);
            if chunks.is_empty() || next == offset {
                break;
            }
            offset = next;
        }
        if ended {
            printer.finish();
            return Ok(run);
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

fn state_of(run: &Value) -> &str {
    run["state"].as_str().unwrap_or("unknown")
}

/// A state change as shown: `running (attempt 1)`, `failed: exit code 3`.
fn describe_state(run: &Value) -> String {
    let state = state_of(run);
    let mut text = state.to_owned();
    if state == "running" || state == "claimed" {
        text.push_str(&format!(" (attempt {})", run["attempt"]));
    }
    if let Some(error) = run["error"].as_str() {
        text.push_str(&format!(": {error}"));
    }
    text
}

/// A line of progress on standard error, with the time it was seen.
fn progress(text: &str) {
    eprintln!("[{}] {text}", times::zone().show(Utc::now()));
}

/// The output, on standard error a line at a time, each marked as the run's.
#[derive(Default)]
struct Lines {
    partial: String,
}

impl Lines {
    fn push(&mut self, text: &str) {
        self.partial.push_str(text);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            eprint!("  | {line}");
        }
        let _ = std::io::stderr().flush();
    }

    /// Shows a last line the run did not end.
    fn finish(&mut self) {
        if !self.partial.is_empty() {
            eprintln!("  | {}", std::mem::take(&mut self.partial));
        }
    }
}

/// The one-line summary of an ended run: `Run #12 of nightly succeeded in 4.2 s (exit
/// code 0)`.
pub fn summary(run: &Value, job_name: &str) -> String {
    let mut text = format!("Run #{} of {job_name} {}", run["id"], state_of(run));
    let instant = |field: &str| {
        run[field]
            .as_str()
            .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
    };
    if let (Some(start), Some(end)) = (
        instant("started_at").or_else(|| instant("queued_at")),
        instant("finished_at"),
    ) {
        text.push_str(&format!(" in {}", times::span(end - start)));
    }
    if let Some(code) = run["exit_code"].as_i64() {
        text.push_str(&format!(" (exit code {code})"));
    } else if let Some(status) = run["http_status"].as_i64() {
        text.push_str(&format!(" (HTTP {status})"));
    }
    if run["attempt"].as_i64().is_some_and(|attempt| attempt > 1) {
        text.push_str(&format!(", attempt {}", run["attempt"]));
    }
    if state_of(run) != "succeeded" {
        if let Some(error) = run["error"].as_str() {
            text.push_str(&format!(": {}", error.lines().next().unwrap_or_default()));
        }
    }
    text
}

/// The next attempt of an ended run, when its job retries it.
async fn retry_of(client: &Client, run: &Value) -> anyhow::Result<Option<i64>> {
    if !["failed", "timed_out", "abandoned"].contains(&state_of(run)) {
        return Ok(None);
    }
    let first = run["first_run_id"]
        .as_i64()
        .or_else(|| run["id"].as_i64())
        .unwrap_or_default();
    let attempt = run["attempt"].as_i64().unwrap_or(1);
    let page = client
        .get(&format!("/runs?job_id={}&limit=50", run["job_id"]))
        .await?;
    Ok(items(&page)
        .iter()
        .find(|other| {
            other["first_run_id"].as_i64() == Some(first) && other["attempt"].as_i64() == Some(attempt + 1)
        })
        .and_then(|other| other["id"].as_i64()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_summary_says_state_duration_and_exit_code() {
        let run = json!({"id": 7, "state": "failed", "attempt": 2,
                         "started_at": "2026-11-26T07:00:00Z", "finished_at": "2026-11-26T07:00:04.200Z",
                         "exit_code": 3, "error": "exit code 3"});
        assert_eq!(
            summary(&run, "nightly"),
            "Run #7 of nightly failed in 4.2 s (exit code 3), attempt 2: exit code 3"
        );
    }
}
