//! Definitions written out as YAML (the emitter takes the JSON values the REST API
//! answers with).

use serde_json::Value;
use yaml_rust2::{Yaml, YamlEmitter};

/// A JSON value as a YAML document.
pub fn yaml(value: &Value) -> String {
    let mut out = String::new();
    let mut emitter = YamlEmitter::new(&mut out);
    // Emitting into a String cannot fail.
    let _ = emitter.dump(&to_yaml(value));
    out.trim_start_matches("---\n").to_owned()
}

fn to_yaml(value: &Value) -> Yaml {
    match value {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(items) => Yaml::Array(items.iter().map(to_yaml).collect()),
        Value::Object(map) => Yaml::Hash(
            map.iter()
                .map(|(k, v)| (Yaml::String(k.clone()), to_yaml(v)))
                .collect(),
        ),
    }
}
