//! The instants of schedules: `probactr ledger` (what became of each past instant:
//! ran, skipped, missed…) and `probactr forecast` (what will fire when, with the instants
//! a DST change skips or repeats marked), for one job or every job in view.

use std::collections::BTreeSet;

use chrono::Utc;
use serde_json::Value;

use crate::client::Client;
use crate::commands::{encode, items, job_named, Exit};
use crate::output::{self, Format};
use crate::times;

/// A span of time as given on the command line (`--from`, `--until`).
#[derive(Debug, clap::Args)]
pub struct Span {
    /// Only this job's (by name).
    #[arg(long)]
    job: Option<String>,
    /// From (RFC 3339, a date and time in the shown zone, or an offset from now: -24h).
    #[arg(long, allow_hyphen_values = true)]
    from: Option<String>,
    /// Until (same forms as --from).
    #[arg(long, allow_hyphen_values = true)]
    until: Option<String>,
}

impl Span {
    /// `from=…&to=…` as the API reads them (what was given only), each option checked.
    fn query(&self) -> anyhow::Result<String> {
        let now = Utc::now();
        let mut query = Vec::new();
        if let Some(from) = &self.from {
            query.push(format!("from={}", encode(&times::parse("--from", from, now)?)));
        }
        if let Some(until) = &self.until {
            query.push(format!("to={}", encode(&times::parse("--until", until, now)?)));
        }
        Ok(query.join("&"))
    }
}

/// Most pages of one trigger's ledger read (the API gives up to 500 instants a page).
const MOST_PAGES: usize = 20;

/// `probactr ledger`: the ledger of every trigger of the jobs in view (or of one job).
pub async fn ledger(client: &Client, span: Span, format: Format) -> anyhow::Result<Exit> {
    let query = span.query()?;
    let jobs = match &span.job {
        Some(name) => vec![job_named(client, name).await?],
        None => items(&client.get("/jobs?limit=500").await?),
    };
    let mut entries = Vec::new();
    for job in &jobs {
        for trigger in items(&client.get(&format!("/jobs/{}/triggers", job["id"])).await?) {
            let mut page_query = query.clone();
            for _ in 0..MOST_PAGES {
                let separator = if page_query.is_empty() { "" } else { "?" };
                let page = client
                    .get(&format!(
                        "/triggers/{}/ledger{separator}{page_query}",
                        trigger["id"]
                    ))
                    .await?;
                for mut entry in page["entries"].as_array().cloned().unwrap_or_default() {
                    entry["job_name"] = job["name"].clone();
                    entry["trigger_id"] = trigger["id"].clone();
                    entries.push(entry);
                }
                let Some(next) = page["next_from"].as_str() else {
                    break;
                };
                page_query = next_page(&query, next);
            }
        }
    }
    entries.sort_by(|a, b| a["instant"].as_str().cmp(&b["instant"].as_str()));
    let columns = [
        ("instant", "INSTANT"),
        ("job_name", "JOB"),
        ("trigger_id", "TRIGGER"),
        ("outcome", "OUTCOME"),
        ("run_id", "RUN"),
        ("state", "STATE"),
        ("reason", "REASON"),
    ];
    output::list(format, &entries, &columns);
    Ok(Exit::Success)
}

/// The query of the page after one, from `next` on, up to the same end.
fn next_page(query: &str, next: &str) -> String {
    let mut parts: Vec<String> = query
        .split('&')
        .filter(|part| !part.is_empty() && !part.starts_with("from="))
        .map(str::to_owned)
        .collect();
    parts.insert(0, format!("from={}", encode(next)));
    parts.join("&")
}

/// `probactr forecast`: what will fire when (default: the next 24 hours).
pub async fn forecast(client: &Client, span: Span, format: Format) -> anyhow::Result<Exit> {
    let mut query = span.query()?;
    if span.from.is_none() && span.until.is_some() {
        // The API's default start (now) is what a person means; said for a clear error
        // when the end is before it.
        query = format!("from={}&{query}", encode(&Utc::now().to_rfc3339()));
    }
    let job = match &span.job {
        Some(name) => Some(job_named(client, name).await?),
        None => None,
    };
    if let Some(job) = &job {
        let separator = if query.is_empty() { "" } else { "&" };
        query = format!("job_id={}{separator}{query}", job["id"]);
    }
    let separator = if query.is_empty() { "" } else { "?" };
    let answer = client.get(&format!("/forecast{separator}{query}")).await?;
    let mut instants = items(&answer);
    // The forecast covers every job the caller sees: keep the namespace's.
    if job.is_none() && client.namespace().is_some() {
        let in_namespace: BTreeSet<i64> = items(&client.get("/jobs?limit=500").await?)
            .iter()
            .filter_map(|job| job["id"].as_i64())
            .collect();
        instants.retain(|instant| {
            instant["job_id"]
                .as_i64()
                .is_some_and(|id| in_namespace.contains(&id))
        });
    }
    for instant in &mut instants {
        instant["mark"] = mark(instant);
    }
    let columns = [
        ("instant", "INSTANT"),
        ("job_name", "JOB"),
        ("trigger_id", "TRIGGER"),
        ("local_time", "TRIGGER'S TIME"),
        ("timezone", "ITS ZONE"),
        ("mark", "MARK"),
    ];
    output::list(format, &instants, &columns);
    if answer["truncated"] == true {
        eprintln!(
            "(only the first {} instants: ask for a shorter span)",
            instants.len()
        );
    }
    Ok(Exit::Success)
}

/// What is special about a forecast instant, in words (a DST change that skips or
/// repeats its hour, a calendar or maintenance window that skips it, its jitter), or null.
fn mark(instant: &Value) -> Value {
    let mut marks = Vec::new();
    if let Some(dst) = instant["dst"].as_str() {
        marks.push(format!("DST: {dst}"));
    }
    if let Some(reason) = instant["skipped"].as_str() {
        marks.push(format!("skipped: {reason}"));
    }
    if let Some(secs) = instant["jitter_secs"].as_i64() {
        marks.push(format!("jitter +{secs}s"));
    }
    if marks.is_empty() {
        Value::Null
    } else {
        Value::String(marks.join("; "))
    }
}
