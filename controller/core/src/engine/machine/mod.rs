//! The run state machine: given the compiled flow, the run's status and one
//! event (start, work finished, a person decided, time passed, cancel), it
//! updates the status and returns the actions to take. No I/O, no clock:
//! time comes in as an argument, so the controller and `coxswain run` drive
//! it the same way and a restarted controller resumes from the status alone.

mod approval;
mod attempts;
mod build_work;
mod composites;
#[cfg(test)]
mod depth_tests;
mod part_keys;
#[cfg(test)]
mod records_tests;
mod schedule;
mod send_back;
mod settle;
#[cfg(test)]
mod tests;
mod workspace;
#[cfg(test)]
mod workspace_tests;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

pub use approval::DecideError;
pub use attempts::keep_stopped_log;
pub use part_keys::MAX_PART_KEY_LEN;
pub use workspace::{WorkspaceEnded, WorkspaceWork, releases, workspace_work};

use crate::api::{
    ApprovalMode, Approvers, Attempt, Field, PartStatus, ReviewNote, RunPhase, RunStatus,
    StepError, StepKind, StepPhase, StepStatus,
};
use crate::expr::EvalError;

use super::compiled::{Compiled, CompiledFlow, CompiledStep};
use super::work::{Failed, RunInfo, Work, WorkResult, codes, step_error};

/// Most times one send-back arrow may be taken in a run.
pub const MAX_SEND_BACKS: i32 = 10;

/// How many of a step's latest attempts keep their output and text in the
/// record; older ones keep status, times, error and usage, so a long loop keeps the status small.
pub const ATTEMPTS_WITH_OUTPUT: usize = 5;

/// Something that happened to a run. A person's answer is not an event:
/// it may be refused, so it goes through [`RunMachine::decide`].
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
    /// The driver ran the lookups of an attempt whose work said
    /// [`Work::lookups_due`]: what each found (a JSON array of records) by
    /// lookup name, or why they could not run (the attempt fails).
    LookedUp {
        /// The step's key.
        step: String,
        /// The part, for a parallel step.
        part: Option<usize>,
        /// The attempt number the work carried.
        attempt: u32,
        /// What was found, or why not.
        found: Result<Map<String, Value>, StepError>,
    },
    /// The driver could not run the lookups of an attempt whose work said
    /// [`Work::lookups_due`] because the records database did not answer
    /// (`reason`): the attempt keeps waiting, and its status says why.
    LookupsWaiting {
        /// The step's key.
        step: String,
        /// The part, for a parallel step.
        part: Option<usize>,
        /// The attempt number the work carried.
        attempt: u32,
        /// Why, for the person reading the status.
        reason: String,
    },
    /// Time passed (a retry may be due).
    Tick,
    /// Stop the run (someone asked to).
    Cancel,
    /// The workspace work the status asked for
    /// ([`RunMachine::workspace_work`]) ended.
    Workspace(WorkspaceEnded),
    /// The driver cannot go on (no one can answer a person step, or the
    /// engine has nothing left to do but did not finish): the run fails with
    /// this error, and whatever runs is stopped.
    GiveUp(StepError),
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
    /// On a step that needs several approvers, each answer that took the
    /// decision, in the order written.
    pub ballots: Vec<Ballot>,
}

/// One approver's answer among several that took a decision together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ballot {
    /// Who answered.
    pub by: String,
    /// The decision they picked.
    pub decision: String,
    /// Their instructions, if any.
    pub feedback: Option<String>,
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
    /// Whether the run's creator may decide it (`allowSelfApproval`).
    pub allow_self_approval: bool,
    /// How many different approvers must agree (`approvals`, 1 by default).
    pub approvals: u32,
    /// The decisions that send work back (taken on one answer).
    pub sends_back: Vec<String>,
    /// The step's lookups: what each found is shown under its name in
    /// `show`; until then ([`ApprovalRequest::lookups_due`]) the driver
    /// runs them instead of asking.
    pub lookups: Vec<super::work::LookupWork>,
    /// What the lookups' conditions read of the run (empty without lookups).
    pub data: Box<super::work::DataView>,
}

impl crate::flow::Asked for ApprovalRequest {
    fn asked(
        &self,
    ) -> (
        &str,
        crate::api::ApprovalMode,
        &[String],
        &[crate::api::Field],
    ) {
        (&self.step, self.mode, &self.decisions, &self.fields)
    }
}

impl ApprovalRequest {
    /// Whether a lookup still waits to be run and recorded: the person is
    /// asked only once it is.
    pub fn lookups_due(&self) -> bool {
        self.lookups.iter().any(|l| l.found.is_none())
    }
}

