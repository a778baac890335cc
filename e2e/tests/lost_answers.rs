//! What a write applied by the API server but whose answer was lost leaves
//! behind: the Run's status ahead of what the controller does after writing
//! it. The controller that wrote it saw an error and never did those acts;
//! the next reconcile (or the next controller) must still leave things
//! right. Each test builds that state with kubectl while no controller
//! runs, then starts one (`tests/faults.rs` makes such losses at random).

mod doubling;

use std::time::Duration;

use coxswain_e2e::{ControllerProcess, FaultPlan, FaultProxy, Kubectl, flow, wait_for};
use serde_json::{Value, json};

/// Generous bound for the controller to act (not a timing assertion).
const BOUND: Duration = Duration::from_secs(60);

/// A flow whose only step asks a person.
fn asking() -> String {
    flow(
        "asking",
        r#"
  steps:
    - key: ask
      approval:
        decisions: [approve, reject]
"#,
    )
}

#[tokio::test]
async fn an_answer_the_record_took_in_is_marked_consumed_when_its_write_lost_its_answer() {
    let (kubectl, ns) = coxswain_e2e::kubectl_and_namespace().await;
    let ns = ns.name();
    kubectl
        .apply(ns, &asking())
        .unwrap_or_else(|e| panic!("{e}"));
    let run = kubectl
        .create_run(ns, "asking", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let uid = kubectl.uid(ns, "run", &run);
    // The person answered attempt 1, and the status write that took the
    // answer in (and ended the run) was applied; its answer was lost, so
    // the Approval was never marked consumed.
    let approval = coxswain_k8s::names::approval(&run, &uid, "ask", 1);
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
        .merge_patch(
            ns,
            &["run", &run, "--subresource=status"],
            &record.to_string(),
        )
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
        json!({"consumed": true, "state": "taken"}),
        "the run took the answer in; the Approval must say so, not that it was closed unanswered"
    );
}

/// A person step asked twice: an unanswered attempt fails after `timeout`
/// (long enough for the test to act within the second attempt's).
fn asked_twice() -> String {
    flow(
        "asked-twice",
        r#"
  steps:
    - key: ask
      attempts: 2
      backoff: 1s
      timeout: 15s
      approval:
        decisions: [approve, reject]
"#,
    )
}

