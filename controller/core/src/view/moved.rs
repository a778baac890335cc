//! What moved along an arrow: each reference the target step reads from the
//! source step, where it lands in the target's input, and the value.

use serde::Serialize;
use serde_json::{Value, json};

use crate::api::{Step, StepStatus};
use crate::expr::{lookup, parse_value_at};

/// Characters of a value kept in the picture; the arrow's own page has it whole.
const PREVIEW_CHARS: usize = 200;

/// One value that moved along an arrow.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    /// The reference as written in the target (`$steps.draft.output.title`),
    /// or `previous output` when the target takes its default input.
    pub reference: String,
    /// Where it lands in the target's input (`input.title`).
    pub into: String,
    /// Size of the value's JSON, in bytes.
    pub bytes: usize,
    /// The value's JSON, whole or cut to a preview.
    pub json: String,
    /// Whether `json` was cut.
    pub cut: bool,
}

/// How much of each value to keep.
pub(super) trait Values {
    /// The JSON kept of `value`, and whether it was cut.
    fn keep(&self, value: &Value) -> (String, bool);
}

/// The first [`PREVIEW_CHARS`] characters.
pub(super) struct Previews;

/// The whole value.
pub(super) struct Whole;

impl Values for Previews {
    fn keep(&self, value: &Value) -> (String, bool) {
        let text = value.to_string();
        match crate::text::cut(&text, PREVIEW_CHARS) {
            Some(start) => (format!("{start}…"), true),
            None => (text, false),
        }
    }
}

impl Values for Whole {
    fn keep(&self, value: &Value) -> (String, bool) {
        (value.to_string(), false)
    }
}

/// What moved from `from_key` into `target`, given the source's record.
pub(super) fn moved_into(
    target: &Step,
    from_key: &str,
    source: Option<&StepStatus>,
    values: &dyn Values,
) -> Vec<Moved> {
    let Some(source) = source else {
        return Vec::new();
    };
    let view = json!({
        "steps": {
            from_key: {
                "status": source.status.as_str(),
                "output": source.output,
                "text": source.text,
                "error": source.error.as_ref().map(|e| &e.message),
            }
        }
    });
    match target.input.as_ref().map(|v| parse_value_at(v, "input")) {
        Some(Ok(template)) => template
            .located_references()
            .filter(|(_, r)| r.step_key() == Some(from_key))
            .map(|(path, r)| {
                let value = lookup(r, &view).cloned().unwrap_or(Value::Null);
                one(r.text(), path, &value, values)
            })
            .collect(),
        Some(Err(_)) => Vec::new(),
        None => source
            .output
            .iter()
            .map(|out| one("previous output", "input", out, values))
            .collect(),
    }
}

fn one(reference: &str, into: &str, value: &Value, values: &dyn Values) -> Moved {
    let (json, cut) = values.keep(value);
    Moved {
        reference: reference.to_string(),
        into: into.to_string(),
        bytes: value.to_string().len(),
        json,
        cut,
    }
}

/// What moved along an arrow into `target`, each value whole: for a caller
/// that has the source's record but not the flow's picture.
pub fn moved_along(target: &Step, from_key: &str, source: Option<&StepStatus>) -> Vec<Moved> {
    moved_into(target, from_key, source, &Whole)
}
