//! The small subset of JSONPath webhook triggers map a request body with: `$` followed by
//! `.name` and `[index]` steps (`$.head_commit.id`, `$.commits[0].author.name`).

use serde_json::Value;

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// Why a path text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}; a path looks like $.head_commit.id or $.commits[0].id")]
pub struct PathError(String);

impl JsonPath {
    /// Parses `$`, then any of `.name` (letters, digits, `_`, `-`) and `[index]`.
    pub fn parse(text: &str) -> Result<JsonPath, PathError> {
        let rest = text
            .strip_prefix('$')
            .ok_or_else(|| PathError("must start with $".to_owned()))?;
        let mut steps = Vec::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '.' => {
                    let mut key = String::new();
                    while let Some(&next) = chars.peek() {
                        if next == '.' || next == '[' {
                            break;
                        }
                        if !(next.is_alphanumeric() || next == '_' || next == '-') {
                            return Err(PathError(format!("{next:?} may not appear in a name")));
                        }
                        key.push(next);
                        chars.next();
                    }
                    if key.is_empty() {
                        return Err(PathError("a . must be followed by a name".to_owned()));
                    }
                    steps.push(Step::Key(key));
                }
                '[' => {
                    let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                    let index = digits
                        .parse::<usize>()
                        .map_err(|_| PathError(format!("[{digits}] is not an index")))?;
                    steps.push(Step::Index(index));
                }
                other => return Err(PathError(format!("unexpected {other:?}"))),
            }
        }
        Ok(JsonPath { steps })
    }

    /// The value the path names in `value`, if it has one.
    pub fn find<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.steps.iter().try_fold(value, |at, step| match step {
            Step::Key(key) => at.get(key.as_str()),
            Step::Index(index) => at.get(*index),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::JsonPath;
    use serde_json::json;

    #[test]
    fn paths_find_keys_and_indexes() {
        let body = json!({"ref": "main", "head_commit": {"id": "abc"}, "commits": [{"id": "x"}]});
        let find = |text: &str| JsonPath::parse(text).unwrap().find(&body).cloned();
        assert_eq!(find("$.ref"), Some(json!("main")));
        assert_eq!(find("$.head_commit.id"), Some(json!("abc")));
        assert_eq!(find("$.commits[0].id"), Some(json!("x")));
        assert_eq!(find("$.commits[1].id"), None);
        assert_eq!(find("$"), Some(body.clone()));
        for bad in ["ref", "$.", "$..a", "$[x]", "$.a b", "$a"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
