//! Durations and sizes as settings write them: `500ms`, `5s`, `2m`, `1h`, `30d`;
//! `65536`, `512KiB`, `2MiB`.

use std::time::Duration;

/// `1048576`, `1024KiB`, `1MiB` (or `K`, `M`): the size in bytes.
pub(super) fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1024,
        "M" | "MiB" => 1024 * 1024,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// Parses `500ms`, `5s`, `2m`, `1h`, `30d` (one number and one unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "" => return Err(format!("{text:?} has no unit (ms, s, m, h, d)")),
        other => return Err(format!("{other:?} is not a unit (ms, s, m, h, d)")),
    };
    amount
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Writes a duration in the largest unit that divides it exactly.
pub fn format_duration(d: Duration) -> String {
    let millis = d.as_millis();
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if millis >= size && millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}
