//! When a trigger fires: cron expressions with seconds in an IANA time zone, fixed
//! intervals, one-shots, and the window that bounds them all.
//!
//! Every schedule answers the same question: given an instant, which is the next one at
//! which the trigger fires? [`TriggerSchedule::next_after`] is that question, asked by an
//! executor for thousands of triggers a second, so it costs a few microseconds.
//!
//! # Cron syntax
//!
//! Six fields separated by white space, `second minute hour day-of-month month
//! day-of-week`; five fields are a crontab expression and mean second 0.
//!
//! | field        | values                          | key in errors         |
//! |--------------|---------------------------------|-----------------------|
//! | second       | 0–59                            | `cron.second`         |
//! | minute       | 0–59                            | `cron.minute`         |
//! | hour         | 0–23                            | `cron.hour`           |
//! | day of month | 1–31, `?`                       | `cron.day_of_month`   |
//! | month        | 1–12, `JAN`–`DEC`               | `cron.month`          |
//! | day of week  | 0–7 (0 and 7 = Sunday, 1 = Monday), `SUN`–`SAT`, `?` | `cron.day_of_week` |
//!
//! Each field is a comma-separated list of items; an item is `*`, a value, or a range
//! `a-b`, optionally followed by a step `/n` (`*/15`, `10-40/10`). A value with a step,
//! `a/n`, means `a-<field maximum>/n` as in Quartz. Names are case-insensitive; `SUN` at
//! the end of a range is 7, so `FRI-SUN` is Friday to Sunday. `?` alone in a day field is
//! `*`. Ranges never wrap (`SAT-MON` is an error). Nothing else is accepted: no `L`,
//! `W`, `#`, year field or `@daily` nicknames.
//!
//! **The day rule (crontab's).** A field is *restricted* when its text is anything but
//! `*` or `?` — so `*/2` counts as restricted. When both day fields are restricted, a day
//! matches if **either** matches (`0 0 0 13 * FRI`: every 13th and every Friday);
//! otherwise both must (`0 0 0 13 * *`: every 13th only).
//!
//! An expression that can never match (`0 0 0 30 2 *`) is rejected when it is parsed.
//!
//! # Time zones and daylight saving (RFC 5545)
//!
//! Matching is done on the naive local time of the trigger's zone; each matching local
//! time is then turned into an instant:
//!
//! - a local time that occurs once is that instant;
//! - a local time that does not exist (spring forward) is read with the UTC offset in
//!   force **before** the gap: in Berlin on the spring-forward day, 02:30 is read as
//!   02:30 CET = 01:30 UTC = 03:30 CEST, so a daily 02:30 job still runs that day;
//! - a local time that occurs twice (fall back) means its **first** occurrence, so a
//!   daily 01:30 job in New York runs once on the fall-back day, and an hourly job skips
//!   the repeated hour;
//! - local times that land on the same instant fire once (`0 */15 * * * *` around the
//!   gap: 02:00, read as 03:00 CEST, and the real 03:00 CEST give one firing).
//!
//! Work that must run every N minutes of real time belongs in an interval trigger.
//!
//! # Intervals, one-shots and windows
//!
//! An interval fires at `anchor + k·every` for `k ≥ 0` (the anchor is the trigger's
//! `start_at`, else its creation time); it is plain arithmetic on UTC and knows nothing
//! of zones. A one-shot fires once at its instant. A [`Window`] keeps the instants from
//! `start` to `end`, both inclusive; past `end`, nothing is left and
//! [`TriggerSchedule::next_after`] returns `None`.
//!
//! # How the cron search works (why it is shaped this way)
//!
//! croner finds the next matching *naive* local time (it is given naive times, so it sees
//! no daylight saving; its own zoned search differs from the rules above, see
//! [`CronSpec`]). Reading naive times as instants is increasing, except that a time in a
//! gap is pushed forward by the gap's length, onto the instants that the first local
//! times after the gap also map to. So the next instant after `t` is the earlier of:
//!
//! 1. walking matches forward from `t`'s local time: the first one that exists, where a
//!    match inside a gap met on the way is a candidate and the walk jumps to the gap's
//!    end, and a match in the repeated hour whose first occurrence is already past jumps
//!    to the end of the repeated hour;
//! 2. when the clock sprang forward in the last [`GAP_HORIZON`], the first match inside
//!    that gap whose pushed-forward instant is after `t` (its local time lies *before*
//!    `t`'s, so walk 1 cannot see it).
//!
//! Both cost one croner search in the common case; the binary searches that find a gap's
//! or repeated hour's edges run only on the days the clock changes. This relies on a
//! zone's offset changing at most once in any [`GAP_HORIZON`]: true of every zone in
//! chrono-tz's database from 1970 to 2040 (checked hour by hour when this was written).

use std::fmt;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::model::{Trigger, TriggerKind};

/// The longest a zone's clock has ever jumped forward is a day (Pacific/Apia skipped
/// 30 December 2011); a gap's pushed-forward instants lie at most this far after the
/// moment its clock changed.
pub const GAP_HORIZON: TimeDelta = TimeDelta::hours(26);

/// The most cron instants [`TriggerSchedule::between`] counts one by one. A cron
/// schedule has no closed form for its count, so counting is iteration (about a
/// microsecond per instant); past this many the count stops and [`Instants::capped`] is
/// set. Interval counts are exact at any size.
pub const CRON_COUNT_CAP: u64 = 100_000;

/// A schedule text or trigger column that cannot be used, naming the field at fault so an
/// API can answer with a field error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ScheduleError {
    /// The field at fault: `cron.second` … `cron.day_of_week`, `cron` (the text as a
    /// whole), `timezone`, `interval_secs`, `at`, `start_at` or `end_at`.
    pub field: String,
    /// What is wrong with it, for a person.
    pub message: String,
}

impl ScheduleError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        ScheduleError {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Cron fields
// ---------------------------------------------------------------------------------------

/// What one of the six fields accepts.
struct FieldRule {
    /// The key errors name.
    key: &'static str,
    min: u8,
    max: u8,
    /// Names of `min`, `min + 1`, …, in upper case (months and weekdays only).
    names: &'static [&'static str],
    /// Whether `?` may stand for `*` (the two day fields).
    day_field: bool,
}

const MONTH_NAMES: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAY_NAMES: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const SECOND: FieldRule = FieldRule {
    key: "cron.second",
    min: 0,
    max: 59,
    names: &[],
    day_field: false,
};
const MINUTE: FieldRule = FieldRule {
    key: "cron.minute",
    min: 0,
    max: 59,
    names: &[],
    day_field: false,
};
const HOUR: FieldRule = FieldRule {
    key: "cron.hour",
    min: 0,
    max: 23,
    names: &[],
    day_field: false,
};
const DAY_OF_MONTH: FieldRule = FieldRule {
    key: "cron.day_of_month",
    min: 1,
    max: 31,
    names: &[],
    day_field: true,
};
const MONTH: FieldRule = FieldRule {
    key: "cron.month",
    min: 1,
    max: 12,
    names: MONTH_NAMES,
    day_field: false,
};
/// 7 is accepted as a second Sunday and folded onto 0 after expansion.
const DAY_OF_WEEK: FieldRule = FieldRule {
    key: "cron.day_of_week",
    min: 0,
    max: 7,
    names: WEEKDAY_NAMES,
    day_field: true,
};

