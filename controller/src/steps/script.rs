//! `script` steps as local processes, for `coxswain run`.
//!
//! In a cluster a script is a Job; on a laptop the host stands in for the
//! image. Everything else is the same contract (DESIGN 5.5), so a flow tried
//! locally behaves the same in the cluster:
//!
//! - Each input is a file in `$INPUTS`. When the step's input is a JSON
//!   object, each of its keys is one input, in a file named after the key
//!   (characters other than letters, digits, `.`, `-` and `_` become `_`).
//!   An object value is written as itself, any other value as `{"data": v}`.
//!   An input that is not an object is one file, `$INPUTS/input`, in the same
//!   form; a `null` input gives no files.
//! - `$OUTPUTS` starts empty; `$WORKSPACE` is an empty working directory (also
//!   the process's current directory). `$RUN_NAME`, `$STEP_KEY`, `$ATTEMPT`,
//!   `$SINCE` and `$LAST_RUN` (empty unless the run was scheduled) are set,
//!   as is every variable of the step's `env`. Variables holding local secrets
//!   (`COXSWAIN_SECRET_*`) are not passed on.
//! - stdout is the output: with declared `output.fields`, exactly one JSON
//!   object with those fields and types; without, any JSON, where
//!   `{"data": v}` gives `v`, and stdout that is not JSON gives `null`. The
//!   step's `text` is always the raw stdout.
//! - Files the script leaves in `$OUTPUTS` are listed, as paths relative to
//!   `$OUTPUTS` in sorted order, under `files` in the output when the output
//!   is an object that has no `files` of its own. The directory is removed
//!   with the rest of the attempt's scratch space, so locally the list says
//!   what was produced, not where to read it.
//! - The process runs in its own process group. When it ends, times out or
//!   the attempt is cancelled, the whole group is killed, so nothing the
//!   script started in the background outlives the attempt.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::{Executor, Secrets};
use crate::api::{Field, ScriptStep, StepError};
use crate::engine::{Done, Failed, Task, Work, WorkResult, codes, step_error};

/// Default cap on captured stdout; a bigger output fails the attempt.
pub const DEFAULT_STDOUT_LIMIT: usize = 1 << 20;
/// Default size of the stderr tail kept for the error message.
pub const DEFAULT_STDERR_TAIL: usize = 64 << 10;

/// Runs `script` steps as processes on this machine.
#[derive(Clone)]
pub struct LocalScript {
    secrets: Arc<dyn Secrets>,
    stdout_limit: usize,
    stderr_tail: usize,
    scratch: Option<PathBuf>,
}

impl std::fmt::Debug for LocalScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalScript")
            .field("stdout_limit", &self.stdout_limit)
            .field("stderr_tail", &self.stderr_tail)
            .field("scratch", &self.scratch)
            .finish_non_exhaustive()
    }
}

impl LocalScript {
    /// An executor reading `valueFrom` variables from `secrets`, with the
    /// default caps and scratch space in the system's temporary directory.
    pub fn new(secrets: Arc<dyn Secrets>) -> Self {
        LocalScript {
            secrets,
            stdout_limit: DEFAULT_STDOUT_LIMIT,
            stderr_tail: DEFAULT_STDERR_TAIL,
            scratch: None,
        }
    }

    /// Sets the largest stdout accepted, in bytes; a script printing more is
    /// stopped and its attempt fails, so a runaway script cannot fill memory.
    pub fn with_stdout_limit(mut self, bytes: usize) -> Self {
        self.stdout_limit = bytes;
        self
    }

    /// Sets how many trailing bytes of stderr are kept for the error message.
    pub fn with_stderr_tail(mut self, bytes: usize) -> Self {
        self.stderr_tail = bytes;
        self
    }

