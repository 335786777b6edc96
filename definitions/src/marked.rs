//! YAML read into JSON values with the line of every value, so an error about a field
//! (found here or answered by the API) can name the file and line where it is written.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A YAML document as JSON, with the line of each value by JSON pointer (`/jobs/0/name`).
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// The content.
    pub value: Value,
    /// Line (1-based) of each value.
    pub lines: HashMap<String, usize>,
}

impl Document {
    /// The line of the value at `pointer`, or of its nearest ancestor that has one.
    pub fn line_of(&self, pointer: &str) -> usize {
        let mut path = pointer.to_owned();
        loop {
            if let Some(line) = self.lines.get(&path) {
                return *line;
            }
            match path.rfind('/') {
                Some(cut) => path.truncate(cut),
                None => return 1,
            }
        }
    }
}

/// How deeply collections may nest. Definitions need a handful of levels; the bound is
/// what keeps a hostile document from exhausting the stack (the parser's own loader, and
/// any walk of the value, recurse once per level).
pub const MAX_DEPTH: usize = 64;

/// The largest document read, in bytes.
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// Reads one YAML document; the error says at which line it stopped making sense. A
/// document larger than [`MAX_BYTES`] is refused before it is parsed, and one nested
/// deeper than [`MAX_DEPTH`] as soon as the parser reaches the level too many.
pub fn parse(text: &str) -> Result<Document, (usize, String)> {
    if text.len() > MAX_BYTES {
        return Err((
            1,
            format!("{} bytes, more than the {MAX_BYTES} allowed", text.len()),
        ));
    }
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    // Events are pulled one by one rather than through `Parser::load`, which recurses
    // once per level of nesting before anything could count the levels.
    let mut depth = 0usize;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|err| (err.marker().line(), err.info().to_owned()))?;
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err((mark.line(), format!("nested deeper than {MAX_DEPTH} levels")));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
        // One document is read; what follows its end is ignored, as before.
        let last = matches!(event, Event::DocumentEnd | Event::StreamEnd);
        builder.on_event(event, mark);
        if last {
            break;
        }
    }
    if let Some(problem) = builder.problem {
        return Err(problem);
    }
    let mut document = Document::default();
    if let Some(root) = builder
        .stack
        .pop()
        .and_then(|frame| frame.items.into_iter().next())
    {
        document.value = flatten(root, "", &mut document.lines);
    }
    Ok(document)
}

/// A value with its line, before the lines are moved into the document's table.
enum Node {
    Scalar(Value, usize),
    List(Vec<Node>, usize),
    Map(Vec<(String, Node)>, usize),
}

struct Frame {
    map: bool,
    line: usize,
    items: Vec<Node>,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    problem: Option<(usize, String)>,
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        let line = mark.line();
        match event {
            Event::StreamStart => self.stack.push(Frame {
                map: false,
                line,
                items: Vec::new(),
            }),
            Event::SequenceStart(..) => self.stack.push(Frame {
                map: false,
                line,
                items: Vec::new(),
            }),
            Event::MappingStart(..) => self.stack.push(Frame {
                map: true,
                line,
                items: Vec::new(),
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else { return };
                let node = if frame.map {
                    self.mapping(frame)
                } else {
                    Node::List(frame.items, frame.line)
                };
                self.push(node);
            }
            Event::Scalar(text, style, _, _) => self.push(Node::Scalar(scalar(text, style), line)),
            Event::Alias(_) => {
                self.problem
                    .get_or_insert((line, "aliases are not supported; write the value out".into()));
            }
            _ => {}
        }
    }
}

impl Builder {
    fn push(&mut self, node: Node) {
        if let Some(top) = self.stack.last_mut() {
            top.items.push(node);
        }
    }

