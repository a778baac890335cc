//! A flow as a diagram, Mermaid or Graphviz DOT; given a run's status, also
//! what happened on it: each step's status, each arrow taken or not, and
//! what moved along it, or why nothing did. Pure text out, so the CLI, docs and a
//! future `kubectl` plugin draw the same picture.

use std::fmt::Write;

use crate::api::{Arrow as RecordArrow, RunStatus, Step, StepPhase};

use super::graph::FlowGraph;
use crate::text::escape;

/// The diagram language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Mermaid `flowchart` (renders on GitHub and in most wikis).
    Mermaid,
    /// Graphviz `digraph`.
    Dot,
}

/// How an edge is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// No record: just the shape of the flow.
    Plain,
    /// The arrow was taken on its latest pass.
    Taken,
    /// It was not (the label says why).
    NotTaken,
    /// A send-back arrow, or a loop starting its body.
    Back,
}

struct Edge {
    from: usize,
    to: usize,
    label: String,
    style: Style,
}

/// Longest arrow label kept; the rest is cut with an ellipsis.
const LABEL_CHARS: usize = 60;

/// Draws the steps of a flow, with the status of a run when there is one.
pub fn draw(steps: &[Step], record: Option<&RunStatus>, format: Format) -> String {
    let graph = FlowGraph::new(steps);
    let mut edges = edges(&graph, record);
    if let Some(record) = record {
        mark_send_backs(&graph, record, &mut edges);
    }
    match format {
        Format::Mermaid => mermaid(&graph, record, &edges),
        Format::Dot => dot(&graph, record, &edges),
    }
}

fn edges(graph: &FlowGraph<'_>, record: Option<&RunStatus>) -> Vec<Edge> {
    let mut out = Vec::new();
    for (to, node) in graph.nodes.iter().enumerate() {
        for arrow in &node.preds {
            let from = graph.source_label(arrow);
            let seen = record.and_then(|r| find(&r.arrows, &from, node.key));
            let (style, label) = match seen {
                None => (Style::Plain, arrow.exit.unwrap_or("").to_string()),
                Some(a) => (
                    if a.taken {
                        Style::Taken
                    } else {
                        Style::NotTaken
                    },
                    record_label(arrow.exit, a),
                ),
            };
            out.push(Edge {
                from: arrow.from,
                to,
                label,
                style,
            });
        }
        for back in &node.step.send_back {
            if let Some(target) = graph.find(&back.to) {
                out.push(Edge {
                    from: to,
                    to: target,
                    label: format!("{}: send back", back.exit),
                    style: Style::Back,
                });
            }
        }
        if let Some(first) = graph.first_in_body(to) {
            out.push(Edge {
                from: to,
                to: first,
                label: "each pass".into(),
                style: Style::Back,
            });
        }
    }
    out
}

/// Send-back arrows the run took, drawn as taken with how often: the
/// record counts them in `sendBacks` (`from->to`), not among its arrows.
fn mark_send_backs(graph: &FlowGraph<'_>, record: &RunStatus, edges: &mut [Edge]) {
    for edge in edges.iter_mut().filter(|e| e.style == Style::Back) {
        let from = &graph.nodes[edge.from];
        let to = graph.nodes[edge.to].key;
        if !from.step.send_back.iter().any(|b| b.to == to) {
            continue; // a loop's "each pass"
        }
        let times = record
            .send_backs
            .get(&format!("{}->{to}", from.key))
            .copied()
            .unwrap_or(0);
        if times > 0 {
            edge.style = Style::Taken;
            edge.label = with_count(std::mem::take(&mut edge.label), Some(times));
        }
    }
}

fn find<'r>(arrows: &'r [RecordArrow], from: &str, to: &str) -> Option<&'r RecordArrow> {
    arrows.iter().find(|a| a.from == from && a.to == to)
}

/// The exit, what moved (or why not), and how many passes took it.
fn record_label(exit: Option<&str>, arrow: &RecordArrow) -> String {
    let mut label = String::new();
    if let Some(exit) = exit {
        label.push_str(exit);
        label.push_str(": ");
    }
    label.push_str(arrow.detail.as_deref().unwrap_or(""));
    with_count(shorten(&label), arrow.count)
}