/// Why a status cannot be resumed with the flow given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The status was made with another flow.
    #[error(
        "the run's record was made with the flow {record}, but the flow given is {flow}; \
         a run must go on with the flow it started with (its pinned snapshot)"
    )]
    DifferentFlow {
        /// The digest the status names.
        record: String,
        /// The digest of the flow given.
        flow: String,
    },
    /// The status started without naming its flow, so no flow can be trusted with it.
    #[error(
        "the run's record has started but names no flow digest, so it cannot be matched \
         with the flow given ({flow})"
    )]
    Unpinned {
        /// The digest of the flow given.
        flow: String,
    },
}

/// A run in progress: the compiled flow, the status, and derived views.
pub struct RunMachine<'f> {
    pub(in crate::engine) flow: &'f Compiled<'f>,
    /// The run's status, as the controller writes it to the Run.
    /// Private: the machine's indexes (`recorded`, `views`) follow it.
    pub(in crate::engine) state: RunStatus,
    pub(in crate::engine) input: Value,
    pub(in crate::engine) run: RunInfo,
    pub(in crate::engine) run_value: Value,
    /// `{status, output, text, error}` per node (by index), kept in step
    /// with `state`.
    pub(in crate::engine) views: Vec<Value>,
    /// Nodes to look at on the next pass of the scheduler.
    pub(in crate::engine) candidates: Vec<usize>,
    pub(in crate::engine) actions: Vec<Action>,
    pub(in crate::engine) now: Timestamp,
    /// `now` as records write it, printed once per event.
    pub(in crate::engine) now_text: String,
    /// Steps whose status changed since [`RunMachine::take_touched`].
    pub(in crate::engine) touched: Vec<usize>,
    /// Which nodes have a status in `state.steps` (records are never
    /// removed), so finding one for writing is a single lookup.
    pub(in crate::engine) recorded: Vec<bool>,
    /// The nodes whose status may say Running or Waiting: every node
    /// written since the last event settled, and those found so on resume;
    /// pruned after each event. [`RunMachine::running_work`] and
    /// [`RunMachine::pending_approvals`] look at these alone, so a driver
    /// asking after every event pays for what runs, not for the whole flow.
    pub(in crate::engine) live: Vec<usize>,
    /// Whether a node is in `live`, by index.
    pub(in crate::engine) is_live: Vec<bool>,
    /// Steps with a retry (of the step or of a part) waiting for its time.
    pub(in crate::engine) retrying: std::collections::BTreeSet<usize>,
    /// The approval steps with a `timeout`, found once: the only ones whose
    /// waiting can run out.
    pub(in crate::engine) timed_approvals: Vec<usize>,
}

impl<'f> RunMachine<'f> {
    /// A new run of `flow`: its status starts pinned to the flow (digest
    /// and generation) and keeps `run.since`.
    pub fn new(flow: &'f CompiledFlow, input: Value, run: RunInfo) -> Self {
        let flow = flow.get();
        let state = RunStatus {
            flow_generation: flow.generation,
            flow_digest: Some(flow.digest.clone()),
            since: run.since.clone(),
            ..Default::default()
        };
        Self::from_record(flow, input, run, state)
    }

    /// Picks a run up from its status alone, as a restarted controller does.
    /// The status must have been made with this very flow (same digest); a
    /// record not started yet and not pinned is pinned to it now. `$SINCE`
    /// comes from the status, whatever `run.since` says.
    pub fn resume(
        flow: &'f CompiledFlow,
        input: Value,
        mut run: RunInfo,
        mut state: RunStatus,
    ) -> Result<Self, ResumeError> {
        let flow = flow.get();
        match &state.flow_digest {
            Some(digest) if *digest != flow.digest => {
                return Err(ResumeError::DifferentFlow {
                    record: digest.clone(),
                    flow: flow.digest.clone(),
                });
            }
            Some(_) => run.since = state.since.clone(),
            None if state.phase != RunPhase::Pending || !state.steps.is_empty() => {
                return Err(ResumeError::Unpinned {
                    flow: flow.digest.clone(),
                });
            }
            None => {
                state.flow_digest = Some(flow.digest.clone());
                state.flow_generation = flow.generation;
                state.since = run.since.clone();
            }
        }
        Ok(Self::from_record(flow, input, run, state))
    }

