//! The conformance cases (`tests/conformance/*.yaml`) and a driver that
//! runs one through the engine by hand, event by event. Shared by
//! `tests/conformance.rs` (records through JSON) and the e2e crate's
//! `tests/crds.rs` (records through a real kube-apiserver).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use coxswain::local::{Approver, CommandLineApprover};
use coxswain_core::api::{FlowSpec, RunPhase, RunStatus, StepError, TokenUsage};
use coxswain_core::engine::{
    ApprovalRequest, AskRef, CompiledFlow, Done, Event, Failed, Plan, RunInfo, RunMachine, Seen,
    Task, Work, WorkResult, codes, same_attempt, step_error,
};
use coxswain_steps::Executor;
use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub flow: FlowSpec,
    #[serde(default)]
    pub input: Value,
    #[serde(default)]
    pub decide: Vec<String>,
    #[serde(default)]
    pub replies: HashMap<String, Vec<Reply>>,
    pub expect: Value,
    /// Inputs each step must have received, in order of attempts.
    #[serde(default)]
    pub received: HashMap<String, Vec<Value>>,
}

/// A scripted result of one attempt.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The output.
    #[serde(default)]
    pub output: Value,
    /// The text, when it is not the output's.
    #[serde(default)]
    pub text: Option<String>,
    /// A failure instead.
    #[serde(default)]
    pub error: Option<StepError>,
    /// Tokens, as an agent reports them.
    #[serde(default)]
    pub usage: Option<TokenUsage>,
}

/// Answers work from the case's replies, in order per step; with no reply
/// left, a script/http/message/agent step echoes its input.
pub struct Scripted {
    replies: Mutex<HashMap<String, VecDeque<Reply>>>,
    /// Inputs each step received, in order.
    pub received: Mutex<HashMap<String, Vec<Value>>>,
    /// The reviewer instructions each agent attempt was given.
    pub feedback: Mutex<HashMap<String, Vec<Option<String>>>>,
}

impl Scripted {
    /// A fresh script of the case's replies.
    pub fn new(case: &Case) -> Self {
        Scripted {
            replies: Mutex::new(
                case.replies
                    .iter()
                    .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                    .collect(),
            ),
            received: Mutex::new(HashMap::new()),
            feedback: Mutex::new(HashMap::new()),
        }
    }

    /// The next scripted reply for this work.
    pub fn answer(&self, work: &Work) -> WorkResult {
        let key = match &work.part {
            Some(p) => format!("{}/{}", work.step, p.key),
            None => work.step.clone(),
        };
        self.received
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_default()
            .push(work.input.clone());
        if let Task::Agent(a) = &work.task {
            let instructions = a.change_request.as_ref().map(|c| c.instructions.clone());
            self.feedback
                .lock()
                .unwrap()
                .entry(key.clone())
                .or_default()
                .push(instructions);
        }
        let reply = {
            let mut replies = self.replies.lock().unwrap();
            let key = if replies.contains_key(&key) {
                key
            } else {
                work.step.clone()
            };
            replies.get_mut(&key).and_then(VecDeque::pop_front)
        };
        match reply {
            Some(Reply {
                error: Some(error),
                usage,
                ..
            }) => Err(Failed {
                error,
                usage,
                log: None,
            }),
            Some(r) => Ok(Done {
                output: r.output,
                text: r.text,
                usage: r.usage,
                log: None,
            }),
            None => Ok(Done::output(work.input.clone())),
        }
    }
}

impl Executor for Scripted {
    async fn run(&self, work: &Work) -> WorkResult {
        self.answer(work)
    }
}

/// `expected` is a fragment of `actual`: every key it names matches; a
/// number expected where a list stands compares with the list's length.
pub fn fragment_matches(expected: &Value, actual: &Value, path: &str, errors: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let here = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => fragment_matches(v, av, &here, errors),
                    None if v.is_null() => {}
                    None => errors.push(format!("{here}: missing, expected {v}")),
                }
            }
        }
        (Value::Number(n), Value::Array(a)) => {
            if n.as_u64() != Some(a.len() as u64) {
                errors.push(format!("{path}: expected {n} items, got {}", a.len()));
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                fragment_matches(ev, av, &format!("{path}[{i}]"), errors);
            }
        }
        (Value::String(e), Value::String(a)) if e.starts_with('~') => {
            if !a.contains(&e[1..]) {
                errors.push(format!("{path}: {a:?} does not contain {:?}", &e[1..]));
            }
        }
        (e, a) => {
            let equal = match (e.as_f64(), a.as_f64()) {
                (Some(x), Some(y)) => x == y,
                _ => e == a,
            };
            if !equal {
                errors.push(format!("{path}: expected {e}, got {a}"));
            }
        }
    }
}