    fn mapping(&mut self, frame: Frame) -> Node {
        let mut entries = Vec::new();
        let mut items = frame.items.into_iter();
        while let (Some(key), Some(value)) = (items.next(), items.next()) {
            match key {
                // A block mapping or list starts on the line after its key: errors about
                // it point at the key.
                Node::Scalar(Value::String(name), key_line) => entries.push((name, at_line(value, key_line))),
                Node::Scalar(other, _) => entries.push((other.to_string(), value)),
                Node::List(_, line) | Node::Map(_, line) => {
                    self.problem
                        .get_or_insert((line, "a key must be a plain name".into()));
                }
            }
        }
        Node::Map(entries, frame.line)
    }
}

fn at_line(node: Node, line: usize) -> Node {
    match node {
        Node::List(items, _) => Node::List(items, line),
        Node::Map(entries, _) => Node::Map(entries, line),
        scalar => scalar,
    }
}

/// A scalar as JSON: plain `null`, `true`, `false` and numbers are typed, the rest (and
/// anything quoted) is a string.
fn scalar(text: String, style: TScalarStyle) -> Value {
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => {
            if let Ok(int) = text.parse::<i64>() {
                Value::Number(int.into())
            } else if let Some(float) = text.parse::<f64>().ok().and_then(Number::from_f64) {
                Value::Number(float)
            } else {
                Value::String(text)
            }
        }
    }
}

fn flatten(node: Node, pointer: &str, lines: &mut HashMap<String, usize>) -> Value {
    match node {
        Node::Scalar(value, line) => {
            lines.insert(pointer.to_owned(), line);
            value
        }
        Node::List(items, line) => {
            lines.insert(pointer.to_owned(), line);
            let values = items
                .into_iter()
                .enumerate()
                .map(|(i, item)| flatten(item, &format!("{pointer}/{i}"), lines))
                .collect();
            Value::Array(values)
        }
        Node::Map(entries, line) => {
            lines.insert(pointer.to_owned(), line);
            let mut map = Map::new();
            for (key, value) in entries {
                let child = flatten(value, &format!("{pointer}/{key}"), lines);
                map.insert(key, child);
            }
            Value::Object(map)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn deep_or_large_documents_are_refused_naming_the_line() {
        // Block sequences nested on one line: the parser's own loader recursed through
        // them (flow collections stop at 255 levels in the scanner).
        let deep = format!("jobs:\n  {}x\n", "- ".repeat(3000));
        let (line, message) = parse(&deep).unwrap_err();
        assert_eq!(line, 2);
        assert!(message.contains("deeper than 64"), "{message}");
        let nested = (0..100).fold(String::from("x: 1"), |inner, _| format!("a:\n{}", indent(&inner)));
        assert!(parse(&nested).unwrap_err().1.contains("deeper than 64"));
        let fine = format!("a: {}1{}", "[".repeat(60), "]".repeat(60));
        assert!(parse(&fine).is_ok());
        let large = format!("a: \"{}\"", "x".repeat(MAX_BYTES));
        assert!(parse(&large).unwrap_err().1.contains("more than"));
    }

    fn indent(text: &str) -> String {
        text.lines().map(|line| format!("  {line}\n")).collect()
    }

    #[test]
    fn values_keep_their_lines() {
        let text = "jobs:\n  - name: nightly\n    timeout_secs: 60\n    spec:\n      program: \"007\"\n";
        let doc = parse(text).unwrap();
        assert_eq!(doc.value["jobs"][0]["timeout_secs"], 60);
        assert_eq!(doc.value["jobs"][0]["spec"]["program"], "007");
        assert_eq!(doc.line_of("/jobs/0/timeout_secs"), 3);
        assert_eq!(doc.line_of("/jobs/0/spec/program"), 5);
        assert_eq!(doc.line_of("/jobs/0/spec/nope"), 4);
    }

    #[test]
    fn broken_yaml_names_its_line() {
        let (line, _) = parse("jobs:\n  - name: a\n   bad: [\n").unwrap_err();
        assert!(line >= 2, "{line}");
    }
}
