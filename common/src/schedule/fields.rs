//! The six fields of a cron expression, parsed one by one into bit sets with errors that
//! name the field (`cron.minute`), and written back as the canonical numeric expression
//! the matcher is given. The days that depend on the month's shape (Quartz's `L`, `W`
//! and `#`) are kept apart, as [`MonthDays`], and judged by [`CronFields::day_matches`].

#[cfg(test)]
use chrono::NaiveDateTime;
use chrono::{Datelike, NaiveDate, Weekday};

use super::{hashed, ScheduleError};

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
pub(super) struct CronFields {
    second: FieldValues,
    minute: FieldValues,
    hour: FieldValues,
    day_of_month: FieldValues,
    month: FieldValues,
    day_of_week: FieldValues,
    month_days: MonthDays,
}

impl CronFields {
    /// Parses `expr`; its `H` items (see [`super::hashed`]) are resolved with `seed`,
    /// and refused without one.
    pub(super) fn parse(expr: &str, seed: Option<u64>) -> Result<CronFields, ScheduleError> {
        let texts = CronFields::texts(expr, seed)?;
        let texts: [&str; 6] = std::array::from_fn(|i| texts[i].as_str());
        let (day_of_month, month_days) = parse_day_of_month(texts[3])?;
        let (day_of_week, weekdays_of_month) = parse_day_of_week(texts[5])?;
        let fields = CronFields {
            second: parse_field(texts[0], &SECOND)?,
            minute: parse_field(texts[1], &MINUTE)?,
            hour: parse_field(texts[2], &HOUR)?,
            day_of_month,
            month: parse_field(texts[4], &MONTH)?,
            day_of_week: fold_sunday(day_of_week),
            month_days: MonthDays {
                weekdays: weekdays_of_month,
                ..month_days
            },
        };
        fields.check_days_can_occur()?;
        Ok(fields)
    }

    /// The six field texts of `expr` (a missing second is `0`, a nickname expanded), with
    /// `H` items resolved by `seed`.
    pub(super) fn texts(expr: &str, seed: Option<u64>) -> Result<[String; 6], ScheduleError> {
        let expr = expand_macro(expr)?;
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
        if !hashed::any(&texts) {
            return Ok(texts.map(str::to_owned));
        }
        let Some(seed) = seed else {
            return Err(ScheduleError::new(
                "cron",
                "H takes a value fixed by the trigger, which this expression is not read for",
            ));
        };
        // H in day-of-month picks from 1-28 and in day-of-week from 0-6, so that it occurs
        // in every month and names each weekday once.
        let ranges = [(0, 59), (0, 59), (0, 23), (1, 28), (1, 12), (0, 6)];
        let rules = [&SECOND, &MINUTE, &HOUR, &DAY_OF_MONTH, &MONTH, &DAY_OF_WEEK];
        let mut resolved: [String; 6] = Default::default();
        for (index, text) in texts.iter().enumerate() {
            resolved[index] =
                hashed::resolve_field(text, rules[index].key, ranges[index], seed, index as u64)?;
        }
        Ok(resolved)
    }

    /// Whether the expression picks days by the month's shape (`L`, `W`, `#`): then the
    /// matcher is given both day fields as `*` and [`Self::day_matches`] judges the days.
    pub(super) fn has_month_days(&self) -> bool {
        self.month_days != MonthDays::default()
    }

