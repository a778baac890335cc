//! Test support for Coxswain's end-to-end tests.
//!
//! Tests must run against a real kube-apiserver (schemas, status subresources,
//! owner references, webhooks and watches behave as on users' clusters), so
//! this crate starts the Go harness in `e2e/cluster` — etcd, kube-apiserver,
//! kube-controller-manager and a stand-in node that runs pods as local
//! processes — once per test binary, or uses `KUBECONFIG` when it is set.
//! Every test gets its own namespace ([`TestNamespace`]). Chat tests get a
//! real Matrix homeserver, Synapse from PyPI, the same way ([`Synapse`]),
//! and a room each.

pub mod apimetrics;
pub mod argo;
pub mod bench;
pub mod chat;
mod cluster;
mod controller;
mod error;
pub mod faults;
mod images;
mod kubectl;
mod namespace;
mod pods;
pub mod rbac;
mod setup;
pub mod shards;
pub mod tls;
mod wait;

pub use argo::Argo;
pub use chat::{MatrixUser, Synapse};
pub use cluster::{
    Node, client, client_for, kubeconfig, node, restart_apiserver, state_dir, use_real_node,
    workspace_root,
};
pub use controller::ControllerProcess;
pub use error::Error;
pub use faults::{FaultPlan, FaultProxy};
pub use images::{
    BUSYBOX_IMAGE, COXSWAIN_IMAGE, DEBIAN_IMAGE, MUSL_IMAGE, STATIC_IMAGE, load_image,
    real_node_images,
};
pub use kubectl::{Kubectl, words};
pub use namespace::TestNamespace;
pub use pods::{free_finished_pods, wait_pod_finished};
pub use setup::{NOT_A_FLOW, Setup};
pub use wait::{create_when_discovered, wait_crd_established, wait_for, wait_for_job_condition};

/// The `coxswain` executable built beside the running test binary
/// (`target/debug/coxswain` for `target/debug/deps/TEST`), or beside the
/// running program (`target/release/coxswain` for `target/release/bench`),
/// for pods that run it (on the stand-in node the host's files stand in
/// for images). `E2E_COXSWAIN=path` names another (the benchmark compares
/// two builds so). `cargo test --workspace` builds it; alone, `cargo test
/// -p coxswain-e2e` does not, hence the error naming the command that does.
pub fn coxswain_bin() -> Result<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("E2E_COXSWAIN") {
        let path = std::path::PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::NotBuilt(path))
        };
    }
    let exe = std::env::current_exe()?;
    let here = exe.parent().unwrap_or(std::path::Path::new("."));
    let beside = here.join("coxswain");
    if here.file_name().is_some_and(|d| d != "deps") && beside.is_file() {
        return Ok(beside);
    }
    let bin = here
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("coxswain");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(Error::NotBuilt(bin))
    }
}

/// [`coxswain_bin`] without its debug information (`strip`; 55 MiB instead
/// of 340 MiB for a debug build), for controllers whose Jobs copy it into
/// every step pod (`--job-executable`): a test running dozens of script
/// steps at once would otherwise fill the disk with copies. Made once per
/// build of the binary, at `target/e2e/coxswain-stripped`; without `strip`,
/// the binary itself.
pub fn stripped_coxswain_bin() -> Result<std::path::PathBuf> {
    // One stripping at a time in this process: tests starting controllers
    // at once would otherwise write the same partial file, and all but
    // the first rename would fail.
    static STRIPPING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = STRIPPING.lock().unwrap_or_else(|e| e.into_inner());
    let bin = coxswain_bin()?;
    let out = workspace_root().join("target/e2e/coxswain-stripped");
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&out).is_some() && modified(&out) >= modified(&bin) {
        return Ok(out);
    }
    std::fs::create_dir_all(out.parent().unwrap_or(std::path::Path::new(".")))?;
    // Stripped beside it, then renamed: test binaries running at once
    // never see half a file.
    let partial = out.with_extension(format!("{}.partial", std::process::id()));
    let stripped = std::process::Command::new("strip")
        .arg("-o")
        .arg(&partial)
        .arg(&bin)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        let _ = std::fs::remove_file(&partial);
        return Ok(bin);
    }
    std::fs::rename(&partial, &out)?;
    Ok(out)
}

/// A tool the tests build from Go modules (helm, lua-health): the path
/// in the environment variable `env` when it is set, else
/// `target/e2e/NAME`, built first with `script` (from the workspace root,
/// e.g. `e2e/helm/build`) when it is not there. Panics if the build fails.
pub fn built_tool(env: &str, name: &str, script: &str) -> std::path::PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return path.into();
    }
    let root = workspace_root();
    let path = root.join("target/e2e").join(name);
    if !path.is_file() {
        let status = std::process::Command::new(root.join(script))
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("running {script}: {e}"));
        assert!(status.success(), "{script} exited with {status}");
    }
    path
}

/// A port nothing listens on now on the loopback address, for a server a
/// test starts in another process (a webhook, Argo's metrics).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Serves `app` on a free loopback port in the background, for as long as
/// the test runs, and returns its address: a stand-in for a web service a
/// flow's steps call.
pub async fn serve_on_loopback(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// kubectl with the CRDs installed, and a namespace of the test's own:
/// where a test that drives the cluster without [`Setup`] starts.
pub async fn kubectl_and_namespace() -> (Kubectl, TestNamespace) {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    (kubectl, ns)
}

/// The manifest of a Flow named `name` whose `spec` is the YAML given (its
/// lines indented as under `spec:`, a leading newline allowed): the
/// envelope every test's flow shares, written once, so a test shows only
/// what its flow does.
pub fn flow(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: {name}}}\nspec:\n{}",
        spec.trim_start_matches('\n')
    )
}

/// Whether `value` is a string with `part` in it: how tests check a
/// message or a log of which they know only a piece.
pub fn has_text(value: &serde_json::Value, part: &str) -> bool {
    value.as_str().is_some_and(|t| t.contains(part))
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
