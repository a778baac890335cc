//! [`PluginError`]: why a plugin command could not do what was asked. Each
//! message names the run, step or flag at fault; answers of the API server
//! (an admission webhook's refusal above all) are printed as they came.

use super::super::CliError;

/// What went wrong in a `kubectl coxswain` command.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The command line gave something unusable (a file, an input).
    #[error(transparent)]
    Cli(#[from] CliError),
    /// No kubeconfig (or in-cluster settings) to reach a cluster with.
    #[error("cannot reach a cluster: {0}")]
    Config(String),
    /// The API server answered with an error: printed as kubectl prints it,
    /// `Error from server (Reason): message`.
    #[error("Error from server{}: {}", reason(.0), .0.message)]
    Server(Box<kube::core::Status>),
    /// The API server could not be reached or its answer not read.
    #[error("talking to the cluster: {0}")]
    Client(String),
    /// No Run of that name in the namespace.
    #[error("no run `{run}` in namespace `{namespace}`")]
    NoRun {
        /// The run asked for.
        run: String,
        /// Where it was looked for.
        namespace: String,
    },
    /// The run was deleted while it was watched.
    #[error("run `{0}` was deleted")]
    RunDeleted(String),
    /// No Flow of that name in the namespace.
    #[error(
        "no flow `{flow}` in namespace `{namespace}` (`kubectl get flows -n {namespace}` lists them)"
    )]
    NoFlow {
        /// The flow asked for.
        flow: String,
        /// Where it was looked for.
        namespace: String,
    },
    /// A step key the run's status does not have.
    #[error("run `{run}` has no step `{step}`; its steps: {known}")]
    NoStep {
        /// The run.
        run: String,
        /// The step asked for.
        step: String,
        /// The keys it has, comma-separated.
        known: String,
    },
    /// `approve`: no open Approval matches, or several do.
    #[error("{0}")]
    Approval(String),
    /// `--response` is not JSON.
    #[error("--response is not JSON: {0}")]
    ResponseNotJson(serde_json::Error),
    /// `approve` without anything to answer with.
    #[error("give --decision (and --feedback) or --response")]
    NoAnswer,
    /// `wait --timeout` ran out.
    #[error("timed out after {waited} waiting for run `{run}` to end (it is {phase})")]
    TimedOut {
        /// The run.
        run: String,
        /// The timeout as given.
        waited: String,
        /// Where it stood.
        phase: String,
    },
    /// `retry`: the run cannot be rerun (not ended, no such step, nothing failed).
    #[error("{0}")]
    Retry(String),
    /// `graph`: the run's flow cannot be read.
    #[error("{0}")]
    Flow(String),
}

fn reason(status: &kube::core::Status) -> String {
    if status.reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", status.reason)
    }
}

impl From<kube::Error> for PluginError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => PluginError::Server(status),
            other => PluginError::Client(other.to_string()),
        }
    }
}

impl From<kube::runtime::watcher::Error> for PluginError {
    fn from(e: kube::runtime::watcher::Error) -> Self {
        use kube::runtime::watcher::Error as W;
        match e {
            W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => e.into(),
            W::WatchError(status) => PluginError::Server(status),
            other => PluginError::Client(other.to_string()),
        }
    }
}
