//! `coxswain step-exec`, the wrapper in a script step's pod, run as the
//! container runs it: in folders standing in for the pod's volumes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coxswain_core::api::ScriptStep;
use coxswain_k8s::jobs::PodTask;
use coxswain_k8s::jobs::wire::{Decoded, decode_message};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::json;

/// A bound on waiting, never a timing assertion.
const BOUND: Duration = Duration::from_secs(30);

fn pod_dir(source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["inputs", "outputs", "workspace", "home", "tmp"] {
        std::fs::create_dir(dir.path().join(name)).expect("folder");
    }
    let task = PodTask {
        step: ScriptStep {
            source: Some(source.into()),
            ..ScriptStep::default()
        },
        step_key: "build".into(),
        run_name: "nightly".into(),
        attempt: 1,
        part_key: None,
        since: None,
        timeout_ms: None,
        max_output: 1 << 20,
        error: None,
    };
    std::fs::write(
        dir.path().join("step.json"),
        serde_json::to_string(&task).expect("json"),
    )
    .expect("task");
    dir
}

fn step_exec(dir: &Path) -> Child {
    let at = |name: &str| -> PathBuf { dir.join(name) };
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["step-exec", "run", "--task"])
        .arg(at("step.json"))
        .arg("--inputs")
        .arg(at("inputs"))
        .arg("--outputs")
        .arg(at("outputs"))
        .arg("--workspace")
        .arg(at("workspace"))
        .arg("--home")
        .arg(at("home"))
        .arg("--tmp")
        .arg(at("tmp"))
        .arg("--termination-log")
        .arg(at("termination-log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("coxswain runs")
}

/// Whether the process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_result_goes_to_the_termination_log_and_the_exit_code_says_how_it_ended() {
    let dir = pod_dir(r#"printf '{"step":"%s"}' "$STEP_KEY""#);
    let out = step_exec(dir.path()).wait_with_output().expect("ran");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "a small result stays out of the log");
    let message = std::fs::read_to_string(dir.path().join("termination-log")).expect("message");
    let Some(Decoded::Result(result)) = decode_message(&message) else {
        panic!("an inline result: {message}");
    };
    assert_eq!(result.output, Some(json!({"step": "build"})));

    let dir = pod_dir("echo nope >&2; exit 4");
    let out = step_exec(dir.path()).wait_with_output().expect("ran");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let message = std::fs::read_to_string(dir.path().join("termination-log")).expect("message");
    let Some(Decoded::Result(result)) = decode_message(&message) else {
        panic!("an inline result: {message}");
    };
    let error = result.error.expect("a failure");
    assert_eq!(error.code, "script.failed");
    assert_eq!(error.message, "the script exited with status 4: nope");
}

#[test]
fn sigterm_stops_the_script_with_the_wrapper() {
    // As PID 1 of a container the wrapper would ignore SIGTERM unless it
    // handles it; here, unhandled, it would die and leave the script (in
    // its own process group) running.
    let dir = pod_dir(r#"echo $$ > "$WORKSPACE/pid"; exec sleep 300"#);
    let mut child = step_exec(dir.path());
    let pid_file = dir.path().join("workspace/pid");
    let mut script = 0;
    wait_until("the script to start", || {
        script = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        script > 0
    });
    let wrapper = Pid::from_raw(i32::try_from(child.id()).expect("a pid")).expect("a pid");
    kill_process(wrapper, Signal::TERM).expect("signalled");
    let status = child.wait().expect("the wrapper ends");
    assert_eq!(status.code(), Some(143), "{status:?}");
    wait_until("the script to be killed", || gone(script));
}
