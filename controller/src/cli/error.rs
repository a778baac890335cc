//! [`CliError`]: why a command could not start its work. Every message
//! names the file, flag or value at fault; the command prints it and exits
//! with 2 (nothing ran).

use std::path::PathBuf;

use super::read::ReadError;
use coxswain_core::flow::FlowError;

/// What is wrong with what the command line gave.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A file could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The flow file is not YAML.
    #[error("{}: not YAML: {source}", file.display())]
    NotYaml {
        /// The flow file.
        file: PathBuf,
        /// What the YAML reader said.
        source: Box<FlowError>,
    },
    /// No Flow document (of the name asked for) in the file.
    #[error("{}: no Flow{} in it", file.display(), name.as_ref().map(|n| format!(" named {n}")).unwrap_or_default())]
    NoFlow {
        /// The flow file.
        file: PathBuf,
        /// The name asked for with `--flow`.
        name: Option<String>,
    },
    /// A Flow document that does not read as a flow.
    #[error("{}: flow {name}: {source}", file.display())]
    BadFlow {
        /// The flow file.
        file: PathBuf,
        /// The Flow's name.
        name: String,
        /// Where and why it does not fit.
        source: Box<FlowError>,
    },
    /// A flow with scalars kubectl and Argo CD (YAML 1.1) read otherwise
    /// than serde_yaml does, or refuse: run as written, the same file would
    /// mean one thing here and another on a cluster.
    #[error("{}: flow {name}: kubectl and Argo CD would read this flow differently, so it is not run; quote as said (`coxswain lint` says the same):\n{}", file.display(), found.iter().map(|f| format!("  {f}")).collect::<Vec<_>>().join("\n"))]
    ReadsDifferently {
        /// The flow file.
        file: PathBuf,
        /// The Flow's name.
        name: String,
        /// lint's message for each scalar, with its line and column.
        found: Vec<String>,
    },
    /// A JSON context file for `eval` or `render` that is not JSON.
    #[error("context {} is not JSON: {source}", path.display())]
    ContextNotJson {
        /// The context file.
        path: PathBuf,
        /// Where the JSON went wrong.
        source: serde_json::Error,
    },
    /// The run input is not JSON.
    #[error("the input is not JSON: {0}")]
    InputNotJson(serde_json::Error),
    /// The run input does not fit the flow's input schema.
    #[error("the input does not fit flow {flow}:\n{}", problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    InputDoesNotFit {
        /// The flow's name.
        flow: String,
        /// Each problem, with where it is.
        problems: Vec<coxswain_core::flow::InputProblem>,
    },
    /// A run record (`graph --record`) that is not JSON.
    #[error("record {} is not JSON: {source}", path.display())]
    RecordNotJson {
        /// The record file (`-` for standard input).
        path: PathBuf,
        /// Where the JSON went wrong.
        source: serde_json::Error,
    },
    /// A Run object whose status is not written yet.
    #[error("record {} is a Run with no status yet: nothing has happened to draw", path.display())]
    RecordNoStatus {
        /// The record file.
        path: PathBuf,
    },
    /// JSON with no `phase`: not a run's status.
    #[error("record {} is not a run's record: it has no `phase`", path.display())]
    RecordNoPhase {
        /// The record file.
        path: PathBuf,
    },
    /// JSON that does not have the shape of a run's status.
    #[error("record {} is not a run's record: {source}", path.display())]
    RecordShape {
        /// The record file.
        path: PathBuf,
        /// What does not fit.
        source: serde_json::Error,
    },
    /// `coxswain run --from REC --step KEY` that cannot rerun that record
    /// with the flow given (another flow, a run not ended, no such step).
    #[error("cannot rerun {} from `{step}`: {source}", path.display())]
    Rerun {
        /// The record file.
        path: PathBuf,
        /// The step asked for.
        step: String,
        /// What is wrong.
        source: coxswain_core::engine::RerunError,
    },
    /// A record that names steps the flow does not have.
    #[error("record {} is not a run of flow {flow}: it names steps the flow does not have: {names}", path.display())]
    RecordStrangeSteps {
        /// The record file.
        path: PathBuf,
        /// The flow's name.
        flow: String,
        /// The first few step names, quoted, and how many more.
        names: String,
    },
    /// A record of a successful run in which none of the flow's steps ran.
    #[error("record {} is not a run of flow {flow}: it says the run succeeded but none of the flow's steps ran", path.display())]
    RecordNothingRan {
        /// The record file.
        path: PathBuf,
        /// The flow's name.
        flow: String,
    },
    /// A path named to `lint` that cannot be read, or a directory under it
    /// that cannot be listed.
    #[error("cannot {act} {}: {source}", path.display())]
    Walk {
        /// `read` or `list`.
        act: &'static str,
        /// The path.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// `graph --archived`: the run is not archived, or the archive cannot
    /// be read.
    #[error("{0}")]
    Archive(String),
    /// `--decide` answers that cannot be used, one message each.
    #[error("{}", .0.join("\n"))]
    Answers(Vec<String>),
}
