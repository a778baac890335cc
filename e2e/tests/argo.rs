//! Argo Workflows v4.0.5 runs on the e2e cluster beside Coxswain, so the
//! benchmark can compare the two on one API server (`BENCHMARKS.md`). The Argo
//! tests are ignored: the controller takes ~18 minutes to build
//! (`e2e/argo/build`), so CI does not run them; run them with
//! `cargo test -p coxswain-e2e --test argo -- --ignored`. Coxswain's side of
//! the same comparison runs in CI.

use std::path::PathBuf;
use std::time::Duration;

use coxswain_e2e::apimetrics;
use coxswain_e2e::argo::{StepKind, run_coxswain_chains};
use coxswain_e2e::{Argo, ControllerProcess, Kubectl, TestNamespace, kubeconfig};

/// A namespace of its own, the cluster's kubeconfig, and Argo's
/// workflow-controller started for that namespace.
async fn argo_in_a_namespace() -> (TestNamespace, PathBuf, Argo) {
    let ns = TestNamespace::new().await.expect("namespace");
    let kubeconfig = tokio::task::spawn_blocking(kubeconfig)
        .await
        .expect("join")
        .expect("cluster");
    let argo = Argo::start(&kubeconfig, ns.name())
        .await
        .expect("argo starts");
    (ns, kubeconfig, argo)
}

#[tokio::test]
async fn coxswain_runs_the_chains_compared_with_argo_and_the_report_counts_them() {
    let (kubectl, ns) = coxswain_e2e::kubectl_and_namespace().await;
    let controller = ControllerProcess::for_namespace(ns.name(), &[])
        .await
        .expect("controller starts");

    let report = run_coxswain_chains(&ns.client(), ns.name(), 3, 4, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));

    println!("{report}");
    assert_eq!(report.engine, "coxswain");
    assert_eq!(
        (report.workflows, report.steps, report.latency_samples),
        (3, 12, 9),
        "{report}"
    );
    // What the API server kept: three Runs of the chain flow, each with
    // its four condition steps completed.
    let runs = kubectl.json(&["get", "runs", "-n", ns.name(), "-o", "json"]);
    let items = runs["items"].as_array().expect("items");
    assert_eq!(items.len(), 3, "{runs}");
    for run in items {
        assert_eq!(run["spec"]["flowRef"]["name"], "chain-4", "{run}");
        assert_eq!(run["status"]["phase"], "Succeeded", "{run}");
        let completed = run["status"]["steps"]
            .as_object()
            .expect("steps")
            .values()
            .filter(|s| s["status"] == "completed")
            .count();
        assert_eq!(completed, 4, "{run}");
    }
}

#[tokio::test]
#[ignore = "needs Argo's workflow-controller: run e2e/argo/build first (~18 minutes cold)"]
async fn argo_runs_five_pod_less_chains_of_three_steps_and_the_report_counts_them() {
    let (ns, kubeconfig, argo) = argo_in_a_namespace().await;
    let before = apimetrics::scrape(&ns.client()).await.expect("metrics");

    let report = argo
        .run_chains(5, 3, Duration::from_secs(300))
        .await
        .expect("the chains succeed");

    let after = apimetrics::scrape(&ns.client()).await.expect("metrics");
    println!("{report}");
    assert_eq!(report.workflows, 5, "{report}");
    assert_eq!(report.steps_per_workflow, 3, "{report}");
    assert_eq!(report.steps, 15, "every suspend node succeeded: {report}");
    assert_eq!(
        report.latency_samples, 10,
        "two gaps per workflow: {report}"
    );
    assert!(report.workflows_per_second > 0.0, "{report}");
    // What the API server kept, independently of the report: the 5 chains
    // and start()'s warm-up workflow, all Succeeded.
    let kubectl = Kubectl::for_kubeconfig(&kubeconfig);
    let list = kubectl.json(&[
        "get",
        "workflows.argoproj.io",
        "-n",
        ns.name(),
        "-o",
        "json",
    ]);
    let phases: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|w| w["status"]["phase"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(phases, ["Succeeded"; 6], "{phases:?}");
    // The 5 creations went through the API server and were counted (at
    // least: the counters are the API server's, shared with the other test).
    let delta = after.since(&before);
    let created = delta
        .0
        .get(&apimetrics::WriteKey {
            resource: "workflows".into(),
            subresource: String::new(),
            verb: "POST".into(),
        })
        .copied()
        .unwrap_or(0);
    assert!(created >= 5, "{delta:?}");
}

#[tokio::test]
#[ignore = "needs Argo's workflow-controller and argoexec: run ARGO_BUILD_ARGOEXEC=1 e2e/argo/build first"]
async fn argo_pod_steps_run_on_the_stand_in_node() {
    let controller = coxswain_e2e::argo::binary().expect("workflow-controller built");
    let argoexec = controller.with_file_name("argoexec");
    assert!(
        argoexec.is_file(),
        "{} is missing: run ARGO_BUILD_ARGOEXEC=1 e2e/argo/build",
        argoexec.display()
    );
    let (ns, kubeconfig, argo) = argo_in_a_namespace().await;

    let report = argo
        // Small: each Argo pod copies argoexec (~110 MB) into an emptyDir,
        // which the stand-in node keeps on the host's disk.
        .run_chains_of(StepKind::Pod, 1, 2, Duration::from_secs(300))
        .await
        .expect("the pod chains succeed");

    println!("{report}");
    assert_eq!((report.workflows, report.steps), (1, 2), "{report}");
    assert_eq!(report.latency_samples, 1, "{report}");
    // Each step ran as a pod of its own, through Argo's executor.
    let kubectl = Kubectl::for_kubeconfig(&kubeconfig);
    let pods = kubectl.json(&["get", "pods", "-n", ns.name(), "-o", "json"]);
    let succeeded = pods["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|p| p["status"]["phase"] == "Succeeded")
        .count();
    assert_eq!(succeeded, 2, "{pods}");
}
