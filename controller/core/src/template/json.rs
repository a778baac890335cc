//! JSON bodies: which placeholders stand inside a string literal, and whether
//! the body is JSON whatever the values are.

use serde_json::Value;

use super::error::TemplateError;
use super::scan::Piece;
use super::{Mode, Part, Template};
use crate::text::floor_boundary;

/// For each placeholder in order, whether it stands inside a JSON string
/// literal, found by following quotes and backslash escapes in the literal
/// text around it. Inserted values are escaped, so they never change it.
pub(crate) fn string_context(pieces: &[Piece<'_>]) -> Result<Vec<bool>, TemplateError> {
    let mut inside = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for piece in pieces {
        match piece {
            Piece::Literal { text, .. } => {
                for c in text.chars() {
                    if !in_string {
                        in_string = c == '"';
                    } else if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        in_string = false;
                    }
                }
            }
            Piece::Hole { open_position, .. } => {
                if escaped {
                    return Err(TemplateError::new(
                        *open_position,
                        "a placeholder cannot follow a backslash inside a JSON string: the backslash would escape the value's first character",
                    ));
                }
                inside.push(in_string);
            }
        }
    }
    Ok(inside)
}

/// Where a piece of the stand-in document came from.
struct Origin {
    /// Byte offset in the stand-in document.
    start: usize,
    /// 1-based character position in the template.
    position: usize,
    /// For literal text, the text (to count characters within it).
    literal: Option<std::ops::Range<usize>>,
}

impl Template {
    /// Says whether this JSON body is valid JSON whatever values its
    /// placeholders receive, so a broken body is reported when the flow is
    /// saved rather than when the request is sent.
    ///
    /// Each placeholder is replaced by a stand-in (nothing inside a string
    /// literal, `null` outside one) and the result is parsed; an error points
    /// at the template character where parsing stopped. Templates parsed for
    /// another place have no JSON to check and always pass.
    pub fn check_json(&self) -> Result<(), TemplateError> {
        if self.place != super::Place::Json {
            return Ok(());
        }
        let mut doc = String::with_capacity(self.source.len());
        let mut origins = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            match part {
                Part::Literal { range, position } => {
                    origins.push(Origin {
                        start: doc.len(),
                        position: *position,
                        literal: Some(range.clone()),
                    });
                    doc.push_str(&self.source[range.clone()]);
                }
                Part::Hole { index, mode } => {
                    origins.push(Origin {
                        start: doc.len(),
                        position: self.placeholders[*index].position,
                        literal: None,
                    });
                    if *mode == Mode::JsonOutside {
                        doc.push_str("null");
                    }
                }
            }
        }
        let Err(error) = serde_json::from_str::<Value>(&doc) else {
            return Ok(());
        };
        let position = if error.classify() == serde_json::error::Category::Eof {
            // Reading stopped at the end of the text.
            self.source.chars().count() + 1
        } else {
            let offset = byte_offset(&doc, error.line(), error.column());
            self.map_back(&doc, &origins, offset)
        };
        let text = error.to_string();
        let reason = text
            .rfind(" at line ")
            .map_or(text.as_str(), |cut| &text[..cut]);
        Err(TemplateError::new(
            position,
            format!("this body is not JSON whatever the values are: {reason}"),
        ))
    }

    /// Maps a byte offset in the stand-in document to a template position.
    fn map_back(&self, doc: &str, origins: &[Origin], offset: usize) -> usize {
        if offset >= doc.len() {
            return self.source.chars().count() + 1;
        }
        let Some(origin) = origins.iter().rev().find(|o| o.start <= offset) else {
            return 1;
        };
        match &origin.literal {
            Some(range) => {
                let text = &self.source[range.clone()];
                let within = floor_boundary(text, offset - origin.start);
                origin.position + text[..within].chars().count()
            }
            None => origin.position,
        }
    }
}

/// serde_json reports a 1-based line and the count of bytes read on that line;
/// this turns them into the byte offset of the character it stopped at.
fn byte_offset(doc: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        doc.match_indices('\n')
            .nth(line - 2)
            .map_or(doc.len(), |(i, _)| i + 1)
    };
    line_start + column.saturating_sub(1)
}
