//! The `{{ ... }}` references of job definitions that are filled just before a run, beside
//! `{{ secrets.NAME }}` ([`crate::secrets`]): `{{ params.KEY }}` (a run's parameters) and
//! `{{ steps.NAME.output.KEY }}` (what an upstream workflow step wrote to its output
//! file). A path may go deeper into objects (`params.db.host`). A reference that names
//! nothing is left as written.
//!
//! # Encoded for where they land
//!
//! Parameters and step outputs come from whoever may run a job, or from another job's
//! output: they must fill a value, never change what the job does. So a value is encoded
//! for the place its reference is written in, and where no encoding can make it harmless
//! it is refused (the run fails naming the field):
//!
//! | place | a value becomes |
//! |---|---|
//! | URL path | one percent-encoded path segment (`/` and `?` included; `.` and `..` refused as a whole segment) |
//! | URL query or fragment | a percent-encoded value (`&`, `=`, `#` included) |
//! | URL scheme, userinfo, host, port | refused: when the job is saved ([`misplaced_in_url`]) and at run time |
//! | JSON body, inside a string | JSON-escaped string content |
//! | JSON body, outside strings | one JSON value (a string quoted; a number, `true`, `false`, `null` as that token) |
//! | form body (`application/x-www-form-urlencoded`) | a percent-encoded value |
//! | header value | its text; CR, LF and NUL refused |
//! | shell argument or variable | its text, one argument (there is no shell word splitting); NUL refused |
//! | any other body | its text |
//!
//! Where a reference stands is decided from the definition as written, never from the
//! values filled in: a value holding `?` or `"` cannot move the next reference elsewhere.
//! Secrets are filled before (by the executor, as written: they are set by admins, like
//! the definition itself), so this module sees them as part of the definition.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

/// What percent-encoding leaves alone: RFC 3986's unreserved characters, which mean
/// the same everywhere in a URL.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Stands for a reference in the skeleton of a text (never written by people in URLs or
/// JSON, and one byte long).
const HOLE: char = '\u{1}';

/// A value that cannot be filled where its reference stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A reference in the URL's scheme, userinfo, host or port.
    #[error(
        "{{{{ {reference} }}}} cannot be filled in the URL's {part}: only in its path, query or fragment"
    )]
    Misplaced {
        /// The reference, `params.u`.
        reference: String,
        /// `scheme`, `userinfo`, `host` or `port`.
        part: &'static str,
    },
    /// A value that cannot be there: a line break in a header, NUL anywhere, `..` as a
    /// path segment.
    #[error("the value of {{{{ {reference} }}}} {why}")]
    Refused {
        /// The reference.
        reference: String,
        /// Why, for a person.
        why: &'static str,
    },
}

/// Where a reference stands in a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Text,
    Argument,
    Header,
    UrlScheme,
    UrlUserinfo,
    UrlHost,
    UrlPort,
    UrlPath { whole_segment: bool },
    UrlQuery,
    JsonString,
    JsonValue,
    Form,
}

/// A text cut into what is written and the references it holds.
enum Piece<'a> {
    Literal(&'a str),
    /// The whole `{{ ... }}` and the trimmed reference inside.
    Reference(&'a str, &'a str),
}

fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        if start > 0 {
            pieces.push(Piece::Literal(&rest[..start]));
        }
        pieces.push(Piece::Reference(
            &rest[start..start + 4 + end],
            after[..end].trim(),
        ));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    pieces
}

/// The text with every reference replaced by [`HOLE`], and the byte offset of each hole.
fn skeleton(pieces: &[Piece<'_>]) -> (String, Vec<usize>) {
    let mut text = String::new();
    let mut holes = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Literal(literal) => text.push_str(literal),
            Piece::Reference(..) => {
                holes.push(text.len());
                text.push(HOLE);
            }
        }
    }
    (text, holes)
}

/// Fills `text`, deciding each reference's place with `place_of(skeleton, hole)`.
fn fill_with(
    text: &str,
    value_of: &dyn Fn(&str) -> Option<Value>,
    place_of: &dyn Fn(&str, usize) -> Place,
) -> Result<String, TemplateError> {
    let pieces = pieces(text);
    let (skeleton, holes) = skeleton(&pieces);
    let mut holes = holes.into_iter();
    let mut out = String::with_capacity(text.len());
    for piece in &pieces {
        match piece {
            Piece::Literal(literal) => out.push_str(literal),
            Piece::Reference(raw, reference) => {
                let hole = holes.next().unwrap_or_default();
                match value_of(reference) {
                    Some(value) => out.push_str(&encode(reference, &value, place_of(&skeleton, hole))?),
                    None => out.push_str(raw),
                }
            }
        }
    }
    Ok(out)
}