    fn from_record(flow: &'f Compiled<'f>, input: Value, run: RunInfo, state: RunStatus) -> Self {
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
            live: Vec::new(),
            is_live: vec![false; flow.graph.nodes.len()],
            retrying: Default::default(),
            timed_approvals: (0..flow.graph.nodes.len())
                .filter(|&node| {
                    flow.steps[node].timeout.is_some()
                        && matches!(flow.steps[node].step.kind(), Some(StepKind::Approval(_)))
                })
                .collect(),
        };
        for node in 0..flow.graph.nodes.len() {
            machine.refresh_view(node);
            if matches!(
                machine.step_status(node),
                StepPhase::Running | StepPhase::Waiting
            ) {
                machine.mark_live(node);
            }
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
        self.set_now(now);
        match event {
            Event::Start => self.start(),
            Event::Finished {
                step,
                part,
                attempt,
                result,
            } => self.finished(&step, part, attempt, result),
            Event::LookedUp {
                step,
                part,
                attempt,
                found,
            } => self.looked_up(&step, part, attempt, found),
            Event::LookupsWaiting {
                step,
                part,
                attempt,
                reason,
            } => self.lookups_waiting(&step, part, attempt, reason),
            Event::Tick => {}
            Event::Cancel if self.cancel_push() => {}
            Event::Cancel => self.stop(
                RunPhase::Cancelled,
                step_error(codes::CANCELLED, "the run was cancelled"),
            ),
            Event::Workspace(ended) => self.workspace_ended(ended),
            Event::GiveUp(error) => self.stop(RunPhase::Failed, error),
        }
        self.settle_event()
    }

    /// Takes a person's answer to the approval of `step` (its attempt
    /// `attempt`) at time `now`, and returns the actions it leads to. An
    /// answer that does not fit the step, or an approval no longer waiting,
    /// is refused with a message for the person and changes nothing.
    pub fn decide(
        &mut self,
        step: &str,
        attempt: u32,
        decision: Decision,
        now: Timestamp,
    ) -> Result<Vec<Action>, DecideError> {
        self.set_now(now);
        self.decided(step, attempt, decision)?;
        Ok(self.settle_event())
    }

    /// Ends attempt `attempt` of the person step `step`, still waiting, as
    /// failed with `error`, at time `now`; like any failed attempt it is
    /// tried again (a new Approval asked) while `attempts` allow. The
    /// driver calls it when the place that answer would come from cannot be
    /// trusted (an Approval under its name that the driver did not make).
    /// An attempt no longer waiting is left as it is.
    pub fn fail_waiting(
        &mut self,
        step: &str,
        attempt: u32,
        error: StepError,
        now: Timestamp,
    ) -> Vec<Action> {
        self.set_now(now);
        if let Some(node) = self.flow.node(step) {
            let current = self.step_status(node) == StepPhase::Waiting
                && self
                    .state
                    .steps
                    .get(step)
                    .is_some_and(|r| r.attempts.len() as u32 == attempt);
            if current {
                // Between its tries a person step is Running with a retry
                // time, as any step is.
                self.set_status(node, StepPhase::Running);
                self.attempt_failed(node, Failed::from(error));
            }
        }
        self.settle_event()
    }

    fn set_now(&mut self, now: Timestamp) {
        if now != self.now {
            self.now = now;
            self.now_text = now.to_string();
        }
    }

    /// Runs the scheduler after an event and hands back what it asked for.
    fn settle_event(&mut self) -> Vec<Action> {
        if self.is_active() {
            self.expire_approvals();
            self.pump();
        }
        self.prune_live();
        std::mem::take(&mut self.actions)
    }

    /// Notes that `node`'s record may say Running or Waiting.
    pub(in crate::engine) fn mark_live(&mut self, node: usize) {
        if !self.is_live[node] {
            self.is_live[node] = true;
            self.live.push(node);
        }
    }

    /// Keeps in `live` only the nodes whose status says Running or Waiting,
    /// in the order of the flow.
    fn prune_live(&mut self) {
        let mut live = std::mem::take(&mut self.live);
        live.retain(|&node| {
            let keep = matches!(
                self.step_status(node),
                StepPhase::Running | StepPhase::Waiting
            );
            self.is_live[node] = keep;
            keep
        });
        live.sort_unstable();
        self.live = live;
    }

    /// The run's status as it stands: its phase, steps and output settle
    /// on every event; its summary (progress, current step, whether it
    /// runs or waits) and arrows only in [`RunMachine::summarized`].
    pub fn status(&self) -> &RunStatus {
        &self.state
    }

    /// The run's status with its summary and arrows, as a driver writes or
    /// prints it: computed on demand, because it walks the whole flow.
    pub fn summarized(&self) -> RunStatus {
        let mut status = self.state.clone();
        self.summarize(&mut status);
        status
    }

    /// [`RunMachine::summarized`], once the run is over or handed on.
    pub fn into_status(self) -> RunStatus {
        let mut status = self.state.clone();
        self.summarize(&mut status);
        status
    }

