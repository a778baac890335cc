//! Every flow in `examples/` applied with kubectl and run with `kubectl
//! create` on the cluster, by `coxswain controller` started as a process;
//! each run ends as `coxswain run` ends the same flow on this machine.
//! The agent examples need the real model server (`e2e/model/up`), so they
//! are `#[ignore]`d and CI runs them in its model-server step.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use coxswain_e2e::{
    ControllerProcess, Kubectl, TestNamespace, coxswain_bin, wait_for, workspace_root,
};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(180);

struct Cluster {
    ns: TestNamespace,
    kubectl: Kubectl,
    controller: ControllerProcess,
}

async fn cluster(extra: &[&str]) -> Cluster {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let controller = ControllerProcess::for_namespace(ns.name(), extra)
        .await
        .expect("controller");
    Cluster {
        ns,
        kubectl,
        controller,
    }
}

impl Cluster {
    fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl
            .run(args)
            .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.controller.log_text()))
    }

    /// `kubectl apply -f examples/FILE` and `kubectl create` of a Run of it.
    fn start(&self, file: &str, input: &Value) -> String {
        let path = workspace_root().join("examples").join(file);
        self.kubectl(&["apply", "-n", self.ns.name(), "-f", &path.to_string_lossy()]);
        let flow = file.trim_end_matches(".yaml");
        self.kubectl
            .create_run(self.ns.name(), flow, input)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn run_status(&self, run: &str) -> Value {
        self.kubectl
            .json(&["get", "run", run, "-n", self.ns.name(), "-o", "json"])["status"]
            .clone()
    }

    async fn wait(&self, run: &str, phases: &[&str]) -> Value {
        match self
            .kubectl
            .wait_run(self.ns.name(), run, phases, BOUND)
            .await
        {
            Ok(object) => object["status"].clone(),
            Err(e) => panic!(
                "{e}\nrun: {}\ncontroller log:\n{}",
                self.run_status(run),
                self.controller.log_text()
            ),
        }
    }

    fn decide(&self, approval: &str, patch: Value) {
        self.kubectl(&[
            "patch",
            "approval",
            approval,
            "-n",
            self.ns.name(),
            "--type",
            "merge",
            "-p",
            &patch.to_string(),
        ]);
    }
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
    let c = cluster(&[]).await;
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
        .map(|(file, input)| (c.start(file, input), *file, input.clone()))
        .collect();
    for (run, file, input) in runs {
        let on_cluster = c.wait(&run, &["Succeeded", "Failed", "Cancelled"]).await;
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
    let c = cluster(&[]).await;
    c.kubectl
        .run_with_stdin(
            &["apply", "-n", c.ns.name(), "-f", "-"],
            Some(
                r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: broken}
spec:
  steps:
    - key: build
      script:
        source: |
          echo "compiling" 
          echo "error: the widget is missing" >&2
          exit 2
"#,
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let run = json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": "broken-1"}, "spec": {"flowRef": {"name": "broken"}},
    });
    c.kubectl
        .run_with_stdin(
            &["create", "-n", c.ns.name(), "-f", "-"],
            Some(&run.to_string()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let status = c.wait("broken-1", &["Succeeded", "Failed"]).await;
    assert_eq!(status["phase"], "Failed", "{status:#}");
    let step_error = &status["steps"]["build"]["error"];
    assert_eq!(step_error["code"], "script.failed", "{status:#}");
    assert!(
        step_error["message"]
            .as_str()
            .is_some_and(|m| m.contains("error: the widget is missing")),
        "{step_error}"
    );
    assert!(
        status["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the widget is missing")),
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
    let c = cluster(&["--agent-url", &url]).await;

    // review: a draft, sent back once with instructions, then approved.
    let run = c.start(
        "review.yaml",
        &json!({"brief": "Why we moved our build tool to Rust"}),
    );
    let waiting = c.wait(&run, &["Waiting", "Failed"]).await;
    assert_eq!(waiting["phase"], "Waiting", "{waiting:#}");
    let first = c.kubectl.approval_name(c.ns.name(), &run, "review", 1);
    let shown = c
        .kubectl
        .json(&["get", "approval", &first, "-n", c.ns.name(), "-o", "json"]);
    assert!(shown["spec"]["show"]["draft"].is_object(), "{shown:#}");
    c.decide(
        &first,
        json!({"spec": {"decision": "changes", "feedback": "Make the title shorter."}}),
    );
    let second = c.kubectl.approval_name(c.ns.name(), &run, "review", 2);
    wait_for("the second review", BOUND, || async {
        Ok(c.kubectl
            .run(&["get", "approval", &second, "-n", c.ns.name()])
            .ok()
            .map(drop))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", c.run_status(&run), c.controller.log_text()));
    c.decide(&second, json!({"spec": {"decision": "approve"}}));
    let done = c.wait(&run, &["Succeeded", "Failed"]).await;
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

    // critique: an agent critic decides; on `changes` the work goes back to
    // the writer with its instructions, until it approves or the send-back
    // limit ends the run, as it does locally.
    let run = c.start(
        "critique.yaml",
        &json!({"product": "a kayak that folds into a backpack"}),
    );
    let done = c.wait(&run, &["Succeeded", "Failed"]).await;
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
    let run = c.start(
        "critique-loop.yaml",
        &json!({"product": "a kayak that folds into a backpack"}),
    );
    let done = c.wait(&run, &["Succeeded", "Failed"]).await;
    match done["phase"].as_str() {
        Some("Succeeded") => assert_eq!(done["output"]["approved"], true, "{done:#}"),
        _ => assert_eq!(done["error"]["code"], "workflow.loop_limit", "{done:#}"),
    }

    // actions: a list output fanned out to one reminder per item.
    let run = c.start(
        "actions.yaml",
        &json!({"notes": "Ana sends the budget by Friday. Bo fixes the login bug before the release."}),
    );
    let done = c.wait(&run, &["Succeeded", "Failed"]).await;
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
