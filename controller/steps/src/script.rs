//! `script` steps as local processes, for `coxswain run`.
//!
//! In a cluster a script is a Job; on a laptop the host stands in for the
//! image. Everything else is the same contract (inputs, outputs, exit code
//! and environment, as below), so a flow tried locally behaves the same in
//! the cluster:
//!
//! - Each input is a file in `$INPUTS`. When the step's input is a JSON
//!   object, each of its keys is one input, in a file named after the key
//!   (characters other than letters, digits, `.`, `-` and `_` become `_`).
//!   An object value is written as itself, any other value as `{"data": v}`.
//!   An input that is not an object is one file, `$INPUTS/input`, in the same
//!   form; a `null` input gives no files. Work a reviewer sent back also
//!   finds `$INPUTS/review`: `{decision, feedback, by, reviewed}` (see
//!   [`work_input_files`]).
//! - `$OUTPUTS` starts empty; `$WORKSPACE` is an empty working directory (also
//!   the process's current directory), or in a run with a workspace the
//!   run's shared folder of checkouts, with `$BRANCH` the run's branch
//!   (see [`LocalScript::with_workspace`]); `$HOME` and `$TMPDIR` are empty
//!   folders of the attempt's own. All of them, and the input files, are
//!   private to the user running the flow (folders 0700, files 0600).
//! - The environment is built from nothing: `$RUN_NAME`, `$STEP_KEY`,
//!   `$ATTEMPT`, `$SINCE` and `$LAST_RUN` (empty unless the run was
//!   scheduled), the folders above, `PATH` (the runner's, so a flow tried on
//!   a laptop finds its author's tools; a fixed default when the runner has
//!   none), `LANG`, `LC_ALL` and `TZ` when the runner sets them, and every
//!   variable of the step's `env` (which wins). Nothing else of the runner's
//!   environment — API keys, tokens, `COXSWAIN_SECRET_*` — reaches a script.
//! - stdout is the output: with declared `output.fields`, exactly one JSON
//!   object with those fields and types; without, any JSON, where
//!   `{"data": v}` gives `v`, and stdout that is not JSON gives `null`. The
//!   step's `text` is always the raw stdout.
//! - Files the script leaves in `$OUTPUTS` are listed, as paths relative to
//!   `$OUTPUTS` in sorted order, under `files` in the output when the output
//!   is an object that has no `files` of its own. The list is capped (1000
//!   names, 64 KiB of them); a cut list comes with `filesTruncated: true` and
//!   `filesTotal`. A declared field of type `file` must name one of those
//!   files (relative to `$OUTPUTS`, or under it). Without a workspace the
//!   folder is removed with the rest of the attempt's scratch space, so the
//!   list says what was produced, not where to read it; with one, the files
//!   are kept in `$WORKSPACE/.coxswain/outputs/<step>/<attempt>/` (a part's
//!   under `<round>.<part>/<attempt>/`), `files` lists them by the kept
//!   paths, and file fields, and any other text of the output that is the
//!   path of one of them under `$OUTPUTS`, are rewritten to those paths.
//! - The process runs in its own process group. When it ends, times out or
//!   the attempt is cancelled, the whole group is killed, so nothing the
//!   script started in the background outlives the attempt. The timeout
//!   covers the whole attempt, reading stdout included; once the script has
//!   exited, reading stops after a short grace period even when a process
//!   that left the group (`setsid`) still holds the pipes, and the attempt
//!   ends with what was read.

mod env;
mod error;
mod files;
mod keep;
mod process;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::process::Command;

use super::{Executor, Secrets};
use coxswain_core::api::{LOG_TAIL_BYTES, LogTail, ScriptStep, kept_outputs_path};
use coxswain_core::engine::{Done, Failed, Task, Work, WorkResult};
use coxswain_core::flow::Shape;

pub use env::{Attempt, DEFAULT_PATH, Folders, HostEnv};
pub use error::ScriptError;
pub use files::{DEFAULT_MAX_FILES, DEFAULT_MAX_LISTING_BYTES, ListingCaps};
pub use process::{DEFAULT_DRAIN_GRACE, Echoes};

/// Where each attempt's stdout and stderr are copied as they come: the
/// pod's own log in a cluster, the lines `coxswain run` shows under a step.
pub trait Echo: Send + Sync {
    /// The copies for `attempt`'s streams (either may be `None`); a copy is
    /// dropped, and so flushed, when the attempt ends.
    fn open(&self, attempt: &Attempt) -> Echoes;
}

