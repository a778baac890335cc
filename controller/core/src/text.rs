//! Cutting text for previews and labels on a character boundary, so every
//! place that shows the start of a long value cuts it the same way; and
//! escaping text for a format, one character at a time.

/// The first `max` characters of `text` when it is longer than that;
/// `None` when it fits whole.
pub fn cut(text: &str, max: usize) -> Option<&str> {
    text.char_indices().nth(max).map(|(at, _)| &text[..at])
}

/// The largest character boundary of `text` at or before byte `at` (its
/// length when `at` is past the end): where a cut by bytes may fall. The
/// standard library's `floor_char_boundary` is newer than our Rust.
pub fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Each item in backticks, joined by `, `: how messages list names
/// (`` `a`, `b` ``), written so in one place.
pub fn quote_list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let quoted: Vec<String> = items.into_iter().map(|i| format!("`{i}`")).collect();
    quoted.join(", ")
}

/// `text` with every character `replace` has a replacement for written as
/// that replacement (`""` drops it), the others as they are: each format's
/// escaping (a label, an attribute, a quoted string) is a table for this.
pub fn escape(text: &str, replace: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match replace(c) {
            Some(with) => out.push_str(with),
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_characters_only_when_longer() {
        assert_eq!(cut("héllo", 2), Some("hé"));
        assert_eq!(cut("héllo", 5), None);
        assert_eq!(cut("", 0), None);
        assert_eq!(cut("ab", 0), Some(""));
    }

    #[test]
    fn byte_cuts_fall_on_characters() {
        assert_eq!(floor_boundary("héllo", 2), 1);
        assert_eq!(floor_boundary("héllo", 3), 3);
        assert_eq!(floor_boundary("ab", 9), 2);
    }

    #[test]
    fn lists_are_quoted_and_joined() {
        assert_eq!(quote_list(["a", "b"]), "`a`, `b`");
        assert_eq!(quote_list(Vec::<String>::new()), "");
    }

    #[test]
    fn escapes_only_what_the_table_names() {
        let table = |c| match c {
            '<' => Some("&lt;"),
            '\r' => Some(""),
            _ => None,
        };
        assert_eq!(escape("a<b\r\né", table), "a&lt;b\né");
    }
}
