//! Declared run parameters: a job's or a workflow's `params_schema`, `{NAME: {type,
//! values, pattern, min, max, required, default, secret}}`.
//!
//! A schema is checked when its job or workflow is written (every problem named as
//! `params_schema.NAME.FIELD`), and the parameters of every run (run now, trigger
//! params, workflow steps) are checked against it (`params.NAME`): missing required
//! ones, wrong types, values outside `values`/`min`/`max`/`pattern`, and undeclared
//! names are refused; defaults fill the optional ones left out.
//!
//! A `secret` parameter's value is sealed before it is stored (a `{"$sealed": …}` object
//! in place of the text, opened only by the executor about to run the job, only for a
//! parameter its job declares secret) and shown as `***` everywhere else.
//!
//! Patterns must match the whole value. They are compiled to a bounded DFA
//! (`regex-automata`, already a dependency of the log filter, with its DFA features
//! only): matching is linear in the value's length, and a pattern whose automaton would
//! grow past [`PATTERN_DFA_BYTES`] is refused when the schema is written, so no
//! parameter can make a check slow.

use std::collections::BTreeMap;

use base64::Engine;
use regex_automata::dfa::{dense, regex::Regex};
use serde_json::{Map, Number, Value};

use crate::secrets::{Keyring, Owner, Sealed, SecretError, MASK};

/// The most parameters a schema declares.
pub const MAX_PARAMS: usize = 100;
/// The longest parameter name.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest pattern.
pub const MAX_PATTERN_CHARS: usize = 1000;
/// The most values of an enum.
pub const MAX_ENUM_VALUES: usize = 200;
/// The largest automaton a pattern may compile to, in bytes.
pub const PATTERN_DFA_BYTES: usize = 1 << 20;
/// The key of the object standing for a sealed value in stored parameters.
pub const SEALED_KEY: &str = "$sealed";

/// Problems by field (`params_schema.day.type`, `params.day`), the first one of each.
pub type Problems = BTreeMap<String, String>;

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// true or false.
    Boolean,
    /// One of `values` (texts).
    Enum,
}

