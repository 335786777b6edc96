//! The dashboard's history over a range (the last hour, day or week): ended runs per
//! time bucket by outcome, the slowest jobs and the most failing jobs, read from `runs`.
//!
//! Ended runs are partitioned by day of `scheduled_at`, so every query bounds
//! `scheduled_at` by the range (PostgreSQL then reads only that range's partitions) and
//! names the ended states (the live partition is not read). Buckets count runs by
//! `finished_at`, when they ended.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use super::StoreError;

/// How many jobs each of the dashboard's lists shows.
pub const LISTED_JOBS: i64 = 10;

/// The span the dashboard shows, and how wide its buckets are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Range {
    /// The last hour, in 1-minute buckets.
    #[default]
    #[serde(rename = "1h")]
    Hour,
    /// The last 24 hours, in 15-minute buckets.
    #[serde(rename = "24h")]
    Day,
    /// The last 7 days, in 2-hour buckets.
    #[serde(rename = "7d")]
    Week,
}

impl Range {
    /// Every range, shortest first.
    pub const ALL: [Range; 3] = [Range::Hour, Range::Day, Range::Week];

    /// Its name in queries: `1h`, `24h` or `7d`.
    pub fn as_str(self) -> &'static str {
        match self {
            Range::Hour => "1h",
            Range::Day => "24h",
            Range::Week => "7d",
        }
    }

    /// The width of one bucket, in seconds.
    pub fn bucket_secs(self) -> i64 {
        match self {
            Range::Hour => 60,
            Range::Day => 15 * 60,
            Range::Week => 2 * 3600,
        }
    }

    /// How many buckets cover the range.
    pub fn buckets(self) -> i64 {
        match self {
            Range::Hour => 60,
            Range::Day => 96,
            Range::Week => 84,
        }
    }

    /// The whole span, in seconds.
    pub fn span_secs(self) -> i64 {
        self.bucket_secs() * self.buckets()
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A range name that is none of `1h`, `24h`, `7d`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("must be one of 1h, 24h, 7d")]
pub struct UnknownRange;

impl FromStr for Range {
    type Err = UnknownRange;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Range::ALL
            .into_iter()
            .find(|range| range.as_str() == text.trim())
            .ok_or(UnknownRange)
    }
}

/// The runs that ended within one bucket, by outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bucket {
    /// When the bucket starts (it lasts the range's `bucket_secs`).
    pub start: DateTime<Utc>,
    /// Runs that succeeded.
    pub succeeded: i64,
    /// Runs that failed, timed out or were abandoned.
    pub failed: i64,
    /// Runs that did not run: skipped, missed or cancelled.
    pub not_run: i64,
}

/// A job among the slowest: durations of its runs that ran to an end (succeeded, failed
/// or timed out) within the range.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SlowJob {
    /// The job.
    pub job_id: i64,
    /// Its name.
    pub job_name: String,
    /// Runs measured.
    pub runs: i64,
    /// Their 95th percentile duration, in milliseconds.
    pub p95_ms: i64,
    /// Their average duration, in milliseconds.
    pub avg_ms: i64,
    /// The longest, in milliseconds.
    pub max_ms: i64,
}

/// A job among the most failing within the range.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailingJob {
    /// The job.
    pub job_id: i64,
    /// Its name.
    pub job_name: String,
    /// Runs that failed, timed out or were abandoned.
    pub failures: i64,
    /// Runs that ran: those that succeeded and the failures.
    pub runs: i64,
    /// `failures / runs`, from 0 to 1.
    pub failure_ratio: f64,
}

/// The dashboard's history over a range.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dashboard {
    /// The range shown.
    pub range: Range,
    /// The width of a bucket, in seconds.
    pub bucket_secs: i64,
    /// Ended runs per bucket, oldest first; the last bucket holds now.
    pub buckets: Vec<Bucket>,
    /// The slowest jobs, by 95th percentile duration.
    pub slowest: Vec<SlowJob>,
    /// The most failing jobs, by failures then failure ratio.
    pub failing: Vec<FailingJob>,
}

/// The dashboard's history over `range`, of the jobs of the namespaces `only` (None:
/// every job).
pub async fn dashboard(
    db: impl PgExecutor<'_> + Copy,
    range: Range,
    only: Option<&[String]>,
) -> Result<Dashboard, StoreError> {
    Ok(Dashboard {
        range,
        bucket_secs: range.bucket_secs(),
        buckets: buckets(db, range, only).await?,
        slowest: slowest(db, range, only).await?,
        failing: failing(db, range, only).await?,
    })
}