/// A value encoded for its place.
fn encode(reference: &str, value: &Value, place: Place) -> Result<String, TemplateError> {
    let refused = |why| TemplateError::Refused {
        reference: reference.to_owned(),
        why,
    };
    let misplaced = |part| TemplateError::Misplaced {
        reference: reference.to_owned(),
        part,
    };
    let text = as_text(value);
    if text.contains('\0') && !matches!(place, Place::JsonString | Place::JsonValue) {
        return Err(refused("holds a NUL character"));
    }
    Ok(match place {
        Place::Text | Place::Argument => text,
        Place::Header => {
            if text.contains(['\r', '\n']) {
                return Err(refused("holds a line break, which cannot be in a header value"));
            }
            text
        }
        Place::UrlScheme => return Err(misplaced("scheme")),
        Place::UrlUserinfo => return Err(misplaced("userinfo")),
        Place::UrlHost => return Err(misplaced("host")),
        Place::UrlPort => return Err(misplaced("port")),
        Place::UrlPath { whole_segment } => {
            if whole_segment && (text == "." || text == "..") {
                return Err(refused("is `.` or `..`, which cannot be a path segment"));
            }
            utf8_percent_encode(&text, NOT_UNRESERVED).to_string()
        }
        Place::UrlQuery | Place::Form => utf8_percent_encode(&text, NOT_UNRESERVED).to_string(),
        Place::JsonString => {
            let quoted = Value::String(text).to_string();
            quoted[1..quoted.len() - 1].to_owned()
        }
        Place::JsonValue => json_token(value),
    })
}

/// A value written outside JSON strings: one JSON value, whatever its text holds.
fn json_token(value: &Value) -> String {
    if let Value::String(text) = value {
        // Run parameters given on a command line are strings: `5` or `true` still fill a
        // number or a boolean, as the job's author wrote it unquoted.
        if let Ok(scalar @ (Value::Number(_) | Value::Bool(_) | Value::Null)) =
            serde_json::from_str::<Value>(text.trim())
        {
            return scalar.to_string();
        }
    }
    value.to_string()
}

/// A shell job's environment value or any text without structure: values as they are
/// (NUL refused).
pub fn fill_text(text: &str, value_of: &dyn Fn(&str) -> Option<Value>) -> Result<String, TemplateError> {
    fill_with(text, value_of, &|_, _| Place::Text)
}

/// A shell job's argument: one argument whatever the values hold (the program gets it
/// as one `argv` entry; no shell splits it).
pub fn fill_argument(text: &str, value_of: &dyn Fn(&str) -> Option<Value>) -> Result<String, TemplateError> {
    fill_with(text, value_of, &|_, _| Place::Argument)
}

/// A request header's value: CR and LF refused (they would start another header).
pub fn fill_header(text: &str, value_of: &dyn Fn(&str) -> Option<Value>) -> Result<String, TemplateError> {
    fill_with(text, value_of, &|_, _| Place::Header)
}

/// An HTTP job's URL: values percent-encoded in the path, query and fragment, refused
/// in the scheme and authority.
pub fn fill_url(text: &str, value_of: &dyn Fn(&str) -> Option<Value>) -> Result<String, TemplateError> {
    fill_with(text, value_of, &url_place)
}

/// How a request body is written, which decides how values are encoded in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// JSON: values escaped in strings, one JSON value outside them.
    Json,
    /// `application/x-www-form-urlencoded`: values percent-encoded.
    Form,
    /// Anything else: values as they are.
    Text,
}

impl BodyFormat {
    /// The format of `body` sent with the `Content-Type` `content_type`: JSON when the
    /// type says so, or when no type is given and the body starts like a JSON object or
    /// array.
    pub fn of(content_type: Option<&str>, body: &str) -> BodyFormat {
        if let Some(content_type) = content_type {
            let media = content_type
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            if media == "application/json" || media.ends_with("+json") {
                return BodyFormat::Json;
            }
            if media == "application/x-www-form-urlencoded" {
                return BodyFormat::Form;
            }
            return BodyFormat::Text;
        }
        let start = body.trim_start();
        // `{{` starts a reference, not an object.
        if start.starts_with('[') || (start.starts_with('{') && !start.starts_with("{{")) {
            BodyFormat::Json
        } else {
            BodyFormat::Text
        }
    }
}

/// An HTTP job's body, encoded for its format.
pub fn fill_body(
    text: &str,
    format: BodyFormat,
    value_of: &dyn Fn(&str) -> Option<Value>,
) -> Result<String, TemplateError> {
    match format {
        BodyFormat::Json => fill_with(text, value_of, &json_place),
        BodyFormat::Form => fill_with(text, value_of, &|_, _| Place::Form),
        BodyFormat::Text => fill_with(text, value_of, &|_, _| Place::Text),
    }
}

