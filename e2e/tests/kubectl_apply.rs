//! `crds/` and every file in `examples/` go through the real kubectl, as users
//! and Argo CD apply them, client-side and `--server-side`, and mean the same
//! to it (a YAML 1.1 reader) as to Coxswain (serde_yaml, YAML 1.2).
//!
//! This is the only place the shipped YAML is read by anything but serde_yaml:
//! a bare `on` key or a `yes` decision passes every Rust test and is then read
//! as a boolean by kubectl, so the API server refuses the CRD or the flow.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use coxswain_core::api::Flow;
use coxswain_e2e::{Kubectl, TestNamespace, wait_for, workspace_root};
use serde_json::Value;

const CRDS: [&str; 3] = [
    "flows.coxswain.dev",
    "runs.coxswain.dev",
    "approvals.coxswain.dev",
];
const BOUND: Duration = Duration::from_secs(60);

/// How a file reaches the API server: kubectl's three-way merge with the
/// last-applied annotation, or an apply patch the server merges (Argo CD's
/// `ServerSideApply=true`).
#[derive(Clone, Copy, Debug)]
enum Mode {
    ClientSide,
    ServerSide,
}

impl Mode {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Mode::ClientSide => &[],
            Mode::ServerSide => &["--server-side", "--field-manager=coxswain-e2e"],
        }
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("workspace paths are UTF-8")
}

fn examples() -> Vec<PathBuf> {
    let dir = workspace_root().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .map(|e| e.expect("examples/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "examples/ has {} flows", files.len());
    files
}

/// What kubectl reads from `file` before anything is sent: a client-side dry
/// run prints the object as parsed, with no server defaults; it only fills in
/// the namespace of a namespaced object that names none, which is dropped.
fn kubectl_reads(kubectl: &Kubectl, file: &Path) -> Value {
    let mut object = kubectl.json(&[
        "create",
        "--dry-run=client",
        "-o",
        "json",
        "-f",
        path_str(file),
    ]);
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && metadata.get("namespace") == Some(&Value::from("default"))
    {
        metadata.remove("namespace");
    }
    object
}

fn serde_yaml_reads(file: &Path) -> Value {
    let text = std::fs::read_to_string(file).expect("readable file");
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Applies `crds/` and waits until every CRD is Established.
async fn apply_crds(kubectl: &Kubectl, mode: Mode) {
    let dir = workspace_root().join("crds");
    let mut args = vec!["apply", "-f", path_str(&dir)];
    args.extend(mode.flags());
    if let Err(e) = kubectl.run(&args) {
        panic!("{mode:?}: kubectl cannot apply crds/: {e}");
    }
    let names: Vec<String> = CRDS.iter().map(|n| format!("crd/{n}")).collect();
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    wait.extend(names.iter().map(String::as_str));
    kubectl.run(&wait).unwrap_or_else(|e| panic!("{e}"));
    // kubectl's discovery can lag the Established condition by a moment.
    // Listing every kind also makes the API server build each one's storage
    // now: it does so on first use, and a CRD deleted while its storage is
    // still initializing has its instance cleanup retried with a growing
    // backoff, which once took the deletion past a minute.
    wait_for("every kind served", BOUND, || async {
        Ok(kubectl
            .run(&["get", "flows,runs,approvals", "-A", "-o", "name"])
            .ok()
            .map(drop))
    })
    .await
    .expect("Flows, Runs and Approvals are served");
}

/// Deletes the CRDs and waits until they are gone; when they are not, the
/// panic shows each one's conditions (the Terminating one says why).
async fn delete_crds(kubectl: &Kubectl) {
    let names: Vec<String> = CRDS.iter().map(|n| format!("crd/{n}")).collect();
    let mut args = vec!["delete", "--wait=true", "--timeout=180s"];
    args.extend(names.iter().map(String::as_str));
    if let Err(e) = kubectl.run(&args) {
        let mut get = vec!["get", "--ignore-not-found", "-o", "json"];
        get.extend(names.iter().map(String::as_str));
        let left = kubectl.run(&get).unwrap_or_else(|e| e);
        panic!("{e}\nthe CRDs still there:\n{left}");
    }
}

/// Applies every example into a fresh namespace, then checks that the `spec`
/// the API server kept is what Coxswain's own parser reads from the file.
async fn apply_examples(kubectl: &Kubectl, mode: Mode) {
    let ns = TestNamespace::new().await.expect("namespace");
    for file in examples() {
        let mut args = vec!["apply", "-n", ns.name(), "-f", path_str(&file)];
        args.extend(mode.flags());
        if let Err(e) = kubectl.run(&args) {
            panic!("{mode:?}: kubectl cannot apply {}: {e}", file.display());
        }
        let text = std::fs::read_to_string(&file).expect("readable example");
        let flow: Flow =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = flow.metadata.name.clone().expect("examples are named");
        let kept = kubectl.json(&["get", "flow", &name, "-n", ns.name(), "-o", "json"]);
        let ours = serde_json::to_value(&flow.spec).expect("a spec serializes");
        assert_eq!(
            kept["spec"],
            ours,
            "{mode:?}: the API server kept a different spec for {} than Coxswain reads",
            file.display()
        );
    }
}

/// kubectl (YAML 1.1) and serde_yaml (YAML 1.2) read every shipped file the
/// same, before any server is involved: a bare `on`, `yes` or `0x1f` in any
/// of them would differ here. Needs the Flow CRD served (kubectl maps the
/// kind even for a dry run).
fn kubectl_reads_every_shipped_file_as_coxswain_does(kubectl: &Kubectl) {
    let crds = workspace_root().join("crds");
    let mut files: Vec<PathBuf> = ["flows.yaml", "runs.yaml", "approvals.yaml"]
        .iter()
        .map(|name| crds.join(name))
        .collect();
    files.extend(examples());
    for file in files {
        assert_eq!(
            kubectl_reads(kubectl, &file),
            serde_yaml_reads(&file),
            "kubectl reads {} differently from serde_yaml",
            file.display()
        );
    }
}

/// `kubectl apply -f crds/` and `-f` each example, client-side; then the same
/// with `--server-side` after the CRDs were deleted, as a new user or Argo CD
/// would. The CRDs are cluster-wide, so every pass runs in this one test.
#[tokio::test]
async fn crds_and_examples_apply_with_kubectl_and_mean_the_same() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    apply_crds(&kubectl, Mode::ClientSide).await;
    kubectl_reads_every_shipped_file_as_coxswain_does(&kubectl);
    apply_examples(&kubectl, Mode::ClientSide).await;
    delete_crds(&kubectl).await;
    apply_crds(&kubectl, Mode::ServerSide).await;
    apply_examples(&kubectl, Mode::ServerSide).await;
}