/// The pass count after the label, once it is cut: the count is what a
/// reader looks for, so shortening never takes it.
fn with_count(mut label: String, count: Option<i32>) -> String {
    if let Some(n) = count.filter(|&n| n > 1) {
        let _ = write!(label, " (×{n})");
    }
    label
}

fn shorten(text: &str) -> String {
    if crate::text::cut(text, LABEL_CHARS).is_none() {
        return text.to_string();
    }
    // One character gives way to the ellipsis: the label keeps its length.
    let start = crate::text::cut(text, LABEL_CHARS - 1).unwrap_or(text);
    format!("{start}…")
}

fn status_of(record: Option<&RunStatus>, key: &str) -> Option<StepPhase> {
    record.map(|r| r.steps.get(key).map_or(StepPhase::Pending, |s| s.status))
}

/// The two lines of a node: its key, then `kind · status`.
fn node_lines(graph: &FlowGraph<'_>, node: usize, record: Option<&RunStatus>) -> [String; 2] {
    let n = &graph.nodes[node];
    let mut second = n.step.kind().map_or("?", |k| k.name()).to_string();
    if let Some(status) = status_of(record, n.key) {
        second.push_str(" · ");
        second.push_str(status.as_str());
    }
    [n.key.to_string(), second]
}

/// What a format writes a line (or lines) for: a node, or the opening of
/// the loop body that follows the node.
enum Opening {
    Node(usize),
    Body(usize),
}

/// The flow's nodes, loop bodies nested after their loop, each written by
/// `write` with the indent of its depth; `close` ends a body. Both formats
/// nest alike.
fn write_nested(
    graph: &FlowGraph<'_>,
    out: &mut String,
    close: &str,
    write: &mut dyn FnMut(&mut String, Opening, &str),
) {
    nest(graph, (0, 1), out, close, write);
}

/// [`write_nested`] for list `list` at `depth`.
fn nest(
    graph: &FlowGraph<'_>,
    (list, depth): (usize, usize),
    out: &mut String,
    close: &str,
    write: &mut dyn FnMut(&mut String, Opening, &str),
) {
    let pad = "  ".repeat(depth);
    for &node in &graph.lists[list] {
        write(out, Opening::Node(node), &pad);
        if let Some(&body) = graph.body_of.get(&node) {
            write(out, Opening::Body(node), &pad);
            nest(graph, (body, depth + 1), out, close, write);
            let _ = writeln!(out, "{pad}{close}");
        }
    }
}

fn mermaid(graph: &FlowGraph<'_>, record: Option<&RunStatus>, edges: &[Edge]) -> String {
    let mut out = String::from("flowchart TD\n");
    write_nested(graph, &mut out, "end", &mut |out, visit, pad| match visit {
        Opening::Node(n) => {
            let [key, second] = node_lines(graph, n, record);
            let text = format!("{}<br/>{}", mermaid_text(&key), mermaid_text(&second));
            let _ = writeln!(out, "{pad}n{n}[\"{text}\"]");
        }
        Opening::Body(n) => {
            let title = mermaid_text(&format!("{}: each pass", graph.nodes[n].key));
            let _ = writeln!(out, "{pad}subgraph body{n}[\"{title}\"]");
        }
    });
    for e in edges {
        let arrow = match e.style {
            Style::Plain => "-->",
            Style::Taken => "==>",
            Style::NotTaken | Style::Back => "-.->",
        };
        if e.label.is_empty() {
            let _ = writeln!(out, "  n{} {arrow} n{}", e.from, e.to);
        } else {
            let label = mermaid_text(&e.label);
            let _ = writeln!(out, "  n{} {arrow}|\"{label}\"| n{}", e.from, e.to);
        }
    }
    if record.is_some() {
        out.push_str(concat!(
            "  classDef completed fill:#d3f9d8,stroke:#2b8a3e\n",
            "  classDef failed fill:#ffe3e3,stroke:#c92a2a\n",
            "  classDef skipped fill:#f1f3f5,stroke:#868e96,color:#868e96\n",
            "  classDef running fill:#fff3bf,stroke:#e67700\n",
            "  classDef waiting fill:#e7f5ff,stroke:#1971c2\n",
        ));
        for (n, node) in graph.nodes.iter().enumerate() {
            match status_of(record, node.key) {
                Some(StepPhase::Pending) | None => {}
                Some(status) => {
                    let _ = writeln!(out, "  class n{n} {}", status.as_str());
                }
            }
        }
    }
    out
}

