//! The job form: its fields (one per setting of the chosen kind's spec) read into a
//! [`JobDraft`] or [`JobPatch`], stored specs shown back as fields, and the service's
//! errors placed next to the field they concern.

use std::collections::{BTreeMap, HashMap};

use probactr_common::jobspec::{HttpSpec, JobSpec, ShellSpec};
use probactr_common::model::JobKind;
use serde_json::{json, Map, Value};

use super::FormData;
use crate::command::job::ChildDraft;
use crate::command::retry::RetryDraft;
use crate::command::{JobDraft, JobPatch};
use crate::error::FieldErrors;

/// The job form's visible fields: an error keyed by one of these shows next to it. The
/// spec fields are named like the keys the service reports errors under (`spec.url`).
const JOB_FORM_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "description",
    "kind",
    "overlap",
    "timeout_secs",
    "parallel",
    "max_concurrency",
    "retry.max_attempts",
    "retry.backoff_secs",
    "retry.backoff",
    "retry.max_secs",
    "retry.jitter",
    "retry.retry_on.exit_codes",
    "retry.retry_on.http_statuses",
    "retry.retry_on.timeouts",
    "on_executor_lost",
    "max_takeovers",
    "stop_grace_secs",
    "selector",
    "priority",
    "route",
    "shards",
    "mode",
    "replicas",
    "on_success",
    "on_failure",
    "on_finish",
    "paused",
    "params_schema",
    "spec.program",
    "spec.args",
    "spec.env",
    "spec.cwd",
    "spec.shell",
    "spec.method",
    "spec.url",
    "spec.headers",
    "spec.body",
    "spec.expect_status",
    "spec.follow_redirects",
    "spec.millis",
    "schedule.kind",
    "schedule.cron",
    "schedule.timezone",
    "schedule.interval_secs",
];

/// Whether a field of the job form is in its folded advanced part (the basic part: the
/// name, namespace, kind, description, the kind's spec and the schedule).
pub fn in_advanced_part(field: &str) -> bool {
    const BASIC: [&str; 4] = ["name", "namespace", "kind", "description"];
    !(BASIC.contains(&field) || field.starts_with("spec.") || field.starts_with("schedule."))
}

/// The command of a new job's form. The spec is built from the fields of the chosen kind
/// only (`spec.program`, `spec.url`, …), like [`trigger_draft`] does for trigger kinds.
pub fn job_draft(form: &FormData) -> JobDraft {
    let mut problems = FieldErrors::new();
    let kind = form.choice::<JobKind>("kind", &mut problems);
    // An unknown kind gets no spec: the kind is reported, not its spec.
    let spec = kind.flatten().map(|kind| spec_body(form, kind, &mut problems));
    let mut draft = JobDraft {
        name: form.text("name"),
        namespace: form.text("namespace"),
        kind,
        description: form.text("description"),
        spec,
        parallel: Some(Some(form.checked("parallel"))),
        max_concurrency: form.whole_or_null("max_concurrency", &mut problems),
        overlap: form.choice("overlap", &mut problems),
        timeout_secs: form.whole_if_filled("timeout_secs", &mut problems),
        retry: retry_draft(form, &mut problems),
        paused: Some(Some(form.checked("paused"))),
        // The form leaves who manages the job as it is.
        managed_by: None,
        on_executor_lost: form.choice("on_executor_lost", &mut problems),
        max_takeovers: form.whole_if_filled("max_takeovers", &mut problems),
        stop_grace_secs: form.whole_if_filled("stop_grace_secs", &mut problems),
        selector: form.labels("selector", &mut problems),
        priority: form.whole_if_filled("priority", &mut problems),
        route: form.choice("route", &mut problems),
        shards: form.whole_if_filled("shards", &mut problems),
        mode: form.choice("mode", &mut problems),
        replicas: form.whole_if_filled("replicas", &mut problems),
        // JSON in a textarea; empty: none declared (parameters are free), not `{}`
        // (which would declare that the job takes none).
        params_schema: form.json_or_null("params_schema", &mut problems),
        // The form has no pool or rate fields yet: it leaves the job's as they are.
        pool: None,
        pool_slots: None,
        rate: None,
        children: ChildDraft {
            on_success: form.jobs("on_success"),
            on_failure: form.jobs("on_failure"),
            on_finish: form.jobs("on_finish"),
        },
        problems: FieldErrors::new(),
    };
    draft.problems = problems;
    draft
}

