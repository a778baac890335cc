//! The local script executor against real processes.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{assert_error, work};
use coxswain_core::api::{EnvVar, Field, ScriptOutput, ScriptStep, StepError};
use coxswain_core::engine::{Task, Work, WorkResult, codes};
use coxswain_steps::Executor;
use coxswain_steps::script::{DEFAULT_MAX_FILES, DEFAULT_MAX_LISTING_BYTES, HostEnv, LocalScript};
use coxswain_steps::secrets::MapSecrets;
use serde_json::{Value, json};

fn executor() -> LocalScript {
    LocalScript::new(Arc::new(MapSecrets::new().with("db", "password", "s3cret")))
}

fn source(src: &str) -> ScriptStep {
    ScriptStep {
        source: Some(src.into()),
        ..Default::default()
    }
}

fn script_work(step: ScriptStep, input: Value) -> Work {
    work(Task::Script(step), input, &[])
}

/// An executor with no secrets.
fn bare() -> LocalScript {
    LocalScript::new(Arc::new(MapSecrets::new()))
}

/// Runs `step` on `input` with `exec`.
async fn run_with(exec: &LocalScript, step: ScriptStep, input: Value) -> WorkResult {
    exec.run(&script_work(step, input)).await
}

/// Why the script `src`, run on no input with `exec`, failed.
async fn script_error(exec: &LocalScript, src: &str) -> StepError {
    run_with(exec, source(src), Value::Null)
        .await
        .unwrap_err()
        .error
}

/// Runs `step` on `input` with the usual executor.
async fn run(step: ScriptStep, input: Value) -> WorkResult {
    run_with(&executor(), step, input).await
}

fn fields(list: &[(&str, &str)]) -> Option<ScriptOutput> {
    Some(ScriptOutput {
        fields: list
            .iter()
            .map(|(n, t)| Field {
                name: n.to_string(),
                type_: t.to_string(),
                description: None,
            })
            .collect(),
        ..Default::default()
    })
}

#[tokio::test]
async fn inputs_are_files_in_contract_form() {
    let step = source(
        r#"printf '{"ticket": %s, "note": %s, "list": %s, "count": %s}' "$(cat "$INPUTS/Jira_Ticket")" "$(cat "$INPUTS/note")" "$(cat "$INPUTS/list")" "$(ls "$INPUTS" | wc -l)""#,
    );
    let input = json!({
        "Jira Ticket": {"key": "SHOP-12", "summary": "Checkout fails"},
        "note": "plain text",
        "list": [1, 2],
    });
    let done = run(step, input).await.unwrap();
    assert_eq!(
        done.output,
        json!({
            "ticket": {"key": "SHOP-12", "summary": "Checkout fails"},
            "note": {"data": "plain text"},
            "list": {"data": [1, 2]},
            "count": 3,
        })
    );
}

