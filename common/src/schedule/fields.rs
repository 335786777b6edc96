//! The six fields of a cron expression, parsed one by one into bit sets with errors that
//! name the field (`cron.minute`), and written back as the canonical numeric expression
//! the matcher is given.

#[cfg(test)]
use chrono::NaiveDateTime;

use super::ScheduleError;

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
}

impl CronFields {
    pub(super) fn parse(expr: &str) -> Result<CronFields, ScheduleError> {
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
    pub(super) fn canonical_text(&self) -> String {
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
    pub(super) fn matches(&self, local: NaiveDateTime) -> bool {
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