/// The first reference written in a URL's scheme, userinfo, host or port, as the error
/// that refuses it: what the manager checks before it stores a job. A secret may stand
/// in the userinfo (a password is what secrets are for; admins set both).
pub fn misplaced_in_url(url: &str) -> Option<TemplateError> {
    let pieces = pieces(url);
    let (skeleton, holes) = skeleton(&pieces);
    let references = pieces.iter().filter_map(|piece| match piece {
        Piece::Reference(_, reference) => Some(*reference),
        Piece::Literal(_) => None,
    });
    for (reference, hole) in references.zip(holes) {
        let part = match url_place(&skeleton, hole) {
            Place::UrlScheme => "scheme",
            Place::UrlUserinfo if !reference.starts_with("secrets.") => "userinfo",
            Place::UrlHost => "host",
            Place::UrlPort => "port",
            _ => continue,
        };
        return Some(TemplateError::Misplaced {
            reference: reference.to_owned(),
            part,
        });
    }
    None
}

/// Where the hole at byte `at` of a URL's skeleton stands.
fn url_place(skeleton: &str, at: usize) -> Place {
    let Some(scheme_end) = skeleton.find("://") else {
        return Place::UrlScheme;
    };
    if at < scheme_end + 3 {
        return Place::UrlScheme;
    }
    let authority_start = scheme_end + 3;
    let authority_end = skeleton[authority_start..]
        .find(['/', '?', '#'])
        .map_or(skeleton.len(), |end| authority_start + end);
    if at < authority_end {
        let authority = &skeleton[authority_start..authority_end];
        let offset = at - authority_start;
        if authority[offset..].contains('@') {
            return Place::UrlUserinfo;
        }
        let host_start = authority.rfind('@').map_or(0, |i| i + 1);
        let host_port = &authority[host_start..];
        let port_colon = match host_port.rfind(']') {
            Some(bracket) => host_port[bracket..].find(':').map(|i| bracket + i),
            None => host_port.find(':'),
        };
        return match port_colon {
            Some(colon) if offset > host_start + colon => Place::UrlPort,
            _ => Place::UrlHost,
        };
    }
    let before = &skeleton[authority_end..at];
    if before.contains(['?', '#']) {
        // The query and the fragment take the same encoding.
        return Place::UrlQuery;
    }
    let after = &skeleton[at + HOLE.len_utf8()..];
    let whole_segment = before.ends_with('/') && (after.is_empty() || after.starts_with(['/', '?', '#']));
    Place::UrlPath { whole_segment }
}

/// Whether the hole at byte `at` of a JSON skeleton stands inside a string.
fn json_place(skeleton: &str, at: usize) -> Place {
    let mut in_string = false;
    let mut escaped = false;
    for c in skeleton[..at].chars() {
        if escaped {
            escaped = false;
        } else if in_string && c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = !in_string;
        }
    }
    if in_string {
        Place::JsonString
    } else {
        Place::JsonValue
    }
}

