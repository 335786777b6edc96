//! Executor labels and job selectors: `zone=a,gpu=1` as an executor registers with it
//! (`PROBACTR_EXECUTOR_LABELS`), a selector as a job carries it (`{"gpu": "1"}`), the one
//! rule for what a label may be, and how both are written for people.

use std::collections::BTreeMap;

/// Labels (or a selector): name to value, sorted by name.
pub type Labels = BTreeMap<String, String>;

/// The longest label name or value.
pub const MAX_LABEL_CHARS: usize = 63;
/// The most labels an executor or a selector carries.
pub const MAX_LABELS: usize = 32;

/// Why a label name or value is refused, or None when it is a good one: 1 to
/// [`MAX_LABEL_CHARS`] letters, digits, `.`, `_`, `-` or `/`.
pub fn label_problem(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if text.chars().count() > MAX_LABEL_CHARS {
        return Some(format!("must be at most {MAX_LABEL_CHARS} characters"));
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
    {
        return Some(format!(
            "{bad:?} is not allowed (letters, digits, '.', '_', '-', '/')"
        ));
    }
    None
}

/// Reads `name=value,name=value` (spaces around items ignored; empty: no labels).
pub fn parse_labels(text: &str) -> Result<Labels, String> {
    let mut labels = Labels::new();
    for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let Some((name, value)) = item.split_once('=') else {
            return Err(format!("{item:?} is not name=value"));
        };
        let (name, value) = (name.trim(), value.trim());
        if let Some(problem) = label_problem(name) {
            return Err(format!("label name {name:?} {problem}"));
        }
        if let Some(problem) = label_problem(value) {
            return Err(format!("value of label {name:?} {problem}"));
        }
        if labels.insert(name.to_owned(), value.to_owned()).is_some() {
            return Err(format!("label {name:?} is given twice"));
        }
    }
    if labels.len() > MAX_LABELS {
        return Err(format!("at most {MAX_LABELS} labels"));
    }
    Ok(labels)
}

/// `gpu=1,zone=a`, as people read a selector or an executor's labels.
pub fn describe(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Labels from their stored JSON object (values that are not strings are skipped: the
/// store only ever writes strings).
pub fn from_json(value: &serde_json::Value) -> Labels {
    value
        .as_object()
        .map(|object| {
            object
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` carry every pair of `selector`.
pub fn matches(selector: &Labels, labels: &Labels) -> bool {
    selector
        .iter()
        .all(|(name, value)| labels.get(name) == Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_and_describe() {
        let labels = parse_labels(" zone=a, gpu=1 ,").expect("labels");
        assert_eq!(describe(&labels), "gpu=1,zone=a");
        assert!(parse_labels("").expect("none").is_empty());
        assert!(parse_labels("gpu").expect_err("refused").contains("name=value"));
        assert!(parse_labels("gpu=")
            .expect_err("refused")
            .contains("must not be empty"));
        assert!(parse_labels("g pu=1")
            .expect_err("refused")
            .contains("not allowed"));
        assert!(parse_labels("a=1,a=2").expect_err("refused").contains("twice"));
    }

    #[test]
    fn a_selector_matches_labels_carrying_every_pair() {
        let labels = parse_labels("zone=a,gpu=1").expect("labels");
        assert!(matches(&parse_labels("gpu=1").expect("selector"), &labels));
        assert!(matches(&Labels::new(), &labels));
        assert!(!matches(&parse_labels("gpu=2").expect("selector"), &labels));
        assert!(!matches(&parse_labels("gpu=1,ssd=1").expect("selector"), &labels));
    }
}
