//! How answers are printed: an aligned table for people, JSON or YAML for scripts.

use serde_json::Value;

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
                let width = map.keys().map(String::len).max().unwrap_or(0);
                for (key, field) in map {
                    println!("{key:width$}  {}", cell(field));
                }
            } else {
                println!("{}", cell(value));
            }
        }
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
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (_, heading))| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([heading.len()])
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
    let mut text = line(columns.iter().map(|(_, heading)| heading.to_string()).collect());
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
        Value::String(text) => text.lines().next().unwrap_or("").to_owned(),
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
