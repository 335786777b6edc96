//! The dashboard (`GET /?range=1h|24h|7d`): the cluster's cards, a stacked bar chart of
//! runs per minute by outcome drawn as inline SVG on the server (no script), the slowest
//! and the most failing jobs of the range, the next instants and the latest failures.

use axum::extract::State;
use axum::response::Html;
use minijinja::context;
use probactr_common::model::ProcessRole;
use probactr_common::store::dashboard::{Bucket, Range};
use probactr_common::store::{self, jobs::JobFilter};
use serde::Serialize;

use super::{render, AdminError, AdminUser};
use crate::error::FieldErrors;
use crate::input::QueryParams;
use crate::service;
use crate::state::AppState;

/// `GET /?range=`: a bad range shows the last hour, with a notice saying so.
pub async fn dashboard(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    let mut errors = FieldErrors::new();
    let range = service::dashboard::range(&query, &mut errors);
    let range_notice = errors.get("range").map(|why| {
        format!(
            "Unknown range \"{}\": the range {why}. Showing the last hour.",
            query.text("range").unwrap_or_default()
        )
    });
    let history = service::dashboard::dashboard(&state.handles, &user.0, range, user.namespace()).await?;
    let chart = Chart::new(&history.buckets, range);
    let shared = service::cluster::status_for(&state.handles, &user.0).await?;
    let status: &store::cluster::Status = &shared;
    let jobs_total = service::jobs::count(
        &state.handles,
        &user.0,
        &JobFilter {
            namespaces: user.namespace().map(|name| vec![name.to_owned()]),
            ..JobFilter::default()
        },
    )
    .await?;
    let runs_last_hour: i64 = status.runs_last_hour.values().sum();
    let failures_last_hour: i64 = ["failed", "timed_out", "abandoned"]
        .iter()
        .filter_map(|s| status.runs_last_hour.get(*s))
        .sum();
    let executors = status.processes.get(ProcessRole::Executor.as_str());
    let executors_alive = executors.and_then(|e| e.get("alive")).copied().unwrap_or(0);
    let executors_dead = executors.and_then(|e| e.get("dead")).copied().unwrap_or(0);
    let ranges: Vec<&str> = Range::ALL.iter().map(|r| r.as_str()).collect();
    let ctx = context! {
        status, jobs_total, runs_last_hour, failures_last_hour, executors_alive, executors_dead,
        chart, history, ranges, range => range.as_str(), range_notice,
        ..user.layout("dashboard")
    };
    render(&state, "dashboard.html", ctx)
}

/// The chart's drawing area, in SVG user units.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 220.0;
/// Room left of the bars for the y axis and its labels, and below them for the x axis.
const LEFT: f64 = 56.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;

/// A stacked bar chart of runs per minute by outcome, laid out for an SVG.
#[derive(Debug, Clone, Serialize)]
struct Chart {
    width: f64,
    height: f64,
    /// The plot's edges: left, right, top and bottom (the x axis).
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    bars: Vec<Bar>,
    /// Horizontal grid lines with their runs-per-minute labels.
    ticks: Vec<Tick>,
    /// What the left end of the x axis is ("60 min ago").
    since: &'static str,
    /// How wide a bar is ("15-minute").
    bar_width: &'static str,
    /// Runs in the range by outcome, for the legend.
    totals: Totals,
}

#[derive(Debug, Clone, Default, Serialize)]
struct Totals {
    succeeded: i64,
    failed: i64,
    not_run: i64,
}

/// One bucket's bar: its stacked segments (bottom first) and a tooltip.
#[derive(Debug, Clone, Serialize)]
struct Bar {
    x: f64,
    width: f64,
    title: String,
    segments: Vec<Segment>,
}

/// One outcome's part of a bar; `class` colours it.
#[derive(Debug, Clone, Serialize)]
struct Segment {
    class: &'static str,
    y: f64,
    height: f64,
}

#[derive(Debug, Clone, Serialize)]
struct Tick {
    y: f64,
    label: String,
}

