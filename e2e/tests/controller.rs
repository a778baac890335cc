//! `coxswain controller` started as a process against the real API server,
//! driven with the real kubectl as people drive it: flows applied, Runs
//! created, Approvals patched, runs cancelled, flows edited mid-run.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use coxswain_e2e::{ControllerProcess, Setup, flow, has_text, wait_for, words};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(90);

/// A local HTTP server that answers `GET /n` with a count of the calls so
/// far, and remembers each call's `Idempotency-Key`.
#[derive(Clone, Default)]
struct Counter {
    keys: Arc<Mutex<Vec<String>>>,
}

impl Counter {
    /// Records a call's `Idempotency-Key`; returns how many calls came so far.
    fn count(&self, headers: &HeaderMap) -> usize {
        let key = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut keys = self.keys.lock().expect("lock");
        keys.push(key);
        keys.len()
    }
}

async fn serve_counter() -> (SocketAddr, Counter) {
    let counter = Counter::default();
    let app = axum::Router::new()
        .route(
            "/n",
            get(|State(c): State<Counter>, headers: HeaderMap| async move {
                axum::Json(json!({"n": c.count(&headers)}))
            }),
        )
        .route(
            "/first-slow",
            get(|State(c): State<Counter>, headers: HeaderMap| async move {
                if c.count(&headers) == 1 {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                }
                axum::Json(json!({"ok": true}))
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(600)).await;
                "late"
            }),
        )
        .with_state(counter.clone());
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (addr, counter)
}

async fn setup() -> Setup {
    Setup::new(&[]).await
}

fn review_flow(addr: SocketAddr) -> String {
    flow(
        "counted",
        &format!(
            r#"
  steps:
    - key: fetch
      http: {{url: "http://{addr}/n"}}
    - key: review
      approval: {{decisions: [approve, changes], show: [fetch]}}
      sendBack: [{{exit: changes, to: fetch}}]
    - key: big
      after: [review.approve]
      condition: {{when: $steps.fetch.output.body.n > 1}}
"#
        ),
    )
}

