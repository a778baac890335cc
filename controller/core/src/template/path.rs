//! What a placeholder points at: a step key (or `input`) and a path below it.
//!
//! Paths are deliberately plain: `text`, `json`, then names and list positions
//! joined by dots, at most [`MAX_LEVELS`] deep. Anything that looks like an
//! expression is refused with a message saying so, because a placeholder that
//! silently meant something else would send the wrong data over the network.

use std::fmt;

use serde_json::Value;

use super::error::TemplateError;

/// How many names or list positions may follow `json`. Deeper data is reached
/// by keeping a nearer parent instead.
pub const MAX_LEVELS: usize = 8;

/// Names that the flow language uses for other roots; they can never be step
/// keys, so a placeholder naming one is a mistake worth reporting early.
const RESERVED: [&str; 6] = ["steps", "previous", "loop", "item", "index", "run"];

/// Which form of a step's result a path starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// `text`: the step's text (an agent's full reply, an HTTP body as text);
    /// for `input`, the run input as text.
    Text,
    /// `json`: the step's structured output (or the run input), possibly
    /// followed by segments.
    Json,
}

/// One step below `json`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A field name: a plain identifier (`title`, `messageId`, `_x1`).
    Name(String),
    /// A list position counted from 0. Against an object it reads the field
    /// with that name, so `json.by_year.2024` works too.
    Index(usize),
}

/// The part of a placeholder after the step key, e.g. `json.items.0.title`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Path {
    /// `text` or `json`.
    pub source: Source,
    /// The names and positions after `json` (always empty after `text`).
    pub segments: Vec<Segment>,
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.source {
            Source::Text => "text",
            Source::Json => "json",
        })?;
        for segment in &self.segments {
            match segment {
                Segment::Name(name) => write!(f, ".{name}")?,
                Segment::Index(index) => write!(f, ".{index}")?,
            }
        }
        Ok(())
    }
}

impl Path {
    /// Follows the segments from `value`. `None` when a field or position is
    /// not there or the value on the way has no fields; the caller reports
    /// that as a missing value.
    pub fn walk<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let mut current = value;
        for segment in &self.segments {
            current = match (segment, current) {
                (Segment::Name(name), Value::Object(map)) => map.get(name)?,
                (Segment::Index(index), Value::Array(list)) => list.get(*index)?,
                (Segment::Index(index), Value::Object(map)) => map.get(&index.to_string())?,
                _ => return None,
            };
        }
        Some(current)
    }
}

/// Characters that only make sense in an expression; each gets a message that
/// says placeholders do not evaluate anything.
fn expression_char(c: char) -> Option<String> {
    let message = match c {
        '$' => "placeholders are plain lookups, so `$` references cannot be used here; write {{step.json.field}}".to_string(),
        '(' | ')' => "placeholders are plain lookups, so function calls cannot be used here".to_string(),
        '[' | ']' => "write list positions with dots, for example json.items.0, not with brackets".to_string(),
        '+' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '&' | '|' | '?' | ':' | ',' | '^' | '~' => {
            format!("placeholders are plain lookups, so operators such as `{c}` cannot be used here")
        }
        '"' | '\'' | '`' => "quotes cannot appear inside a placeholder".to_string(),
        '{' => "`{` cannot appear inside a placeholder".to_string(),
        '}' => "a single `}` does not close a placeholder; write `}}`".to_string(),
        _ => return None,
    };
    Some(message)
}

const SPACES: &str = "spaces cannot appear inside a placeholder; write it as {{step.path}} (placeholders are plain lookups, not expressions)";

/// A piece of the content between dots, with the 1-based character position
/// of its first character.
struct Part<'a> {
    text: &'a str,
    position: usize,
}

fn split(content: &str, content_position: usize) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut start_byte = 0;
    let mut start_char = 0;
    for (char_index, (byte_index, c)) in content.char_indices().enumerate() {
        if c == '.' {
            parts.push(Part {
                text: &content[start_byte..byte_index],
                position: content_position + start_char,
            });
            start_byte = byte_index + 1;
            start_char = char_index + 1;
        }
    }
    parts.push(Part {
        text: &content[start_byte..],
        position: content_position + start_char,
    });
    parts
}

