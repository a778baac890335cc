//! `get RUN`: the run's steps as a tree with their status, in the order of
//! its flow, loops' bodies and parallel steps' parts under their step, and
//! the attempts of a step tried more than once (or once per loop pass)
//! under it, each with its exit, time and error.

use std::collections::BTreeSet;

use kube::ResourceExt;

use coxswain_core::api::{Attempt, FlowSpec, PartStatus, Run, RunStatus, StepPhase, StepStatus};
use coxswain_core::flow::FlowGraph;

/// One line of the tree and the lines under it.
#[derive(Debug, Default)]
struct Line {
    text: String,
    under: Vec<Line>,
}

/// The tree as printed: a heading line for the run, then its steps. With
/// no flow (its snapshot could not be read) the steps are listed flat, in
/// the order they started.
pub fn render(run: &Run, flow: Option<&FlowSpec>) -> String {
    let status = run.status.clone().unwrap_or_default();
    let mut out = heading(run, &status);
    let lines = match flow {
        Some(flow) => in_flow_order(&flow.steps, &status),
        None => by_start(&status),
    };
    for (i, line) in lines.iter().enumerate() {
        draw(line, "", i + 1 == lines.len(), &mut out);
    }
    out
}

fn heading(run: &Run, status: &RunStatus) -> String {
    let progress = status
        .progress
        .as_deref()
        .map(|p| format!(", {p} steps settled"))
        .unwrap_or_default();
    let mut out = format!(
        "run {} (flow {}): {:?}{progress}{}\n",
        run.name_any(),
        run.spec.flow_ref.name,
        status.phase,
        crate::local::duration(status.started_at.as_deref(), status.finished_at.as_deref()),
    );
    if let Some(e) = &status.error {
        let message = e.message.trim_end().replace('\n', "\n    ");
        out.push_str(&format!("  {}: {message}\n", e.code));
    }
    out
}

fn draw(line: &Line, indent: &str, last: bool, out: &mut String) {
    let (branch, more) = if last {
        ("└─ ", "   ")
    } else {
        ("├─ ", "│  ")
    };
    out.push_str(&format!("{indent}{branch}{}\n", line.text));
    let inner = format!("{indent}{more}");
    for (i, child) in line.under.iter().enumerate() {
        draw(child, &inner, i + 1 == line.under.len(), out);
    }
}

fn in_flow_order(steps: &[coxswain_core::api::Step], status: &RunStatus) -> Vec<Line> {
    let graph = FlowGraph::new(steps);
    let mut placed = BTreeSet::new();
    let mut lines = list(&graph, 0, status, &mut placed);
    // Steps the status has and the flow does not: shown all the same.
    let mut strangers = by_start(status);
    strangers.retain(|l| !placed.contains(l.text.split(' ').next().unwrap_or_default()));
    lines.extend(strangers);
    lines
}

fn list<'a>(
    graph: &FlowGraph<'a>,
    list: usize,
    status: &RunStatus,
    placed: &mut BTreeSet<&'a str>,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for &node in &graph.lists[list] {
        let key = graph.nodes[node].key;
        if key.is_empty() {
            continue;
        }
        placed.insert(key);
        let default = StepStatus::default();
        let record = status.steps.get(key).unwrap_or(&default);
        let mut line = step_line(key, record);
        if let Some(&body) = graph.body_of.get(&node) {
            line.under.extend(self::list(graph, body, status, placed));
        }
        lines.push(line);
    }
    lines
}

fn by_start(status: &RunStatus) -> Vec<Line> {
    let mut steps: Vec<(&String, &StepStatus)> = status.steps.iter().collect();
    steps.sort_by_key(|(key, r)| (r.started_at.clone().is_none(), r.started_at.clone(), *key));
    steps.into_iter().map(|(k, r)| step_line(k, r)).collect()
}

fn step_line(key: &str, record: &StepStatus) -> Line {
    let mut text = format!("{key}  {}", word(record.status));
    if let Some(exit) = &record.exit {
        text.push_str(&format!(" → {exit}"));
    }
    if let Some(pass) = record.iteration {
        text.push_str(&format!(" (pass {pass})"));
    }
    text.push_str(&crate::local::duration(
        record.started_at.as_deref(),
        record.finished_at.as_deref(),
    ));
    if let Some(copied) = &record.copied_from {
        text.push_str(&format!(" (copied from run {})", copied.run));
    }
    if let Some(e) = &record.error {
        text.push_str(&format!(": {}: {}", e.code, first_line(&e.message)));
    }
    if record.status == StepPhase::Skipped {
        text.push_str(&format!(
            ": {}",
            record.reason.as_deref().unwrap_or("not on the path taken")
        ));
    }
    let mut under: Vec<Line> = record.parts.iter().map(part_line).collect();
    if record.attempts.len() > 1 {
        under.extend(record.attempts.iter().map(attempt_line));
    }
    Line { text, under }
}