/// Text inside a quoted Mermaid label: quotes, backticks and angle brackets
/// as entities (Mermaid reads `#quot;` and friends), line breaks as spaces.
fn mermaid_text(text: &str) -> String {
    escape(text, |c| match c {
        '"' => Some("#quot;"),
        '<' => Some("#lt;"),
        '>' => Some("#gt;"),
        // A label opening with "` would be read as a markdown string.
        '`' => Some("#96;"),
        '\n' | '\r' => Some(" "),
        _ => None,
    })
}

fn dot(graph: &FlowGraph<'_>, record: Option<&RunStatus>, edges: &[Edge]) -> String {
    let mut out = String::from(
        "digraph flow {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"sans-serif\"];\n  edge [fontname=\"sans-serif\", fontsize=10];\n",
    );
    write_nested(graph, &mut out, "}", &mut |out, visit, pad| match visit {
        Opening::Node(n) => {
            let text = dot_text(&node_lines(graph, n, record).join("\n"));
            let fill = status_of(record, graph.nodes[n].key).map_or("white", dot_fill);
            let _ = writeln!(out, "{pad}n{n} [label=\"{text}\", fillcolor=\"{fill}\"];");
        }
        Opening::Body(n) => {
            let title = dot_text(&format!("{}: each pass", graph.nodes[n].key));
            let _ = writeln!(
                out,
                "{pad}subgraph cluster_{n} {{\n{pad}  label=\"{title}\";"
            );
        }
    });
    for e in edges {
        let style = match e.style {
            Style::Plain => "solid",
            Style::Taken => "bold",
            Style::NotTaken => "dashed",
            Style::Back => "dotted",
        };
        let label = dot_text(&e.label);
        let _ = writeln!(
            out,
            "  n{} -> n{} [label=\"{label}\", style={style}];",
            e.from, e.to
        );
    }
    out.push_str("}\n");
    out
}

fn dot_fill(status: StepPhase) -> &'static str {
    match status {
        StepPhase::Pending => "white",
        StepPhase::Running => "#fff3bf",
        StepPhase::Waiting => "#e7f5ff",
        StepPhase::Completed => "#d3f9d8",
        StepPhase::Failed => "#ffe3e3",
        StepPhase::Skipped => "#f1f3f5",
    }
}

