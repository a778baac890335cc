//! Settling: a step completes, is skipped or fails; the run finishes or stops.

use super::attempts::{close_attempt, too_deep};
use super::*;

impl RunMachine<'_> {
    pub(in crate::engine) fn complete(
        &mut self,
        node: usize,
        output: Value,
        text: Option<String>,
        exit: Option<String>,
        usage: Option<crate::api::TokenUsage>,
    ) {
        // An executor's output was bounded when its attempt ended; this
        // catches what the engine builds itself: a loop's or a parallel
        // step's output, which wraps its children's.
        if let Some(error) = too_deep("the step's output", &output) {
            return self.fail(node, error);
        }
        let now = self.now_text.clone();
        let record = self.record_mut(node);
        if let Some(last) = close_attempt(&mut record.attempts, StepPhase::Completed, &now) {
            last.output = Some(output.clone());
            last.text = text.clone();
            last.usage = usage;
        }
        record.output = Some(output);
        record.text = text;
        record.error = None;
        record.exit = exit.clone();
        record.finished_at = Some(now);
        record.retry_at = None;
        record.review = None;
        self.set_status(node, StepPhase::Completed);
        self.settled(node);
        // People and deciding agents send back with their instructions,
        // from where they decided.
        let step = self.flow.steps[node].step;
        let decides = step.approval.is_some() || step.agent.is_some();
        if let (Some(exit), false) = (exit, decides) {
            self.maybe_send_back(node, &exit, None, None);
        }
    }

    pub(in crate::engine) fn skip(&mut self, node: usize, reason: &str) {
        let key = self.flow.key(node);
        self.state.due.remove(key);
        let now = self.now_text.clone();
        let record = self.record_mut(node);
        record.output = None;
        record.text = None;
        record.error = None;
        record.exit = None;
        record.reason = Some(reason.to_string());
        record.finished_at = Some(now);
        self.set_status(node, StepPhase::Skipped);
        self.settled(node);
    }

    pub(in crate::engine) fn fail(&mut self, node: usize, error: StepError) {
        let now = self.now_text.clone();
        let record = self.record_mut(node);
        if let Some(last) = close_attempt(&mut record.attempts, StepPhase::Failed, &now) {
            last.error = Some(error.clone());
        }
        record.error = Some(error.clone());
        record.finished_at = Some(now);
        record.retry_at = None;
        self.set_status(node, StepPhase::Failed);
        if self.flow.steps[node].continue_on_failure {
            self.settled(node);
            return;
        }
        // The failure travels up through the loops it sits in.
        if let Some(parent) = self.flow.graph.nodes[node].parent {
            let message = format!("step `{}` failed: {}", self.flow.key(node), error.message);
            return self.fail(parent, step_error(&error.code, message));
        }
        let message = format!("step `{}` failed: {}", self.flow.key(node), error.message);
        self.stop(RunPhase::Failed, step_error(&error.code, message));
    }

    /// A node settled: its successors may now be ready.
    pub(in crate::engine) fn settled(&mut self, node: usize) {
        self.candidates
            .extend(self.flow.graph.next(node).iter().rev());
    }

    /// Ends the run: running work is stopped and marked as such.
    pub(in crate::engine) fn stop(&mut self, phase: RunPhase, error: StepError) {
        if !self.is_active() && self.state.phase != RunPhase::Pending {
            return;
        }
        let now = self.now_text.clone();
        for node in 0..self.flow.graph.nodes.len() {
            let key = self.flow.key(node).to_string();
            let Some(record) = self.state.steps.get_mut(&key) else {
                continue;
            };
            let mut stopped = false;
            for (i, part) in record.parts.iter_mut().enumerate() {
                if matches!(part.status, StepPhase::Running | StepPhase::Waiting) {
                    if part.retry_at.take().is_none() {
                        self.actions.push(Action::Stop {
                            step: key.clone(),
                            part: Some(i),
                        });
                    }
                    let error = step_error(codes::CANCELLED, "stopped: the run ended");
                    if let Some(last) = close_attempt(&mut part.attempts, StepPhase::Failed, &now) {
                        last.error = Some(error.clone());
                    }
                    part.status = StepPhase::Failed;
                    part.error = Some(error);
                    stopped = true;
                }
            }
            if matches!(record.status, StepPhase::Running | StepPhase::Waiting) {
                let in_flight = record.retry_at.take().is_none();
                if in_flight
                    && !stopped
                    && self.flow.steps[node].part.is_none()
                    && self.flow.steps[node].step.loop_.is_none()
                {
                    self.actions.push(Action::Stop {
                        step: key.clone(),
                        part: None,
                    });
                }
                record.status = StepPhase::Failed;
                record
                    .error
                    .get_or_insert_with(|| step_error(codes::CANCELLED, "stopped: the run ended"));
                close_attempt(&mut record.attempts, StepPhase::Failed, &now);
                self.refresh_view(node);
            }
        }
        self.retrying.clear();
        self.state.phase = phase;
        self.state.error = Some(error);
        self.state.finished_at = Some(self.now_text.clone());
        self.state.due.clear();
        self.candidates.clear();
        self.hold_for_push();
    }

    // ---- retries, loops, parallel steps, send-backs ---------------------------

    pub(in crate::engine) fn finish_if_done(&mut self) {
        let top = &self.flow.graph.lists[0];
        let open = self.state.pending_send_back.is_some()
            || top.iter().rev().any(|&n| {
                self.state.due.contains(self.flow.key(n))
                    || matches!(
                        self.step_status(n),
                        StepPhase::Running | StepPhase::Waiting | StepPhase::Pending
                    )
            });
        if open {
            // Running or Waiting is settled in `summarize`: telling them
            // apart walks every record, too much for every event.
            return;
        }
        let scope = self.scope_at_end();
        // Without an `output:`, the run's result is the last completed
        // step's output: the status shows it as the run's `output` (where
        // people and tools look, the same locally and on a cluster) and
        // names the step it came from.
        match &self.flow.output {
            Some(template) => {
                let output = template.resolve(&scope);
                if let Some(error) = too_deep("the flow's `output:`", &output) {
                    // Failing keeps the status readable; writing the value
                    // would not be.
                    return self.stop(RunPhase::Failed, error);
                }
                self.state.output = Some(output);
            }
            None => match top
                .iter()
                .rev()
                .find(|&&n| self.step_status(n) == StepPhase::Completed)
            {
                Some(&n) => {
                    let key = self.flow.key(n).to_string();
                    let output = self.state.steps.get(&key).and_then(|r| r.output.clone());
                    self.state.output = Some(output.unwrap_or(Value::Null));
                    self.state.output_from = Some(key);
                }
                None => self.state.output = Some(Value::Null),
            },
        }
        self.state.phase = RunPhase::Succeeded;
        self.state.finished_at = Some(self.now_text.clone());
        self.hold_for_push();
    }
}
