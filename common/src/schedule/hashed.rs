//! `H` in a cron field: a value fixed per trigger rather than written by hand, so that a
//! thousand triggers written `H H * * *` fire at a thousand different times of the day
//! instead of all at midnight. The value comes from a seed (see [`super::hash_seed`]: the
//! trigger's job's id) through a
//! hash of our own, so it never changes for a trigger — not with a new compiler, not
//! after a restart — and is the same in every process.
//!
//! Items: `H` (anywhere in the field's range), `H(a-b)` (within `a-b`), `H/n` (every `n`
//! from a start fixed in `0..n`), `H(a-b)/n`. In the day-of-month field `H` picks from
//! 1–28, so that it occurs in every month. Each item is resolved to the plain cron items
//! the rest of the parser reads.

use super::ScheduleError;

/// Whether a field item is a hashed one (`H`, `H(…)`, `H/…`; `THU` is not).
fn is_hashed(item: &str) -> bool {
    let mut chars = item.chars();
    matches!(chars.next(), Some('H' | 'h')) && matches!(chars.next(), None | Some('(' | '/'))
}

/// Whether any field of `texts` holds an `H` item.
pub(super) fn any(texts: &[&str]) -> bool {
    texts.iter().any(|text| text.split(',').any(is_hashed))
}

/// `text` (one field, whose values run `min..=max` and whose errors name `key`) with its
/// `H` items replaced by plain ones chosen by `seed`; `field` tells the fields apart so
/// that `H H * * *` does not pick the same number twice by construction.
pub(super) fn resolve_field(
    text: &str,
    key: &'static str,
    (min, max): (u32, u32),
    seed: u64,
    field: u64,
) -> Result<String, ScheduleError> {
    let error = |item: &str, message: String| ScheduleError::new(key, format!("{item}: {message}"));
    let items: Result<Vec<String>, ScheduleError> = text
        .split(',')
        .enumerate()
        .map(|(index, item)| {
            if !is_hashed(item) {
                return Ok(item.to_owned());
            }
            let hash = mix(seed, field << 32 | index as u64);
            resolve_item(&item[1..], (min, max), hash).map_err(|message| error(item, message))
        })
        .collect();
    Ok(items?.join(","))
}

/// `rest` is what follows `H`: empty, `(a-b)`, `/n` or `(a-b)/n`.
fn resolve_item(rest: &str, (min, max): (u32, u32), hash: u64) -> Result<String, String> {
    let (range, step) = match rest.split_once('/') {
        Some((range, step)) => (range, Some(step)),
        None => (rest, None),
    };
    let (low, high) = if range.is_empty() {
        (min, max)
    } else {
        let inner = range
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| "expected H, H(a-b), H/n or H(a-b)/n".to_owned())?;
        let (low, high) = inner
            .split_once('-')
            .ok_or_else(|| "H(a-b) needs a range".to_owned())?;
        let number = |text: &str| {
            text.trim()
                .parse::<u32>()
                .ok()
                .filter(|value| (min..=max).contains(value))
                .ok_or_else(|| format!("{text:?} is not a number in {min}-{max}"))
        };
        let (low, high) = (number(low)?, number(high)?);
        if low > high {
            return Err(format!("range {low}-{high} runs backwards"));
        }
        (low, high)
    };
    let width = u64::from(high - low) + 1;
    match step {
        None => Ok((u64::from(low) + hash % width).to_string()),
        Some(step) => {
            let step: u64 = step
                .parse()
                .ok()
                .filter(|step| (1..=width).contains(step))
                .ok_or_else(|| format!("step {step:?} must be a number from 1 to {width}"))?;
            let start = u64::from(low) + hash % step;
            Ok(format!("{start}-{high}/{step}"))
        }
    }
}

/// SplitMix64 over the seed and the item's place: small, well spread, and fixed forever.
pub(crate) fn mix(seed: u64, place: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(place)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_items_resolve_within_their_range_and_are_stable() {
        let minute = |text: &str, seed| resolve_field(text, "cron.minute", (0, 59), seed, 1);
        let once = minute("H", 42).expect("H resolves");
        assert_eq!(
            minute("H", 42).expect("H resolves"),
            once,
            "the same seed, the same value"
        );
        let value: u32 = once.parse().expect("a number");
        assert!(value <= 59);
        let within: u32 = minute("H(10-14)", 7)
            .expect("resolves")
            .parse()
            .expect("a number");
        assert!((10..=14).contains(&within));
        let stepped = minute("H/15", 7).expect("resolves");
        let (start, rest) = stepped.split_once('-').expect("start-end/step");
        assert!(start.parse::<u32>().expect("a number") < 15);
        assert_eq!(rest, "59/15");
        assert_eq!(minute("5,H(0-0)", 3).expect("resolves"), "5,0");
        assert_eq!(minute("THU", 3).expect("untouched"), "THU");
        for bad in ["H(5)", "H(9-3)", "H(0-60)", "H/0", "H/61"] {
            let err = minute(bad, 1).expect_err(bad);
            assert_eq!(err.field, "cron.minute", "{bad}: {err}");
        }
    }

    #[test]
    fn a_thousand_seeds_spread_over_the_hour() {
        let mut per_minute = [0u32; 60];
        for seed in 1..=1000 {
            let minute: usize = resolve_field("H", "cron.minute", (0, 59), seed, 1)
                .expect("resolves")
                .parse()
                .expect("a number");
            per_minute[minute] += 1;
        }
        // 1000 over 60 minutes is about 16.7 each; a fair spread keeps every minute used
        // and none crowded.
        assert!(per_minute.iter().all(|n| (4..=35).contains(n)), "{per_minute:?}");
    }
}
