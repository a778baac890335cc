//! Approvals: asking a person, and taking their answer in.

use jiff::Timestamp;

use crate::flow::{AnswerError, check_answer};

use super::*;

impl RunMachine<'_> {
    /// Every approval waiting for a person, rebuilt from the status: a
    /// restarted controller (re)creates its Approval objects from these, as
    /// it finds its Jobs from [`RunMachine::running_work`].
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        self.live_nodes()
            .into_iter()
            .filter(|&node| self.step_status(node) == StepPhase::Waiting)
            .filter_map(|node| {
                let attempts = self.state.steps.get(self.flow.key(node))?.attempts.len();
                self.request(node, attempts as u32)
            })
            .collect()
    }

    /// When the waiting approval of `node` runs out of time: its current
    /// attempt's start plus the step's `timeout`, if it has one.
    pub(in crate::engine) fn approval_deadline(&self, node: usize) -> Option<Timestamp> {
        let timeout = self.flow.steps[node].timeout?;
        if !matches!(
            self.flow.steps[node].step.kind(),
            Some(StepKind::Approval(_))
        ) {
            return None;
        }
        let record = self.state.steps.get(self.flow.key(node))?;
        if record.status != StepPhase::Waiting {
            return None;
        }
        let started = record.attempts.last()?.started_at.as_deref()?;
        // An unreadable start is due at once, as an unreadable retry time is.
        let started: Timestamp = started.parse().unwrap_or(Timestamp::UNIX_EPOCH);
        started.checked_add(timeout).ok()
    }

    /// The earliest deadline of an approval waiting with a `timeout`.
    pub(in crate::engine) fn next_approval_deadline(&self) -> Option<Timestamp> {
        self.timed_approvals
            .iter()
            .filter_map(|&node| self.approval_deadline(node))
            .min()
    }

    /// Ends the waiting approvals whose time ran out: the attempt fails with
    /// `workflow.timeout`, and like any failed attempt it is tried again
    /// (a new Approval asked) while `attempts` allow, or the step fails.
    pub(in crate::engine) fn expire_approvals(&mut self) -> bool {
        let now = self.now;
        let due: Vec<usize> = self
            .timed_approvals
            .iter()
            .copied()
            .filter(|&node| self.approval_deadline(node).is_some_and(|at| at <= now))
            .collect();
        for &node in &due {
            let limit = self.flow.steps[node]
                .step
                .timeout
                .as_deref()
                .unwrap_or("the timeout");
            let message = format!("nobody answered within {limit}");
            // Between its tries an approval is Running with a retry time,
            // as any step is; the retry asks again.
            self.set_status(node, StepPhase::Running);
            self.attempt_failed(node, Failed::from(step_error(codes::TIMEOUT, message)));
        }
        !due.is_empty()
    }

    pub(in crate::engine) fn ask(&mut self, node: usize) {
        let attempt = self.push_attempt(node, None);
        self.set_status(node, StepPhase::Waiting);
        if let Some(request) = self.request(node, attempt)
            && !request.lookups_due()
        {
            self.actions.push(Action::Ask(request));
        }
    }

    /// What the person deciding `node`'s attempt is asked: the outputs it
    /// shows, and what its lookups found under their names.
    pub(in crate::engine) fn request(&self, node: usize, attempt: u32) -> Option<ApprovalRequest> {
        let compiled = &self.flow.steps[node];
        let Some(StepKind::Approval(a)) = compiled.step.kind() else {
            return None;
        };
        let found = self
            .state
            .steps
            .get(self.flow.key(node))
            .and_then(|r| r.attempts.get((attempt as usize).checked_sub(1)?))
            .and_then(|a| a.lookups.as_ref());
        let lookups = super::build_work::lookup_work(compiled, found);
        let mut show: BTreeMap<String, Value> = self.outputs_of(&a.show).into_iter().collect();
        let data = if lookups.is_empty() {
            Default::default()
        } else {
            Box::new(self.data_view(node, None, &super::build_work::data_keys(compiled)))
        };
        for l in &lookups {
            if let Some(found) = &l.found {
                show.insert(l.name.clone(), found.clone());
            }
        }
        Some(ApprovalRequest {
            lookups,
            data,
            step: self.flow.key(node).to_string(),
            attempt,
            mode: a.mode,
            show,
            decisions: a.decisions.clone(),
            fields: a.fields.clone(),
            approvers: a.approvers.clone(),
            instructions: a.instructions.clone(),
            allow_self_approval: a.allow_self_approval,
            approvals: a.required_approvals(),
            sends_back: self.flow.steps[node]
                .step
                .send_back
                .iter()
                .map(|b| b.exit.clone())
                .collect(),
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
            || record.status != StepPhase::Waiting
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
        let (mut output, exit) = match a.mode {
            ApprovalMode::Review => {
                let d = decision.decision.clone().unwrap_or_default();
                (
                    json!({"decision": d, "feedback": decision.feedback, "decidedBy": decision.decided_by}),
                    Some(d),
                )
            }
            ApprovalMode::Entry => (decision.response.clone().unwrap_or(Value::Null), None),
            ApprovalMode::Both => {
                let d = decision.decision.clone().unwrap_or_default();
                (
                    json!({
                        "decision": d,
                        "feedback": decision.feedback,
                        "decidedBy": decision.decided_by,
                        "response": decision.response.clone().unwrap_or(Value::Null),
                    }),
                    Some(d),
                )
            }
        };
        if !decision.ballots.is_empty()
            && let Value::Object(map) = &mut output
        {
            let ballots: Vec<Value> = decision
                .ballots
                .iter()
                .map(|b| json!({"by": b.by, "decision": b.decision, "feedback": b.feedback}))
                .collect();
            map.insert("answers".into(), Value::Array(ballots));
        }
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
