//! The `{{ ... }}` references of job definitions that are filled just before a run, beside
//! `{{ secrets.NAME }}` ([`crate::secrets`]): `{{ params.KEY }}` (a run's parameters) and
//! `{{ steps.NAME.output.KEY }}` (what an upstream workflow step wrote to its output
//! file). A path may go deeper into objects (`params.db.host`); a string is filled in as it
//! is, any other value as its JSON text. A reference that names nothing is left as written.

use serde_json::Value;

/// `text` with every `{{ REFERENCE }}` that `value_of` knows replaced by its value
/// (`value_of` gets the trimmed reference, `params.day` for `{{ params.day }}`).
pub fn fill(text: &str, value_of: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        match value_of(after[..end].trim()) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[start..start + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The value of a reference to `params` or `steps`, given the run's parameters and its
/// upstream steps' outputs (step name → output).
pub fn input_value(reference: &str, params: &Value, upstream: &Value) -> Option<String> {
    if let Some(path) = reference.strip_prefix("params.") {
        return at_path(params, path).map(as_text);
    }
    let rest = reference.strip_prefix("steps.")?;
    let (step, path) = rest.split_once(".output.")?;
    at_path(upstream.get(step)?, path).map(as_text)
}

/// The value at a dotted path into nested objects.
fn at_path<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |value, key| value.get(key.trim()))
}

/// A value as a job sees it: a string as it is, anything else as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn params_and_step_outputs_are_filled_and_the_rest_left_alone() {
        let params = json!({"day": "2030-01-02", "n": 3, "db": {"host": "pg"}});
        let upstream = json!({"extract": {"rows": 12, "file": "/tmp/x"}});
        let value_of = |reference: &str| input_value(reference, &params, &upstream);
        assert_eq!(
            fill(
                "--day={{ params.day }} n={{params.n}} {{ params.db.host }}",
                &value_of
            ),
            "--day=2030-01-02 n=3 pg"
        );
        assert_eq!(
            fill(
                "{{ steps.extract.output.rows }} {{ steps.extract.output.file }}",
                &value_of
            ),
            "12 /tmp/x"
        );
        assert_eq!(
            fill(
                "{{ params.nope }} {{ secrets.x }} {{ steps.other.output.a }} {{",
                &value_of
            ),
            "{{ params.nope }} {{ secrets.x }} {{ steps.other.output.a }} {{"
        );
    }
}