    /// The steps whose status changed since the last call, for progress display.
    pub fn take_touched(&mut self) -> Vec<String> {
        let flow = self.flow;
        std::mem::take(&mut self.touched)
            .into_iter()
            .map(|n| flow.key(n).to_string())
            .collect()
    }

    /// Every attempt that should be running now, rebuilt from the status — a
    /// restarted controller uses it to find (or recreate) its Jobs and calls.
    pub fn running_work(&self) -> Vec<Work> {
        self.running_refs()
            .iter()
            .filter_map(|r| self.work_of(r))
            .collect()
    }

    /// The attempts [`RunMachine::running_work`] gives, named without
    /// building their work: a driver that runs most of them already builds
    /// only the others' ([`RunMachine::work_of`]).
    pub fn running_refs(&self) -> Vec<WorkRef<'_>> {
        let mut refs = Vec::new();
        for node in self.live_nodes() {
            let key = self.flow.key(node);
            let Some(record) = self.state.steps.get(key) else {
                continue;
            };
            if record.status != StepPhase::Running || record.retry_at.is_some() {
                continue;
            }
            let compiled = &self.flow.steps[node];
            let iteration = self.iteration_of(node).map(|i| i as u32);
            if let Some(inner) = compiled.part.as_deref() {
                if !runs_work(inner) {
                    continue;
                }
                let round = u32::try_from(record.rounds.max(1)).unwrap_or(1);
                for (index, part) in record.parts.iter().enumerate() {
                    if part.status == StepPhase::Running && part.retry_at.is_none() {
                        refs.push(WorkRef {
                            key: WorkKey {
                                step: key,
                                part: Some((index, round)),
                                iteration,
                                attempt: part.attempts.len() as u32,
                            },
                            node,
                        });
                    }
                }
            } else if runs_work(compiled) {
                refs.push(WorkRef {
                    key: WorkKey {
                        step: key,
                        part: None,
                        iteration,
                        attempt: record.attempts.len() as u32,
                    },
                    node,
                });
            }
        }
        refs
    }

    /// The attempts and the person steps waiting for their lookups
    /// ([`Work::lookups_due`], [`ApprovalRequest::lookups_due`]): a driver
    /// that can reach the records database runs them and hands the engine
    /// [`Event::LookedUp`] before it plans; the others stay in the plan.
    pub fn lookups_due(&self) -> (Vec<Work>, Vec<ApprovalRequest>) {
        let work = self
            .running_refs()
            .iter()
            .filter(|r| {
                let step = &self.flow.steps[r.node];
                !step.part.as_deref().unwrap_or(step).lookups.is_empty()
            })
            .filter_map(|r| self.work_of(r))
            .filter(Work::lookups_due)
            .collect();
        let people = self
            .pending_approvals()
            .into_iter()
            .filter(ApprovalRequest::lookups_due)
            .collect();
        (work, people)
    }

    /// The work of one attempt [`RunMachine::running_refs`] named.
    pub fn work_of(&self, attempt: &WorkRef<'_>) -> Option<Work> {
        match attempt.key.part {
            Some((index, _)) => self.part_work(attempt.node, index),
            None => self.step_work(attempt.node, attempt.key.attempt),
        }
    }

    /// The compiled flow the run follows (its steps' kinds, for metrics).
    pub fn flow(&self) -> &'f Compiled<'f> {
        self.flow
    }
}

