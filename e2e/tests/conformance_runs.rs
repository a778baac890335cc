//! The conformance cases (`controller/tests/conformance/*.yaml`) run as Runs
//! on the cluster by `coxswain controller`, with approvals patched through
//! kubectl, and their records checked against the same expectations.
//!
//! The cases script what each task step returns. On the cluster every agent,
//! script, http and message step becomes a real script step, run as a Job,
//! whose program (`conformance_reply.py`) asks this test's reply server for
//! the case's next reply and prints it — a scripted failure is a script that
//! exits non-zero. So what differs from the in-process suite is only what a
//! script cannot show, and the expectations drop exactly that:
//! - a failure's code is always `script.failed` and its message the
//!   script's, which holds the scripted message: that is what is compared;
//! - token `usage` (only agents report it) and `text` apart from the output
//!   (a script's text is its stdout) are not compared;
//! - `received`/`feedback` (what the in-process executor saw) are not
//!   compared; the status's own `attempts[].feedback` still are.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::routing::post;
use coxswain_e2e::{ControllerProcess, Kubectl, workspace_root};
use serde_json::{Value, json};

use coxswain_test_support::conformance_driver::{self as driver, Case, Reply};

const BOUND: Duration = Duration::from_secs(240);

/// Error codes executors fail with: on the cluster every task step is a
/// script, so these become `script.failed`.
const EXECUTOR_CODES: [&str; 5] = [
    "script.failed",
    "http.failed",
    "message.failed",
    "agent.failed",
    "agent.unavailable",
];

/// The cases' replies, by case and step (or `step/part`), in order.
type Replies = Arc<Mutex<HashMap<String, HashMap<String, VecDeque<Reply>>>>>;

async fn serve_replies(replies: Replies) -> SocketAddr {
    let app = axum::Router::new()
        .route("/case/{case}", post(reply))
        .with_state(replies);
    coxswain_e2e::serve_on_loopback(app).await
}

/// The next reply for the step that asks; with none left, the step echoes
/// its input (as the in-process suite's executor does).
async fn reply(
    State(replies): State<Replies>,
    UrlPath(case): UrlPath<String>,
    Json(asked): Json<Value>,
) -> Json<Value> {
    let step = asked["step"].as_str().unwrap_or_default().to_string();
    let part = asked["part"].as_str().unwrap_or_default();
    let next = {
        let mut all = replies.lock().expect("lock");
        let queues = all.entry(case).or_default();
        let key = if !part.is_empty() && queues.contains_key(&format!("{step}/{part}")) {
            format!("{step}/{part}")
        } else {
            step
        };
        queues.get_mut(&key).and_then(VecDeque::pop_front)
    };
    Json(match next {
        Some(Reply {
            error: Some(error), ..
        }) => json!({"stdout": "", "stderr": error.message, "exit": 1}),
        Some(reply) => json!({"stdout": json!({"data": reply.output}).to_string(), "exit": 0}),
        None => json!({"stdout": json!({"data": asked["input"]}).to_string(), "exit": 0}),
    })
}

/// The case's flow with every task step made a script step asking the
/// reply server.
fn on_cluster(flow: &Value, reply_url: &str) -> Value {
    let program = workspace_root().join("e2e/tests/conformance_reply.py");
    let mut flow = flow.clone();
    rewrite(
        &mut flow,
        &format!("exec /usr/bin/python3 {}", program.display()),
        reply_url,
    );
    flow
}

