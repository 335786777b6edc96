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
//! | day of month | 1–31, `?`, `L`, `L-n`, `nW`, `LW` | `cron.day_of_month` |
//! | month        | 1–12, `JAN`–`DEC`               | `cron.month`          |
//! | day of week  | 0–7 (0 and 7 = Sunday, 1 = Monday), `SUN`–`SAT`, `?`, `d#k`, `d#L`, `dL` | `cron.day_of_week` |
//!
//! Each field is a comma-separated list of items; an item is `*`, a value, or a range
//! `a-b`, optionally followed by a step `/n` (`*/15`, `10-40/10`). A value with a step,
//! `a/n`, means `a-<field maximum>/n` as in Quartz. Names are case-insensitive; `SUN` at
//! the end of a range is 7, so `FRI-SUN` is Friday to Sunday. `?` alone in a day field is
//! `*`. Ranges never wrap (`SAT-MON` is an error).
//!
//! **Days by the month's shape (Quartz's meaning).** In the day of month, `L` is the
//! month's last day and `L-n` the `n`th day before it (`L-1` is the day before the
//! last); `nW` is the weekday (Monday to Friday) nearest day `n` without leaving the
//! month (a Saturday the 1st gives Monday the 3rd; a Sunday the last day, the Friday
//! before; none in a month without day `n`); `LW` is the month's last weekday. In the day
//! of week, `d#k` is the `k`th `d` of the month (`MON#2`, `1#2`: the second Monday; `k`
//! from 1 to 5), and `d#L` or `dL` the last (`FRI#L`, `5L`: the last Friday). They mix
//! with the other items of their field (`1,15,L`) and count as restricted for the day
//! rule; they are read in the trigger's zone like every field.
//!
//! **Hashed values.** `H`, `H(a-b)`, `H/n` and `H(a-b)/n` in any field take a value fixed
//! per trigger by a seed, its job's id (see [`hash_seed`] and the `hashed` module).
//!
//! **Nicknames.** `@yearly` (or `@annually`) is `0 0 0 1 1 *`, `@monthly` `0 0 0 1 * *`,
//! `@weekly` `0 0 0 * * 0`, `@daily` (or `@midnight`) `0 0 0 * * *`, `@hourly`
//! `0 0 * * * *`. No year field is accepted.
//!
//! **The day rule (crontab's).** A field is *restricted* when its text is anything but
//! `*` or `?` — so `*/2` counts as restricted. When both day fields are restricted, a day
//! matches if **either** matches (`0 0 0 13 * FRI`: every 13th and every Friday);
//! otherwise both must (`0 0 0 13 * *`: every 13th only).
//!
//! An expression that can never match (`0 0 0 30 2 *`, `0 0 0 30W 2 ?`) is rejected when it
//! is parsed.
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

use chrono::{DateTime, TimeDelta, Utc};

use crate::model::{Trigger, TriggerKind};

mod cron;
mod fields;
mod hashed;
#[cfg(test)]
mod tests;

use cron::parse_timezone;
pub use cron::CronSpec;

/// The expression a trigger with `H` items actually follows (`H H * * *` for job 42
/// reads, say, `0 17 3 * * *`), for previews; None when `expr` holds no `H`.
pub fn resolved_cron(expr: &str, seed: u64) -> Result<Option<String>, ScheduleError> {
    let given = fields::CronFields::texts(expr, None);
    if given.is_ok() {
        return Ok(None);
    }
    Ok(Some(fields::CronFields::texts(expr, Some(seed))?.join(" ")))
}

/// The seed of a trigger's `H` items: the id of its job (of its workflow, for a workflow
/// trigger). Not the trigger's own id: that is known only once the trigger is inserted,
/// and the preview of a trigger being written (and the check of its definition) must
/// resolve `H` exactly as the stored trigger will. So a job's triggers written alike
/// resolve alike, and a thousand jobs written `H H * * *` spread over the day.
pub fn hash_seed(job_id: i64) -> u64 {
    job_id as u64
}

/// The delay of an instant's run under `jitter_secs`: between 0 and `max_secs` whole
/// seconds, taken from the trigger and the instant, so it is the same however often the
/// instant is fired (a retried firing, a second executor) and differs from instant to
/// instant and from trigger to trigger.
pub fn jitter(trigger_id: i64, instant: DateTime<Utc>, max_secs: i32) -> TimeDelta {
    let span = u64::try_from(max_secs).unwrap_or(0) + 1;
    let hash = hashed::mix(trigger_id as u64, instant.timestamp_millis() as u64);
    TimeDelta::seconds((hash % span) as i64)
}

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
    /// No instant (a webhook trigger runs on deliveries, not on a clock).
    Never,
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
    /// interval without `start_at` (pass the trigger's creation time); `seed` fixes the
    /// values of the cron's `H` items (see [`hash_seed`]; None refuses an `H`). Each error
    /// names the column at fault: `cron`/`cron.*`, `timezone`, `interval_secs`, `at`,
    /// `end_at`.
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
        seed: Option<u64>,
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
                Schedule::Cron(CronSpec::parse_seeded(text, timezone_checked.name(), seed)?)
            }
            TriggerKind::Interval => Schedule::Interval {
                every: interval_every(interval_secs.ok_or_else(|| required("interval_secs", kind))?)?,
                anchor: start_at.unwrap_or(anchor),
            },
            TriggerKind::Once => Schedule::Once(at.ok_or_else(|| required("at", kind))?),
            TriggerKind::Webhook => Schedule::Never,
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
    /// A cron or interval trigger's instants begin at its `start_at`, or else at its
    /// creation: those before it never belonged to the trigger, so the ledger does not
    /// call them missed, and neither the reconciler nor a backfill reaches back to them.
    pub fn from_trigger(trigger: &Trigger) -> Result<TriggerSchedule, ScheduleError> {
        let timing = &trigger.timing;
        let mut schedule = timing.schedule(trigger.created_at, Some(hash_seed(trigger.job_id)))?;
        if timing.kind != TriggerKind::Once {
            // A one-shot trigger's instant is what it was made for, even when already past.
            schedule.window.start = Some(timing.start_at.unwrap_or(trigger.created_at));
        }
        Ok(schedule)
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
            Schedule::Never => None,
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
            Schedule::Cron(_) | Schedule::Once(_) | Schedule::Never => {
                self.counted_between(after, until, limit)
            }
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
