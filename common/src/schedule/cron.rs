//! A parsed cron expression in a zone, and the search for its next instant under the
//! daylight-saving rules of the module above.

use std::fmt;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use super::fields::CronFields;
use super::{ScheduleError, GAP_HORIZON};

/// A parsed cron expression and the IANA zone its local times are read in.
///
/// Matching is delegated to croner, but croner only ever sees a canonical numeric
/// expression of our own making and naive local times, because, given the user's text
/// and zoned times, croner 4 differs from the spec:
///
/// - it replaces month and weekday names anywhere in the text (`MON` in the month field
///   becomes 1) and accepts `L`, `W`, `#`, `+`, a year field and `@nicknames`; parsing
///   each field ourselves gives field-naming errors and exactly the spec's syntax;
/// - it rejects `a/n` steps unless in "sloppy" mode;
/// - in a spring-forward gap it moves a fixed-time job to the first instant after the
///   gap (03:00, not 03:30) and skips other jobs' gap times;
/// - in a repeated hour it fires interval-like jobs (`0 30 * * * *`) at both occurrences.
///
/// Its day rule (OR when both day fields are restricted, judged by the field text being
/// exactly `*`) agrees with the spec once `?` is turned into `*`, which we do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSpec {
    expression: String,
    timezone: Tz,
    /// Boxed: croner's pattern is a few hundred bytes, and `Schedule` is moved around.
    matcher: Box<Cron>,
    /// The fields, when days are picked by the month's shape (`L`, `W`, `#`): croner is
    /// then given every day and these judge each day it finds.
    month_days: Option<CronFields>,
    /// What fixed the `H` items (None: the expression was read without one).
    seed: Option<u64>,
}

/// How many days in a row a search skips for not matching the days picked by the month's
/// shape before it gives up: more than any gap between two such days of chosen months
/// (parsing rejects expressions whose days never occur).
const MONTH_DAYS_SKIP_LIMIT: u32 = 3 * 366;

/// Where a croner search starts.
#[derive(Debug, Clone, Copy)]
enum SearchStart {
    After(NaiveDateTime),
    AtOrAfter(NaiveDateTime),
}

/// How the zone reads one naive local time.
#[derive(Debug, Clone, Copy)]
enum Reading {
    /// It occurs once.
    Once(DateTime<Utc>),
    /// It occurs twice (fall back); the first occurrence is the one that counts.
    Twice {
        first: DateTime<Utc>,
        later: DateTime<Utc>,
    },
    /// It falls in a gap (spring forward), read with the offset in force before it.
    Gap {
        instant: DateTime<Utc>,
        offset_before: i64,
    },
}

impl CronSpec {
    /// Parses a 5- or 6-field expression (see the module doc) in the IANA zone named by
    /// `timezone` (e.g. `Europe/Berlin`, `UTC`).
    pub fn parse(expr: &str, timezone: &str) -> Result<CronSpec, ScheduleError> {
        CronSpec::parse_seeded(expr, timezone, None)
    }

    /// [`CronSpec::parse`] for a trigger, whose `H` items take the values `seed` (see
    /// [`super::hash_seed`]) fixes; without a seed an `H` is refused.
    pub fn parse_seeded(expr: &str, timezone: &str, seed: Option<u64>) -> Result<CronSpec, ScheduleError> {
        let fields = CronFields::parse(expr, seed)?;
        let timezone = parse_timezone(timezone)?;
        let matcher = CronParser::builder()
            .seconds(Seconds::Required)
            .build()
            .parse(&fields.canonical_text())
            .map_err(|error| ScheduleError::new("cron", error.to_string()))?;
        Ok(CronSpec {
            expression: expr.split_whitespace().collect::<Vec<_>>().join(" "),
            timezone,
            matcher: Box::new(matcher),
            month_days: fields.has_month_days().then_some(fields),
            seed,
        })
    }

