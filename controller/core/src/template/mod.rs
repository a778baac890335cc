//! `{{step.path}}` placeholders in the text of HTTP and message steps.
//!
//! HTTP and message steps build URLs, headers and bodies from earlier steps'
//! results. A placeholder is a plain lookup — `{{draft.json.title}}`,
//! `{{input.text}}` — never an expression, and how its value is written depends
//! on where it stands ([`Place`]): percent-encoded in a URL, checked for line
//! breaks in a header, escaped inside a JSON string, as JSON outside one.
//!
//! A template is parsed once when the flow is read ([`parse`]), which is also
//! when malformed placeholders are reported with their position. The validator
//! lists what it reads ([`Template::placeholders`]) and checks JSON bodies
//! ([`Template::check_json`]); the engine fills it in for each attempt
//! ([`Template::render`]). Inserted values are never scanned again, so data
//! from a step that happens to contain `{{…}}` is sent as it is.
//!
//! Values that exist but are JSON `null` count as values: the step produced
//! them. They are written `null` (as JSON, or as the text `null`). A missing
//! value is: a step with no record or whose status is not `completed`, a step
//! whose `output` (for `json…`) or `text` (for `text`) is absent or `null`, a
//! run with no input, or a path that leads nowhere. It always fails the step.

mod encode;
mod error;
mod json;
mod path;
mod render;
mod scan;
mod segments;

use std::ops::Range;

pub use error::{RenderError, TemplateError};
pub use path::{MAX_LEVELS, Path, Segment, Source};

/// Where a template's text goes, which decides how each value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// A request URL: values are percent-encoded so they stay inside one
    /// path segment or query value and cannot add `/`, `?`, `#` or `@`; a
    /// value that would make a path segment `.` or `..` is refused.
    Url,
    /// A header value: values go in as text; a value holding a line break is
    /// refused rather than allowed to start another header.
    Header,
    /// A JSON request body: inside a string literal a value is escaped string
    /// content, outside one it is written as JSON.
    Json,
    /// A query parameter value: text (the HTTP layer encodes it).
    Query,
    /// A form field value: text (the HTTP layer encodes it).
    Form,
    /// A plain text request body: text.
    Text,
    /// A chat message: text.
    Message,
}

impl Place {
    /// Every place with the name tools and messages use for it.
    pub const ALL: [(&'static str, Place); 7] = [
        ("url", Place::Url),
        ("header", Place::Header),
        ("json", Place::Json),
        ("query", Place::Query),
        ("form", Place::Form),
        ("text", Place::Text),
        ("message", Place::Message),
    ];

    /// The place called `name` (`url`, `header`, …).
    pub fn named(name: &str) -> Option<Place> {
        Place::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, place)| place)
    }
}

/// One `{{key.path}}` in a template, exposed so the flow validator can check
/// that the key names a step that runs earlier on the path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placeholder {
    /// The step key, or `input` for the run input.
    pub key: String,
    /// What is read from that step: `text`, `json`, `json.items.0.title`…
    pub path: Path,
    /// 1-based character position of the opening `{{` in the template.
    pub position: usize,
}

impl Placeholder {
    /// The placeholder as the author wrote it, without inner spaces, e.g.
    /// `{{fetch.json.id}}`; error messages quote it this way.
    pub fn written(&self) -> String {
        format!("{{{{{}.{}}}}}", self.key, self.path)
    }

    /// Whether it reads the run input rather than a step, which the validator
    /// need not look up among the steps.
    pub fn reads_input(&self) -> bool {
        self.key == "input"
    }
}

/// How one placeholder is written; fixed at parse time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Url,
    Header,
    Text,
    JsonInside,
    JsonOutside,
}

/// A parsed piece: literal text is a byte range into the template's source.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal {
        range: Range<usize>,
        /// 1-based character position of its first character.
        position: usize,
    },
    Hole {
        /// Index into `placeholders`.
        index: usize,
        mode: Mode,
    },
}

/// A template parsed for one [`Place`], ready to be rendered many times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    place: Place,
    parts: Vec<Part>,
    placeholders: Vec<Placeholder>,
}

/// Reads `src` as a template for `place`, reporting the first malformed
/// placeholder (or, in a header, a literal line break) with its position.
///
/// Spaces and tabs just inside the braces are allowed (`{{ draft.text }}`);
/// anything else that is not a step key and a path is refused.
pub fn parse(src: &str, place: Place) -> Result<Template, TemplateError> {
    let pieces = scan::scan(src)?;
    if place == Place::Header {
        refuse_literal_line_breaks(&pieces)?;
    }
    let inside = if place == Place::Json {
        json::string_context(&pieces)?
    } else {
        Vec::new()
    };
    let mut parts = Vec::with_capacity(pieces.len());
    let mut placeholders = Vec::new();
    for piece in pieces {
        match piece {
            scan::Piece::Literal { text, position } => {
                // `text` is a slice of `src`, so the distance between the two
                // starts is its byte offset.
                let start = text.as_ptr() as usize - src.as_ptr() as usize;
                parts.push(Part::Literal {
                    range: start..start + text.len(),
                    position,
                });
            }
            scan::Piece::Hole {
                content,
                content_position,
                open_position,
            } => {
                let (key, path) = path::parse_reference(content, content_position, open_position)?;
                let mode = match place {
                    Place::Url => Mode::Url,
                    Place::Header => Mode::Header,
                    Place::Json if inside.get(placeholders.len()).copied().unwrap_or(false) => {
                        Mode::JsonInside
                    }
                    Place::Json => Mode::JsonOutside,
                    Place::Query | Place::Form | Place::Text | Place::Message => Mode::Text,
                };
                parts.push(Part::Hole {
                    index: placeholders.len(),
                    mode,
                });
                placeholders.push(Placeholder {
                    key,
                    path,
                    position: open_position,
                });
            }
        }
    }
    Ok(Template {
        source: src.to_string(),
        place,
        parts,
        placeholders,
    })
}

fn refuse_literal_line_breaks(pieces: &[scan::Piece<'_>]) -> Result<(), TemplateError> {
    for piece in pieces {
        if let scan::Piece::Literal { text, position } = piece
            && let Some(offset) = text.chars().position(|c| c == '\r' || c == '\n')
        {
            return Err(TemplateError::new(
                position + offset,
                "a header value cannot contain a line break",
            ));
        }
    }
    Ok(())
}

impl Template {
    /// The text the template was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The place it was parsed for.
    pub fn place(&self) -> Place {
        self.place
    }

    /// Every placeholder in order of appearance, so the validator can check
    /// unknown keys and steps that run later.
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.placeholders.iter()
    }
}

#[cfg(test)]
mod tests;