impl ParamType {
    /// Its name in a schema.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Enum => "enum",
        }
    }

    fn parse(text: &str) -> Option<ParamType> {
        [
            ParamType::String,
            ParamType::Integer,
            ParamType::Number,
            ParamType::Boolean,
            ParamType::Enum,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// One declared parameter.
#[derive(Debug, Clone)]
pub struct ParamSpec {
    /// Its type.
    pub kind: ParamType,
    /// The values an enum takes.
    pub values: Vec<String>,
    /// A pattern a string must match whole, as written.
    pub pattern: Option<String>,
    compiled: Option<Regex>,
    /// The least number, or a string's fewest characters.
    pub min: Option<f64>,
    /// The greatest number, or a string's most characters.
    pub max: Option<f64>,
    /// Must a run be given it?
    pub required: bool,
    /// The value a run left without it gets.
    pub default: Option<Value>,
    /// Sealed when stored, masked when shown.
    pub secret: bool,
}

/// A checked schema, its parameters by name.
#[derive(Debug, Clone, Default)]
pub struct ParamsSchema {
    /// The declared parameters.
    pub params: BTreeMap<String, ParamSpec>,
}

/// Whether `name` may name a parameter: letters, digits, `_` and `-`, 1 to 64.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl ParamsSchema {
    /// Reads a schema as given (`null`: none); every problem is named under `field`
    /// (`params_schema`).
    pub fn parse(value: &Value, field: &str) -> Result<Option<ParamsSchema>, Problems> {
        let mut problems = Problems::new();
        let declared = match value {
            Value::Null => return Ok(None),
            Value::Object(declared) => declared,
            _ => {
                problems.insert(
                    field.to_owned(),
                    "must be an object of parameter names to declarations, such as {\"day\": {\"type\": \"string\"}}"
                        .to_owned(),
                );
                return Err(problems);
            }
        };
        if declared.len() > MAX_PARAMS {
            problems.insert(
                field.to_owned(),
                format!("must declare at most {MAX_PARAMS} parameters"),
            );
            return Err(problems);
        }
        let mut schema = ParamsSchema::default();
        for (name, declaration) in declared {
            let at = format!("{field}.{name}");
            if !is_valid_name(name) {
                problems.insert(
                    at,
                    format!("a parameter name is 1 to {MAX_NAME_CHARS} letters, digits, _ or -"),
                );
                continue;
            }
            match ParamSpec::parse(declaration, &at) {
                Ok(spec) => {
                    schema.params.insert(name.clone(), spec);
                }
                Err((at, message)) => {
                    problems.entry(at).or_insert(message);
                }
            }
        }
        if problems.is_empty() {
            Ok(Some(schema))
        } else {
            Err(problems)
        }
    }

    /// The schema as stored and shown (normalized: the fields it uses only).
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.params
                .iter()
                .map(|(name, spec)| (name.clone(), spec.to_json()))
                .collect(),
        )
    }

    /// Checks a run's parameters (a JSON object) and fills the defaults of those left
    /// out; every problem named `params.NAME`.
    pub fn check(&self, params: &Value) -> Result<Map<String, Value>, Problems> {
        self.check_given(params, true)
    }

    /// Checks parameters that others may complete later (a workflow step's, under its
    /// workflow run's): the given ones are checked, none is required, no default filled.
    pub fn check_part(&self, params: &Value) -> Result<Map<String, Value>, Problems> {
        self.check_given(params, false)
    }

    fn check_given(&self, params: &Value, whole: bool) -> Result<Map<String, Value>, Problems> {
        let mut problems = Problems::new();
        let Some(given) = params.as_object() else {
            problems.insert("params".to_owned(), "must be a JSON object".to_owned());
            return Err(problems);
        };
        for name in given.keys().filter(|name| !self.params.contains_key(*name)) {
            problems.insert(
                format!("params.{name}"),
                format!("is not a declared parameter (declared: {})", self.names()),
            );
        }
        let mut checked = given.clone();
        for (name, spec) in &self.params {
            let at = format!("params.{name}");
            match given.get(name) {
                Some(value) => {
                    if let Err(message) = spec.check(value) {
                        problems.insert(at, message);
                    }
                }
                None if !whole => {}
                None => match &spec.default {
                    Some(default) => {
                        checked.insert(name.clone(), default.clone());
                    }
                    None if spec.required => {
                        problems.insert(at, "is required".to_owned());
                    }
                    None => {}
                },
            }
        }
        if problems.is_empty() {
            Ok(checked)
        } else {
            Err(problems)
        }
    }

    fn names(&self) -> String {
        if self.params.is_empty() {
            return "none".to_owned();
        }
        self.params
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether a parameter is declared secret.
    pub fn has_secrets(&self) -> bool {
        self.params.values().any(|spec| spec.secret)
    }

    /// The parameters with each secret one's value sealed (bound to its name).
    pub fn seal_secrets(&self, mut params: Map<String, Value>, keys: &Keyring) -> Map<String, Value> {
        for name in self
            .params
            .iter()
            .filter(|(_, spec)| spec.secret)
            .map(|(name, _)| name)
        {
            if let Some(Value::String(text)) = params.get(name) {
                let sealed = keys.seal(&Owner::Param(name.clone()), text);
                params.insert(name.clone(), sealed_value(&sealed));
            }
        }
        params
    }

    /// Opens the sealed values of the parameters this schema declares secret, for the
    /// run about to start; any other sealed value is left masked. Returns the clear
    /// values too, to mask them in what the run leaves.
    pub fn open_secrets(
        &self,
        params: &Value,
        keys: Option<&Keyring>,
    ) -> Result<(Value, Vec<String>), String> {
        let Some(given) = params.as_object() else {
            return Ok((params.clone(), Vec::new()));
        };
        let mut opened = Map::new();
        let mut values = Vec::new();
        for (name, value) in given {
            let Some(sealed) = sealed_of(value) else {
                opened.insert(name.clone(), value.clone());
                continue;
            };
            if !self.params.get(name).is_some_and(|spec| spec.secret) {
                opened.insert(name.clone(), Value::String(MASK.to_owned()));
                continue;
            }
            let keys = keys.ok_or_else(|| {
                format!("parameter {name} is secret but this executor has no PROBACTR_SECRET_KEY")
            })?;
            let text = keys
                .open(&Owner::Param(name.clone()), &sealed)
                .map_err(|err| err.to_string())?;
            values.push(text.clone());
            opened.insert(name.clone(), Value::String(text));
        }
        Ok((Value::Object(opened), values))
    }

    /// Fills the defaults of the parameters absent from `params` (a run queued with
    /// stored parameters: a trigger's, a workflow step's).
    pub fn with_defaults(&self, params: &Value) -> Value {
        let mut filled = params.as_object().cloned().unwrap_or_default();
        for (name, spec) in &self.params {
            if let (false, Some(default)) = (filled.contains_key(name), &spec.default) {
                filled.insert(name.clone(), default.clone());
            }
        }
        Value::Object(filled)
    }
}