/// The value of a reference to `params` or `steps`, given the run's parameters and its
/// upstream steps' outputs (step name → output).
pub fn input_value(reference: &str, params: &Value, upstream: &Value) -> Option<Value> {
    if let Some(path) = reference.strip_prefix("params.") {
        return at_path(params, path).cloned();
    }
    let rest = reference.strip_prefix("steps.")?;
    let (step, path) = rest.split_once(".output.")?;
    at_path(upstream.get(step)?, path).cloned()
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

/// The percent-encoded form of `text` as values are filled in URLs (what masking looks
/// for besides the text itself).
pub fn percent_encoded(text: &str) -> String {
    utf8_percent_encode(text, NOT_UNRESERVED).to_string()
}

/// `text` with each `{{ ... }}` reference replaced by `stand_in`: what a check of the
/// text's own structure looks at (a reference's spaces are no spaces of a URL).
pub fn with_references_as(text: &str, stand_in: &str) -> String {
    pieces(text)
        .iter()
        .map(|piece| match piece {
            Piece::Literal(literal) => *literal,
            Piece::Reference(..) => stand_in,
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn inputs() -> (Value, Value) {
        (
            json!({"day": "2030-01-02", "n": 3, "db": {"host": "pg"}, "id": "../../admin?x=",
                   "u": "evil.example/?", "inj": "x\", \"admin\": true, \"y\": \"", "five": "5",
                   "crlf": "a\r\nX-Admin: 1", "dots": ".."}),
            json!({"extract": {"rows": 12, "file": "/tmp/x"}}),
        )
    }

    #[test]
    fn params_and_step_outputs_are_filled_and_the_rest_left_alone() {
        let (params, upstream) = inputs();
        let value_of = |reference: &str| input_value(reference, &params, &upstream);
        assert_eq!(
            fill_argument(
                "--day={{ params.day }} n={{params.n}} {{ params.db.host }}",
                &value_of
            )
            .unwrap(),
            "--day=2030-01-02 n=3 pg"
        );
        assert_eq!(
            fill_text(
                "{{ steps.extract.output.rows }} {{ steps.extract.output.file }}",
                &value_of
            )
            .unwrap(),
            "12 /tmp/x"
        );
        assert_eq!(
            fill_text(
                "{{ params.nope }} {{ secrets.x }} {{ steps.other.output.a }} {{",
                &value_of
            )
            .unwrap(),
            "{{ params.nope }} {{ secrets.x }} {{ steps.other.output.a }} {{"
        );
    }

    #[test]
    fn url_values_stay_in_their_segment_or_query_value() {
        let (params, upstream) = inputs();
        let value_of = |reference: &str| input_value(reference, &params, &upstream);
        assert_eq!(
            fill_url("https://api.example.com/items/{{params.id}}?k=v", &value_of).unwrap(),
            "https://api.example.com/items/..%2F..%2Fadmin%3Fx%3D?k=v"
        );
        assert_eq!(
            fill_url(
                "https://h/q?a={{ params.id }}&b={{params.n}}#{{params.u}}",
                &value_of
            )
            .unwrap(),
            "https://h/q?a=..%2F..%2Fadmin%3Fx%3D&b=3#evil.example%2F%3F"
        );
        assert!(matches!(
            fill_url("https://h/a/{{params.dots}}/b", &value_of),
            Err(TemplateError::Refused { .. })
        ));
        assert_eq!(
            fill_url("https://h/a/v{{params.dots}}", &value_of).unwrap(),
            "https://h/a/v.."
        );
        for (url, part) in [
            ("https://{{params.u}}@api.example.com/", "userinfo"),
            ("https://{{ params.u }}/x", "host"),
            ("https://api.{{params.u}}:80/", "host"),
            ("https://h:{{params.n}}/", "port"),
            ("{{params.u}}://h/", "scheme"),
            ("{{params.u}}", "scheme"),
            ("https://[::1]:{{params.n}}/", "port"),
        ] {
            let expected = TemplateError::Misplaced {
                reference: url[url.find("{{").unwrap() + 2..url.find("}}").unwrap()]
                    .trim()
                    .to_owned(),
                part,
            };
            assert_eq!(fill_url(url, &value_of), Err(expected.clone()), "{url}");
            assert_eq!(misplaced_in_url(url), Some(expected), "{url}");
        }
        assert_eq!(
            misplaced_in_url("https://u:{{ secrets.pw }}@h/{{params.id}}?q={{params.n}}"),
            None
        );
        assert!(misplaced_in_url("https://{{ secrets.host }}/").is_some());
    }

    #[test]
    fn json_bodies_get_one_value_per_reference() {
        let (params, upstream) = inputs();
        let value_of = |reference: &str| input_value(reference, &params, &upstream);
        let body = r#"{"day": "{{ params.inj }}", "n": {{params.n}}, "five": {{ params.five }}, "db": {{params.db}}, "s": {{params.day}}, "lit": "a\"{{params.day}}"}"#;
        let filled = fill_body(body, BodyFormat::of(None, body), &value_of).unwrap();
        let parsed: Value = serde_json::from_str(&filled).unwrap();
        assert_eq!(
            parsed,
            json!({"day": "x\", \"admin\": true, \"y\": \"", "n": 3, "five": 5, "db": {"host": "pg"},
                   "s": "2030-01-02", "lit": "a\"2030-01-02"})
        );
        assert_eq!(
            fill_body("a={{params.id}}&b=1", BodyFormat::Form, &value_of).unwrap(),
            "a=..%2F..%2Fadmin%3Fx%3D&b=1"
        );
        assert_eq!(BodyFormat::of(None, "{{ params.x }}"), BodyFormat::Text);
        assert_eq!(
            BodyFormat::of(Some("application/vnd.x+json; charset=utf-8"), "x"),
            BodyFormat::Json
        );
        assert_eq!(
            BodyFormat::of(Some("Application/X-WWW-Form-Urlencoded"), "{"),
            BodyFormat::Form
        );
    }

    #[test]
    fn headers_refuse_line_breaks_and_nul_is_refused_everywhere_but_json() {
        let params = json!({"crlf": "a\r\nX-Admin: 1", "nul": "a\0b", "ok": "Bearer x"});
        let value_of = |reference: &str| input_value(reference, &params, &Value::Null);
        assert!(fill_header("{{params.crlf}}", &value_of).is_err());
        assert_eq!(fill_header("{{params.ok}}", &value_of).unwrap(), "Bearer x");
        assert!(fill_argument("{{params.nul}}", &value_of).is_err());
        assert!(fill_text("{{params.nul}}", &value_of).is_err());
        assert_eq!(
            fill_body("[\"{{params.nul}}\"]", BodyFormat::Json, &value_of).unwrap(),
            "[\"a\\u0000b\"]"
        );
    }
}
