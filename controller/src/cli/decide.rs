//! `--decide` answers checked against the flow before anything runs: an
//! answer for a step that does not exist, or one the step would refuse,
//! must stop the run before earlier steps have their side effects — the way
//! an input that does not fit the flow does.

use std::collections::BTreeMap;

use crate::local::parse_answer;
use coxswain_core::api::{ApprovalStep, Step};
use coxswain_core::engine::ApprovalRequest;
use coxswain_core::flow::FlowGraph;

use super::CliError;

/// Every `--decide` value that cannot be used, one line each; Ok when all
/// name an approval step of the flow (loop bodies included) and fit it.
pub fn check_answers(steps: &[Step], answers: &[String]) -> Result<(), CliError> {
    let graph = FlowGraph::new(steps);
    let approvals: BTreeMap<&str, &ApprovalStep> = graph
        .nodes
        .iter()
        .filter_map(|n| Some((n.key, n.step.approval.as_ref()?)))
        .collect();
    let problems: Vec<String> = answers
        .iter()
        .filter_map(|given| {
            check_one(&graph, &approvals, given)
                .err()
                .map(|why| format!("--decide {given}: {why}"))
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Answers(problems))
    }
}

/// Why one `--decide` value cannot be used.
#[derive(Debug, thiserror::Error)]
enum AnswerProblem {
    /// No `=` in it.
    #[error("write STEP=DECISION, STEP=DECISION:FEEDBACK, STEP=JSON or STEP=DECISION:JSON")]
    Form,
    /// It names a step that is not an approval, or no step at all.
    #[error("{0}")]
    NotAnApproval(String),
    /// The step would refuse the answer.
    #[error(transparent)]
    Refused(#[from] crate::local::ApproveError),
}

/// One `STEP=ANSWER`, checked with the same parser the run uses when the
/// step asks, so the two never disagree.
fn check_one(
    graph: &FlowGraph<'_>,
    approvals: &BTreeMap<&str, &ApprovalStep>,
    given: &str,
) -> Result<(), AnswerProblem> {
    let Some((key, answer)) = given.split_once('=') else {
        return Err(AnswerProblem::Form);
    };
    let Some(approval) = approvals.get(key) else {
        let names: Vec<String> = approvals.keys().map(|k| format!("`{k}`")).collect();
        let which = if names.is_empty() {
            "the flow has no approval step".to_string()
        } else {
            format!("its approval steps are {}", names.join(", "))
        };
        return Err(AnswerProblem::NotAnApproval(match graph.find(key) {
            Some(node) => {
                let kind = graph.nodes[node].step.kind().map_or("?", |k| k.name());
                format!("step `{key}` is a {kind} step, not an approval; {which}")
            }
            None => format!("the flow has no step `{key}`; {which}"),
        }));
    };
    let request = ApprovalRequest {
        step: key.to_string(),
        attempt: 0,
        mode: approval.mode,
        show: BTreeMap::new(),
        decisions: approval.decisions.clone(),
        fields: approval.fields.clone(),
        approvers: approval.approvers.clone(),
        instructions: None,
        allow_self_approval: approval.allow_self_approval,
        approvals: approval.required_approvals(),
        sends_back: Vec::new(),
        lookups: Vec::new(),
        data: Default::default(),
    };
    parse_answer(&request, answer)?;
    Ok(())
}
