//! `coxswain run`: the engine driven on a laptop. Work runs as local tasks,
//! approvals come from `--decide` or the terminal, progress goes to stderr,
//! and the final status has the shape of a Run's status.

mod approve;
mod progress;
mod workspace;

use std::sync::Arc;

use coxswain_core::api::{RunStatus, StepError};
use coxswain_core::engine::{
    ApprovalRequest, AskRef, CompiledFlow, Decision, Event, Failed, Plan, RunInfo, RunMachine,
    Seen, Work, WorkspaceWork, codes, same_attempt, step_error,
};
use coxswain_steps::Executor;
use coxswain_steps::in_process::InProcess;
use coxswain_steps::launch::{Launcher, LauncherError, Observation, WorkId};
use coxswain_steps::records::{LookupFailed, Records};
use jiff::Timestamp;
use serde_json::Value;

pub use approve::{ApproveError, Approver, CommandLineApprover, parse_answer};
pub use progress::Progress;
pub(crate) use progress::duration;
pub use workspace::LocalWorkspace;

/// A new local run's facts: a name no other run of this machine has (the
/// time, and a random tail so two runs started in the same second, and
/// their workspace branches, stay apart), and a random uid.
pub fn local_run() -> RunInfo {
    let tail: u16 = rand::random();
    RunInfo {
        name: format!("local-{}-{tail:04x}", Timestamp::now().as_second()),
        namespace: "local".into(),
        uid: random_uid(),
        since: None,
    }
}

/// What a run starts with besides its flow and input.
#[derive(Debug, Default)]
pub struct Start {
    /// The run's facts.
    pub run: RunInfo,
    /// Where its workspace goes, for a flow with one: made, pushed and let
    /// go when the engine's plan asks.
    pub workspace: Option<LocalWorkspace>,
    /// Where its lookups read (its saves go through the executor).
    pub records: Records,
    /// A rerun's starting record (`coxswain run --from REC --step KEY`),
    /// seeded by [`coxswain_core::engine::rerun_from`]: its copied steps
    /// do not run again.
    pub seed: Option<RunStatus>,
}

impl Start {
    /// A fresh local run (a new name and uid) with nothing else given.
    pub fn local() -> Self {
        Start {
            run: local_run(),
            ..Start::default()
        }
    }
}

/// The status of a run that failed before its first step (its rerun
/// seed does not fit the flow): every step pending, the run failed with
/// `error`.
fn failed_before_start(
    flow: &CompiledFlow,
    input: Value,
    run: RunInfo,
    error: StepError,
    progress: &mut Progress,
) -> RunStatus {
    let mut machine = RunMachine::new(flow, input, run);
    progress.note(&error.message);
    machine.handle(Event::GiveUp(error), Timestamp::now());
    let status = machine.into_status();
    progress.finished(&status);
    status
}

/// The machine a run starts with: a new one, or for a rerun one resumed
/// from its seed (the copied steps named on the terminal). A seed made
/// with another flow ends the run before it starts, with that error.
fn machine_for<'f>(
    flow: &'f CompiledFlow,
    input: Value,
    start: &Start,
    progress: &mut Progress,
) -> Result<RunMachine<'f>, Box<RunStatus>> {
    let Some(seed) = start.seed.clone() else {
        return Ok(RunMachine::new(flow, input, start.run.clone()));
    };
    let copied: Vec<&str> = seed
        .steps
        .iter()
        .filter(|(_, r)| r.copied_from.is_some())
        .map(|(k, _)| k.as_str())
        .collect();
    if !copied.is_empty() {
        progress.note(&format!("copied from the old run: {}", copied.join(", ")));
    }
    RunMachine::resume(flow, input.clone(), start.run.clone(), seed).map_err(|e| {
        let error = step_error(codes::FLOW_INVALID, e.to_string());
        Box::new(failed_before_start(
            flow,
            input,
            start.run.clone(),
            error,
            progress,
        ))
    })
}

