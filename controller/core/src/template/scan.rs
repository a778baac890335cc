//! Splitting template text into literal runs and placeholders.
//!
//! Only `{{` starts a placeholder; a single `{` or `}` is ordinary text. In a
//! run of three or more `{`, the last two open the placeholder and the rest are
//! text, so a JSON body may put a placeholder right after an object's `{`.
//! Positions are counted in characters from 1, as editors show them.

use super::error::TemplateError;

/// One piece of a template, borrowed from its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Text copied as is.
    Literal {
        text: &'a str,
        /// 1-based character position of its first character.
        position: usize,
    },
    /// A placeholder: what stands between `{{` and `}}`, with the spaces and
    /// tabs around it removed.
    Hole {
        content: &'a str,
        /// 1-based character position of the first character of `content`
        /// (or of the closing `}}` when it is empty).
        content_position: usize,
        /// 1-based character position of the opening `{{`.
        open_position: usize,
    },
}

fn unclosed(open: usize) -> TemplateError {
    TemplateError::new(
        open,
        "this `{{` starts a placeholder that is never closed with `}}`",
    )
}

/// Splits `src` into pieces, or says where a placeholder is left open.
pub(crate) fn scan(src: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let n = chars.len();
    let byte_at = |i: usize| chars.get(i).map_or(src.len(), |&(b, _)| b);
    let is = |i: usize, c: char| chars.get(i).is_some_and(|&(_, x)| x == c);

    let mut pieces = Vec::new();
    let mut literal_start = 0;
    let mut i = 0;
    while i < n {
        if !(is(i, '{') && is(i + 1, '{')) {
            i += 1;
            continue;
        }
        let mut after = i;
        while is(after, '{') {
            after += 1;
        }
        let open = after - 2;
        if open > literal_start {
            pieces.push(Piece::Literal {
                text: &src[byte_at(literal_start)..byte_at(open)],
                position: literal_start + 1,
            });
        }
        let mut close = after;
        loop {
            if close >= n || (is(close, '{') && is(close + 1, '{')) {
                return Err(unclosed(open + 1));
            }
            if is(close, '}') && is(close + 1, '}') {
                break;
            }
            close += 1;
        }
        let blank = |k: usize| matches!(chars[k].1, ' ' | '\t');
        let mut start = after;
        while start < close && blank(start) {
            start += 1;
        }
        let mut end = close;
        while end > start && blank(end - 1) {
            end -= 1;
        }
        pieces.push(Piece::Hole {
            content: &src[byte_at(start)..byte_at(end)],
            content_position: start + 1,
            open_position: open + 1,
        });
        i = close + 2;
        literal_start = i;
    }
    if literal_start < n {
        pieces.push(Piece::Literal {
            text: &src[byte_at(literal_start)..],
            position: literal_start + 1,
        });
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holes(src: &str) -> Vec<(String, usize)> {
        scan(src)
            .unwrap()
            .into_iter()
            .filter_map(|p| match p {
                Piece::Hole {
                    content,
                    open_position,
                    ..
                } => Some((content.to_string(), open_position)),
                Piece::Literal { .. } => None,
            })
            .collect()
    }

    #[test]
    fn positions_count_characters_not_bytes() {
        assert_eq!(holes("é✓ {{a.text}}"), vec![("a.text".into(), 4)]);
    }

    #[test]
    fn single_braces_are_text() {
        let pieces = scan("{ } {a} }}").unwrap();
        assert_eq!(
            pieces,
            vec![Piece::Literal {
                text: "{ } {a} }}",
                position: 1
            }]
        );
    }

    #[test]
    fn extra_opening_braces_are_text() {
        let pieces = scan("{{{a.json}}}").unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece::Literal {
                    text: "{",
                    position: 1
                },
                Piece::Hole {
                    content: "a.json",
                    content_position: 4,
                    open_position: 2
                },
                Piece::Literal {
                    text: "}",
                    position: 12
                },
            ]
        );
    }

    #[test]
    fn surrounding_blanks_are_trimmed() {
        assert_eq!(holes("x{{ \ta.text  }}"), vec![("a.text".into(), 2)]);
    }

    #[test]
    fn unclosed_points_at_the_opening() {
        assert_eq!(scan("ab {{a.text").unwrap_err().position, 4);
        assert_eq!(scan("{{a.text {{b.text}}").unwrap_err().position, 1);
        assert_eq!(scan("x {{").unwrap_err().position, 3);
    }
}
