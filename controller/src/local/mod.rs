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
    let mut machine = RunMachine::new(flow, input, run, RunStatus::default());
    let mut tasks: JoinSet<Finished> = JoinSet::new();
    let mut handles: HashMap<(String, Option<usize>), AbortHandle> = HashMap::new();
    let mut wake: Option<Timestamp> = None;
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
                    Action::WakeAt(at) => wake = Some(wake.map_or(at, |w| w.min(at))),
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
                wake = None;
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
