//! Rerun from a step on the real API server (`Run.spec.from`), through the
//! real kubectl with admission served: a Run whose last step failed is
//! rerun from that step, succeeds, and no Job is made for the steps before
//! it (their records are copied, marked with the old Run's name and uid);
//! the copied large value lives in ConfigMaps the new Run owns, so deleting
//! the old Run loses nothing. Admission refuses a rerun of a missing Run,
//! of one that has not ended, from a step its flow does not have, and while
//! the Flow differs from the one the old run ran; without admission the
//! controller refuses them alike. `rerun_attacks.rs` has the attacks.
//!
//! The scripts run on the stand-in node, which sees the host's files: the
//! last step fails until the test writes a flag file.

mod admission;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use admission::{ALICE, BOUND, assert_refused, setup_with};
use coxswain_e2e::{Setup, flow, has_text, wait_for};
use serde_json::{Value, json};

const RUNS: &str = "runs.coxswain.dev";

/// A flow: a 20 KB output (moved out of the status), a small one, and a
/// last step that fails until `DIR/ok` exists.
fn rerun_flow(dir: &std::path::Path) -> String {
    flow(
        "rerun",
        &format!(
            r#"
  steps:
    - key: big
      script: {{source: "head -c 20000 /dev/zero | tr '\\0' 'a'"}}
    - key: first
      script: {{source: 'echo "{{\"n\": 7}}"'}}
    - key: last
      script: {{source: 'test -f {dir}/ok || {{ echo no ok file >&2; exit 3; }}; echo "{{\"done\": true}}"'}}
"#,
            dir = dir.display()
        ),
    )
}

fn waits() -> String {
    flow(
        "waits",
        r#"
  steps:
    - key: ask
      approval: {decisions: [approve]}
"#,
    )
}

/// A Run of `flow` rerunning `run` from `step`, with `input`.
fn rerun_of(flow: &str, run: &str, step: &str, input: Value) -> String {
    json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"generateName": format!("{flow}-again-")},
        "spec": {"flowRef": {"name": flow}, "input": input, "from": {"run": run, "step": step}},
    })
    .to_string()
}

fn created_name(out: &str) -> String {
    out.trim()
        .trim_start_matches("run.coxswain.dev/")
        .to_string()
}

