//! "What moved": for every arrow, whether it was taken on its latest pass and
//! which values travelled along it, or why nothing did.

use serde_json::Value;

use crate::api::{Arrow, RunStatus, StepPhase};

use super::compiled::Compiled;

/// Longest preview of a value kept in an arrow's detail.
const PREVIEW: usize = 80;

/// Every arrow of the flow with its latest state.
pub fn arrows(flow: &Compiled<'_>, state: &RunStatus) -> Vec<Arrow> {
    let mut out = Vec::new();
    for (to, node) in flow.graph.nodes.iter().enumerate() {
        let target = state.steps.get(node.key);
        let reached =
            target.is_some_and(|r| !matches!(r.status, StepPhase::Pending | StepPhase::Skipped));
        for arrow in &node.preds {
            let from_key = flow.key(arrow.from);
            let from = state.steps.get(from_key);
            let label = flow.graph.source_label(arrow);
            let (taken, detail) = match from.map(|r| (r.status, r.exit.as_deref())) {
                None | Some((StepPhase::Pending | StepPhase::Running | StepPhase::Waiting, _)) => {
                    (false, "not reached yet".to_string())
                }
                Some((StepPhase::Skipped, _)) => (false, format!("`{from_key}` was skipped")),
                Some((StepPhase::Failed, _)) if !flow.steps[arrow.from].continue_on_failure => {
                    (false, format!("`{from_key}` failed"))
                }
                Some((_, exit)) if arrow.exit.is_some() && exit != arrow.exit => (
                    false,
                    format!("`{from_key}` took exit `{}`", exit.unwrap_or("none")),
                ),
                Some(_) if !reached => (false, format!("`{}` did not run", node.key)),
                Some(_) => (
                    true,
                    moved(flow, to, from_key, from.and_then(|r| r.output.as_ref())),
                ),
            };
            let count = state
                .arrow_counts
                .get(&count_key(&label, node.key))
                .copied();
            out.push(Arrow {
                from: label,
                to: node.key.to_string(),
                taken,
                detail: Some(detail),
                count,
            });
        }
    }
    out
}

/// The key of an arrow in `arrowCounts`: `from[.exit]->to`.
pub fn count_key(from_label: &str, to: &str) -> String {
    format!("{from_label}->{to}")
}

/// Which references of the target read the source, with size and preview.
fn moved(flow: &Compiled<'_>, to: usize, from_key: &str, output: Option<&Value>) -> String {
    let compiled = &flow.steps[to];
    let mut reads: Vec<String> = compiled
        .input
        .iter()
        .flat_map(|t| t.located_references())
        .filter(|(_, r)| r.step_key() == Some(from_key))
        .map(|(path, r)| format!("{} → {path}", r.text()))
        .collect();
    if reads.is_empty() {
        if compiled.input.is_none() && output.is_some() {
            reads.push("its output, as part of the default input".into());
        } else {
            return "control only; no value moved".into();
        }
    }
    let Some(output) = output else {
        return reads.join(", ");
    };
    let measured = Measured::of(output);
    let head = String::from_utf8_lossy(&measured.head);
    let (preview, cut) = match crate::text::cut(&head, PREVIEW) {
        Some(start) => (start, "… (preview)"),
        None => (head.as_ref(), ""),
    };
    format!(
        "{} ({} bytes: {preview}{cut})",
        reads.join(", "),
        measured.len
    )
}

/// A value's size as JSON and its first bytes, without writing it all out:
/// an arrow's detail needs no more, and the status is read after every event.
#[derive(Default)]
struct Measured {
    len: usize,
    head: Vec<u8>,
}

impl Measured {
    /// Bytes kept: enough for [`PREVIEW`] characters of up to four bytes each.
    const HEAD: usize = PREVIEW * 4 + 4;

    fn of(value: &Value) -> Self {
        let mut measured = Measured::default();
        // Writing into memory cannot fail.
        let _ = serde_json::to_writer(&mut measured, value);
        measured
    }
}

impl std::io::Write for Measured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = Self::HEAD.saturating_sub(self.head.len());
        self.head.extend_from_slice(&buf[..room.min(buf.len())]);
        self.len += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_measured_value_has_its_json_size_and_first_characters() {
        for value in [
            json!("é".repeat(500)),
            json!({"a": [1, 2, "x"]}),
            json!(null),
        ] {
            let whole = value.to_string();
            let measured = Measured::of(&value);
            assert_eq!(measured.len, whole.len());
            let head = String::from_utf8_lossy(&measured.head);
            let expected = crate::text::cut(&whole, PREVIEW).unwrap_or(&whole);
            assert_eq!(crate::text::cut(&head, PREVIEW).unwrap_or(&head), expected);
        }
    }
}
