//! What a write applied by the API server but whose answer was lost leaves
//! behind: the Run's record ahead of what the controller does after writing
//! it. The controller that wrote it saw an error and never did those acts;
//! the next reconcile (or the next controller) must still leave things
//! right. Each test builds that state with kubectl while no controller
//! runs, then starts one (`tests/faults.rs` makes such losses at random).

use std::time::Duration;

use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace, wait_for};
use serde_json::{Value, json};

/// Generous bound for the controller to act (not a timing assertion).
const BOUND: Duration = Duration::from_secs(60);

/// A flow whose only step asks a person.
const FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: asking}
spec:
  steps:
    - key: ask
      approval:
        decisions: [approve, reject]
"#;

#[tokio::test]
async fn an_answer_the_record_took_in_is_marked_consumed_when_its_write_lost_its_answer() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let ns = ns.name();
    kubectl.apply(ns, FLOW).unwrap_or_else(|e| panic!("{e}"));
    let run = kubectl
        .create_run(ns, "asking", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let uid = kubectl
        .run(&[
            "get",
            "run",
            &run,
            "-n",
            ns,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    // The person answered attempt 1, and the status write that took the
    // answer in (and ended the run) was applied; its answer was lost, so
    // the Approval was never marked consumed.
    let approval = format!("{run}-ask-1");
    let asked = json!({
        "apiVersion": "coxswain.dev/v1alpha1",
        "kind": "Approval",
        "metadata": {
            "name": approval,
            "labels": {"coxswain.dev/run-uid": uid},
            "ownerReferences": [{
                "apiVersion": "coxswain.dev/v1alpha1",
                "kind": "Run",
                "name": run,
                "uid": uid,
                "controller": true,
            }],
        },
        "spec": {
            "run": run,
            "step": "ask",
            "attempt": 1,
            "mode": "review",
            "decisions": ["approve", "reject"],
            "decision": "approve",
        },
    });
    kubectl
        .apply(ns, &asked.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let now = "2026-01-01T00:00:00Z";
    let record = json!({"status": {
        "phase": "Succeeded",
        "startedAt": now,
        "finishedAt": now,
        "steps": {"ask": {
            "status": "completed",
            "exit": "approve",
            "output": {"decision": "approve"},
            "attempts": [{
                "number": 1,
                "status": "completed",
                "startedAt": now,
                "finishedAt": now,
                "output": {"decision": "approve"},
            }],
        }},
    }});
    kubectl
        .run(&[
            "patch",
            "run",
            &run,
            "-n",
            ns,
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            &record.to_string(),
        ])
        .unwrap_or_else(|e| panic!("{e}"));

    let controller = ControllerProcess::for_namespace(ns, &[])
        .await
        .expect("controller");
    let status = |kubectl: &Kubectl| -> Value {
        kubectl.json(&["get", "approval", &approval, "-n", ns, "-o", "json"])["status"].clone()
    };
    let settled = wait_for("the Approval settled", BOUND, || async {
        let status = status(&kubectl);
        Ok((status["consumed"] == true || !status["closed"].is_null()).then_some(status))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", controller.log_text()));
    assert_eq!(
        settled,
        json!({"consumed": true}),
        "the run took the answer in; the Approval must say so, not that it was closed unanswered"
    );
}