/// Reports the first character of `part` that no name may contain.
fn check_chars(part: &Part<'_>, dash_message: impl Fn() -> String) -> Result<(), TemplateError> {
    for (offset, c) in part.text.chars().enumerate() {
        let position = part.position + offset;
        if c.is_whitespace() {
            return Err(TemplateError::new(position, SPACES));
        }
        if c == '-' {
            return Err(TemplateError::new(position, dash_message()));
        }
        if !(c.is_ascii_alphanumeric() || c == '_') {
            return Err(TemplateError::new(
                position,
                format!("`{c}` cannot appear in a placeholder; names use letters, digits and _"),
            ));
        }
    }
    Ok(())
}

fn check_key(part: &Part<'_>) -> Result<(), TemplateError> {
    if part.text.is_empty() {
        return Err(TemplateError::new(
            part.position,
            "a placeholder starts with a step key or `input`, for example {{draft.text}}",
        ));
    }
    check_chars(part, || {
        format!(
            "`{}` is not a step key: step keys use only lowercase letters, digits and _",
            part.text
        )
    })?;
    if part.text == "input" {
        return Ok(());
    }
    for (offset, c) in part.text.chars().enumerate() {
        let fine = if offset == 0 {
            c.is_ascii_lowercase()
        } else {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
        };
        if !fine {
            return Err(TemplateError::new(
                part.position + offset,
                format!(
                    "`{}` is not a step key: a step key starts with a lowercase letter and uses only lowercase letters, digits and _",
                    part.text
                ),
            ));
        }
    }
    if RESERVED.contains(&part.text) {
        return Err(TemplateError::new(
            part.position,
            format!(
                "`{}` is a reserved name, not a step key; a placeholder reads a step ({{{{draft.text}}}}) or the run input ({{{{input.json.field}}}})",
                part.text
            ),
        ));
    }
    Ok(())
}

