//! The dashboard (`GET /?range=1h|24h|7d`): the cluster's cards, a stacked bar chart of
//! runs per minute by outcome drawn as inline SVG on the server (no script), the slowest
//! and the most failing jobs of the range, the capacity forecast of the next 24 hours
//! (runs at once against the live executors' capacity), the next instants and the latest
//! failures.

use axum::extract::State;
use axum::response::Html;
use chrono::{DateTime, Utc};
use minijinja::context;
use probactr_common::capacity::CapacityForecast;
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
    // The forecast is an aid: a page without it is better than no page.
    let capacity = match service::capacity::forecast(&state.handles, &user.0, FORECAST_HOURS).await {
        Ok(forecast) => CapacityChart::new(&forecast),
        Err(err) => {
            tracing::warn!(error = %err, "the dashboard's capacity forecast failed");
            None
        }
    };
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
        chart, capacity, history, ranges, range => range.as_str(), range_notice,
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

/// The drawing area and the plot's edges, shared by the dashboard's charts.
#[derive(Debug, Clone, Copy, Serialize)]
struct Frame {
    width: f64,
    height: f64,
    /// The plot's edges: left, right, top and bottom (the x axis).
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

const FRAME: Frame = Frame {
    width: WIDTH,
    height: HEIGHT,
    left: LEFT,
    right: WIDTH - RIGHT,
    top: TOP,
    bottom: HEIGHT - BOTTOM,
};

/// A stacked bar chart of runs per minute by outcome, laid out for an SVG.
#[derive(Debug, Clone, Serialize)]
struct Chart {
    #[serde(flatten)]
    frame: Frame,
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
            frame: FRAME,
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

/// The hours the dashboard's capacity forecast covers.
const FORECAST_HOURS: i64 = 24;

/// The whole cluster's forecast as bars of runs at once per bucket, with the capacity
/// as a line; buckets over it are drawn apart.
#[derive(Debug, Clone, Serialize)]
struct CapacityChart {
    #[serde(flatten)]
    frame: Frame,
    bars: Vec<Bar>,
    ticks: Vec<Tick>,
    /// The capacity line's height.
    capacity_y: f64,
    capacity: i64,
    executors: usize,
    peak: u32,
    shortfalls: usize,
    buckets: usize,
    /// The first bucket over capacity.
    first_shortfall: Option<DateTime<Utc>>,
}

impl CapacityChart {
    fn new(forecast: &CapacityForecast) -> Option<CapacityChart> {
        let cluster = forecast.groups.first()?;
        let scale_top = f64::from(cluster.peak).max(cluster.capacity as f64).max(1.0);
        let plot_height = HEIGHT - TOP - BOTTOM;
        let bottom = HEIGHT - BOTTOM;
        let slot = (WIDTH - LEFT - RIGHT) / cluster.buckets.len().max(1) as f64;
        let bars = cluster
            .buckets
            .iter()
            .enumerate()
            .map(|(i, bucket)| {
                let height = f64::from(bucket.demand) / scale_top * plot_height;
                Bar {
                    x: round(LEFT + slot * i as f64),
                    width: round(slot.max(0.5)),
                    title: format!(
                        "{}: {} runs at once{}",
                        bucket.start.format("%Y-%m-%d %H:%M UTC"),
                        bucket.demand,
                        if bucket.shortfall { ", over capacity" } else { "" }
                    ),
                    segments: vec![Segment {
                        class: if bucket.shortfall { "shortfall" } else { "demand" },
                        y: round(bottom - height),
                        height: round(height),
                    }],
                }
            })
            .collect();
        let ticks = [0.0, 0.5, 1.0]
            .into_iter()
            .map(|share| Tick {
                y: round(bottom - share * plot_height),
                label: format!("{:.0}", share * scale_top),
            })
            .collect();
        Some(CapacityChart {
            frame: FRAME,
            bars,
            ticks,
            capacity_y: round(bottom - cluster.capacity as f64 / scale_top * plot_height),
            capacity: cluster.capacity,
            executors: cluster.executors,
            peak: cluster.peak,
            shortfalls: cluster.shortfalls,
            buckets: cluster.buckets.len(),
            first_shortfall: cluster
                .buckets
                .iter()
                .find(|bucket| bucket.shortfall)
                .map(|bucket| bucket.start),
        })
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
        assert_eq!(peak[0].y + peak[0].height, chart.frame.bottom);
        assert_eq!(peak[2].y, chart.frame.top);
        assert_eq!(peak[0].height, 2.0 * peak[1].height);
        assert_eq!(chart.ticks.last().map(|t| t.label.as_str()), Some("4"));
        assert_eq!(
            (chart.totals.succeeded, chart.totals.failed, chart.totals.not_run),
            (3, 2, 1)
        );
    }

    #[test]
    fn the_capacity_chart_marks_buckets_over_capacity() {
        use probactr_common::capacity::{Bucket as Demand, Group};
        let start = Utc::now();
        let bucket = |demand, shortfall| Demand {
            start,
            demand,
            shortfall,
        };
        let forecast = CapacityForecast {
            from: start,
            until: start,
            bucket_secs: 300,
            groups: vec![Group {
                selector: None,
                jobs: vec!["nightly".into()],
                executors: 1,
                capacity: 2,
                peak: 4,
                shortfalls: 1,
                buckets: vec![bucket(1, false), bucket(4, true), bucket(0, false)],
            }],
            estimated_jobs: vec![],
            truncated: false,
        };
        let chart = CapacityChart::new(&forecast).expect("a chart of the cluster's group");
        let classes: Vec<&str> = chart.bars.iter().map(|bar| bar.segments[0].class).collect();
        assert_eq!(classes, ["demand", "shortfall", "demand"]);
        // The peak fills the plot; the capacity line sits halfway.
        assert_eq!(chart.bars[1].segments[0].y, chart.frame.top);
        assert_eq!(
            chart.capacity_y,
            round((chart.frame.top + chart.frame.bottom) / 2.0)
        );
        assert_eq!(chart.first_shortfall, Some(start));
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
