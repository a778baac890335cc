//! Every flow in `examples/` applied with kubectl and run with `kubectl
//! create` on the cluster, by `coxswain controller` started as a process;
//! each run ends as `coxswain run` ends the same flow on this machine.
//! The agent examples need the real model server (`e2e/model/up`), so they
//! are `#[ignore]`d and CI runs them in its model-server step.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use coxswain_e2e::{Setup, coxswain_bin, flow, has_text, workspace_root};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(180);

/// `kubectl apply -f examples/FILE` and `kubectl create` of a Run of it.
fn start(c: &Setup, file: &str, input: &Value) -> String {
    let path = workspace_root().join("examples").join(file);
    c.kubectl
        .run(&["apply", "-n", c.ns(), "-f", &path.to_string_lossy()])
        .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", c.logs()));
    c.create_run(file.trim_end_matches(".yaml"), input.clone())
}

/// The status of `run` once its phase is one of `phases`.
async fn wait(c: &Setup, run: &str, phases: &[&str]) -> Value {
    c.wait_phase(run, phases, BOUND).await["status"].clone()
}

/// The status of a Run of `examples/FILE` with `input` once it has ended
/// (`Succeeded` or `Failed`).
async fn ended(c: &Setup, file: &str, input: &Value) -> Value {
    let run = start(c, file, input);
    wait(c, &run, &["Succeeded", "Failed"]).await
}

/// An Approval's decision, patched as a person makes it.
fn decide(c: &Setup, approval: &str, patch: Value) {
    c.merge_patch("approval", approval, &patch.to_string());
}