#[tokio::test]
async fn an_input_that_is_not_an_object_is_one_file() {
    let step = source(r#"cat "$INPUTS/input""#);
    let done = run(step, json!("hello")).await.unwrap();
    // {"data": "hello"} on stdout unwraps to "hello"; JSON printed, the
    // text is the output's (kept once).
    assert_eq!(done.output, json!("hello"));
    assert_eq!(done.text.as_deref(), Some("hello"));
}

#[tokio::test]
async fn environment_is_set() {
    let mut step = source(
        r#"printf '{"run":"%s","step":"%s","attempt":"%s","since":"%s","last":"%s","plain":"%s","secret":"%s","empty":%s,"ws":"%s"}' "$RUN_NAME" "$STEP_KEY" "$ATTEMPT" "$SINCE" "$LAST_RUN" "$PLAIN" "$DB_PASSWORD" "$(ls -A "$OUTPUTS" | wc -l)" "$(pwd)""#,
    );
    step.env = vec![
        EnvVar {
            name: "PLAIN".into(),
            value: Some("a value".into()),
            value_from: None,
        },
        EnvVar::from_secret("DB_PASSWORD", "db", "password"),
    ];
    let mut w = script_work(step, Value::Null);
    w.run.since = Some("1700000000".into());
    let done = executor().run(&w).await.unwrap();
    let out = done.output;
    assert_eq!(out["run"], "demo-run");
    assert_eq!(out["step"], "step_one");
    assert_eq!(out["attempt"], "2");
    assert_eq!(out["since"], "1700000000");
    assert_eq!(out["last"], "1700000000");
    assert_eq!(out["plain"], "a value");
    assert_eq!(out["secret"], "s3cret");
    assert_eq!(out["empty"], 0);
    assert!(out["ws"].as_str().unwrap().ends_with("/workspace"), "{out}");
}

#[tokio::test]
async fn since_is_empty_without_a_schedule() {
    let step = source(r#"printf '{"since":"%s"}' "${SINCE-unset}""#);
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(done.output, json!({"since": ""}));
}

#[tokio::test]
async fn missing_secret_fails_with_secret_code() {
    let mut step = source("true");
    step.env = vec![EnvVar::from_secret("X", "nope", "k")];
    let err = run(step, Value::Null).await.unwrap_err().error;
    assert_error(&err, codes::SECRET, &["nope"]);
}

#[tokio::test]
async fn command_and_args() {
    let step = ScriptStep {
        command: vec!["printf".into(), "%s-%s".into()],
        args: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(done.text.as_deref(), Some("a-b"));
    assert_eq!(done.output, Value::Null);
}

async fn declared_error(stdout: &str) -> String {
    let mut step = source(&format!("printf '%s' '{stdout}'"));
    step.output = fields(&[("id", "integer"), ("title", "string")]);
    let err = run(step, Value::Null).await.unwrap_err().error;
    assert_eq!(err.code, codes::OUTPUT);
    err.message
}

#[tokio::test]
async fn declared_fields_are_checked() {
    let mut step = source(r#"echo '{"id": 7, "title": "x"}'"#);
    step.output = fields(&[("id", "integer"), ("title", "string")]);
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(done.output, json!({"id": 7, "title": "x"}));

    let prefix = "The script must print one JSON object with the fields id, title";
    assert_eq!(
        declared_error(r#"{"id": 7}"#).await,
        format!("{prefix}: missing field `title` (string).")
    );
    assert_eq!(
        declared_error(r#"{"id": "7", "title": "x"}"#).await,
        format!("{prefix}: field `id` must be an integer, found a string (\"7\").")
    );
    assert_eq!(
        declared_error(r#"{"id": 7, "title": "x", "more": 1}"#).await,
        format!("{prefix}: unexpected field `more`: only `id`, `title` may be given.")
    );
    let not_json = declared_error("not json").await;
    assert!(
        not_json.starts_with(&format!("{prefix}; stdout is not JSON")),
        "{not_json}"
    );
    assert_eq!(
        declared_error("[1, 2]").await,
        format!("{prefix}: expected a JSON object, found an array ([1,2]).")
    );
}

#[tokio::test]
async fn data_is_unwrapped_and_non_json_is_null() {
    let step = source(r#"echo '{"data": {"a": [1]}}'"#);
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(done.output, json!({"a": [1]}));

    let step = source("echo hello world");
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(done.output, Value::Null);
    assert_eq!(done.text.as_deref(), Some("hello world\n"));
}

#[tokio::test]
async fn output_files_are_listed() {
    let step = source(
        r#"mkdir -p "$OUTPUTS/sub" && echo a > "$OUTPUTS/report.txt" && echo b > "$OUTPUTS/sub/b.csv" && echo '{"done": true}'"#,
    );
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(
        done.output,
        json!({"done": true, "files": ["report.txt", "sub/b.csv"]})
    );
}

#[tokio::test]
async fn non_zero_exit_fails_with_the_stderr_tail() {
    let err = script_error(
        &executor(),
        "echo first line >&2; echo 'last words' >&2; exit 3",
    )
    .await;
    assert_eq!(err.code, codes::SCRIPT);
    assert_eq!(
        err.message,
        "the script exited with status 3: first line\nlast words"
    );

    let err = script_error(
        &bare().with_stderr_tail(100),
        "head -c 100000 /dev/zero | tr '\\0' x >&2; echo END >&2; exit 1",
    )
    .await;
    assert!(err.message.ends_with("xxxEND"), "{}", err.message);
    assert!(err.message.len() < 200, "{}", err.message);
}

#[tokio::test]
async fn stdout_is_capped() {
    let err = script_error(&bare().with_stdout_limit(1000), "yes").await;
    assert_eq!(err.code, codes::OUTPUT);
    assert_eq!(
        err.message,
        "the script printed more than 1000 bytes on stdout and was stopped"
    );
}

/// Whether a process is still alive (a zombie waiting for its parent to reap
/// it counts as gone: it runs nothing).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

async fn wait_gone(pid: u32) -> bool {
    for _ in 0..100 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn sleeper(pid_file: &std::path::Path) -> ScriptStep {
    with_pid(pid_file, "sleep 1000 & echo $! > '{pid}'; wait")
}

/// The script `src` with `pid_file`'s path in place of `{pid}`.
fn with_pid(pid_file: &std::path::Path, src: &str) -> ScriptStep {
    source(&src.replace("{pid}", &pid_file.display().to_string()))
}

/// A pid file's path in a folder of its own, which goes with the guard.
fn temp_pid_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    (dir, pid_file)
}

/// Checks that the background process `pid` is soon gone.
async fn assert_gone(pid: u32) {
    assert!(wait_gone(pid).await, "the background sleep {pid} survived");
}

async fn read_pid(pid_file: &std::path::Path) -> u32 {
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(pid_file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the script did not write its child's pid");
}

#[tokio::test]
async fn timeout_kills_the_process_group() {
    let (_dir, pid_file) = temp_pid_file();
    let mut w = script_work(sleeper(&pid_file), Value::Null);
    w.timeout = Some(Duration::from_millis(500));
    let err = executor().run(&w).await.unwrap_err().error;
    assert_error(&err, codes::TIMEOUT, &["timeout"]);
    assert_gone(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn dropping_the_future_kills_the_process_group() {
    let (_dir, pid_file) = temp_pid_file();
    let mut w = script_work(sleeper(&pid_file), Value::Null);
    w.timeout = None;
    let exec = executor();
    // Boxed, so that `drop` below drops the future itself.
    let mut run = Box::pin(exec.run(&w));
    let pid = tokio::select! {
        _ = &mut run => panic!("the script ended on its own"),
        pid = read_pid(&pid_file) => pid,
    };
    assert!(alive(pid));
    drop(run);
    assert_gone(pid).await;
}

#[tokio::test]
async fn background_processes_do_not_outlive_a_finished_script() {
    let (_dir, pid_file) = temp_pid_file();
    let step = with_pid(
        &pid_file,
        "sleep 1000 >/dev/null 2>&1 & echo $! > '{pid}'; echo done",
    );
    let done = run(step, Value::Null).await.unwrap();
    assert_eq!(done.text.as_deref(), Some("done\n"));
    assert_gone(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn the_environment_holds_only_what_the_contract_gives() {
    let mut step = source("env");
    step.env = vec![EnvVar {
        name: "PLAIN".into(),
        value: Some("a value".into()),
        value_from: None,
    }];
    let host = HostEnv::from_vars([
        ("PATH", "/usr/bin:/bin"),
        ("TZ", "Europe/Paris"),
        ("COXSWAIN_AGENT_API_KEY", "sk-never-shown"),
        ("COXSWAIN_SECRET_DB_PASSWORD", "s3cret"),
        ("OPENAI_API_KEY", "sk-other"),
    ]);
    let done = executor()
        .with_host_env(host)
        .run(&script_work(step, Value::Null))
        .await
        .unwrap();
    let text = done.text.unwrap();
    let mut names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        // The shell adds its own few.
        .filter(|name| !matches!(*name, "PWD" | "SHLVL" | "_" | "OLDPWD"))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "ATTEMPT",
            "HOME",
            "INPUTS",
            "LAST_RUN",
            "OUTPUTS",
            "PART_KEY",
            "PATH",
            "PLAIN",
            "RUN_NAME",
            "SINCE",
            "STEP_KEY",
            "TMPDIR",
            "TZ",
            "WORKSPACE"
        ],
        "{text}"
    );
    assert!(!text.contains("sk-"), "{text}");
}

#[tokio::test]
async fn folders_and_input_files_are_private() {
    let step = source(
        r#"printf '{"file":"%s","inputs":"%s","outputs":"%s","workspace":"%s","home":"%s","tmp":"%s"}' "$(stat -c %a "$INPUTS/doc")" "$(stat -c %a "$INPUTS")" "$(stat -c %a "$OUTPUTS")" "$(stat -c %a "$WORKSPACE")" "$(stat -c %a "$HOME")" "$(stat -c %a "$TMPDIR")""#,
    );
    let done = run(step, json!({"doc": {"secret": "yes"}})).await.unwrap();
    assert_eq!(
        done.output,
        json!({"file": "600", "inputs": "700", "outputs": "700", "workspace": "700", "home": "700", "tmp": "700"})
    );
}

/// Runs `w`, giving up (a hang, which fails the test once the caller has
/// cleaned up) if the attempt does not end on its own.
async fn ends(
    exec: &LocalScript,
    w: &Work,
) -> Result<coxswain_core::engine::WorkResult, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(60), exec.run(w)).await
}

/// Kills a process the test left running (one that escaped the group).
fn kill(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

#[tokio::test]
async fn a_process_that_left_the_group_does_not_hold_the_attempt() {
    let (_dir, pid_file) = temp_pid_file();
    // setsid puts the sleep in a session of its own, out of reach of the
    // group kill, and it keeps stdout open.
    let step = source(&format!("{}; echo '{{\"done\": true}}'", escape(&pid_file)));
    let exec = executor().with_drain_grace(Duration::from_millis(200));
    let result = ends(&exec, &script_work(step, Value::Null)).await;
    kill(read_pid(&pid_file).await);
    let done = result.expect("the attempt hung").unwrap();
    assert_eq!(done.output, json!({"done": true}));
}

/// Shell that starts a `sleep` in a session of its own holding stdout open,
/// and returns only once it has escaped (it writes its pid after `setsid`),
/// so the script's exit never races the escape.
fn escape(pid_file: &std::path::Path) -> String {
    let pid = pid_file.display();
    format!(
        "setsid sh -c 'echo $$ > \"{pid}.tmp\"; mv \"{pid}.tmp\" \"{pid}\"; exec sleep 1000' & \
         while [ ! -s '{pid}' ]; do sleep 0.01; done"
    )
}

#[tokio::test]
async fn the_timeout_covers_reading_what_an_escaped_process_holds_open() {
    let (_dir, pid_file) = temp_pid_file();
    // The script exits at once; the escaped sleep keeps stdout open, and the
    // grace period is longer than the timeout: the timeout ends the attempt.
    let step = source(&format!("{}; echo started", escape(&pid_file)));
    let mut w = script_work(step, Value::Null);
    // Long enough for the escape to finish even on a loaded machine.
    w.timeout = Some(Duration::from_millis(1500));
    let exec = executor().with_drain_grace(Duration::from_secs(600));
    let result = ends(&exec, &w).await;
    kill(read_pid(&pid_file).await);
    let err = result.expect("the attempt hung").unwrap_err().error;
    assert_error(&err, codes::TIMEOUT, &["1500ms"]);
}

#[tokio::test]
async fn a_background_child_holding_stdout_is_killed_with_the_group() {
    let (_dir, pid_file) = temp_pid_file();
    let step = with_pid(
        &pid_file,
        r#"sleep 1000 & echo $! > '{pid}'; echo '{"done": true}'"#,
    );
    let mut w = script_work(step, Value::Null);
    w.timeout = Some(Duration::from_secs(30));
    let done = ends(&executor(), &w)
        .await
        .expect("the attempt hung")
        .unwrap();
    assert_eq!(done.output, json!({"done": true}));
    assert_gone(read_pid(&pid_file).await).await;
}

#[tokio::test]
async fn twenty_thousand_output_files_give_a_capped_marked_list() {
    let step = source(r#"cd "$OUTPUTS" && seq -w 1 20000 | xargs touch && echo '{"ok": true}'"#);
    let done = run(step, Value::Null).await.unwrap();
    let out = &done.output;
    let files = out["files"].as_array().unwrap();
    assert_eq!(files.len(), DEFAULT_MAX_FILES);
    assert_eq!(files[0], "00001");
    assert_eq!(out["filesTruncated"], true);
    assert_eq!(out["filesTotal"], 20000);
    assert!(
        serde_json::to_vec(out).unwrap().len() <= DEFAULT_MAX_LISTING_BYTES + 100,
        "{} bytes",
        serde_json::to_vec(out).unwrap().len()
    );
}

#[tokio::test]
async fn cancelling_launched_work_kills_the_process_group() {
    use coxswain_steps::in_process::InProcess;
    use coxswain_steps::launch::{Launcher, Observation, WorkId};

    let (_dir, pid_file) = temp_pid_file();
    let mut w = script_work(sleeper(&pid_file), Value::Null);
    w.timeout = None;
    let (launcher, _finishes) = InProcess::new(Arc::new(executor()));
    launcher.launch(&w).await.unwrap();
    let pid = read_pid(&pid_file).await;
    assert!(alive(pid));
    let id = WorkId::of(&w);
    assert_eq!(launcher.observe(&id).await.unwrap(), Observation::Running);
    launcher.cancel(&id).await.unwrap();
    assert_gone(pid).await;
    assert_eq!(launcher.observe(&id).await.unwrap(), Observation::Unknown);
}

#[tokio::test]
async fn stdout_stops_at_what_a_record_keeps_by_default() {
    // 300 KiB of output: more than the 256 KiB one value may weigh in a record.
    let err = script_error(&bare(), "head -c 307200 /dev/zero | tr '\\0' x").await;
    assert_eq!(err.code, codes::OUTPUT);
    assert_eq!(
        err.message,
        "the script printed more than 256 KiB on stdout and was stopped"
    );
}

#[tokio::test]
async fn every_attempt_keeps_the_last_lines_of_its_stderr() {
    let step = source("echo 'fetching 3 pages' >&2; echo '{\"pages\": 3}'");
    let done = run(step, Value::Null).await.unwrap();
    let log = done.log.expect("a succeeded attempt keeps its stderr");
    assert_eq!(log.text, "fetching 3 pages\n");
    assert!(!log.cut);

    let step = source("for i in $(seq 1 1000); do echo \"line $i\" >&2; done; exit 2");
    let failed = run(step, Value::Null).await.unwrap_err();
    let log = failed.log.expect("a failed attempt keeps its stderr");
    assert!(log.cut, "1000 lines do not fit");
    assert!(log.text.len() <= coxswain_core::api::LOG_TAIL_BYTES);
    assert!(log.text.starts_with("line "), "{:?}", &log.text[..20]);
    assert!(log.text.ends_with("line 1000\n"));

    let step = ScriptStep {
        source: Some("echo 'stuck on the lock' >&2; sleep 30".into()),
        ..Default::default()
    };
    let mut work = script_work(step, Value::Null);
    work.timeout = Some(Duration::from_millis(500));
    let failed = executor().run(&work).await.unwrap_err();
    assert_eq!(failed.error.code, codes::TIMEOUT);
    assert_eq!(
        failed.log.map(|l| l.text).as_deref(),
        Some("stuck on the lock\n"),
        "a timed-out attempt keeps what it wrote"
    );

    let quiet = run(source("echo '{}'"), Value::Null).await.unwrap();
    assert_eq!(quiet.log, None, "no stderr, no log");
}

/// Collects what an echo gets, per stream, for the test to look at while
/// the script still runs.
#[derive(Default, Clone)]
struct Seen(Arc<std::sync::Mutex<Vec<(String, String)>>>);

struct SeenWriter {
    stream: &'static str,
    label: String,
    seen: Seen,
}

impl std::io::Write for SeenWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut seen = self.seen.0.lock().unwrap();
        seen.push((
            format!("{}/{}", self.label, self.stream),
            String::from_utf8_lossy(buf).into_owned(),
        ));
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl coxswain_steps::script::Echo for Seen {
    fn open(&self, attempt: &coxswain_steps::script::Attempt) -> coxswain_steps::script::Echoes {
        let writer = |stream| -> Option<Box<dyn std::io::Write + Send>> {
            Some(Box::new(SeenWriter {
                stream,
                label: format!("{}#{}", attempt.step_key, attempt.attempt),
                seen: self.clone(),
            }))
        };
        coxswain_steps::script::Echoes {
            stdout: writer("stdout"),
            stderr: writer("stderr"),
        }
    }
}

#[tokio::test]
async fn output_is_echoed_as_it_comes_not_when_the_attempt_ends() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let step = source(&format!(
        "echo 'waiting for go' >&2; echo '{{\"partial\":'; while [ ! -e {} ]; do sleep 0.05; done; echo done >&2; echo 'true}}'",
        go.display()
    ));
    let seen = Seen::default();
    let script = executor().with_echo(Arc::new(seen.clone()));
    let work = script_work(step, Value::Null);
    let running = tokio::spawn(async move { script.run(&work).await });
    let joined = |seen: &Seen| -> Vec<String> {
        let seen = seen.0.lock().unwrap();
        seen.iter().map(|(s, t)| format!("{s}: {t}")).collect()
    };
    // The script waits for `go`; its first lines must be seen before.
    let mut waited = 0;
    while !joined(&seen).iter().any(|l| l.contains("waiting for go")) {
        assert!(
            waited < 200,
            "no echo while the script runs: {:?}",
            joined(&seen)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
        waited += 1;
    }
    let before = joined(&seen);
    assert!(
        before.contains(&"step_one#2/stderr: waiting for go\n".to_string()),
        "{before:?}"
    );
    std::fs::write(&go, "").unwrap();
    let done = running.await.unwrap().unwrap();
    assert_eq!(done.output, json!({"partial": true}));
    let after = joined(&seen).concat();
    assert!(
        after.contains("step_one#2/stdout: {\"partial\":\n"),
        "{after}"
    );
    assert!(after.contains("step_one#2/stderr: done\n"), "{after}");
}
