//! A namespace member tries to steer the controller through objects it
//! finds by name: nothing a namespace member writes may steer it, since a
//! member's rights are not the controller's. `mallory` has the Role a team member gets — Flows, Runs,
//! Approvals and ConfigMaps; reading pods, Jobs and logs; no Secrets, no
//! pods or Jobs — and writes with the real kubectl (`--as mallory`). Each
//! attack must fail with the run's status saying why, the object she made
//! left alone, and an honest run beside it must still succeed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::routing::get;
use coxswain_e2e::{Setup, flow, wait_for};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(90);

const AS_MALLORY: [&str; 2] = ["--as", "mallory"];

coxswain_e2e::setup_newtype!(
    /// A [`Setup`] with the member's Role, and what these tests do through it.
    Tamper
);

async fn setup() -> Tamper {
    let s = Tamper(Setup::new(&[]).await);
    s.apply(&coxswain_e2e::rbac::member_role(&["mallory"]));
    s
}

impl Tamper {
    /// `kubectl create -f -` of `object` as mallory; her refusal, if any.
    fn create_as_mallory(&self, object: &Value) -> Result<String, String> {
        let mut args = vec!["create", "-n", self.ns(), "-f", "-"];
        args.extend(AS_MALLORY);
        self.kubectl
            .run_with_stdin(&args, Some(&object.to_string()))
    }

    /// ConfigMap `name` holding `value` as JSON under `key`, created by
    /// mallory (she may write ConfigMaps): where she plants what the
    /// controller would read as its own.
    fn plant_config_map(&self, name: &str, key: &str, value: &Value) {
        self.create_as_mallory(&json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {key: value.to_string()},
        }))
        .unwrap_or_else(|e| panic!("mallory may write ConfigMaps: {e}"));
    }

    /// A Run named `name` of `flow`, created by the platform (the admin).
    fn create_run(&self, name: &str, flow: &str) {
        self.create_run_with(name, flow, json!({}));
    }

    /// A Run named `name` of `flow` with `input`, created by the platform.
    fn create_run_with(&self, name: &str, flow: &str, input: Value) {
        let run = json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name},
            "spec": {"flowRef": {"name": flow}, "input": input},
        });
        self.kubectl
            .run_with_stdin(
                &["create", "-n", self.ns(), "-f", "-"],
                Some(&run.to_string()),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }

    async fn wait(&self, run: &str, phases: &[&str]) -> Value {
        self.kubectl
            .wait_run(self.ns(), run, phases, BOUND)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()))
    }

    fn patch(
        &self,
        kind: &str,
        name: &str,
        patch: Value,
        extra: &[&str],
    ) -> Result<String, String> {
        let patch = patch.to_string();
        let mut args = vec![
            "patch",
            kind,
            name,
            "-n",
            self.ns(),
            "--type",
            "merge",
            "-p",
            &patch,
        ];
        args.extend_from_slice(extra);
        self.kubectl.run(&args)
    }

    fn approve(&self, approval: &str) {
        self.patch(
            "approval",
            approval,
            json!({"spec": {"decision": "approve"}}),
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The Tampered warnings on `run`, as `kubectl get events` lists them.
    fn tampered_events(&self, run: &str) -> Vec<String> {
        let events = self
            .kubectl
            .json(&["get", "events", "-n", self.ns(), "-o", "json"]);
        events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["involvedObject"]["name"] == run)
            .filter(|e| e["reason"] == "Tampered")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// An HTTP server counting the calls it gets: the honest one and the
/// member's own, which must never be called.
async fn server() -> (SocketAddr, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let app = axum::Router::new().route(
        "/{*path}",
        get(move || {
            let calls = counted.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({"ok": true}))
            }
        }),
    );
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (addr, calls)
}

fn flow_of(addr: SocketAddr, name: &str) -> String {
    flow(
        name,
        &format!(
            r#"
  steps:
    - key: publish
      http: {{url: "http://{addr}/publish"}}
"#
        ),
    )
}

