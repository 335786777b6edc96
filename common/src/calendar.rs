//! Calendars: named sets of days in a time zone that a trigger fires outside of
//! (`exclude`: holidays) or only on (`only`: business days).
//!
//! A calendar's days are dates, inclusive date ranges and weekdays, read in the
//! calendar's own zone: an instant is "on" the calendar when its local date there is one
//! of the days. Holidays can be imported from an iCalendar file: each `VEVENT`'s
//! `DTSTART` date becomes a date (see [`ical_dates`]).
//!
//! The rule is applied to a trigger's instants after its schedule made them, so a
//! calendar never changes which instants exist, only whether each one runs: an excluded
//! instant is recorded as skipped, with a reason naming the calendar
//! ([`CalendarRule::reason`]), and the ledger, the forecast and the preview all show it.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// The prefix of every reason a calendar gives for skipping an instant.
pub const CALENDAR_REASON_PREFIX: &str = "calendar ";

/// An inclusive span of dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DateRange {
    /// The first day.
    pub from: NaiveDate,
    /// The last day (inclusive).
    pub to: NaiveDate,
}

/// A calendar's days as stored (`calendars.days`) and given to the API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Days {
    /// Single dates.
    #[serde(default)]
    pub dates: BTreeSet<NaiveDate>,
    /// Inclusive ranges of dates.
    #[serde(default)]
    pub ranges: Vec<DateRange>,
    /// Weekdays, lowercase three-letter names (`mon` … `sun`).
    #[serde(default)]
    pub weekdays: Vec<String>,
}

/// A calendar ready to be asked about instants.
#[derive(Debug, Clone, PartialEq)]
pub struct Calendar {
    /// Its name (reasons name it).
    pub name: String,
    zone: Tz,
    dates: BTreeSet<NaiveDate>,
    ranges: Vec<DateRange>,
    weekdays: Vec<Weekday>,
}

/// A calendar that cannot be used, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct CalendarError {
    /// `timezone`, `ranges`, `weekdays` or `ical`.
    pub field: &'static str,
    /// What is wrong, for a person.
    pub message: String,
}

impl Calendar {
    /// A calendar named `name` of `days` in the IANA zone `timezone`.
    pub fn new(name: &str, timezone: &str, days: &Days) -> Result<Calendar, CalendarError> {
        let zone = timezone.parse::<Tz>().map_err(|_| CalendarError {
            field: "timezone",
            message: format!("{timezone:?} is not an IANA time zone name (like Europe/Berlin or UTC)"),
        })?;
        if let Some(range) = days.ranges.iter().find(|range| range.to < range.from) {
            return Err(CalendarError {
                field: "ranges",
                message: format!("{} to {}: the end is before the start", range.from, range.to),
            });
        }
        let weekdays = days
            .weekdays
            .iter()
            .map(|day| {
                day.parse::<Weekday>().map_err(|_| CalendarError {
                    field: "weekdays",
                    message: format!("{day:?} is not a weekday (mon, tue, wed, thu, fri, sat, sun)"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Calendar {
            name: name.to_owned(),
            zone,
            dates: days.dates.clone(),
            ranges: days.ranges.clone(),
            weekdays,
        })
    }

    /// Whether `instant` falls on one of the calendar's days, in its zone.
    pub fn contains(&self, instant: DateTime<Utc>) -> bool {
        let date = instant.with_timezone(&self.zone).date_naive();
        self.dates.contains(&date)
            || self.weekdays.contains(&date.weekday())
            || self
                .ranges
                .iter()
                .any(|range| range.from <= date && date <= range.to)
    }
}

/// How a trigger uses its calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CalendarMode {
    /// Skip the calendar's days.
    Exclude,
    /// Fire on the calendar's days only.
    Only,
}

impl CalendarMode {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            CalendarMode::Exclude => "exclude",
            CalendarMode::Only => "only",
        }
    }
}

impl std::str::FromStr for CalendarMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "exclude" => Ok(CalendarMode::Exclude),
            "only" => Ok(CalendarMode::Only),
            other => Err(format!("{other:?} is not exclude or only")),
        }
    }
}

