//! What `coxswain step-exec` does inside a step's pod: `install` copies the
//! executable into the pod's emptyDir (run by the init container, from the
//! controller's image); `run` runs the script with the local runner's own
//! code ([`LocalScript::run_in`]) in the folders Kubernetes made, then
//! reports the result as [`wire`] describes.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::task::{PodTask, paths};
use super::wire::{self, WireResult};
use coxswain_core::api::StepError;
use coxswain_core::engine::{Failed, WorkResult, codes, step_error};
use coxswain_steps::script::{Attempt, Echo, Echoes, Folders, LocalScript, SharedWorkspace};
use coxswain_steps::secrets::MapSecrets;

/// Why `step-exec install` failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// This process's own executable cannot be found.
    #[error("cannot find the coxswain executable to copy: {0}")]
    OwnExecutable(#[source] io::Error),
    /// The copy failed.
    #[error("cannot copy {} to {}: {source}", .from.display(), .to.display())]
    Copy {
        /// The executable.
        from: PathBuf,
        /// Where it was to go.
        to: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Copies this executable to `dest`, executable by anyone in the pod.
pub fn install(dest: &Path) -> Result<(), InstallError> {
    let from = std::env::current_exe().map_err(InstallError::OwnExecutable)?;
    let copy = |from: &Path| -> io::Result<()> {
        std::fs::copy(from, dest)?;
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755))
    };
    copy(&from).map_err(|source| InstallError::Copy {
        from,
        to: dest.to_path_buf(),
        source,
    })
}

/// Where `step-exec run` finds its task and folders: the pod's paths by
/// default ([`paths`]), others for a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPaths {
    /// The [`PodTask`] file.
    pub task: PathBuf,
    /// `$INPUTS`.
    pub inputs: PathBuf,
    /// `$OUTPUTS`.
    pub outputs: PathBuf,
    /// `$WORKSPACE`.
    pub workspace: PathBuf,
    /// `$HOME`.
    pub home: PathBuf,
    /// `$TMPDIR`.
    pub tmp: PathBuf,
    /// Where the termination message goes.
    pub termination_log: PathBuf,
    /// What the task and inputs must add up to, as the controller made them.
    pub expected: Option<Expected>,
}

/// The inputs the controller made for this attempt, given on the step's
/// command line (which only the Job's creator writes): the pod runs
/// nothing from inputs that are not exactly them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// [`inputs_digest`](super::task::inputs_digest) of the task and inputs.
    pub digest: String,
    /// Where the controller put them.
    pub given: Given,
}

/// Where a step's task and inputs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given {
    /// The inputs ConfigMap of this name, mounted at the task's folder and
    /// `$INPUTS`.
    ConfigMap(String),
    /// The container's [`INLINE_ENV`](super::manifest::INLINE_ENV) (small
    /// inputs ride in the Job): written into those folders here, once
    /// checked.
    Inline,
}

impl Default for PodPaths {
    fn default() -> Self {
        PodPaths {
            task: paths::TASK_FILE.into(),
            inputs: paths::INPUTS.into(),
            outputs: paths::OUTPUTS.into(),
            workspace: paths::WORKSPACE.into(),
            home: paths::HOME.into(),
            tmp: paths::TMP.into(),
            termination_log: paths::TERMINATION_LOG.into(),
            expected: None,
        }
    }
}