    /// Puts each attempt's scratch directory under `dir` instead of the
    /// system's temporary directory.
    pub fn with_scratch_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.scratch = Some(dir.into());
        self
    }

    async fn run_script(&self, work: &Work, step: &ScriptStep) -> Result<Done, StepError> {
        let scratch = match &self.scratch {
            Some(dir) => tempfile::Builder::new()
                .prefix("coxswain-script-")
                .tempdir_in(dir),
            None => tempfile::Builder::new()
                .prefix("coxswain-script-")
                .tempdir(),
        }
        .map_err(|e| script_error(format!("cannot create a scratch directory: {e}")))?;
        let inputs = scratch.path().join("inputs");
        let outputs = scratch.path().join("outputs");
        let workspace = scratch.path().join("workspace");
        for dir in [&inputs, &outputs, &workspace] {
            std::fs::create_dir(dir)
                .map_err(|e| script_error(format!("cannot create {}: {e}", dir.display())))?;
        }
        write_inputs(&inputs, &work.input)?;

        let mut command = build_command(step)?;
        command
            .env_clear()
            .envs(std::env::vars().filter(|(k, _)| !k.starts_with(super::secrets::ENV_PREFIX)))
            .env("INPUTS", &inputs)
            .env("OUTPUTS", &outputs)
            .env("WORKSPACE", &workspace)
            .env("RUN_NAME", &work.run.name)
            .env("STEP_KEY", &work.step)
            .env("ATTEMPT", work.attempt.to_string())
            .env("SINCE", work.run.since.as_deref().unwrap_or(""))
            .env("LAST_RUN", work.run.since.as_deref().unwrap_or(""));
        for var in &step.env {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    let r = &from.secret_key_ref;
                    self.secrets.get(&r.name, &r.key).await.map_err(|e| {
                        step_error(
                            codes::SECRET,
                            format!("environment variable {}: {e}", var.name),
                        )
                    })?
                }
                (None, None) => String::new(),
            };
            command.env(&var.name, value);
        }
        command
            .current_dir(&workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);

        let mut child = command
            .spawn()
            .map_err(|e| script_error(format!("cannot start {}: {e}", program_name(step))))?;
        // From here on, leaving this function in any way (return, timeout,
        // the future being dropped) kills the whole group.
        let group = child.id().map(ProcessGroup);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let stdout_limit = self.stdout_limit;
        let stdout_task = tokio::spawn({
            let pgid = group.as_ref().map(|g| g.0);
            async move {
                match stdout {
                    Some(pipe) => read_limited(pipe, stdout_limit, pgid).await,
                    None => Ok(Vec::new()),
                }
            }
        });
        let stderr_tail = self.stderr_tail;
        let stderr_task = tokio::spawn(async move {
            match stderr {
                Some(pipe) => read_tail(pipe, stderr_tail).await,
                None => Vec::new(),
            }
        });

        let status = match work.timeout {
            Some(limit) => match tokio::time::timeout(limit, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    drop(group);
                    return Err(step_error(
                        codes::TIMEOUT,
                        format!(
                            "the script ran longer than its timeout of {} and was stopped",
                            show_duration(limit)
                        ),
                    ));
                }
            },
            None => child.wait().await,
        }
        .map_err(|e| script_error(format!("cannot wait for the script: {e}")))?;
        // Background processes the script left would hold the pipes open.
        drop(group);

        let stdout = stdout_task
            .await
            .map_err(|e| script_error(format!("reading stdout failed: {e}")))?;
        let stderr = stderr_task
            .await
            .map_err(|e| script_error(format!("reading stderr failed: {e}")))?;
        let stdout = match stdout {
            Ok(bytes) => bytes,
            Err(StdoutTooLarge) => {
                return Err(step_error(
                    codes::OUTPUT,
                    format!(
                        "the script printed more than {} on stdout and was stopped",
                        super::net::size(stdout_limit)
                    ),
                ));
            }
        };
        if !status.success() {
            return Err(exit_error(status, &stderr));
        }

        let text = String::from_utf8_lossy(&stdout).into_owned();
        let declared = step.output.as_ref().map(|o| o.fields.as_slice());
        let mut output = match declared {
            Some(fields) if !fields.is_empty() => check_declared(&text, fields)
                .map_err(|problem| step_error(codes::OUTPUT, problem))?,
            _ => undeclared_output(&text),
        };
        let files =
            list_files(&outputs).map_err(|e| script_error(format!("cannot list $OUTPUTS: {e}")))?;
        if let Value::Object(map) = &mut output
            && !files.is_empty()
            && !map.contains_key("files")
        {
            map.insert(
                "files".into(),
                Value::Array(files.into_iter().map(Value::String).collect()),
            );
        }
        Ok(Done {
            output,
            text: Some(text),
            usage: None,
        })
    }
}

impl Executor for LocalScript {
    async fn run(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Script(step) => self.run_script(work, step).await.map_err(Failed::from),
            _ => Err(
                script_error("the local script executor only runs script steps".to_string()).into(),
            ),
        }
    }
}

fn script_error(message: String) -> StepError {
    step_error(codes::SCRIPT, message)
}

fn program_name(step: &ScriptStep) -> String {
    match step.command.first() {
        Some(program) if step.source.is_none() => program.clone(),
        _ => "sh".to_string(),
    }
}

fn build_command(step: &ScriptStep) -> Result<Command, StepError> {
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
        (Some(_), Some(_)) => Err(script_error(
            "a script step gives either `source` or `command`, not both".to_string(),
        )),
        (None, None) => Err(script_error(
            "a script step needs `source` or `command`".to_string(),
        )),
    }
}

