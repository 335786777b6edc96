//! Times as people read and type them: shown to the second in one zone (the local one,
//! or UTC with `--utc`) that tables name in their headings; read from RFC 3339, a date
//! and time in that zone, or an offset from now (`-2h`, `+1d`).

use std::sync::OnceLock;

use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

/// The zone times are shown and read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// `--utc`.
    Utc,
    /// The named local zone (`TZ`, or the system's `/etc/localtime`).
    Named(Tz),
    /// The system's zone, known by its offset only.
    Local,
}

static ZONE: OnceLock<Zone> = OnceLock::new();

/// Chooses the zone for this process: UTC when `utc`, else the local one.
pub fn choose(utc: bool) {
    let _ = ZONE.set(if utc { Zone::Utc } else { local_zone() });
}

/// The chosen zone (the local one when none was chosen).
pub fn zone() -> Zone {
    *ZONE.get_or_init(local_zone)
}

/// The local zone by name when the system says it (`TZ`, the link `/etc/localtime`).
fn local_zone() -> Zone {
    let from_env = std::env::var("TZ")
        .ok()
        .map(|tz| tz.trim_start_matches(':').to_owned());
    let from_link = || {
        let target = std::fs::read_link("/etc/localtime").ok()?;
        let text = target.to_string_lossy().into_owned();
        text.split_once("zoneinfo/").map(|(_, name)| name.to_owned())
    };
    from_env
        .filter(|name| !name.is_empty())
        .or_else(from_link)
        .and_then(|name| name.parse::<Tz>().ok())
        .map_or(Zone::Local, Zone::Named)
}

impl Zone {
    /// How headings name the zone: `UTC`, `Europe/Paris`, or `UTC+01:00` for a local zone
    /// known by its offset only.
    pub fn label(self) -> String {
        match self {
            Zone::Utc => "UTC".into(),
            Zone::Named(tz) => tz.name().into(),
            Zone::Local => format!("UTC{}", Local::now().format("%:z")),
        }
    }

    /// `instant` to the second, in this zone (`2026-11-26 09:15:02`).
    pub fn show(self, instant: DateTime<Utc>) -> String {
        const SHOWN: &str = "%Y-%m-%d %H:%M:%S";
        match self {
            Zone::Utc => instant.format(SHOWN).to_string(),
            Zone::Named(tz) => instant.with_timezone(&tz).format(SHOWN).to_string(),
            Zone::Local => instant.with_timezone(&Local).format(SHOWN).to_string(),
        }
    }

    /// A wall-clock time of this zone as an instant (the earlier of a repeated hour; a
    /// time a DST change skips is None).
    fn instant_of(self, local: NaiveDateTime) -> Option<DateTime<Utc>> {
        match self {
            Zone::Utc => Some(local.and_utc()),
            Zone::Named(tz) => tz.from_local_datetime(&local).earliest().map(|t| t.to_utc()),
            Zone::Local => Local.from_local_datetime(&local).earliest().map(|t| t.to_utc()),
        }
    }
}

/// A text of the API that is an instant (RFC 3339), as shown in the chosen zone.
pub fn shown(text: &str) -> Option<String> {
    let instant = DateTime::parse_from_rfc3339(text).ok()?;
    Some(zone().show(instant.to_utc()))
}

/// Why a time option could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{option}: {given:?} is not a time: give RFC 3339 (2026-11-26T09:00:00Z), a date and time in {zone} (2026-11-26 09:00), or an offset from now (-2h, +1d, 30m)")]
pub struct BadTime {
    option: String,
    given: String,
    zone: String,
}

/// Reads a time option (`--from`, `--until`) as RFC 3339 for the API.
pub fn parse(option: &str, given: &str, now: DateTime<Utc>) -> Result<String, BadTime> {
    read(given, now, zone())
        .map(|instant| instant.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .ok_or_else(|| BadTime {
            option: option.to_owned(),
            given: given.to_owned(),
            zone: zone().label(),
        })
}

fn read(given: &str, now: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
    let given = given.trim();
    if let Ok(instant) = DateTime::parse_from_rfc3339(given) {
        return Some(instant.to_utc());
    }
    if let Some(offset) = offset_from_now(given) {
        return now.checked_add_signed(offset);
    }
    for format in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(local) = NaiveDateTime::parse_from_str(given, format) {
            return zone.instant_of(local);
        }
    }
    let day = NaiveDate::parse_from_str(given, "%Y-%m-%d").ok()?;
    zone.instant_of(day.and_hms_opt(0, 0, 0)?)
}

/// `-2h`, `+1d`, `30m`, `45s`, `1w`: a signed span (no sign: later).
fn offset_from_now(given: &str) -> Option<TimeDelta> {
    let (sign, rest) = match given.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, given.strip_prefix('+').unwrap_or(given)),
    };
    let unit = rest.chars().last()?;
    let amount: i64 = rest[..rest.len() - unit.len_utf8()].parse().ok()?;
    let seconds = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return None,
    };
    TimeDelta::try_seconds(sign * amount.checked_mul(seconds)?)
}

/// A span in words a person reads at a glance: `850 ms`, `42 s`, `3 min 5 s`, `2 h 4 min`.
pub fn span(delta: TimeDelta) -> String {
    let millis = delta.num_milliseconds().max(0);
    let seconds = millis / 1000;
    match seconds {
        0 => format!("{millis} ms"),
        1..=59 => format!("{:.1} s", millis as f64 / 1000.0),
        60..=3599 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn instants_are_shown_to_the_second_in_the_zone() {
        let instant = at("2026-07-01T10:15:30.123456Z");
        assert_eq!(Zone::Utc.show(instant), "2026-07-01 10:15:30");
        let paris = Zone::Named(chrono_tz::Europe::Paris);
        assert_eq!(paris.show(instant), "2026-07-01 12:15:30");
        assert_eq!(paris.label(), "Europe/Paris");
    }

    #[test]
    fn times_are_read_as_rfc3339_local_or_from_now() {
        let now = at("2026-07-01T10:00:00Z");
        let paris = Zone::Named(chrono_tz::Europe::Paris);
        assert_eq!(
            read("2026-07-01T08:00:00+02:00", now, paris),
            Some(at("2026-07-01T06:00:00Z"))
        );
        assert_eq!(
            read("2026-07-01 08:00", now, paris),
            Some(at("2026-07-01T06:00:00Z"))
        );
        assert_eq!(
            read("2026-07-02", now, Zone::Utc),
            Some(at("2026-07-02T00:00:00Z"))
        );
        assert_eq!(read("-2h", now, paris), Some(at("2026-07-01T08:00:00Z")));
        assert_eq!(read("+1d", now, paris), Some(at("2026-07-02T10:00:00Z")));
        assert_eq!(read("yesterday", now, paris), None);
        assert!(parse("--from", "soon", now)
            .unwrap_err()
            .to_string()
            .starts_with("--from:"));
    }

    #[test]
    fn spans_read_at_a_glance() {
        assert_eq!(span(TimeDelta::milliseconds(850)), "850 ms");
        assert_eq!(span(TimeDelta::milliseconds(4200)), "4.2 s");
        assert_eq!(span(TimeDelta::seconds(185)), "3 min 5 s");
        assert_eq!(span(TimeDelta::seconds(7440)), "2 h 4 min");
    }
}
