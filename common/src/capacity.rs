//! The capacity forecast: how many runs will be running in each 5-minute bucket of the
//! coming hours, against the capacity of the live executors that may run them.
//!
//! Demand is each upcoming instant of an unpaused trigger held for its job's typical
//! duration (the 90th percentile of its recent runs); a bucket's demand is the most runs
//! running at once within it. Jobs are grouped by the executor labels they need: a group's
//! capacity is the capacity of the live, uncordoned executors carrying those labels, and
//! the first group weighs every job against every such executor. Only the jobs the caller
//! sees are counted (a cluster admin sees the whole cluster).

use std::collections::BTreeMap;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::labels::{self, Labels};
use crate::model::{ProcessRole, ProcessState};
use crate::schedule::TriggerSchedule;
use crate::store::{self, jobs::Demand, StoreError};

/// The width of a bucket.
pub const BUCKET_SECS: i64 = 300;
/// The longest span a forecast covers.
pub const MAX_HOURS: i64 = 168;
/// Instants weighed at most (a trigger firing every second for a week is 604,800).
const MAX_INSTANTS: usize = 2_000_000;
/// The history a job's typical duration is taken from.
const HISTORY_SECS: i64 = 7 * 86_400;
/// The duration assumed for a job without history.
const UNKNOWN_DURATION_SECS: f64 = 60.0;

/// One bucket of one group.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bucket {
    /// Its start (it lasts `bucket_secs`).
    pub start: DateTime<Utc>,
    /// The most runs running at once within it.
    pub demand: u32,
    /// Whether the demand exceeds the group's capacity.
    pub shortfall: bool,
}

/// Jobs needing the same executor labels, and the executors that have them.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Group {
    /// The labels the jobs need (null: the whole cluster, every job counted; `{}`: jobs
    /// that run anywhere).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub selector: Option<Labels>,
    /// The jobs, by name.
    pub jobs: Vec<String>,
    /// Live, uncordoned executors carrying the labels.
    pub executors: usize,
    /// Their capacity (runs at once).
    pub capacity: i64,
    /// The highest demand of any bucket.
    pub peak: u32,
    /// Buckets whose demand exceeds the capacity.
    pub shortfalls: usize,
    /// Every bucket of the span, in order.
    pub buckets: Vec<Bucket>,
}

/// The forecast.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CapacityForecast {
    /// The first bucket's start (now, rounded down to a bucket).
    pub from: DateTime<Utc>,
    /// The end of the last bucket.
    pub until: DateTime<Utc>,
    /// The width of a bucket.
    pub bucket_secs: i64,
    /// The whole cluster first, then one group per set of labels jobs need.
    pub groups: Vec<Group>,
    /// Jobs without recent runs to learn a duration from: assumed to take 60 s.
    pub estimated_jobs: Vec<String>,
    /// True when more instants fell in the span than were weighed.
    pub truncated: bool,
}

/// The start of the bucket holding `at`.
pub fn bucket_start(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::seconds(BUCKET_SECS)).unwrap_or(at)
}

/// A bucket whose demand exceeds the capacity of the executors that may run it.
#[derive(Debug, Clone, Serialize)]
pub struct Shortfall {
    /// The labels the jobs need (`None`: the whole cluster).
    pub selector: Option<Labels>,
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// The most runs running at once within it.
    pub demand: u32,
    /// The capacity of the executors that may run them.
    pub capacity: i64,
    /// The jobs of the group.
    pub jobs: Vec<String>,
}

impl CapacityForecast {
    /// The earliest bucket, starting before `before`, whose demand exceeds its group's
    /// capacity (the whole cluster's group wins a tie: it is listed first).
    pub fn first_shortfall(&self, before: DateTime<Utc>) -> Option<Shortfall> {
        self.groups
            .iter()
            .filter_map(|group| {
                group
                    .buckets
                    .iter()
                    .find(|bucket| bucket.shortfall && bucket.start < before)
                    .map(|bucket| (group, bucket))
            })
            .min_by_key(|(_, bucket)| bucket.start)
            .map(|(group, bucket)| Shortfall {
                selector: group.selector.clone(),
                start: bucket.start,
                demand: bucket.demand,
                capacity: group.capacity,
                jobs: group.jobs.clone(),
            })
    }
}