fn parse_segment(
    part: &Part<'_>,
    key: &str,
    parent: &[Part<'_>],
) -> Result<Segment, TemplateError> {
    if part.text.is_empty() {
        return Err(TemplateError::new(
            part.position,
            "a name is missing: dots must separate two names, as in json.items.0",
        ));
    }
    check_chars(part, || {
        let mut parent_path = format!("{key}.json");
        for p in parent {
            parent_path.push('.');
            parent_path.push_str(p.text);
        }
        format!(
            "`{}` is not a plain name, so it cannot be addressed; use its parent {{{{{parent_path}}}}} instead",
            part.text
        )
    })?;
    let text = part.text;
    if text.bytes().all(|b| b.is_ascii_digit()) {
        if text.len() > 1 && text.starts_with('0') {
            return Err(TemplateError::new(
                part.position,
                format!("list position `{text}` has a leading zero"),
            ));
        }
        return text.parse().map(Segment::Index).map_err(|_| {
            TemplateError::new(
                part.position,
                format!("list position `{text}` is too large"),
            )
        });
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(TemplateError::new(
            part.position,
            format!("`{text}` is not a plain name: a name starts with a letter or _"),
        ));
    }
    Ok(Segment::Name(text.to_string()))
}

/// Reads the content of a placeholder (`draft.json.title`, already trimmed)
/// into a key and a path.
pub(crate) fn parse_reference(
    content: &str,
    content_position: usize,
    open_position: usize,
) -> Result<(String, Path), TemplateError> {
    if content.is_empty() {
        return Err(TemplateError::new(
            open_position,
            "this placeholder is empty; write a step key and a path, for example {{draft.text}}",
        ));
    }
    for (offset, c) in content.chars().enumerate() {
        if let Some(message) = expression_char(c) {
            return Err(TemplateError::new(content_position + offset, message));
        }
    }
    if let Some(offset) = content.chars().position(char::is_whitespace) {
        return Err(TemplateError::new(content_position + offset, SPACES));
    }
    let parts = split(content, content_position);
    let key_part = &parts[0];
    check_key(key_part)?;
    let key = key_part.text;
    let Some(source_part) = parts.get(1) else {
        return Err(TemplateError::new(
            content_position + content.chars().count(),
            format!("a path must follow `{key}`: write {{{{{key}.text}}}} or {{{{{key}.json}}}}"),
        ));
    };
    let source = match source_part.text {
        "text" => Source::Text,
        "json" => Source::Json,
        other => {
            let hint = if other == "output" {
                " (a step's output is read with json)"
            } else {
                ""
            };
            return Err(TemplateError::new(
                source_part.position,
                format!("a path starts with text or json, not `{other}`{hint}"),
            ));
        }
    };
    let rest = &parts[2..];
    if source == Source::Text
        && let Some(extra) = rest.first()
    {
        return Err(TemplateError::new(
            extra.position,
            format!(
                "text is a whole text and has no fields; to read a field write {{{{{key}.json.…}}}}"
            ),
        ));
    }
    if let Some(too_deep) = rest.get(MAX_LEVELS) {
        return Err(TemplateError::new(
            too_deep.position,
            format!(
                "a path goes at most {MAX_LEVELS} levels below json; this one has {}",
                rest.len()
            ),
        ));
    }
    let mut segments = Vec::with_capacity(rest.len());
    for (i, part) in rest.iter().enumerate() {
        segments.push(parse_segment(part, key, &rest[..i])?);
    }
    Ok((key.to_string(), Path { source, segments }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(content: &str) -> Result<(String, Path), TemplateError> {
        parse_reference(content, 3, 1)
    }

    /// Why `content` is refused; the test knows it is.
    fn refusal(content: &str) -> TemplateError {
        parse(content).unwrap_err()
    }

    #[test]
    fn reads_key_source_and_segments() {
        let (key, path) = parse("fetch.json.items.0.title").unwrap();
        assert_eq!(key, "fetch");
        assert_eq!(path.source, Source::Json);
        assert_eq!(
            path.segments,
            vec![
                Segment::Name("items".into()),
                Segment::Index(0),
                Segment::Name("title".into())
            ]
        );
        assert_eq!(path.to_string(), "json.items.0.title");
    }

    #[test]
    fn walk_follows_names_positions_and_numeric_fields() {
        let (_, path) = parse("a.json.items.1.x").unwrap();
        let v = json!({"items": [{"x": 1}, {"x": 2}]});
        assert_eq!(path.walk(&v), Some(&json!(2)));
        let (_, path) = parse("a.json.by_year.2024").unwrap();
        assert_eq!(path.walk(&json!({"by_year": {"2024": 7}})), Some(&json!(7)));
        let (_, path) = parse("a.json.items.5").unwrap();
        assert_eq!(path.walk(&v), None);
        let (_, path) = parse("a.json.items.x").unwrap();
        assert_eq!(path.walk(&v), None);
    }

    #[test]
    fn error_positions_point_at_the_offending_character() {
        // content starts at character 3
        assert_eq!(refusal("a.json.x-y").position, 11);
        assert_eq!(refusal("a.output").position, 5);
        assert_eq!(refusal("a.text.x").position, 10);
        assert_eq!(refusal("a..text").position, 5);
        assert_eq!(refusal("a.json.").position, 10);
        assert_eq!(refusal("Draft.text").position, 3);
        assert_eq!(refusal("dRaft.text").position, 4);
    }

    #[test]
    fn leading_zero_and_huge_positions_are_refused() {
        assert!(refusal("a.json.01").message.contains("leading zero"));
        assert!(parse("a.json.0").is_ok());
        let huge = refusal("a.json.99999999999999999999999");
        assert!(huge.message.contains("too large"));
        assert!(parse("a.json.0abc").is_err());
    }
}