/// The values one field selects, as bits, and whether it restricts anything for the day
/// rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FieldValues {
    bits: u64,
    /// False only for a bare `*` or `?`.
    restricted: bool,
}

impl FieldValues {
    fn contains(self, value: u32) -> bool {
        value < 64 && self.bits & (1 << value) != 0
    }

    fn values(self) -> impl Iterator<Item = u32> {
        (0..64).filter(move |v| self.bits & (1u64 << v) != 0)
    }

    /// The field as croner should read it: `*` when unrestricted (so croner's own day
    /// rule sees the same stars we do), else the explicit list of values.
    fn canonical_text(self) -> String {
        if !self.restricted {
            return "*".to_owned();
        }
        let values: Vec<String> = self.values().map(|v| v.to_string()).collect();
        values.join(",")
    }
}

/// The six parsed fields of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CronFields {
    second: FieldValues,
    minute: FieldValues,
    hour: FieldValues,
    day_of_month: FieldValues,
    month: FieldValues,
    day_of_week: FieldValues,
}

impl CronFields {
    fn parse(expr: &str) -> Result<CronFields, ScheduleError> {
        let texts: Vec<&str> = expr.split_whitespace().collect();
        let texts: [&str; 6] = match texts.as_slice() {
            [min, hour, dom, month, dow] => ["0", min, hour, dom, month, dow],
            [sec, min, hour, dom, month, dow] => [sec, min, hour, dom, month, dow],
            other => {
                return Err(ScheduleError::new(
                    "cron",
                    format!("expected 5 or 6 fields, got {}", other.len()),
                ))
            }
        };
        let fields = CronFields {
            second: parse_field(texts[0], &SECOND)?,
            minute: parse_field(texts[1], &MINUTE)?,
            hour: parse_field(texts[2], &HOUR)?,
            day_of_month: parse_field(texts[3], &DAY_OF_MONTH)?,
            month: parse_field(texts[4], &MONTH)?,
            day_of_week: fold_sunday(parse_field(texts[5], &DAY_OF_WEEK)?),
        };
        fields.check_days_can_occur()?;
        Ok(fields)
    }

    /// Rejects `30 2`-style expressions: with the weekday unrestricted only the day of
    /// month decides, and if none of its days exists in any chosen month (February counts
    /// 29 days) the expression never fires.
    fn check_days_can_occur(&self) -> Result<(), ScheduleError> {
        if self.day_of_week.restricted {
            return Ok(());
        }
        let longest_month = self.month.values().map(longest_month_length).max().unwrap_or(31);
        match self.day_of_month.values().min() {
            Some(first_day) if first_day > longest_month => Err(ScheduleError::new(
                DAY_OF_MONTH.key,
                format!("day {first_day} never occurs in the chosen months"),
            )),
            _ => Ok(()),
        }
    }

    /// The expression croner parses: six numeric fields, no names, steps or ranges.
    fn canonical_text(&self) -> String {
        [
            self.second,
            self.minute,
            self.hour,
            self.day_of_month,
            self.month,
            self.day_of_week,
        ]
        .map(FieldValues::canonical_text)
        .join(" ")
    }

    /// Our own reading of the spec, independent of croner: the oracle of the tests.
    #[cfg(test)]
    fn matches(&self, local: NaiveDateTime) -> bool {
        use chrono::{Datelike, Timelike};
        let dom = self.day_of_month.contains(local.day());
        let dow = self.day_of_week.contains(local.weekday().num_days_from_sunday());
        let day = if self.day_of_month.restricted && self.day_of_week.restricted {
            dom || dow
        } else {
            dom && dow
        };
        day && self.second.contains(local.second())
            && self.minute.contains(local.minute())
            && self.hour.contains(local.hour())
            && self.month.contains(local.month())
    }
}

fn longest_month_length(month: u32) -> u32 {
    match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Weekday 7 is Sunday again; croner and the day rule want it as 0.
fn fold_sunday(mut weekdays: FieldValues) -> FieldValues {
    if weekdays.contains(7) {
        weekdays.bits = (weekdays.bits & !(1 << 7)) | 1;
    }
    weekdays
}

fn parse_field(text: &str, rule: &FieldRule) -> Result<FieldValues, ScheduleError> {
    let error = |message: String| ScheduleError::new(rule.key, message);
    if rule.day_field && text == "?" {
        return Ok(FieldValues {
            bits: range_bits(rule.min, rule.max, 1),
            restricted: false,
        });
    }
    let mut bits = 0;
    for item in text.split(',') {
        bits |= parse_item(item, rule).map_err(error)?;
    }
    Ok(FieldValues {
        bits,
        restricted: text != "*",
    })
}

/// One list item: `*`, `v`, `a-b`, each optionally with `/step`.
fn parse_item(item: &str, rule: &FieldRule) -> Result<u64, String> {
    if item.is_empty() {
        return Err("empty list item".to_owned());
    }
    let (span, step) = match item.split_once('/') {
        Some((span, step)) => (span, Some(parse_step(step, rule)?)),
        None => (item, None),
    };
    let (first, last) = if span == "*" {
        (rule.min, rule.max)
    } else if let Some((first, last)) = span.split_once('-') {
        let first = parse_value(first, rule, false)?;
        let last = parse_value(last, rule, true)?;
        if first > last {
            return Err(format!("range {span} runs backwards (ranges do not wrap)"));
        }
        (first, last)
    } else {
        let value = parse_value(span, rule, false)?;
        // `a/n` is Quartz's "from a, every n"; a bare value is just itself.
        (value, if step.is_some() { rule.max } else { value })
    };
    Ok(range_bits(first, last, step.unwrap_or(1)))
}

fn parse_step(text: &str, rule: &FieldRule) -> Result<u8, String> {
    let width = u32::from(rule.max - rule.min) + 1;
    match text.parse::<u32>() {
        Ok(step) if (1..=width).contains(&step) => Ok(step as u8),
        Ok(step) => Err(format!("step {step} must be between 1 and {width}")),
        Err(_) => Err(format!("step {text:?} is not a number")),
    }
}

/// A number or (in the month and weekday fields) a name. `SUN` closing a range is 7 so
/// that `FRI-SUN` runs forward.
fn parse_value(text: &str, rule: &FieldRule, ends_range: bool) -> Result<u8, String> {
    if text.is_empty() {
        return Err("a range needs a value on both sides of '-'".to_owned());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u32>() {
            Ok(value) if (u32::from(rule.min)..=u32::from(rule.max)).contains(&value) => Ok(value as u8),
            _ => Err(format!("{text} is out of range {}-{}", rule.min, rule.max)),
        };
    }
    let position = rule.names.iter().position(|name| name.eq_ignore_ascii_case(text));
    match position {
        Some(0) if ends_range && rule.key == DAY_OF_WEEK.key => Ok(7),
        Some(index) => Ok(rule.min + index as u8),
        None if rule.names.is_empty() => {
            Err(format!("{text:?} is not a number in {}-{}", rule.min, rule.max))
        }
        None => Err(format!(
            "{text:?} is neither a number in {}-{} nor one of {}",
            rule.min,
            rule.max,
            rule.names.join(", ")
        )),
    }
}

fn range_bits(first: u8, last: u8, step: u8) -> u64 {
    (first..=last)
        .step_by(usize::from(step.max(1)))
        .fold(0, |bits, value| bits | (1u64 << value))
}

// ---------------------------------------------------------------------------------------
// CronSpec: a parsed expression in a zone
// ---------------------------------------------------------------------------------------

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
}

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
        let fields = CronFields::parse(expr)?;
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
        })
    }

    /// The expression as given, with white space normalised to single spaces.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone local times are read in.
    pub fn timezone(&self) -> Tz {
        self.timezone
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

fn parse_timezone(name: &str) -> Result<Tz, ScheduleError> {
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

// ---------------------------------------------------------------------------------------
// Schedules, windows and the trigger-level API
// ---------------------------------------------------------------------------------------

/// How instants are generated, before the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// Matching local times of a cron expression, read with the DST rules.
    Cron(CronSpec),
    /// `anchor + k·every` for every `k ≥ 0`. A non-positive `every` has no instants.
    Interval {
        /// The spacing.
        every: TimeDelta,
        /// The first instant.
        anchor: DateTime<Utc>,
    },
    /// One instant.
    Once(DateTime<Utc>),
}

/// The span a trigger may fire in, both ends inclusive, either end open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// No instant before this one.
    pub start: Option<DateTime<Utc>>,
    /// No instant after this one.
    pub end: Option<DateTime<Utc>>,
}