/// A process group that is killed when this value is dropped.
struct ProcessGroup(u32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Sends SIGKILL to every process in the group. Without `unsafe` there is no
/// `kill(2)`, so this runs `kill(1)`; a group that is already gone is fine.
fn kill_group(pgid: u32) {
    let _ = std::process::Command::new("kill")
        .arg("-KILL")
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Stdout went over its limit.
#[derive(Debug)]
struct StdoutTooLarge;

/// Reads a pipe up to `limit` bytes; past it, kills the group (so the script
/// stops instead of running on to its timeout) and gives up.
async fn read_limited(
    mut pipe: impl AsyncRead + Unpin,
    limit: usize,
    pgid: Option<u32>,
) -> Result<Vec<u8>, StdoutTooLarge> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return Ok(out),
            Ok(n) => {
                if out.len() + n > limit {
                    if let Some(pgid) = pgid {
                        kill_group(pgid);
                    }
                    return Err(StdoutTooLarge);
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Reads a pipe to its end, keeping only the last `keep` bytes.
async fn read_tail(mut pipe: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return tail,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > keep {
                    let excess = tail.len() - keep;
                    tail.drain(..excess);
                }
            }
        }
    }
}

fn exit_error(status: ExitStatus, stderr: &[u8]) -> StepError {
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("the script exited with status {code}"),
        (None, Some(signal)) => format!("the script was killed by signal {signal}"),
        (None, None) => "the script failed".to_string(),
    };
    let stderr = String::from_utf8_lossy(stderr);
    let stderr = stderr.trim_end();
    if stderr.is_empty() {
        script_error(format!("{how} (stderr was empty)"))
    } else {
        script_error(format!("{how}: {stderr}"))
    }
}

fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
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

fn write_inputs(dir: &Path, input: &Value) -> Result<(), StepError> {
    let files: Vec<(String, &str, &Value)> = match input {
        Value::Null => Vec::new(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (input_file_name(k), k.as_str(), v))
            .collect(),
        other => vec![("input".to_string(), "input", other)],
    };
    let mut taken: BTreeMap<&str, &str> = BTreeMap::new();
    for (file, key, _) in &files {
        if let Some(first) = taken.insert(file.as_str(), *key) {
            return Err(script_error(format!(
                "inputs `{first}` and `{key}` would both be written to $INPUTS/{file}; rename one"
            )));
        }
    }
    for (file, key, value) in &files {
        let json = serde_json::to_vec(&contract_form(value))
            .map_err(|e| script_error(format!("cannot write input `{key}`: {e}")))?;
        std::fs::write(dir.join(file), json)
            .map_err(|e| script_error(format!("cannot write input `{key}`: {e}")))?;
    }
    Ok(())
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

/// Checks stdout against declared fields: one JSON object, each field there
/// with its type, nothing else. The error lists every problem found.
pub fn check_declared(stdout: &str, fields: &[Field]) -> Result<Value, String> {
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    let expected = format!(
        "The script must print one JSON object with the fields {}",
        names.join(", ")
    );
    let value: Value = serde_json::from_str(stdout).map_err(|e| {
        if stdout.trim().is_empty() {
            format!("{expected}; it printed nothing.")
        } else {
            format!("{expected}; stdout is not JSON ({e}).")
        }
    })?;
    let Value::Object(map) = &value else {
        return Err(format!(
            "{expected}; it printed {} instead.",
            with_article(json_type(&value))
        ));
    };
    let mut problems = Vec::new();
    for field in fields {
        match map.get(&field.name) {
            None => problems.push(format!("missing field `{}`", field.name)),
            Some(v) if !has_type(v, &field.type_) => problems.push(format!(
                "field `{}` is {}, expected {}",
                field.name,
                with_article(json_type(v)),
                field.type_
            )),
            Some(_) => {}
        }
    }
    for key in map.keys() {
        if !names.contains(&key.as_str()) {
            problems.push(format!("unexpected field `{key}`"));
        }
    }
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(format!("{expected}: {}.", problems.join("; ")))
    }
}

fn has_type(value: &Value, type_: &str) -> bool {
    match type_ {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value
                    .as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        }
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        // The validator refuses other types; nothing to check here.
        _ => true,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn with_article(type_name: &str) -> String {
    match type_name {
        "null" => "null".to_string(),
        "integer" | "object" | "array" => format!("an {type_name}"),
        other => format!("a {other}"),
    }
}

/// Every regular file under `dir`, as a `/`-separated path relative to it.
fn list_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(relative) = entry.path().strip_prefix(dir)
            {
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                found.push(parts.join("/"));
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str, type_: &str) -> Field {
        Field {
            name: name.into(),
            type_: type_.into(),
            description: None,
        }
    }

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
        let fields = [field("id", "integer"), field("name", "string")];
        assert!(check_declared(r#"{"id": 1, "name": "x"}"#, &fields).is_ok());
        let err = check_declared("nope", &fields).unwrap_err();
        assert!(err.contains("stdout is not JSON"), "{err}");
        let err = check_declared("[1]", &fields).unwrap_err();
        assert!(err.contains("it printed an array instead"), "{err}");
        let err = check_declared(r#"{"id": "1", "extra": true}"#, &fields).unwrap_err();
        assert_eq!(
            err,
            "The script must print one JSON object with the fields id, name: field `id` is a string, expected integer; missing field `name`; unexpected field `extra`."
        );
        let err = check_declared("", &fields).unwrap_err();
        assert!(err.ends_with("it printed nothing."), "{err}");
    }
}
