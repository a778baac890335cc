//! Send-backs: a decision that sends work back to an earlier step.

use super::*;

impl RunMachine<'_> {
    pub(in crate::engine) fn maybe_send_back(
        &mut self,
        node: usize,
        exit: &str,
        reviewer: Option<String>,
        instructions: Option<String>,
    ) {
        let step = self.flow.steps[node].step;
        let Some(back) = step.send_back.iter().find(|b| b.exit == exit) else {
            return;
        };
        let from = self.flow.key(node).to_string();
        let count = self
            .state
            .send_backs
            .entry(format!("{from}->{}", back.to))
            .or_insert(0);
        *count += 1;
        if *count > MAX_SEND_BACKS {
            let message = format!(
                "`{from}` sent work back to `{}` more than {MAX_SEND_BACKS} times",
                back.to
            );
            return self.stop(
                RunPhase::Failed,
                step_error(codes::SEND_BACK_LIMIT, message),
            );
        }
        // What the reviewer looked at: a person what the step shows; an
        // agent the step it reviews, or else its own work.
        let reviewed = match (&step.approval, &step.agent) {
            (Some(a), _) => Some(Value::Object(self.outputs_of(&a.show))),
            (None, Some(agent)) => {
                let looked_at = agent.reviews.clone().unwrap_or_else(|| from.clone());
                Some(Value::Object(self.outputs_of(&[looked_at])))
            }
            (None, None) => None,
        };
        self.state.pending_send_back = Some(ReviewNote {
            from: from.clone(),
            to: back.to.clone(),
            reviewer: reviewer.unwrap_or(from),
            decision: exit.to_string(),
            instructions,
            reviewed,
        });
    }

    /// Once nothing runs in its list, a pending send-back makes the target
    /// and every step after it due again.
    pub(in crate::engine) fn apply_pending_send_back(&mut self) -> bool {
        let Some(pending) = self.state.pending_send_back.clone() else {
            return false;
        };
        let Some(target) = self.flow.node(&pending.to) else {
            self.state.pending_send_back = None;
            return false;
        };
        let list: Vec<usize> = self.flow.list_of(target).to_vec();
        let busy = list
            .iter()
            .any(|&n| matches!(self.step_status(n), StepPhase::Running | StepPhase::Waiting));
        if busy {
            return false;
        }
        let from_position = self.flow.graph.nodes[target].position;
        for &n in list
            .iter()
            .filter(|&&n| self.flow.graph.nodes[n].position >= from_position)
        {
            self.state.due.insert(self.flow.key(n).to_string());
            self.record_mut(n).round_start_now();
        }
        self.record_mut(target).review = Some(pending);
        self.state.pending_send_back = None;
        self.candidates.extend(list.iter().rev());
        true
    }
}
