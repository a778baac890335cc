//! Filling a template in from a run's data.

use std::borrow::Cow;

use serde_json::Value;

use super::encode::{self, Found, HeaderProblem};
use super::error::RenderError;
use super::path::Source;
use super::{Mode, Part, Placeholder, Template, segments};
use crate::scope::Scope;

/// A value that is absent or JSON `null` where a whole record field is
/// expected counts as "not produced".
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

/// Looks a placeholder up. `None` means missing: no such step record, a step
/// that did not complete, no output or text, or a path that leads nowhere.
fn resolve<'s, S: Scope + ?Sized>(scope: &'s S, placeholder: &Placeholder) -> Option<Found<'s>> {
    let base = if placeholder.reads_input() {
        present(scope.input())?
    } else {
        let record = scope.step(&placeholder.key)?;
        if record.get("status").and_then(Value::as_str) != Some("completed") {
            return None;
        }
        let field = match placeholder.path.source {
            Source::Text => "text",
            Source::Json => "output",
        };
        present(record.get(field))?
    };
    match placeholder.path.source {
        Source::Text => Some(Found::Text(base)),
        Source::Json => placeholder.path.walk(base).map(Found::Json),
    }
}

fn text_form(found: Found<'_>) -> Cow<'_, str> {
    match found {
        Found::Text(v) | Found::Json(v) => encode::text_of(v),
    }
}

impl Template {
    /// Fills the template in from `scope`, writing each value as its place
    /// requires. Fails on the first placeholder with no value (never writing
    /// an empty string instead), in a header on a value with a line break, and
    /// in a URL on a value that makes a path segment `.` or `..` (even
    /// percent-encoded), which would move the request to another path.
    ///
    /// Values are copied, never read as template text: a value containing
    /// `{{…}}` or `$steps…` is sent exactly as it is.
    pub fn render(&self, scope: &(impl Scope + ?Sized)) -> Result<String, RenderError> {
        let mut out = String::with_capacity(self.source.len() + 32 * self.placeholders.len());
        // Where each value went in a URL, to check the path's shape after.
        let mut holes = Vec::new();
        for part in &self.parts {
            match part {
                Part::Literal { range, .. } => out.push_str(&self.source[range.clone()]),
                Part::Hole { index, mode } => {
                    let placeholder = &self.placeholders[*index];
                    let found =
                        resolve(scope, placeholder).ok_or_else(|| RenderError::Missing {
                            placeholder: placeholder.written(),
                            position: placeholder.position,
                        })?;
                    let start = out.len();
                    insert(&mut out, found, *mode, placeholder)?;
                    if *mode == Mode::Url {
                        holes.push((start..out.len(), *index));
                    }
                }
            }
        }
        if let Some(index) = segments::first_dot_segment(&out, &holes) {
            let placeholder = &self.placeholders[index];
            return Err(RenderError::DotSegment {
                placeholder: placeholder.written(),
                position: placeholder.position,
            });
        }
        Ok(out)
    }
}

fn insert(
    out: &mut String,
    found: Found<'_>,
    mode: Mode,
    placeholder: &Placeholder,
) -> Result<(), RenderError> {
    match mode {
        Mode::JsonInside => encode::push_json_inside(out, found),
        Mode::JsonOutside => encode::push_json_outside(out, found),
        Mode::Text => match found {
            Found::Text(v) | Found::Json(v) => encode::push_text(out, v),
        },
        Mode::Url => encode::push_percent_encoded(out, &text_form(found)),
        Mode::Header => {
            let text = text_form(found);
            match encode::header_problem(&text) {
                None => out.push_str(&text),
                Some(HeaderProblem::LineBreak) => {
                    return Err(RenderError::HeaderLineBreak {
                        placeholder: placeholder.written(),
                        position: placeholder.position,
                    });
                }
                Some(HeaderProblem::Control) => {
                    return Err(RenderError::HeaderControl {
                        placeholder: placeholder.written(),
                        position: placeholder.position,
                    });
                }
            }
        }
    }
    Ok(())
}