/// The digest the controller pins for Flow `name` as the API server has it.
fn digest_of_flow(s: &Setup, name: &str) -> String {
    let flow = s.get("flow", name);
    let spec: coxswain_core::api::FlowSpec =
        serde_json::from_value(flow["spec"].clone()).expect("a flow spec");
    coxswain_core::flow::flow_digest(&spec)
}

#[tokio::test]
async fn a_flow_snapshot_made_in_advance_is_not_run() {
    let s = setup().await;
    let (honest, honest_calls) = server().await;
    let (evil, evil_calls) = server().await;
    s.apply(&flow_of(honest, "publish"));
    let digest = digest_of_flow(&s, "publish");
    // Mallory knows the next Run's name (a schedule's are predictable) and
    // the Flow's digest; she makes the snapshot first, under the name runs
    // of this flow share, the run's own digest-named one and the old name,
    // holding a flow that calls her server.
    let evil_spec =
        json!({"steps": [{"key": "publish", "http": {"url": format!("http://{evil}/steal")}}]});
    let shared = coxswain_k8s::names::shared_flow_snapshot(&digest);
    for name in [
        shared.clone(),
        coxswain_k8s::names::flow_snapshot("nightly-1", &digest),
        coxswain_k8s::names::legacy_flow_snapshot("nightly-1"),
    ] {
        s.plant_config_map(&name, "flow.json", &evil_spec);
    }
    s.create_run("nightly-1", "publish");
    s.create_run("nightly-2", "publish");
    let tampered = s.wait("nightly-1", &["Succeeded", "Failed"]).await;
    let honest_run = s.wait("nightly-2", &["Succeeded", "Failed"]).await;

    let error = &tampered["status"]["error"];
    assert_eq!(tampered["status"]["phase"], "Failed", "{tampered:#}");
    assert_eq!(error["code"], "workflow.tampered", "{error}");
    let snapshot = coxswain_k8s::names::flow_snapshot("nightly-1", &digest);
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("ConfigMap {snapshot}")) && message.contains("left alone"),
        "{message}"
    );
    println!("attack 1 (pinned flow) gets: {message}");
    assert_eq!(
        evil_calls.load(Ordering::SeqCst),
        0,
        "her server was called"
    );
    // Her ConfigMaps are still there, as she made them.
    for name in [&snapshot, &shared] {
        let kept = s.get("configmap", name);
        assert_eq!(kept["data"]["flow.json"], evil_spec.to_string());
    }
    let warned = wait_for("a Tampered event on the run", BOUND, || async {
        let notes = s.tampered_events("nightly-1");
        Ok((!notes.is_empty()).then_some(notes))
    })
    .await
    .expect("an event");
    assert!(warned[0].contains(&snapshot), "{warned:?}");

    // The shared name she took holds nobody back: the honest run keeps a
    // snapshot of its own, made by the controller.
    assert_eq!(honest_run["status"]["phase"], "Succeeded", "{honest_run:#}");
    assert_eq!(honest_calls.load(Ordering::SeqCst), 1);
    let own = s.get(
        "configmap",
        &coxswain_k8s::names::flow_snapshot("nightly-2", &digest),
    );
    assert_eq!(own["metadata"]["ownerReferences"][0]["name"], "nightly-2");
}