/// Default cap on captured stdout, the most a status keeps of one value;
/// a bigger output fails the attempt.
pub const DEFAULT_STDOUT_LIMIT: usize = coxswain_core::api::MAX_VALUE_BYTES;
/// Default size of the stderr tail kept for the error message.
pub const DEFAULT_STDERR_TAIL: usize = LOG_TAIL_BYTES;

/// Runs `script` steps as processes on this machine.
#[derive(Clone)]
pub struct LocalScript {
    secrets: Arc<dyn Secrets>,
    caps: process::Caps,
    listing: ListingCaps,
    host: HostEnv,
    scratch: Option<PathBuf>,
    echo: Option<Arc<dyn Echo>>,
    workspace: Option<SharedWorkspace>,
}

/// The run's workspace, as the script executor sees it: where it is and
/// the run's branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedWorkspace {
    /// The folder every attempt gets as `$WORKSPACE`; `None` where the
    /// attempt's folders already put it there (a Job's mounted volume).
    pub dir: Option<PathBuf>,
    /// The run's branch, `$BRANCH`.
    pub branch: String,
}

impl std::fmt::Debug for LocalScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalScript")
            .field("caps", &self.caps)
            .field("listing", &self.listing)
            .field("scratch", &self.scratch)
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl LocalScript {
    /// An executor reading `valueFrom` variables from `secrets`, with the
    /// default caps, `PATH`/`LANG`/`LC_ALL`/`TZ` from this process, and
    /// scratch space in the system's temporary directory.
    pub fn new(secrets: Arc<dyn Secrets>) -> Self {
        LocalScript {
            secrets,
            caps: process::Caps {
                stdout_limit: DEFAULT_STDOUT_LIMIT,
                stderr_tail: DEFAULT_STDERR_TAIL,
                drain_grace: DEFAULT_DRAIN_GRACE,
            },
            listing: ListingCaps::default(),
            host: HostEnv::current(),
            scratch: None,
            echo: None,
            workspace: None,
        }
    }

    /// Sets the largest stdout accepted, in bytes; a script printing more is
    /// stopped and its attempt fails, so a runaway script cannot fill memory.
    pub fn with_stdout_limit(mut self, bytes: usize) -> Self {
        self.caps.stdout_limit = bytes;
        self
    }

    /// Sets how many trailing bytes of stderr are kept for the error message.
    pub fn with_stderr_tail(mut self, bytes: usize) -> Self {
        self.caps.stderr_tail = bytes;
        self
    }

    /// Sets how long reading stdout and stderr goes on after the script
    /// has exited, for processes it left holding the pipes.
    pub fn with_drain_grace(mut self, grace: Duration) -> Self {
        self.caps.drain_grace = grace;
        self
    }

    /// Sets the caps of the `files` list.
    pub fn with_listing_caps(mut self, caps: ListingCaps) -> Self {
        self.listing = caps;
        self
    }

    /// Takes `PATH`, `LANG`, `LC_ALL` and `TZ` from `host` instead of this
    /// process's environment (nothing else of it reaches a script anyway).
    pub fn with_host_env(mut self, host: HostEnv) -> Self {
        self.host = host;
        self
    }

    /// Copies each attempt's stdout and stderr to what `echo` opens, as
    /// they come.
    pub fn with_echo(mut self, echo: Arc<dyn Echo>) -> Self {
        self.echo = Some(echo);
        self
    }

    /// Puts each attempt's scratch directory under `dir` instead of the
    /// system's temporary directory.
    pub fn with_scratch_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.scratch = Some(dir.into());
        self
    }

    /// Runs every attempt in the run's workspace: `$WORKSPACE` is the
    /// shared folder (also the current directory), `$BRANCH` the run's
    /// branch, and what an attempt leaves in `$OUTPUTS` is kept under
    /// `$WORKSPACE/.coxswain/outputs/`, its file attributes rewritten to
    /// the kept paths.
    pub fn with_workspace(mut self, workspace: SharedWorkspace) -> Self {
        self.workspace = Some(workspace);
        self
    }

    async fn run_script(&self, work: &Work, step: &ScriptStep) -> WorkResult {
        let failed = |e: ScriptError| Failed::from(coxswain_core::api::StepError::from(e));
        let scratch = self.scratch_dir().map_err(failed)?;
        let dir = |name: &str| scratch.path().join(name);
        let (inputs, outputs, workspace, home, tmp) = (
            dir("inputs"),
            dir("outputs"),
            dir("workspace"),
            dir("home"),
            dir("tmp"),
        );
        for path in [&inputs, &outputs, &workspace, &home, &tmp] {
            private_dir(path).map_err(failed)?;
        }
        let workspace = match self.workspace.as_ref().and_then(|w| w.dir.clone()) {
            Some(shared) => shared,
            None => workspace,
        };
        write_inputs(&inputs, work).map_err(failed)?;
        let folders = Folders {
            inputs: &inputs,
            outputs: &outputs,
            workspace: &workspace,
            home: &home,
            tmp: &tmp,
        };
        let step_env = self.step_env(step).await.map_err(failed)?;
        let attempt = Attempt::of(work);
        self.run_in(step, &folders, &attempt, step_env, work.timeout)
            .await
    }

    /// Runs `step` in folders that already exist, its inputs already in
    /// `folders.inputs`, with the step's `env` already resolved: the part of
    /// an attempt a Job's pod shares with a local run (there, Kubernetes
    /// makes the folders and reads the secrets). Everything else of the
    /// contract — the environment, stdout's rules, the `files` list, the
    /// process group, the timeout, the errors and the stderr tail kept in
    /// the attempt's status — is this one code.
    pub async fn run_in(
        &self,
        step: &ScriptStep,
        folders: &Folders<'_>,
        attempt: &Attempt,
        step_env: Vec<(String, String)>,
        timeout: Option<Duration>,
    ) -> WorkResult {
        let mut stderr = (Vec::new(), false);
        let result = self
            .attempt_in(step, folders, attempt, step_env, timeout, &mut stderr)
            .await;
        let log = LogTail::of(&stderr.0, LOG_TAIL_BYTES, stderr.1);
        match result {
            Ok(done) => Ok(Done { log, ..done }),
            Err(e) => Err(Failed {
                log,
                ..Failed::from(coxswain_core::api::StepError::from(e))
            }),
        }
    }

    async fn attempt_in(
        &self,
        step: &ScriptStep,
        folders: &Folders<'_>,
        attempt: &Attempt,
        step_env: Vec<(String, String)>,
        timeout: Option<Duration>,
        stderr: &mut (Vec<u8>, bool),
    ) -> Result<Done, ScriptError> {
        let mut command = build_command(step)?;
        command
            .env_clear()
            .envs(env::contract_vars(&self.host, folders, attempt));
        if let Some(workspace) = &self.workspace {
            command.env("BRANCH", &workspace.branch);
        }
        for (name, value) in step_env {
            command.env(name, value);
        }
        command
            .current_dir(folders.workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);

        let echoes = match &self.echo {
            Some(echo) => echo.open(attempt),
            None => Echoes::default(),
        };
        let stdout = self.execute(command, step, timeout, echoes, stderr).await?;
        let text = String::from_utf8_lossy(&stdout).into_owned();
        if let Some(e) = coxswain_core::expr::numbers::number_out_of_range(&text) {
            return Err(e.into());
        }
        let shape = Shape::of_script(step.output.as_ref());
        let mut output = match shape {
            Shape::Any => undeclared_output(&text),
            shape => check_declared(&text, shape)?,
        };
        // `file` fields are the one object's own (validation allows them
        // nowhere else).
        let declared = match shape {
            Shape::Object(fields) => fields,
            _ => &[],
        };
        match &self.workspace {
            None => {
                keep::file_fields(
                    &mut output,
                    declared,
                    folders.outputs,
                    folders.outputs,
                    false,
                )?;
                files::list_files(folders.outputs, self.listing)
                    .map_err(ScriptError::ListOutputs)?
                    .add_to(&mut output);
            }
            Some(_) => {
                let kept = folders.workspace.join(kept_outputs_path(
                    &attempt.step_key,
                    attempt.part_round.zip(attempt.part_key.as_deref()),
                    attempt.attempt,
                ));
                keep::keep_outputs(folders.outputs, &kept)?;
                keep::file_fields(&mut output, declared, folders.outputs, &kept, true)?;
                let mut listing =
                    files::list_files(&kept, self.listing).map_err(ScriptError::ListOutputs)?;
                for name in &mut listing.files {
                    *name = kept.join(&*name).display().to_string();
                }
                listing.add_to(&mut output);
            }
        }
        // A script that printed JSON has its output as its text: the raw
        // stdout (spacing aside) would be the same value a second time.
        let text = match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            Ok(_) => output_text(&output),
            Err(_) => text,
        };
        Ok(Done {
            output,
            text: Some(text),
            ..Done::default()
        })
    }

    fn scratch_dir(&self) -> Result<tempfile::TempDir, ScriptError> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("coxswain-script-");
        let dir = match &self.scratch {
            Some(dir) => builder.tempdir_in(dir),
            None => builder.tempdir(),
        };
        dir.map_err(|source| ScriptError::Scratch {
            path: self.scratch.clone().unwrap_or_else(std::env::temp_dir),
            source,
        })
    }

    /// The step's own `env`, with `valueFrom` secrets read.
    async fn step_env(&self, step: &ScriptStep) -> Result<Vec<(String, String)>, ScriptError> {
        let mut vars = Vec::with_capacity(step.env.len());
        for var in &step.env {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    let r = &from.secret_key_ref;
                    self.secrets.get(&r.name, &r.key).await.map_err(|reason| {
                        ScriptError::Secret {
                            name: var.name.clone(),
                            reason,
                        }
                    })?
                }
                (None, None) => String::new(),
            };
            vars.push((var.name.clone(), value));
        }
        Ok(vars)
    }

    /// Starts the process and watches it to its end, all within `timeout`;
    /// its stdout when it succeeded, and the tail of its stderr in
    /// `stderr` however it ended (with whether earlier bytes were dropped).
    async fn execute(
        &self,
        mut command: Command,
        step: &ScriptStep,
        timeout: Option<Duration>,
        echoes: Echoes,
        stderr: &mut (Vec<u8>, bool),
    ) -> Result<Vec<u8>, ScriptError> {
        let mut child = command.spawn().map_err(|source| ScriptError::Start {
            program: program_name(step),
            source,
        })?;
        // From here on, leaving this function in any way (return, timeout,
        // the future being dropped) kills the whole group.
        let group = process::ProcessGroup::led_by(child.id());
        let mut captured = process::Captured::default();
        let watching = process::watch(&mut child, &group, self.caps, &mut captured, echoes);
        let status = match timeout {
            Some(limit) => tokio::time::timeout(limit, watching).await,
            None => Ok(watching.await),
        };
        *stderr = (std::mem::take(&mut captured.stderr), captured.stderr_cut);
        let status = status.map_err(|_| ScriptError::Timeout(timeout.unwrap_or_default()))?;
        let status = match status {
            Ok(status) => status,
            Err(process::Watch::TooLarge) => {
                return Err(ScriptError::StdoutTooLarge(self.caps.stdout_limit));
            }
            Err(process::Watch::Wait(e)) => return Err(ScriptError::Wait(e)),
        };
        if !status.success() {
            return Err(ScriptError::Exit {
                status,
                stderr: String::from_utf8_lossy(&stderr.0).into_owned(),
            });
        }
        Ok(captured.stdout)
    }
}

