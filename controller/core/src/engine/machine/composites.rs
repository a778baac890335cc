//! Loops and parallel steps: starting their passes and parts, and settling them.

use super::attempts::open_attempt;
use super::part_keys::part_records;
use super::*;

impl RunMachine<'_> {
    pub(in crate::engine) fn begin_loop(&mut self, node: usize) {
        self.record_mut(node).iteration = Some(1);
        self.set_status(node, StepPhase::Running);
        self.start_pass(node);
    }

    /// Marks a loop's body due for its next pass.
    pub(in crate::engine) fn start_pass(&mut self, node: usize) {
        let body: Vec<usize> = self.flow.body(node).to_vec();
        for &child in &body {
            self.state.due.insert(self.flow.key(child).to_string());
        }
        self.candidates.extend(body.iter().rev());
    }

    pub(in crate::engine) fn begin_parallel(&mut self, node: usize) {
        let compiled = &self.flow.steps[node];
        let scope = self.scope(node, None);
        let parts: Vec<PartStatus> = if let Some(items) = &compiled.items {
            match items.resolve(&scope) {
                Value::Array(items) => part_records(items),
                Value::Null => Vec::new(),
                other => {
                    let message = format!(
                        "items must be a list; it is {}",
                        crate::flow::describe_type(&other)
                    );
                    return self.fail(node, step_error(codes::EXPRESSION, message));
                }
            }
        } else {
            compiled
                .parts
                .iter()
                .map(|(key, label, input)| PartStatus {
                    key: key.clone(),
                    label: label.clone(),
                    item: Some(input.as_ref().map_or(Value::Null, |t| t.resolve(&scope))),
                    ..Default::default()
                })
                .collect()
        };
        let record = self.record_mut(node);
        record.parts = parts;
        record.rounds += 1;
        record.output = None;
        record.text = None;
        self.set_status(node, StepPhase::Running);
        self.fill_parallel(node);
    }

    /// Starts pending parts up to `maxConcurrency`.
    pub(in crate::engine) fn fill_parallel(&mut self, node: usize) {
        let limit = match self.flow.steps[node]
            .step
            .parallel
            .as_ref()
            .and_then(|p| p.max_concurrency)
        {
            Some(n) if n > 0 => n as usize,
            _ => usize::MAX,
        };
        let key = self.flow.key(node);
        let Some(record) = self.state.steps.get(key) else {
            return;
        };
        let busy = record
            .parts
            .iter()
            .filter(|p| matches!(p.status, StepPhase::Running | StepPhase::Waiting))
            .count();
        let waiting: Vec<usize> = record
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status == StepPhase::Pending)
            .map(|(i, _)| i)
            .take(limit.saturating_sub(busy))
            .collect();
        for part in waiting {
            self.start_part(node, part);
        }
    }

    pub(in crate::engine) fn start_part(&mut self, node: usize, part: usize) {
        let iteration = self.iteration_of(node);
        let now = self.now_text.clone();
        let inner = self.flow.steps[node].part.as_deref();
        // A part's `when` false skips just that part.
        if let Some(when) = inner.and_then(|c| c.when.as_ref()) {
            match when.eval_bool(&self.scope(node, Some(part))) {
                Err(e) => return self.settle_part(node, part, Err(expression_error(&e).into())),
                Ok(false) => {
                    let p = &mut self.record_mut(node).parts[part];
                    p.status = StepPhase::Skipped;
                    return;
                }
                Ok(true) => {}
            }
        }
        let p = &mut self.record_mut(node).parts[part];
        open_attempt(&mut p.attempts, iteration, now, None);
        p.status = StepPhase::Running;
        p.retry_at = None;
        if let Some(work) = self.part_work(node, part) {
            self.actions.push(Action::Run(Box::new(work)));
        }
    }

    /// Ends loop passes and parallel steps whose work is all settled.
    pub(in crate::engine) fn settle_composites(&mut self) -> bool {
        let mut progressed = false;
        for &node in self.flow.composites.iter().rev() {
            if self.step_status(node) != StepPhase::Running {
                continue;
            }
            let compiled = &self.flow.steps[node];
            if compiled.until.is_some() && self.body_settled(node) {
                self.end_pass(node);
                progressed = true;
            } else if compiled.part.is_some() {
                progressed |= self.end_parallel(node);
            }
        }
        progressed
    }

    pub(in crate::engine) fn body_settled(&self, node: usize) -> bool {
        if self.state.pending_send_back.as_ref().is_some_and(|p| {
            self.flow
                .node(&p.to)
                .is_some_and(|t| self.flow.graph.nodes[t].parent == Some(node))
        }) {
            return false;
        }
        self.flow.body(node).iter().all(|&child| {
            !self.state.due.contains(self.flow.key(child))
                && matches!(
                    self.step_status(child),
                    StepPhase::Completed | StepPhase::Failed | StepPhase::Skipped
                )
        })
    }

    pub(in crate::engine) fn end_pass(&mut self, node: usize) {
        let compiled = &self.flow.steps[node];
        let Some(until) = &compiled.until else { return };
        let iteration = self.pass_of(node);
        let done = match until.eval_bool(&self.scope_inside_loop(node, iteration)) {
            Ok(done) => done,
            Err(e) => return self.fail(node, expression_error(&e)),
        };
        let max = compiled.step.loop_.as_ref().map_or(1, |l| l.max_iterations);
        if done {
            let steps: Map<String, Value> = self
                .flow
                .body(node)
                .iter()
                .map(|&child| {
                    let key = self.flow.key(child);
                    (key.to_string(), self.output_of(key))
                })
                .collect();
            self.complete(
                node,
                json!({"iterations": iteration, "steps": steps}),
                None,
                None,
                None,
            );
        } else if iteration >= max {
            let message = format!(
                "the loop made {iteration} passes and its `until` never held (maxIterations is {max})"
            );
            self.fail(node, step_error(codes::LOOP_LIMIT, message));
        } else {
            self.record_mut(node).iteration = Some(iteration + 1);
            for &child in self.flow.body(node) {
                self.record_mut(child).round_start_now();
            }
            self.start_pass(node);
        }
    }

    pub(in crate::engine) fn end_parallel(&mut self, node: usize) -> bool {
        let Some(record) = self.state.steps.get(self.flow.key(node)) else {
            return false;
        };
        let open = record.parts.iter().any(|p| {
            matches!(
                p.status,
                StepPhase::Pending | StepPhase::Running | StepPhase::Waiting
            )
        });
        if open {
            return false;
        }
        let failed = record
            .parts
            .iter()
            .find(|p| p.status == StepPhase::Failed)
            .cloned();
        let continue_parts = self.flow.steps[node]
            .part
            .as_ref()
            .is_some_and(|c| c.continue_on_failure);
        let output = crate::api::stored::gathered(&record.parts);
        match failed {
            Some(p) if !continue_parts => {
                self.record_mut(node).output = Some(output);
                let error = p
                    .error
                    .unwrap_or_else(|| step_error(codes::CANCELLED, "failed"));
                self.fail(
                    node,
                    step_error(
                        &error.code,
                        format!("part `{}` failed: {}", p.key, error.message),
                    ),
                );
            }
            _ => self.complete(node, output, None, None, None),
        }
        true
    }
}
