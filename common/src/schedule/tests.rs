use chrono::{LocalResult, Offset, TimeZone, Timelike};
use chrono_tz::Tz;

use super::fields::CronFields;
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
        ("0 0 0 L * *", "ok"),
        ("0 0 0 L-31 * *", "cron.day_of_month"),
        ("0 0 0 0W * *", "cron.day_of_month"),
        ("0 0 0 xW * *", "cron.day_of_month"),
        ("0 0 0 30W 2 ?", "cron.day_of_month"),
        ("0 0 0 ? * MON#6", "cron.day_of_week"),
        ("0 0 0 ? * FOO#2", "cron.day_of_week"),
        ("0 0 0 ? * 9L", "cron.day_of_week"),
        ("0 0 0 30 2 *", "cron.day_of_month"),
        ("0 0 0 31 APR,JUN *", "cron.day_of_month"),
        ("0 0 0 * 13 *", "cron.month"),
        ("0 0 0 * MON *", "cron.month"),
        ("0 0 0 ? * ?", "ok"),
        ("0 0 0 * * FOO", "cron.day_of_week"),
        ("* * * * * FOO", "cron.day_of_week"),
        ("0 0 0 * * 8", "cron.day_of_week"),
        ("0 0 0 * * 5#2", "ok"),
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
    for (expr, count) in [("* * * *", 4), ("0 0 0 1 1 * 2030", 7), ("", 0)] {
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
            now,
            None
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
            now,
            None
        )),
        "interval_secs"
    );
    assert_eq!(
        field_of(TriggerSchedule::from_parts(
            I, None, "UTC", None, None, None, None, now, None
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
            now,
            None
        )),
        "interval_secs"
    );
    assert_eq!(
        field_of(TriggerSchedule::from_parts(
            C, None, "UTC", None, None, None, None, now, None
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
            now,
            None
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
            now,
            None
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
            now,
            None
        )),
        "interval_secs"
    );
    assert_eq!(
        field_of(TriggerSchedule::from_parts(
            O, None, "UTC", None, None, None, None, now, None
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
            now,
            None
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
            now,
            None
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
            now,
            None
        )),
        "end_at"
    );
    assert!(
        TriggerSchedule::from_parts(O, None, "UTC", None, Some(now), Some(now), Some(later), now, None)
            .is_ok()
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
        None,
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
        None,
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
    let as_if_before = u.naive_utc() + TimeDelta::seconds(i64::from(before.offset().fix().local_minus_utc()));
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
        "0 */20 * ? * SUN#L",
        "0 30 2 L-1,LW * ?",
    ];
    for (zone_name, from) in cases {
        let zone: Tz = zone_name.parse().expect("zone");
        for expr in expressions {
            let fields = CronFields::parse(expr, None).expect("expression");
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

// --- days by the month's shape, nicknames -------------------------------------------

/// The days of the next `n` instants after `after`, in UTC.
fn next_days(expr: &str, after: &str, n: usize) -> Vec<String> {
    next_utc(&cron(expr, "UTC"), after, n)
        .into_iter()
        .map(|instant| instant[..10].to_owned())
        .collect()
}

#[test]
fn last_days_of_the_month() {
    assert_eq!(
        next_days("0 0 0 L * ?", "2026-01-15T00:00:00Z", 3),
        ["2026-01-31", "2026-02-28", "2026-03-31"]
    );
    assert_eq!(
        next_days("0 0 0 L * ?", "2028-02-01T00:00:00Z", 1),
        ["2028-02-29"]
    );
    assert_eq!(
        next_days("0 0 0 L-3 * ?", "2026-01-01T00:00:00Z", 3),
        ["2026-01-28", "2026-02-25", "2026-03-28"]
    );
    // Mixed with plain days of the same field.
    assert_eq!(
        next_days("0 0 0 1,15,L * ?", "2026-02-01T00:00:00Z", 4),
        ["2026-02-15", "2026-02-28", "2026-03-01", "2026-03-15"]
    );
}

#[test]
fn nearest_weekdays_stay_in_their_month() {
    // 2026: the 15th is a Sunday in February, March and November, a Saturday in August.
    assert_eq!(
        next_days("0 0 9 15W * ?", "2026-01-01T00:00:00Z", 12),
        [
            "2026-01-15",
            "2026-02-16",
            "2026-03-16",
            "2026-04-15",
            "2026-05-15",
            "2026-06-15",
            "2026-07-15",
            "2026-08-14",
            "2026-09-15",
            "2026-10-15",
            "2026-11-16",
            "2026-12-15"
        ]
    );
    // A Saturday the 1st (August 2026) moves forward to Monday the 3rd, not back a month.
    assert_eq!(
        next_days("0 0 0 1W 8 ?", "2026-01-01T00:00:00Z", 1),
        ["2026-08-03"]
    );
    // The 31st only in months that have it; a Sunday the 31st moves back to Friday.
    assert_eq!(
        next_days("0 0 0 31W * ?", "2026-01-01T00:00:00Z", 4),
        ["2026-01-30", "2026-03-31", "2026-05-29", "2026-07-31"]
    );
    assert_eq!(
        next_days("0 0 0 LW * ?", "2026-01-01T00:00:00Z", 3),
        ["2026-01-30", "2026-02-27", "2026-03-31"]
    );
}

#[test]
fn nth_and_last_weekdays_of_the_month() {
    for expr in ["0 0 9 ? * MON#2", "0 0 9 ? * 1#2", "0 0 9 ? * mon#2"] {
        assert_eq!(
            next_days(expr, "2026-01-01T00:00:00Z", 4),
            ["2026-01-12", "2026-02-09", "2026-03-09", "2026-04-13"],
            "{expr}"
        );
    }
    // A fifth Monday exists only in some months.
    assert_eq!(
        next_days("0 0 9 ? * MON#5", "2026-01-01T00:00:00Z", 3),
        ["2026-03-30", "2026-06-29", "2026-08-31"]
    );
    for expr in ["0 0 18 ? * FRI#L", "0 0 18 ? * 5L", "0 0 18 ? * FRIL"] {
        assert_eq!(
            next_days(expr, "2026-01-01T00:00:00Z", 4),
            ["2026-01-30", "2026-02-27", "2026-03-27", "2026-04-24"],
            "{expr}"
        );
    }
    // Both day fields restricted: either matches (the 1st, or the last Friday).
    assert_eq!(
        next_days("0 0 0 1 * 5L", "2026-01-01T00:00:00Z", 3),
        ["2026-01-30", "2026-02-01", "2026-02-27"]
    );
}

#[test]
fn month_shaped_days_follow_the_zone_and_its_daylight_saving() {
    // The last Sunday of March 2026 is Berlin's spring-forward day: 02:30 does not exist
    // and is read with the offset before the gap (01:30 UTC, 03:30 CEST).
    let schedule = cron("0 30 2 ? * SUN#L", "Europe/Berlin");
    assert_eq!(
        next_utc(&schedule, "2026-03-01T00:00:00Z", 2),
        ["2026-03-29T01:30:00+00:00", "2026-04-26T00:30:00+00:00"]
    );
    // The last day of the month in Tokyo starts while UTC is still on the day before.
    assert_eq!(
        next_utc(&cron("0 0 0 L * ?", "Asia/Tokyo"), "2026-01-01T00:00:00Z", 1),
        ["2026-01-30T15:00:00+00:00"]
    );
}

#[test]
fn nicknames_are_their_six_fields() {
    let cases: &[(&str, &[&str])] = &[
        ("@yearly", &["2027-01-01T00:00:00+00:00"]),
        ("@annually", &["2027-01-01T00:00:00+00:00"]),
        ("@monthly", &["2026-12-01T00:00:00+00:00"]),
        // 2026-11-29 is a Sunday.
        ("@weekly", &["2026-11-29T00:00:00+00:00"]),
        ("@daily", &["2026-11-27T00:00:00+00:00"]),
        ("@midnight", &["2026-11-27T00:00:00+00:00"]),
        (
            "@HOURLY",
            &["2026-11-26T11:00:00+00:00", "2026-11-26T12:00:00+00:00"],
        ),
    ];
    for (expr, expected) in cases {
        assert_eq!(
            next_utc(&cron(expr, "UTC"), "2026-11-26T10:30:00Z", expected.len()),
            *expected,
            "{expr}"
        );
    }
    let error = error_of("@fortnightly");
    assert_eq!(error.field, "cron");
    assert!(error.message.contains("@daily"), "{}", error.message);
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

fn stored_trigger(kind: crate::model::TriggerKind, created: &str) -> crate::model::Trigger {
    use crate::model::TriggerKind;
    let timing = crate::model::TriggerTiming {
        cron: Some("0 */10 * * * *".into()).filter(|_| kind == TriggerKind::Cron),
        timezone: "Europe/Paris".into(),
        interval_secs: Some(600).filter(|_| kind == TriggerKind::Interval),
        at: Some(utc("2026-03-01T09:00:00Z")).filter(|_| kind == TriggerKind::Once),
        ..crate::model::TriggerTiming::of_kind(kind)
    };
    crate::model::Trigger::created(1, 1, timing, utc(created))
}

#[test]
fn a_stored_trigger_has_no_instants_from_before_it_existed() {
    use crate::model::TriggerKind;
    let created = "2026-03-01T10:05:30Z";
    let day_before = utc("2026-02-28T10:05:30Z");
    let half_hour_on = utc("2026-03-01T10:35:30Z");
    // Cron: 10:10, 10:20, 10:30; interval: from the creation, 10:05:30 to 10:35:30.
    for (kind, count) in [(TriggerKind::Cron, 3), (TriggerKind::Interval, 4)] {
        let schedule =
            TriggerSchedule::from_trigger(&stored_trigger(kind, created)).expect("stored trigger is valid");
        let found = schedule.between(day_before, half_hour_on, 10);
        assert_eq!(found.total, count, "{kind:?}: {found:?}");
        assert!(
            found.instants.iter().all(|i| *i >= utc(created)),
            "{kind:?}: {found:?}"
        );
        assert_eq!(
            schedule.first_at_or_after(day_before),
            found.instants.first().copied()
        );
    }
    // A start_at earlier than the creation is the trigger's own (a schedule reaching back).
    let mut reaching_back = stored_trigger(TriggerKind::Cron, created);
    reaching_back.timing.start_at = Some(utc("2026-03-01T09:00:00Z"));
    let schedule = TriggerSchedule::from_trigger(&reaching_back).expect("stored trigger is valid");
    assert_eq!(schedule.between(day_before, half_hour_on, 20).total, 10);
    // A one-shot trigger made after its instant keeps it.
    let late = TriggerSchedule::from_trigger(&stored_trigger(TriggerKind::Once, created))
        .expect("stored trigger is valid");
    assert_eq!(late.between(day_before, half_hour_on, 10).total, 1);
}

#[test]
fn hashed_fields_need_a_seed_and_resolve_per_trigger() {
    let unseeded = CronSpec::parse("0 H H * * *", "UTC").expect_err("H needs a trigger");
    assert_eq!(unseeded.field, "cron");
    let first = CronSpec::parse_seeded("0 H H * * *", "Europe/Paris", Some(1)).expect("seeded");
    let again = CronSpec::parse_seeded("0 H H * * *", "Europe/Paris", Some(1)).expect("seeded");
    assert_eq!(first, again);
    let resolved = resolved_cron("0 H H * * *", 1).expect("resolves").expect("has H");
    let fields: Vec<&str> = resolved.split(' ').collect();
    let (minute, hour): (u32, u32) = (
        fields[1].parse().expect("minute"),
        fields[2].parse().expect("hour"),
    );
    let schedule = TriggerSchedule {
        schedule: Schedule::Cron(first),
        window: Window::default(),
    };
    let next = next_local(&schedule, "2026-03-01T00:00:00Z", 2);
    assert!(
        next.iter()
            .all(|t| t.contains(&format!("T{hour:02}:{minute:02}:00"))),
        "{resolved} {next:?}"
    );
    assert_eq!(resolved_cron("0 5 * * * *", 1).expect("plain"), None);
    // Day fields: H picks a day that every month has, and a weekday.
    for seed in 0..200 {
        let text = resolved_cron("0 0 0 H * H", seed)
            .expect("resolves")
            .expect("has H");
        let fields: Vec<u32> = text.split(' ').filter_map(|f| f.parse().ok()).collect();
        assert!((1..=28).contains(&fields[3]) && fields[4] <= 6, "{text}");
    }
    let bad = CronSpec::parse_seeded("0 H(50-70) * * * *", "UTC", Some(3)).expect_err("out of range");
    assert_eq!(bad.field, "cron.minute");
}

#[test]
fn a_thousand_hashed_triggers_spread_over_the_hour_and_the_night() {
    use crate::model::TriggerKind;
    let created = "2026-03-01T00:00:00Z";
    let mut per_minute = [0u32; 60];
    let mut per_hour = [0u32; 24];
    for job_id in 1..=1000 {
        let mut trigger = stored_trigger(TriggerKind::Cron, created);
        trigger.job_id = job_id;
        trigger.timing.timezone = "UTC".into();
        trigger.timing.cron = Some("H H(0-7) * * *".into());
        let schedule = TriggerSchedule::from_trigger(&trigger).expect("seeded by its job");
        let first = schedule.next_after(utc(created)).expect("fires daily");
        per_minute[first.minute() as usize] += 1;
        per_hour[first.hour() as usize] += 1;
        // The same job's trigger, read again, resolves alike.
        assert_eq!(TriggerSchedule::from_trigger(&trigger).expect("again"), schedule);
    }
    // 1000 over 60 minutes is about 17 each: every minute used, none above three times that.
    assert!(per_minute.iter().all(|n| (1..=50).contains(n)), "{per_minute:?}");
    // H(0-7): eight hours of about 125 each, none outside them.
    assert!(
        per_hour[..8].iter().all(|n| (60..=250).contains(n)),
        "{per_hour:?}"
    );
    assert!(per_hour[8..].iter().all(|n| *n == 0), "{per_hour:?}");
}

#[test]
fn jitter_stays_within_its_bound_is_fixed_per_instant_and_spreads() {
    let base = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap();
    let delays: Vec<i64> = (0..1000)
        .map(|k| super::jitter(7, base + TimeDelta::minutes(k), 30).num_seconds())
        .collect();
    assert!(delays.iter().all(|d| (0..=30).contains(d)));
    assert_eq!(super::jitter(7, base, 30), super::jitter(7, base, 30));
    let distinct: std::collections::BTreeSet<i64> = delays.into_iter().collect();
    assert_eq!(distinct.len(), 31, "every delay from 0 to 30 s occurs");
}