#[tokio::test]
async fn an_approval_patched_with_kubectl_moves_the_run_on_and_changes_redo_the_work() {
    let (addr, counter) = serve_counter().await;
    let s = setup().await;
    s.apply(&review_flow(addr));
    let run = s.create_run("counted", json!({}));

    let waiting = s.wait_phase(&run, &["Waiting"], BOUND).await;
    assert_eq!(waiting["status"]["steps"]["fetch"]["status"], "completed");
    let table = s
        .kubectl
        .run(&["get", "runs", "-n", s.ns.name()])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut lines = table.lines();
    assert_eq!(
        words(lines.next().unwrap_or_default()),
        ["NAME", "FLOW", "PHASE", "STEP", "PROGRESS", "AGE"],
        "{table}"
    );
    assert_eq!(
        words(lines.next().unwrap_or_default())[..5],
        [run.as_str(), "counted", "Waiting", "review", "1/3"],
        "{table}"
    );
    let approval = s.kubectl.approval_name(s.ns.name(), &run, "review", 1);
    let asked = s.get("approval", &approval);
    assert_eq!(asked["spec"]["run"], run.as_str());
    assert_eq!(asked["spec"]["decisions"], json!(["approve", "changes"]));
    assert_eq!(asked["spec"]["show"]["fetch"]["body"]["n"], 1, "{asked}");
    assert_eq!(
        asked["metadata"]["ownerReferences"][0]["name"],
        run.as_str()
    );

    // "changes" sends the work back: fetch runs again, a second approval is asked.
    s.merge_patch(
        "approval",
        &approval,
        r#"{"spec":{"decision":"changes","feedback":"Count again."}}"#,
    );
    let second = s.kubectl.approval_name(s.ns.name(), &run, "review", 2);
    s.wait_exists("approval", &second, BOUND).await;
    assert_eq!(s.get("approval", &approval)["status"]["consumed"], true);
    assert_eq!(s.get("approval", &approval)["status"]["state"], "taken");
    // The STATUS column says open from the write right after creation.
    wait_for("the second approval open", BOUND, || async {
        Ok((s.get("approval", &second)["status"]["state"] == "open").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));

    s.merge_patch("approval", &second, r#"{"spec":{"decision":"approve"}}"#);
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    let status = &done["status"];
    assert_eq!(status["phase"], "Succeeded", "{status}");
    assert_eq!(
        status["steps"]["fetch"]["attempts"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(status["steps"]["big"]["exit"], "true", "{status}");
    assert_eq!(status["flowGeneration"], 1);
    let keys = counter.keys.lock().expect("lock").clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_ne!(keys[0], keys[1], "each attempt has its own idempotency key");
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Succeeded" && c["status"] == "True"),
        "{conditions:?}"
    );
}

#[tokio::test]
async fn an_approval_whose_attempt_timed_out_is_closed_and_the_next_one_asked() {
    let s = setup().await;
    s.apply(&flow(
        "hurried",
        r#"
  steps:
    - key: review
      attempts: 2
      timeout: 2s
      approval: {decisions: [approve]}
"#,
    ));
    let run = s.create_run("hurried", json!({}));
    let first = s.kubectl.approval_name(s.ns.name(), &run, "review", 1);
    let second = s.kubectl.approval_name(s.ns.name(), &run, "review", 2);
    let closed = wait_for("the first approval closed", BOUND, || async {
        let approval = s
            .kubectl
            .run(&["get", "approval", &first, "-n", s.ns.name(), "-o", "json"])
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        Ok(approval.filter(|a| a["status"]["closed"].is_string()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    let reason = closed["status"]["closed"].as_str().unwrap_or_default();
    assert_eq!(closed["status"]["state"], "closed", "{closed}");
    assert!(
        reason.starts_with("attempt 1 of step review ended (")
            && reason.ends_with(") before an answer was taken in"),
        "{reason}"
    );
    // The second attempt was asked too; when it times out as well, the run
    // fails and the run's end closes it.
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["phase"], "Failed", "{done}");
    let last = wait_for("the second approval closed", BOUND, || async {
        let approval = s.get("approval", &second);
        Ok(approval["status"]["closed"].as_str().map(str::to_string))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert!(
        last.contains("ended Failed before an answer was taken in"),
        "{last}"
    );
}

#[tokio::test]
async fn a_run_pins_its_flow_and_cancel_stops_it() {
    let (addr, _counter) = serve_counter().await;
    let s = setup().await;
    let flow = flow(
        "slow",
        &format!(
            r#"
  steps:
    - key: wait
      http: {{url: "http://{addr}/slow"}}
    - key: after
      condition: {{when: "true"}}
"#
        ),
    );
    s.apply(&flow);
    let run = s.create_run("slow", json!({}));
    let running = s.wait_phase(&run, &["Running"], BOUND).await;
    assert_eq!(running["status"]["steps"]["wait"]["status"], "running");
    // The flow changes under the run: the run goes on with its snapshot.
    s.apply(&flow.replace("key: after", "key: later"));
    let digest = running["status"]["flowDigest"]
        .as_str()
        .expect("a pinned digest");
    let snapshot = s.get(
        "configmap",
        &coxswain_k8s::names::shared_flow_snapshot(digest),
    );
    assert!(has_text(&snapshot["data"]["flow.json"], "\"after\""));

    s.merge_patch("run", &run, r#"{"spec":{"cancel":true}}"#);
    let done = s
        .wait_phase(&run, &["Cancelled", "Failed", "Succeeded"], BOUND)
        .await;
    assert_eq!(done["status"]["phase"], "Cancelled", "{}", done["status"]);
    assert!(done["status"]["steps"].get("later").is_none());
    assert_eq!(done["status"]["flowGeneration"], 1);
}

#[tokio::test]
async fn a_controller_killed_mid_call_resumes_the_run_with_the_same_idempotency_key() {
    let (addr, counter) = serve_counter().await;
    let mut s = setup().await;
    s.apply(&flow(
        "resumed",
        &format!(
            r#"
  steps:
    - key: call
      http: {{url: "http://{addr}/first-slow"}}
"#
        ),
    ));
    let run = s.create_run("resumed", json!({}));
    wait_for("the first call", BOUND, || async {
        Ok((!counter.keys.lock().expect("lock").is_empty()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    s.controllers[0].kill();
    s.controllers[0] = ControllerProcess::for_namespace(s.ns.name(), &[])
        .await
        .expect("controller again");
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    let keys = counter.keys.lock().expect("lock").clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(
        keys[0], keys[1],
        "the repeat carries the same Idempotency-Key"
    );
    assert!(keys[0].ends_with("/call/1"), "{keys:?}");
    assert_eq!(
        done["status"]["steps"]["call"]["attempts"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

fn approval_flow() -> String {
    flow(
        "asked",
        r#"
  steps:
    - key: review
      approval: {decisions: [approve]}
    - key: after
      condition: {when: "true"}
"#,
    )
}

#[tokio::test]
async fn when_the_leader_is_killed_the_second_replica_finishes_the_run() {
    let lease = ["--lease-duration", "4s"];
    let mut s = Setup::new(&lease).await;
    let second = ControllerProcess::for_namespace(s.ns(), &lease)
        .await
        .expect("second replica");
    s.controllers.push(second);
    s.apply(&approval_flow());
    let run = s.create_run("asked", json!({}));
    s.wait_phase(&run, &["Waiting"], BOUND).await;
    let lease = s.get("lease", "coxswain-controller");
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let leader = s
        .controllers
        .iter()
        .position(|c| holder.ends_with(&format!("-{}", c.pid())))
        .unwrap_or_else(|| panic!("no replica holds the Lease: {lease}"));
    s.controllers[leader].kill();
    let standby = 1 - leader;
    s.merge_patch(
        "approval",
        &s.kubectl.approval_name(s.ns.name(), &run, "review", 1),
        r#"{"spec":{"decision":"approve"}}"#,
    );
    let done = wait_for("the standby to finish the run", BOUND, || async {
        let object = s.get("run", &run);
        Ok((object["status"]["phase"] == "Succeeded").then_some(object))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(done["status"]["steps"]["after"]["status"], "completed");
    let lease = s.get("lease", "coxswain-controller");
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| h.ends_with(&format!("-{}", s.controllers[standby].pid()))),
        "{lease}"
    );
}

#[tokio::test]
async fn deleting_a_run_removes_what_was_made_for_it() {
    let s = setup().await;
    s.apply(&flow(
        "built",
        r#"
  steps:
    - key: build
      script: {source: 'echo "{\"ok\": true}"'}
    - key: review
      approval: {decisions: [approve]}
"#,
    ));
    let run = s.create_run("built", json!({}));
    s.wait_phase(&run, &["Waiting"], BOUND).await;
    let selector = format!("coxswain.dev/run={run}");
    let children = || {
        let mut names = Vec::new();
        for kind in ["jobs", "configmaps", "approvals"] {
            names.extend(s.names(kind, &selector));
        }
        names
    };
    // No ConfigMap of its own: its flow snapshot is the one its flow
    // version's runs share, and its script's small inputs rode in the Job.
    // Any it had would be listed, and must go too.
    let made = children();
    for kind in ["job.batch/", "approval.coxswain.dev/"] {
        assert!(
            made.iter().any(|n| n.starts_with(kind)),
            "no {kind} among {made:?}"
        );
    }
    s.kubectl
        .run(&["delete", "run", &run, "-n", s.ns.name(), "--wait=true"])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for("the run's children to go", BOUND, || async {
        Ok(children().is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", children()));
}

#[tokio::test]
async fn cancelling_a_run_deletes_its_running_job() {
    let s = setup().await;
    s.apply(&flow(
        "sleepy",
        r#"
  steps:
    - key: nap
      script: {source: "echo 'taking a nap' >&2; sleep 600"}
"#,
    ));
    let run = s.create_run("sleepy", json!({}));
    s.wait_phase(&run, &["Running"], BOUND).await;
    let selector = format!("coxswain.dev/run={run}");
    // The line is in the pod's log before the cancel, so reading it then
    // must find it.
    wait_for("the script's line in kubectl logs", BOUND, || async {
        let logs = s
            .kubectl
            .run(&["logs", "-n", s.ns.name(), "-l", &selector, "-c", "step"])
            .unwrap_or_default();
        Ok(logs.contains("taking a nap").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let jobs = || s.names("jobs", &selector);
    wait_for("the Job", BOUND, || async {
        Ok((!jobs().is_empty()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    s.merge_patch("run", &run, r#"{"spec":{"cancel":true}}"#);
    let done = s
        .wait_phase(&run, &["Cancelled", "Failed", "Succeeded"], BOUND)
        .await;
    assert_eq!(done["status"]["phase"], "Cancelled", "{}", done["status"]);
    wait_for("the Job to go", BOUND, || async {
        Ok(jobs().is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", jobs()));
    // What the stopped script had written is kept in its attempt's status.
    let kept = wait_for("the stopped attempt's log in the record", BOUND, || async {
        let run = s.get("run", &run);
        let log = run["status"]["steps"]["nap"]["attempts"][0]["log"].clone();
        Ok((!log.is_null()).then_some(log))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {}", s.get("run", &run)["status"]));
    assert_eq!(kept["text"], "taking a nap\n", "{kept}");
}

#[tokio::test]
async fn a_scripts_lines_are_in_kubectl_logs_and_its_stderr_in_the_record() {
    let s = setup().await;
    s.apply(&flow(
        "chatty",
        r#"
  steps:
    - key: build
      script:
        source: |
          echo 'resolving 12 packages' >&2
          echo 'compiled in 3s' >&2
          echo '{"artifact": "app.tar"}'
    - key: check
      after: [build]
      script:
        source: |
          for i in $(seq 1 500); do echo "test $i passed" >&2; done
          echo 'test 501 FAILED: expected 2, got 3' >&2
          exit 1
"#,
    ));
    let run = s.create_run("chatty", json!({}));
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["phase"], "Failed", "{}", done["status"]);
    let steps = &done["status"]["steps"];
    assert_eq!(steps["build"]["output"], json!({"artifact": "app.tar"}));
    assert_eq!(
        steps["build"]["attempts"][0]["log"],
        json!({"text": "resolving 12 packages\ncompiled in 3s\n"}),
        "a succeeded attempt keeps its stderr"
    );
    let failed = &steps["check"]["attempts"][0]["log"];
    assert_eq!(failed["cut"], true, "{failed}");
    let text = failed["text"].as_str().unwrap_or_default();
    assert!(text.len() <= 4096, "{} bytes kept", text.len());
    assert!(text.starts_with("test "), "whole lines: {text:?}");
    assert!(
        text.ends_with("test 501 FAILED: expected 2, got 3\n"),
        "{text:?}"
    );

    // `kubectl logs` of the step's Job shows what the script printed, both
    // streams, and nothing of Coxswain's own result.
    let job = |step: &str| {
        let selector = format!("coxswain.dev/run={run},coxswain.dev/step={step}");
        s.names("jobs", &selector).join("\n")
    };
    let build = job("build");
    let logs = s
        .kubectl
        .run(&["logs", "-n", s.ns.name(), &build, "-c", "step"])
        .unwrap_or_else(|e| panic!("{e}"));
    // Each stream keeps its order; how the two interleave depends on which
    // pipe the node read first (a kubelet merges them the same way).
    let stderr: Vec<&str> = logs
        .lines()
        .filter(|l| *l != r#"{"artifact": "app.tar"}"#)
        .collect();
    assert_eq!(
        stderr,
        ["resolving 12 packages", "compiled in 3s"],
        "{logs}"
    );
    assert!(logs.contains(r#"{"artifact": "app.tar"}"#), "{logs}");
    assert!(!logs.contains("coxswain-result"), "{logs}");
    println!("kubectl logs {build} -c step:\n{logs}");

    // Once the result is recorded, the finished Job is given its time to
    // stay (a day unless set): it was made without one, so Kubernetes could
    // not delete it before its result was read.
    let ttl = s
        .kubectl
        .json(&["get", "-n", s.ns.name(), &build, "-o", "json"])["spec"]["ttlSecondsAfterFinished"]
        .clone();
    assert_eq!(ttl, json!(86400), "{build}");
}

#[tokio::test]
async fn finished_jobs_go_after_the_time_set_once_their_result_is_recorded() {
    let s = Setup::new(&["--job-ttl-after-finished", "0"]).await;
    s.apply(&flow(
        "brief",
        r#"
  steps:
    - key: one
      script: {source: "echo '{\"n\": 1}'"}
"#,
    ));
    let run = s.create_run("brief", json!({}));
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["steps"]["one"]["output"], json!({"n": 1}));
    let selector = format!("coxswain.dev/run={run}");
    s.wait_none(
        "the finished Job to be deleted by its TTL",
        BOUND,
        &["jobs", "-l", &selector],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // The record is untouched by the Job's going.
    let after = s.get("run", &run);
    assert_eq!(after["status"]["phase"], "Succeeded");
    assert_eq!(after["status"]["steps"]["one"]["output"], json!({"n": 1}));
    // A flow without `output:` shows its last step's output as the run's,
    // where kubectl reads it, as `coxswain run --output json` does.
    let shown = s
        .kubectl
        .run(&[
            "get",
            "run",
            &run,
            "-n",
            s.ns.name(),
            "-o",
            "jsonpath={.status.output}",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        serde_json::from_str::<Value>(&shown).ok(),
        Some(json!({"n": 1})),
        "{shown}"
    );
    assert_eq!(after["status"]["outputFrom"], "one");
}

#[tokio::test]
async fn a_schedule_fires_twice_and_the_second_run_sees_since() {
    let s = setup().await;
    s.apply(&flow(
        "nightly",
        r#"
  schedule: {cron: "* * * * *"}
  steps:
    - key: report
      script: {source: 'printf "{\"since\": \"%s\", \"last\": \"%s\"}" "$SINCE" "$LAST_RUN"'}
"#,
    ));
    let runs = wait_for(
        "two scheduled runs to succeed",
        Duration::from_secs(200),
        || async {
            let mut done: Vec<Value> = s
                .items("runs", "coxswain.dev/flow=nightly")
                .into_iter()
                .filter(|r| r["status"]["phase"] == "Succeeded")
                .collect();
            done.sort_by_key(|r| {
                r["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            });
            Ok((done.len() >= 2).then_some(done))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    let (first, second) = (&runs[0], &runs[1]);
    assert_eq!(
        first["status"]["steps"]["report"]["output"]["since"], "",
        "{first}"
    );
    let started: jiff::Timestamp = first["status"]["startedAt"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{first}"));
    let since = second["status"]["steps"]["report"]["output"]["since"].clone();
    assert_eq!(since, json!(started.as_second().to_string()), "{second}");
    assert_eq!(second["status"]["steps"]["report"]["output"]["last"], since);
    assert_eq!(second["status"]["since"], since, "pinned in the record");
}

#[tokio::test]
async fn a_mebibyte_output_and_a_thousand_passes_keep_the_run_under_512_kib() {
    let s = setup().await;
    s.apply(&flow(
        "heavy",
        r#"
  steps:
    - key: big
      script:
        source: head -c 1048576 /dev/zero | tr '\0' 'a'
    - key: spin
      loop:
        until: "$loop.iteration >= 1000"
        maxIterations: 1000
        steps:
          - key: tick
            condition: {when: "$loop.iteration > 0"}
"#,
    ));
    let run = s.create_run("heavy", json!({}));
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    let status = &done["status"];
    assert_eq!(status["phase"], "Succeeded", "{}", s.logs());
    assert_eq!(status["steps"]["spin"]["iteration"], 1000);
    let object = s
        .kubectl
        .run(&["get", "run", &run, "-n", s.ns.name(), "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = object.len();
    eprintln!(
        "the Run after a 1 MiB output and 1,000 passes: {bytes} bytes of JSON (kubectl get -o json)"
    );
    assert!(bytes < 512 << 10, "{bytes} bytes");
    // The mebibyte is in ConfigMaps the Run owns, listed in status.values.
    let values = status["values"].as_array().cloned().unwrap_or_default();
    let text = values
        .iter()
        .find(|v| v["path"] == "/steps/big/text")
        .unwrap_or_else(|| panic!("{values:?}"));
    assert!(
        text["bytes"].as_i64().is_some_and(|b| b > 1 << 20),
        "{text}"
    );
    for name in text["configMaps"].as_array().cloned().unwrap_or_default() {
        let cm = s.get("configmap", name.as_str().unwrap_or_default());
        assert_eq!(cm["metadata"]["ownerReferences"][0]["name"], run.as_str());
    }
    assert!(
        status["steps"]["big"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[moved out of the status"))
    );
}

/// The `error.code` of `run` once it failed.
async fn failed_code(s: &Setup, run: &str) -> Value {
    let done = s
        .wait_phase(run, &["Failed", "Succeeded", "Cancelled"], BOUND)
        .await;
    assert_eq!(done["status"]["phase"], "Failed", "{}", done["status"]);
    done["status"]["error"].clone()
}

#[tokio::test]
async fn without_admission_a_bad_input_or_flow_fails_with_its_own_code_and_a_missing_flow_is_told()
{
    // The controller alone: nothing refuses these at `kubectl create`.
    let s = setup().await;
    s.apply(&flow(
        "typed",
        r#"
  input:
    type: object
    required: [count]
    properties: {count: {type: integer}}
  steps:
    - key: check
      condition: {when: "$input.count > 1"}
"#,
    ));
    s.apply(&flow(
        "broken",
        r#"
  steps:
    - key: check
      condition: {when: "$steps.nowhere.output > 1"}
"#,
    ));
    let bad_input = s.create_run("typed", json!({"count": "two"}));
    let error = failed_code(&s, &bad_input).await;
    assert_eq!(error["code"], "workflow.input_invalid", "{error}");
    assert!(
        has_text(&error["message"], "does not fit the flow `typed`"),
        "{error}"
    );
    let bad_flow = s.create_run("broken", json!({}));
    let error = failed_code(&s, &bad_flow).await;
    assert_eq!(error["code"], "workflow.flow_invalid", "{error}");
    assert!(has_text(&error["message"], "`nowhere`"), "{error}");

    // A Run of a Flow not synced yet waits, says why, and tells it once in
    // an Event kubectl shows.
    let waiting = s.create_run("later", json!({}));
    let events = wait_for("a FlowNotFound Event", BOUND, || async {
        let items = s.kubectl.events(
            s.ns(),
            &format!("involvedObject.name={waiting},reason=FlowNotFound"),
        );
        Ok((!items.is_empty()).then_some(items))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(events.len(), 1, "told once: {events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert!(
        events[0]["note"]
            .as_str()
            .or(events[0]["message"].as_str())
            .is_some_and(|m| m.contains("`later` does not exist")),
        "{}",
        events[0]
    );
    let run = s.get("run", &waiting);
    assert_eq!(run["status"]["phase"], "Pending", "{}", run["status"]);
    let running = &run["status"]["conditions"][0];
    assert_eq!(running["reason"], "FlowNotFound", "{running}");
}

#[tokio::test]
async fn runs_of_one_flow_version_share_a_snapshot_that_goes_after_the_last_of_them() {
    let s = Setup::new(&[
        "--snapshot-grace",
        "2s",
        "--log-level",
        "coxswain_k8s=debug,info",
    ])
    .await;
    let one_step = |key: &str| {
        flow(
            "shared",
            &format!("\n  steps:\n    - key: {key}\n      condition: {{when: \"true\"}}\n"),
        )
    };
    s.apply(&one_step("first"));
    let runs = [
        s.create_run("shared", json!({})),
        s.create_run("shared", json!({})),
    ];
    let mut digests = Vec::new();
    for run in &runs {
        let done = s.wait_phase(run, &["Succeeded", "Failed"], BOUND).await;
        assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
        digests.push(
            done["status"]["flowDigest"]
                .as_str()
                .expect("a digest")
                .to_string(),
        );
    }
    assert_eq!(digests[0], digests[1]);
    let shared = coxswain_k8s::names::shared_flow_snapshot(&digests[0]);
    let snapshot = s.get("configmap", &shared);
    assert!(
        snapshot["metadata"]["ownerReferences"].is_null(),
        "{snapshot:#}"
    );
    assert!(
        s.names("configmap", "coxswain.dev/role=flow").is_empty(),
        "no run wrote a snapshot of its own"
    );
    // A ConfigMap dressed as a shared snapshot, but not one under its own
    // digest's name: not Coxswain's, so never deleted.
    s.apply(
        r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: coxswain-flow-look-alike
  labels: {coxswain.dev/role: flow-snapshot}
data:
  flow.json: '{"steps":[{"key":"a","condition":{"when":"true"}}]}'
"#,
    );
    // An edited Flow gets a snapshot of its own; the first one stays while
    // a Run names it, over several looks of the leader (grace 2 s).
    s.apply(&one_step("second"));
    let edited = s.create_run("shared", json!({}));
    let done = s.wait_phase(&edited, &["Succeeded", "Failed"], BOUND).await;
    let other = coxswain_k8s::names::shared_flow_snapshot(
        done["status"]["flowDigest"].as_str().expect("a digest"),
    );
    assert_ne!(other, shared);
    s.kubectl
        .run(&["delete", "run", &runs[0], "-n", s.ns()])
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kept = s.get("configmap", &shared);
    assert!(
        kept["metadata"]["annotations"]["coxswain.dev/unreferenced-since"].is_null(),
        "{kept:#}"
    );
    // The last Run that names it goes: so does the snapshot, and only it.
    s.kubectl
        .run(&["delete", "run", &runs[1], "-n", s.ns()])
        .unwrap_or_else(|e| panic!("{e}"));
    s.wait_deleted("the unnamed snapshot", "configmap", &shared, BOUND)
        .await;
    s.get("configmap", &other);
    s.get("configmap", "coxswain-flow-look-alike");
}

#[tokio::test]
async fn a_run_that_pins_a_snapshot_marked_for_removal_takes_the_mark_off() {
    let s = setup().await;
    let yaml = flow(
        "marked",
        "\n  steps:\n    - key: only\n      condition: {when: \"true\"}\n",
    );
    s.apply(&yaml);
    let first = s.create_run("marked", json!({}));
    let done = s.wait_phase(&first, &["Succeeded", "Failed"], BOUND).await;
    let digest = done["status"]["flowDigest"].as_str().expect("a digest");
    let shared = coxswain_k8s::names::shared_flow_snapshot(digest);
    // As the leader marks a snapshot no Run names once its last Run is
    // gone (its grace is 10 minutes here, so it would not delete it yet).
    s.kubectl
        .run(&["delete", "run", &first, "-n", s.ns()])
        .unwrap_or_else(|e| panic!("{e}"));
    let since = jiff::Timestamp::now().to_string();
    s.merge_patch(
        "configmap",
        &shared,
        &json!({"metadata": {"annotations": {"coxswain.dev/unreferenced-since": since}}})
            .to_string(),
    );
    let second = s.create_run("marked", json!({}));
    let done = s.wait_phase(&second, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["flowDigest"], digest);
    let kept = s.get("configmap", &shared);
    assert!(
        kept["metadata"]["annotations"]["coxswain.dev/unreferenced-since"].is_null(),
        "{kept:#}"
    );
}

#[tokio::test]
async fn a_snapshot_the_garbage_collector_took_is_made_again_while_its_flow_is_unchanged() {
    let mut s = setup().await;
    s.apply(&approval_flow());
    let kept = s.create_run("asked", json!({}));
    let waiting = s.wait_phase(&kept, &["Waiting"], BOUND).await;
    let digest = waiting["status"]["flowDigest"]
        .as_str()
        .expect("a pinned digest")
        .to_string();
    let shared = coxswain_k8s::names::shared_flow_snapshot(&digest);
    // Anyone who may edit ConfigMaps here gives the snapshot an owner of
    // their own, then deletes that owner: Kubernetes' garbage collector
    // takes the snapshot with it.
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: decoy}\n");
    let decoy = s.get("configmap", "decoy");
    let owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "decoy",
        "uid": decoy["metadata"]["uid"],
    }]}});
    s.merge_patch("configmap", &shared, &owner.to_string());
    s.kubectl
        .run(&["delete", "configmap", "decoy", "-n", s.ns()])
        .unwrap_or_else(|e| panic!("{e}"));
    s.wait_deleted(
        "the snapshot, by the garbage collector",
        "configmap",
        &shared,
        BOUND,
    )
    .await;
    // A controller that starts now knows the flow only from the snapshot.
    s.controllers[0].kill();
    s.controllers[0] = ControllerProcess::for_namespace(s.ns.name(), &[])
        .await
        .expect("controller again");
    let approval = |run: &str| s.kubectl.approval_name(s.ns.name(), run, "review", 1);
    s.merge_patch(
        "approval",
        &approval(&kept),
        r#"{"spec":{"decision":"approve"}}"#,
    );
    let done = s.wait_phase(&kept, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    assert_eq!(done["status"]["flowDigest"], digest.as_str());
    let again = s.get("configmap", &shared);
    assert!(again["metadata"]["ownerReferences"].is_null(), "{again:#}");
    assert_ne!(again["metadata"]["uid"], decoy["metadata"]["uid"]);

    // Once the Flow has changed, the pinned flow cannot be made again: the
    // run says so instead of going on with another flow.
    let changed = s.create_run("asked", json!({}));
    s.wait_phase(&changed, &["Waiting"], BOUND).await;
    s.apply(&approval_flow().replace("key: after", "key: later"));
    s.kubectl
        .run(&["delete", "configmap", &shared, "-n", s.ns()])
        .unwrap_or_else(|e| panic!("{e}"));
    s.controllers[0].kill();
    s.controllers[0] = ControllerProcess::for_namespace(s.ns.name(), &[])
        .await
        .expect("controller again");
    s.merge_patch(
        "approval",
        &approval(&changed),
        r#"{"spec":{"decision":"approve"}}"#,
    );
    let failed = s
        .wait_phase(&changed, &["Succeeded", "Failed"], BOUND)
        .await;
    assert_eq!(failed["status"]["phase"], "Failed", "{}", failed["status"]);
    let message = failed["status"]["error"]["message"].to_string();
    assert!(
        message.contains("has changed since the run started") && message.contains(&digest),
        "{}",
        failed["status"]
    );
    assert!(failed["status"]["steps"].get("later").is_none());
}

#[tokio::test]
async fn the_controller_writes_a_runs_steps_as_one_field_under_its_own_name() {
    let s = setup().await;
    s.apply(&flow(
        "tracked",
        "\n  steps:\n    - key: a\n      condition: {when: \"true\"}\n    - key: b\n      condition: {when: \"true\"}\n",
    ));
    let run = s.create_run("tracked", json!({}));
    let done = s.wait_phase(&run, &["Succeeded", "Failed"], BOUND).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    let object = s.kubectl.json(&[
        "get",
        "run",
        &run,
        "-n",
        s.ns(),
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let managed = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let status = managed
        .iter()
        .find(|m| m["subresource"] == "status")
        .unwrap_or_else(|| panic!("no status manager: {managed:#?}"));
    assert_eq!(status["manager"], coxswain_k8s::names::FIELD_MANAGER);
    // The API server tracks the steps (and the arrows' counts) as one field
    // each, not every leaf of every step: less of its CPU per write.
    let fields = &status["fieldsV1"]["f:status"];
    assert_eq!(fields["f:steps"], json!({}), "{fields:#}");
    assert_eq!(fields["f:arrowCounts"], json!({}), "{fields:#}");
}