/// Reads one case file.
pub fn read_case(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    serde_yaml::from_str(&text).map_err(|e| format!("bad case: {e}"))
}

/// Where the cases are: both crates that include this file sit beside
/// `controller/` in the workspace.
const CASES: &str = "../controller/tests/conformance";

/// Fails with every failing case, or says how many passed.
pub fn report(cases: usize, failures: &[String]) {
    assert!(cases >= 10, "the suite has {cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("{cases} conformance cases passed");
}

/// The suite's case files, in order.
pub fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(CASES);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("suite dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
}

/// Every path where `a` and `b` differ, with both values.
pub fn differ(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differ(va, vb, &format!("{path}.{k}"), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                differ(va, vb, &format!("{path}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: straight {a}, restarted {b}")),
        _ => {}
    }
}

/// What identifies one attempt in flight.
pub fn attempt_of(w: &Work) -> (String, Option<usize>, u32) {
    (w.step.clone(), w.part.as_ref().map(|p| p.index), w.attempt)
}

/// Drives the engine by hand, one event at a time and in a fixed order, so
/// two drives of one case see the same events at the same times. With a
/// `store`, after every event the status is handed to it and a new machine
/// picks the run up from what comes back, as a restarted controller does:
/// the attempts it says are running must be exactly those in flight (and
/// the work finished from then on is the work it rebuilt), and
/// the approvals it waits for and the time it wants to wake at are taken
/// from it alone (nothing the engine said before the restart is kept).
/// Either way what runs next comes from the [`Plan`] every driver uses.
pub async fn drive<S, F>(
    case: &Case,
    flow: &CompiledFlow,
    mut store: Option<S>,
) -> Result<Value, String>
where
    S: FnMut(RunStatus) -> F,
    F: Future<Output = Result<RunStatus, String>>,
{
    let scripted = Scripted::new(case);
    let mut approver = CommandLineApprover::new(&case.decide).map_err(|e| e.to_string())?;
    let mut now = Timestamp::from_second(1_800_000_000).map_err(|e| e.to_string())?;
    let mut machine = RunMachine::new(flow, case.input.clone(), RunInfo::default());
    let mut in_flight: VecDeque<Work> = VecDeque::new();
    let mut asks: VecDeque<ApprovalRequest> = VecDeque::new();
    let mut wake: Option<Timestamp>;
    let mut next = Some(Next::Event(Event::Start));
    let mut handled = 0;
    while let Some(input) = next.take() {
        handled += 1;
        if handled > 10_000 {
            return Err("the run did not end after 10,000 events".into());
        }
        let mut finished = Vec::new();
        let actions = match input {
            Next::Event(event) => machine.handle(event, now),
            Next::Finished(work, event) => {
                finished.push(*work);
                machine.handle(event, now)
            }
            Next::Answer(request, decision) => {
                match machine.decide(&request.step, request.attempt, decision, now) {
                    Ok(actions) => actions,
                    // Refused: the person is asked again.
                    Err(_) => {
                        asks.push_back(request);
                        Vec::new()
                    }
                }
            }
        };
        // What the engine asks for, through the plan every driver uses.
        let running: Vec<Work> = in_flight.iter().cloned().collect();
        let before: Vec<Work> = running.iter().chain(&finished).cloned().collect();
        let asked: Vec<AskRef> = asks.iter().map(AskRef::from).collect();
        let seen = Seen {
            before: &before,
            running: &running,
            finished: &finished,
            asked: &asked,
            open: &asked,
            ..Seen::default()
        };
        let plan = Plan::new(&actions, &machine, &seen);
        in_flight.retain(|w| !plan.stop.iter().any(|s| same_attempt(s, w)));
        in_flight.extend(plan.launch);
        asks.retain(|a| !plan.close.contains(&AskRef::from(a)));
        asks.extend(plan.ask);
        wake = plan.wake;
        if let Some(store) = store.as_mut() {
            let state = store(machine.summarized()).await?;
            machine = RunMachine::resume(flow, case.input.clone(), RunInfo::default(), state)
                .map_err(|e| e.to_string())?;
            // A restarted driver knows nothing: the plan from the status
            // alone says what runs, who is asked and when to wake.
            let resumed = Plan::new(&[], &machine, &Seen::default());
            asks = resumed.ask.into();
            wake = resumed.wake;
            let mut rebuilt = resumed.launch;
            rebuilt.sort_by_key(attempt_of);
            let mut expected: Vec<Work> = in_flight.iter().cloned().collect();
            expected.sort_by_key(attempt_of);
            if rebuilt != expected {
                return Err(format!(
                    "after event {handled}, the restarted engine would run {:?} but {:?} are in flight",
                    rebuilt.iter().map(attempt_of).collect::<Vec<_>>(),
                    expected.iter().map(attempt_of).collect::<Vec<_>>(),
                ));
            }
            // From here on the work is what the status rebuilt, finished in
            // the order it was launched (as the outside world would).
            let order: Vec<_> = in_flight.iter().map(attempt_of).collect();
            in_flight = order
                .iter()
                .filter_map(|id| rebuilt.iter().find(|w| attempt_of(w) == *id).cloned())
                .collect();
        }
        if machine.status().phase.is_over() || machine.status().phase == RunPhase::Pending {
            break;
        }
        next = if let Some(work) = in_flight.pop_front() {
            let event = Event::Finished {
                step: work.step.clone(),
                part: work.part.as_ref().map(|p| p.index),
                attempt: work.attempt,
                result: scripted.answer(&work),
            };
            Some(Next::Finished(Box::new(work), event))
        } else if let Some(request) = first_ask(&mut asks) {
            Some(match approver.decide(&request) {
                Ok(decision) => Next::Answer(request, decision),
                Err(e) => Next::Event(Event::GiveUp(step_error(codes::NO_ANSWER, e.to_string()))),
            })
        } else if let Some(at) = wake.take() {
            now = now.max(at);
            Some(Next::Event(Event::Tick))
        } else {
            None
        };
    }
    let mut record = serde_json::to_value(machine.summarized()).map_err(|e| e.to_string())?;
    let received = scripted.received.lock().unwrap().clone();
    let feedback = scripted.feedback.lock().unwrap().clone();
    record["received"] = serde_json::to_value(received).unwrap_or_default();
    record["feedback"] = serde_json::to_value(feedback).unwrap_or_default();
    Ok(record)
}

/// Runs a case straight and with `store` after every event; the error lists
/// what differs or what the status misses of the case's expectations.
pub async fn check_restarts<S, F>(case: &Case, store: S) -> Result<(), String>
where
    S: FnMut(RunStatus) -> F,
    F: Future<Output = Result<RunStatus, String>>,
{
    let flow = CompiledFlow::new(case.flow.clone()).map_err(|p| format!("flow refused: {p:?}"))?;
    let straight = drive(case, &flow, None::<S>).await?;
    let restarted = drive(case, &flow, Some(store)).await?;
    let mut errors = Vec::new();
    if straight == restarted {
        fragment_matches(&case.expect, &straight, "", &mut errors);
    } else {
        let mut differences = Vec::new();
        differ(&straight, &restarted, "", &mut differences);
        errors.push(format!(
            "the record after restarts differs from the straight run's:\n{}",
            differences.join("\n")
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// What the driver hands the engine next: an event, or a person's answer.
enum Next {
    Event(Event),
    /// Work finished, and its result.
    Finished(Box<Work>, Event),
    Answer(ApprovalRequest, coxswain_core::engine::Decision),
}

/// Takes the ask of the first step by key: a restarted engine lists its
/// approvals in its own order, so both drives answer in this one.
fn first_ask(asks: &mut VecDeque<ApprovalRequest>) -> Option<ApprovalRequest> {
    let first = (0..asks.len()).min_by(|&a, &b| asks[a].step.cmp(&asks[b].step))?;
    asks.remove(first)
}