#[tokio::test]
async fn a_rerun_from_the_failed_last_step_succeeds_without_jobs_for_the_steps_before_it() {
    // Finished Jobs stay, so the test counts every Job each run made.
    let s = setup_with(false, &["--job-ttl-after-finished", "never"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The pods run as another user: they must see into the folder.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    s.apply(&rerun_flow(dir.path()));
    s.apply(&waits());
    let input = json!({"brief": "x"});

    let old = s
        .create_run_as(&ALICE, "rerun", input.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    let failed = s.wait_phase(&old, &["Failed", "Succeeded"]).await;
    assert_eq!(failed["status"]["phase"], "Failed", "{}", failed["status"]);
    assert_eq!(failed["status"]["steps"]["last"]["status"], "failed");
    let old_uid = failed["metadata"]["uid"].as_str().expect("uid").to_string();
    // The three scripts follow one another on default inputs: they share
    // the first one's pod, one Job for all three.
    assert_eq!(
        jobs_of(&s, &old).len(),
        1,
        "one Job for the chain of scripts"
    );

    // Admission's refusals, as kubectl prints them.
    assert_refused(
        create(&s, &rerun_of("rerun", "nope", "last", input.clone())),
        RUNS,
        &["spec.from.run: there is no Run `nope` in namespace"],
    );
    assert_refused(
        create(&s, &rerun_of("rerun", &old, "nope", input.clone())),
        RUNS,
        &["`nope` is not a step of the flow run `", "` ran"],
    );
    assert_refused(
        create(&s, &rerun_of("rerun", &old, "last", json!({"brief": "y"}))),
        RUNS,
        &["spec.input differs from the input of the Run"],
    );
    let waiting = s
        .create_run_as(&ALICE, "waits", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    s.wait_phase(&waiting, &["Waiting"]).await;
    assert_refused(
        create(&s, &rerun_of("waits", &waiting, "ask", json!({}))),
        RUNS,
        &["has not ended (phase Waiting)"],
    );

    // While today's Flow differs from the one the old run ran, no rerun:
    // edited back to the very same spec, the rerun is admitted again.
    s.apply(&rerun_flow(dir.path()).replace("test -f", "exit 9; test -f"));
    assert_refused(
        create(&s, &rerun_of("rerun", &old, "last", input.clone())),
        RUNS,
        &[&format!(
            "spec.from: the Flow `rerun` changed since the Run `{old}` ran it"
        )],
    );
    s.apply(&rerun_flow(dir.path()));
    std::fs::write(dir.path().join("ok"), "").expect("flag");
    std::fs::set_permissions(
        dir.path().join("ok"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    let again = create(&s, &rerun_of("rerun", &old, "last", input.clone()))
        .map(|out| created_name(&out))
        .unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&again, &["Failed", "Succeeded"]).await;
    let status = &done["status"];
    assert_eq!(status["phase"], "Succeeded", "{status}\n{}", s.logs());
    let jobs = jobs_of(&s, &again);
    assert_eq!(jobs.len(), 1, "only `last` runs again: {jobs:?}");
    for key in ["big", "first"] {
        assert_eq!(status["steps"][key]["copiedFrom"]["run"], old.as_str());
        assert_eq!(status["steps"][key]["copiedFrom"]["uid"], old_uid.as_str());
    }
    assert!(status["steps"]["last"].get("copiedFrom").is_none());
    assert_eq!(status["steps"]["last"]["output"]["done"], true);
    assert_eq!(status["rerunOf"]["uid"], old_uid.as_str());
    assert_eq!(status["flowDigest"], failed["status"]["flowDigest"]);
    assert_eq!(status["steps"]["first"]["output"]["n"], 7);

    // The big value was moved out again, into ConfigMaps the new Run owns:
    // deleting the old Run (as retention would) takes nothing of it.
    let moved = moved_config_maps(status, "/steps/big/text");
    assert!(!moved.is_empty(), "{}", status["values"]);
    for name in &moved {
        let cm = s.get("configmap", name);
        assert_eq!(cm["metadata"]["ownerReferences"][0]["name"], again.as_str());
    }
    s.kubectl
        .run(&["delete", "run", &old, "-n", s.ns(), "--wait=true"])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for("the old run's Jobs to go", BOUND, || async {
        Ok(jobs_of(&s, &old).is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = s.get("run", &again);
    assert_eq!(after["status"]["phase"], "Succeeded");
    for name in &moved {
        let cm = s.get("configmap", name);
        assert_eq!(cm["metadata"]["ownerReferences"][0]["name"], again.as_str());
    }
    // A rerun of a Run that is gone is refused by name.
    assert_refused(
        create(&s, &rerun_of("rerun", &old, "last", input)),
        RUNS,
        &[&format!("there is no Run `{old}`")],
    );
}

#[tokio::test]
async fn without_admission_the_controller_refuses_what_admission_would() {
    let s = Setup::new(&[]).await;
    s.apply(&waits());
    s.apply(&quick());
    let refused = |run: String, needle: String| {
        let s = &s;
        async move {
            let out = s
                .kubectl
                .run_with_stdin(
                    &["create", "-n", s.ns(), "-f", "-", "-o", "name"],
                    Some(&run),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            let run = created_name(&out);
            let done = match s
                .kubectl
                .wait_run(s.ns(), &run, &["Failed", "Succeeded"], BOUND)
                .await
            {
                Ok(done) => done,
                Err(e) => panic!("{e}\n{}", s.logs()),
            };
            let error = &done["status"]["error"];
            assert_eq!(error["code"], "workflow.rerun_refused", "{error}");
            assert!(has_text(&error["message"], &needle), "{needle}: {error}");
            assert!(done["status"].get("steps").is_none(), "nothing ran");
        }
    };
    refused(
        rerun_of("waits", "gone", "ask", json!({})),
        "there is no Run `gone`".into(),
    )
    .await;

    let out = s
        .kubectl
        .run_with_stdin(
            &["create", "-n", s.ns(), "-f", "-", "-o", "name"],
            Some(
                &json!({
                    "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
                    "metadata": {"generateName": "quick-"},
                    "spec": {"flowRef": {"name": "quick"}},
                })
                .to_string(),
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let old = created_name(&out);
    let done = s.wait_phase(&old, &["Failed", "Succeeded"], BOUND).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    // A uid that is not the Run's under that name.
    let mut pinned: Value =
        serde_json::from_str(&rerun_of("quick", &old, "b", json!({}))).expect("json");
    pinned["spec"]["from"]["uid"] = json!("0e4c5c6a-0000-4000-8000-000000000000");
    refused(
        pinned.to_string(),
        format!("spec.from.uid pins the Run `{old}` with uid 0e4c5c6a-"),
    )
    .await;
    // The Flow changed since.
    s.apply(&quick().replace("\"true\"", "\"1 == 1\""));
    refused(
        rerun_of("quick", &old, "b", json!({})),
        format!("the Flow `quick` changed since the Run `{old}` ran it"),
    )
    .await;
}

fn quick() -> String {
    flow(
        "quick",
        r#"
  steps:
    - {key: a, condition: {when: "true"}}
    - {key: b, after: [a], condition: {when: "true"}}
"#,
    )
}

/// `kubectl create` of `run` as alice; the output or kubectl's error.
fn create(s: &admission::Admission, run: &str) -> Result<String, String> {
    s.kubectl_as(&ALICE, &["create", "-f", "-", "-o", "name"], Some(run))
}

/// The Jobs made for `run`, by its name label.
fn jobs_of(s: &admission::Admission, run: &str) -> Vec<String> {
    s.names("jobs", &format!("coxswain.dev/run={run}"))
}

/// The ConfigMaps holding the value moved out from `path`.
fn moved_config_maps(status: &Value, path: &str) -> Vec<String> {
    status["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["path"] == path)
        .flat_map(|v| v["configMaps"].as_array().cloned().unwrap_or_default())
        .filter_map(|n| n.as_str().map(String::from))
        .collect()
}