/// The retry policy of the form's advanced part. `retry.backoff_secs` is the form's name
/// of `initial_secs`; the failures retried are comma-separated lists.
fn retry_draft(form: &FormData, problems: &mut FieldErrors) -> RetryDraft {
    RetryDraft {
        max_attempts: form.whole_if_filled("retry.max_attempts", problems),
        initial_secs: form.whole_if_filled("retry.backoff_secs", problems),
        initial_name: "retry.backoff_secs",
        backoff: form.choice("retry.backoff", problems),
        max_secs: match form.get("retry.max_secs") {
            Some(_) => form.whole_or_null("retry.max_secs", problems),
            None => None,
        },
        jitter: form.choice("retry.jitter", problems),
        retry_on: retry_on_fields(form, problems),
    }
}

/// `retry_on` from its fields (None when the form has none of them: it keeps the job's).
fn retry_on_fields(form: &FormData, problems: &mut FieldErrors) -> Option<Value> {
    const LISTS: [&str; 2] = ["exit_codes", "http_statuses"];
    let shown = LISTS
        .iter()
        .any(|key| form.get(&format!("retry.retry_on.{key}")).is_some());
    if !shown {
        return None;
    }
    let mut on = Map::new();
    for key in LISTS {
        let field = format!("retry.retry_on.{key}");
        let text = form.filled(&field).unwrap_or_default();
        let numbers: Result<Vec<i64>, _> = text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::parse::<i64>)
            .collect();
        match numbers {
            Ok(numbers) => {
                on.insert(key.to_owned(), json!(numbers));
            }
            Err(_) => {
                problems.insert(field, "must be whole numbers, comma-separated".to_owned());
            }
        }
    }
    on.insert(
        "timeouts".to_owned(),
        json!(form.checked("retry.retry_on.timeouts")),
    );
    Some(Value::Object(on))
}

/// The command of an edited job's form: its fields and the `version` it was read at.
pub fn job_patch(form: &FormData) -> JobPatch {
    let mut draft = job_draft(form);
    let version = form.whole_or_null("version", &mut draft.problems);
    JobPatch { version, draft }
}

/// The `spec` of a job of kind `kind` from its fieldset. Empty fields are left out, so
/// that the service applies its defaults and says "is required" where one is.
fn spec_body(form: &FormData, kind: JobKind, errors: &mut FieldErrors) -> Value {
    let mut spec = Map::new();
    let text = |spec: &mut Map<String, Value>, key: &str| {
        if let Some(value) = form.filled(&format!("spec.{key}")) {
            spec.insert(key.to_owned(), json!(value));
        }
    };
    match kind {
        JobKind::Shell => {
            text(&mut spec, "program");
            spec.insert("args".into(), json!(args(form.get("spec.args").unwrap_or(""))));
            let env = pairs(form.get("spec.env").unwrap_or(""), &ENV_LINES);
            spec.insert("env".into(), field_result("spec.env", env, errors));
            text(&mut spec, "cwd");
            spec.insert("shell".into(), json!(form.checked("spec.shell")));
        }
        JobKind::Http => {
            text(&mut spec, "method");
            text(&mut spec, "url");
            let headers = pairs(form.get("spec.headers").unwrap_or(""), &HEADER_LINES);
            spec.insert("headers".into(), field_result("spec.headers", headers, errors));
            if let Some(body) = form.get("spec.body").filter(|body| !body.trim().is_empty()) {
                // Browsers send a textarea's line breaks as CRLF whatever was typed.
                spec.insert("body".into(), json!(body.replace("\r\n", "\n")));
            }
            text(&mut spec, "follow_redirects");
            let statuses = statuses(form.get("spec.expect_status").unwrap_or(""));
            spec.insert(
                "expect_status".into(),
                field_result("spec.expect_status", statuses, errors),
            );
        }
        JobKind::Noop => {}
        JobKind::Sleep => {
            if let Some(millis) = form.whole("spec.millis", errors) {
                spec.insert("millis".into(), json!(millis));
            }
        }
    }
    Value::Object(spec)
}

