//! Test support for Coxswain's end-to-end tests.
//!
//! Tests must run against a real kube-apiserver (schemas, status subresources,
//! owner references, webhooks and watches behave as on users' clusters), so
//! this crate starts the Go harness in `e2e/cluster` — etcd, kube-apiserver,
//! kube-controller-manager and a stand-in node that runs pods as local
//! processes — once per test binary, or uses `KUBECONFIG` when it is set.
//! Every test gets its own namespace ([`TestNamespace`]).

pub mod apimetrics;
pub mod bench;
mod cluster;
mod controller;
mod error;
mod kubectl;
mod namespace;
mod wait;

pub use cluster::{client, kubeconfig, workspace_root};
pub use controller::ControllerProcess;
pub use error::Error;
pub use kubectl::Kubectl;
pub use namespace::TestNamespace;
pub use wait::{wait_for, wait_for_job_condition};

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

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