/// Parameters as shown: every sealed value as `***`.
pub fn masked(params: &Value) -> Value {
    match params {
        Value::Object(given) => Value::Object(
            given
                .iter()
                .map(|(name, value)| {
                    let shown = if sealed_of(value).is_some() {
                        Value::String(MASK.to_owned())
                    } else {
                        value.clone()
                    };
                    (name.clone(), shown)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `params` with every value sealed under another key than the current one sealed again
/// under it (a key rotation); None when there was none. The error names the parameter
/// that does not open.
pub fn resealed(params: &Value, keys: &Keyring) -> Result<Option<Value>, SecretError> {
    let Some(given) = params.as_object() else {
        return Ok(None);
    };
    let mut out = given.clone();
    let mut changed = false;
    for (name, value) in given {
        let Some(sealed) = sealed_of(value).filter(|sealed| sealed.key_id != keys.current_id()) else {
            continue;
        };
        let owner = Owner::Param(name.clone());
        let clear = keys.open(&owner, &sealed)?;
        out.insert(name.clone(), sealed_value(&keys.seal(&owner, &clear)));
        changed = true;
    }
    Ok(changed.then_some(Value::Object(out)))
}

/// Whether a stored parameter's value is sealed.
pub fn is_sealed(value: &Value) -> bool {
    sealed_of(value).is_some()
}

fn sealed_value(sealed: &Sealed) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    serde_json::json!({SEALED_KEY: {
        "key": sealed.key_id,
        "nonce": b64.encode(&sealed.nonce),
        "data": b64.encode(&sealed.ciphertext),
    }})
}

/// The sealed value a stored parameter holds, if it is one.
fn sealed_of(value: &Value) -> Option<Sealed> {
    let inner = value
        .as_object()
        .filter(|object| object.len() == 1)?
        .get(SEALED_KEY)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let text = |key: &str| inner.get(key).and_then(Value::as_str);
    Some(Sealed {
        key_id: text("key")?.to_owned(),
        nonce: b64.decode(text("nonce")?).ok()?,
        ciphertext: b64.decode(text("data")?).ok()?,
        bound: true,
    })
}

impl ParamSpec {
    fn parse(declaration: &Value, at: &str) -> Result<ParamSpec, (String, String)> {
        let field = |name: &str| format!("{at}.{name}");
        let fail = |name: &str, message: &str| Err((field(name), message.to_owned()));
        let Some(given) = declaration.as_object() else {
            return Err((
                at.to_owned(),
                "must be an object such as {\"type\": \"string\", \"required\": true}".to_owned(),
            ));
        };
        const KNOWN: [&str; 8] = [
            "type", "values", "pattern", "min", "max", "required", "default", "secret",
        ];
        if let Some(unknown) = given.keys().find(|key| !KNOWN.contains(&key.as_str())) {
            return fail(
                unknown,
                &format!("is not a field of a parameter (fields: {})", KNOWN.join(", ")),
            );
        }
        let kind = match given.get("type").and_then(Value::as_str) {
            Some(text) => match ParamType::parse(text) {
                Some(kind) => kind,
                None => return fail("type", "must be string, integer, number, boolean or enum"),
            },
            None => return fail("type", "is required: string, integer, number, boolean or enum"),
        };
        let flag = |name: &str| match given.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(_) => Err((field(name), "must be true or false".to_owned())),
        };
        let bound = |name: &str| match given.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) => Ok(number.as_f64()),
            Some(_) => Err((field(name), "must be a number".to_owned())),
        };
        let mut spec = ParamSpec {
            kind,
            values: Vec::new(),
            pattern: None,
            compiled: None,
            min: bound("min")?,
            max: bound("max")?,
            required: flag("required")?,
            default: None,
            secret: flag("secret")?,
        };
        match (kind, given.get("values")) {
            (ParamType::Enum, Some(Value::Array(values))) if !values.is_empty() => {
                if values.len() > MAX_ENUM_VALUES {
                    return fail("values", &format!("must list at most {MAX_ENUM_VALUES} values"));
                }
                for value in values {
                    match value.as_str() {
                        Some(text) if !spec.values.iter().any(|known| known == text) => {
                            spec.values.push(text.to_owned())
                        }
                        Some(_) => return fail("values", "must not list a value twice"),
                        None => return fail("values", "must list texts"),
                    }
                }
            }
            (ParamType::Enum, _) => return fail("values", "an enum must list its values (texts)"),
            (_, None | Some(Value::Null)) => {}
            (_, Some(_)) => return fail("values", "only an enum takes values"),
        }
        match given.get("pattern") {
            None | Some(Value::Null) => {}
            Some(Value::String(pattern)) if kind == ParamType::String => {
                spec.compiled = Some(compile(pattern).map_err(|why| (field("pattern"), why))?);
                spec.pattern = Some(pattern.clone());
            }
            Some(Value::String(_)) => return fail("pattern", "only a string takes a pattern"),
            Some(_) => return fail("pattern", "must be a text"),
        }
        if matches!(kind, ParamType::Boolean | ParamType::Enum) {
            for name in ["min", "max"] {
                if given.get(name).is_some_and(|value| !value.is_null()) {
                    return fail(name, "only a string, an integer or a number takes bounds");
                }
            }
        }
        if let (Some(min), Some(max)) = (spec.min, spec.max) {
            if max < min {
                return fail("max", "must be at least min");
            }
        }
        if spec.secret && kind != ParamType::String {
            return fail("secret", "only a string parameter can be secret");
        }
        match given.get("default") {
            None | Some(Value::Null) => {}
            Some(_) if spec.required => return fail("default", "a required parameter takes no default"),
            Some(_) if spec.secret => {
                return fail(
                    "default",
                    "a secret parameter takes no default (it would be stored in the clear)",
                )
            }
            Some(default) => match spec.check(default) {
                Ok(()) => spec.default = Some(default.clone()),
                Err(why) => return Err((field("default"), why)),
            },
        }
        Ok(spec)
    }

    /// The declaration as stored.
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("type".to_owned(), Value::String(self.kind.as_str().to_owned()));
        if !self.values.is_empty() {
            out.insert(
                "values".to_owned(),
                Value::Array(self.values.iter().cloned().map(Value::String).collect()),
            );
        }
        if let Some(pattern) = &self.pattern {
            out.insert("pattern".to_owned(), Value::String(pattern.clone()));
        }
        for (name, bound) in [("min", self.min), ("max", self.max)] {
            if let Some(number) = bound.and_then(number_of) {
                out.insert(name.to_owned(), Value::Number(number));
            }
        }
        if self.required {
            out.insert("required".to_owned(), Value::Bool(true));
        }
        if let Some(default) = &self.default {
            out.insert("default".to_owned(), default.clone());
        }
        if self.secret {
            out.insert("secret".to_owned(), Value::Bool(true));
        }
        Value::Object(out)
    }

    /// Whether `value` is one this parameter takes; else why not.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match self.kind {
            ParamType::String => {
                let Some(text) = value.as_str() else {
                    return Err("must be a string".to_owned());
                };
                let chars = text.chars().count() as f64;
                if self.min.is_some_and(|min| chars < min) {
                    return Err(format!("must be at least {} characters", shown(self.min)));
                }
                if self.max.is_some_and(|max| chars > max) {
                    return Err(format!("must be at most {} characters", shown(self.max)));
                }
                if let (Some(regex), Some(pattern)) = (&self.compiled, &self.pattern) {
                    if !regex.is_match(text) {
                        return Err(format!("must match the pattern {pattern}"));
                    }
                }
                Ok(())
            }
            ParamType::Integer | ParamType::Number => {
                let number = match (self.kind, value) {
                    (ParamType::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => n.as_f64(),
                    (ParamType::Integer, _) => return Err("must be a whole number".to_owned()),
                    (_, Value::Number(n)) => n.as_f64(),
                    _ => return Err("must be a number".to_owned()),
                };
                let number = number.unwrap_or(f64::NAN);
                if self.min.is_some_and(|min| number < min) {
                    return Err(format!("must be at least {}", shown(self.min)));
                }
                if self.max.is_some_and(|max| number > max) {
                    return Err(format!("must be at most {}", shown(self.max)));
                }
                Ok(())
            }
            ParamType::Boolean => match value {
                Value::Bool(_) => Ok(()),
                _ => Err("must be true or false".to_owned()),
            },
            ParamType::Enum => match value.as_str() {
                Some(text) if self.values.iter().any(|known| known == text) => Ok(()),
                _ => Err(format!("must be one of {}", self.values.join(", "))),
            },
        }
    }
}