/// A trigger's calendar and how it uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct CalendarRule {
    /// The calendar.
    pub calendar: Calendar,
    /// Exclude its days, or fire only on them.
    pub mode: CalendarMode,
}

impl CalendarRule {
    /// Whether the rule keeps `instant` from running.
    pub fn excludes(&self, instant: DateTime<Utc>) -> bool {
        let on = self.calendar.contains(instant);
        match self.mode {
            CalendarMode::Exclude => on,
            CalendarMode::Only => !on,
        }
    }

    /// Why an excluded instant was skipped: "calendar holidays excludes it".
    pub fn reason(&self) -> String {
        match self.mode {
            CalendarMode::Exclude => format!("{CALENDAR_REASON_PREFIX}{} excludes it", self.calendar.name),
            CalendarMode::Only => format!(
                "{CALENDAR_REASON_PREFIX}{}: not one of its days (only)",
                self.calendar.name
            ),
        }
    }
}

/// The start dates of the events of an iCalendar file (RFC 5545): each `VEVENT`'s
/// `DTSTART`, whether a date (`DTSTART;VALUE=DATE:20261225`) or a date-time (its date
/// part). Folded lines are unfolded first; other properties are ignored.
pub fn ical_dates(text: &str) -> Result<BTreeSet<NaiveDate>, CalendarError> {
    let unfolded = text.replace("\r\n", "\n").replace("\n ", "").replace("\n\t", "");
    let mut dates = BTreeSet::new();
    let mut in_event = false;
    for line in unfolded.lines().map(str::trim_end) {
        let upper = line.to_ascii_uppercase();
        if upper == "BEGIN:VEVENT" {
            in_event = true;
        } else if upper == "END:VEVENT" {
            in_event = false;
        } else if in_event && (upper.starts_with("DTSTART:") || upper.starts_with("DTSTART;")) {
            dates.insert(dtstart_date(line)?);
        }
    }
    if dates.is_empty() && !unfolded.to_ascii_uppercase().contains("BEGIN:VCALENDAR") {
        return Err(CalendarError {
            field: "ical",
            message: "is not an iCalendar file (no BEGIN:VCALENDAR)".into(),
        });
    }
    Ok(dates)
}

