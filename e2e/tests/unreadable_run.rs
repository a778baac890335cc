//! One Run nobody can read does not stop the controller for the others.
//!
//! A Run's status holding a value nested deeper than serde_json reads (128
//! levels) used to fail every list of Runs, so after a start, a failover or
//! a relist no Run in any namespace was reconciled. The bad Run is made as
//! an admin would (no admission in this cluster, the status patched through
//! `runs/status`) before the controller starts, which then watches every
//! namespace: the honest Run in another namespace must succeed, and the bad
//! one gets a Warning Event saying it is skipped. A Flow nested as deep
//! (possible where admission is not served) likewise: the Flow watch goes
//! on, the honest Flow gets its status, and the deep one is marked not
//! valid, saying why. Alone in its test binary, so its all-namespace
//! controller meets no other test's Runs.

use std::time::Duration;

use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace, wait_for};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

const BOUND: Duration = Duration::from_secs(90);

const PLAIN: &str = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: plain}\n\
                     spec:\n  steps:\n    - {key: a, condition: {when: \"true\"}}\n";

#[tokio::test]
async fn a_run_too_deep_to_read_is_reported_and_every_other_run_is_reconciled() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let (bad_ns, good_ns) = (
        TestNamespace::new().await.expect("namespace"),
        TestNamespace::new().await.expect("namespace"),
    );
    for ns in [&bad_ns, &good_ns] {
        kubectl.apply(ns.name(), PLAIN).expect("the flow");
    }
    let bad = kubectl
        .create_run(bad_ns.name(), "plain", &serde_json::json!({}))
        .expect("the bad run");
    // 130 levels under `status.output`: the API server keeps it (free JSON
    // to the schema), serde_json cannot read it back.
    let deep = format!("{}1{}", "[".repeat(130), "]".repeat(130));
    let patch = format!(r#"{{"status": {{"phase": "Running", "output": {deep}}}}}"#);
    kubectl
        .run(&[
            "patch",
            "run",
            &bad,
            "-n",
            bad_ns.name(),
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            &patch,
        ])
        .expect("the deep status is written");

    // A Flow whose `input` schema nests 130 levels: the API server keeps
    // it (free JSON to the CRD's schema); serde_json cannot read it.
    let deep_flow = format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: deep}}\n\
         spec:\n  input: {{\"x\": {deep}}}\n  steps:\n    - {{key: a, condition: {{when: \"true\"}}}}\n"
    );
    kubectl
        .apply(bad_ns.name(), &deep_flow)
        .expect("the deep flow is stored");

    let stripped = coxswain_e2e::stripped_coxswain_bin().expect("coxswain");
    let stripped = stripped.to_string_lossy().into_owned();
    let controller = ControllerProcess::start(&[
        "--lease-namespace",
        good_ns.name(),
        "--metrics-addr",
        "127.0.0.1:0",
        "--job-executable",
        &stripped,
    ])
    .await
    .expect("controller");

    let good = kubectl
        .create_run(good_ns.name(), "plain", &serde_json::json!({}))
        .expect("the honest run");
    let run = kubectl
        .wait_run(good_ns.name(), &good, &["Succeeded", "Failed"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(run["status"]["phase"], "Succeeded", "{:#}", run["status"]);

    let events: Api<Event> = bad_ns.api();
    let note = wait_for("the bad run's event", BOUND, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list.items.into_iter().find_map(|e| {
            let about = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(bad.as_str());
            (about && e.reason.as_deref() == Some("Unreadable")).then(|| e.note.unwrap_or_default())
        }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert!(
        note.starts_with("The controller cannot read this Run, so it does not run it: ")
            && note.contains("recursion limit"),
        "{note}"
    );
    let log = controller.log_text();
    assert!(
        log.contains("a Run that cannot be read is skipped") && log.contains(&bad),
        "{log}"
    );

    // The Flow watch was not stopped by the deep Flow: both are reconciled.
    let valid = |ns: &str, name: &str| {
        // Only the conditions: the test's own serde_json cannot read the
        // deep Flow whole either.
        let got = kubectl
            .run(&[
                "get",
                "flow",
                name,
                "-n",
                ns,
                "-o",
                "jsonpath={.status.conditions}",
            ])
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        got.and_then(|conditions| {
            conditions
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Valid")
                .cloned()
        })
    };
    let honest = wait_for("the honest flow's status", BOUND, || async {
        Ok(valid(good_ns.name(), "plain"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(honest["status"], "True", "{honest}");
    let marked = wait_for("the deep flow's status", BOUND, || async {
        Ok(valid(bad_ns.name(), "deep"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(marked["status"], "False", "{marked}");
    let message = marked["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the flow's spec could not be read")
            && message.contains("recursion limit"),
        "{marked}"
    );
}