/// [`run_flow`] for a fresh local run that prints nothing and is never
/// cancelled: how tests, benchmarks and the conformance suite drive a flow.
pub async fn run_quietly<E: Executor + 'static>(
    flow: &CompiledFlow,
    input: Value,
    executor: Arc<E>,
    approver: &mut dyn Approver,
) -> RunStatus {
    let mut progress = Progress::new(true);
    let (start, cancel) = (Start::local(), std::future::pending());
    run_flow(
        flow,
        input,
        start,
        executor,
        approver,
        &mut progress,
        cancel,
    )
    .await
}

/// Runs a flow to its end and returns its status. `cancel` resolves when the
/// user asks to stop (Ctrl-C); the run then ends `Cancelled` with its work killed.
/// Work runs through an [`InProcess`] launcher, as the controller's would;
/// `start` holds the run's facts (and workspace): [`Start::local`] for a
/// fresh local run.
pub async fn run_flow<E, C>(
    flow: &CompiledFlow,
    input: Value,
    mut start: Start,
    executor: Arc<E>,
    approver: &mut dyn Approver,
    progress: &mut Progress,
    cancel: C,
) -> RunStatus
where
    E: Executor + 'static,
    C: std::future::Future<Output = ()>,
{
    let mut machine = match machine_for(flow, input, &start, progress) {
        Ok(machine) => machine,
        Err(record) => return *record,
    };
    let (launcher, mut finishes) = InProcess::new(executor);
    let mut driver = Driver::default();
    let mut events = vec![Input::Event(Event::Start)];
    tokio::pin!(cancel);
    let mut cancelled = false;

    loop {
        while let Some(input) = events.pop() {
            let mut finished = Vec::new();
            let workspace_before = machine.workspace_work();
            let workspace_ended = matches!(input, Input::Event(Event::Workspace(_)));
            let actions = match input {
                Input::Event(event) => machine.handle(event, Timestamp::now()),
                Input::Finished(work, event) => {
                    finished.push(*work);
                    machine.handle(event, Timestamp::now())
                }
                Input::Answer(request, decision) => {
                    let (step, attempt) = (&request.step, request.attempt);
                    match machine.decide(step, attempt, decision, Timestamp::now()) {
                        Ok(actions) => {
                            driver.asked.retain(|a| *a != AskRef::from(&request));
                            actions
                        }
                        Err(refused) => {
                            // Say why, and ask again (or give up if no one can answer).
                            progress.note(&refused.to_string());
                            events.push(ask(approver, progress, request));
                            continue;
                        }
                    }
                }
            };
            let touched = machine.take_touched();
            progress.changed(machine.status(), &touched);
            let seen = Seen {
                workspace: workspace_before,
                workspace_ended,
                ..driver.seen(&finished)
            };
            let plan = Plan::new(&actions, &machine, &seen);
            driver.wake = plan.wake;
            if let Some(event) = workspace_work(&mut start, &plan, progress).await {
                events.push(Input::Event(event));
            }
            for work in &plan.forget {
                if let Err(e) = launcher.forget(&WorkId::of(work)).await {
                    progress.note(&e.to_string());
                }
                driver.gone(work);
            }
            for work in &plan.stop {
                stop(&launcher, progress, &WorkId::of(work)).await;
                driver.gone(work);
            }
            for work in &plan.lookups {
                events.push(Input::Event(looked_up(&start.records, work).await));
            }
            for request in &plan.ask_lookups {
                let found = start.records.look_up_for(request, &start.run).await;
                events.push(Input::Event(Event::LookedUp {
                    step: request.step.clone(),
                    part: None,
                    attempt: request.attempt,
                    found: found.map_err(into_step_error),
                }));
            }
            for work in plan.launch {
                if let Err(e) = launcher.launch(&work).await {
                    events.push(launch_failed(&work, e));
                }
                // In flight until its result (or its failure to start)
                // is taken in.
                driver.running.push(work);
            }
            for request in plan.ask {
                driver.asked.push(AskRef::from(&request));
                events.push(ask(approver, progress, request));
            }
            for closed in &plan.close {
                driver.asked.retain(|a| a != closed);
            }
        }
        if machine.status().phase.is_over() {
            break;
        }
        if driver.running.is_empty() && driver.wake.is_none() {
            // Nothing runs and nothing will wake the engine: it is stuck,
            // which it must never be. Say so instead of hanging.
            let stuck = "the run has nothing left to do but did not finish";
            progress.note(stuck);
            events.push(Input::Event(Event::GiveUp(step_error(
                codes::INTERNAL,
                stuck,
            ))));
            continue;
        }
        let sleep = driver.wake.map(|at| {
            let wait = at.duration_since(Timestamp::now());
            std::time::Duration::try_from(wait).unwrap_or_default()
        });
        tokio::select! {
            Some(id) = finishes.next() => {
                if let Some(input) = take_result(&launcher, &driver, id).await {
                    events.push(input);
                }
            }
            _ = tokio::time::sleep(sleep.unwrap_or(std::time::Duration::from_secs(3600))), if sleep.is_some() => {
                events.push(Input::Event(Event::Tick));
            }
            _ = &mut cancel, if !cancelled => {
                cancelled = true;
                events.push(Input::Event(Event::Cancel));
            }
        }
    }
    let status = machine.into_status();
    progress.finished(&status);
    status
}