    /// The expression as given, with white space normalised to single spaces.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The expression with its `H` items replaced by the values they take (for previews
    /// and the forecast); None when it holds no `H`.
    pub fn resolved_expression(&self) -> Option<String> {
        super::resolved_cron(&self.expression, self.seed?).ok().flatten()
    }

    /// The zone local times are read in.
    pub fn timezone(&self) -> Tz {
        self.timezone
    }

    /// Whether the naive local time `local` of the zone matches the expression (an
    /// instant whose local time does not was pushed there from a DST gap).
    pub fn matches_local(&self, local: NaiveDateTime) -> bool {
        self.next_match(SearchStart::AtOrAfter(local)) == Some(local)
    }

    /// The first instant strictly after `t` (see the module doc for the search).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        earliest(self.pushed_gap_instant_after(t), self.walk_forward_after(t))
    }

    /// Walk 1 of the module doc: matches after `t`'s local time.
    fn walk_forward_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut from = SearchStart::After(t.with_timezone(&self.timezone).naive_local());
        let mut gap_candidate = None;
        loop {
            let Some(local) = self.next_match(from) else {
                return gap_candidate;
            };
            match self.read(local) {
                Reading::Once(instant) | Reading::Twice { first: instant, .. } if instant > t => {
                    return earliest(gap_candidate, Some(instant));
                }
                Reading::Twice { first, later } => {
                    // `t` is in the second pass of a repeated hour: every first occurrence
                    // left in it is already past.
                    from = SearchStart::AtOrAfter(self.end_of_repeat(local, first, later)?);
                }
                Reading::Once(_) => {
                    // Cannot happen (local times after `t`'s exist after `t`); stepping on
                    // keeps the loop making progress regardless.
                    from = SearchStart::After(local);
                }
                Reading::Gap {
                    instant,
                    offset_before,
                } => {
                    // Later gap times map later, so the first one seen is the candidate;
                    // what follows the gap may still map earlier, so keep walking.
                    if instant > t && gap_candidate.is_none() {
                        gap_candidate = Some(instant);
                    }
                    from = SearchStart::AtOrAfter(self.end_of_gap(local, offset_before)?);
                }
            }
        }
    }

    /// Walk 2 of the module doc: when the clock sprang forward within [`GAP_HORIZON`]
    /// before `t`, gap times whose pushed-forward instant is still after `t`.
    fn pushed_gap_instant_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let offset_now = self.offset_at(t);
        let offset_before = self.offset_at(t.checked_sub_signed(GAP_HORIZON)?);
        if offset_before >= offset_now {
            return None;
        }
        // A gap time g reads as g - offset_before, which is after `t` when g is after this.
        let threshold = t
            .naive_utc()
            .checked_add_signed(TimeDelta::seconds(offset_before))?;
        match self.read(self.next_match(SearchStart::After(threshold))?) {
            Reading::Gap { instant, .. } if instant > t => Some(instant),
            _ => None,
        }
    }

    fn next_match(&self, from: SearchStart) -> Option<NaiveDateTime> {
        let mut found = self.croner_next(from)?;
        let Some(fields) = &self.month_days else {
            return Some(found);
        };
        for _ in 0..MONTH_DAYS_SKIP_LIMIT {
            if fields.day_matches(found.date()) {
                return Some(found);
            }
            let next_day = found.date().succ_opt()?.and_hms_opt(0, 0, 0)?;
            found = self.croner_next(SearchStart::AtOrAfter(next_day))?;
        }
        None
    }

    fn croner_next(&self, from: SearchStart) -> Option<NaiveDateTime> {
        let found = match from {
            SearchStart::After(local) => self.matcher.find_next_occurrence(&local, false),
            SearchStart::AtOrAfter(local) => self.matcher.find_next_occurrence(&local, true),
        };
        // croner gives up past the year 5000; no instant is left then.
        found.ok()
    }

    fn read(&self, local: NaiveDateTime) -> Reading {
        match self.timezone.from_local_datetime(&local) {
            LocalResult::Single(instant) => Reading::Once(instant.to_utc()),
            LocalResult::Ambiguous(a, b) => Reading::Twice {
                first: a.to_utc().min(b.to_utc()),
                later: a.to_utc().max(b.to_utc()),
            },
            LocalResult::None => {
                let offset_before = self.offset_before_gap(local);
                let instant = (local - TimeDelta::seconds(offset_before)).and_utc();
                Reading::Gap {
                    instant,
                    offset_before,
                }
            }
        }
    }

    fn offset_at(&self, instant: DateTime<Utc>) -> i64 {
        i64::from(
            self.timezone
                .offset_from_utc_datetime(&instant.naive_utc())
                .fix()
                .local_minus_utc(),
        )
    }

    /// The offset of the last local time before the gap `local` is in, found by stepping
    /// back an hour at a time (a gap is an hour long almost everywhere, a day at most).
    fn offset_before_gap(&self, local: NaiveDateTime) -> i64 {
        for hours_back in 1..=GAP_HORIZON.num_hours() {
            let Some(probe) = local.checked_sub_signed(TimeDelta::hours(hours_back)) else {
                break;
            };
            match self.timezone.from_local_datetime(&probe) {
                LocalResult::Single(instant) => return self.offset_at(instant.to_utc()),
                LocalResult::Ambiguous(_, later) => return self.offset_at(later.to_utc()),
                LocalResult::None => continue,
            }
        }
        // No real zone gets here; reading with the offset a horizon earlier is the best
        // remaining guess and keeps the instant finite.
        self.offset_at((local - GAP_HORIZON).and_utc())
    }

    /// The first local time after the gap that `local` (read with `offset_before`) is in.
    fn end_of_gap(&self, local: NaiveDateTime, offset_before: i64) -> Option<NaiveDateTime> {
        let offset_after = self.offset_at(
            local
                .checked_sub_signed(TimeDelta::seconds(offset_before))?
                .and_utc(),
        );
        let gap_length = offset_after - offset_before;
        first_second_where(local, gap_length, |probe| {
            !matches!(self.timezone.from_local_datetime(&probe), LocalResult::None)
        })
    }

    /// The first local time after the repeated range that `local` is in.
    fn end_of_repeat(
        &self,
        local: NaiveDateTime,
        first: DateTime<Utc>,
        later: DateTime<Utc>,
    ) -> Option<NaiveDateTime> {
        let repeat_length = (later - first).num_seconds();
        first_second_where(local, repeat_length, |probe| {
            !matches!(
                self.timezone.from_local_datetime(&probe),
                LocalResult::Ambiguous(..)
            )
        })
    }
}

impl fmt::Display for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.expression, self.timezone.name())
    }
}

pub(super) fn parse_timezone(name: &str) -> Result<Tz, ScheduleError> {
    name.parse::<Tz>().map_err(|_| {
        ScheduleError::new(
            "timezone",
            format!("{name:?} is not an IANA time zone name (like Europe/Berlin or UTC)"),
        )
    })
}

/// The smallest `base + k s`, `1 ≤ k ≤ span`, at which `holds` is true, by bisection:
/// `holds` must be false at `base`, true at `base + span`, and flip once in between.
fn first_second_where(
    base: NaiveDateTime,
    span: i64,
    holds: impl Fn(NaiveDateTime) -> bool,
) -> Option<NaiveDateTime> {
    let at = |k: i64| base.checked_add_signed(TimeDelta::seconds(k));
    let (mut false_at, mut true_at) = (0, span.max(1));
    while true_at - false_at > 1 {
        let middle = false_at + (true_at - false_at) / 2;
        if at(middle).is_some_and(&holds) {
            true_at = middle;
        } else {
            false_at = middle;
        }
    }
    at(true_at)
}

fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