#[tokio::test]
async fn an_attempt_that_ran_out_has_its_approval_closed_when_the_write_that_ended_it_lost_its_answer()
 {
    let (kubectl, ns) = coxswain_e2e::kubectl_and_namespace().await;
    let ns = ns.name();
    kubectl
        .apply(ns, &asked_twice())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut controller = ControllerProcess::for_namespace(ns, &[])
        .await
        .expect("controller");
    let run = kubectl
        .create_run(ns, "asked-twice", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let (first, second) = (
        kubectl.approval_name(ns, &run, "ask", 1),
        kubectl.approval_name(ns, &run, "ask", 2),
    );
    let get = |name: &str| -> Option<Value> {
        kubectl
            .run(&["get", "approval", name, "-n", ns, "-o", "json"])
            .ok()
            .and_then(|out| serde_json::from_str(&out).ok())
    };
    // Nobody answers the first attempt; it runs out and the second is asked.
    wait_for("the second attempt's Approval", BOUND, || async {
        Ok(get(&second).map(drop))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", controller.log_text()));
    assert!(
        !get(&first).expect("the first Approval")["status"]["closed"].is_null(),
        "the controller closes the Approval of an attempt that ran out"
    );

    // What the status write that ended attempt 1 and asked attempt 2
    // leaves when it was applied but its answer lost: the status says
    // attempt 2 waits, and neither act after the write was done.
    controller.kill();
    kubectl
        .run(&["delete", "approval", &second, "-n", ns])
        .unwrap_or_else(|e| panic!("{e}"));
    kubectl
        .merge_patch(
            ns,
            &["approval", &first, "--subresource=status"],
            r#"{"status":{"closed":null}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(get(&first).expect("the first Approval")["status"]["closed"].is_null());

    controller.restart().expect("controller restarted");
    let asked = wait_for("the second attempt's Approval again", BOUND, || async {
        Ok(get(&second))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", controller.log_text()));
    let phase = kubectl
        .run(&[
            "get",
            "run",
            &run,
            "-n",
            ns,
            "-o",
            "jsonpath={.status.phase}",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(phase, "Waiting", "the second attempt still waits: {asked}");
    // Settled before the new one is asked, so an answer is never written
    // where it would not be read.
    let first = get(&first).expect("the first Approval");
    assert_eq!(
        first["status"]["closed"],
        "attempt 1 of step ask ended (nobody answered within 15s) before an answer was taken in",
        "{first:#}\ncontroller log:\n{}",
        controller.log_text()
    );
}

/// Every write the controller makes is applied and its answer lost (a 500,
/// a 503 or a dropped connection): the run still ends right with each call
/// made once, and every transition is told in the Run's Events — the
/// controller reads a failed status write back and, finding its status
/// there, goes on as if it had been answered.
#[tokio::test]
async fn every_transition_is_told_when_every_write_loses_its_answer() {
    let (addr, doubler, kubectl, ns) = doubling::start().await;
    let ns = ns.name();
    let plan = FaultPlan {
        lost_response: 1.0,
        ..FaultPlan::seeded(7).scaled(0.0)
    };
    let proxy = FaultProxy::start(plan).await.expect("fault proxy");
    let controller =
        ControllerProcess::for_namespace_via(proxy.kubeconfig(), ns, &[]).expect("controller");
    let flow = flow(
        "twice",
        &format!(
            r#"
  steps:
    - key: first
      http:
        url: "http://{addr}/double"
        query: [{{name: num, value: "{{{{input.json.num}}}}"}}]
    - key: second
      http:
        url: "http://{addr}/double"
        query: [{{name: num, value: "{{{{first.json.body.n}}}}"}}]
    - key: big
      condition: {{when: $steps.second.output.body.n > 6}}
"#
        ),
    );
    kubectl.apply(ns, &flow).unwrap_or_else(|e| panic!("{e}"));
    let run = kubectl
        .create_run(ns, "twice", &json!({"num": 3}))
        .unwrap_or_else(|e| panic!("{e}"));
    let fail = |what: String| -> ! {
        panic!(
            "{what}\n{}\ncontroller log:\n{}",
            proxy.tally().report(),
            controller.log_text()
        )
    };
    let done = kubectl
        .wait_run(ns, &run, &["Succeeded", "Failed", "Cancelled"], BOUND)
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    let steps = &done["status"]["steps"];
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    assert_eq!(steps["second"]["output"]["body"]["n"], 12);
    assert_eq!(steps["big"]["exit"], "true");
    assert_eq!((doubler.calls(3).len(), doubler.calls(6).len()), (1, 1));

    let lost: usize = proxy
        .tally()
        .requests()
        .iter()
        .filter(|s| s.kind.resource == "runs/status" && s.fault.is_some())
        .count();
    assert!(
        lost >= 3,
        "the test proves nothing: {lost} run writes lost their answer"
    );

    // Events are sent after the write, in the background: wait for the last.
    let wanted = [
        "step first: completed",
        "step second: completed",
        "step big: completed, exit true",
        "Succeeded",
    ];
    let notes = wait_for("every transition's Event", BOUND, || async {
        let notes: Vec<String> = kubectl
            .events(ns, &format!("involvedObject.name={run}"))
            .iter()
            .map(|e| format!("{} {}", e["reason"], e["message"]))
            .collect();
        let all = notes.join("\n");
        Ok(wanted.iter().all(|w| all.contains(w)).then_some(all))
    })
    .await
    .unwrap_or_else(|e| fail(e.to_string()));
    assert!(notes.contains("RunSucceeded"), "{notes}");
}
