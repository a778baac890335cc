//! `crds/` and every file in `examples/` go through the real kubectl, as users
//! and Argo CD apply them, client-side and `--server-side`, and mean the same
//! to it (a YAML 1.1 reader) as to Coxswain (serde_yaml, YAML 1.2).
//!
//! This is the only place the shipped YAML is read by anything but serde_yaml:
//! a bare `on` key or a `yes` decision passes every Rust test and is then read
//! as a boolean by kubectl, so the API server refuses the CRD or the flow.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use coxswain::api::Flow;
use coxswain_e2e::{TestNamespace, wait_for, workspace_root};
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

/// The real kubectl: `E2E_KUBECTL` when set, else `/usr/bin/kubectl`, else
/// the one on `PATH`.
fn kubectl_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("E2E_KUBECTL") {
        return PathBuf::from(path);
    }
    let usr_bin = Path::new("/usr/bin/kubectl");
    if usr_bin.exists() {
        usr_bin.to_path_buf()
    } else {
        PathBuf::from("kubectl")
    }
}

/// Runs kubectl against the test cluster with its own discovery cache (so a
/// stale cache in `~/.kube` never answers for a CRD created a moment ago).
struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    async fn new() -> Self {
        let kubeconfig = tokio::task::spawn_blocking(coxswain_e2e::kubeconfig)
            .await
            .expect("kubeconfig task")
            .expect("a test cluster");
        let cache =
            workspace_root().join(format!("target/e2e/kubectl-cache-{}", std::process::id()));
        Self {
            binary: kubectl_binary(),
            kubeconfig,
            cache,
        }
    }

    /// kubectl's stdout, or its stderr as the error.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let output = Command::new(&self.binary)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "kubectl {}: {}\n{stdout}{stderr}",
                args.join(" "),
                output.status
            ))
        }
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: not JSON: {e}"))
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cache);
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
    wait_for("flows served", BOUND, || async {
        Ok(kubectl
            .run(&["get", "flows", "-A", "-o", "name"])
            .ok()
            .map(drop))
    })
    .await
    .expect("the Flow resource is served");
}

async fn delete_crds(kubectl: &Kubectl) {
    let names: Vec<String> = CRDS.iter().map(|n| format!("crd/{n}")).collect();
    let mut args = vec!["delete", "--wait=true", "--timeout=60s"];
    args.extend(names.iter().map(String::as_str));
    kubectl.run(&args).unwrap_or_else(|e| panic!("{e}"));
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
    let kubectl = Kubectl::new().await;
    apply_crds(&kubectl, Mode::ClientSide).await;
    kubectl_reads_every_shipped_file_as_coxswain_does(&kubectl);
    apply_examples(&kubectl, Mode::ClientSide).await;
    delete_crds(&kubectl).await;
    apply_crds(&kubectl, Mode::ServerSide).await;
    apply_examples(&kubectl, Mode::ServerSide).await;
}