fn rewrite(value: &mut Value, source: &str, reply_url: &str) {
    match value {
        Value::Object(map) => {
            let task = ["agent", "script", "http", "message"]
                .into_iter()
                .find(|k| map.contains_key(*k));
            if let Some(kind) = task {
                map.remove(kind);
                map.insert(
                    "script".into(),
                    json!({"source": source, "env": [{"name": "REPLY_URL", "value": reply_url}]}),
                );
            }
            for v in map.values_mut() {
                rewrite(v, source, reply_url);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite(v, source, reply_url)),
        _ => {}
    }
}

/// The case's expectations without what a script cannot show (see the
/// module's doc).
fn expectations(expect: &Value) -> Value {
    let mut expect = expect.clone();
    if let Some(map) = expect.as_object_mut() {
        map.remove("received");
        map.remove("feedback");
    }
    normalize(&mut expect);
    expect
}

/// Where the in-process drivers fail a run no one can answer
/// (`workflow.no_answer`), a run on a cluster waits for a person; this test
/// cancels it once the case's answers run out, so it ends `Cancelled`.
fn no_answer_is_cancelled(expect: &mut Value) {
    if expect["error"]["code"] == "workflow.no_answer"
        && let Some(map) = expect.as_object_mut()
    {
        map.remove("error");
        map.insert("phase".into(), json!("Cancelled"));
    }
}

fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("usage");
            map.remove("text");
            if let Some(error) = map.get_mut("error").and_then(Value::as_object_mut) {
                script_failure(error);
            }
            map.values_mut().for_each(normalize);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// An executor's failure as a script's: code `script.failed`, and the
/// scripted message found inside the script's own (`the script exited with
/// status 1: MESSAGE`), also where a run's error wraps a step's.
fn script_failure(error: &mut serde_json::Map<String, Value>) {
    let code = error.get("code").and_then(Value::as_str);
    if code.is_some_and(|c| !EXECUTOR_CODES.contains(&c)) {
        return;
    }
    if code.is_some() {
        error.insert("code".into(), json!("script.failed"));
    }
    if let Some(message) = error.get("message").and_then(Value::as_str) {
        let message = message.trim_start_matches('~');
        let scripted = message
            .rsplit_once("failed: ")
            .map_or(message, |(_, tail)| tail);
        error.insert("message".into(), json!(format!("~{scripted}")));
    }
}

/// Answers for each step, in order, as `coxswain run --decide` takes them.
fn answers(case: &Case) -> HashMap<String, VecDeque<String>> {
    let mut by_step: HashMap<String, VecDeque<String>> = HashMap::new();
    for answer in &case.decide {
        if let Some((step, text)) = answer.split_once('=') {
            by_step
                .entry(step.to_string())
                .or_default()
                .push_back(text.to_string());
        }
    }
    by_step
}

/// The merge patch a person writes for `answer` on an Approval in `mode`.
fn answer_patch(mode: &str, answer: &str) -> Value {
    if mode == "entry" {
        let response: Value = serde_json::from_str(answer).unwrap_or(Value::Null);
        return json!({"spec": {"response": response}});
    }
    match answer.split_once(':') {
        Some((decision, feedback)) => {
            json!({"spec": {"decision": decision.trim(), "feedback": feedback.trim()}})
        }
        None => json!({"spec": {"decision": answer.trim()}}),
    }
}

struct Running {
    name: String,
    run: String,
    case: Case,
    answers: HashMap<String, VecDeque<String>>,
    /// The last answer sent to each Approval (its decision).
    answered: HashMap<String, String>,
    cancelled: bool,
}

#[tokio::test]
async fn every_conformance_case_runs_on_the_cluster_with_the_same_record() {
    let replies: Replies = Arc::default();
    let addr = serve_replies(replies.clone()).await;
    let (kubectl, ns) = coxswain_e2e::kubectl_and_namespace().await;
    let controller = ControllerProcess::for_namespace(ns.name(), &[])
        .await
        .expect("controller");

    let mut running = Vec::new();
    for file in driver::case_files() {
        let case = driver::read_case(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let name = format!("case-{}", &stem[..2]);
        replies.lock().expect("lock").insert(
            name.clone(),
            case.replies
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                .collect(),
        );
        let flow_spec = serde_json::to_value(&case.flow).expect("flow as JSON");
        let flow = json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Flow",
            "metadata": {"name": name},
            "spec": on_cluster(&flow_spec, &format!("http://{addr}/case/{name}")),
        });
        kubectl
            .run_with_stdin(
                &["apply", "-n", ns.name(), "-f", "-"],
                Some(&flow.to_string()),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name},
            "spec": {"flowRef": {"name": name}, "input": case.input},
        });
        kubectl
            .run_with_stdin(
                &["create", "-n", ns.name(), "-f", "-"],
                Some(&run.to_string()),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        running.push(Running {
            name: name.clone(),
            run: name,
            answers: answers(&case),
            case,
            answered: HashMap::new(),
            cancelled: false,
        });
    }

    let deadline = tokio::time::Instant::now() + BOUND;
    let finished = loop {
        let mut done = HashMap::new();
        for r in running.iter_mut() {
            let object = kubectl.json(&["get", "run", &r.run, "-n", ns.name(), "-o", "json"]);
            let phase = object["status"]["phase"].as_str().unwrap_or_default();
            if ["Succeeded", "Failed", "Cancelled"].contains(&phase) {
                done.insert(r.name.clone(), object["status"].clone());
                continue;
            }
            answer_approvals(&kubectl, ns.name(), r);
        }
        if done.len() == running.len() {
            break done;
        }
        if tokio::time::Instant::now() > deadline {
            let open: Vec<&str> = running
                .iter()
                .map(|r| r.name.as_str())
                .filter(|n| !done.contains_key(*n))
                .collect();
            panic!(
                "runs not ended after {BOUND:?}: {open:?}\ncontroller log:\n{}",
                controller.log_text()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    let mut failures = Vec::new();
    for r in &running {
        let mut errors = Vec::new();
        let mut expect = expectations(&r.case.expect);
        if r.cancelled {
            no_answer_is_cancelled(&mut expect);
        }
        // An expectation holds when the status shows it as stored (each
        // value once: `outputFromParts`, an output kept as its text) or as
        // read back (every value rebuilt).
        let (mut stored, mut read) = (Vec::new(), Vec::new());
        driver::fragment_matches(&expect, &finished[&r.name], "", &mut stored);
        driver::fragment_matches(&expect, &as_read(&finished[&r.name]), "", &mut read);
        errors.extend(stored.into_iter().filter(|e| read.contains(e)));
        if !errors.is_empty() {
            failures.push(format!(
                "{}:\n  {}\n  record: {}",
                r.name,
                errors.join("\n  "),
                finished[&r.name]
            ));
        }
    }
    driver::report(running.len(), &failures);
}

/// The record as every reader gets it (the viewer, the plugin, `kubectl
/// coxswain get`): read as a `RunStatus`, which rebuilds each value the
/// stored form keeps once (an output that is its text, a text that is its
/// output, a gathered output, a latest attempt's output).
fn as_read(status: &Value) -> Value {
    let read: coxswain_core::api::RunStatus = serde_json::from_value(status.clone())
        .unwrap_or_else(|e| panic!("the record reads as a RunStatus ({e}): {status}"));
    // The steps written one by one, not in the stored form that keeps
    // each value once.
    let mut whole = status.clone();
    whole["steps"] = serde_json::to_value(&read.steps).expect("steps write as JSON");
    whole
}

/// Answers each Approval of the run that waits, with the case's next answer
/// for its step. An answer the controller refused (it names the refused
/// decision in the Approval's status) is followed by the next one, as the
/// in-process driver asks again; with none left, the run is cancelled (as
/// that driver does when its approver has nothing to say).
fn answer_approvals(kubectl: &Kubectl, ns: &str, r: &mut Running) {
    let list = kubectl.json(&["get", "approvals", "-n", ns, "-o", "json"]);
    let empty = Vec::new();
    for approval in list["items"].as_array().unwrap_or(&empty) {
        let name = approval["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let spec = &approval["spec"];
        if spec["run"] != r.run.as_str() || r.cancelled {
            continue;
        }
        let refused = approval["status"]["refused"].as_str().unwrap_or_default();
        match r.answered.get(&name) {
            None => {}
            Some(last) if !refused.is_empty() && refused.contains(last.as_str()) => {}
            Some(_) => continue,
        }
        let step = spec["step"].as_str().unwrap_or_default();
        let mode = spec["mode"].as_str().unwrap_or("review");
        let (kind, target, patch) = match r.answers.get_mut(step).and_then(VecDeque::pop_front) {
            Some(answer) => {
                let sent = answer
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                r.answered.insert(name.clone(), sent);
                ("approval", name, answer_patch(mode, &answer))
            }
            None => {
                r.cancelled = true;
                ("run", r.run.clone(), json!({"spec": {"cancel": true}}))
            }
        };
        kubectl
            .run(&[
                "patch",
                kind,
                &target,
                "-n",
                ns,
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ])
            .unwrap_or_else(|e| panic!("{}: {e}", r.name));
    }
}