/// Text inside a quoted DOT string: backslashes and quotes escaped, line
/// breaks as DOT's `\n`.
fn dot_text(text: &str) -> String {
    escape(text, |c| match c {
        '\\' => Some("\\\\"),
        '"' => Some("\\\""),
        '\n' => Some("\\n"),
        '\r' => Some(""),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn steps() -> Vec<Step> {
        serde_json::from_value(json!([
            {"key": "draft", "agent": {"prompt": "Write."}},
            {"key": "review", "approval": {"decisions": ["approve", "changes"]},
             "sendBack": [{"exit": "changes", "to": "draft"}]},
            {"key": "publish", "after": ["review.approve"], "script": {"source": "x"}},
            {"key": "again", "loop": {"until": "true", "maxIterations": 2, "steps": [{"key": "inner", "script": {"source": "x"}}]}}
        ]))
        .expect("steps")
    }

    /// Asserts that `drawing` holds each of `lines`, showing it when not.
    fn assert_holds(drawing: &str, lines: &[&str]) {
        for line in lines {
            assert!(drawing.contains(line), "{line:?} missing from {drawing}");
        }
    }

    #[test]
    fn the_shape_of_a_flow_without_a_record() {
        let m = draw(&steps(), None, Format::Mermaid);
        assert!(m.starts_with("flowchart TD\n"), "{m}");
        assert_holds(
            &m,
            &[
                "n0[\"draft<br/>agent\"]",
                "n0 --> n1",
                "n1 -->|\"approve\"| n2",
                "n1 -.->|\"changes: send back\"| n0",
                "subgraph body3[\"again: each pass\"]",
                "n3 -.->|\"each pass\"| n4",
            ],
        );
        assert!(!m.contains("classDef"), "no statuses without a record");
    }

    #[test]
    fn a_record_colours_steps_and_labels_arrows() {
        let record: RunStatus = serde_json::from_value(json!({
            "phase": "Succeeded",
            "steps": {"draft": {"status": "completed"}, "review": {"status": "completed", "exit": "approve"},
                      "publish": {"status": "skipped"}},
            "arrows": [
                {"from": "draft", "to": "review", "taken": true, "detail": "its \"output\" (12 bytes)", "count": 2},
                {"from": "review.approve", "to": "publish", "taken": false, "detail": "`publish` did not run"}
            ]
        }))
        .expect("record");
        let m = draw(&steps(), Some(&record), Format::Mermaid);
        assert_holds(
            &m,
            &[
                "n0[\"draft<br/>agent · completed\"]",
                "n0 ==>|\"its #quot;output#quot; (12 bytes) (×2)\"| n1",
                "n1 -.->|\"approve: #96;publish#96; did not run\"| n2",
                "class n0 completed",
                "class n2 skipped",
            ],
        );
        let d = draw(&steps(), Some(&record), Format::Dot);
        assert!(d.starts_with("digraph flow {"), "{d}");
        assert_holds(
            &d,
            &[
                "n0 [label=\"draft\\nagent · completed\", fillcolor=\"#d3f9d8\"];",
                "n0 -> n1 [label=\"its \\\"output\\\" (12 bytes) (×2)\", style=bold];",
                "subgraph cluster_3 {",
            ],
        );
        assert!(d.trim_end().ends_with('}'));
    }

    #[test]
    fn the_pass_count_survives_shortening() {
        let record: RunStatus = serde_json::from_value(json!({
            "phase": "Succeeded",
            "steps": {"draft": {"status": "completed"}, "review": {"status": "completed"}},
            "arrows": [{"from": "draft", "to": "review", "taken": true, "detail": "y".repeat(200), "count": 7}]
        }))
        .expect("record");
        let m = draw(&steps(), Some(&record), Format::Mermaid);
        let cut = format!("{}…", "y".repeat(LABEL_CHARS - 1));
        assert!(m.contains(&format!("n0 ==>|\"{cut} (×7)\"| n1")), "{m}");
    }

    #[test]
    fn a_send_back_the_run_took_is_drawn_taken_with_its_count() {
        let record = |send_backs: serde_json::Value| -> RunStatus {
            serde_json::from_value(json!({
                "phase": "Succeeded",
                "steps": {"draft": {"status": "completed"}, "review": {"status": "completed"}},
                "sendBacks": send_backs
            }))
            .expect("record")
        };
        let twice = record(json!({"review->draft": 2}));
        let m = draw(&steps(), Some(&twice), Format::Mermaid);
        assert_holds(
            &m,
            &[
                "n1 ==>|\"changes: send back (×2)\"| n0",
                // The loop's own arrow is no send-back and stays as it was.
                "n3 -.->|\"each pass\"| n4",
            ],
        );
        let d = draw(&steps(), Some(&twice), Format::Dot);
        assert_holds(
            &d,
            &["n1 -> n0 [label=\"changes: send back (×2)\", style=bold];"],
        );
        let never = record(json!({}));
        let m = draw(&steps(), Some(&never), Format::Mermaid);
        assert!(m.contains("n1 -.->|\"changes: send back\"| n0"), "{m}");
    }

    #[test]
    fn long_labels_are_cut_with_an_ellipsis() {
        let long = "x".repeat(200);
        let s = shorten(&long);
        assert_eq!(s.chars().count(), LABEL_CHARS);
        assert!(s.ends_with('…'));
    }
}
