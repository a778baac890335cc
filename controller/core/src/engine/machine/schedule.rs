//! Scheduling: which step starts next, which is skipped, and what a condition or a join does.

use super::*;

impl RunMachine<'_> {
    // ---- scheduling -------------------------------------------------------

    /// Starts whatever is ready, settles composites and the run, until nothing changes.
    pub(in crate::engine) fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(node) = self.candidates.pop() {
                progressed |= self.consider(node);
            }
            progressed |= self.retry_due();
            progressed |= self.apply_pending_send_back();
            progressed |= self.settle_composites();
            if !self.is_active() || (!progressed && self.candidates.is_empty()) {
                break;
            }
        }
        if self.is_active() {
            self.finish_if_done();
        }
    }

    /// Looks at one node: start it, skip it, or leave it waiting.
    pub(in crate::engine) fn consider(&mut self, node: usize) -> bool {
        let key = self.flow.key(node);
        if !self.state.due.contains(key)
            || !self.list_active(node)
            || self.blocked_by_send_back(node)
        {
            return false;
        }
        let preds = &self.flow.graph.nodes[node].preds;
        if !preds.is_empty() {
            let mut any_taken = false;
            for arrow in preds {
                match self.arrow_state(arrow.from, arrow.exit) {
                    None => return false,
                    Some(taken) => any_taken |= taken,
                }
            }
            if !any_taken {
                self.skip(node, "no arrow into it was taken");
                return true;
            }
        }
        self.begin(node);
        true
    }

    /// `None` while the source is unsettled; otherwise whether the arrow was taken.
    pub(in crate::engine) fn arrow_state(&self, from: usize, exit: Option<&str>) -> Option<bool> {
        let key = self.flow.key(from);
        if self.state.due.contains(key) {
            return None;
        }
        let record = self.state.steps.get(key)?;
        let went_on = match record.status {
            StepPhase::Completed => true,
            StepPhase::Failed => self.flow.steps[from].continue_on_failure,
            StepPhase::Skipped => false,
            _ => return None,
        };
        Some(went_on && exit.is_none_or(|e| record.exit.as_deref() == Some(e)))
    }

    /// Whether the list a node sits in is running: the flow's own list while
    /// the run is, a loop's body while the loop is.
    pub(in crate::engine) fn list_active(&self, node: usize) -> bool {
        match self.flow.graph.nodes[node].parent {
            None => true,
            Some(parent) => self.step_status(parent) == StepPhase::Running,
        }
    }

    /// While a send-back waits for work in progress, its list starts nothing new.
    pub(in crate::engine) fn blocked_by_send_back(&self, node: usize) -> bool {
        let Some(pending) = &self.state.pending_send_back else {
            return false;
        };
        self.flow.node(&pending.to).is_some_and(|to| {
            self.flow.graph.nodes[to].parent == self.flow.graph.nodes[node].parent
        })
    }

    pub(in crate::engine) fn begin(&mut self, node: usize) {
        let key = self.flow.key(node);
        self.state.due.remove(key);
        let iteration = self.iteration_of(node);
        let now = self.now_text.clone();
        {
            let record = self.record_mut(node);
            record.started_at = Some(now);
            record.finished_at = None;
            record.error = None;
            record.exit = None;
            record.reason = None;
            record.retry_at = None;
            record.iteration = iteration;
            // A step copied into a rerun that runs again (sent back to) is
            // this run's own from now on.
            record.copied_from = None;
        }
        let compiled = &self.flow.steps[node];
        if let Some(when) = &compiled.when {
            match when.eval_bool(&self.scope(node, None)) {
                Err(e) => return self.fail(node, expression_error(&e)),
                Ok(false) => return self.skip(node, "its `when` was false"),
                Ok(true) => {}
            }
        }
        self.count_taken_arrows(node);
        let Some(kind) = compiled.step.kind() else {
            return self.fail(node, step_error(codes::OUTPUT, "the step has no kind"));
        };
        match kind {
            StepKind::Condition(_) => self.run_condition(node),
            StepKind::Join(_) => self.run_join(node),
            StepKind::Approval(_) => {
                self.record_mut(node).round_start_now();
                self.ask(node)
            }
            StepKind::Loop(_) => self.begin_loop(node),
            StepKind::Parallel(_) => self.begin_parallel(node),
            StepKind::Agent(_)
            | StepKind::Script(_)
            | StepKind::Http(_)
            | StepKind::Message(_)
            | StepKind::Save(_) => {
                self.record_mut(node).round_start_now();
                self.start_attempt(node)
            }
        }
    }

    /// Adds one pass to every arrow into `node` that was taken.
    pub(in crate::engine) fn count_taken_arrows(&mut self, node: usize) {
        let to = self.flow.key(node);
        for arrow in &self.flow.graph.nodes[node].preds {
            if self.arrow_state(arrow.from, arrow.exit) != Some(true) {
                continue;
            }
            let label = self.flow.graph.source_label(arrow);
            *self
                .state
                .arrow_counts
                .entry(crate::engine::arrows::count_key(&label, to))
                .or_insert(0) += 1;
        }
    }

    pub(in crate::engine) fn run_condition(&mut self, node: usize) {
        let compiled = &self.flow.steps[node];
        let scope = self.scope(node, None);
        let mut exit = None;
        for (name, expr) in &compiled.condition {
            match expr.eval_bool(&scope) {
                Err(e) => return self.fail(node, expression_error(&e)),
                Ok(true) => {
                    exit = Some(name.clone());
                    break;
                }
                Ok(false) => {}
            }
        }
        let single = compiled
            .step
            .condition
            .as_ref()
            .is_some_and(|c| c.paths.is_empty());
        let (exit, result) = match (exit, single) {
            (Some(_), true) => ("true".to_string(), json!(true)),
            (None, true) => ("false".to_string(), json!(false)),
            (Some(name), false) => (name.clone(), json!(name)),
            (None, false) => (compiled.otherwise.clone(), json!(compiled.otherwise)),
        };
        self.complete(node, json!({ "result": result }), None, Some(exit), None);
    }

    pub(in crate::engine) fn run_join(&mut self, node: usize) {
        let mut texts = Vec::new();
        let mut outputs = Map::new();
        for arrow in &self.flow.graph.nodes[node].preds {
            if self.arrow_state(arrow.from, arrow.exit) != Some(true) {
                continue;
            }
            let key = self.flow.key(arrow.from);
            let record = self.state.steps.get(key);
            let output = record.and_then(|r| r.output.clone()).unwrap_or(Value::Null);
            let text = record
                .and_then(|r| r.text.clone())
                .unwrap_or_else(|| compact(&output));
            texts.push(format!("## {key}\n\n{text}"));
            outputs.insert(key.to_string(), output);
        }
        self.complete(
            node,
            Value::Object(outputs),
            Some(texts.join("\n\n")),
            None,
            None,
        );
    }
}