#[tokio::test]
async fn a_scripts_inputs_made_in_advance_run_nothing() {
    let s = setup().await;
    // The platform's flow: a person approves, then a script builds with a
    // token from a Secret mallory cannot read.
    s.apply(
        r#"
apiVersion: v1
kind: Secret
metadata: {name: deploy-token}
stringData: {token: s3cret-deploy-token}
---
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: build}
spec:
  steps:
    - key: go
      approval: {decisions: [approve]}
    - key: build
      input: {notes: $input.notes}
      script:
        source: 'echo "{\"built\": true}"'
        env:
          - name: TOKEN
            valueFrom: {secretKeyRef: {name: deploy-token, key: token}}
"#,
    );
    assert!(
        s.kubectl
            .run(&[
                "get",
                "secret",
                "deploy-token",
                "-n",
                s.ns(),
                "--as",
                "mallory"
            ])
            .is_err(),
        "mallory must not read the Secret"
    );
    // Notes too large to ride in the Job: its inputs get a ConfigMap. Short
    // ones ride in the Job, and no ConfigMap is read.
    let long = json!({"notes": "n".repeat(40 << 10)});
    let runs = [
        ("build-1", long.clone()),
        ("build-2", long),
        ("build-3", json!({"notes": "short"})),
    ];
    for (run, input) in &runs {
        s.create_run_with(run, "build", input.clone());
        s.wait(run, &["Waiting"]).await;
    }
    // The Job's name follows from the Run's uid, which she can read: she
    // makes its inputs ConfigMap first, with a task that prints the token.
    let planted = |run: &str| {
        let uid = s.get("run", run)["metadata"]["uid"]
            .as_str()
            .expect("uid")
            .to_string();
        let id = coxswain_steps::launch::WorkId {
            run: uid,
            step: "build".into(),
            part: None,
            iteration: None,
            attempt: 1,
        };
        let inputs = coxswain_k8s::names::job(run, &id);
        let task = json!({
            "step": {"source": "echo \"{\\\"stolen\\\": \\\"$TOKEN\\\"}\"", "env": [{"name": "TOKEN"}]},
            "stepKey": "build", "runName": run, "attempt": 1, "maxOutput": 262144,
        });
        s.plant_config_map(&inputs, "step.json", &task);
        (inputs, task)
    };
    let (inputs, task) = planted("build-1");
    let (short_inputs, _) = planted("build-3");
    for run in ["build-1", "build-2", "build-3"] {
        let name = s.kubectl.approval_name(s.ns(), run, "go", 1);
        s.approve(&name);
    }
    let tampered = s.wait("build-1", &["Succeeded", "Failed"]).await;
    let honest = s.wait("build-2", &["Succeeded", "Failed"]).await;

    let text = tampered.to_string();
    assert!(
        !text.contains("s3cret-deploy-token"),
        "the token leaked: {text}"
    );
    let build = &tampered["status"]["steps"]["build"];
    let error = &build["attempts"][0]["error"];
    assert_eq!(error["code"], "workflow.tampered", "{build:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("ConfigMap {inputs}")) && message.contains("did not run"),
        "{message}"
    );
    println!("attack 2 (script inputs) gets: {message}");
    // Her ConfigMap stays as she made it; the run's end did not delete it.
    let kept = s.get("configmap", &inputs);
    assert_eq!(kept["data"]["step.json"], task.to_string());

    assert_eq!(honest["status"]["phase"], "Succeeded", "{honest:#}");
    assert_eq!(
        honest["status"]["steps"]["build"]["output"],
        json!({"built": true}),
        "{honest:#}"
    );
    // Short inputs never read a ConfigMap: hers under that run's name does
    // nothing, and stays as she made it.
    let short = s.wait("build-3", &["Succeeded", "Failed"]).await;
    assert_eq!(short["status"]["phase"], "Succeeded", "{short:#}");
    assert!(!short.to_string().contains("s3cret-deploy-token"));
    assert_eq!(
        short["status"]["steps"]["build"]["output"],
        json!({"built": true})
    );
    s.get("configmap", &short_inputs);
}

/// Flow `name` whose one step, `step`, asks for an approval.
fn one_review(name: &str, step: &str) -> String {
    flow(
        name,
        &format!("  steps:\n    - key: {step}\n      approval: {{decisions: [approve]}}\n"),
    )
}

