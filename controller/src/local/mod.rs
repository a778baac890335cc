//! `coxswain run`: the engine driven on a laptop. Work runs as local tasks,
//! approvals come from `--decide` or the terminal, progress goes to stderr,
//! and the final record has the shape of a Run's status.

mod approve;
mod progress;

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;
use tokio::task::{AbortHandle, JoinSet};

use crate::api::{RunPhase, RunStatus};
use crate::engine::{Action, CompiledFlow, Event, RunInfo, RunMachine, WorkResult};
use crate::steps::Executor;

pub use approve::{Approver, CommandLineApprover, parse_answer};
pub use progress::Progress;

type Finished = (String, Option<usize>, u32, WorkResult);

/// Runs a flow to its end and returns its record. `cancel` resolves when the
/// user asks to stop (Ctrl-C); the run then ends `Cancelled` with its work killed.
pub async fn run_flow<E, C>(
    flow: &CompiledFlow<'_>,
    input: Value,
    executor: Arc<E>,
    approver: &mut dyn Approver,
    progress: &mut Progress,
    cancel: C,
) -> RunStatus
where
    E: Executor + 'static,
    C: std::future::Future<Output = ()>,
{
    let run = RunInfo {
        name: format!("local-{}", Timestamp::now().as_second()),
        namespace: "local".into(),
        uid: random_uid(),
        since: None,
    };
    let mut machine = RunMachine::new(flow, input, run);
    let mut tasks: JoinSet<Finished> = JoinSet::new();
    let mut handles: HashMap<(String, Option<usize>), AbortHandle> = HashMap::new();
    let mut events = vec![Event::Start];
    tokio::pin!(cancel);
    let mut cancelled = false;

    loop {
        while let Some(event) = events.pop() {
            let actions = machine.handle(event, Timestamp::now());
            let touched = machine.take_touched();
            progress.changed(machine.state(), &touched);
            for action in actions {
                match action {
                    Action::Run(work) => {
                        let key = (work.step.clone(), work.part.as_ref().map(|p| p.index));
                        let executor = Arc::clone(&executor);
                        let handle = tasks.spawn(async move {
                            let result = executor.run(&work).await;
                            (work.step, work.part.map(|p| p.index), work.attempt, result)
                        });
                        handles.insert(key, handle);
                    }
                    Action::Ask(request) => {
                        progress.suspend();
                        let event = match approver.decide(&request) {
                            Ok(decision) => Event::Decided {
                                step: request.step,
                                attempt: request.attempt,
                                decision,
                            },
                            Err(message) => {
                                progress.note(&message);
                                Event::Cancel
                            }
                        };
                        events.push(event);
                    }
                    // Asked of the machine below, after every batch of events.
                    Action::WakeAt(_) => {}
                    Action::Stop { step, part } => {
                        if let Some(handle) = handles.remove(&(step, part)) {
                            handle.abort();
                        }
                    }
                }
            }
        }
        let ended = !matches!(
            machine.state().phase,
            RunPhase::Running | RunPhase::Waiting | RunPhase::Pending
        );
        if ended {
            tasks.abort_all();
            break;
        }
        let wake = machine.next_wake();
        if tasks.is_empty() && wake.is_none() {
            // Nothing runs and nothing will wake the engine: it is stuck,
            // which it must never be. Say so instead of hanging.
            progress.note("the run has nothing left to do but did not finish");
            events.push(Event::Cancel);
            continue;
        }
        let sleep = wake.map(|at| {
            let wait = at.duration_since(Timestamp::now());
            std::time::Duration::try_from(wait).unwrap_or_default()
        });
        tokio::select! {
            Some(joined) = tasks.join_next() => {
                if let Ok((step, part, attempt, result)) = joined {
                    handles.remove(&(step.clone(), part));
                    events.push(Event::Finished { step, part, attempt, result });
                }
            }
            _ = tokio::time::sleep(sleep.unwrap_or(std::time::Duration::from_secs(3600))), if sleep.is_some() => {
                events.push(Event::Tick);
            }
            _ = &mut cancel, if !cancelled => {
                cancelled = true;
                events.push(Event::Cancel);
            }
        }
    }
    machine.record();
    progress.finished(machine.state());
    machine.into_state()
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
    use crate::api::{FlowSpec, StepStatus};
    use crate::engine::{Done, Failed, Work, codes, step_error};

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
        let flow = CompiledFlow::new(&spec).expect("valid");
        let mut approver = CommandLineApprover::new(&[]).expect("approver");
        let mut progress = Progress::new(true);
        let record = run_flow(
            &flow,
            json!({"xs": ["fast", "slow"]}),
            Arc::new(FailFirst),
            &mut approver,
            &mut progress,
            std::future::pending(),
        )
        .await;
        assert_eq!(record.phase, RunPhase::Succeeded, "{:?}", record.error);
        let parts = &record.steps["each"].parts;
        assert!(
            parts
                .iter()
                .all(|p| p.status == StepStatus::Completed && p.attempts.len() == 2)
        );
    }
}
