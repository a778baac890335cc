//! Errors of the test support, typed so a failing test says what broke:
//! building, starting, talking to, or waiting on the cluster.

use std::time::Duration;

/// Why the test support could not give a test its cluster or condition.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `e2e/cluster/build` failed (Go toolchain, module download or compile).
    #[error("building the e2e cluster harness failed: {0}")]
    Build(String),
    /// The harness did not start or did not print its readiness line.
    #[error("starting the e2e cluster failed: {0}")]
    Start(String),
    /// The real node's images could not be built or imported.
    #[error("preparing the real node's images failed: {0}")]
    Images(String),
    /// An executable the tests run in pods is not built.
    #[error("{} is missing: build it with `cargo build -p coxswain` (cargo test --workspace does)", .0.display())]
    NotBuilt(std::path::PathBuf),
    /// Argo Workflows' controller (the benchmark peer) is not built.
    #[error("{} is missing: build it with `e2e/argo/build` (~18 minutes cold; or set E2E_ARGO, or E2E_ARGO_NOSLEEP for the build without the post-update sleep, to a workflow-controller binary)", .0.display())]
    ArgoNotBuilt(std::path::PathBuf),
    /// Argo Workflows could not be installed, started or driven.
    #[error("argo workflows: {0}")]
    Argo(String),
    /// A local file or process operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The API server's metrics could not be read.
    #[error("{0}")]
    Metrics(String),
    /// The benchmark could not go on.
    #[error("benchmark: {0}")]
    Bench(String),
    /// The e2e Matrix homeserver could not be started, read or reached.
    #[error("matrix: {0}")]
    Chat(String),
    /// The homeserver answered a request with an error (Matrix's
    /// `errcode`, e.g. `M_FORBIDDEN`, `M_USER_IN_USE`, `M_LIMIT_EXCEEDED`).
    #[error("matrix: {request}: HTTP {status} {errcode}: {error}")]
    MatrixRefused {
        /// Method and path, `PUT /_matrix/client/v3/rooms/…`.
        request: String,
        /// The HTTP status.
        status: u16,
        /// Matrix's error code, empty when the answer had none.
        errcode: String,
        /// Matrix's error text, or the whole answer.
        error: String,
    },
    /// A condition was not reached in time (a bound, not a timing assertion).
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
}