/// A bound as written (`5`, not `5.0`, for whole numbers).
fn shown(bound: Option<f64>) -> String {
    bound
        .and_then(number_of)
        .map(|n| n.to_string())
        .unwrap_or_default()
}

fn number_of(value: f64) -> Option<Number> {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        Some(Number::from(value as i64))
    } else {
        Number::from_f64(value)
    }
}

/// A pattern compiled to match whole values, within [`PATTERN_DFA_BYTES`].
fn compile(pattern: &str) -> Result<Regex, String> {
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!("must be at most {MAX_PATTERN_CHARS} characters"));
    }
    let limits = dense::Config::new()
        .dfa_size_limit(Some(PATTERN_DFA_BYTES))
        .determinize_size_limit(Some(PATTERN_DFA_BYTES));
    Regex::builder()
        .dense(limits)
        .build(&format!("^(?:{pattern})$"))
        .map_err(|err| format!("is not a usable pattern: {err}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> ParamsSchema {
        ParamsSchema::parse(&value, "params_schema")
            .expect("a good schema")
            .expect("a schema")
    }

    fn problems(value: Value) -> Problems {
        ParamsSchema::parse(&value, "params_schema").expect_err("a bad schema")
    }

    #[test]
    fn bad_schemas_name_the_field() {
        assert!(problems(json!({"day": {"type": "date"}})).contains_key("params_schema.day.type"));
        assert!(problems(json!({"day": {}})).contains_key("params_schema.day.type"));
        assert!(problems(json!({"e": {"type": "enum"}})).contains_key("params_schema.e.values"));
        assert!(problems(json!({"s": {"type": "string", "pattern": "("}}))
            .contains_key("params_schema.s.pattern"));
        assert!(problems(json!({"n": {"type": "integer", "min": 5, "max": 1}}))
            .contains_key("params_schema.n.max"));
        assert!(problems(json!({"n": {"type": "integer", "default": "x"}}))
            .contains_key("params_schema.n.default"));
        assert!(problems(json!({"t": {"type": "integer", "secret": true}}))
            .contains_key("params_schema.t.secret"));
        assert!(problems(json!({"bad name": {"type": "string"}})).contains_key("params_schema.bad name"));
        assert!(
            problems(json!({"x": {"type": "string", "colour": 1}})).contains_key("params_schema.x.colour")
        );
        assert!(problems(json!([1])).contains_key("params_schema"));
        assert!(ParamsSchema::parse(&Value::Null, "params_schema")
            .expect("null")
            .is_none());
    }

    #[test]
    fn params_are_checked_and_defaults_filled() {
        let schema = schema(json!({
            "day": {"type": "string", "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}", "required": true},
            "rows": {"type": "integer", "min": 1, "max": 10, "default": 5},
            "ratio": {"type": "number"},
            "dry": {"type": "boolean"},
            "env": {"type": "enum", "values": ["dev", "prod"]}
        }));
        let checked = schema.check(&json!({"day": "2030-01-02"})).expect("good params");
        assert_eq!(Value::Object(checked), json!({"day": "2030-01-02", "rows": 5}));
        let bad = schema
            .check(&json!({"day": "2030-1-2x", "rows": 11, "ratio": "1", "dry": 1, "env": "qa", "who": 1}))
            .expect_err("bad params");
        for field in ["day", "rows", "ratio", "dry", "env", "who"] {
            assert!(bad.contains_key(&format!("params.{field}")), "{field}: {bad:?}");
        }
        assert_eq!(
            schema.check(&json!({})).expect_err("missing")["params.day"],
            "is required"
        );
        assert!(schema.check(&json!({"day": "2030-01-02", "rows": 2.5})).is_err());
        assert!(schema.check_part(&json!({"rows": 3})).is_ok());
        // Stored parameters (a trigger's, a step's) get the defaults at run time.
        assert_eq!(
            schema.with_defaults(&json!({"day": "2030-01-02", "rows": 2})),
            json!({"day": "2030-01-02", "rows": 2})
        );
        assert_eq!(schema.with_defaults(&json!({}))["rows"], json!(5));
    }

    #[test]
    fn secrets_are_sealed_masked_and_opened() {
        let keys = Keyring::new(
            crate::secrets::SecretKey::parse("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").expect("a key"),
            None,
        );
        let schema = schema(json!({"token": {"type": "string", "secret": true}, "day": {"type": "string"}}));
        let checked = schema
            .check(&json!({"token": "hunter2", "day": "d"}))
            .expect("good");
        let sealed = Value::Object(schema.seal_secrets(checked, &keys));
        assert!(!sealed.to_string().contains("hunter2"));
        assert_eq!(masked(&sealed), json!({"token": "***", "day": "d"}));
        let (opened, values) = schema.open_secrets(&sealed, Some(&keys)).expect("opens");
        assert_eq!(opened, json!({"token": "hunter2", "day": "d"}));
        assert_eq!(values, vec!["hunter2".to_owned()]);
        // Another job, not declaring it secret, gets the mask, not the value.
        let other = ParamsSchema::default();
        let (opened, _) = other.open_secrets(&sealed, Some(&keys)).expect("masked");
        assert_eq!(opened["token"], json!("***"));
    }
}
