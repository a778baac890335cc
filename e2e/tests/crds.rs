//! Our own CRDs (`crds/*.yaml`, generated from the Rust types) install on a
//! real API server, and Flow, Run and Approval objects round-trip through it
//! without losing a field: proof that the schemas are structural and that
//! free JSON fields are kept, not pruned.

use std::time::Duration;

use coxswain_core::api::{Approval, Flow, Run, RunSpec, RunStatus};
use coxswain_e2e::TestNamespace;
use coxswain_test_support::conformance_driver as driver;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const BOUND: Duration = Duration::from_secs(60);

mod crd_files;

async fn install_crds(client: kube::Client) {
    crd_files::install(
        client,
        &["flows.yaml", "runs.yaml", "approvals.yaml"],
        BOUND,
    )
    .await;
}

/// Creates an object, retrying while discovery catches up with a new CRD.
async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    coxswain_e2e::create_when_discovered(api, object, BOUND)
        .await
        .expect("created")
}

#[tokio::test]
async fn flows_runs_and_approvals_round_trip() {
    let ns = TestNamespace::new().await.expect("namespace");
    install_crds(ns.client()).await;

    // A Flow from the examples keeps every field, free JSON included.
    let text = std::fs::read_to_string(coxswain_e2e::workspace_root().join("examples/hello.yaml"))
        .expect("example");
    let flow: Flow = serde_yaml::from_str(&text).expect("example flow");
    let flows: Api<Flow> = ns.api();
    let created = create(&flows, &flow).await;
    assert_eq!(
        created.spec, flow.spec,
        "the API server kept the flow exactly"
    );
    assert!(
        created
            .spec
            .input
            .as_ref()
            .is_some_and(|s| s["properties"]["names"]["type"] == "array")
    );

    // A Run's status, with the engine's bookkeeping, goes through /status.
    let run: Run = serde_json::from_value(json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": "hello-1"},
        "spec": {"flowRef": {"name": "hello"}, "input": {"names": ["Ada"], "nested": {"deep": [1, {"x": null}]}}}
    }))
    .expect("run");
    let runs: Api<Run> = ns.api();
    let created = create(&runs, &run).await;
    assert_eq!(created.spec.input, run.spec.input);
    let status: RunStatus = serde_json::from_value(json!({
        "phase": "Running", "progress": "1/7", "currentStep": "check",
        "due": ["check", "shout"], "sendBacks": {"review->draft": 1},
        "steps": {"count": {"status": "completed", "output": {"count": 2, "any": [true, {"k": "v"}]}, "text": "{\"count\": 2}",
                   "attempts": [{"number": 1, "status": "completed", "output": {"count": 2}}], "roundStart": 0},
                  "quiet": {"status": "completed", "output": null,
                   "attempts": [{"number": 1, "status": "completed", "output": null}]}},
        "arrows": [{"from": "count", "to": "check", "taken": true, "detail": "control only"}]
    }))
    .expect("status");
    let patch = json!({"apiVersion": "coxswain.dev/v1alpha1", "kind": "Run", "status": status});
    let patched = runs
        .patch_status(
            "hello-1",
            &PatchParams::apply("coxswain-e2e").force(),
            &Patch::Apply(&patch),
        )
        .await
        .expect("status patch");
    assert_eq!(patched.status, Some(status), "status kept exactly");
    let quiet = &patched.status.as_ref().expect("status").steps["quiet"];
    assert_eq!(
        quiet.output,
        Some(serde_json::Value::Null),
        "an output of null is kept, not dropped"
    );

    // An Approval with free JSON in `show` and `response`.
    let approval: Approval = serde_json::from_value(json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Approval", "metadata": {"name": "hello-1-review-1"},
        "spec": {"run": "hello-1", "step": "review", "attempt": 1, "mode": "review",
                 "show": {"draft": {"title": "T", "tags": ["a"]}}, "decisions": ["approve", "changes"]}
    }))
    .expect("approval");
    let approvals: Api<Approval> = ns.api();
    let created = create(&approvals, &approval).await;
    assert_eq!(created.spec, approval.spec);

    // The schema refuses what is not a flow.
    let bad = json!({"apiVersion": "coxswain.dev/v1alpha1", "kind": "Flow", "metadata": {"name": "bad"},
                     "spec": {"steps": [{"key": "a", "attempts": "two"}]}});
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::erase::<Flow>(&()),
    );
    let refused = raw
        .create(
            &PostParams::default(),
            &serde_json::from_value(bad).expect("object"),
        )
        .await;
    match refused {
        Err(kube::Error::Api(e)) => assert!(e.message.contains("attempts"), "{}", e.message),
        other => panic!("a string for `attempts` must be refused, got {other:?}"),
    }
}

/// Every conformance case, with its status written to a real Run's status
/// after every event and the engine restarted from what the API server gives
/// back: the schema keeps everything a restarted controller needs (nothing
/// pruned, no null dropped), and the run still ends exactly as it would have.
#[tokio::test]
async fn every_case_resumes_from_the_status_the_api_server_kept() {
    let ns = TestNamespace::new().await.expect("namespace");
    install_crds(ns.client()).await;
    let runs: Api<Run> = ns.api();
    let files = driver::case_files();
    let mut failures = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let case = driver::read_case(file).expect("case");
        let name = format!("case-{i}");
        let run = Run::new(
            &name,
            RunSpec {
                flow_ref: coxswain_core::api::FlowRef {
                    name: "case".into(),
                },
                ..Default::default()
            },
        );
        create(&runs, &run).await;
        let store = |state: RunStatus| {
            let (runs, name) = (runs.clone(), name.clone());
            async move {
                let patch =
                    json!({"apiVersion": "coxswain.dev/v1alpha1", "kind": "Run", "status": state});
                let params = PatchParams::apply("coxswain-engine").force();
                let kept = runs
                    .patch_status(&name, &params, &Patch::Apply(&patch))
                    .await
                    .map_err(|e| format!("status patch: {e}"))?;
                kept.status
                    .ok_or_else(|| "the API server kept no status".to_string())
            }
        };
        if let Err(e) = driver::check_restarts(&case, store).await {
            failures.push(format!("== {}\n{e}", file.display()));
        }
    }
    driver::report(files.len(), &failures);
}
