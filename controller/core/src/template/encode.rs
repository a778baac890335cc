//! Turning a looked-up value into the characters that go into each place.
//!
//! Each function appends to an output buffer so rendering a whole template
//! allocates once. None of them ever interprets the value: text that looks
//! like a placeholder or an expression is just characters here.

use std::fmt::Write as _;

use serde_json::Value;

/// What a placeholder found, before it is encoded for its place.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Found<'a> {
    /// A `text` path: the value stands for its text form even in a JSON body
    /// (an object run input read as `input.text` becomes a JSON string there).
    Text(&'a Value),
    /// A `json` path: the value itself.
    Json(&'a Value),
}

/// Appends the text form of `value`: a string as itself, anything else as
/// compact JSON (`42`, `true`, `null`, `[1,2]`).
pub(crate) fn push_text(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => out.push_str(s),
        other => push_json_value(out, other),
    }
}

/// The text form of `value` (see [`push_text`]), borrowed when it is a string.
pub(crate) fn text_of(value: &Value) -> std::borrow::Cow<'_, str> {
    match value {
        Value::String(s) => std::borrow::Cow::Borrowed(s),
        other => std::borrow::Cow::Owned(other.to_string()),
    }
}

/// Bytes that must be escaped inside a JSON string: control characters, `"`
/// and `\`. A table keeps the common case (nothing to escape) a tight loop.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Appends `s` escaped as the inside of a JSON string literal (no quotes):
/// `"` and `\` are escaped, control characters become `\n`, `\t`, `\u0001`…;
/// everything else, including non-ASCII, is copied.
pub(crate) fn push_json_string_content(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !NEEDS_ESCAPE[usize::from(b)] {
            continue;
        }
        // `b` is ASCII, so `i` is a character boundary.
        out.push_str(&s[start..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            _ => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// Appends `value` as compact JSON.
fn push_json_value(out: &mut String, value: &Value) {
    // serde_json's own writer is much faster than going through `Display`;
    // serialising a `Value` cannot fail, but fall back to `Display` anyway.
    match serde_json::to_string(value) {
        Ok(text) => out.push_str(&text),
        Err(_) => {
            let _ = write!(out, "{value}");
        }
    }
}

/// Appends `found` for a placeholder inside a JSON string literal.
pub(crate) fn push_json_inside(out: &mut String, found: Found<'_>) {
    let value = match found {
        Found::Text(v) | Found::Json(v) => v,
    };
    match value {
        Value::String(s) => push_json_string_content(out, s),
        other => push_json_string_content(out, &other.to_string()),
    }
}

/// Appends `found` for a placeholder outside any JSON string: a whole JSON
/// value.
pub(crate) fn push_json_outside(out: &mut String, found: Found<'_>) {
    match found {
        Found::Json(v) => push_json_value(out, v),
        Found::Text(Value::String(s)) => {
            out.push('"');
            push_json_string_content(out, s);
            out.push('"');
        }
        Found::Text(other) => {
            out.push('"');
            push_json_string_content(out, &other.to_string());
            out.push('"');
        }
    }
}

/// Appends `s` percent-encoded for a URL: every byte except the unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) becomes `%XX`, so a value can never add
/// a `/`, `?`, `#`, `@`, `:` or `%` of its own.
pub(crate) fn push_percent_encoded(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
}

/// What may not appear in a header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderProblem {
    LineBreak,
    Control,
}

/// Checks a text destined for a header value: CR and LF would start a new
/// header line; other control characters (tab aside) are not allowed by HTTP.
pub(crate) fn header_problem(s: &str) -> Option<HeaderProblem> {
    let mut problem = None;
    for c in s.chars() {
        match c {
            '\r' | '\n' => return Some(HeaderProblem::LineBreak),
            '\t' => {}
            c if c.is_ascii_control() => problem = Some(HeaderProblem::Control),
            _ => {}
        }
    }
    problem
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percent_encoding_leaves_only_unreserved_characters() {
        let mut out = String::new();
        push_percent_encoded(&mut out, "a/b?c#d@e f%é~._-");
        assert_eq!(out, "a%2Fb%3Fc%23d%40e%20f%25%C3%A9~._-");
    }

    #[test]
    fn json_string_content_escapes_quotes_backslashes_and_controls() {
        let mut out = String::new();
        push_json_string_content(&mut out, "a\"b\\c\nd\te\u{1}f\u{8}\u{c}\ré✓");
        assert_eq!(out, "a\\\"b\\\\c\\nd\\te\\u0001f\\b\\f\\ré✓");
    }

    #[test]
    fn outside_quotes_text_becomes_a_json_string() {
        let mut out = String::new();
        push_json_outside(&mut out, Found::Text(&json!({"a": 1})));
        assert_eq!(out, r#""{\"a\":1}""#);
    }

    #[test]
    fn header_checks() {
        assert_eq!(header_problem("ok\tvalue"), None);
        assert_eq!(header_problem("a\rb"), Some(HeaderProblem::LineBreak));
        assert_eq!(header_problem("a\u{0}b\nc"), Some(HeaderProblem::LineBreak));
        assert_eq!(header_problem("a\u{7f}"), Some(HeaderProblem::Control));
    }
}