#[tokio::test]
async fn approvals_of_two_runs_never_share_a_name_or_an_answer() {
    let s = setup().await;
    s.apply(&one_review("a-review", "a_review"));
    s.apply(&one_review("review", "review"));
    // `rel` + `a_review` and `rel-a` + `review` read the same before the
    // digest: rel-a-review-1.
    s.create_run("rel", "a-review");
    s.create_run("rel-a", "review");
    s.wait("rel", &["Waiting"]).await;
    s.wait("rel-a", &["Waiting"]).await;
    let first = s.kubectl.approval_name(s.ns(), "rel", "a_review", 1);
    let second = s.kubectl.approval_name(s.ns(), "rel-a", "review", 1);
    assert_ne!(first, second);
    assert_eq!(s.get("approval", &first)["spec"]["run"], "rel");
    assert_eq!(s.get("approval", &second)["spec"]["run"], "rel-a");
    s.approve(&first);
    assert_eq!(
        s.wait("rel", &["Succeeded"]).await["status"]["phase"],
        "Succeeded"
    );
    // The other run did not take that answer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.get("run", "rel-a")["status"]["phase"], "Waiting");

    // An Approval left behind by its Run (deleted without its children:
    // here its owner reference is taken off first, since the garbage
    // collector may still delete a child it had not seen when the Run was
    // deleted with `--cascade=orphan`), answered; a new Run under the same
    // name asks its own and takes nothing from it.
    s.kubectl
        .run(&[
            "patch",
            "approval",
            &second,
            "-n",
            s.ns(),
            "--type",
            "json",
            "-p",
            r#"[{"op": "remove", "path": "/metadata/ownerReferences"}]"#,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    s.kubectl
        .run(&["delete", "run", "rel-a", "-n", s.ns(), "--wait"])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for("rel-a gone", BOUND, || async {
        Ok(s.kubectl
            .run(&["get", "run", "rel-a", "-n", s.ns()])
            .is_err()
            .then_some(()))
    })
    .await
    .expect("deleted");
    s.approve(&second);
    s.create_run("rel-a", "review");
    s.wait("rel-a", &["Waiting"]).await;
    let again = s.kubectl.approval_name(s.ns(), "rel-a", "review", 1);
    assert_ne!(again, second, "a new run's Approval has a name of its own");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting = s.get("run", "rel-a");
    assert_eq!(waiting["status"]["phase"], "Waiting", "{waiting:#}");
    assert!(s.get("approval", &again)["spec"]["decision"].is_null());
    s.approve(&again);
    s.wait("rel-a", &["Succeeded"]).await;
}

#[tokio::test]
async fn relabelling_another_runs_approval_does_not_close_it() {
    let s = setup().await;
    s.apply(&one_review("review", "review"));
    s.create_run("victim", "review");
    s.wait("victim", &["Waiting"]).await;
    // Mallory's own run.
    let mine = json!({
        "apiVersion": "coxswain.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "mine"},
        "spec": {"flowRef": {"name": "review"}},
    });
    s.create_as_mallory(&mine).unwrap_or_else(|e| panic!("{e}"));
    s.wait("mine", &["Waiting"]).await;
    let my_uid = s.get("run", "mine")["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let victims = s.kubectl.approval_name(s.ns(), "victim", "review", 1);
    s.patch(
        "approval",
        &victims,
        json!({"metadata": {"labels": {"coxswain.dev/run-uid": my_uid}}}),
        &AS_MALLORY,
    )
    .unwrap_or_else(|e| panic!("without admission the label is hers to write: {e}"));
    s.patch(
        "run",
        "mine",
        json!({"spec": {"cancel": true}}),
        &AS_MALLORY,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.wait("mine", &["Cancelled"]).await;
    let mine_approval = s.kubectl.approval_name(s.ns(), "mine", "review", 1);
    wait_for("her own Approval closed", BOUND, || async {
        let a = s.get("approval", &mine_approval);
        Ok(a["status"]["closed"].is_string().then_some(()))
    })
    .await
    .expect("closed");
    let victim = s.get("approval", &victims);
    assert!(
        victim["status"]["closed"].is_null(),
        "the victim's Approval was closed: {victim:#}"
    );
    s.approve(&victims);
    let done = s.wait("victim", &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{done:#}");
}
