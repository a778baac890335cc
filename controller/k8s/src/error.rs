//! What can go wrong, in two kinds kept apart: [`StartError`] stops the
//! process (it could not start, or must stop: the process exits non-zero
//! and is restarted), [`Error`] fails one reconcile, which is tried again.
//! Neither is a step's failure (those go into the Run's status).

pub use coxswain_kube::values::ValueError;

/// A reconcile that could not finish; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, such as `writing the status of run ns/name`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A child object's content could not be read back.
    #[error("{0}")]
    Corrupt(String),
    /// The controller's cache of a kind has not been listed yet (its CRD
    /// may be missing); deciding on an empty cache could start work twice.
    #[error("the controller's cache of {0} is not filled yet; is its CRD installed?")]
    CacheNotReady(&'static str),
    /// A Run's moved values could not be read back or written: a
    /// request failed, a piece was replaced (the run fails as tampered
    /// with, the object is left alone), or the values and the status do
    /// not fit together.
    #[error(transparent)]
    Values(#[from] ValueError),
}

impl Error {
    /// Wraps a client error with what was being done.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            action: action.into(),
            source,
        }
    }

    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { source, .. } => kube_label(source),
            Error::Corrupt(_) => "corrupt",
            Error::CacheNotReady(_) => "cache",
            Error::Values(ValueError::Kube { source, .. }) => kube_label(source),
            Error::Values(ValueError::Corrupt(_)) => "corrupt",
            Error::Values(ValueError::Offload { .. }) => "offload",
            Error::Values(ValueError::Tampered { .. }) => "tampered",
        }
    }
}

/// The metric label of a client error.
fn kube_label(source: &kube::Error) -> &'static str {
    match source {
        kube::Error::Api(status) if status.code == 409 => "conflict",
        kube::Error::Api(_) => "api",
        _ => "client",
    }
}

/// Why `coxswain controller` could not start, or had to stop: the process
/// exits non-zero. Kept apart from [`Error`] so that a reconcile cannot
/// return one by mistake, and a start-up failure is never retried as a
/// reconcile.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The cluster could not be reached at start (no kubeconfig, no
    /// in-cluster service account).
    #[error("connecting to the cluster (KUBECONFIG or in-cluster): {0}")]
    Connect(#[source] kube::Error),
    /// A setting (flag or environment variable) is wrong, or an address it
    /// names cannot be listened on.
    #[error("{0}")]
    Setting(String),
    /// The controller cannot run as a service: metrics address, logging,
    /// signals or the Lease (see [`crate::ops`]).
    #[error(transparent)]
    Ops(#[from] crate::ops::OpsError),
    /// The admission webhook could not start: its settings, TLS material or
    /// listening address (see [`crate::admission`]).
    #[error(transparent)]
    Admission(#[from] crate::admission::AdmissionError),
}
