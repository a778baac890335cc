//! The stored form of a run's step records: each value once.
//!
//! In memory a status keeps convenient copies (a step's `output` and `text`
//! are also on its latest attempt; a parallel step's output gathers its parts'
//! outputs). Stored in etcd, or printed by `coxswain run --output json`, each
//! value appears once, and reading the status back rebuilds the copies:
//!
//! - the latest attempt, when it completed, leaves its output and text to
//!   the step (or part) record, which shows them;
//! - an output that is exactly the text (a string) is kept as `text` only;
//! - a text that is exactly the output written as JSON (a script that
//!   printed JSON) is left out, `textFromOutput: true` saying so;
//! - a parallel step whose output is what its parts gathered says
//!   `outputFromParts: true` instead of repeating them.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::{Attempt, PartStatus, StepPhase, StepStatus};

/// Writes the steps of a status with each value once.
pub fn serialize_steps<S: Serializer>(
    steps: &BTreeMap<String, StepStatus>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let compact: BTreeMap<&String, StepStatus> =
        steps.iter().map(|(k, r)| (k, compact_step(r))).collect();
    compact.serialize(serializer)
}

/// Reads the steps of a status and rebuilds the copies [`serialize_steps`] left out.
pub fn deserialize_steps<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, StepStatus>, D::Error> {
    let mut steps = BTreeMap::<String, StepStatus>::deserialize(deserializer)?;
    steps.values_mut().for_each(expand_step);
    Ok(steps)
}

/// What a parallel step's output is once its parts are done: every part in
/// order, and each output by part key.
pub fn gathered(parts: &[PartStatus]) -> Value {
    let list: Vec<Value> = parts
        .iter()
        .map(|p| json!({"key": p.key, "label": p.label, "status": p.status, "output": p.output, "error": p.error}))
        .collect();
    let by_key: Map<String, Value> = parts
        .iter()
        .map(|p| (p.key.clone(), p.output.clone().unwrap_or(Value::Null)))
        .collect();
    json!({"parts": list, "by_key": by_key})
}

fn compact_step(record: &StepStatus) -> StepStatus {
    let mut stored = record.clone();
    if !stored.parts.is_empty() && stored.output.as_ref() == Some(&gathered(&stored.parts)) {
        stored.output = None;
        stored.output_from_parts = true;
    }
    for part in &mut stored.parts {
        leave_to_record(&part.output, &part.text, &mut part.attempts);
        compact(&mut part.output, &mut part.text, &mut part.text_from_output);
    }
    leave_to_record(&stored.output, &stored.text, &mut stored.attempts);
    compact(
        &mut stored.output,
        &mut stored.text,
        &mut stored.text_from_output,
    );
    stored
}

fn expand_step(record: &mut StepStatus) {
    expand(
        &mut record.output,
        &mut record.text,
        &mut record.text_from_output,
    );
    take_from_record(&record.output, &record.text, &mut record.attempts);
    for part in &mut record.parts {
        expand(&mut part.output, &mut part.text, &mut part.text_from_output);
        take_from_record(&part.output, &part.text, &mut part.attempts);
    }
    if record.output_from_parts {
        record.output = Some(gathered(&record.parts));
        record.output_from_parts = false;
    }
}

/// A completed latest attempt whose output and text the status shows drops them.
fn leave_to_record(output: &Option<Value>, text: &Option<String>, attempts: &mut [Attempt]) {
    for a in attempts.iter_mut() {
        compact(&mut a.output, &mut a.text, &mut a.text_from_output);
    }
    let Some(last) = attempts.last_mut() else {
        return;
    };
    let mut full = last.clone();
    expand(&mut full.output, &mut full.text, &mut full.text_from_output);
    if holds_its_output(last) && full.output == *output && full.text == *text {
        last.output = None;
        last.text = None;
        last.text_from_output = false;
    }
}

/// The inverse of [`leave_to_record`]: a completed attempt always has an
/// output unless it was trimmed, so a missing one is the status's.
fn take_from_record(output: &Option<Value>, text: &Option<String>, attempts: &mut [Attempt]) {
    for a in attempts.iter_mut() {
        expand(&mut a.output, &mut a.text, &mut a.text_from_output);
    }
    if let Some(last) = attempts.last_mut()
        && holds_its_output(last)
        && last.output.is_none()
    {
        last.output = output.clone();
        last.text = text.clone();
    }
}

