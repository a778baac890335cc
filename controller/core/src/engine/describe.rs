//! A few plain sentences about a flow, for agents with `tellFlow: true`:
//! what the flow is for, which steps come before and after this one.

use crate::api::StepKind;

use super::compiled::Compiled;

/// Describes the flow from the point of view of `node`.
pub fn describe(flow: &Compiled<'_>, node: usize) -> String {
    let mut out = String::new();
    if let Some(description) = &flow.spec.description {
        out.push_str(&format!("The flow's purpose: {}\n", description.trim()));
    }
    out.push_str("Its steps, in order:\n");
    for (i, n) in flow.graph.nodes.iter().enumerate() {
        let kind = n.step.kind().map_or("step", |k| StepKind::name(&k));
        let marker = if i == node { " (you)" } else { "" };
        let about = n
            .step
            .description
            .as_deref()
            .map(|d| format!(": {}", d.trim()))
            .unwrap_or_default();
        out.push_str(&format!("- `{}`, a {kind} step{marker}{about}\n", n.key));
    }
    out
}
