//! The run state machine: given the compiled flow, the run's record and one
//! event (start, work finished, a person decided, time passed, cancel), it
//! updates the record and returns the actions to take. No I/O, no clock:
//! time comes in as an argument, so the controller and `coxswain run` drive
//! it the same way and a restarted controller resumes from the record alone.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::api::{
    ApprovalMode, Approvers, Attempt, Field, PartRecord, ReviewNote, RunPhase, RunStatus,
    StepError, StepKind, StepRecord, StepStatus,
};
use crate::expr::EvalError;

use super::compiled::{CompiledFlow, CompiledStep};
use super::scope::{EvalScope, StepViews};
use super::work::{
    AgentTask, ChangeRequest, DataView, Done, Failed, Given, PartRef, RunInfo, Task, Work,
    WorkResult, codes, step_error,
};

/// Most times one send-back arrow may be taken in a run.
pub const MAX_SEND_BACKS: i32 = 10;

/// How many of a step's latest attempts keep their output and text in the
/// record; older ones keep status, times, error and usage (DESIGN 10).
pub const ATTEMPTS_WITH_OUTPUT: usize = 5;

/// Something that happened to a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The run begins.
    Start,
    /// An attempt ended.
    Finished {
        /// The step's key.
        step: String,
        /// The part, for a parallel step.
        part: Option<usize>,
        /// The attempt number the work carried.
        attempt: u32,
        /// What it produced.
        result: WorkResult,
    },
    /// A person answered an approval.
    Decided {
        /// The step's key.
        step: String,
        /// The attempt the approval was for.
        attempt: u32,
        /// The answer.
        decision: Decision,
    },
    /// Time passed (a retry may be due).
    Tick,
    /// Stop the run.
    Cancel,
}

/// A person's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// In review mode: the decision taken.
    pub decision: Option<String>,
    /// Instructions for whoever redoes the work.
    pub feedback: Option<String>,
    /// In entry mode: the data filled in.
    pub response: Option<Value>,
    /// Who decided.
    pub decided_by: Option<String>,
}

/// What the engine asks its driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run one attempt.
    Run(Box<Work>),
    /// Ask a person.
    Ask(ApprovalRequest),
    /// Call back with [`Event::Tick`] at this time.
    WakeAt(Timestamp),
    /// Stop running work (the run failed or was cancelled).
    Stop {
        /// The step's key.
        step: String,
        /// The part, for a parallel step.
        part: Option<usize>,
    },
}

/// What a person is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The step's key.
    pub step: String,
    /// The attempt it answers.
    pub attempt: u32,
    /// Review or entry.
    pub mode: ApprovalMode,
    /// What the person looks at, by step key.
    pub show: BTreeMap<String, Value>,
    /// The decisions allowed.
    pub decisions: Vec<String>,
    /// In entry mode, what to fill in.
    pub fields: Vec<Field>,
    /// Who may decide.
    pub approvers: Option<Approvers>,
    /// Guidance for the person.
    pub instructions: Option<String>,
}

/// A run in progress: the compiled flow, the record, and derived views.
pub struct RunMachine<'f> {
    flow: &'f CompiledFlow<'f>,
    /// The run's record; what the controller writes to the Run's status.
    /// Private: the machine's indexes (`recorded`, `views`) follow it.
    state: RunStatus,
    input: Value,
    run: RunInfo,
    run_value: Value,
    /// `{status, output, text, error}` per node (by index), kept in step
    /// with `state`.
    views: Vec<Value>,
    /// Nodes to look at on the next pass of the scheduler.
    candidates: Vec<usize>,
    actions: Vec<Action>,
    now: Timestamp,
    /// `now` as records write it, printed once per event.
    now_text: String,
    /// Steps whose record changed since [`RunMachine::take_touched`].
    touched: Vec<usize>,
    /// Which nodes have a record in `state.steps` (records are never
    /// removed), so finding one for writing is a single lookup.
    recorded: Vec<bool>,
    /// Steps with a retry (of the step or of a part) waiting for its time.
    retrying: std::collections::BTreeSet<usize>,
}

impl<'f> RunMachine<'f> {
    /// Picks a run up from its record (empty for a new run).
    pub fn new(flow: &'f CompiledFlow<'f>, input: Value, run: RunInfo, state: RunStatus) -> Self {
        let run_value = json!({"name": run.name, "namespace": run.namespace, "uid": run.uid, "since": run.since});
        let recorded = (0..flow.graph.nodes.len())
            .map(|n| state.steps.contains_key(flow.key(n)))
            .collect();
        let mut machine = RunMachine {
            flow,
            state,
            input,
            run,
            run_value,
            views: vec![Value::Null; flow.graph.nodes.len()],
            candidates: (0..flow.graph.nodes.len()).collect(),
            actions: Vec::new(),
            now: Timestamp::UNIX_EPOCH,
            now_text: Timestamp::UNIX_EPOCH.to_string(),
            touched: Default::default(),
            recorded,
            retrying: Default::default(),
        };
        for node in 0..flow.graph.nodes.len() {
            machine.refresh_view(node);
            let waiting = machine.state.steps.get(flow.key(node)).is_some_and(|r| {
                r.retry_at.is_some() || r.parts.iter().any(|p| p.retry_at.is_some())
            });
            if waiting {
                machine.retrying.insert(node);
            }
        }
        machine.touched.clear();
        machine
    }