/// The forecast of the `hours` hours from `from` (a bucket's start) for the jobs of the
/// namespaces in `only` (every job when `None`). `hours` is clamped to 1..=[`MAX_HOURS`].
pub async fn forecast(
    pool: &PgPool,
    only: Option<&[String]>,
    from: DateTime<Utc>,
    hours: i64,
) -> Result<CapacityForecast, StoreError> {
    let until = from + TimeDelta::hours(hours.clamp(1, MAX_HOURS));
    let jobs: BTreeMap<i64, Demand> = store::jobs::demand(pool, only, HISTORY_SECS)
        .await?
        .into_iter()
        .map(|job| (job.id, job))
        .collect();
    let longest = jobs
        .values()
        .filter_map(|job| job.p90_secs)
        .fold(UNKNOWN_DURATION_SECS, f64::max);
    // Runs fired before `from` may still be running in the first buckets.
    let look_back = TimeDelta::milliseconds((longest * 1000.0) as i64);
    let (runs, truncated) = upcoming_runs(pool, &jobs, from - look_back, until).await?;
    let executors = live_executors(pool).await?;

    let spans: Vec<(Option<Labels>, Vec<i64>)> = groups(&jobs);
    let groups = spans
        .into_iter()
        .map(|(selector, members)| group(selector, &members, &jobs, &runs, &executors, from, until))
        .collect();
    let estimated_jobs = jobs
        .values()
        .filter(|job| job.p90_secs.is_none() && runs.contains_key(&job.id))
        .map(|job| job.name.clone())
        .collect();
    Ok(CapacityForecast {
        from,
        until,
        bucket_secs: BUCKET_SECS,
        groups,
        estimated_jobs,
        truncated,
    })
}