/// `result` as JSON, or null with its message recorded as the error of `field`.
fn field_result<T: serde::Serialize>(
    field: &str,
    result: Result<T, String>,
    errors: &mut FieldErrors,
) -> Value {
    match result {
        Ok(value) => json!(value),
        Err(message) => {
            errors.insert(field.to_owned(), message);
            Value::Null
        }
    }
}

/// The non-blank lines of a textarea with their 1-based numbers (`str::lines` also
/// drops the CR of the CRLF browsers send).
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(_, line)| !line.trim().is_empty())
}

/// One argument per non-blank line, exactly as typed: arguments are passed as they are.
fn args(text: &str) -> Vec<String> {
    lines(text).map(|(_, line)| line.to_owned()).collect()
}

/// How a textarea of `name<separator>value` lines reads.
struct PairLines {
    /// Between name and value.
    separator: char,
    /// The expected form of a line, for messages.
    shape: &'static str,
    /// What a name is, for messages.
    what: &'static str,
    /// Whether the value loses its surrounding spaces (HTTP ignores them; a variable
    /// keeps them).
    trim_value: bool,
    /// Whether names differing in case are the same name.
    fold_case: bool,
}

const ENV_LINES: PairLines = PairLines {
    separator: '=',
    shape: "KEY=VALUE",
    what: "variable",
    trim_value: false,
    fold_case: false,
};

const HEADER_LINES: PairLines = PairLines {
    separator: ':',
    shape: "Name: value",
    what: "header",
    trim_value: true,
    fold_case: true,
};

/// A map from its non-blank lines; the first bad line is the error.
fn pairs(text: &str, how: &PairLines) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for (number, line) in lines(text) {
        let Some((name, value)) = line.split_once(how.separator) else {
            return Err(format!("line {number}: expected {}", how.shape));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("line {number}: the {} name is missing", how.what));
        }
        let same = |known: &String| match how.fold_case {
            true => known.eq_ignore_ascii_case(name),
            false => known == name,
        };
        if map.keys().any(same) {
            return Err(format!("line {number}: {name} is given twice"));
        }
        let value = if how.trim_value { value.trim() } else { value };
        map.insert(name.to_owned(), value.to_owned());
    }
    Ok(map)
}

/// Status codes separated by commas (or spaces); the range is the service's to check.
fn statuses(text: &str) -> Result<Vec<u16>, String> {
    text.split([',', ' ', '\t', '\r', '\n'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<u16>()
                .map_err(|_| format!("{part:?} is not a status code; give numbers separated by commas"))
        })
        .collect()
}

/// The job form's errors: those it shows next to a field (errors inside a spec field,
/// like `spec.env.PATH` or `spec.args[2]`, moved onto that field), and the rest, which
/// the page lists at the top.
pub fn job_form_errors(errors: FieldErrors) -> (FieldErrors, FieldErrors) {
    let mut placed = FieldErrors::new();
    let mut rest = FieldErrors::new();
    for (key, message) in errors {
        let Some((field, message)) = form_field_of(&key, &message) else {
            rest.insert(key, message);
            continue;
        };
        match placed.get_mut(&field) {
            Some(earlier) => {
                earlier.push_str("; ");
                earlier.push_str(&message);
            }
            None => {
                placed.insert(field, message);
            }
        }
    }
    (placed, rest)
}