impl Executor for LocalScript {
    async fn run(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Script(step) => self.run_script(work, step).await,
            _ => Err(Failed::from(coxswain_core::api::StepError::from(
                ScriptError::NotAScript,
            ))),
        }
    }
}

fn program_name(step: &ScriptStep) -> String {
    match step.command.first() {
        Some(program) if step.source.is_none() => program.clone(),
        _ => "sh".to_string(),
    }
}

fn build_command(step: &ScriptStep) -> Result<Command, ScriptError> {
    match (&step.source, step.command.split_first()) {
        (Some(source), None) => {
            let mut command = Command::new("sh");
            command.arg("-c").arg(source);
            // `sh -c SCRIPT NAME ARGS…`: args become $1…
            if !step.args.is_empty() {
                command.arg("sh").args(&step.args);
            }
            Ok(command)
        }
        (None, Some((program, fixed))) => {
            let mut command = Command::new(program);
            command.args(fixed).args(&step.args);
            Ok(command)
        }
        (Some(_), Some(_)) => Err(ScriptError::SourceAndCommand),
        (None, None) => Err(ScriptError::NoProgram),
    }
}

/// A folder only the user running the flow can enter.
fn private_dir(path: &Path) -> Result<(), ScriptError> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(|source| ScriptError::Scratch {
            path: path.to_path_buf(),
            source,
        })
}

