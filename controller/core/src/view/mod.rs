//! A run as a person looks at it: every step placed on a canvas with its
//! status, every arrow with where it goes, whether it was taken, and what
//! moved along it or why nothing did.
//!
//! The run viewer (`coxswain ui`) serves this as JSON and the browser only
//! draws it, so where a box stands and what an arrow says are decided here,
//! in plain Rust that tests read without a browser. A flow with no record
//! yet (a Flow page) is drawn the same way, every step pending.

mod layout;
mod moved;
#[cfg(test)]
mod tests;

use crate::api::{RunStatus, Step, StepPhase, StepStatus};
use crate::flow::FlowGraph;
use serde::Serialize;

pub use layout::{BOX_HEIGHT, BOX_WIDTH};
pub use moved::{Moved, moved_along};

/// The picture of a flow, or of a run of it.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Picture {
    /// Canvas width, in pixels.
    pub width: u32,
    /// Canvas height, in pixels.
    pub height: u32,
    /// Every step with a key, in the flow's order (a loop before its body).
    pub steps: Vec<StepBox>,
    /// Every arrow, send-backs and loop passes included.
    pub arrows: Vec<ArrowLine>,
}

/// One step on the canvas.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepBox {
    /// The step's key (`data-step` in the page).
    pub key: String,
    /// Its kind: `script`, `agent`, `approval`, …
    pub kind: String,
    /// Where it stands in the run: `pending` until reached, or without a run.
    pub status: String,
    /// Left edge, in pixels.
    pub x: u32,
    /// Top edge, in pixels.
    pub y: u32,
    /// The loop or parallel step whose body holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// How many attempts it made (its latest round's, parts' not counted).
    pub attempts: usize,
    /// A parallel step's parts, counted rather than drawn one by one, so a
    /// fan-out of thousands stays one box.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<PartCount>,
    /// The exit it took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Why it failed, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a screen reader says for the box: key, kind, status and counts.
    pub label: String,
}

/// A parallel step's parts by status.
#[derive(Serialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PartCount {
    /// All parts started so far.
    pub total: usize,
    /// Parts that completed.
    pub completed: usize,
    /// Parts that failed.
    pub failed: usize,
    /// Parts running or waiting for a person.
    pub running: usize,
}

/// What an arrow is.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ArrowKind {
    /// From a step to one after it (`after`, or the order of the list).
    Flow,
    /// A review sending work back to an earlier step.
    SendBack,
    /// A loop starting its body.
    EachPass,
}

/// How an arrow is drawn.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ArrowState {
    /// Taken on its latest pass: drawn bold.
    Taken,
    /// Not taken (yet): drawn dashed, and `why` says why.
    NotTaken,
    /// No run to tell: the flow's shape only.
    Plain,
}

/// One arrow on the canvas.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArrowLine {
    /// `FROM->TO`, FROM with its exit (`review.approve->publish`): the
    /// arrow's stable name (`data-arrow` in the page, and in the API).
    pub id: String,
    /// The step it leaves.
    pub from: String,
    /// The exit it leaves from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// The step it reaches.
    pub to: String,
    /// What it is.
    pub kind: ArrowKind,
    /// How it is drawn.
    pub state: ArrowState,
    /// How many passes took it, when more than none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Why nothing moved along it, when it was not taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// What moved along it (each reference the target reads from the
    /// source, with the value's size and its first characters).
    pub moved: Vec<Moved>,
    /// Where it starts and ends, in pixels; the page bends it between.
    pub points: [[u32; 2]; 2],
}

/// The picture of a flow's steps, with what happened on a run when its
/// record is given.
pub fn picture(steps: &[Step], record: Option<&RunStatus>) -> Picture {
    let graph = FlowGraph::new(steps);
    let places = layout::place(&graph);
    let boxes = graph
        .nodes
        .iter()
        .enumerate()
        .map(|(n, node)| {
            step_box(
                &graph,
                n,
                places.at[n],
                record.map(|r| r.steps.get(node.key)),
            )
        })
        .collect();
    let arrows = arrows(&graph, &places, record, &moved::Previews);
    Picture {
        width: places.width,
        height: places.height,
        steps: boxes,
        arrows,
    }
}

fn step_box(
    graph: &FlowGraph<'_>,
    n: usize,
    (x, y): (u32, u32),
    record: Option<Option<&StepStatus>>,
) -> StepBox {
    let node = &graph.nodes[n];
    let kind = node.step.kind().map_or("step", |k| k.name()).to_string();
    let found = record.flatten();
    let status = found.map_or(StepPhase::Pending, |r| r.status).as_str();
    let parts = found.filter(|r| !r.parts.is_empty()).map(count_parts);
    let error = found
        .and_then(|r| r.error.as_ref())
        .map(|e| first_line(&e.message));
    let mut label = format!("step {}, {kind}, {status}", node.key);
    if let Some(p) = &parts {
        label.push_str(&format!(
            ", {} parts: {} completed, {} failed, {} running",
            p.total, p.completed, p.failed, p.running
        ));
    }
    StepBox {
        key: node.key.to_string(),
        kind,
        status: status.to_string(),
        x,
        y,
        parent: node.parent.map(|p| graph.nodes[p].key.to_string()),
        attempts: found.map_or(0, |r| r.attempts.len()),
        parts,
        exit: found.and_then(|r| r.exit.clone()),
        error,
        label,
    }
}

