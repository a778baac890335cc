//! Approvals: asking a person, and taking their answer in.

use crate::flow::{AnswerError, check_answer};

use super::*;

impl RunMachine<'_> {
    /// Every approval waiting for a person, rebuilt from the record: a
    /// restarted controller (re)creates its Approval objects from these, as
    /// it finds its Jobs from [`RunMachine::running_work`].
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        (0..self.flow.graph.nodes.len())
            .filter(|&node| self.status(node) == StepStatus::Waiting)
            .filter_map(|node| {
                let attempts = self.state.steps.get(self.flow.key(node))?.attempts.len();
                self.request(node, attempts as u32)
            })
            .collect()
    }

    pub(in crate::engine) fn ask(&mut self, node: usize) {
        let attempt = self.push_attempt(node, None);
        self.set_status(node, StepStatus::Waiting);
        if let Some(request) = self.request(node, attempt) {
            self.actions.push(Action::Ask(request));
        }
    }

    /// What the person deciding `node`'s attempt is asked.
    fn request(&self, node: usize, attempt: u32) -> Option<ApprovalRequest> {
        let Some(StepKind::Approval(a)) = self.flow.steps[node].step.kind() else {
            return None;
        };
        Some(ApprovalRequest {
            step: self.flow.key(node).to_string(),
            attempt,
            mode: a.mode,
            show: self.outputs_of(&a.show).into_iter().collect(),
            decisions: a.decisions.clone(),
            fields: a.fields.clone(),
            approvers: a.approvers.clone(),
            instructions: a.instructions.clone(),
            allow_self_approval: a.allow_self_approval,
        })
    }

    /// Checks an answer and, when it fits, completes the approval with it.
    pub(in crate::engine) fn decided(
        &mut self,
        key: &str,
        attempt: u32,
        decision: Decision,
    ) -> Result<(), DecideError> {
        let not_waiting = || DecideError::NotWaiting {
            step: key.to_string(),
            attempt,
        };
        let node = self.flow.node(key).ok_or_else(not_waiting)?;
        let record = self.state.steps.get(key).ok_or_else(not_waiting)?;
        if !self.is_active()
            || record.status != StepStatus::Waiting
            || record.attempts.len() as u32 != attempt
        {
            return Err(not_waiting());
        }
        let Some(StepKind::Approval(a)) = self.flow.steps[node].step.kind() else {
            return Err(not_waiting());
        };
        check_answer(
            key,
            a,
            decision.decision.as_deref(),
            decision.response.as_ref(),
        )?;
        let (output, exit) = match a.mode {
            ApprovalMode::Review => {
                let d = decision.decision.clone().unwrap_or_default();
                (
                    json!({"decision": d, "feedback": decision.feedback, "decidedBy": decision.decided_by}),
                    Some(d),
                )
            }
            ApprovalMode::Entry => (decision.response.clone().unwrap_or(Value::Null), None),
        };
        let text = decision.feedback.clone();
        self.complete(node, output, text, exit.clone(), None);
        if let Some(exit) = exit {
            self.maybe_send_back(node, &exit, decision.decided_by, decision.feedback);
        }
        Ok(())
    }
}

/// Why a person's answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// The step is not waiting for this answer: unknown, already decided,
    /// a later attempt asked, or the run is over.
    #[error("step `{step}` is not waiting for a decision on attempt {attempt}")]
    NotWaiting {
        /// The step answered.
        step: String,
        /// The attempt the answer was for.
        attempt: u32,
    },
    /// The answer does not fit the step.
    #[error(transparent)]
    Answer(#[from] AnswerError),
}