/// Runs the attempt described at `paths.task`. The step's `env` values are
/// read from this process's environment through `env` (Kubernetes put them
/// there, secrets included); a variable missing there is empty, as locally.
pub async fn run_task(paths: &PodPaths, env: impl Fn(&str) -> Option<String>) -> WorkResult {
    match &paths.expected {
        Some(Expected {
            digest,
            given: Given::ConfigMap(name),
        }) => check_inputs(paths, digest, name).map_err(Failed::from)?,
        Some(Expected {
            digest,
            given: Given::Inline,
        }) => {
            let json = env(super::manifest::INLINE_ENV);
            unpack_inline(paths, digest, json.as_deref()).map_err(Failed::from)?;
        }
        None => {}
    }
    let task = match read_task(&paths.task) {
        Ok(task) => task,
        Err(error) => return Err(Failed::from(error)),
    };
    if let Some(error) = task.error.clone() {
        return Err(Failed::from(error));
    }
    let folders = Folders {
        inputs: &paths.inputs,
        outputs: &paths.outputs,
        workspace: &paths.workspace,
        home: &paths.home,
        tmp: &paths.tmp,
    };
    let step_env = task
        .step
        .env
        .iter()
        .map(|var| (var.name.clone(), env(&var.name).unwrap_or_default()))
        .collect();
    let mut script = LocalScript::new(Arc::new(MapSecrets::new()))
        .with_stdout_limit(task.max_output)
        .with_echo(Arc::new(ContainerLog));
    if let Some(branch) = &task.branch {
        // The run's volume is mounted at `$WORKSPACE` already.
        script = script.with_workspace(SharedWorkspace {
            dir: None,
            branch: branch.clone(),
        });
    }
    script
        .run_in(
            &task.step,
            &folders,
            &task.attempt(),
            step_env,
            task.timeout(),
        )
        .await
}

/// The most of a script's stdout copied to the container's log: enough to
/// read what it printed; its whole output is the step's output anyway, and
/// a large result still has to fit in the log beside it.
pub const ECHOED_STDOUT_MAX: usize = 64 << 10;

/// Copies a script's stderr, and the start of its stdout, to this
/// process's own, which the kubelet keeps as the container's log
/// (`kubectl logs`).
struct ContainerLog;

impl Echo for ContainerLog {
    fn open(&self, _attempt: &Attempt) -> Echoes {
        Echoes {
            stdout: Some(Box::new(Capped {
                out: io::stdout(),
                left: ECHOED_STDOUT_MAX,
                ended_line: true,
            })),
            stderr: Some(Box::new(io::stderr())),
        }
    }
}

/// A writer that passes on at most `left` bytes, then says once that the
/// rest was left out.
struct Capped<W: Write> {
    out: W,
    left: usize,
    ended_line: bool,
}