    /// Applies one event at time `now` and returns the actions it leads to.
    pub fn handle(&mut self, event: Event, now: Timestamp) -> Vec<Action> {
        if now != self.now {
            self.now = now;
            self.now_text = now.to_string();
        }
        match event {
            Event::Start => self.start(),
            Event::Finished {
                step,
                part,
                attempt,
                result,
            } => self.finished(&step, part, attempt, result),
            Event::Decided {
                step,
                attempt,
                decision,
            } => self.decided(&step, attempt, decision),
            Event::Tick => {}
            Event::Cancel => self.stop(
                RunPhase::Cancelled,
                step_error(codes::CANCELLED, "the run was cancelled"),
            ),
        }
        if self.is_active() {
            self.pump();
        }
        std::mem::take(&mut self.actions)
    }

    /// The record with its summary (progress, current step) and arrows brought
    /// up to date; computed on demand because it walks the whole flow.
    pub fn record(&mut self) -> &RunStatus {
        self.update_summary();
        &self.state
    }

    /// The record as it stands (phase and output settle on every event; the
    /// summary and arrows only in [`RunMachine::record`]).
    pub fn state(&self) -> &RunStatus {
        &self.state
    }

    /// The record, once the run is over or handed on.
    pub fn into_state(self) -> RunStatus {
        self.state
    }

    /// The steps whose record changed since the last call, for progress display.
    pub fn take_touched(&mut self) -> Vec<String> {
        let flow = self.flow;
        std::mem::take(&mut self.touched)
            .into_iter()
            .map(|n| flow.key(n).to_string())
            .collect()
    }

    /// Every attempt that should be running now, rebuilt from the record — a
    /// restarted controller uses it to find (or recreate) its Jobs and calls.
    pub fn running_work(&self) -> Vec<Work> {
        let mut work = Vec::new();
        for node in 0..self.flow.graph.nodes.len() {
            let key = self.flow.key(node);
            let Some(record) = self.state.steps.get(key) else {
                continue;
            };
            if record.status != StepStatus::Running || record.retry_at.is_some() {
                continue;
            }
            let compiled = &self.flow.steps[node];
            if compiled.part.is_some() {
                for (i, part) in record.parts.iter().enumerate() {
                    if part.status == StepStatus::Running && part.retry_at.is_none() {
                        work.extend(self.part_work(node, i));
                    }
                }
            } else if let Some(w) = self.step_work(node, record.attempts.len() as u32) {
                work.push(w);
            }
        }
        work
    }

    /// The run's input.
    pub fn input(&self) -> &Value {
        &self.input
    }

    fn is_active(&self) -> bool {
        matches!(self.state.phase, RunPhase::Running | RunPhase::Waiting)
    }

    fn start(&mut self) {
        if self.state.phase != RunPhase::Pending {
            return;
        }
        self.state.phase = RunPhase::Running;
        self.state.started_at = Some(self.now_text.clone());
        let top: Vec<usize> = self.flow.graph.lists[0].clone();
        for node in top {
            self.state.due.insert(self.flow.key(node).to_string());
        }
        self.candidates = self.flow.graph.lists[0].clone();
    }

    // ---- scheduling -------------------------------------------------------