impl Window {
    /// Whether `instant` is inside the window.
    pub fn contains(&self, instant: DateTime<Utc>) -> bool {
        let before_start = matches!(self.start, Some(start) if instant < start);
        let after_end = matches!(self.end, Some(end) if instant > end);
        !before_start && !after_end
    }
}

/// A schedule bounded by a window: everything a trigger needs to compute its instants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerSchedule {
    /// How instants are generated.
    pub schedule: Schedule,
    /// Which of them count.
    pub window: Window,
}

/// Instants of a span, the first few listed and all of them counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instants {
    /// The earliest instants, at most the `limit` asked for, in order.
    pub instants: Vec<DateTime<Utc>>,
    /// How many instants the span holds (a lower bound when `capped`).
    pub total: u64,
    /// True when a cron count stopped at [`CRON_COUNT_CAP`]: there are at least `total`.
    pub capped: bool,
}

impl TriggerSchedule {
    /// Builds and validates a schedule from a trigger's columns. `anchor` is used for an
    /// interval without `start_at` (pass the trigger's creation time). Each error names
    /// the column at fault: `cron`/`cron.*`, `timezone`, `interval_secs`, `at`, `end_at`.
    #[allow(clippy::too_many_arguments)] // one argument per column of `triggers`
    pub fn from_parts(
        kind: TriggerKind,
        cron: Option<&str>,
        timezone: &str,
        interval_secs: Option<i64>,
        at: Option<DateTime<Utc>>,
        start_at: Option<DateTime<Utc>>,
        end_at: Option<DateTime<Utc>>,
        anchor: DateTime<Utc>,
    ) -> Result<TriggerSchedule, ScheduleError> {
        let timezone_checked = parse_timezone(timezone)?;
        reject_unless(kind == TriggerKind::Cron, cron.is_some(), "cron", kind)?;
        reject_unless(
            kind == TriggerKind::Interval,
            interval_secs.is_some(),
            "interval_secs",
            kind,
        )?;
        reject_unless(kind == TriggerKind::Once, at.is_some(), "at", kind)?;
        if let (Some(start), Some(end)) = (start_at, end_at) {
            if end <= start {
                return Err(ScheduleError::new("end_at", "must be later than start_at"));
            }
        }
        let schedule = match kind {
            TriggerKind::Cron => {
                let text = cron.ok_or_else(|| required("cron", kind))?;
                Schedule::Cron(CronSpec::parse(text, timezone_checked.name())?)
            }
            TriggerKind::Interval => Schedule::Interval {
                every: interval_every(interval_secs.ok_or_else(|| required("interval_secs", kind))?)?,
                anchor: start_at.unwrap_or(anchor),
            },
            TriggerKind::Once => Schedule::Once(at.ok_or_else(|| required("at", kind))?),
        };
        Ok(TriggerSchedule {
            schedule,
            window: Window {
                start: start_at,
                end: end_at,
            },
        })
    }

    /// [`TriggerSchedule::from_parts`] over a `triggers` row, anchored at its creation.
    pub fn from_trigger(trigger: &Trigger) -> Result<TriggerSchedule, ScheduleError> {
        TriggerSchedule::from_parts(
            trigger.kind,
            trigger.cron.as_deref(),
            &trigger.timezone,
            trigger.interval_secs,
            trigger.at,
            trigger.start_at,
            trigger.end_at,
            trigger.created_at,
        )
    }

    /// The first instant strictly after `after`, inside the window, or `None` when none
    /// is left.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Searching from just before `start` makes `start` itself eligible.
        let search_from = match self.window.start {
            Some(start) if start > after => start.checked_sub_signed(TimeDelta::nanoseconds(1))?,
            _ => after,
        };
        if self.window.end.is_some_and(|end| search_from >= end) {
            return None;
        }
        let next = match &self.schedule {
            Schedule::Cron(spec) => spec.next_after(search_from),
            Schedule::Interval { every, anchor } => interval_next_after(*anchor, *every, search_from),
            Schedule::Once(at) => Some(*at).filter(|at| *at > search_from),
        }?;
        Some(next).filter(|next| self.window.contains(*next))
    }

    /// The first instant at or after `from`, inside the window (for a trigger being
    /// created or resumed).
    pub fn first_at_or_after(&self, from: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after(from.checked_sub_signed(TimeDelta::nanoseconds(1))?)
    }

    /// Up to `n` instants strictly after `after`, in order (the admin's preview).
    pub fn upcoming(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        std::iter::successors(self.next_after(after), |previous| self.next_after(*previous))
            .take(n)
            .collect()
    }

    /// The instants in `(after, until]` inside the window: the first `limit` of them and
    /// how many there are. Interval counts are arithmetic; cron counts iterate and stop at
    /// [`CRON_COUNT_CAP`] (see [`Instants::capped`]).
    pub fn between(&self, after: DateTime<Utc>, until: DateTime<Utc>, limit: usize) -> Instants {
        match &self.schedule {
            Schedule::Interval { every, anchor } => {
                self.interval_between(*anchor, *every, after, until, limit)
            }
            Schedule::Cron(_) | Schedule::Once(_) => self.counted_between(after, until, limit),
        }
    }

    fn counted_between(&self, after: DateTime<Utc>, until: DateTime<Utc>, limit: usize) -> Instants {
        let mut found = Instants::default();
        let mut cursor = after;
        while let Some(next) = self.next_after(cursor).filter(|next| *next <= until) {
            if found.total >= CRON_COUNT_CAP {
                found.capped = true;
                break;
            }
            if found.instants.len() < limit {
                found.instants.push(next);
            }
            found.total += 1;
            cursor = next;
        }
        found
    }

    fn interval_between(
        &self,
        anchor: DateTime<Utc>,
        every: TimeDelta,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Instants {
        let until = self.window.end.map_or(until, |end| end.min(until));
        let Some(first) = self.next_after(after).filter(|first| *first <= until) else {
            return Instants::default();
        };
        let every_nanos = nanos(every);
        let first_index = nanos(first - anchor) / every_nanos;
        let last_index = nanos(until - anchor).div_euclid(every_nanos);
        let total = u64::try_from(last_index - first_index + 1).unwrap_or(0);
        let shown = total.min(limit as u64) as i128;
        let instants = (first_index..first_index + shown)
            .map_while(|index| interval_instant(anchor, every_nanos, index))
            .collect();
        Instants {
            instants,
            total,
            capped: false,
        }
    }
}