fn part_line(part: &PartStatus) -> Line {
    let name = if part.label.is_empty() || part.label == part.key {
        format!("[{}]", part.key)
    } else {
        format!("[{}] {}", part.key, part.label)
    };
    let last = part.attempts.last();
    let mut text = format!(
        "{name}  {}{}",
        word(part.status),
        crate::local::duration(
            last.and_then(|a| a.started_at.as_deref()),
            last.and_then(|a| a.finished_at.as_deref())
        )
    );
    if let Some(e) = &part.error {
        text.push_str(&format!(": {}: {}", e.code, first_line(&e.message)));
    }
    let under = if part.attempts.len() > 1 {
        part.attempts.iter().map(attempt_line).collect()
    } else {
        Vec::new()
    };
    Line { text, under }
}

fn attempt_line(attempt: &Attempt) -> Line {
    let pass = attempt
        .iteration
        .map(|p| format!("pass {p}, "))
        .unwrap_or_default();
    let mut text = format!(
        "{pass}attempt {}  {}{}",
        attempt.number,
        word(attempt.status),
        crate::local::duration(
            attempt.started_at.as_deref(),
            attempt.finished_at.as_deref()
        )
    );
    if let Some(e) = &attempt.error {
        text.push_str(&format!(": {}: {}", e.code, first_line(&e.message)));
    }
    Line {
        text,
        under: Vec::new(),
    }
}

/// The status with the mark `coxswain run` prints beside it.
fn word(status: StepPhase) -> String {
    let mark = match status {
        StepPhase::Pending => "·",
        StepPhase::Running => "▶",
        StepPhase::Waiting => "…",
        StepPhase::Completed => "✓",
        StepPhase::Failed => "✗",
        StepPhase::Skipped => "↷",
    };
    format!("{mark} {}", status.as_str())
}

/// ` in 1.2 s`, ` in 40 ms`; nothing without both times.
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_and_loop_bodies_hang_under_their_step_in_flow_order() {
        let flow: FlowSpec = serde_json::from_value(json!({"steps": [
            {"key": "fan", "parallel": {"items": "$input.names", "step": {"script": {"source": "true"}}}},
            {"key": "polish", "loop": {"until": "true", "maxIterations": 3, "steps": [
                {"key": "draft", "script": {"source": "true"}}
            ]}},
            {"key": "end", "script": {"source": "true"}}
        ]}))
        .expect("a flow");
        let run: Run = serde_json::from_value(json!({
            "metadata": {"name": "r-1"},
            "spec": {"flowRef": {"name": "f"}},
            "status": {"phase": "Failed", "progress": "3/4", "steps": {
                "fan": {"status": "completed", "parts": [
                    {"key": "ada", "label": "Ada", "status": "completed"},
                    {"key": "bob", "label": "bob", "status": "failed",
                     "error": {"code": "workflow.script_failed", "message": "exit 3\nmore"}}
                ]},
                "polish": {"status": "completed", "iteration": 2},
                "draft": {"status": "completed", "iteration": 2, "attempts": [
                    {"number": 1, "iteration": 1, "status": "completed",
                     "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01.5Z"},
                    {"number": 1, "iteration": 2, "status": "completed"}
                ]},
                "end": {"status": "failed", "error": {"code": "workflow.timeout", "message": "too slow"}}
            }}
        }))
        .expect("a run");
        let text = render(&run, Some(&flow));
        let expected = "\
run r-1 (flow f): Failed, 3/4 steps settled
├─ fan  ✓ completed
│  ├─ [ada] Ada  ✓ completed
│  └─ [bob]  ✗ failed: workflow.script_failed: exit 3
├─ polish  ✓ completed (pass 2)
│  └─ draft  ✓ completed (pass 2)
│     ├─ pass 1, attempt 1  ✓ completed in 1.5 s
│     └─ pass 2, attempt 1  ✓ completed
└─ end  ✗ failed: workflow.timeout: too slow
";
        assert_eq!(text, expected);
    }
}