/// The form field an error key belongs to, with the message to show there.
fn form_field_of(key: &str, message: &str) -> Option<(String, String)> {
    if JOB_FORM_FIELDS.contains(&key) {
        return Some((key.to_owned(), message.to_owned()));
    }
    for field in ["spec.env", "spec.headers", "params_schema"] {
        if let Some(name) = key.strip_prefix(field).and_then(|rest| rest.strip_prefix('.')) {
            return Some((field.to_owned(), format!("{name}: {message}")));
        }
    }
    let (field, index) = key.strip_suffix(']')?.split_once('[')?;
    let index: usize = index.parse().ok()?;
    match field {
        "spec.args" => Some((field.to_owned(), format!("argument {}: {message}", index + 1))),
        // The message names the status itself.
        "spec.expect_status" => Some((field.to_owned(), message.to_owned())),
        _ => None,
    }
}

/// The job form's fields for a stored spec (args, env and headers one per line), and a
/// warning when the form cannot show the spec as it is (saving would change it).
pub fn spec_values(kind: JobKind, spec: &Value) -> (HashMap<String, String>, Option<String>) {
    let mut values = HashMap::new();
    let parsed = match JobSpec::parse(kind, spec) {
        Ok(parsed) => parsed,
        Err(err) => {
            let warning = format!("The stored spec is not valid ({err}); fill in the fields again.");
            return (values, Some(warning));
        }
    };
    let mut set = |key: &str, value: String| {
        values.insert(format!("spec.{key}"), value);
    };
    let faithful = match parsed {
        JobSpec::Shell(shell) => {
            set("program", shell.program.clone());
            set("args", shell.args.join("\n"));
            set("env", lines_of(&shell.env, "="));
            set("cwd", shell.cwd.clone().unwrap_or_default());
            if shell.shell {
                set("shell", "on".to_owned());
            }
            shell_fits(&shell)
        }
        JobSpec::Http(http) => {
            set("method", http.method.clone());
            set("url", http.url.clone());
            set("headers", lines_of(&http.headers, ": "));
            set("body", http.body.clone().unwrap_or_default());
            let codes: Vec<String> = http.expect_status.iter().map(u16::to_string).collect();
            set("expect_status", codes.join(", "));
            set("follow_redirects", http.follow_redirects.as_str().to_owned());
            http_fits(&http)
        }
        JobSpec::Noop => true,
        JobSpec::Sleep { millis } => {
            set("millis", millis.to_string());
            true
        }
    };
    let warning = (!faithful).then(|| {
        "This job's spec has empty arguments, line breaks or surrounding spaces that this form \
         cannot show one per line; saving it here changes them (the API keeps them)."
            .to_owned()
    });
    (values, warning)
}

fn lines_of(map: &BTreeMap<String, String>, separator: &str) -> String {
    let lines: Vec<String> = map
        .iter()
        .map(|(name, value)| format!("{name}{separator}{value}"))
        .collect();
    lines.join("\n")
}

/// Whether reading the shell fields back gives the same spec.
fn shell_fits(shell: &ShellSpec) -> bool {
    let line_safe = |text: &str| !text.contains(['\r', '\n']);
    let trimmed = |text: &str| text.trim() == text;
    trimmed(&shell.program)
        && line_safe(&shell.program)
        && shell
            .args
            .iter()
            .all(|arg| line_safe(arg) && !arg.trim().is_empty())
        && shell
            .env
            .iter()
            .all(|(key, value)| trimmed(key) && line_safe(value))
        && shell
            .cwd
            .as_deref()
            .is_none_or(|cwd| trimmed(cwd) && line_safe(cwd))
}