/// Ended runs per bucket of `range` by outcome, every bucket listed (empty ones as 0).
/// Buckets are aligned on whole multiples of their width, the last one holding now.
pub async fn buckets(
    db: impl PgExecutor<'_>,
    range: Range,
    only: Option<&[String]>,
) -> Result<Vec<Bucket>, StoreError> {
    Ok(sqlx::query_as!(
        Bucket,
        r#"WITH bounds AS (
               SELECT make_interval(secs => $1::bigint) AS width,
                      date_bin(make_interval(secs => $1::bigint), now(), TIMESTAMPTZ '2000-01-01 00:00:00+00')
                          - make_interval(secs => $1::bigint * ($2::bigint - 1)) AS since
           ),
           counted AS (
               SELECT date_bin(bounds.width, runs.finished_at, bounds.since) AS start,
                      count(*) FILTER (WHERE runs.state = 'succeeded') AS succeeded,
                      count(*) FILTER (WHERE runs.state IN ('failed', 'timed_out', 'abandoned')) AS failed,
                      count(*) FILTER (WHERE runs.state IN ('skipped', 'missed', 'cancelled')) AS not_run
               FROM runs, bounds
               WHERE runs.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'skipped', 'missed', 'cancelled')
                 AND runs.scheduled_at >= now() - make_interval(secs => $1::bigint * $2::bigint)
                 AND runs.finished_at >= bounds.since
                 AND ($3::text[] IS NULL OR runs.job_id IN (SELECT id FROM jobs WHERE namespace = ANY($3)))
               GROUP BY 1
           )
           SELECT series.start AS "start!",
                  coalesce(counted.succeeded, 0) AS "succeeded!",
                  coalesce(counted.failed, 0) AS "failed!",
                  coalesce(counted.not_run, 0) AS "not_run!"
           FROM bounds
           CROSS JOIN generate_series(bounds.since, bounds.since + bounds.width * ($2::bigint - 1), bounds.width)
               AS series (start)
           LEFT JOIN counted ON counted.start = series.start
           ORDER BY series.start"#,
        range.bucket_secs(),
        range.buckets(),
        only,
    )
    .fetch_all(db)
    .await?)
}

/// The [`LISTED_JOBS`] jobs whose runs that ran to an end within `range` took longest at
/// the 95th percentile.
pub async fn slowest(
    db: impl PgExecutor<'_>,
    range: Range,
    only: Option<&[String]>,
) -> Result<Vec<SlowJob>, StoreError> {
    Ok(sqlx::query_as!(
        SlowJob,
        r#"WITH durations AS (
               SELECT runs.job_id, runs.finished_at - runs.started_at AS took
               FROM runs
               WHERE runs.state IN ('succeeded', 'failed', 'timed_out')
                 AND runs.scheduled_at >= now() - make_interval(secs => $1::bigint)
                 AND runs.finished_at >= now() - make_interval(secs => $1::bigint)
                 AND runs.started_at IS NOT NULL
           )
           SELECT durations.job_id, jobs.name AS job_name, count(*) AS "runs!",
                  (extract(epoch FROM percentile_cont(0.95) WITHIN GROUP (ORDER BY durations.took)) * 1000)::bigint
                      AS "p95_ms!",
                  (extract(epoch FROM avg(durations.took)) * 1000)::bigint AS "avg_ms!",
                  (extract(epoch FROM max(durations.took)) * 1000)::bigint AS "max_ms!"
           FROM durations JOIN jobs ON jobs.id = durations.job_id
           WHERE $3::text[] IS NULL OR jobs.namespace = ANY($3)
           GROUP BY durations.job_id, jobs.name
           ORDER BY 4 DESC, 5 DESC, jobs.name
           LIMIT $2"#,
        range.span_secs(),
        LISTED_JOBS,
        only,
    )
    .fetch_all(db)
    .await?)
}