/// The file name an input key gets: unsafe characters become `_`, and a
/// name that is empty or only dots (which would leave the directory) is
/// replaced character by character.
pub fn input_file_name(key: &str) -> String {
    let name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "_".to_string()
    } else if name.chars().all(|c| c == '.') {
        "_".repeat(name.len())
    } else {
        name
    }
}

/// A value in contract form: an object as itself, anything else wrapped as
/// `{"data": v}`, so a script always reads an object.
pub fn contract_form(value: &Value) -> Value {
    match value {
        Value::Object(_) => value.clone(),
        other => {
            let mut map = Map::new();
            map.insert("data".into(), other.clone());
            Value::Object(map)
        }
    }
}

/// One input as the script reads it: a file in `$INPUTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// The file's name in `$INPUTS` ([`input_file_name`] of the key).
    pub file: String,
    /// The input's key (`input` for an input that is not an object).
    pub key: String,
    /// The file's content: the value in [`contract_form`], as JSON.
    pub content: String,
}

/// The files an attempt's input becomes in `$INPUTS`, in key order: one
/// per key of an object input, one `input` file for any other value, none
/// for `null`. Two keys that would share a file are refused, naming both.
pub fn input_files(input: &Value) -> Result<Vec<InputFile>, ScriptError> {
    let pairs: Vec<(String, &str, &Value)> = match input {
        Value::Null => Vec::new(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (input_file_name(k), k.as_str(), v))
            .collect(),
        other => vec![("input".to_string(), "input", other)],
    };
    let mut taken: BTreeMap<&str, &str> = BTreeMap::new();
    for (file, key, _) in &pairs {
        if let Some(first) = taken.insert(file.as_str(), *key) {
            return Err(ScriptError::InputClash {
                first: first.to_string(),
                second: key.to_string(),
                file: file.clone(),
            });
        }
    }
    Ok(pairs
        .into_iter()
        .map(|(file, key, value)| InputFile {
            file,
            key: key.to_string(),
            content: contract_form(value).to_string(),
        })
        .collect())
}