fn required(field: &str, kind: TriggerKind) -> ScheduleError {
    ScheduleError::new(field, format!("required for a {kind} trigger"))
}

/// A column must be given exactly for its own kind of trigger.
fn reject_unless(own_kind: bool, given: bool, field: &str, kind: TriggerKind) -> Result<(), ScheduleError> {
    match (own_kind, given) {
        (true, false) => Err(required(field, kind)),
        (false, true) => Err(ScheduleError::new(
            field,
            format!("not allowed for a {kind} trigger"),
        )),
        _ => Ok(()),
    }
}

fn interval_every(secs: i64) -> Result<TimeDelta, ScheduleError> {
    if secs <= 0 {
        return Err(ScheduleError::new(
            "interval_secs",
            format!("must be a positive number of seconds, got {secs}"),
        ));
    }
    TimeDelta::try_seconds(secs)
        .ok_or_else(|| ScheduleError::new("interval_secs", format!("{secs} is too large")))
}

/// A span in nanoseconds, wide enough for any two `DateTime`s apart.
fn nanos(delta: TimeDelta) -> i128 {
    i128::from(delta.num_seconds()) * 1_000_000_000 + i128::from(delta.subsec_nanos())
}

fn interval_instant(anchor: DateTime<Utc>, every_nanos: i128, index: i128) -> Option<DateTime<Utc>> {
    let offset = every_nanos.checked_mul(index)?;
    let secs = i64::try_from(offset.div_euclid(1_000_000_000)).ok()?;
    let subsec = u32::try_from(offset.rem_euclid(1_000_000_000)).ok()?;
    anchor.checked_add_signed(TimeDelta::new(secs, subsec)?)
}