/// A record's output and text as stored: each written once ([`text_only`],
/// then [`output_only`]). Steps, parts and attempts are stored alike.
fn compact(output: &mut Option<Value>, text: &mut Option<String>, from_output: &mut bool) {
    text_only(output, text);
    output_only(output, text, from_output);
}

/// The inverse of [`compact`]: the output and text both written out again.
fn expand(output: &mut Option<Value>, text: &mut Option<String>, from_output: &mut bool) {
    from_text(output, text);
    to_text(output, text, from_output);
}

fn holds_its_output(attempt: &Attempt) -> bool {
    attempt.status == StepPhase::Completed && !attempt.trimmed
}

/// An output that is its text, as a string, is kept as the text alone.
fn text_only(output: &mut Option<Value>, text: &Option<String>) {
    if let (Some(Value::String(o)), Some(t)) = (output.as_ref(), text)
        && o == t
    {
        *output = None;
    }
}

/// A text that is exactly its output (not a string) written as JSON is
/// left out, and `from_output` says so.
fn output_only(output: &Option<Value>, text: &mut Option<String>, from_output: &mut bool) {
    if let (Some(o), Some(t)) = (output.as_ref(), text.as_ref())
        && !o.is_string()
        && serde_json::to_string(o).is_ok_and(|json| json == *t)
    {
        *text = None;
        *from_output = true;
    }
}

/// The inverse of [`output_only`].
fn to_text(output: &Option<Value>, text: &mut Option<String>, from_output: &mut bool) {
    if std::mem::take(from_output) {
        *text = output.as_ref().and_then(|o| serde_json::to_string(o).ok());
    }
}

/// The inverse of [`text_only`]: text with no output is an output that was
/// its text (every settled record that has a text has an output).
fn from_text(output: &mut Option<Value>, text: &Option<String>) {
    if let (None, Some(t)) = (output.as_ref(), text) {
        *output = Some(Value::String(t.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunStatus;

    fn attempt(
        number: i32,
        status: StepPhase,
        output: Option<Value>,
        text: Option<&str>,
    ) -> Attempt {
        Attempt {
            number,
            status,
            output,
            text: text.map(String::from),
            ..Default::default()
        }
    }

    /// Writes and reads back a status holding `step`.
    fn round_trip(step: StepStatus) -> (Value, StepStatus) {
        let mut record = RunStatus::default();
        record.steps.insert("s".into(), step);
        let stored = serde_json::to_value(&record).expect("to JSON");
        let read: RunStatus = serde_json::from_value(stored.clone()).expect("from JSON");
        (stored["steps"]["s"].clone(), read.steps["s"].clone())
    }

    #[test]
    fn only_copies_are_left_out_and_all_come_back() {
        let parsed = json!({"n": 1});
        let step = StepStatus {
            status: StepPhase::Completed,
            output: Some(parsed.clone()),
            text: Some("{\"n\": 1}\n".into()),
            attempts: vec![
                attempt(1, StepPhase::Completed, Some(json!("old")), Some("old")),
                attempt(2, StepPhase::Failed, None, None),
                attempt(
                    3,
                    StepPhase::Completed,
                    Some(parsed.clone()),
                    Some("{\"n\": 1}\n"),
                ),
            ],
            ..Default::default()
        };
        let (stored, read) = round_trip(step.clone());
        assert_eq!(read, step);
        // The text differs from the parsed output, so both stay on the step;
        // the latest attempt leaves them to it; the old one keeps its text.
        assert_eq!(stored["output"], parsed);
        assert_eq!(stored["attempts"][2].get("output"), None);
        assert_eq!(stored["attempts"][2].get("text"), None);
        assert_eq!(stored["attempts"][0].get("output"), None);
        assert_eq!(stored["attempts"][0]["text"], "old");
    }

    #[test]
    fn a_latest_attempt_that_differs_from_the_step_keeps_its_output() {
        // A loop's next pass failed: the step still shows the earlier output.
        let step = StepStatus {
            status: StepPhase::Failed,
            output: Some(json!({"pass": 1})),
            attempts: vec![
                attempt(1, StepPhase::Completed, Some(json!({"pass": 1})), None),
                attempt(2, StepPhase::Completed, Some(json!({"pass": 2})), None),
                attempt(3, StepPhase::Failed, None, None),
            ],
            ..Default::default()
        };
        let (stored, read) = round_trip(step.clone());
        assert_eq!(read, step);
        assert_eq!(stored["attempts"][1]["output"], json!({"pass": 2}));
    }
}