/// The file in `$INPUTS` where work a reviewer sent back finds what they
/// decided and asked.
pub const REVIEW_FILE: &str = "review";

/// The files an attempt finds in `$INPUTS`: those of its input
/// ([`input_files`]) and, when a reviewer sent the work back to this step,
/// [`REVIEW_FILE`] holding `{"decision", "feedback", "by", "reviewed"}` —
/// what an agent is told in its prompt. An input that would be written to
/// the same file is refused, naming it.
pub fn work_input_files(work: &Work) -> Result<Vec<InputFile>, ScriptError> {
    let mut files = input_files(&work.input)?;
    if let Some(review) = &work.review {
        if let Some(clash) = files.iter().find(|f| f.file == REVIEW_FILE) {
            return Err(ScriptError::InputClash {
                first: clash.key.clone(),
                second: "review (the reviewer's answer, given after a send-back)".into(),
                file: REVIEW_FILE.into(),
            });
        }
        files.push(InputFile {
            file: REVIEW_FILE.into(),
            key: REVIEW_FILE.into(),
            content: review.for_script().to_string(),
        });
    }
    Ok(files)
}

fn write_inputs(dir: &Path, work: &Work) -> Result<(), ScriptError> {
    for input in work_input_files(work)? {
        write_private(&dir.join(&input.file), &input.content).map_err(|source| {
            ScriptError::Input {
                key: input.key.clone(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Writes a value in contract form to a new file only its owner can read.
fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(content.as_bytes())?;
    file.flush()
}

/// The text of a script that printed JSON: its output written as compact
/// JSON (a string output is its own text). The stored record keeps only
/// the output and rebuilds this text when read.
pub fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Output of a script without declared fields: any JSON, `{"data": v}`
/// unwrapped to `v`, anything that is not JSON (including nothing) `null`.
pub fn undeclared_output(stdout: &str) -> Value {
    match serde_json::from_str::<Value>(stdout) {
        Ok(Value::Object(mut map)) if map.len() == 1 && map.contains_key("data") => {
            map.remove("data").unwrap_or(Value::Null)
        }
        Ok(value) => value,
        Err(_) => Value::Null,
    }
}

/// What the script was expected to print, for the start of each message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected(String);

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "The script must print {}", self.0)
    }
}

/// How a script's stdout missed its declared output.
#[derive(Debug, thiserror::Error)]
pub enum DeclaredOutputError {
    /// Nothing on stdout.
    #[error("{0}; it printed nothing.")]
    Empty(Expected),
    /// stdout is not JSON.
    #[error("{expected}; stdout is not JSON ({reason}).")]
    NotJson {
        /// What was expected.
        expected: Expected,
        /// The parser's complaint.
        reason: serde_json::Error,
    },
    /// JSON of the wrong shape; every problem is listed.
    #[error("{expected}: {}.", .problems.join("; "))]
    Fields {
        /// What was expected.
        expected: Expected,
        /// Each missing, mistyped or unexpected field, item or object.
        problems: Vec<String>,
    },
}

/// Checks stdout against the declared shape (the rules an agent's reply
/// follows too: [`Shape::check`]); the error lists every problem found.
pub fn check_declared(stdout: &str, shape: Shape<'_>) -> Result<Value, DeclaredOutputError> {
    let expected = Expected(shape.describe());
    let value: Value = serde_json::from_str(stdout).map_err(|reason| {
        if stdout.trim().is_empty() {
            DeclaredOutputError::Empty(expected.clone())
        } else {
            DeclaredOutputError::NotJson {
                expected: expected.clone(),
                reason,
            }
        }
    })?;
    shape
        .check(value)
        .map_err(|problems| DeclaredOutputError::Fields { expected, problems })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::Field;
    use serde_json::json;

    #[test]
    fn file_names_are_safe() {
        assert_eq!(input_file_name("Jira Ticket"), "Jira_Ticket");
        assert_eq!(input_file_name("a/b"), "a_b");
        assert_eq!(input_file_name(".."), "__");
        assert_eq!(input_file_name(""), "_");
        assert_eq!(input_file_name("ok-1.json"), "ok-1.json");
    }

    #[test]
    fn contract_form_wraps_non_objects() {
        assert_eq!(contract_form(&json!({"a": 1})), json!({"a": 1}));
        assert_eq!(contract_form(&json!("x")), json!({"data": "x"}));
        assert_eq!(contract_form(&json!([1])), json!({"data": [1]}));
        assert_eq!(contract_form(&Value::Null), json!({"data": null}));
    }

    #[test]
    fn undeclared_output_rules() {
        assert_eq!(undeclared_output(r#"{"data": [1, 2]}"#), json!([1, 2]));
        assert_eq!(
            undeclared_output(r#"{"data": 1, "more": 2}"#),
            json!({"data": 1, "more": 2})
        );
        assert_eq!(undeclared_output("42\n"), json!(42));
        assert_eq!(undeclared_output("hello"), Value::Null);
        assert_eq!(undeclared_output(""), Value::Null);
    }

    #[test]
    fn declared_output_messages() {
        let fields = [Field::new("id", "integer"), Field::new("name", "string")];
        let shape = Shape::Object(&fields);
        assert!(check_declared(r#"{"id": 1, "name": "x"}"#, shape).is_ok());
        let err = check_declared("nope", shape).unwrap_err().to_string();
        assert!(err.contains("stdout is not JSON"), "{err}");
        let err = check_declared("[1]", shape).unwrap_err().to_string();
        assert!(
            err.contains("expected a JSON object, found an array ([1])"),
            "{err}"
        );
        let err = check_declared(r#"{"id": "1", "extra": true}"#, shape)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "The script must print one JSON object with the fields id, name: field `id` must be an integer, found a string (\"1\"); missing field `name` (string); unexpected field `extra`: only `id`, `name` may be given."
        );
        let err = check_declared("", shape).unwrap_err().to_string();
        assert!(err.ends_with("it printed nothing."), "{err}");
    }

    #[test]
    fn a_script_prints_a_list_bare_and_its_output_is_wrapped() {
        let items = coxswain_core::api::Items {
            fields: vec![Field::new("owner", "string")],
            description: None,
        };
        let shape = Shape::List(&items);
        assert_eq!(
            check_declared(r#"[{"owner": "ana"}]"#, shape).unwrap(),
            json!({"items": [{"owner": "ana"}]})
        );
        let err = check_declared(r#"[{"who": "ana"}]"#, shape)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "The script must print a JSON array of objects with the fields owner: item 0: missing field `owner` (string); item 0: unexpected field `who`: only `owner` may be given."
        );
    }
}