impl<W: Write> Write for Capped<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(buf.len());
        }
        let take = buf.len().min(self.left);
        self.out.write_all(&buf[..take])?;
        self.left -= take;
        self.ended_line = buf[..take].ends_with(b"\n");
        if self.left == 0 {
            let newline = if self.ended_line { "" } else { "\n" };
            writeln!(
                self.out,
                "{newline}[coxswain: the rest of stdout is left out of this log; the step's output holds all of it]"
            )?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Whether the task file and the input files are the ones the controller
/// made: their digest, computed as the controller computed it from the
/// ConfigMap's keys, must be `expected`'s.
fn check_inputs(paths: &PodPaths, expected: &str, config_map: &str) -> Result<(), StepError> {
    let unreadable = |what: &Path, e: io::Error| {
        step_error(
            codes::TAMPERED,
            format!(
                "cannot read {} to check the step's inputs: {e}",
                what.display()
            ),
        )
    };
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    match std::fs::read(&paths.task) {
        Ok(task) => entries.push((super::TASK_KEY.to_string(), task)),
        // A ConfigMap without the task: the digest below says it is not ours.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(unreadable(&paths.task, e)),
    }
    let files = std::fs::read_dir(&paths.inputs).map_err(|e| unreadable(&paths.inputs, e))?;
    for file in files {
        let file = file.map_err(|e| unreadable(&paths.inputs, e))?;
        let name = file.file_name().to_string_lossy().into_owned();
        // The kubelet's own bookkeeping in a ConfigMap volume.
        if name.starts_with("..") {
            continue;
        }
        let content = std::fs::read(file.path()).map_err(|e| unreadable(&file.path(), e))?;
        entries.push((format!("{}{name}", super::INPUT_KEY_PREFIX), content));
    }
    let found = super::task::inputs_digest(entries.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
    if found == expected {
        return Ok(());
    }
    Err(step_error(
        codes::TAMPERED,
        format!(
            "the step's inputs (ConfigMap {config_map}) are not the ones Coxswain wrote for this \
             attempt (their digest is {found}, not {expected}); someone else made or replaced \
             that ConfigMap, so the script did not run"
        ),
    ))
}

/// Checks the task and inputs that rode in the Job (`json`, the variable's
/// value) against `expected`, then writes them where a mounted ConfigMap
/// would have put them: the task file, and each input read-only in
/// `$INPUTS`.
fn unpack_inline(paths: &PodPaths, expected: &str, json: Option<&str>) -> Result<(), StepError> {
    let internal = |why: String| step_error(codes::INTERNAL, why);
    let var = super::manifest::INLINE_ENV;
    let json = json.ok_or_else(|| {
        internal(format!(
            "the step's task and inputs are not in its container's {var}; \
             do the controller and the image differ in version?"
        ))
    })?;
    let entries: std::collections::BTreeMap<String, String> =
        serde_json::from_str(json).map_err(|e| {
            internal(format!(
                "{var} does not hold the step's task and inputs: {e}"
            ))
        })?;
    let found = super::task::entries_digest(&entries);
    if found != expected {
        return Err(step_error(
            codes::TAMPERED,
            format!(
                "the step's inputs in its Job are not the ones Coxswain wrote for this attempt \
                 (their digest is {found}, not {expected}); someone else made or changed the \
                 Job, so the script did not run"
            ),
        ));
    }
    write_entries(paths, &entries)
}

/// Writes an attempt's task and input files where a mounted ConfigMap
/// would have put them: the task file, and each input read-only in a
/// read-only `$INPUTS`.
pub(super) fn write_entries(
    paths: &PodPaths,
    entries: &std::collections::BTreeMap<String, String>,
) -> Result<(), StepError> {
    let internal = |why: String| step_error(codes::INTERNAL, why);
    let unwritable = |what: &Path, e: io::Error| {
        internal(format!(
            "cannot write the step's input {}: {e}",
            what.display()
        ))
    };
    std::fs::create_dir_all(&paths.inputs).map_err(|e| unwritable(&paths.inputs, e))?;
    for (key, content) in entries {
        let path = if key == super::TASK_KEY {
            paths.task.clone()
        } else {
            let file = key.strip_prefix(super::INPUT_KEY_PREFIX).unwrap_or(key);
            if file.is_empty() || file.contains('/') || file == "." || file == ".." {
                return Err(internal(format!("`{file}` cannot be an input file's name")));
            }
            paths.inputs.join(file)
        };
        std::fs::write(&path, content).map_err(|e| unwritable(&path, e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444))
            .map_err(|e| unwritable(&path, e))?;
    }
    // Read-only, as a mounted ConfigMap's folder is.
    std::fs::set_permissions(&paths.inputs, std::fs::Permissions::from_mode(0o555))
        .map_err(|e| unwritable(&paths.inputs, e))
}

fn read_task(path: &Path) -> Result<PodTask, StepError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        step_error(
            codes::INTERNAL,
            format!("cannot read the step's task {}: {e}", path.display()),
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        step_error(
            codes::INTERNAL,
            format!(
                "the step's task {} is not one this coxswain reads ({e}); the controller and the image differ in version?",
                path.display()
            ),
        )
    })
}

/// Hands `result` back: the log frame on `stdout` when the result is too
/// big for the termination message, then the message at `termination_log`.
pub fn report(
    result: &WorkResult,
    termination_log: &Path,
    stdout: &mut impl Write,
) -> io::Result<()> {
    report_wire(&WireResult::from(result), termination_log, stdout)
}

