//! What can go wrong in one attempt of a script, as a type: each variant
//! knows its stable code, so the engine (and later the controller's
//! conditions, Events and metrics) can tell a timeout from a bad output
//! without reading the message.

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use coxswain_core::api::StepError;
use coxswain_core::engine::{codes, step_error};

/// Why an attempt of a script failed. The messages are written for the
/// author of the flow.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The step gives both `source` and `command`.
    #[error("a script step gives either `source` or `command`, not both")]
    SourceAndCommand,
    /// The step gives neither `source` nor `command`.
    #[error("a script step needs `source` or `command`")]
    NoProgram,
    /// This executor was handed a step of another kind.
    #[error("the local script executor only runs script steps")]
    NotAScript,
    /// The attempt's private folders could not be made.
    #[error("cannot create {}: {source}", .path.display())]
    Scratch {
        /// The folder that could not be made.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Two input keys map to one file name.
    #[error("inputs `{first}` and `{second}` would both be written to $INPUTS/{file}; rename one")]
    InputClash {
        /// The key that took the name first.
        first: String,
        /// The key that wanted it too.
        second: String,
        /// The shared file name.
        file: String,
    },
    /// An input could not be written to its file.
    #[error("cannot write input `{key}`: {source}")]
    Input {
        /// The input's key.
        key: String,
        /// Why.
        source: io::Error,
    },
    /// A `valueFrom` variable's secret could not be read.
    #[error("environment variable {name}: {reason}")]
    Secret {
        /// The variable.
        name: String,
        /// What the secret store said.
        reason: crate::SecretError,
    },
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program, as written (or `sh` for `source`).
        program: String,
        /// Why.
        source: io::Error,
    },
    /// Waiting for the process failed.
    #[error("cannot wait for the script: {0}")]
    Wait(#[source] io::Error),
    /// The attempt ran past its timeout.
    #[error("the script ran longer than its timeout of {} and was stopped", show_duration(*.0))]
    Timeout(Duration),
    /// More on stdout than the cap allows.
    #[error("the script printed more than {} on stdout and was stopped", crate::net::size(*.0))]
    StdoutTooLarge(usize),
    /// The script exited unsuccessfully.
    #[error("{}", exit_message(*.status, .stderr))]
    Exit {
        /// How it ended.
        status: ExitStatus,
        /// The tail of stderr.
        stderr: String,
    },
    /// stdout did not match the declared fields.
    #[error(transparent)]
    Output(#[from] super::DeclaredOutputError),
    /// stdout is JSON but for a number no float can hold (`1e400`): the
    /// output would otherwise read as "not JSON", silently `null`.
    #[error(transparent)]
    NumberOutOfRange(#[from] coxswain_core::expr::numbers::OutOfRange),
    /// The files left in `$OUTPUTS` could not be kept in the workspace.
    #[error("cannot keep the files of $OUTPUTS in {}: {source}", .path.display())]
    KeepOutputs {
        /// Where they were to be kept.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A declared `file` field that names no file the script left in
    /// `$OUTPUTS`.
    #[error("the output field `{field}` is a file, but {reason}")]
    FileField {
        /// The field.
        field: String,
        /// What it named and why that is no file of `$OUTPUTS`.
        reason: String,
    },
    /// The files left in `$OUTPUTS` could not be listed.
    #[error("cannot list $OUTPUTS: {0}")]
    ListOutputs(#[source] io::Error),
}

impl ScriptError {
    /// The stable code recorded with the failure.
    pub fn code(&self) -> &'static str {
        match self {
            ScriptError::Secret { .. } => codes::SECRET,
            ScriptError::Timeout(_) => codes::TIMEOUT,
            ScriptError::StdoutTooLarge(_)
            | ScriptError::Output(_)
            | ScriptError::NumberOutOfRange(_)
            | ScriptError::FileField { .. } => codes::OUTPUT,
            _ => codes::SCRIPT,
        }
    }
}

impl From<ScriptError> for StepError {
    fn from(error: ScriptError) -> Self {
        step_error(error.code(), error.to_string())
    }
}

fn exit_message(status: ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("the script exited with status {code}"),
        (None, Some(signal)) => format!("the script was killed by signal {signal}"),
        (None, None) => "the script failed".to_string(),
    };
    let stderr = stderr.trim_end();
    if stderr.is_empty() {
        format!("{how} (stderr was empty)")
    } else {
        format!("{how}: {stderr}")
    }
}

fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}