fn interval_next_after(
    anchor: DateTime<Utc>,
    every: TimeDelta,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let every_nanos = nanos(every);
    if every_nanos <= 0 {
        return None;
    }
    let elapsed = nanos(after - anchor);
    let index = if elapsed < 0 { 0 } else { elapsed / every_nanos + 1 };
    interval_instant(anchor, every_nanos, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("test instant is RFC 3339")
            .to_utc()
    }

    fn cron(expr: &str, timezone: &str) -> TriggerSchedule {
        TriggerSchedule {
            schedule: Schedule::Cron(CronSpec::parse(expr, timezone).expect("test expression parses")),
            window: Window::default(),
        }
    }

    /// The next `n` instants after `after`, as local RFC 3339 texts of the schedule's zone.
    fn next_local(schedule: &TriggerSchedule, after: &str, n: usize) -> Vec<String> {
        let zone = match &schedule.schedule {
            Schedule::Cron(spec) => spec.timezone(),
            _ => Tz::UTC,
        };
        schedule
            .upcoming(utc(after), n)
            .into_iter()
            .map(|instant| instant.with_timezone(&zone).to_rfc3339())
            .collect()
    }

    fn next_utc(schedule: &TriggerSchedule, after: &str, n: usize) -> Vec<String> {
        schedule
            .upcoming(utc(after), n)
            .into_iter()
            .map(|instant| instant.to_rfc3339())
            .collect()
    }

    fn error_of(expr: &str) -> ScheduleError {
        CronSpec::parse(expr, "UTC").expect_err("expression must be rejected")
    }

    // --- field syntax ---------------------------------------------------------------

    #[test]
    fn seconds_field_is_honoured() {
        let every_20s = cron("*/20 * * * * *", "UTC");
        assert_eq!(
            next_utc(&every_20s, "2025-01-01T10:00:05Z", 3),
            [
                "2025-01-01T10:00:20+00:00",
                "2025-01-01T10:00:40+00:00",
                "2025-01-01T10:01:00+00:00"
            ]
        );
        let at_second_7 = cron("7 0 12 * * *", "UTC");
        assert_eq!(
            next_utc(&at_second_7, "2025-01-01T00:00:00Z", 1),
            ["2025-01-01T12:00:07+00:00"]
        );
    }

    #[test]
    fn five_fields_mean_second_zero() {
        let half_hourly = cron("*/30 * * * *", "UTC");
        assert_eq!(
            next_utc(&half_hourly, "2025-01-01T10:00:00Z", 2),
            ["2025-01-01T10:30:00+00:00", "2025-01-01T11:00:00+00:00"]
        );
    }

    #[test]
    fn ranges_steps_and_lists() {
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "0 0 9-11 * * *",
                "2025-01-01T10:30:00Z",
                &["2025-01-01T11:00:00+00:00", "2025-01-02T09:00:00+00:00"],
            ),
            (
                "0 5-20/5 8 * * *",
                "2025-01-01T00:00:00Z",
                &[
                    "2025-01-01T08:05:00+00:00",
                    "2025-01-01T08:10:00+00:00",
                    "2025-01-01T08:15:00+00:00",
                    "2025-01-01T08:20:00+00:00",
                    "2025-01-02T08:05:00+00:00",
                ],
            ),
            (
                "0 10/20 8 * * *",
                "2025-01-01T00:00:00Z",
                &[
                    "2025-01-01T08:10:00+00:00",
                    "2025-01-01T08:30:00+00:00",
                    "2025-01-01T08:50:00+00:00",
                    "2025-01-02T08:10:00+00:00",
                ],
            ),
            (
                "0 0 0 1,15 * *",
                "2025-01-01T00:00:00Z",
                &["2025-01-15T00:00:00+00:00", "2025-02-01T00:00:00+00:00"],
            ),
            (
                "0 0,30 6,18 * * *",
                "2025-01-01T06:00:00Z",
                &[
                    "2025-01-01T06:30:00+00:00",
                    "2025-01-01T18:00:00+00:00",
                    "2025-01-01T18:30:00+00:00",
                    "2025-01-02T06:00:00+00:00",
                ],
            ),
            (
                "0 0 0 1 */5 *",
                "2025-01-01T00:00:00Z",
                &[
                    "2025-06-01T00:00:00+00:00",
                    "2025-11-01T00:00:00+00:00",
                    "2026-01-01T00:00:00+00:00",
                ],
            ),
        ];
        for (expr, after, expected) in cases {
            assert_eq!(
                next_utc(&cron(expr, "UTC"), after, expected.len()),
                *expected,
                "{expr}"
            );
        }
    }

    #[test]
    fn month_and_weekday_names_any_case() {
        let cases: &[(&str, &[&str])] = &[
            // 2025-01-01 is a Wednesday.
            (
                "0 0 0 1 jan,Jul *",
                &["2025-07-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00"],
            ),
            (
                "0 0 0 1 MAR-may *",
                &[
                    "2025-03-01T00:00:00+00:00",
                    "2025-04-01T00:00:00+00:00",
                    "2025-05-01T00:00:00+00:00",
                    "2026-03-01T00:00:00+00:00",
                ],
            ),
            (
                "0 0 12 * * mon-WED",
                &[
                    "2025-01-01T12:00:00+00:00",
                    "2025-01-06T12:00:00+00:00",
                    "2025-01-07T12:00:00+00:00",
                    "2025-01-08T12:00:00+00:00",
                ],
            ),
            (
                "0 0 12 * * Sat,sun",
                &[
                    "2025-01-04T12:00:00+00:00",
                    "2025-01-05T12:00:00+00:00",
                    "2025-01-11T12:00:00+00:00",
                ],
            ),
            (
                "0 0 12 * * FRI-SUN",
                &[
                    "2025-01-03T12:00:00+00:00",
                    "2025-01-04T12:00:00+00:00",
                    "2025-01-05T12:00:00+00:00",
                    "2025-01-10T12:00:00+00:00",
                ],
            ),
        ];
        for (expr, expected) in cases {
            assert_eq!(
                next_utc(&cron(expr, "UTC"), "2025-01-01T00:00:00Z", expected.len()),
                *expected,
                "{expr}"
            );
        }
    }

    #[test]
    fn weekday_zero_and_seven_are_sunday_and_one_is_monday() {
        let sundays = ["2025-01-05T00:00:00+00:00", "2025-01-12T00:00:00+00:00"];
        for expr in ["0 0 0 * * 0", "0 0 0 * * 7", "0 0 0 * * SUN", "0 0 0 * * 0,7"] {
            assert_eq!(
                next_utc(&cron(expr, "UTC"), "2025-01-01T00:00:00Z", 2),
                sundays,
                "{expr}"
            );
        }
        assert_eq!(
            next_utc(&cron("0 0 0 * * 1", "UTC"), "2025-01-01T00:00:00Z", 1),
            ["2025-01-06T00:00:00+00:00"]
        );
        assert_eq!(
            next_utc(&cron("0 0 0 * * 6-7", "UTC"), "2025-01-01T00:00:00Z", 3),
            [
                "2025-01-04T00:00:00+00:00",
                "2025-01-05T00:00:00+00:00",
                "2025-01-11T00:00:00+00:00"
            ]
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        // June 2025: Fridays 6, 13, 20, 27; 13 July is a Sunday.
        let expected = [
            "2025-06-06T00:00:00+00:00",
            "2025-06-13T00:00:00+00:00",
            "2025-06-20T00:00:00+00:00",
            "2025-06-27T00:00:00+00:00",
            "2025-07-04T00:00:00+00:00",
            "2025-07-11T00:00:00+00:00",
            "2025-07-13T00:00:00+00:00",
            "2025-07-18T00:00:00+00:00",
        ];
        assert_eq!(
            next_utc(&cron("0 0 0 13 * FRI", "UTC"), "2025-06-01T00:00:00Z", 8),
            expected
        );
        // `*/10` is restricted too: days 1, 11, 21, 31 or Mondays (2, 9, 16, 23, 30 June).
        assert_eq!(
            next_utc(&cron("0 0 0 */10 * MON", "UTC"), "2025-06-01T00:00:00Z", 6),
            [
                "2025-06-02T00:00:00+00:00",
                "2025-06-09T00:00:00+00:00",
                "2025-06-11T00:00:00+00:00",
                "2025-06-16T00:00:00+00:00",
                "2025-06-21T00:00:00+00:00",
                "2025-06-23T00:00:00+00:00",
            ]
        );
    }

    #[test]
    fn one_day_field_unrestricted_means_both() {
        let thirteenths = [
            "2025-06-13T00:00:00+00:00",
            "2025-07-13T00:00:00+00:00",
            "2025-08-13T00:00:00+00:00",
        ];
        for expr in ["0 0 0 13 * *", "0 0 0 13 * ?"] {
            assert_eq!(
                next_utc(&cron(expr, "UTC"), "2025-06-01T00:00:00Z", 3),
                thirteenths,
                "{expr}"
            );
        }
        let fridays = [
            "2025-06-06T00:00:00+00:00",
            "2025-06-13T00:00:00+00:00",
            "2025-06-20T00:00:00+00:00",
        ];
        for expr in ["0 0 0 * * FRI", "0 0 0 ? * FRI"] {
            assert_eq!(
                next_utc(&cron(expr, "UTC"), "2025-06-01T00:00:00Z", 3),
                fridays,
                "{expr}"
            );
        }
        // Both unrestricted: every day.
        assert_eq!(
            next_utc(&cron("0 0 0 ? * ?", "UTC"), "2025-06-01T00:00:00Z", 2),
            ["2025-06-02T00:00:00+00:00", "2025-06-03T00:00:00+00:00"]
        );
    }

    #[test]
    fn leap_day_only_expression_waits_for_leap_years() {
        assert_eq!(
            next_utc(&cron("0 0 0 29 FEB *", "UTC"), "2025-01-01T00:00:00Z", 2),
            ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]
        );
    }

    #[test]
    fn sub_second_start_times() {
        let every_second = cron("* * * * * *", "UTC");
        assert_eq!(
            next_utc(&every_second, "2025-01-01T10:00:00.5Z", 1),
            ["2025-01-01T10:00:01+00:00"]
        );
        assert_eq!(
            every_second.first_at_or_after(utc("2025-01-01T10:00:00Z")),
            Some(utc("2025-01-01T10:00:00Z"))
        );
        assert_eq!(
            every_second.first_at_or_after(utc("2025-01-01T10:00:00.5Z")),
            Some(utc("2025-01-01T10:00:01Z"))
        );
    }

    // --- errors -------------------------------------------------------------------

    #[test]
    fn invalid_fields_are_named() {
        let cases = [
            ("61 * * * * *", "cron.second"),
            ("*/0 * * * * *", "cron.second"),
            ("0 61 * * * *", "cron.minute"),
            ("0 1,,2 * * * *", "cron.minute"),
            ("0 0 24 * * *", "cron.hour"),
            ("0 0 5-2 * * *", "cron.hour"),
            ("0 0 0 0 * *", "cron.day_of_month"),
            ("0 0 0 32 * *", "cron.day_of_month"),
            ("0 0 0 L * *", "cron.day_of_month"),
            ("0 0 0 30 2 *", "cron.day_of_month"),
            ("0 0 0 31 APR,JUN *", "cron.day_of_month"),
            ("0 0 0 * 13 *", "cron.month"),
            ("0 0 0 * MON *", "cron.month"),
            ("0 0 0 ? * ?", "ok"),
            ("0 0 0 * * FOO", "cron.day_of_week"),
            ("* * * * * FOO", "cron.day_of_week"),
            ("0 0 0 * * 8", "cron.day_of_week"),
            ("0 0 0 * * 5#2", "cron.day_of_week"),
            ("0 0 0 * * SAT-MON", "cron.day_of_week"),
            ("0 0 0 * * JAN", "cron.day_of_week"),
            ("? * * * * *", "cron.second"),
            ("0 -5 * * * *", "cron.minute"),
            ("0 5/x * * * *", "cron.minute"),
        ];
        for (expr, field) in cases {
            match CronSpec::parse(expr, "UTC") {
                Ok(_) => assert_eq!(field, "ok", "{expr} should be rejected"),
                Err(error) => assert_eq!(error.field, field, "{expr}: {error}"),
            }
        }
        assert_eq!(error_of("0 61 * * * *").message, "61 is out of range 0-59");
    }

    #[test]
    fn wrong_field_count_is_named_cron() {
        for (expr, count) in [("* * * *", 4), ("0 0 0 1 1 * 2030", 7), ("@daily", 1), ("", 0)] {
            let error = error_of(expr);
            assert_eq!(error.field, "cron", "{expr}");
            assert_eq!(
                error.message,
                format!("expected 5 or 6 fields, got {count}"),
                "{expr}"
            );
        }
    }

    #[test]
    fn unknown_timezone_is_named() {
        let error = CronSpec::parse("0 0 0 * * *", "Mars/Olympus_Mons").expect_err("unknown zone");
        assert_eq!(error.field, "timezone");
        assert!(CronSpec::parse("0 0 0 * * *", "America/New_York").is_ok());
    }

    #[test]
    fn from_parts_validates_each_column() {
        let now = utc("2025-01-01T00:00:00Z");
        let later = utc("2025-02-01T00:00:00Z");
        let field_of =
            |result: Result<TriggerSchedule, ScheduleError>| result.expect_err("must be rejected").field;
        use TriggerKind::{Cron as C, Interval as I, Once as O};
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                I,
                None,
                "UTC",
                Some(0),
                None,
                None,
                None,
                now
            )),
            "interval_secs"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                I,
                None,
                "UTC",
                Some(-5),
                None,
                None,
                None,
                now
            )),
            "interval_secs"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                I, None, "UTC", None, None, None, None, now
            )),
            "interval_secs"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                I,
                None,
                "UTC",
                Some(i64::MAX),
                None,
                None,
                None,
                now
            )),
            "interval_secs"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                C, None, "UTC", None, None, None, None, now
            )),
            "cron"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                C,
                Some("0 61 * * * *"),
                "UTC",
                None,
                None,
                None,
                None,
                now
            )),
            "cron.minute"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                C,
                Some("* * * * *"),
                "Nowhere/Land",
                None,
                None,
                None,
                None,
                now
            )),
            "timezone"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                C,
                Some("* * * * *"),
                "UTC",
                Some(5),
                None,
                None,
                None,
                now
            )),
            "interval_secs"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                O, None, "UTC", None, None, None, None, now
            )),
            "at"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                O,
                Some("* * * * *"),
                "UTC",
                None,
                Some(now),
                None,
                None,
                now
            )),
            "cron"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                O,
                None,
                "UTC",
                None,
                Some(now),
                Some(later),
                Some(now),
                now
            )),
            "end_at"
        );
        assert_eq!(
            field_of(TriggerSchedule::from_parts(
                O,
                None,
                "UTC",
                None,
                Some(now),
                Some(now),
                Some(now),
                now
            )),
            "end_at"
        );
        assert!(
            TriggerSchedule::from_parts(O, None, "UTC", None, Some(now), Some(now), Some(later), now).is_ok()
        );
    }

    #[test]
    fn from_parts_anchors_intervals_at_start_else_at_creation() {
        let created = utc("2025-01-01T00:00:07Z");
        let start = utc("2025-01-01T00:00:30Z");
        let anchored_at_creation = TriggerSchedule::from_parts(
            TriggerKind::Interval,
            None,
            "UTC",
            Some(60),
            None,
            None,
            None,
            created,
        )
        .expect("valid interval");
        assert_eq!(
            anchored_at_creation.next_after(created),
            Some(utc("2025-01-01T00:01:07Z"))
        );
        let anchored_at_start = TriggerSchedule::from_parts(
            TriggerKind::Interval,
            None,
            "UTC",
            Some(60),
            None,
            Some(start),
            None,
            created,
        )
        .expect("valid interval");
        assert_eq!(anchored_at_start.next_after(created), Some(start));
        assert_eq!(
            anchored_at_start.next_after(start),
            Some(utc("2025-01-01T00:01:30Z"))
        );
    }

    // --- intervals, one-shots, windows ---------------------------------------------

    fn interval(every_secs: i64, anchor: &str) -> TriggerSchedule {
        TriggerSchedule {
            schedule: Schedule::Interval {
                every: TimeDelta::seconds(every_secs),
                anchor: utc(anchor),
            },
            window: Window::default(),
        }
    }

    #[test]
    fn interval_instants_are_anchor_plus_multiples_strictly_after() {
        let every_90s = interval(90, "2025-01-01T00:00:00Z");
        let cases = [
            ("2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z"),
            ("2025-01-01T00:00:00Z", "2025-01-01T00:01:30Z"),
            ("2025-01-01T00:01:29.999Z", "2025-01-01T00:01:30Z"),
            ("2025-01-01T00:01:30Z", "2025-01-01T00:03:00Z"),
            ("2025-01-02T00:00:00Z", "2025-01-02T00:01:30Z"),
        ];
        for (after, expected) in cases {
            assert_eq!(
                every_90s.next_after(utc(after)),
                Some(utc(expected)),
                "after {after}"
            );
        }
        assert_eq!(
            every_90s.first_at_or_after(utc("2025-01-01T00:01:30Z")),
            Some(utc("2025-01-01T00:01:30Z"))
        );
        let never = TriggerSchedule {
            schedule: Schedule::Interval {
                every: TimeDelta::zero(),
                anchor: utc("2025-01-01T00:00:00Z"),
            },
            window: Window::default(),
        };
        assert_eq!(never.next_after(utc("2024-01-01T00:00:00Z")), None);
    }

    #[test]
    fn once_fires_once() {
        let at = utc("2025-05-05T05:05:05Z");
        let once = TriggerSchedule {
            schedule: Schedule::Once(at),
            window: Window::default(),
        };
        assert_eq!(once.next_after(utc("2025-01-01T00:00:00Z")), Some(at));
        assert_eq!(once.next_after(at), None);
        assert_eq!(once.first_at_or_after(at), Some(at));
        assert_eq!(once.next_after(utc("2026-01-01T00:00:00Z")), None);
        assert_eq!(once.upcoming(utc("2025-01-01T00:00:00Z"), 5), vec![at]);
    }

    #[test]
    fn window_bounds_are_inclusive_and_close_the_schedule() {
        let start = utc("2025-01-10T09:00:00Z");
        let end = utc("2025-01-12T09:00:00Z");
        let mut daily = cron("0 0 9 * * *", "UTC");
        daily.window = Window {
            start: Some(start),
            end: Some(end),
        };
        assert_eq!(
            daily.next_after(utc("2025-01-01T00:00:00Z")),
            Some(start),
            "before start: start itself"
        );
        assert_eq!(daily.first_at_or_after(start), Some(start));
        assert_eq!(daily.next_after(start), Some(utc("2025-01-11T09:00:00Z")));
        assert_eq!(
            daily.next_after(utc("2025-01-11T09:00:00Z")),
            Some(end),
            "end is inclusive"
        );
        assert_eq!(daily.next_after(end), None, "nothing after end");
        assert_eq!(daily.next_after(utc("2025-03-01T00:00:00Z")), None);
        assert_eq!(daily.upcoming(utc("2025-01-01T00:00:00Z"), 10).len(), 3);

        let at = utc("2025-05-05T00:00:00Z");
        let outside = TriggerSchedule {
            schedule: Schedule::Once(at),
            window: Window {
                start: Some(utc("2025-06-01T00:00:00Z")),
                end: None,
            },
        };
        assert_eq!(
            outside.next_after(utc("2025-01-01T00:00:00Z")),
            None,
            "one-shot before start"
        );
        let closed = TriggerSchedule {
            schedule: Schedule::Once(at),
            window: Window {
                start: None,
                end: Some(at),
            },
        };
        assert_eq!(
            closed.next_after(utc("2025-01-01T00:00:00Z")),
            Some(at),
            "one-shot at end"
        );

        let mut every_minute = interval(60, "2025-01-01T00:00:30Z");
        every_minute.window = Window {
            start: Some(utc("2025-01-01T00:10:00Z")),
            end: Some(utc("2025-01-01T00:12:30Z")),
        };
        assert_eq!(
            next_utc(&every_minute, "2025-01-01T00:00:00Z", 5),
            [
                "2025-01-01T00:10:30+00:00",
                "2025-01-01T00:11:30+00:00",
                "2025-01-01T00:12:30+00:00"
            ]
        );
    }

    // --- daylight saving --------------------------------------------------------------

    #[test]
    fn berlin_spring_forward_daily_job_runs_at_0330_once() {
        // 2025-03-30: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let daily = cron("0 30 2 * * *", "Europe/Berlin");
        assert_eq!(
            next_local(&daily, "2025-03-29T12:00:00Z", 3),
            [
                "2025-03-30T03:30:00+02:00",
                "2025-03-31T02:30:00+02:00",
                "2025-04-01T02:30:00+02:00"
            ]
        );
        // Asked from after the clock change (03:10 CEST), the pushed 02:30 is still ahead.
        assert_eq!(
            next_local(&daily, "2025-03-30T01:10:00Z", 1),
            ["2025-03-30T03:30:00+02:00"]
        );
        assert_eq!(
            next_local(&daily, "2025-03-30T01:30:00Z", 1),
            ["2025-03-31T02:30:00+02:00"]
        );
    }

    #[test]
    fn berlin_spring_forward_quarter_hours_have_no_duplicates() {
        let quarter_hourly = cron("0 */15 * * * *", "Europe/Berlin");
        assert_eq!(
            next_utc(&quarter_hourly, "2025-03-30T00:30:00Z", 7),
            [
                "2025-03-30T00:45:00+00:00",
                "2025-03-30T01:00:00+00:00",
                "2025-03-30T01:15:00+00:00",
                "2025-03-30T01:30:00+00:00",
                "2025-03-30T01:45:00+00:00",
                "2025-03-30T02:00:00+00:00",
                "2025-03-30T02:15:00+00:00",
            ]
        );
        // 02:00/02:30 (pushed) and 03:00/03:30 land on the same instants: fired once each.
        let half_hours_2_and_3 = cron("0 0,30 2,3 * * *", "Europe/Berlin");
        assert_eq!(
            next_local(&half_hours_2_and_3, "2025-03-30T00:00:00Z", 3),
            [
                "2025-03-30T03:00:00+02:00",
                "2025-03-30T03:30:00+02:00",
                "2025-03-31T02:00:00+02:00"
            ]
        );
    }

    #[test]
    fn berlin_fall_back_fires_the_first_occurrence_once() {
        // 2025-10-26: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:00-02:59 happen twice.
        let daily = cron("0 30 2 * * *", "Europe/Berlin");
        assert_eq!(
            next_local(&daily, "2025-10-25T12:00:00Z", 2),
            ["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]
        );
        let hourly = cron("0 0 * * * *", "Europe/Berlin");
        assert_eq!(
            next_local(&hourly, "2025-10-25T23:00:00Z", 3),
            [
                "2025-10-26T02:00:00+02:00",
                "2025-10-26T03:00:00+01:00",
                "2025-10-26T04:00:00+01:00"
            ]
        );
    }

    #[test]
    fn new_york_spring_forward() {
        // 2025-03-09: 02:00 EST becomes 03:00 EDT (07:00 UTC).
        let daily = cron("0 30 2 * * *", "America/New_York");
        assert_eq!(
            next_local(&daily, "2025-03-08T12:00:00Z", 2),
            ["2025-03-09T03:30:00-04:00", "2025-03-10T02:30:00-04:00"]
        );
        let hourly = cron("0 0 * * * *", "America/New_York");
        assert_eq!(
            next_local(&hourly, "2025-03-09T05:30:00Z", 3),
            [
                "2025-03-09T01:00:00-05:00",
                "2025-03-09T03:00:00-04:00",
                "2025-03-09T04:00:00-04:00"
            ]
        );
        let quarter_hourly = cron("0 */15 * * * *", "America/New_York");
        let instants = quarter_hourly.upcoming(utc("2025-03-09T06:00:00Z"), 12);
        let expected: Vec<DateTime<Utc>> = (1..=12)
            .map(|k| utc("2025-03-09T06:00:00Z") + TimeDelta::minutes(15 * k))
            .collect();
        assert_eq!(instants, expected, "real quarter hours, each once");
    }

    #[test]
    fn new_york_fall_back() {
        // 2025-11-02: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:00-01:59 happen twice.
        let daily = cron("0 30 1 * * *", "America/New_York");
        assert_eq!(
            next_local(&daily, "2025-11-01T12:00:00Z", 2),
            ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"]
        );
        // From inside the second pass (01:10 EST), today's 01:30 is already done.
        assert_eq!(
            next_local(&daily, "2025-11-02T06:10:00Z", 1),
            ["2025-11-03T01:30:00-05:00"]
        );
        let hourly = cron("0 0 * * * *", "America/New_York");
        assert_eq!(
            next_local(&hourly, "2025-11-02T03:30:00Z", 4),
            [
                "2025-11-02T00:00:00-04:00",
                "2025-11-02T01:00:00-04:00",
                "2025-11-02T02:00:00-05:00",
                "2025-11-02T03:00:00-05:00",
            ]
        );
        let quarter_hourly = cron("0 */15 * * * *", "America/New_York");
        assert_eq!(
            next_local(&quarter_hourly, "2025-11-02T06:10:00Z", 1),
            ["2025-11-02T02:00:00-05:00"],
            "the repeated hour's quarters were fired in its first pass"
        );
    }

    #[test]
    fn skipped_day_in_apia_fires_once() {
        // Samoa skipped 2011-12-30 (UTC-10 to UTC+14): noon that day reads as 22:00 UTC,
        // which is also noon on the 31st (UTC+14).
        let noon = cron("0 0 12 * * *", "Pacific/Apia");
        assert_eq!(
            next_utc(&noon, "2011-12-29T12:00:00Z", 3),
            [
                "2011-12-29T22:00:00+00:00",
                "2011-12-30T22:00:00+00:00",
                "2011-12-31T22:00:00+00:00"
            ]
        );
    }

    /// Fires at `u` iff some matching local time reads as `u`: either `u`'s own local time
    /// (when `u` is its first occurrence) or a gap time read with the offset in force
    /// before the gap. A formulation of the rules independent of the search above.
    fn oracle_fires(fields: &CronFields, zone: Tz, u: DateTime<Utc>) -> bool {
        let local = u.with_timezone(&zone).naive_local();
        let first_occurrence = match zone.from_local_datetime(&local) {
            LocalResult::Ambiguous(a, b) => a.min(b).to_utc() == u,
            _ => true,
        };
        if first_occurrence && fields.matches(local) {
            return true;
        }
        let before = (u - TimeDelta::hours(25)).with_timezone(&zone);
        let as_if_before =
            u.naive_utc() + TimeDelta::seconds(i64::from(before.offset().fix().local_minus_utc()));
        matches!(zone.from_local_datetime(&as_if_before), LocalResult::None) && fields.matches(as_if_before)
    }

    #[test]
    fn search_agrees_with_a_brute_force_oracle_around_transitions() {
        let cases = [
            ("Europe/Berlin", "2025-03-29T20:00:00Z"),
            ("Europe/Berlin", "2025-10-25T20:00:00Z"),
            ("America/New_York", "2025-03-09T02:00:00Z"),
            ("America/New_York", "2025-11-02T01:00:00Z"),
            ("Australia/Lord_Howe", "2025-10-04T10:00:00Z"), // 30-minute gap
            ("Australia/Lord_Howe", "2025-04-05T10:00:00Z"), // 30-minute repeat
        ];
        let expressions = [
            "0 */15 * * * *",
            "0 30 * * * *",
            "0 0,30 2,3 * * *",
            "0 45 1,2 * * *",
            "0 10 2 * * *",
        ];
        for (zone_name, from) in cases {
            let zone: Tz = zone_name.parse().expect("zone");
            for expr in expressions {
                let fields = CronFields::parse(expr).expect("expression");
                let schedule = cron(expr, zone_name);
                let start = utc(from);
                let hours = 12;
                let expected: Vec<DateTime<Utc>> = (1..=hours * 60)
                    .map(|minute| start + TimeDelta::minutes(minute))
                    .filter(|u| oracle_fires(&fields, zone, *u))
                    .collect();
                let found = schedule.between(start, start + TimeDelta::hours(hours), 10_000);
                assert_eq!(found.instants, expected, "{expr} in {zone_name} from {from}");
                assert_eq!(found.total, expected.len() as u64);
                // Any starting point, not only the previous instant, gives the same next one.
                for minute in (0..hours * 60).step_by(7) {
                    let after = start + TimeDelta::minutes(minute) + TimeDelta::seconds(13);
                    let want = expected.iter().copied().find(|u| *u > after);
                    if want.is_some() {
                        assert_eq!(
                            schedule.next_after(after),
                            want,
                            "{expr} in {zone_name} after {after}"
                        );
                    }
                }
            }
        }
    }

    // --- between ----------------------------------------------------------------------

    #[test]
    fn between_counts_intervals_arithmetically() {
        let every_second = interval(1, "2025-01-01T00:00:00Z");
        let day = every_second.between(utc("2025-01-01T00:00:00Z"), utc("2025-01-02T00:00:00Z"), 3);
        assert_eq!(
            day.total, 86_400,
            "(after, until]: the anchor itself is excluded, the end included"
        );
        assert_eq!(
            day.instants,
            [
                utc("2025-01-01T00:00:01Z"),
                utc("2025-01-01T00:00:02Z"),
                utc("2025-01-01T00:00:03Z")
            ]
        );
        assert!(!day.capped);
        let decades = every_second.between(utc("2024-01-01T00:00:00Z"), utc("2045-01-01T00:00:00Z"), 0);
        assert_eq!(
            decades.total,
            20 * 365 * 86_400 + 5 * 86_400 + 1,
            "anchor counted when after < anchor"
        );
        let empty = every_second.between(utc("2025-01-01T00:00:00.5Z"), utc("2025-01-01T00:00:00.9Z"), 3);
        assert_eq!(empty, Instants::default());

        let mut windowed = interval(60, "2025-01-01T00:00:00Z");
        windowed.window = Window {
            start: Some(utc("2025-01-01T01:00:00Z")),
            end: Some(utc("2025-01-01T02:00:00Z")),
        };
        let clipped = windowed.between(utc("2025-01-01T00:00:00Z"), utc("2025-01-02T00:00:00Z"), 100);
        assert_eq!(clipped.total, 61);
        assert_eq!(clipped.instants.first(), Some(&utc("2025-01-01T01:00:00Z")));
        assert_eq!(clipped.instants.last(), Some(&utc("2025-01-01T02:00:00Z")));
    }

    #[test]
    fn between_counts_cron_and_caps_the_work() {
        let every_minute = cron("0 * * * * *", "UTC");
        let three_hours = every_minute.between(utc("2025-01-01T00:00:00Z"), utc("2025-01-01T03:00:00Z"), 2);
        assert_eq!(three_hours.total, 180);
        assert_eq!(
            three_hours.instants,
            [utc("2025-01-01T00:01:00Z"), utc("2025-01-01T00:02:00Z")]
        );
        assert!(!three_hours.capped);

        let every_second = cron("* * * * * *", "UTC");
        let two_days = every_second.between(utc("2025-01-01T00:00:00Z"), utc("2025-01-03T00:00:00Z"), 1);
        assert!(two_days.capped);
        assert_eq!(two_days.total, CRON_COUNT_CAP);

        let once = TriggerSchedule {
            schedule: Schedule::Once(utc("2025-01-01T12:00:00Z")),
            window: Window::default(),
        };
        assert_eq!(
            once.between(utc("2025-01-01T00:00:00Z"), utc("2025-01-01T12:00:00Z"), 5)
                .total,
            1
        );
        assert_eq!(
            once.between(utc("2025-01-01T12:00:00Z"), utc("2025-01-02T00:00:00Z"), 5)
                .total,
            0
        );
    }

    #[test]
    fn next_after_cost_printout() {
        let schedules = [
            ("0 */5 * * * *", "Europe/Berlin"),
            ("0 30 2 * * *", "America/New_York"),
            ("0 0 0 13 * FRI", "UTC"),
            ("*/10 * * * * *", "Australia/Lord_Howe"),
        ];
        for (expr, zone) in schedules {
            let schedule = cron(expr, zone);
            let calls = 20_000;
            let started = std::time::Instant::now();
            let mut after = utc("2025-01-01T00:00:00Z");
            for step in 0..calls {
                // Spread the calls over the year so DST days are included.
                after += TimeDelta::seconds(1_579 * i64::from(step % 2) + 1);
                std::hint::black_box(schedule.next_after(after));
            }
            let per_call = started.elapsed() / calls;
            println!("next_after {expr:>16} in {zone:<20}: {per_call:?} per call");
        }
    }
}