impl RunMachine<'_> {
    /// Whether steps may move: the run started, has not ended, and is not
    /// held for its push (its steps are done).
    pub(in crate::engine) fn is_active(&self) -> bool {
        !self.state.phase.is_over()
            && self.state.phase != RunPhase::Pending
            && self.workspace_work().is_none()
    }

    /// Starts the run, once its workspace (if the flow has one) is made.
    pub(in crate::engine) fn start(&mut self) {
        if self.state.phase != RunPhase::Pending || !self.workspace_ready() {
            return;
        }
        self.state.phase = RunPhase::Running;
        self.state.started_at = Some(self.now_text.clone());
        // A rerun's record was seeded with what runs again (`rerun_from`):
        // its copied steps stay as they are.
        if self.state.rerun_of.is_none() {
            let top: Vec<usize> = self.flow.graph.lists[0].clone();
            for node in top {
                self.state.due.insert(self.flow.key(node).to_string());
            }
        }
        self.candidates = self.flow.graph.lists[0].clone();
    }

    // ---- records ---------------------------------------------------------------

    /// A step's latest output (`null` when it has none), copied.
    pub(in crate::engine) fn output_of(&self, key: &str) -> Value {
        self.state
            .steps
            .get(key)
            .and_then(|r| r.output.clone())
            .unwrap_or(Value::Null)
    }

    /// The outputs of the steps an approval shows, by key.
    pub(in crate::engine) fn outputs_of(&self, keys: &[String]) -> Map<String, Value> {
        keys.iter()
            .map(|k| (k.clone(), self.output_of(k)))
            .collect()
    }

    pub(in crate::engine) fn step_status(&self, node: usize) -> StepPhase {
        self.state
            .steps
            .get(self.flow.key(node))
            .map_or(StepPhase::Pending, |r| r.status)
    }

    pub(in crate::engine) fn record_mut(&mut self, node: usize) -> &mut StepStatus {
        let key = self.flow.key(node);
        if self.touched.last() != Some(&node) {
            self.touched.push(node);
        }
        self.mark_live(node);
        // `entry` would allocate the key on every call; insert only once.
        if !self.recorded[node] {
            self.recorded[node] = true;
            self.state.steps.entry(key.to_string()).or_default();
        }
        self.state.steps.get_mut(key).expect("recorded above")
    }

    pub(in crate::engine) fn set_status(&mut self, node: usize, status: StepPhase) {
        self.record_mut(node).status = status;
        self.refresh_view(node);
    }

    /// Brings the view expressions read (`$steps.KEY`) in line with the
    /// record, in place when it exists (this runs on every transition).
    pub(in crate::engine) fn refresh_view(&mut self, node: usize) {
        if !self.flow.observed[node] {
            return;
        }
        let record = self.state.steps.get(self.flow.key(node));
        let fields = crate::engine::chains::step_view(
            record.map_or(StepPhase::Pending, |r| r.status),
            record.and_then(|r| r.output.clone()),
            record.and_then(|r| r.text.clone()),
            json!(record.and_then(|r| r.error.as_ref())),
        );
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

    /// Writes the summary of the status as it stands into `out` (a copy
    /// of it).
    fn summarize(&self, out: &mut RunStatus) {
        if self.is_active() {
            let any = |status| self.state.steps.values().any(|r| r.status == status);
            let waiting = any(StepPhase::Waiting) && !any(StepPhase::Running);
            out.phase = if waiting {
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
                        self.step_status(n),
                        StepPhase::Completed | StepPhase::Failed | StepPhase::Skipped
                    )
            })
            .count();
        out.progress = Some(format!("{settled}/{total}"));
        out.current_step = (0..total)
            .rev()
            .find(|&n| matches!(self.step_status(n), StepPhase::Running | StepPhase::Waiting))
            .map(|n| self.flow.key(n).to_string());
        let arrows = super::arrows::arrows(self.flow, out);
        out.arrows = arrows;
    }
}

pub(super) fn expression_error(e: &EvalError) -> StepError {
    step_error(codes::EXPRESSION, e.to_string())
}

pub(super) fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a step of this kind is work a driver runs (the kinds a
/// [`Task`] is made of); the others the engine settles itself.
fn runs_work(step: &CompiledStep<'_>) -> bool {
    matches!(
        step.step.kind(),
        Some(
            StepKind::Script(_)
                | StepKind::Http(_)
                | StepKind::Message(_)
                | StepKind::Agent(_)
                | StepKind::Save(_)
        )
    )
}

/// What tells one attempt from every other of a run: its step, its part
/// (position and round), its loop pass and its number. Borrowed, so a
/// driver can compare what runs with what the status says without building
/// anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkKey<'a> {
    /// The step's key (for a parallel part, the parallel step's key).
    pub step: &'a str,
    /// The part's position and round, for a part of a parallel step.
    pub part: Option<(usize, u32)>,
    /// The loop pass, inside a loop.
    pub iteration: Option<u32>,
    /// The attempt number.
    pub attempt: u32,
}

impl<'a> WorkKey<'a> {
    /// The key of `work`.
    pub fn of(work: &'a Work) -> Self {
        WorkKey {
            step: &work.step,
            part: work.part.as_ref().map(|p| (p.index, p.round)),
            iteration: work.iteration,
            attempt: work.attempt,
        }
    }
}

/// One attempt that should be running, named without building its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkRef<'a> {
    /// Which attempt.
    pub key: WorkKey<'a>,
    /// Where the step is in the flow.
    node: usize,
}

impl RunMachine<'_> {
    /// The nodes that may be Running or Waiting, in the order of the flow
    /// (those written during the current event too, before it settles).
    pub(in crate::engine) fn live_nodes(&self) -> Vec<usize> {
        let mut nodes = self.live.clone();
        nodes.sort_unstable();
        nodes
    }
}