fn dtstart_date(line: &str) -> Result<NaiveDate, CalendarError> {
    let value = line.rsplit(':').next().unwrap_or_default();
    let digits = value.get(..8).unwrap_or_default();
    NaiveDate::parse_from_str(digits, "%Y%m%d").map_err(|_| CalendarError {
        field: "ical",
        message: format!("{line:?}: DTSTART is not a date (YYYYMMDD)"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::schedule::TriggerSchedule;
    use crate::store::triggers::NewTrigger;
    use chrono::TimeZone;

    fn date(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    fn daily_at_nine_berlin() -> TriggerSchedule {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        NewTrigger::cron("0 0 9 * * *", "Europe/Berlin")
            .schedule(start, None)
            .unwrap()
    }

    /// Every instant of 2027 the schedule names, and those the rule lets run.
    fn year_2027(rule: &CalendarRule) -> (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) {
        let from = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap();
        let to = Utc.with_ymd_and_hms(2028, 1, 1, 0, 0, 0).unwrap();
        let all = daily_at_nine_berlin().between(from, to, 1000).instants;
        let kept = all.iter().copied().filter(|at| !rule.excludes(*at)).collect();
        (all, kept)
    }

    #[test]
    fn a_holiday_calendar_excludes_christmas_day_only() {
        let days = Days {
            dates: [date("2027-12-25")].into(),
            ..Days::default()
        };
        let rule = CalendarRule {
            calendar: Calendar::new("holidays", "Europe/Berlin", &days).unwrap(),
            mode: CalendarMode::Exclude,
        };
        let (all, kept) = year_2027(&rule);
        assert_eq!((all.len(), kept.len()), (365, 364));
        let christmas = Utc.with_ymd_and_hms(2027, 12, 25, 8, 0, 0).unwrap();
        assert!(all.contains(&christmas) && !kept.contains(&christmas));
        assert_eq!(rule.reason(), "calendar holidays excludes it");
    }

    #[test]
    fn only_business_days_fires_on_weekdays_outside_the_holidays() {
        // The business days: every day but weekends and a Christmas break.
        let days = Days {
            weekdays: vec!["sat".into(), "sun".into()],
            ranges: vec![DateRange {
                from: date("2027-12-24"),
                to: date("2027-12-26"),
            }],
            ..Days::default()
        };
        let closed = CalendarRule {
            calendar: Calendar::new("closed", "Europe/Berlin", &days).unwrap(),
            mode: CalendarMode::Exclude,
        };
        let (_, business) = year_2027(&closed);
        // 2027 has 261 weekdays; 24 December is a Friday (25, 26: the weekend).
        assert_eq!(business.len(), 260);
        assert!(business.iter().all(|at| at
            .with_timezone(&chrono_tz::Europe::Berlin)
            .weekday()
            .number_from_monday()
            <= 5));
        // The same days as an `only` calendar of the business days themselves.
        let open = Days {
            dates: business
                .iter()
                .map(|at| at.with_timezone(&chrono_tz::Europe::Berlin).date_naive())
                .collect(),
            ..Days::default()
        };
        let only = CalendarRule {
            calendar: Calendar::new("business", "Europe/Berlin", &open).unwrap(),
            mode: CalendarMode::Only,
        };
        assert_eq!(year_2027(&only).1, business);
    }

    #[test]
    fn days_are_read_in_the_calendars_zone() {
        let days = Days {
            dates: [date("2027-12-25")].into(),
            ..Days::default()
        };
        let tokyo = Calendar::new("x", "Asia/Tokyo", &days).unwrap();
        // 24 December 20:00 UTC is already the 25th in Tokyo.
        assert!(tokyo.contains(Utc.with_ymd_and_hms(2027, 12, 24, 20, 0, 0).unwrap()));
        assert!(!tokyo.contains(Utc.with_ymd_and_hms(2027, 12, 25, 16, 0, 0).unwrap()));
    }

    #[test]
    fn bad_days_name_their_field() {
        let bad_day = Days {
            weekdays: vec!["funday".into()],
            ..Days::default()
        };
        assert_eq!(Calendar::new("x", "UTC", &bad_day).unwrap_err().field, "weekdays");
        assert_eq!(
            Calendar::new("x", "Mars/Base", &Days::default())
                .unwrap_err()
                .field,
            "timezone"
        );
        let backwards = Days {
            ranges: vec![DateRange {
                from: date("2027-01-02"),
                to: date("2027-01-01"),
            }],
            ..Days::default()
        };
        assert_eq!(Calendar::new("x", "UTC", &backwards).unwrap_err().field, "ranges");
    }

    #[test]
    fn ical_events_give_their_start_dates() {
        let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nSUMMARY:Christmas\r\n\
                   DTSTART;VALUE=DATE:20271225\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nDTSTART:2028010\r\n 1T000000Z\r\n\
                   END:VEVENT\r\nEND:VCALENDAR\r\n";
        let dates = ical_dates(ics).unwrap();
        assert_eq!(dates, [date("2027-12-25"), date("2028-01-01")].into());
        assert_eq!(ical_dates("hello").unwrap_err().field, "ical");
        let broken = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:tomorrow\nEND:VEVENT\nEND:VCALENDAR";
        assert_eq!(ical_dates(broken).unwrap_err().field, "ical");
    }
}
