//! Cutting text for previews and labels on a character boundary, so every
//! place that shows the start of a long value cuts it the same way.

/// The first `max` characters of `text` when it is longer than that;
/// `None` when it fits whole.
pub fn cut(text: &str, max: usize) -> Option<&str> {
    text.char_indices().nth(max).map(|(at, _)| &text[..at])
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
}