fn count_parts(record: &StepStatus) -> PartCount {
    let mut count = PartCount {
        total: record.parts.len(),
        ..PartCount::default()
    };
    for part in &record.parts {
        match part.status {
            StepPhase::Completed => count.completed += 1,
            StepPhase::Failed => count.failed += 1,
            StepPhase::Running | StepPhase::Waiting => count.running += 1,
            StepPhase::Pending | StepPhase::Skipped => {}
        }
    }
    count
}

/// Every arrow: those the flow declares, its send-backs and its loops.
fn arrows(
    graph: &FlowGraph<'_>,
    places: &layout::Places,
    record: Option<&RunStatus>,
    values: &dyn moved::Values,
) -> Vec<ArrowLine> {
    let mut out = Vec::new();
    for (to, node) in graph.nodes.iter().enumerate() {
        for arrow in &node.preds {
            let from_key = graph.nodes[arrow.from].key;
            let id_from = graph.source_label(arrow);
            let seen = record.and_then(|r| {
                r.arrows
                    .iter()
                    .find(|a| a.from == id_from && a.to == node.key)
            });
            let (state, why, moved) = match (record, seen) {
                (None, _) => (ArrowState::Plain, None, Vec::new()),
                (Some(_), None) => (
                    ArrowState::NotTaken,
                    Some("not reached yet".to_string()),
                    Vec::new(),
                ),
                (Some(r), Some(a)) if a.taken => (
                    ArrowState::Taken,
                    None,
                    moved::moved_into(node.step, from_key, r.steps.get(from_key), values),
                ),
                (Some(_), Some(a)) => (ArrowState::NotTaken, a.detail.clone(), Vec::new()),
            };
            out.push(ArrowLine {
                id: format!("{id_from}->{}", node.key),
                from: from_key.to_string(),
                exit: arrow.exit.map(str::to_string),
                to: node.key.to_string(),
                kind: ArrowKind::Flow,
                state,
                count: seen.and_then(|a| a.count),
                why,
                moved,
                points: places.flow_points(arrow.from, to),
            });
        }
        out.extend(send_backs(graph, places, record, to));
        if let Some(first) = graph.first_in_body(to) {
            out.push(each_pass(graph, places, record, to, first));
        }
    }
    out
}

fn send_backs(
    graph: &FlowGraph<'_>,
    places: &layout::Places,
    record: Option<&RunStatus>,
    from: usize,
) -> Vec<ArrowLine> {
    let node = &graph.nodes[from];
    node.step
        .send_back
        .iter()
        .filter_map(|back| {
            let target = graph.find(&back.to)?;
            let times = record.map(|r| {
                r.send_backs
                    .get(&format!("{}->{}", node.key, back.to))
                    .copied()
                    .unwrap_or(0)
            });
            let (state, why) = match times {
                None => (ArrowState::Plain, None),
                Some(0) => (
                    ArrowState::NotTaken,
                    Some(format!(
                        "`{}` never chose `{}`, so nothing was sent back",
                        node.key, back.exit
                    )),
                ),
                Some(_) => (ArrowState::Taken, None),
            };
            Some(ArrowLine {
                id: format!("{}.{}->{}", node.key, back.exit, back.to),
                from: node.key.to_string(),
                exit: Some(back.exit.clone()),
                to: back.to.clone(),
                kind: ArrowKind::SendBack,
                state,
                count: times.filter(|&n| n > 0),
                why,
                moved: Vec::new(),
                points: places.back_points(from, target),
            })
        })
        .collect()
}

fn each_pass(
    graph: &FlowGraph<'_>,
    places: &layout::Places,
    record: Option<&RunStatus>,
    from: usize,
    first: usize,
) -> ArrowLine {
    let (from_key, to_key) = (graph.nodes[from].key, graph.nodes[first].key);
    let started = record.and_then(|r| r.steps.get(to_key)).is_some();
    let state = match record {
        None => ArrowState::Plain,
        Some(_) if started => ArrowState::Taken,
        Some(_) => ArrowState::NotTaken,
    };
    ArrowLine {
        id: format!("{from_key}->{to_key}"),
        from: from_key.to_string(),
        exit: None,
        to: to_key.to_string(),
        kind: ArrowKind::EachPass,
        state,
        count: None,
        why: (state == ArrowState::NotTaken)
            .then(|| format!("`{from_key}` has not started a pass yet")),
        moved: Vec::new(),
        points: places.flow_points(from, first),
    }
}

/// The arrow called `id` with every value that moved along it whole (not
/// cut to a preview): what a person sees after clicking it.
pub fn arrow_in_full(steps: &[Step], record: &RunStatus, id: &str) -> Option<ArrowLine> {
    let graph = FlowGraph::new(steps);
    let places = layout::place(&graph);
    arrows(&graph, &places, Some(record), &moved::Whole)
        .into_iter()
        .find(|a| a.id == id)
}

/// The first line of a message, for a box's one-line error.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}