    /// The day rule on `date`, with the days picked by the month's shape.
    pub(super) fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = self.day_of_month.contains(date.day()) || self.month_days.day_of_month_matches(date);
        let dow = self.day_of_week.contains(date.weekday().num_days_from_sunday())
            || self.month_days.weekdays.matches(date);
        if self.day_of_month.restricted && self.day_of_week.restricted {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// Rejects `30 2`-style expressions: with the weekday unrestricted only the day of
    /// month decides, and if none of its days exists in any chosen month (February counts
    /// 29 days) the expression never fires.
    fn check_days_can_occur(&self) -> Result<(), ScheduleError> {
        if self.has_month_days() {
            return self.check_month_days_can_occur();
        }
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

    /// With days picked by the month's shape, whether any day of the chosen months is
    /// picked at all: dates repeat their weekdays every 28 years, so 28 years of them
    /// tell.
    fn check_month_days_can_occur(&self) -> Result<(), ScheduleError> {
        let Some(first) = NaiveDate::from_ymd_opt(2000, 1, 1) else {
            return Ok(());
        };
        let occurs = first
            .iter_days()
            .take_while(|date| date.year() < 2028)
            .any(|date| self.month.contains(date.month()) && self.day_matches(date));
        if occurs {
            Ok(())
        } else {
            Err(ScheduleError::new(
                DAY_OF_MONTH.key,
                "no day of the chosen months matches both day fields",
            ))
        }
    }

    /// The expression croner parses: six numeric fields, no names, steps or ranges. The
    /// day fields are `*` when days are picked by the month's shape (see
    /// [`Self::day_matches`]).
    pub(super) fn canonical_text(&self) -> String {
        let all_days = FieldValues {
            bits: 0,
            restricted: false,
        };
        let (day_of_month, day_of_week) = if self.has_month_days() {
            (all_days, all_days)
        } else {
            (self.day_of_month, self.day_of_week)
        };
        [
            self.second,
            self.minute,
            self.hour,
            day_of_month,
            self.month,
            day_of_week,
        ]
        .map(FieldValues::canonical_text)
        .join(" ")
    }

    /// Our own reading of the spec, independent of croner: the oracle of the tests.
    #[cfg(test)]
    pub(super) fn matches(&self, local: NaiveDateTime) -> bool {
        use chrono::Timelike;
        self.day_matches(local.date())
            && self.second.contains(local.second())
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

/// Quartz's and cron's nicknames, as the six fields they stand for.
const MACROS: &[(&str, &str)] = &[
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
    ("@monthly", "0 0 0 1 * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@daily", "0 0 0 * * *"),
    ("@midnight", "0 0 0 * * *"),
    ("@hourly", "0 0 * * * *"),
];

fn expand_macro(expr: &str) -> Result<&str, ScheduleError> {
    let text = expr.trim();
    if !text.starts_with('@') {
        return Ok(expr);
    }
    MACROS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
        .map(|(_, fields)| *fields)
        .ok_or_else(|| {
            let names: Vec<&str> = MACROS.iter().map(|(name, _)| *name).collect();
            ScheduleError::new("cron", format!("{text:?} is not one of {}", names.join(", ")))
        })
}

/// Days picked by the shape of their month rather than by number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct MonthDays {
    /// Bit `n`: the `n`th day before the last (`L` is bit 0, `L-3` bit 3).
    from_last: u32,
    /// Bit `d`: the weekday (Monday to Friday) nearest day `d`, in its month (`15W`).
    nearest_weekday: u32,
    /// `LW`: the month's last weekday (Monday to Friday).
    last_weekday: bool,
    weekdays: WeekdaysOfMonth,
}

/// Weekdays picked by their place in the month.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct WeekdaysOfMonth {
    /// For each weekday (0 = Sunday), bit `k` (1–5): its `k`th occurrence (`MON#2`).
    nth: [u8; 7],
    /// Bit `w`: the month's last weekday `w` (`FRI#L`, `5L`).
    last: u8,
}

impl MonthDays {
    fn day_of_month_matches(&self, date: NaiveDate) -> bool {
        let length = month_length(date);
        let day = date.day();
        (self.from_last != 0 && self.from_last & (1 << (length - day)) != 0)
            || (self.last_weekday && day == last_weekday_of(date, length))
            || (1..=31).any(|wanted| {
                self.nearest_weekday & (1 << wanted) != 0
                    && nearest_weekday(date, wanted, length) == Some(day)
            })
    }
}

impl WeekdaysOfMonth {
    fn matches(&self, date: NaiveDate) -> bool {
        let weekday = date.weekday().num_days_from_sunday() as usize;
        let nth = (date.day() - 1) / 7 + 1;
        self.nth[weekday] & (1 << nth) != 0
            || (self.last & (1 << weekday) != 0 && date.day() + 7 > month_length(date))
    }
}

fn month_length(date: NaiveDate) -> u32 {
    let first = date.with_day(1).unwrap_or(date);
    let next = first.checked_add_months(chrono::Months::new(1)).unwrap_or(first);
    (next - first).num_days().clamp(28, 31) as u32
}

fn last_weekday_of(date: NaiveDate, length: u32) -> u32 {
    let last = date.with_day(length).unwrap_or(date);
    match last.weekday() {
        Weekday::Sat => length - 1,
        Weekday::Sun => length - 2,
        _ => length,
    }
}

/// Quartz's `W`: the weekday nearest `wanted` without leaving the month (a Saturday the
/// 1st moves to Monday the 3rd, a Sunday the last day to the Friday before); none in a
/// month too short to have `wanted`.
fn nearest_weekday(date: NaiveDate, wanted: u32, length: u32) -> Option<u32> {
    let target = date.with_day(wanted)?;
    Some(match target.weekday() {
        Weekday::Sat if wanted == 1 => 3,
        Weekday::Sat => wanted - 1,
        Weekday::Sun if wanted == length => wanted - 2,
        Weekday::Sun => wanted + 1,
        _ => wanted,
    })
}

/// The day-of-month field: the usual items, and `L`, `L-n`, `nW`, `LW`.
fn parse_day_of_month(text: &str) -> Result<(FieldValues, MonthDays), ScheduleError> {
    let rule = &DAY_OF_MONTH;
    let error = |message: String| ScheduleError::new(rule.key, message);
    let mut days = MonthDays::default();
    let mut plain = Vec::new();
    for item in text.split(',') {
        let upper = item.to_ascii_uppercase();
        if upper == "L" {
            days.from_last |= 1;
        } else if upper == "LW" {
            days.last_weekday = true;
        } else if let Some(back) = upper.strip_prefix("L-") {
            match back.parse::<u32>() {
                Ok(back) if back <= 30 => days.from_last |= 1 << back,
                _ => return Err(error(format!("{item}: L-n takes n from 0 to 30"))),
            }
        } else if let Some(day) = upper.strip_suffix('W') {
            match day.parse::<u32>() {
                Ok(day) if (1..=31).contains(&day) => days.nearest_weekday |= 1 << day,
                _ => return Err(error(format!("{item}: nW takes a day from 1 to 31"))),
            }
        } else {
            plain.push(item);
        }
    }
    let values = plain_items(&plain, rule, days != MonthDays::default())?;
    Ok((values, days))
}

/// The day-of-week field: the usual items, and `d#k` (`k` from 1 to 5), `d#L` and `dL`.
fn parse_day_of_week(text: &str) -> Result<(FieldValues, WeekdaysOfMonth), ScheduleError> {
    let rule = &DAY_OF_WEEK;
    let error = |message: String| ScheduleError::new(rule.key, message);
    let mut weekdays = WeekdaysOfMonth::default();
    let mut plain = Vec::new();
    for item in text.split(',') {
        let upper = item.to_ascii_uppercase();
        let (day, place) = if let Some((day, place)) = upper.split_once('#') {
            (day, Some(place))
        } else if let Some(day) = upper.strip_suffix('L').filter(|day| !day.is_empty()) {
            (day, Some("L"))
        } else {
            plain.push(item);
            continue;
        };
        let weekday = usize::from(
            parse_value(day, rule, false).map_err(|message| error(format!("{item}: {message}")))? % 7,
        );
        match place {
            Some("L") => weekdays.last |= 1 << weekday,
            Some(nth) => match nth.parse::<u8>() {
                Ok(nth) if (1..=5).contains(&nth) => weekdays.nth[weekday] |= 1 << nth,
                _ => return Err(error(format!("{item}: d#k takes k from 1 to 5, or L"))),
            },
            None => {}
        }
    }
    let values = plain_items(&plain, rule, weekdays != WeekdaysOfMonth::default())?;
    Ok((values, weekdays))
}

/// The usual items of a day field, beside its month-shaped ones (`shaped`): a field
/// holding any of those is restricted, and one holding nothing else picks no day by
/// number.
fn plain_items(plain: &[&str], rule: &FieldRule, shaped: bool) -> Result<FieldValues, ScheduleError> {
    if plain.is_empty() {
        return Ok(FieldValues {
            bits: 0,
            restricted: true,
        });
    }
    let mut values = parse_field(&plain.join(","), rule)?;
    values.restricted |= shaped;
    Ok(values)
}