/// The [`LISTED_JOBS`] jobs with the most failures within `range`, then the highest
/// failure ratio; jobs without failures are not listed.
pub async fn failing(
    db: impl PgExecutor<'_>,
    range: Range,
    only: Option<&[String]>,
) -> Result<Vec<FailingJob>, StoreError> {
    let rows = sqlx::query!(
        r#"SELECT runs.job_id, jobs.name AS job_name,
                  count(*) FILTER (WHERE runs.state <> 'succeeded') AS "failures!",
                  count(*) AS "runs!"
           FROM runs JOIN jobs ON jobs.id = runs.job_id
           WHERE runs.state IN ('succeeded', 'failed', 'timed_out', 'abandoned')
             AND runs.scheduled_at >= now() - make_interval(secs => $1::bigint)
             AND runs.finished_at >= now() - make_interval(secs => $1::bigint)
             AND ($3::text[] IS NULL OR jobs.namespace = ANY($3))
           GROUP BY runs.job_id, jobs.name
           HAVING count(*) FILTER (WHERE runs.state <> 'succeeded') > 0
           ORDER BY 3 DESC, count(*) FILTER (WHERE runs.state <> 'succeeded')::float8 / count(*) DESC, jobs.name
           LIMIT $2"#,
        range.span_secs(),
        LISTED_JOBS,
        only,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| FailingJob {
            failure_ratio: row.failures as f64 / row.runs.max(1) as f64,
            job_id: row.job_id,
            job_name: row.job_name,
            failures: row.failures,
            runs: row.runs,
        })
        .collect())
}

/// The parts of the cluster summary (`store::cluster::status`) that name runs and jobs,
/// read for the jobs of the namespaces `only`: what a caller who does not see every
/// namespace gets in their place.
#[derive(Debug, Clone, Default)]
pub struct Scoped {
    /// Runs queued in the last hour, by state.
    pub runs_last_hour: std::collections::BTreeMap<String, i64>,
    /// The latest failures.
    pub recent_failures: Vec<super::cluster::RecentFailure>,
    /// The next instants to fire.
    pub next_fires: Vec<super::cluster::NextFire>,
}

/// [`Scoped`] for the jobs of the namespaces `only`.
pub async fn scoped(db: impl PgExecutor<'_> + Copy, only: &[String]) -> Result<Scoped, StoreError> {
    let runs_last_hour = sqlx::query!(
        r#"SELECT runs.state, count(*) AS "count!" FROM runs JOIN jobs ON jobs.id = runs.job_id
           WHERE runs.queued_at > now() - interval '1 hour' AND jobs.namespace = ANY($1)
           GROUP BY runs.state"#,
        only
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| (row.state, row.count))
    .collect();
    let recent_failures = sqlx::query_as!(
        super::cluster::RecentFailure,
        "SELECT runs.id AS run_id, runs.job_id, jobs.name AS job_name, runs.state, runs.finished_at, runs.error
         FROM runs JOIN jobs ON jobs.id = runs.job_id
         WHERE runs.state IN ('failed', 'timed_out', 'abandoned') AND jobs.namespace = ANY($1)
         ORDER BY runs.id DESC LIMIT 10",
        only
    )
    .fetch_all(db)
    .await?;
    let next_fires = sqlx::query_as!(
        super::cluster::NextFire,
        r#"SELECT triggers.id AS trigger_id, triggers.job_id, jobs.name AS job_name,
                  triggers.next_fire_at AS "next_fire_at!"
           FROM triggers JOIN jobs ON jobs.id = triggers.job_id
           WHERE NOT triggers.paused AND NOT jobs.paused AND triggers.next_fire_at IS NOT NULL
             AND jobs.namespace = ANY($1)
           ORDER BY triggers.next_fire_at LIMIT 10"#,
        only
    )
    .fetch_all(db)
    .await?;
    Ok(Scoped {
        runs_last_hour,
        recent_failures,
        next_fires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_by_name_and_cover_their_span() {
        for range in Range::ALL {
            assert_eq!(range.as_str().parse::<Range>().ok(), Some(range));
        }
        assert_eq!(Range::Hour.span_secs(), 3600);
        assert_eq!(Range::Day.span_secs(), 24 * 3600);
        assert_eq!(Range::Week.span_secs(), 7 * 24 * 3600);
        assert!("2h".parse::<Range>().is_err());
        assert_eq!(
            "".parse::<Range>().err().map(|err| err.to_string()).as_deref(),
            Some("must be one of 1h, 24h, 7d")
        );
    }
}