/// Each job's runs in `[from, until)`: (start, end) in seconds since the epoch.
async fn upcoming_runs(
    pool: &PgPool,
    jobs: &BTreeMap<i64, Demand>,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<(BTreeMap<i64, Vec<(i64, i64)>>, bool), StoreError> {
    let mut runs: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    let mut weighed = 0usize;
    let mut truncated = false;
    for watched in store::triggers::watched(pool).await? {
        let trigger = watched.trigger;
        let Some(job) = jobs.get(&trigger.job_id) else {
            continue;
        };
        let Ok(schedule) = TriggerSchedule::from_trigger(&trigger) else {
            continue;
        };
        let room = MAX_INSTANTS.saturating_sub(weighed);
        let found = schedule.between(
            from - TimeDelta::nanoseconds(1),
            until - TimeDelta::nanoseconds(1),
            room,
        );
        truncated |= found.total > found.instants.len() as u64;
        weighed += found.instants.len();
        let took = job.p90_secs.unwrap_or(UNKNOWN_DURATION_SECS).max(1.0).ceil() as i64;
        runs.entry(job.id).or_default().extend(
            found
                .instants
                .iter()
                .map(|instant| (instant.timestamp(), instant.timestamp() + took)),
        );
    }
    Ok((runs, truncated))
}

/// The executors that take work: alive, not cordoned, not draining.
async fn live_executors(pool: &PgPool) -> Result<Vec<(Labels, i64)>, StoreError> {
    Ok(store::processes::list(pool, ProcessRole::Executor)
        .await?
        .into_iter()
        .filter(|process| {
            process.state == ProcessState::Alive && !process.cordoned && !process.drain_requested
        })
        .map(|process| (labels::from_json(&process.labels), i64::from(process.capacity)))
        .collect())
}

/// The whole cluster (every job), then the jobs grouped by the labels they need.
fn groups(jobs: &BTreeMap<i64, Demand>) -> Vec<(Option<Labels>, Vec<i64>)> {
    let mut by_selector: BTreeMap<Labels, Vec<i64>> = BTreeMap::new();
    for job in jobs.values() {
        by_selector
            .entry(labels::from_json(&job.selector))
            .or_default()
            .push(job.id);
    }
    let mut groups = vec![(None, jobs.keys().copied().collect())];
    groups.extend(
        by_selector
            .into_iter()
            .map(|(selector, ids)| (Some(selector), ids)),
    );
    groups
}

fn group(
    selector: Option<Labels>,
    members: &[i64],
    jobs: &BTreeMap<i64, Demand>,
    runs: &BTreeMap<i64, Vec<(i64, i64)>>,
    executors: &[(Labels, i64)],
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Group {
    let serving: Vec<i64> = executors
        .iter()
        .filter(|(carried, _)| {
            selector
                .as_ref()
                .is_none_or(|needed| labels::matches(needed, carried))
        })
        .map(|(_, capacity)| *capacity)
        .collect();
    let capacity: i64 = serving.iter().sum();
    let spans: Vec<(i64, i64)> = members
        .iter()
        .filter_map(|id| runs.get(id))
        .flatten()
        .copied()
        .collect();
    let peaks = peak_per_bucket(
        &spans,
        from.timestamp(),
        BUCKET_SECS,
        (until - from).num_seconds() / BUCKET_SECS,
    );
    let buckets: Vec<Bucket> = peaks
        .iter()
        .enumerate()
        .map(|(at, demand)| Bucket {
            start: from + TimeDelta::seconds(at as i64 * BUCKET_SECS),
            demand: *demand,
            shortfall: i64::from(*demand) > capacity,
        })
        .collect();
    Group {
        selector,
        jobs: members
            .iter()
            .filter(|id| runs.contains_key(id))
            .filter_map(|id| jobs.get(id).map(|job| job.name.clone()))
            .collect(),
        executors: serving.len(),
        capacity,
        peak: peaks.iter().copied().max().unwrap_or(0),
        shortfalls: buckets.iter().filter(|bucket| bucket.shortfall).count(),
        buckets,
    }
}

/// The most spans (`[start, end)`, seconds) open at once within each of `count` buckets
/// of `width` seconds from `from`.
fn peak_per_bucket(spans: &[(i64, i64)], from: i64, width: i64, count: i64) -> Vec<u32> {
    // An end sorts before a start at the same second: a run ending as another starts does
    // not overlap it.
    let mut events: Vec<(i64, i32)> = spans
        .iter()
        .flat_map(|(start, end)| [(*start, 1), (*end, -1)])
        .collect();
    events.sort_unstable();
    let mut open = 0i64;
    let mut next = 0;
    let mut peaks = Vec::with_capacity(count.max(0) as usize);
    for bucket in 0..count {
        let start = from + bucket * width;
        let end = start + width;
        while next < events.len() && events[next].0 <= start {
            open += i64::from(events[next].1);
            next += 1;
        }
        let mut peak = open;
        while next < events.len() && events[next].0 < end {
            open += i64::from(events[next].1);
            peak = peak.max(open);
            next += 1;
        }
        peaks.push(peak.max(0) as u32);
    }
    peaks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_holds_the_most_runs_open_at_once() {
        // Two runs overlap in the first bucket; one spans the second wholly; none the third.
        let spans = [(0, 100), (50, 400), (400, 450)];
        assert_eq!(peak_per_bucket(&spans, 0, 300, 3), vec![2, 1, 0]);
        // A run ending as another starts does not overlap it.
        assert_eq!(peak_per_bucket(&[(0, 10), (10, 20)], 0, 300, 1), vec![1]);
        // A run started before the span is counted where it is still running.
        assert_eq!(peak_per_bucket(&[(-100, 350)], 0, 300, 2), vec![1, 1]);
    }
}