/// Does the workspace work the plan asks for, here and now (nothing else
/// runs meanwhile: the run has not started, or its steps are done), and
/// says how it ended; lets the folder go once the plan says so.
async fn workspace_work(start: &mut Start, plan: &Plan, progress: &mut Progress) -> Option<Event> {
    let workspace = start.workspace.as_mut()?;
    if plan.release {
        workspace.release();
    }
    let ended = match plan.workspace? {
        WorkspaceWork::CheckOut => workspace.check_out(progress).await,
        WorkspaceWork::Push => workspace.push(progress).await,
    };
    Some(Event::Workspace(ended))
}

/// What the local driver knows of the world outside the engine.
#[derive(Default)]
struct Driver {
    /// Work launched whose result was not taken in yet.
    running: Vec<Work>,
    /// Approvals asked and not answered.
    asked: Vec<AskRef>,
    /// When the engine wants a tick, as the last plan said.
    wake: Option<Timestamp>,
}

impl Driver {
    /// What the plan sees: the work in flight, the questions asked.
    fn seen<'a>(&'a self, finished: &'a [Work]) -> Seen<'a> {
        Seen {
            before: &self.running,
            running: &self.running,
            finished,
            asked: &self.asked,
            open: &self.asked,
            ..Seen::default()
        }
    }

    /// `work` no longer runs.
    fn gone(&mut self, work: &Work) {
        self.running.retain(|w| !same_attempt(w, work));
    }
}

/// Runs the lookups of `work` and says what they found; locally a database
/// that cannot answer fails the attempt (there is no later reconcile).
async fn looked_up(records: &Records, work: &Work) -> Event {
    let found = records.look_up(work).await.map_err(into_step_error);
    Event::LookedUp {
        step: work.step.clone(),
        part: work.part.as_ref().map(|p| p.index),
        attempt: work.attempt,
        found,
    }
}

/// Locally a database that cannot answer fails the attempt.
fn into_step_error(e: LookupFailed) -> StepError {
    match e {
        LookupFailed::Step(error) => error,
        LookupFailed::Unavailable(reason) => step_error(codes::RECORDS, reason),
    }
}

/// The engine's event for work that finished, with the work. `None` for
/// work no longer wanted (stopped after it finished).
async fn take_result<E: Executor + 'static>(
    launcher: &InProcess<E>,
    driver: &Driver,
    id: WorkId,
) -> Option<Input> {
    let work = driver.running.iter().find(|w| WorkId::of(w) == id)?;
    let result = match launcher.observe(&id).await {
        Ok(Observation::Finished(result)) => result,
        Ok(Observation::Running | Observation::Unknown) => return None,
        Err(e) => Err(Failed::from(step_error(codes::INTERNAL, e.to_string()))),
    };
    Some(Input::Finished(Box::new(work.clone()), id.finished(result)))
}