/// [`report`] for a result already in its wire form (a chain member's,
/// which says more than a [`WorkResult`]).
pub fn report_wire(
    result: &WireResult,
    termination_log: &Path,
    stdout: &mut impl Write,
) -> io::Result<()> {
    let encoded = wire::encode(result);
    if let Some(frame) = &encoded.log {
        stdout.write_all(frame.as_bytes())?;
        stdout.flush()?;
    }
    std::fs::write(termination_log, encoded.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{EnvVar, ScriptStep};
    use serde_json::json;

    fn pod_dirs(task: &PodTask) -> (tempfile::TempDir, PodPaths) {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |name: &str| dir.path().join(name);
        for name in ["inputs", "outputs", "workspace", "home", "tmp"] {
            std::fs::create_dir(at(name)).expect("folder");
        }
        std::fs::write(at("step.json"), serde_json::to_string(task).expect("json")).expect("task");
        let paths = PodPaths {
            task: at("step.json"),
            inputs: at("inputs"),
            outputs: at("outputs"),
            workspace: at("workspace"),
            home: at("home"),
            tmp: at("tmp"),
            termination_log: at("termination-log"),
            expected: None,
        };
        (dir, paths)
    }

    fn task(source: &str) -> PodTask {
        PodTask {
            step: ScriptStep {
                source: Some(source.into()),
                env: vec![EnvVar {
                    name: "TOKEN".into(),
                    value: None,
                    value_from: None,
                }],
                ..ScriptStep::default()
            },
            step_key: "fetch".into(),
            run_name: "nightly".into(),
            attempt: 3,
            part_key: None,
            since: None,
            timeout_ms: None,
            max_output: 64,
            branch: None,
            part_round: None,
            error: None,
        }
    }

    #[tokio::test]
    async fn the_contract_holds_in_the_pods_folders() {
        let (_dir, paths) = pod_dirs(&task(
            r#"touch "$OUTPUTS/out.txt"; printf '{"who":"%s","a":%s,"t":"%s"}' "$STEP_KEY" "$ATTEMPT" "$TOKEN""#,
        ));
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_string());
        let done = run_task(&paths, env).await.expect("done");
        assert_eq!(
            done.output,
            json!({"who": "fetch", "a": 3, "t": "s3cret", "files": ["out.txt"]})
        );
    }

    #[tokio::test]
    async fn in_a_run_with_a_workspace_the_branch_is_set_and_outputs_are_kept_in_the_volume() {
        let mut t = task(
            r#"touch "$OUTPUTS/out.txt"; printf '{"branch":"%s","pwd":"%s"}' "$BRANCH" "$PWD""#,
        );
        t.branch = Some("coxswain/nightly".into());
        let (_dir, paths) = pod_dirs(&t);
        let done = run_task(&paths, |_| None).await.expect("done");
        let kept = paths.workspace.join(".coxswain/outputs/fetch/3/out.txt");
        assert!(kept.is_file(), "{}", kept.display());
        assert_eq!(done.output["branch"], "coxswain/nightly");
        assert_eq!(done.output["files"], json!([kept.display().to_string()]));
    }

    /// The digest the controller gives for the pod's task and inputs,
    /// computed from the ConfigMap's keys as the launcher does.
    fn digest_of(task: &PodTask, inputs: &[(&str, &str)]) -> String {
        let task = serde_json::to_string(task).expect("json");
        let mut keys: Vec<(String, Vec<u8>)> = vec![("step.json".into(), task.into_bytes())];
        for (file, content) in inputs {
            keys.push((format!("input.{file}"), content.as_bytes().to_vec()));
        }
        super::super::task::inputs_digest(keys.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
    }

    #[tokio::test]
    async fn inputs_that_ride_in_the_job_are_checked_then_written_as_files() {
        let t = task(r#"cat "$INPUTS/x" "$INPUTS/y""#);
        let (_dir, mut paths) = pod_dirs(&t);
        std::fs::remove_file(&paths.task).expect("no task file yet");
        let digest = digest_of(&t, &[("x", "1"), ("y", "2")]);
        paths.expected = Some(Expected {
            digest: digest.clone(),
            given: Given::Inline,
        });
        let json = serde_json::to_string(&json!({
            "step.json": serde_json::to_string(&t).expect("json"),
            "input.x": "1",
            "input.y": "2",
        }))
        .expect("json");
        let var = super::super::manifest::INLINE_ENV;
        let env = |name: &str| (name == var).then(|| json.clone());
        let done = run_task(&paths, env)
            .await
            .expect("the controller's inputs run");
        assert_eq!(done.output, json!(12));
        let mode = std::fs::metadata(paths.inputs.join("x"))
            .expect("x")
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o444);
        let mode = std::fs::metadata(&paths.inputs)
            .expect("inputs")
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o555);

        // Another input under the same digest: nothing runs.
        let changed = json.replace(r#""input.y":"2""#, r#""input.y":"3""#);
        assert_ne!(changed, json);
        let env = |name: &str| (name == var).then(|| changed.clone());
        let error = run_task(&paths, env).await.expect_err("refused").error;
        assert_eq!(error.code, codes::TAMPERED);
        assert!(error.message.contains("in its Job"), "{}", error.message);

        // No variable at all (an image's older step-exec, a stripped Job).
        let error = run_task(&paths, |_| None).await.expect_err("refused").error;
        assert_eq!(error.code, codes::INTERNAL);
        assert!(error.message.contains(var), "{}", error.message);
    }

    #[tokio::test]
    async fn inputs_that_are_not_the_controllers_run_nothing() {
        let t = task(r#"touch "$HOME/ran"; cat "$INPUTS/x""#);
        let (dir, mut paths) = pod_dirs(&t);
        std::fs::write(paths.inputs.join("x"), "1").expect("input");
        std::fs::create_dir(paths.inputs.join("..data")).expect("kubelet's");
        paths.expected = Some(Expected {
            digest: digest_of(&t, &[("x", "1")]),
            given: Given::ConfigMap("r-build-a1-0123456789".into()),
        });
        let done = run_task(&paths, |_| None)
            .await
            .expect("the controller's inputs run");
        assert_eq!(done.output, json!(1));

        // The same names, another input: nothing runs.
        std::fs::remove_file(dir.path().join("home/ran")).expect("ran");
        std::fs::write(paths.inputs.join("x"), "2").expect("input");
        let error = run_task(&paths, |_| None).await.expect_err("refused").error;
        assert_eq!(error.code, codes::TAMPERED);
        assert!(
            error.message.contains("ConfigMap r-build-a1-0123456789")
                && error.message.contains("did not run"),
            "{}",
            error.message
        );
        assert!(!dir.path().join("home/ran").exists(), "the script ran");

        // Another task (another script) under the same name: refused too.
        std::fs::write(paths.inputs.join("x"), "1").expect("input");
        let other = task("echo stolen");
        std::fs::write(&paths.task, serde_json::to_string(&other).expect("json")).expect("task");
        let error = run_task(&paths, |_| None).await.expect_err("refused").error;
        assert_eq!(error.code, codes::TAMPERED);

        // No task at all (a ConfigMap without the key): refused, not a crash.
        std::fs::remove_file(&paths.task).expect("task gone");
        let error = run_task(&paths, |_| None).await.expect_err("refused").error;
        assert_eq!(error.code, codes::TAMPERED);
    }

    #[tokio::test]
    async fn the_output_cap_is_the_tasks() {
        let (_dir, paths) = pod_dirs(&task("head -c 100 /dev/zero"));
        let error = run_task(&paths, |_| None).await.expect_err("too big").error;
        assert_eq!(error.code, codes::OUTPUT);
        assert!(error.message.contains("64 bytes"), "{}", error.message);
    }

    #[tokio::test]
    async fn an_error_found_at_launch_is_the_result() {
        let mut t = task("exit 0");
        t.error = Some(step_error(codes::SCRIPT, "inputs clash"));
        let (_dir, paths) = pod_dirs(&t);
        let error = run_task(&paths, |_| None).await.expect_err("fails").error;
        assert_eq!(error.message, "inputs clash");
    }

    #[test]
    fn a_big_result_goes_to_stdout_and_the_message_says_so() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("termination-log");
        let result: WorkResult = Ok(coxswain_core::engine::Done {
            output: json!("x".repeat(10_000)),
            text: Some("x".repeat(10_000)),
            usage: None,
            log: None,
        });
        let mut stdout = Vec::new();
        report(&result, &log, &mut stdout).expect("reported");
        let message = std::fs::read_to_string(&log).expect("message");
        let Some(wire::Decoded::InLog(reference)) = wire::decode_message(&message) else {
            panic!("a log reference: {message}");
        };
        let back = wire::decode_log(&String::from_utf8(stdout).expect("utf-8"), &reference)
            .expect("the result");
        assert_eq!(WorkResult::from(back), result);
    }
}