impl Chart {
    fn new(buckets: &[Bucket], range: Range) -> Chart {
        let minutes_per_bucket = range.bucket_secs() as f64 / 60.0;
        let rate = |count: i64| count as f64 / minutes_per_bucket;
        let peak = buckets
            .iter()
            .map(|b| rate(b.succeeded + b.failed + b.not_run))
            .fold(0.0, f64::max);
        let scale_top = if peak > 0.0 { peak } else { 1.0 };
        let plot_height = HEIGHT - TOP - BOTTOM;
        let bottom = HEIGHT - BOTTOM;
        let slot = (WIDTH - LEFT - RIGHT) / buckets.len().max(1) as f64;
        let mut totals = Totals::default();
        let bars = buckets
            .iter()
            .enumerate()
            .map(|(i, bucket)| {
                totals.succeeded += bucket.succeeded;
                totals.failed += bucket.failed;
                totals.not_run += bucket.not_run;
                let mut base = bottom;
                let mut segments = Vec::new();
                for (class, count) in [
                    ("succeeded", bucket.succeeded),
                    ("failed", bucket.failed),
                    ("not-run", bucket.not_run),
                ] {
                    if count == 0 {
                        continue;
                    }
                    let height = rate(count) / scale_top * plot_height;
                    base -= height;
                    segments.push(Segment {
                        class,
                        y: round(base),
                        height: round(height),
                    });
                }
                Bar {
                    x: round(LEFT + slot * i as f64 + slot * 0.1),
                    width: round(slot * 0.8),
                    title: format!(
                        "{}: {} succeeded, {} failed, {} not run ({} per minute)",
                        bucket.start.format("%Y-%m-%d %H:%M UTC"),
                        bucket.succeeded,
                        bucket.failed,
                        bucket.not_run,
                        per_minute(rate(bucket.succeeded + bucket.failed + bucket.not_run)),
                    ),
                    segments,
                }
            })
            .collect();
        let ticks = [0.0, 0.5, 1.0]
            .into_iter()
            .map(|share| Tick {
                y: round(bottom - share * plot_height),
                label: per_minute(share * scale_top),
            })
            .collect();
        Chart {
            width: WIDTH,
            height: HEIGHT,
            left: LEFT,
            right: WIDTH - RIGHT,
            top: TOP,
            bottom,
            bars,
            ticks,
            since: match range {
                Range::Hour => "60 min ago",
                Range::Day => "24 h ago",
                Range::Week => "7 days ago",
            },
            bar_width: match range {
                Range::Hour => "1-minute",
                Range::Day => "15-minute",
                Range::Week => "2-hour",
            },
            totals,
        }
    }
}

/// SVG coordinates to a tenth of a unit: shorter pages, no visible difference.
fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// A rate as the axis shows it: whole above 10, else to two decimals without trailing
/// zeros ("0.25", "1.5", "3").
fn per_minute(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{rate:.0}")
    } else {
        let text = format!("{rate:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn bucket(succeeded: i64, failed: i64, not_run: i64) -> Bucket {
        Bucket {
            start: Utc::now(),
            succeeded,
            failed,
            not_run,
        }
    }

    #[test]
    fn bars_stack_outcomes_scaled_to_the_peak_rate() {
        let chart = Chart::new(&[bucket(0, 0, 0), bucket(2, 1, 1), bucket(1, 1, 0)], Range::Hour);
        assert_eq!(chart.bars.len(), 3);
        assert!(chart.bars[0].segments.is_empty());
        let peak = &chart.bars[1].segments;
        let classes: Vec<&str> = peak.iter().map(|s| s.class).collect();
        assert_eq!(classes, ["succeeded", "failed", "not-run"]);
        // The peak bar fills the plot from the x axis to its top.
        assert_eq!(peak[0].y + peak[0].height, chart.bottom);
        assert_eq!(peak[2].y, chart.top);
        assert_eq!(peak[0].height, 2.0 * peak[1].height);
        assert_eq!(chart.ticks.last().map(|t| t.label.as_str()), Some("4"));
        assert_eq!(
            (chart.totals.succeeded, chart.totals.failed, chart.totals.not_run),
            (3, 2, 1)
        );
    }

    #[test]
    fn wide_buckets_show_runs_per_minute() {
        // 30 runs in a 15-minute bucket are 2 a minute.
        let chart = Chart::new(&[bucket(30, 0, 0)], Range::Day);
        assert_eq!(chart.ticks.last().map(|t| t.label.as_str()), Some("2"));
        assert!(
            chart.bars[0].title.contains("30 succeeded"),
            "{}",
            chart.bars[0].title
        );
        assert_eq!(per_minute(0.25), "0.25");
        assert_eq!(per_minute(1.5), "1.5");
        assert_eq!(per_minute(12.4), "12");
        assert_eq!(Chart::new(&[bucket(0, 0, 0)], Range::Week).ticks[2].label, "1");
    }
}