/// Cancels work; a launcher that cannot is named, and the run goes on ending.
async fn stop<E: Executor + 'static>(
    launcher: &InProcess<E>,
    progress: &mut Progress,
    id: &WorkId,
) {
    if let Err(e) = launcher.cancel(id).await {
        progress.note(&e.to_string());
    }
}

/// The attempt fails when its work could not be launched.
fn launch_failed(work: &Work, error: LauncherError) -> Input {
    let failed = Failed::from(step_error(codes::INTERNAL, error.to_string()));
    Input::Finished(
        Box::new(work.clone()),
        WorkId::of(work).finished(Err(failed)),
    )
}

/// What the loop hands the machine next: an event, finished work, or a
/// person's answer (which the machine may refuse).
enum Input {
    Event(Event),
    /// Work finished (or could not start), and its result.
    Finished(Box<Work>, Event),
    Answer(ApprovalRequest, Decision),
}

/// Asks the approver; with no answer to be had, the run fails saying why.
fn ask(approver: &mut dyn Approver, progress: &mut Progress, request: ApprovalRequest) -> Input {
    progress.suspend();
    match approver.decide(&request) {
        Ok(decision) => Input::Answer(request, decision),
        Err(error) => {
            // Nobody here can answer: the run fails saying so (nobody
            // cancelled it).
            let message = error.to_string();
            progress.note(&message);
            Input::Event(Event::GiveUp(step_error(codes::NO_ANSWER, message)))
        }
    }
}

fn random_uid() -> String {
    let n: u128 = rand::random();
    format!("{:032x}", n)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use coxswain_core::api::{FlowSpec, RunPhase, StepPhase};
    use coxswain_core::engine::{Done, WorkResult};

    /// Every part's first attempt fails, part `slow` only after a while;
    /// later attempts succeed.
    struct FailFirst;

    impl Executor for FailFirst {
        async fn run(&self, work: &Work) -> WorkResult {
            if work.attempt > 1 {
                return Ok(Done::output(json!("ok")));
            }
            if work.part.as_ref().is_some_and(|p| p.key == "slow") {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(Failed::from(step_error(codes::SCRIPT, "exit 1")))
        }
    }

    #[tokio::test]
    async fn parts_retrying_at_different_times_both_finish() {
        let spec: FlowSpec = serde_yaml::from_str(
            "steps:\n  - key: each\n    parallel:\n      items: $input.xs\n      step: {script: {source: x}, attempts: 2, backoff: 1s}\n",
        )
        .expect("flow");
        let flow = CompiledFlow::new(spec.clone()).expect("valid");
        let mut approver = CommandLineApprover::new(&[]).expect("approver");
        let record = run_quietly(
            &flow,
            json!({"xs": ["fast", "slow"]}),
            Arc::new(FailFirst),
            &mut approver,
        )
        .await;
        assert_eq!(record.phase, RunPhase::Succeeded, "{:?}", record.error);
        let parts = &record.steps["each"].parts;
        assert!(
            parts
                .iter()
                .all(|p| p.status == StepPhase::Completed && p.attempts.len() == 2)
        );
    }

    /// Answers a review with `maybe` first (which no step offers), then `approve`.
    struct Hesitant {
        asked: usize,
    }

    impl Approver for Hesitant {
        fn decide(&mut self, _: &ApprovalRequest) -> Result<Decision, ApproveError> {
            self.asked += 1;
            let decision = if self.asked == 1 { "maybe" } else { "approve" };
            Ok(Decision {
                decision: Some(decision.into()),
                ..Default::default()
            })
        }
    }

    #[tokio::test]
    async fn a_refused_answer_is_asked_again() {
        let spec: FlowSpec =
            serde_yaml::from_str("steps: [{key: review, approval: {decisions: [approve]}}]")
                .expect("flow");
        let flow = CompiledFlow::new(spec.clone()).expect("valid");
        let mut approver = Hesitant { asked: 0 };
        let record = run_quietly(&flow, json!({}), Arc::new(FailFirst), &mut approver).await;
        assert_eq!(record.phase, RunPhase::Succeeded, "{:?}", record.error);
        assert_eq!(approver.asked, 2);
        assert_eq!(record.steps["review"].exit.as_deref(), Some("approve"));
    }
}
