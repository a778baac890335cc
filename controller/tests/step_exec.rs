//! `coxswain step-exec`, the wrapper in a script step's pod, run as the
//! container runs it: in folders standing in for the pod's volumes.

use std::path::Path;
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
        branch: None,
        part_round: None,
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
    let mut command = Command::new(env!("CARGO_BIN_EXE_coxswain"));
    command.args(["step-exec", "run"]);
    for (flag, name) in [
        ("--task", "step.json"),
        ("--inputs", "inputs"),
        ("--outputs", "outputs"),
        ("--workspace", "workspace"),
        ("--home", "home"),
        ("--tmp", "tmp"),
        ("--termination-log", "termination-log"),
    ] {
        command.arg(flag).arg(dir.join(name));
    }
    command
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
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        r#"{"step":"build"}"#,
        "the log shows what the script printed, and a small result stays out of it"
    );
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
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "nope\n",
        "stderr reaches the log"
    );
    assert_eq!(result.log.map(|l| l.text).as_deref(), Some("nope\n"));
}

#[test]
fn a_large_result_is_framed_after_the_start_of_stdout_the_log_shows() {
    // 300 KiB of stdout on one line, no line break at its end, and stderr.
    let dir = pod_dir(
        r#"echo 'working' >&2; printf '{"data": "'; head -c 307200 /dev/zero | tr '\0' a; printf '"}'"#,
    );
    let out = step_exec(dir.path()).wait_with_output().expect("ran");
    let message = std::fs::read_to_string(dir.path().join("termination-log")).expect("message");
    assert_eq!(out.status.code(), Some(0), "{out:?}: {message}");
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(Decoded::InLog(reference)) = decode_message(&message) else {
        panic!("a result in the log: {message}");
    };
    assert!(
        log.starts_with(r#"{"data": "aaaa"#),
        "the start of stdout is shown: {}",
        &log[..40]
    );
    assert!(
        log.contains("[coxswain: the rest of stdout is left out of this log"),
        "and says where the rest went"
    );
    let frame = log.rfind("\ncoxswain-result v1 ").expect("a frame");
    assert!(
        frame <= 64 * 1024 + 200,
        "stdout is not copied whole: {frame} bytes before the frame"
    );
    // The frame is on the log's last lines, as the controller reads them.
    let last: Vec<&str> = log.lines().rev().take(4).collect();
    let tail = last.into_iter().rev().collect::<Vec<_>>().join("\n") + "\n";
    let result = coxswain_k8s::jobs::wire::decode_log(&tail, &reference).expect("the frame");
    // `{"data": v}` is `v`.
    assert!(
        result.output == Some(json!("a".repeat(307_200))),
        "the whole output came through the frame"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "working\n");
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
