//! The conformance suite: each file in `tests/conformance/` is a flow, an
//! input, decisions, stand-in replies per step, and fragments of the record
//! the run must end with. The engine runs it through the local runner.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use coxswain::api::{FlowSpec, StepError};
use coxswain::engine::{CompiledFlow, Done, Task, Work, WorkResult};
use coxswain::local::{CommandLineApprover, Progress, run_flow};
use coxswain::steps::Executor;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    flow: FlowSpec,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    decide: Vec<String>,
    #[serde(default)]
    replies: HashMap<String, Vec<Reply>>,
    expect: Value,
    /// Inputs each step must have received, in order of attempts.
    #[serde(default)]
    received: HashMap<String, Vec<Value>>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Reply {
    #[serde(default)]
    output: Value,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    error: Option<StepError>,
}

/// Answers work from the case's replies, in order per step; with no reply
/// left, a script/http/message/agent step echoes its input.
struct Scripted {
    replies: Mutex<HashMap<String, VecDeque<Reply>>>,
    received: Mutex<HashMap<String, Vec<Value>>>,
    feedback: Mutex<HashMap<String, Vec<Option<String>>>>,
}

impl Executor for Scripted {
    async fn run(&self, work: &Work) -> WorkResult {
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
            Some(Reply { error: Some(e), .. }) => Err(e),
            Some(r) => Ok(Done {
                output: r.output,
                text: r.text,
                usage: None,
            }),
            None => Ok(Done::output(work.input.clone())),
        }
    }
}

/// `expected` is a fragment of `actual`: every key it names matches; a
/// number expected where a list stands compares with the list's length.
fn fragment_matches(expected: &Value, actual: &Value, path: &str, errors: &mut Vec<String>) {
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

async fn run_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case: Case = serde_yaml::from_str(&text).map_err(|e| format!("bad case: {e}"))?;
    let flow = CompiledFlow::new(&case.flow).map_err(|p| format!("flow refused: {p:?}"))?;
    let executor = Arc::new(Scripted {
        replies: Mutex::new(
            case.replies
                .into_iter()
                .map(|(k, v)| (k, v.into()))
                .collect(),
        ),
        received: Mutex::new(HashMap::new()),
        feedback: Mutex::new(HashMap::new()),
    });
    let mut approver = CommandLineApprover::new(&case.decide)?;
    let mut progress = Progress::new(true);
    let state = run_flow(
        &flow,
        case.input,
        executor.clone(),
        &mut approver,
        &mut progress,
        std::future::pending(),
    )
    .await;
    let mut actual = serde_json::to_value(&state).map_err(|e| e.to_string())?;
    let received = executor.received.lock().unwrap().clone();
    let feedback = executor.feedback.lock().unwrap().clone();
    actual["received"] = serde_json::to_value(&received).unwrap_or_default();
    actual["feedback"] = serde_json::to_value(&feedback).unwrap_or_default();
    let mut errors = Vec::new();
    fragment_matches(&case.expect, &actual, "", &mut errors);
    for (step, inputs) in &case.received {
        let got = received.get(step).cloned().unwrap_or_default();
        fragment_matches(
            &Value::from(inputs.clone()),
            &Value::from(got),
            &format!("received.{step}"),
            &mut errors,
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        let record = serde_json::to_string_pretty(&actual).unwrap_or_default();
        Err(format!("{}\n--- record ---\n{record}", errors.join("\n")))
    }
}

#[tokio::test]
async fn conformance_suite() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("suite dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for file in &files {
        if let Err(e) = run_case(file).await {
            failures.push(format!("== {}\n{e}", file.display()));
        }
    }
    assert!(files.len() >= 10, "the suite has {} cases", files.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    println!("{} conformance cases passed", files.len());
}
