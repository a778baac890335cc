//! A YAML writer whose output means the same to a YAML 1.1 reader (kubectl,
//! Argo CD, anything built on go-yaml v2) as to a YAML 1.2 reader (serde_yaml).
//!
//! serde_yaml 0.9 quotes a string only when YAML 1.2 would read it as
//! something else, so it writes `on`, `yes`, `0x1f` or `1_000` bare, and a
//! YAML 1.1 reader turns them into a boolean or a number: `kubectl apply`
//! then refused our own CRDs. This writer decides every scalar's style
//! itself: a string is written bare only when it starts with a letter (or one
//! of a few harmless characters) and is not one of the words YAML 1.1 or 1.2
//! gives a meaning; multi-line text becomes a literal block; everything else
//! is double-quoted with escapes.

use serde::Serialize;
use serde_json::{Map, Value};

/// The plain scalars YAML 1.1 reads as booleans. None of them may be a field
/// name either: kubectl would read the key itself as `true`/`false`.
pub const YAML_1_1_BOOLEANS: [&str; 22] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
    "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
];

/// The plain scalars YAML 1.1 and 1.2 read as null (besides `~` and the empty
/// string, which never pass the first-character rule).
const NULLS: [&str; 3] = ["null", "Null", "NULL"];

/// Writes `value` as block-style YAML (one document, no `---`), with every
/// string styled so that YAML 1.1 and 1.2 readers read the same value.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = String::new();
    match &value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        other => {
            out.push_str(&inline(other).unwrap_or_else(|| quoted(&text_of(other))));
            out.push('\n');
        }
    }
    Ok(out)
}

/// Whether `s` must be quoted to read as the string `s` under both YAML 1.1
/// and YAML 1.2. Errs on the side of quoting: a bare scalar must start with a
/// letter, `_`, `/`, `$`, `(` or `^` (so nothing numeric, no indicator, no
/// `~`, `.inf`, `<<` or `=`), hold no `: `, ` #` or line break, and not be a
/// boolean or null word.
pub fn needs_quotes(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return true;
    };
    let safe_start = first.is_alphabetic() || matches!(first, '_' | '/' | '$' | '(' | '^');
    !safe_start
        || s.ends_with([' ', ':'])
        || s.contains(": ")
        || s.contains(" #")
        || !s.chars().all(printable_in_line)
        || YAML_1_1_BOOLEANS.contains(&s)
        || NULLS.contains(&s)
}

/// A character YAML 1.1 and 1.2 accept inside one line of a plain or literal
/// scalar: printable, and not one of the Unicode line breaks (NEL, LS, PS)
/// that YAML 1.1 counts as new lines, nor a byte-order mark.
fn printable_in_line(c: char) -> bool {
    !(c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        ))
}

fn write_map(out: &mut String, map: &Map<String, Value>, indent: usize) {
    for (i, (key, value)) in map.iter().enumerate() {
        // The first entry of a map inside a sequence follows its `- `.
        if i > 0 || !out.ends_with("- ") {
            pad(out, indent);
        }
        out.push_str(&scalar_key(key));
        out.push(':');
        write_value(out, value, indent, true);
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for (i, item) in items.iter().enumerate() {
        // The first item of a sequence inside a sequence follows its `- `.
        if i > 0 || !out.ends_with("- ") {
            pad(out, indent);
        }
        out.push('-');
        write_value(out, item, indent, false);
    }
}

/// Writes what follows `key:` (`in_map`) or `-`: an inline scalar or empty
/// collection, a literal block, or a nested block collection. Like serde_yaml,
/// a sequence under a key is not indented further.
fn write_value(out: &mut String, value: &Value, indent: usize, in_map: bool) {
    if let Some(text) = inline(value) {
        out.push(' ');
        out.push_str(&text);
        out.push('\n');
        return;
    }
    match value {
        Value::String(s) => write_literal(out, s, indent + 2),
        Value::Object(map) if in_map => {
            out.push('\n');
            write_map(out, map, indent + 2);
        }
        Value::Array(items) if in_map => {
            out.push('\n');
            write_seq(out, items, indent);
        }
        Value::Object(map) => {
            out.push(' ');
            write_map(out, map, indent + 2);
        }
        Value::Array(items) => {
            out.push(' ');
            write_seq(out, items, indent + 2);
        }
        _ => unreachable!("inline() writes every other value"),
    }
}

/// The one-line form of a scalar or an empty collection; `None` for a
/// non-empty collection or a string that needs a literal block.
fn inline(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if literal_fits(s) => None,
        Value::String(s) if needs_quotes(s) => Some(quoted(s)),
        Value::String(s) => Some(s.clone()),
        Value::Array(items) if items.is_empty() => Some("[]".to_owned()),
        Value::Object(map) if map.is_empty() => Some("{}".to_owned()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

fn scalar_key(key: &str) -> String {
    if needs_quotes(key) {
        quoted(key)
    } else {
        key.to_owned()
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether `s` can be a literal block (`|` or `|-`) that both YAML versions
/// read back exactly: it has a line break, ends with at most one, its first
/// line does not start with a space, and every line holds only printable
/// characters (no tab: readers differ on tabs next to indentation) and no
/// trailing space to lose.
fn literal_fits(s: &str) -> bool {
    let body = s.strip_suffix('\n').unwrap_or(s);
    body.contains('\n')
        && !body.ends_with('\n')
        && !body.starts_with([' ', '\n'])
        && body
            .split('\n')
            .all(|line| !line.ends_with(' ') && line.chars().all(printable_in_line))
}

fn write_literal(out: &mut String, s: &str, indent: usize) {
    let (chomp, body) = match s.strip_suffix('\n') {
        Some(body) => ("|", body),
        None => ("|-", s),
    };
    out.push(' ');
    out.push_str(chomp);
    out.push('\n');
    for line in body.split('\n') {
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// `s` as a double-quoted scalar. Only escapes both YAML versions know are
/// used: `\"`, `\\`, `\n`, `\t` and `\uXXXX` (`\UXXXXXXXX` above U+FFFF is
/// never needed: every character escaped here is in the first plane).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if !printable_in_line(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

#[cfg(test)]
mod tests;