/// Whether reading the http fields back gives the same spec.
fn http_fits(http: &HttpSpec) -> bool {
    http.headers.values().all(|value| value.trim() == value)
        && http
            .body
            .as_deref()
            .is_none_or(|body| !body.contains('\r') && !body.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::super::tests::form;
    use super::*;
    use crate::error::ApiError;
    use probactr_common::model::{RetryBackoff, RetryJitter};

    /// The spec of a new job's form made of `pairs`, and the form's own problems.
    fn new_job_spec(pairs: &[(&str, &str)]) -> (Value, FieldErrors) {
        let draft = job_draft(&form(pairs));
        (draft.spec.unwrap_or(Value::Null), draft.problems)
    }

    /// The retry policy's advanced fields: lists read as numbers, a timeout box, bad
    /// lists named; a form without them leaves `retry_on` as it is.
    #[test]
    fn retry_fields_become_the_policy() {
        let draft = job_draft(&form(&[
            ("kind", "noop"),
            ("retry.backoff", "fixed"),
            ("retry.max_secs", ""),
            ("retry.jitter", "none"),
            ("retry.retry_on.exit_codes", "75, 111"),
            ("retry.retry_on.http_statuses", ""),
            ("retry.retry_on.timeouts", "on"),
        ]));
        assert!(draft.problems.is_empty(), "{:?}", draft.problems);
        assert_eq!(draft.retry.backoff, Some(Some(RetryBackoff::Fixed)));
        assert_eq!(draft.retry.max_secs, Some(None), "emptied: no bound");
        assert_eq!(draft.retry.jitter, Some(Some(RetryJitter::None)));
        assert_eq!(
            draft.retry.retry_on,
            Some(json!({"exit_codes": [75, 111], "http_statuses": [], "timeouts": true}))
        );
        let bad = job_draft(&form(&[("kind", "noop"), ("retry.retry_on.exit_codes", "75, x")]));
        assert!(
            bad.problems.contains_key("retry.retry_on.exit_codes"),
            "{:?}",
            bad.problems
        );
        let without = job_draft(&form(&[("kind", "noop")]));
        assert_eq!((without.retry.retry_on, without.retry.max_secs), (None, None));
    }

    #[test]
    fn job_form_becomes_a_command() {
        let draft = job_draft(&form(&[
            ("name", " a "),
            ("kind", "sleep"),
            ("spec.millis", "5"),
            ("timeout_secs", "30"),
            ("retry.max_attempts", "2"),
            ("parallel", "on"),
            ("max_concurrency", ""),
        ]));
        assert!(draft.problems.is_empty(), "{:?}", draft.problems);
        assert_eq!(draft.name, Some(Some("a".to_owned())));
        assert_eq!(draft.kind, Some(Some(JobKind::Sleep)));
        assert_eq!(draft.spec, Some(json!({"millis": 5})));
        assert_eq!(draft.timeout_secs, Some(Some(30)));
        assert_eq!(draft.retry.max_attempts, Some(Some(2)));
        assert_eq!(draft.retry.initial_secs, None, "an empty field keeps what was");
        assert_eq!(draft.parallel, Some(Some(true)));
        assert_eq!(draft.paused, Some(Some(false)));
        assert_eq!(draft.max_concurrency, Some(None), "emptied: no bound");
        assert_eq!(draft.params_schema, None, "not in the form: left as it is");

        let declared = job_draft(&form(&[
            ("kind", "noop"),
            ("params_schema", r#"{"day": {"type": "string"}}"#),
        ]));
        assert_eq!(declared.params_schema, Some(json!({"day": {"type": "string"}})));
        let emptied = job_draft(&form(&[("kind", "noop"), ("params_schema", " ")]));
        assert_eq!(emptied.params_schema, Some(Value::Null), "emptied: none declared");
        let bad = job_draft(&form(&[("kind", "noop"), ("params_schema", "{day")]));
        assert!(bad.problems.contains_key("params_schema"), "{:?}", bad.problems);

        let patch = job_patch(&form(&[
            ("kind", "sleep"),
            ("spec.millis", "soon"),
            ("timeout_secs", "soon"),
            ("version", "3"),
        ]));
        let problems = &patch.draft.problems;
        assert!(problems.contains_key("spec.millis") && problems.contains_key("timeout_secs"));
        assert_eq!(patch.version, Some(Some(3)));
    }

    #[test]
    fn every_bad_field_of_a_form_is_named_at_once() {
        let draft = job_draft(&form(&[
            ("name", ""),
            ("kind", "sleep"),
            ("spec.millis", "soon"),
            ("timeout_secs", "0"),
            ("retry.max_attempts", "1000"),
        ]));
        let Err(ApiError::Invalid(errors)) = draft.definition(None) else {
            panic!("an invalid form was accepted");
        };
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            ["name", "retry.max_attempts", "spec.millis", "timeout_secs"]
        );
    }

    #[test]
    fn shell_fields_become_the_spec() {
        let (spec, errors) = new_job_spec(&[
            ("kind", "shell"),
            ("spec.program", " /usr/bin/backup "),
            ("spec.args", "--full\r\n\r\n--label=a b \r\n"),
            ("spec.env", "HOME=/srv\r\n  LANG = C.UTF-8\r\nEMPTY=\r\nURL=a=b"),
            ("spec.cwd", ""),
            ("spec.shell", "on"),
            ("spec.url", "http://ignored/"),
            ("spec.millis", "not looked at"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            spec,
            json!({
                "program": "/usr/bin/backup",
                "args": ["--full", "--label=a b "],
                "env": {"HOME": "/srv", "LANG": " C.UTF-8", "EMPTY": "", "URL": "a=b"},
                "shell": true,
            })
        );
        let parsed = JobSpec::parse(JobKind::Shell, &spec).map_err(|e| e.to_string());
        assert!(parsed.is_ok(), "{parsed:?}");

        let (spec, errors) = new_job_spec(&[("kind", "shell")]);
        assert!(errors.is_empty());
        assert_eq!(spec, json!({"args": [], "env": {}, "shell": false}));
    }

    #[test]
    fn http_fields_become_the_spec() {
        let (spec, errors) = new_job_spec(&[
            ("kind", "http"),
            ("spec.method", "POST"),
            ("spec.url", " https://example.com/hook "),
            (
                "spec.headers",
                "Content-Type: application/json\r\nX-Token:  a:b \r\n",
            ),
            ("spec.body", "{\r\n  \"a\": 1\r\n}"),
            ("spec.expect_status", "200, 204,201"),
            ("spec.program", "ignored"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            spec,
            json!({
                "method": "POST",
                "url": "https://example.com/hook",
                "headers": {"Content-Type": "application/json", "X-Token": "a:b"},
                "body": "{\n  \"a\": 1\n}",
                "expect_status": [200, 204, 201],
            })
        );

        let (spec, errors) = new_job_spec(&[
            ("kind", "http"),
            ("spec.url", "http://h/"),
            ("spec.body", " \r\n"),
        ]);
        assert!(errors.is_empty());
        assert_eq!(
            spec,
            json!({"url": "http://h/", "headers": {}, "expect_status": []}),
            "empty fields are left to the defaults"
        );
    }

    #[test]
    fn noop_and_unknown_kinds() {
        let (spec, errors) = new_job_spec(&[("kind", "noop"), ("spec.program", "x"), ("spec.millis", "x")]);
        assert!(errors.is_empty());
        assert_eq!(spec, json!({}));
        let draft = job_draft(&form(&[("kind", "bogus"), ("spec.millis", "x")]));
        assert_eq!(
            draft.problems.keys().collect::<Vec<_>>(),
            ["kind"],
            "the kind is reported, not its spec"
        );
        assert!(draft.spec.is_none());
    }

    #[test]
    fn malformed_lines_are_errors_of_their_field() {
        // (kind, field, what was typed, part of the message)
        let cases = [
            ("shell", "spec.env", "A=1\nOOPS", "line 2: expected KEY=VALUE"),
            ("shell", "spec.env", "=1", "line 1: the variable name is missing"),
            ("shell", "spec.env", "A=1\n\nA=2", "line 3: A is given twice"),
            (
                "http",
                "spec.headers",
                "Accept text/html",
                "line 1: expected Name: value",
            ),
            (
                "http",
                "spec.headers",
                ": v",
                "line 1: the header name is missing",
            ),
            (
                "http",
                "spec.headers",
                "X-A: 1\nx-a: 2",
                "line 2: x-a is given twice",
            ),
            (
                "http",
                "spec.expect_status",
                "200, ok",
                "\"ok\" is not a status code",
            ),
            (
                "http",
                "spec.expect_status",
                "2.5",
                "\"2.5\" is not a status code",
            ),
            ("sleep", "spec.millis", "1s", "must be a whole number"),
        ];
        for (kind, field, typed, message) in cases {
            let errors = job_draft(&form(&[("kind", kind), (field, typed)])).problems;
            assert_eq!(errors.len(), 1, "{field} {typed:?}: {errors:?}");
            let got = errors.get(field).map(String::as_str).unwrap_or_default();
            assert!(got.contains(message), "{field} {typed:?}: {got:?}");
        }
    }

    #[test]
    fn service_errors_land_on_form_fields() {
        let errors = FieldErrors::from(
            [
                ("spec.program", "is required"),
                ("spec.env.PROBACTR_X", "reserved"),
                ("spec.headers.Bad Name", "not a valid header name"),
                ("spec.args[1]", "must not contain a NUL character"),
                ("spec.expect_status[0]", "99 is not a status code"),
                ("retry.max_attempts", "must be at most 100"),
                ("spec", "must be a JSON object"),
                ("version", "is required"),
                ("params_schema.day.type", "must be one of string, integer"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let (placed, rest) = job_form_errors(errors);
        assert_eq!(placed["spec.program"], "is required");
        assert_eq!(placed["spec.env"], "PROBACTR_X: reserved");
        assert_eq!(placed["spec.headers"], "Bad Name: not a valid header name");
        assert_eq!(
            placed["spec.args"],
            "argument 2: must not contain a NUL character"
        );
        assert_eq!(placed["spec.expect_status"], "99 is not a status code");
        assert_eq!(placed["retry.max_attempts"], "must be at most 100");
        assert_eq!(
            placed["params_schema"],
            "day.type: must be one of string, integer"
        );
        assert_eq!(rest.keys().collect::<Vec<_>>(), ["spec", "version"]);
    }

    #[test]
    fn stored_specs_fill_the_form_and_read_back_the_same() {
        let specs = [
            (
                JobKind::Shell,
                json!({"program": "backup", "args": ["--full", "a b"], "env": {"K": "v=w", "L": " x"},
                       "cwd": "/srv", "shell": true}),
            ),
            (
                JobKind::Http,
                json!({"method": "PUT", "url": "https://h/x", "headers": {"X-A": "1"},
                       "body": "line 1\nline 2", "expect_status": [200, 204]}),
            ),
            (JobKind::Http, json!({"url": "https://h/x"})),
            (JobKind::Sleep, json!({"millis": 1500})),
            (JobKind::Noop, json!({})),
        ];
        for (kind, spec) in specs {
            let (mut values, warning) = spec_values(kind, &spec);
            assert!(warning.is_none(), "{spec}: {warning:?}");
            values.insert("kind".into(), kind.to_string());
            let draft = job_draft(&FormData(values));
            assert!(draft.problems.is_empty(), "{spec}: {:?}", draft.problems);
            let read_back = draft.spec.unwrap_or(Value::Null);
            let stored = JobSpec::parse(kind, &spec).map(|s| s.to_json()).ok();
            let again = JobSpec::parse(kind, &read_back).map(|s| s.to_json()).ok();
            assert!(
                stored.is_some() && stored == again,
                "{spec} came back as {read_back}"
            );
        }
        let (values, _) = spec_values(
            JobKind::Shell,
            &json!({"program": "p", "env": {"A": "1", "B": "2"}}),
        );
        assert_eq!(values["spec.env"], "A=1\nB=2");

        for lossy in [
            json!({"program": "p", "args": [""]}),
            json!({"program": "p", "args": ["two\nlines"]}),
            json!({"program": "p", "env": {"K": "a\nb"}}),
            json!({"program": "echo a\necho b", "shell": true}),
        ] {
            assert!(spec_values(JobKind::Shell, &lossy).1.is_some(), "{lossy}");
        }
        assert!(
            spec_values(JobKind::Http, &json!({"url": "http://h/", "body": "a\r\nb"}))
                .1
                .is_some()
        );
        let (values, warning) = spec_values(JobKind::Sleep, &json!({"millis": "soon"}));
        assert!(values.is_empty() && warning.is_some_and(|w| w.contains("spec.millis")));
    }
}