    /// Starts whatever is ready, settles composites and the run, until nothing changes.
    fn pump(&mut self) {
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
    fn consider(&mut self, node: usize) -> bool {
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
    fn arrow_state(&self, from: usize, exit: Option<&str>) -> Option<bool> {
        let key = self.flow.key(from);
        if self.state.due.contains(key) {
            return None;
        }
        let record = self.state.steps.get(key)?;
        let went_on = match record.status {
            StepStatus::Completed => true,
            StepStatus::Failed => self.flow.steps[from].continue_on_failure,
            StepStatus::Skipped => false,
            _ => return None,
        };
        Some(went_on && exit.is_none_or(|e| record.exit.as_deref() == Some(e)))
    }

    /// Whether the list a node sits in is running: the flow's own list while
    /// the run is, a loop's body while the loop is.
    fn list_active(&self, node: usize) -> bool {
        match self.flow.graph.nodes[node].parent {
            None => true,
            Some(parent) => self.status(parent) == StepStatus::Running,
        }
    }

    /// While a send-back waits for work in progress, its list starts nothing new.
    fn blocked_by_send_back(&self, node: usize) -> bool {
        let Some(pending) = &self.state.pending_send_back else {
            return false;
        };
        self.flow.node(&pending.to).is_some_and(|to| {
            self.flow.graph.nodes[to].parent == self.flow.graph.nodes[node].parent
        })
    }

    fn begin(&mut self, node: usize) {
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
            StepKind::Approval(_) => self.ask(node),
            StepKind::Loop(_) => self.begin_loop(node),
            StepKind::Parallel(_) => self.begin_parallel(node),
            StepKind::Agent(_) | StepKind::Script(_) | StepKind::Http(_) | StepKind::Message(_) => {
                self.record_mut(node).round_start_now();
                self.start_attempt(node)
            }
        }
    }

    /// Adds one pass to every arrow into `node` that was taken.
    fn count_taken_arrows(&mut self, node: usize) {
        let to = self.flow.key(node);
        for arrow in &self.flow.graph.nodes[node].preds {
            if self.arrow_state(arrow.from, arrow.exit) != Some(true) {
                continue;
            }
            let from = self.flow.key(arrow.from);
            let label = match arrow.exit {
                Some(exit) => format!("{from}.{exit}"),
                None => from.to_string(),
            };
            *self
                .state
                .arrow_counts
                .entry(super::arrows::count_key(&label, to))
                .or_insert(0) += 1;
        }
    }

    fn run_condition(&mut self, node: usize) {
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

    fn run_join(&mut self, node: usize) {
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

    fn ask(&mut self, node: usize) {
        let Some(StepKind::Approval(a)) = self.flow.steps[node].step.kind() else {
            return;
        };
        let attempt = self.push_attempt(node, None);
        let show = self.outputs_of(&a.show).into_iter().collect();
        self.set_status(node, StepStatus::Waiting);
        self.actions.push(Action::Ask(ApprovalRequest {
            step: self.flow.key(node).to_string(),
            attempt,
            mode: a.mode,
            show,
            decisions: a.decisions.clone(),
            fields: a.fields.clone(),
            approvers: a.approvers.clone(),
            instructions: a.instructions.clone(),
        }));
    }

    fn begin_loop(&mut self, node: usize) {
        self.record_mut(node).iteration = Some(1);
        self.set_status(node, StepStatus::Running);
        self.start_pass(node);
    }

    /// Marks a loop's body due for its next pass.
    fn start_pass(&mut self, node: usize) {
        let body: Vec<usize> = self.flow.body(node).to_vec();
        for &child in &body {
            self.state.due.insert(self.flow.key(child).to_string());
        }
        self.candidates.extend(body.iter().rev());
    }

    fn begin_parallel(&mut self, node: usize) {
        let compiled = &self.flow.steps[node];
        let scope = self.scope(node, None);
        let parts: Vec<PartRecord> = if let Some(items) = &compiled.items {
            match items.resolve(&scope) {
                Value::Array(items) => items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| part_record(i, item))
                    .collect(),
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
                .map(|(key, label, input)| PartRecord {
                    key: key.clone(),
                    label: label.clone(),
                    item: Some(input.as_ref().map_or(Value::Null, |t| t.resolve(&scope))),
                    ..Default::default()
                })
                .collect()
        };
        let record = self.record_mut(node);
        record.parts = parts;
        record.output = None;
        self.set_status(node, StepStatus::Running);
        self.fill_parallel(node);
    }

    /// Starts pending parts up to `maxConcurrency`.
    fn fill_parallel(&mut self, node: usize) {
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
            .filter(|p| matches!(p.status, StepStatus::Running | StepStatus::Waiting))
            .count();
        let waiting: Vec<usize> = record
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status == StepStatus::Pending)
            .map(|(i, _)| i)
            .take(limit.saturating_sub(busy))
            .collect();
        for part in waiting {
            self.start_part(node, part);
        }
    }

    fn start_part(&mut self, node: usize, part: usize) {
        let iteration = self.iteration_of(node);
        let now = self.now_text.clone();
        let inner = self.flow.steps[node].part.as_deref();
        // A part's `when` false skips just that part.
        if let Some(when) = inner.and_then(|c| c.when.as_ref()) {
            match when.eval_bool(&self.scope(node, Some(part))) {
                Err(e) => return self.settle_part(node, part, Err(expression_error(&e).into())),
                Ok(false) => {
                    let p = &mut self.record_mut(node).parts[part];
                    p.status = StepStatus::Skipped;
                    return;
                }
                Ok(true) => {}
            }
        }
        let p = &mut self.record_mut(node).parts[part];
        open_attempt(&mut p.attempts, iteration, now, None);
        p.status = StepStatus::Running;
        p.retry_at = None;
        if let Some(work) = self.part_work(node, part) {
            self.actions.push(Action::Run(Box::new(work)));
        }
    }

    fn start_attempt(&mut self, node: usize) {
        let feedback = self
            .state
            .steps
            .get(self.flow.key(node))
            .and_then(|r| r.review.as_ref())
            .and_then(|r| r.instructions.clone());
        let attempt = self.push_attempt(node, feedback);
        self.set_status(node, StepStatus::Running);
        self.record_mut(node).retry_at = None;
        if let Some(work) = self.step_work(node, attempt) {
            self.actions.push(Action::Run(Box::new(work)));
        }
    }

    fn push_attempt(&mut self, node: usize, feedback: Option<String>) -> u32 {
        let iteration = self.iteration_of(node);
        let now = self.now_text.clone();
        open_attempt(
            &mut self.record_mut(node).attempts,
            iteration,
            now,
            feedback,
        )
    }

    // ---- results ------------------------------------------------------------

    fn finished(&mut self, key: &str, part: Option<usize>, attempt: u32, result: WorkResult) {
        let Some(node) = self.flow.node(key) else {
            return;
        };
        let Some(record) = self.state.steps.get(key) else {
            return;
        };
        match part {
            Some(i) => {
                let current = record.parts.get(i).is_some_and(|p| {
                    p.status == StepStatus::Running
                        && p.retry_at.is_none()
                        && p.attempts.len() as u32 == attempt
                });
                if current {
                    self.settle_part(node, i, result);
                }
            }
            None => {
                let current = record.status == StepStatus::Running
                    && record.retry_at.is_none()
                    && record.attempts.len() as u32 == attempt;
                if !current {
                    return; // stale: a retry or a restart already moved on
                }
                match result {
                    Ok(done) => {
                        let usage = done.usage.clone();
                        self.complete(node, done.output, done.text, None, usage);
                    }
                    Err(failed) => self.attempt_failed(node, failed),
                }
            }
        }
    }

    fn attempt_failed(&mut self, node: usize, failed: Failed) {
        let Failed { error, usage } = failed;
        let compiled = &self.flow.steps[node];
        let now = self.now_text.clone();
        let record = self.record_mut(node);
        let tries = record.attempts.len() as i32 - record.round_start;
        if let Some(last) = close_attempt(&mut record.attempts, StepStatus::Failed, &now) {
            last.error = Some(error.clone());
            last.usage = usage;
        }
        if (tries as u32) < compiled.max_attempts {
            let wait = backoff(compiled.backoff, tries as u32);
            let at = self.now + wait;
            self.retrying.insert(node);
            let record = self.record_mut(node);
            record.retry_at = Some(at.to_string());
            record.error = Some(error);
            self.actions.push(Action::WakeAt(at));
        } else {
            self.fail(node, error);
        }
    }

    fn settle_part(&mut self, node: usize, part: usize, result: WorkResult) {
        let max = self.flow.steps[node]
            .part
            .as_ref()
            .map_or(1, |c| c.max_attempts);
        let base = self.flow.steps[node]
            .part
            .as_ref()
            .map_or(super::compiled::DEFAULT_BACKOFF, |c| c.backoff);
        let now = self.now;
        let finished = self.now_text.clone();
        let p = &mut self.record_mut(node).parts[part];
        match result {
            Ok(done) => {
                if let Some(last) = close_attempt(&mut p.attempts, StepStatus::Completed, &finished)
                {
                    last.output = Some(done.output.clone());
                    last.text = done.text.clone();
                    last.usage = done.usage;
                }
                p.status = StepStatus::Completed;
                p.output = Some(done.output);
                p.text = done.text;
                p.error = None;
            }
            Err(Failed { error, usage }) => {
                if let Some(last) = close_attempt(&mut p.attempts, StepStatus::Failed, &finished) {
                    last.error = Some(error.clone());
                    last.usage = usage;
                }
                p.error = Some(error);
                if (p.attempts.len() as u32) < max {
                    let at = now + backoff(base, p.attempts.len() as u32);
                    p.retry_at = Some(at.to_string());
                    self.retrying.insert(node);
                    self.actions.push(Action::WakeAt(at));
                } else {
                    p.status = StepStatus::Failed;
                }
            }
        }
        self.fill_parallel(node);
    }

    fn decided(&mut self, key: &str, attempt: u32, decision: Decision) {
        let Some(node) = self.flow.node(key) else {
            return;
        };
        let Some(record) = self.state.steps.get(key) else {
            return;
        };
        if record.status != StepStatus::Waiting || record.attempts.len() as u32 != attempt {
            return;
        }
        let Some(StepKind::Approval(a)) = self.flow.steps[node].step.kind() else {
            return;
        };
        let (output, exit) = match a.mode {
            ApprovalMode::Review => {
                let d = decision.decision.clone().unwrap_or_default();
                if !a.decisions.contains(&d) {
                    return; // refused upstream (webhook, prompt); never taken in
                }
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
    }

    fn complete(
        &mut self,
        node: usize,
        output: Value,
        text: Option<String>,
        exit: Option<String>,
        usage: Option<crate::api::TokenUsage>,
    ) {
        let now = self.now_text.clone();
        let record = self.record_mut(node);
        if let Some(last) = close_attempt(&mut record.attempts, StepStatus::Completed, &now) {
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
        self.set_status(node, StepStatus::Completed);
        self.settled(node);
        if let (Some(exit), false) = (exit, self.flow.steps[node].step.approval.is_some()) {
            self.maybe_send_back(node, &exit, None, None);
        }
    }

    fn skip(&mut self, node: usize, reason: &str) {
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
        self.set_status(node, StepStatus::Skipped);
        self.settled(node);
    }

    fn fail(&mut self, node: usize, error: StepError) {
        let now = self.now_text.clone();
        let record = self.record_mut(node);
        if let Some(last) = close_attempt(&mut record.attempts, StepStatus::Failed, &now) {
            last.error = Some(error.clone());
        }
        record.error = Some(error.clone());
        record.finished_at = Some(now);
        record.retry_at = None;
        self.set_status(node, StepStatus::Failed);
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
    fn settled(&mut self, node: usize) {
        self.candidates
            .extend(self.flow.successors[node].iter().rev());
    }

    /// Ends the run: running work is stopped and marked as such.
    fn stop(&mut self, phase: RunPhase, error: StepError) {
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
                if matches!(part.status, StepStatus::Running | StepStatus::Waiting) {
                    part.status = StepStatus::Failed;
                    part.error = Some(step_error(codes::CANCELLED, "stopped: the run ended"));
                    self.actions.push(Action::Stop {
                        step: key.clone(),
                        part: Some(i),
                    });
                    stopped = true;
                }
            }
            if matches!(record.status, StepStatus::Running | StepStatus::Waiting) {
                if !stopped
                    && self.flow.steps[node].part.is_none()
                    && self.flow.steps[node].step.loop_.is_none()
                {
                    self.actions.push(Action::Stop {
                        step: key.clone(),
                        part: None,
                    });
                }
                record.status = StepStatus::Failed;
                record
                    .error
                    .get_or_insert_with(|| step_error(codes::CANCELLED, "stopped: the run ended"));
                close_attempt(&mut record.attempts, StepStatus::Failed, &now);
                self.refresh_view(node);
            }
        }
        self.state.phase = phase;
        self.state.error = Some(error);
        self.state.finished_at = Some(self.now_text.clone());
        self.state.due.clear();
        self.candidates.clear();
    }

    // ---- retries, loops, parallel steps, send-backs ---------------------------

    /// Starts the retries whose time has come. Only the steps in `retrying`
    /// are looked at, so the cost does not grow with the flow.
    fn retry_due(&mut self) -> bool {
        if self.retrying.is_empty() {
            return false;
        }
        let now = self.now;
        let mut progressed = false;
        for node in std::mem::take(&mut self.retrying) {
            let Some(record) = self.state.steps.get(self.flow.key(node)) else {
                continue;
            };
            if record.status != StepStatus::Running {
                continue;
            }
            let step_due = record.retry_at.as_deref().is_some_and(|at| due_at(at, now));
            let parts: Vec<usize> = record
                .parts
                .iter()
                .enumerate()
                .filter(|(_, p)| p.retry_at.as_deref().is_some_and(|at| due_at(at, now)))
                .map(|(i, _)| i)
                .collect();
            if step_due {
                self.start_attempt(node);
                progressed = true;
            }
            for part in parts {
                self.start_part(node, part);
                progressed = true;
            }
            let still_waiting = self.state.steps.get(self.flow.key(node)).is_some_and(|r| {
                r.status == StepStatus::Running
                    && (r.retry_at.is_some() || r.parts.iter().any(|p| p.retry_at.is_some()))
            });
            if still_waiting {
                self.retrying.insert(node);
            }
        }
        progressed
    }

    /// Ends loop passes and parallel steps whose work is all settled.
    fn settle_composites(&mut self) -> bool {
        let mut progressed = false;
        for &node in self.flow.composites.iter().rev() {
            if self.status(node) != StepStatus::Running {
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

    fn body_settled(&self, node: usize) -> bool {
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
                    self.status(child),
                    StepStatus::Completed | StepStatus::Failed | StepStatus::Skipped
                )
        })
    }

    fn end_pass(&mut self, node: usize) {
        let compiled = &self.flow.steps[node];
        let Some(until) = &compiled.until else { return };
        let iteration = self
            .state
            .steps
            .get(self.flow.key(node))
            .and_then(|r| r.iteration)
            .unwrap_or(1);
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

    fn end_parallel(&mut self, node: usize) -> bool {
        let Some(record) = self.state.steps.get(self.flow.key(node)) else {
            return false;
        };
        let open = record.parts.iter().any(|p| {
            matches!(
                p.status,
                StepStatus::Pending | StepStatus::Running | StepStatus::Waiting
            )
        });
        if open {
            return false;
        }
        let parts: Vec<Value> = record
            .parts
            .iter()
            .map(|p| json!({"key": p.key, "label": p.label, "status": p.status, "output": p.output, "error": p.error}))
            .collect();
        let by_key: Map<String, Value> = record
            .parts
            .iter()
            .map(|p| (p.key.clone(), p.output.clone().unwrap_or(Value::Null)))
            .collect();
        let failed = record
            .parts
            .iter()
            .find(|p| p.status == StepStatus::Failed)
            .cloned();
        let continue_parts = self.flow.steps[node]
            .part
            .as_ref()
            .is_some_and(|c| c.continue_on_failure);
        let output = json!({"parts": parts, "by_key": by_key});
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

    fn maybe_send_back(
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
        let reviewed = step
            .approval
            .as_ref()
            .map(|a| Value::Object(self.outputs_of(&a.show)));
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
    fn apply_pending_send_back(&mut self) -> bool {
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
            .any(|&n| matches!(self.status(n), StepStatus::Running | StepStatus::Waiting));
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

    fn finish_if_done(&mut self) {
        let top = &self.flow.graph.lists[0];
        let open = self.state.pending_send_back.is_some()
            || top.iter().rev().any(|&n| {
                self.state.due.contains(self.flow.key(n))
                    || matches!(
                        self.status(n),
                        StepStatus::Running | StepStatus::Waiting | StepStatus::Pending
                    )
            });
        if open {
            // Running or Waiting is settled in `update_summary`: telling them
            // apart walks every record, too much for every event.
            return;
        }
        let scope = self.scope_at_end();
        self.state.output = Some(match &self.flow.output {
            Some(template) => template.resolve(&scope),
            None => top
                .iter()
                .rev()
                .find(|&&n| self.status(n) == StepStatus::Completed)
                .map_or(Value::Null, |&n| self.output_of(self.flow.key(n))),
        });
        self.state.phase = RunPhase::Succeeded;
        self.state.finished_at = Some(self.now_text.clone());
    }

    // ---- work -----------------------------------------------------------------

    fn step_work(&self, node: usize, attempt: u32) -> Option<Work> {
        let compiled = &self.flow.steps[node];
        let task = self.task(node, compiled)?;
        let data = if task.has_placeholders() {
            self.data_view(node, None, &compiled.placeholder_keys)
        } else {
            DataView::default()
        };
        let scope = self.scope(node, None);
        let input = match &compiled.input {
            Some(t) => t.resolve(&scope),
            None => self.default_input(node),
        };
        Some(Work {
            step: self.flow.key(node).to_string(),
            part: None,
            attempt,
            iteration: self.iteration_of(node).map(|i| i as u32),
            task,
            input,
            timeout: compiled.timeout,
            data,
            run: self.run.clone(),
        })
    }

    fn part_work(&self, node: usize, part: usize) -> Option<Work> {
        let inner = self.flow.steps[node].part.as_deref()?;
        let record = self.state.steps.get(self.flow.key(node))?;
        let p = record.parts.get(part)?;
        let task = self.task(node, inner)?;
        let data = if task.has_placeholders() {
            self.data_view(node, Some(part), &inner.placeholder_keys)
        } else {
            DataView::default()
        };
        let scope = self.scope(node, Some(part));
        let input = match &inner.input {
            Some(t) => t.resolve(&scope),
            None => p.item.clone().unwrap_or(Value::Null),
        };
        Some(Work {
            step: self.flow.key(node).to_string(),
            part: Some(PartRef {
                index: part,
                key: p.key.clone(),
            }),
            attempt: p.attempts.len() as u32,
            iteration: self.iteration_of(node).map(|i| i as u32),
            task,
            input,
            timeout: inner.timeout,
            data,
            run: self.run.clone(),
        })
    }

    fn task(&self, node: usize, compiled: &CompiledStep<'_>) -> Option<Task> {
        Some(match compiled.step.kind()? {
            StepKind::Script(s) => Task::Script(s.clone()),
            StepKind::Http(h) => Task::Http(h.clone()),
            StepKind::Message(m) => Task::Message(m.clone()),
            StepKind::Agent(a) => {
                let given = a
                    .give
                    .iter()
                    .map(|key| {
                        let record = self.state.steps.get(key);
                        let ran = record.is_some_and(|r| r.status == StepStatus::Completed);
                        Given {
                            name: key.clone(),
                            state: record
                                .map_or("pending".into(), |r| r.status.as_str().to_string()),
                            role: "instrument",
                            value: if ran {
                                record.and_then(|r| r.output.clone())
                            } else {
                                None
                            },
                        }
                    })
                    .collect();
                let change_request = self
                    .state
                    .steps
                    .get(self.flow.key(node))
                    .and_then(|r| r.review.as_ref())
                    .map(|note| ChangeRequest {
                        reviewer: note.reviewer.clone(),
                        decision: note.decision.clone(),
                        reviewed: match &note.reviewed {
                            Some(Value::Object(m)) => {
                                m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
                            }
                            _ => Vec::new(),
                        },
                        instructions: note.instructions.clone().unwrap_or_default(),
                    });
                let flow_description = a
                    .tell_flow
                    .then(|| super::describe::describe(self.flow, node));
                Task::Agent(AgentTask {
                    spec: a.clone(),
                    given,
                    change_request,
                    flow_description,
                })
            }
            _ => return None,
        })
    }

    /// With no `input`, the first step gets the run input; a later one the
    /// run input and the previous step's output, merged when both are objects.
    fn default_input(&self, node: usize) -> Value {
        let Some(previous) = self.previous_node(node) else {
            return self.input.clone();
        };
        match (&self.input, self.output_of(self.flow.key(previous))) {
            (Value::Object(input), Value::Object(out)) => {
                let mut merged = input.clone();
                merged.extend(out);
                Value::Object(merged)
            }
            (Value::Null, out) => out,
            (input, out) => json!({"input": input, "previous": out}),
        }
    }

    fn data_view(&self, node: usize, part: Option<usize>, keys: &[String]) -> DataView {
        let mut view = DataView {
            input: self.input.clone(),
            ..Default::default()
        };
        for key in keys {
            if let Some(v) = self.flow.node(key).and_then(|n| self.views.get(n)) {
                view.steps.insert(key.clone(), v.clone());
            }
        }
        let scope = self.scope(node, part);
        for root in ["previous", "loop", "item", "index", "run"] {
            if let Some(v) = crate::scope::Scope::root(&scope, root) {
                view.roots.insert(root.to_string(), v.clone());
            }
        }
        view
    }

    // ---- scopes -----------------------------------------------------------------

    fn scope(&self, node: usize, part: Option<usize>) -> EvalScope<'_> {
        let previous = self.previous_node(node).and_then(|p| self.views.get(p));
        let loop_iteration = self.flow.graph.enclosing_loops(node).next().and_then(|l| {
            self.state
                .steps
                .get(self.flow.key(l))
                .and_then(|r| r.iteration)
        });
        let (item, index) = match part {
            Some(i) => {
                let p = self
                    .state
                    .steps
                    .get(self.flow.key(node))
                    .and_then(|r| r.parts.get(i));
                (p.and_then(|p| p.item.as_ref()), Some(i))
            }
            None => (None, None),
        };
        EvalScope::new(
            &self.input,
            StepViews {
                graph: &self.flow.graph,
                values: &self.views,
            },
            previous,
            loop_iteration,
            item,
            index,
            &self.run_value,
        )
    }

    fn scope_inside_loop(&self, node: usize, iteration: i32) -> EvalScope<'_> {
        let last = self.flow.body(node).last().and_then(|&n| self.views.get(n));
        EvalScope::new(
            &self.input,
            StepViews {
                graph: &self.flow.graph,
                values: &self.views,
            },
            last,
            Some(iteration),
            None,
            None,
            &self.run_value,
        )
    }

    fn scope_at_end(&self) -> EvalScope<'_> {
        let last = self.flow.graph.lists[0]
            .last()
            .and_then(|&n| self.views.get(n));
        EvalScope::new(
            &self.input,
            StepViews {
                graph: &self.flow.graph,
                values: &self.views,
            },
            last,
            None,
            None,
            None,
            &self.run_value,
        )
    }

    /// The step listed just before; for the first step of a later loop pass,
    /// the last step of the pass before.
    fn previous_node(&self, node: usize) -> Option<usize> {
        let list = self.flow.list_of(node);
        let position = self.flow.graph.nodes[node].position;
        if position > 0 {
            return list.get(position - 1).copied();
        }
        let parent = self.flow.graph.nodes[node].parent?;
        let iteration = self
            .state
            .steps
            .get(self.flow.key(parent))
            .and_then(|r| r.iteration)
            .unwrap_or(1);
        if iteration > 1 {
            list.last().copied()
        } else {
            self.previous_node(parent)
        }
    }

    fn iteration_of(&self, node: usize) -> Option<i32> {
        let l = self.flow.graph.enclosing_loops(node).next()?;
        self.state
            .steps
            .get(self.flow.key(l))
            .and_then(|r| r.iteration)
    }

    // ---- records ---------------------------------------------------------------

    /// A step's latest output (`null` when it has none), copied.
    fn output_of(&self, key: &str) -> Value {
        self.state
            .steps
            .get(key)
            .and_then(|r| r.output.clone())
            .unwrap_or(Value::Null)
    }

    /// The outputs of the steps an approval shows, by key.
    fn outputs_of(&self, keys: &[String]) -> Map<String, Value> {
        keys.iter()
            .map(|k| (k.clone(), self.output_of(k)))
            .collect()
    }

    fn status(&self, node: usize) -> StepStatus {
        self.state
            .steps
            .get(self.flow.key(node))
            .map_or(StepStatus::Pending, |r| r.status)
    }

    fn record_mut(&mut self, node: usize) -> &mut StepRecord {
        let key = self.flow.key(node);
        if self.touched.last() != Some(&node) {
            self.touched.push(node);
        }
        // `entry` would allocate the key on every call; insert only once.
        if !self.recorded[node] {
            self.recorded[node] = true;
            self.state.steps.entry(key.to_string()).or_default();
        }
        self.state.steps.get_mut(key).expect("recorded above")
    }

    fn set_status(&mut self, node: usize, status: StepStatus) {
        self.record_mut(node).status = status;
        self.refresh_view(node);
    }

    /// Brings the view expressions read (`$steps.KEY`) in line with the
    /// record, in place when it exists (this runs on every transition).
    fn refresh_view(&mut self, node: usize) {
        if !self.flow.observed[node] {
            return;
        }
        let record = self.state.steps.get(self.flow.key(node));
        let fields = [
            (
                "status",
                json!(record.map_or(StepStatus::Pending, |r| r.status)),
            ),
            (
                "output",
                record.and_then(|r| r.output.clone()).unwrap_or(Value::Null),
            ),
            (
                "text",
                record
                    .and_then(|r| r.text.clone())
                    .map_or(Value::Null, Value::String),
            ),
            ("error", json!(record.and_then(|r| r.error.as_ref()))),
        ];
        let Some(slot) = self.views.get_mut(node) else {
            return;
        };
        match slot {
            Value::Object(view) => {
                for (name, value) in fields {
                    if let Some(slot) = view.get_mut(name) {
                        *slot = value;
                    }
                }
            }
            _ => {
                *slot = Value::Object(
                    fields
                        .into_iter()
                        .map(|(n, v)| (n.to_string(), v))
                        .collect(),
                )
            }
        }
    }

    fn update_summary(&mut self) {
        if self.is_active() {
            let any = |status| self.state.steps.values().any(|r| r.status == status);
            let waiting = any(StepStatus::Waiting) && !any(StepStatus::Running);
            self.state.phase = if waiting {
                RunPhase::Waiting
            } else {
                RunPhase::Running
            };
        }
        let total = self.flow.graph.nodes.len();
        let settled = (0..total)
            .filter(|&n| {
                !self.state.due.contains(self.flow.key(n))
                    && matches!(
                        self.status(n),
                        StepStatus::Completed | StepStatus::Failed | StepStatus::Skipped
                    )
            })
            .count();
        self.state.progress = Some(format!("{settled}/{total}"));
        self.state.current_step = (0..total)
            .rev()
            .find(|&n| matches!(self.status(n), StepStatus::Running | StepStatus::Waiting))
            .map(|n| self.flow.key(n).to_string());
        self.state.arrows = super::arrows::arrows(self.flow, &self.state);
    }
}

impl StepRecord {
    /// Starts a new round of tries: earlier attempts stay, but no longer count
    /// against `attempts`.
    fn round_start_now(&mut self) {
        self.round_start = self.attempts.len() as i32;
    }
}

/// Adds a running attempt (trimming the one that falls out of the latest
/// [`ATTEMPTS_WITH_OUTPUT`]); returns its number.
fn open_attempt(
    attempts: &mut Vec<Attempt>,
    iteration: Option<i32>,
    started_at: String,
    feedback: Option<String>,
) -> u32 {
    let number = attempts.len() as i32 + 1;
    trim_old_attempts(attempts);
    attempts.push(Attempt {
        number,
        iteration,
        status: StepStatus::Running,
        started_at: Some(started_at),
        feedback,
        ..Default::default()
    });
    number as u32
}

/// Before a new attempt is added: the one that falls out of the latest
/// [`ATTEMPTS_WITH_OUTPUT`] gives up its output, text and feedback.
fn trim_old_attempts(attempts: &mut [Attempt]) {
    let Some(index) = attempts.len().checked_sub(ATTEMPTS_WITH_OUTPUT) else {
        return;
    };
    if let Some(old) = attempts.get_mut(index)
        && !old.trimmed
    {
        old.output = None;
        old.text = None;
        old.feedback = None;
        old.trimmed = true;
    }
}

/// Closes the latest attempt if it is still running, with its end time, and
/// hands it back so the caller can add what it produced.
fn close_attempt<'a>(
    attempts: &'a mut [Attempt],
    status: StepStatus,
    now: &str,
) -> Option<&'a mut Attempt> {
    let last = attempts
        .last_mut()
        .filter(|a| a.status == StepStatus::Running)?;
    last.status = status;
    last.finished_at = Some(now.to_string());
    Some(last)
}

fn part_record(index: usize, item: Value) -> PartRecord {
    let (key, label) = match &item {
        Value::String(s) => (slug(s, index), s.clone()),
        Value::Object(m) => {
            let label = ["label", "name", "title", "key", "id"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .map_or_else(|| index.to_string(), str::to_string);
            let key = m
                .get("key")
                .and_then(Value::as_str)
                .map_or_else(|| slug(&label, index), str::to_string);
            (key, label)
        }
        _ => (index.to_string(), compact(&item)),
    };
    PartRecord {
        key,
        label,
        item: Some(item),
        ..Default::default()
    }
}

/// A part key from a label: lowercase letters, digits and `_`; the index
/// when nothing is left.
fn slug(label: &str, index: usize) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_').to_string();
    if out.is_empty() {
        index.to_string()
    } else {
        out
    }
}

fn backoff(base: Duration, tries: u32) -> Duration {
    base.saturating_mul(1u32 << tries.saturating_sub(1).min(16))
}

fn due_at(at: &str, now: Timestamp) -> bool {
    at.parse::<Timestamp>().map_or(true, |t| t <= now)
}

fn expression_error(e: &EvalError) -> StepError {
    step_error(codes::EXPRESSION, e.to_string())
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Done {
    /// A result with just an output.
    pub fn output(output: Value) -> Self {
        Done {
            output,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_latest_attempts_keep_their_output() {
        let mut attempts: Vec<Attempt> = Vec::new();
        for n in 1..=7 {
            trim_old_attempts(&mut attempts);
            attempts.push(Attempt {
                number: n,
                output: Some(json!(n)),
                text: Some(format!("text {n}")),
                feedback: Some("shorter".into()),
                error: Some(step_error(codes::AGENT, "kept")),
                ..Default::default()
            });
        }
        for a in &attempts[..2] {
            assert!(a.trimmed, "attempt {} is trimmed", a.number);
            assert_eq!((&a.output, &a.text, &a.feedback), (&None, &None, &None));
            assert!(a.error.is_some(), "the error stays");
        }
        for a in &attempts[2..] {
            assert!(!a.trimmed);
            assert_eq!(a.output, Some(json!(a.number)));
        }
        assert_eq!(attempts.len() - 2, ATTEMPTS_WITH_OUTPUT);
    }
}