/// What `coxswain run FILE --output json` records on this machine.
fn local_record(file: &Path, input: &Value, extra: &[&str]) -> Value {
    let out = Command::new(coxswain_bin().expect("the coxswain binary"))
        .arg("run")
        .arg(file)
        .args(["--output", "json", "--quiet", "--input", &input.to_string()])
        .args(extra)
        .output()
        .expect("coxswain run");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "coxswain run {}: {e}\n{}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Each step's status, exit and output, for comparing two records of one flow.
fn outline(record: &Value) -> Value {
    let mut steps = serde_json::Map::new();
    for (key, step) in record["steps"].as_object().cloned().unwrap_or_default() {
        steps.insert(
            key,
            json!({
                "status": step["status"],
                "exit": step["exit"],
                "attempts": step["attempts"].as_array().map(Vec::len),
                "parts": step["parts"].as_array().map(Vec::len),
            }),
        );
    }
    json!({"phase": record["phase"], "steps": steps})
}

/// The run's result: its computed output, or the output of `outputFrom`.
fn result(record: &Value) -> Value {
    match record["outputFrom"].as_str() {
        Some(step) => record["steps"][step]["output"].clone(),
        None => record["output"].clone(),
    }
}

#[tokio::test]
async fn the_script_examples_end_on_the_cluster_as_they_end_locally() {
    let c = Setup::new(&[]).await;
    let examples = [
        (
            "hello.yaml",
            json!({"names": ["Ada", "Grace", "Linus"], "loud": true}),
        ),
        ("failures.yaml", json!({})),
        ("digest.yaml", json!({"repo": "coxswain"})),
    ];
    let runs: Vec<(String, &str, Value)> = examples
        .iter()
        .map(|(file, input)| (start(&c, file, input), *file, input.clone()))
        .collect();
    for (run, file, input) in runs {
        let on_cluster = wait(&c, &run, &["Succeeded", "Failed", "Cancelled"]).await;
        let local = local_record(&workspace_root().join("examples").join(file), &input, &[]);
        assert_eq!(
            outline(&on_cluster),
            outline(&local),
            "{file}: cluster {on_cluster:#}\nlocal {local:#}"
        );
        assert_eq!(result(&on_cluster), result(&local), "{file}");
    }
}

#[tokio::test]
async fn a_failing_script_fails_the_run_with_its_stderr() {
    let c = Setup::new(&[]).await;
    c.apply(&flow(
        "broken",
        r#"
  steps:
    - key: build
      script:
        source: |
          echo "compiling" 
          echo "error: the widget is missing" >&2
          exit 2
"#,
    ));
    let run = json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": "broken-1"}, "spec": {"flowRef": {"name": "broken"}},
    });
    c.kubectl
        .run_with_stdin(&["create", "-n", c.ns(), "-f", "-"], Some(&run.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let status = wait(&c, "broken-1", &["Succeeded", "Failed"]).await;
    assert_eq!(status["phase"], "Failed", "{status:#}");
    let step_error = &status["steps"]["build"]["error"];
    assert_eq!(step_error["code"], "script.failed", "{status:#}");
    assert!(
        has_text(&step_error["message"], "error: the widget is missing"),
        "{step_error}"
    );
    assert!(
        has_text(&status["error"]["message"], "the widget is missing"),
        "{status:#}"
    );
}

/// The model server's base URL: `COXSWAIN_MODEL_URL` (CI exports it), else
/// the one `e2e/model/up` starts or finds.
fn model_url() -> String {
    if let Ok(url) = std::env::var("COXSWAIN_MODEL_URL") {
        return url;
    }
    let up = workspace_root().join("e2e/model/up");
    let out = Command::new(&up).output().expect("e2e/model/up");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("COXSWAIN_AGENT_BASE_URL="))
        .map(String::from)
        .unwrap_or_else(|| {
            panic!(
                "these tests need a model server: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[tokio::test]
#[ignore = "needs the real model server (e2e/model/up); CI runs it"]
async fn the_agent_examples_run_on_the_cluster_with_approvals_patched_by_kubectl() {
    let url = model_url();
    let c = Setup::new(&["--agent-url", &url]).await;

    // review: a draft, sent back once with instructions, then approved.
    let run = start(
        &c,
        "review.yaml",
        &json!({"brief": "Why we moved our build tool to Rust"}),
    );
    let waiting = wait(&c, &run, &["Waiting", "Failed"]).await;
    assert_eq!(waiting["phase"], "Waiting", "{waiting:#}");
    let first = c.kubectl.approval_name(c.ns(), &run, "review", 1);
    let shown = c.get("approval", &first);
    assert!(shown["spec"]["show"]["draft"].is_object(), "{shown:#}");
    decide(
        &c,
        &first,
        json!({"spec": {"decision": "changes", "feedback": "Make the title shorter."}}),
    );
    let second = c.kubectl.approval_name(c.ns(), &run, "review", 2);
    c.wait_exists("approval", &second, BOUND).await;
    decide(&c, &second, json!({"spec": {"decision": "approve"}}));
    let done = wait(&c, &run, &["Succeeded", "Failed"]).await;
    assert_eq!(done["phase"], "Succeeded", "{done:#}");
    let draft = &done["steps"]["draft"];
    let attempts = draft["attempts"].as_array().cloned().unwrap_or_default();
    assert!(attempts.len() >= 2, "{draft:#}");
    assert_eq!(
        attempts.last().map(|a| a["feedback"].clone()),
        Some(json!("Make the title shorter."))
    );
    assert!(done["output"]["title"].is_string(), "{done:#}");
    assert_eq!(done["steps"]["publish"]["output"]["published"], true);

    // critique and critique-loop write about the same product.
    let product = json!({"product": "a kayak that folds into a backpack"});

    // critique: an agent critic decides; on `changes` the work goes back to
    // the writer with its instructions, until it approves or the send-back
    // limit ends the run, as it does locally.
    let done = ended(&c, "critique.yaml", &product).await;
    match done["phase"].as_str() {
        Some("Succeeded") => {
            assert_eq!(done["output"]["verdict"], "approve", "{done:#}");
            assert_eq!(done["steps"]["critic"]["exit"], "approve", "{done:#}");
        }
        _ => assert_eq!(
            done["error"]["code"], "workflow.send_back_limit",
            "{done:#}"
        ),
    }
    let sent_back = done["sendBacks"]["critic->write"].as_i64().unwrap_or(0);
    let writes = done["steps"]["write"]["attempts"]
        .as_array()
        .map_or(0, Vec::len) as i64;
    assert!(
        writes > sent_back,
        "one more write than send-backs: {done:#}"
    );

    // critique-loop: the same as a loop; the critic approves within three
    // passes or the loop's limit ends the run.
    let done = ended(&c, "critique-loop.yaml", &product).await;
    match done["phase"].as_str() {
        Some("Succeeded") => assert_eq!(done["output"]["approved"], true, "{done:#}"),
        _ => assert_eq!(done["error"]["code"], "workflow.loop_limit", "{done:#}"),
    }

    // actions: a list output fanned out to one reminder per item.
    let done = ended(&c, "actions.yaml", &json!({"notes": "Ana sends the budget by Friday. Bo fixes the login bug before the release."})).await;
    assert_eq!(done["phase"], "Succeeded", "{done:#}");
    let items = done["output"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let reminders = done["output"]["reminders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), reminders.len(), "{done:#}");
    for (item, reminder) in items.iter().zip(&reminders) {
        assert_eq!(reminder["output"]["to"]["data"], item["owner"], "{done:#}");
    }
}
