//! How answers are printed: an aligned table for people (times to the second in the
//! chosen zone, which headings name), JSON or YAML (as the API answered) for scripts.

use serde_json::Value;

use crate::times;

/// The output format (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns.
    Table,
    /// JSON, as the API answered.
    Json,
    /// YAML.
    Yaml,
}

/// Prints `items` (objects) as `format`; a table shows `columns` (field, heading).
pub fn list(format: Format, items: &[Value], columns: &[(&str, &str)]) {
    match format {
        Format::Table => print!("{}", table(items, columns)),
        _ => one(format, &Value::Array(items.to_vec())),
    }
}

/// Prints one object: as JSON, YAML, or `field: value` lines.
pub fn one(format: Format, value: &Value) {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value).unwrap_or_default()),
        Format::Yaml => println!("{}", yaml(value)),
        Format::Table => {
            if let Value::Object(map) = value {
                print!("{}", fields(map));
            } else {
                println!("{}", cell(value));
            }
        }
    }
}

/// One object as `field  value` lines, aligned; times in the chosen zone, named.
pub fn fields(map: &serde_json::Map<String, Value>) -> String {
    let keys: Vec<String> = map.keys().map(|key| heading_of(key, key)).collect();
    let width = keys.iter().map(String::len).max().unwrap_or(0);
    keys.iter()
        .zip(map.values())
        .map(|(key, field)| format!("{key:width$}  {}\n", cell(field)))
        .collect()
}

/// A column's heading: with the zone its times are shown in, for a time field (`*_at`,
/// `instant`).
fn heading_of(field: &str, heading: &str) -> String {
    let last = field.rsplit('.').next().unwrap_or(field);
    if last.ends_with("_at") || last == "instant" {
        format!("{heading} ({})", times::zone().label())
    } else {
        heading.to_owned()
    }
}

/// The text of a table: a heading line and a line per item, columns aligned.
pub fn table(items: &[Value], columns: &[(&str, &str)]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| {
            columns
                .iter()
                .map(|(field, _)| cell(pointer(item, field)))
                .collect()
        })
        .collect();
    let headings: Vec<String> = columns
        .iter()
        .map(|(field, heading)| heading_of(field, heading))
        .collect();
    let widths: Vec<usize> = headings
        .iter()
        .enumerate()
        .map(|(i, heading)| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([heading.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut text = line(headings.clone());
    for row in rows {
        text.push_str(&line(row));
    }
    text
}

fn pointer<'a>(item: &'a Value, field: &str) -> &'a Value {
    item.pointer(&format!("/{}", field.replace('.', "/")))
        .unwrap_or(&Value::Null)
}

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(text) => {
            times::shown(text).unwrap_or_else(|| text.lines().next().unwrap_or("").to_owned())
        }
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// A JSON value as a YAML document.
pub fn yaml(value: &Value) -> String {
    probactr_definitions::yaml(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_show_times_to_the_second_in_the_named_zone() {
        crate::times::choose(true);
        let items = [json!({"id": 1, "finished_at": "2026-11-26T07:46:04.123456Z"})];
        let text = table(&items, &[("id", "ID"), ("finished_at", "FINISHED")]);
        assert_eq!(text, "ID  FINISHED (UTC)\n1   2026-11-26 07:46:04\n");
    }

    #[test]
    fn tables_align_and_show_absent_values_as_a_dash() {
        let items = [
            json!({"id": 1, "name": "nightly", "last": {"state": "ok"}}),
            json!({"id": 22, "name": "x"}),
        ];
        let text = table(&items, &[("id", "ID"), ("name", "NAME"), ("last.state", "LAST")]);
        assert_eq!(text, "ID  NAME     LAST\n1   nightly  ok\n22  x        -\n");
    }

    #[test]
    fn yaml_of_json() {
        let text = yaml(&json!({"name": "a", "list": [1, 2]}));
        assert_eq!(text, "list:\n  - 1\n  - 2\nname: a");
    }
}
