//! `coxswain run` end to end with real processes: exit codes, the JSON
//! record, approvals from `--decide`, timeouts, and the examples.

use std::process::Command;

use serde_json::{Value, json};

mod common;

use common::{TempFile, coxswain, exits, record, says, stderr, succeeded, temp_file};

fn example(name: &str) -> String {
    format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A flow file in a folder of its own, both removed when the value is
/// dropped (at the end of the test that made it); derefs to its path.
struct FlowFile {
    _file: TempFile,
    path: String,
}

impl std::ops::Deref for FlowFile {
    type Target = str;
    fn deref(&self) -> &str {
        &self.path
    }
}

/// `coxswain run FILE --output json --quiet`.
fn run_json(file: &str) -> std::process::Output {
    coxswain(&["run", file, "--output", "json", "--quiet"])
}

/// `coxswain run FILE OPTIONS --output json --quiet`: the record of the
/// run, which must succeed.
fn run_quietly(file: &str, options: &[&str]) -> Value {
    let mut args = vec!["run", file];
    args.extend(options);
    args.extend(["--output", "json", "--quiet"]);
    succeeded(&coxswain(&args))
}

/// Runs `coxswain ARGS`, checking that it refuses them: exit code 2 and
/// `part` on stderr.
fn refused(args: &[&str], part: &str) {
    let o = coxswain(args);
    exits(&o, 2);
    says(stderr(&o), part);
}

fn flow_file(name: &str, steps: &str) -> FlowFile {
    let text = format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: t}}\nspec:\n  steps:\n{steps}"
    );
    let file = temp_file(name, &text);
    FlowFile {
        path: file.display().to_string(),
        _file: file,
    }
}

#[test]
fn hello_runs_offline_and_prints_the_record() {
    let o = coxswain(&[
        "run",
        &example("hello.yaml"),
        "--input",
        r#"{"names": ["Ada", "Grace"], "loud": true}"#,
        "--output",
        "json",
    ]);
    let r = succeeded(&o);
    assert_eq!(r["phase"], "Succeeded");
    assert_eq!(r["steps"]["count"]["output"]["count"], 2);
    assert_eq!(r["steps"]["check"]["exit"], "true");
    assert_eq!(r["steps"]["whisper"]["status"], "skipped");
    // A parallel step's gathered output is stored once, in its parts.
    let greet = &r["steps"]["greet"];
    assert_eq!(greet["outputFromParts"], true);
    let grace = greet["parts"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["key"] == "grace"));
    assert_eq!(
        grace.map(|p| &p["output"]["greeting"]),
        Some(&json!("hello Grace"))
    );
    assert_eq!(r["output"]["greetings"][0]["label"], "Ada");
    let arrows = r["arrows"].as_array().expect("arrows");
    assert!(
        arrows
            .iter()
            .any(|a| a["from"] == "check.false" && a["taken"] == false)
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("✓ greet completed") && stderr.contains("run succeeded"),
        "{stderr}"
    );
}

#[test]
fn the_schedule_example_runs_by_hand_as_a_first_report() {
    let r = run_quietly(
        &example("digest.yaml"),
        &["--input", r#"{"repo": "coxswain"}"#],
    );
    assert_eq!(r["phase"], "Succeeded");
    // `$SINCE` is empty outside a schedule: the report counts everything.
    assert_eq!(
        r["output"],
        json!({"repo": "coxswain", "since": null, "report": "every change to coxswain so far"})
    );
}

#[test]
fn failure_handling_example_retries_and_continues() {
    let r = run_quietly(&example("failures.yaml"), &[]);
    assert_eq!(
        r["steps"]["flaky"]["attempts"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(r["steps"]["lookup"]["status"], "failed");
    // Without an `output:`, the run's result is its last step's: shown as
    // the run's `output`, with the step named.
    let last = r["outputFrom"].as_str().expect("outputFrom");
    let result = &r["output"];
    assert_eq!(result, &r["steps"][last]["output"]);
    assert_eq!(result["used_fallback"], true);
    assert!(
        result["because"]["data"]
            .as_str()
            .is_some_and(|s| s.contains("no such user"))
    );
}

/// A flow kubectl would read otherwise (a bare `n` key, `when: true`) is
/// not run: it is refused with lint's messages, before anything runs.
#[test]
fn a_flow_kubectl_reads_differently_is_refused_with_lints_messages() {
    let flow = flow_file(
        "traps.yaml",
        "    - key: a\n      when: true\n      script: {source: touch ran}\n      input: {n: 1}\n",
    );
    let o = coxswain(&["run", &flow, "--input", "{}"]);
    exits(&o, 2);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{}: flow t: kubectl and Argo CD would read this flow differently, so it is not run; quote as said (`coxswain lint` says the same):\n  \
             line 7, column 13: the value `true` is the boolean true to kubectl and Argo CD, and the API server refuses it: `when` takes text (an expression); quote it: \"true\"\n  \
             line 9, column 15: the key `n` is text here, but kubectl and Argo CD (YAML 1.1) read it as false; quote it: \"n\"\n",
            &*flow
        )
    );
    assert!(o.stdout.is_empty());
    let lint = coxswain(&["lint", &flow]);
    let lint = String::from_utf8_lossy(&lint.stdout);
    assert!(
        lint.contains("line 7, column 13: the value `true`"),
        "{lint}"
    );
    assert!(lint.contains("line 9, column 15: the key `n`"), "{lint}");
}

#[test]
fn input_that_does_not_fit_exits_2_before_anything_runs() {
    let o = coxswain(&["run", &example("hello.yaml"), "--input", r#"{"loud": 1}"#]);
    exits(&o, 2);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("`names` is required") && stderr.contains("input.loud: expected boolean"),
        "{stderr}"
    );
    assert!(!stderr.contains("started"), "nothing ran: {stderr}");
    let o = coxswain(&["run", &example("hello.yaml"), "--input", "{not json"]);
    exits(&o, 2);
}

#[test]
fn an_invalid_flow_exits_2() {
    let file = flow_file(
        "invalid.yaml",
        "    - key: a\n      script: {source: 'true'}\n      when: $input.x == True\n",
    );
    refused(&["run", &file], "step a: when: write `true`");
}

#[test]
fn a_failing_step_fails_the_run_with_exit_1() {
    let file = flow_file(
        "fail.yaml",
        "    - key: a\n      script: {source: 'echo broken >&2; exit 4'}\n    - key: b\n      script: {source: 'echo {}'}\n",
    );
    let o = run_json(&file);
    exits(&o, 1);
    let r = record(&o);
    assert_eq!(r["phase"], "Failed");
    assert_eq!(r["steps"]["a"]["error"]["code"], "script.failed");
    assert!(
        r["steps"]["a"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("broken"))
    );
    assert!(r["steps"].get("b").is_none(), "b never started");

    // In text mode a failed run prints no output at all, and says why on stderr.
    let text = coxswain(&["run", &file]);
    assert_eq!(text.status.code(), Some(1));
    assert!(
        text.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    let said = String::from_utf8_lossy(&text.stderr);
    assert!(said.contains("run failed"), "{said}");
    assert!(said.contains("script.failed"), "{said}");
}

#[test]
fn a_timeout_kills_the_script() {
    let file = flow_file(
        "slow.yaml",
        "    - key: slow\n      timeout: 500ms\n      script: {source: 'sleep 30'}\n",
    );
    let started = std::time::Instant::now();
    let o = run_json(&file);
    exits(&o, 1);
    assert_eq!(
        record(&o)["steps"]["slow"]["error"]["code"],
        "workflow.timeout"
    );
    // Not a timing assertion on our speed: the run must not wait for `sleep 30`.
    assert!(started.elapsed().as_secs() < 25);
}

#[test]
fn decisions_come_from_the_command_line_in_order() {
    let file = flow_file(
        "review.yaml",
        "    - key: draft\n      script: {source: 'echo \"{\\\"attempt\\\": $ATTEMPT}\"'}\n    - key: review\n      approval: {decisions: [approve, changes], show: [draft]}\n      sendBack: [{exit: changes, to: draft}]\n",
    );
    let r = run_quietly(
        &file,
        &[
            "--decide",
            "review=changes:again",
            "--decide",
            "review=approve",
        ],
    );
    assert_eq!(r["steps"]["draft"]["output"]["attempt"], 2);
    assert_eq!(r["steps"]["draft"]["attempts"][1]["feedback"], "again");
    assert_eq!(r["steps"]["review"]["output"]["decision"], "approve");
    // Progress calls the redone draft what it is: sent back, not retried.
    let o = coxswain(&[
        "run",
        &file,
        "--decide",
        "review=changes:again",
        "--decide",
        "review=approve",
    ]);
    let progress = String::from_utf8_lossy(&o.stderr);
    assert!(
        progress.contains("▶ draft started again: sent back by review (changes"),
        "{progress}"
    );
    assert!(!progress.contains("attempt 2"), "{progress}");
    // Without a decision and without a terminal, the run stops instead of
    // hanging, and fails saying what it needs (nobody cancelled it).
    let o = coxswain(&["run", &file, "--quiet", "--output", "json"]);
    exits(&o, 1);
    let r = record(&o);
    assert_eq!(r["phase"], "Failed");
    assert_eq!(r["error"]["code"], "workflow.no_answer", "{}", r["error"]);
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("pass --decide review=")),
        "{}",
        r["error"]
    );
}

#[test]
fn ctrl_c_cancels_the_run_and_kills_its_processes() {
    let marker = format!("coxswain-cancel-{}", std::process::id());
    let file = flow_file(
        "cancel.yaml",
        &format!("    - key: wait\n      script: {{source: 'sleep 300 # {marker}'}}\n"),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["run", &file, "--output", "json", "--quiet"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("coxswain starts");
    let running = |marker: &str| {
        Command::new("pgrep")
            .args(["-f", marker])
            .output()
            .is_ok_and(|o| !o.stdout.is_empty())
    };
    // Wait (boundedly) until the script is running, then press Ctrl-C.
    for _ in 0..100 {
        if running(&marker) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(running(&marker), "the script started");
    let pid = child.id().to_string();
    Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    let o = child.wait_with_output().expect("coxswain ends");
    exits(&o, 1);
    let r = record(&o);
    assert_eq!(r["phase"], "Cancelled");
    assert_eq!(r["steps"]["wait"]["status"], "failed");
    assert!(!running(&marker), "the script's process was killed");
}

#[test]
fn a_flow_or_input_file_stops_reading_at_16_mib() {
    let o = coxswain(&["run", "/dev/zero"]);
    assert_eq!(
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned()
        ),
        (
            Some(2),
            "flow /dev/zero is larger than 16 MiB: reading stopped there\n".to_string()
        )
    );
    let flow = flow_file(
        "capped-input.yaml",
        "  - key: a\n    script: {source: 'true'}\n",
    );
    let o = coxswain(&["run", &flow, "--input", "@/dev/zero"]);
    assert_eq!(
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned()
        ),
        (
            Some(2),
            "input /dev/zero is larger than 16 MiB: reading stopped there\n".to_string()
        )
    );
}

#[test]
fn a_number_out_of_range_in_a_script_output_fails_the_step_naming_it() {
    let o = run_json(&flow_file(
        "huge-number.yaml",
        "    - key: a\n      script: {source: 'echo \"{\\\"ok\\\": 1, \\\"big\\\": 1e400}\"'}\n",
    ));
    let r = record(&o);
    assert_eq!(
        (o.status.code(), &r["phase"], &r["steps"]["a"]["output"]),
        (Some(1), &Value::from("Failed"), &Value::Null),
    );
    assert_eq!(
        r["steps"]["a"]["error"]["message"],
        "stdout is JSON but holds a number out of range (beyond ±1.8e308) ending at line 1 column 22; print it as a string to keep it"
    );
}

#[test]
fn decide_answers_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = dir.path().join("ran");
    let file = flow_file(
        "decide-check.yaml",
        &format!(
            "    - key: touch\n      script: {{source: 'touch {}; echo {{}}'}}\n    - key: review\n      approval: {{decisions: [approve, changes]}}\n    - key: assign\n      approval: {{mode: entry, fields: [{{name: owner, type: string}}]}}\n",
            marker.display()
        ),
    );
    let refused = [
        (
            "revew=approve",
            "--decide revew=approve: the flow has no step `revew`; its approval steps are `assign`, `review`",
        ),
        (
            "review=aprove",
            "--decide review=aprove: `aprove` is not a decision of step `review`; choose one of approve, changes",
        ),
        (
            "touch=approve",
            "--decide touch=approve: step `touch` is a script step, not an approval; its approval steps are `assign`, `review`",
        ),
        (
            "assign=ana",
            "--decide assign=ana: the entry for step `assign` is not JSON",
        ),
        ("review", "--decide review: write STEP=DECISION"),
    ];
    for (answer, message) in refused {
        let o = coxswain(&[
            "run",
            &file,
            "--decide",
            "review=approve",
            "--decide",
            answer,
            "--decide",
            r#"assign={"owner": "ana"}"#,
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{answer}: {stderr}");
        assert!(stderr.starts_with(message), "{answer}: {stderr}");
        assert!(!marker.exists(), "{answer}: the script step ran");
    }
}

#[test]
fn an_answer_no_step_asked_for_is_named_in_a_warning() {
    let file = flow_file(
        "decide-unused.yaml",
        "    - key: review\n      approval: {decisions: [approve, changes]}\n",
    );
    let o = coxswain(&[
        "run",
        &file,
        "--quiet",
        "--decide",
        "review=approve",
        "--decide",
        "review=changes:later",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr,
        "warning: --decide review=changes:later was never used: no step asked for it\n"
    );
}

#[test]
fn a_script_sees_none_of_the_runners_keys() {
    let file = flow_file("env.yaml", "    - key: show\n      script: {source: env}\n");
    let o = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["run", &file, "--output", "json", "--quiet"])
        .env("COXSWAIN_AGENT_API_KEY", "sk-runner-key")
        .env("OPENAI_API_KEY", "sk-openai-key")
        .env("COXSWAIN_SECRET_DB_PASSWORD", "s3cret")
        .output()
        .expect("coxswain runs");
    exits(&o, 0);
    let text = record(&o)["steps"]["show"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.contains("RUN_NAME="), "{text}");
    for leaked in [
        "sk-runner-key",
        "sk-openai-key",
        "s3cret",
        "COXSWAIN_AGENT_API_KEY",
    ] {
        assert!(
            !text.contains(leaked),
            "{leaked} reached the script:\n{text}"
        );
    }
}

#[test]
fn a_step_in_mode_both_and_a_redone_script_reading_the_review() {
    // The release example: the redone draft reads the reviewer's words.
    let r = run_quietly(
        &example("release.yaml"),
        &[
            "--input",
            r#"{"version": "1.4.0"}"#,
            "--decide",
            "review=changes:Mention the new exporter.",
            "--decide",
            "review=approve",
        ],
    );
    assert_eq!(
        r["output"]["notes"],
        "Release 1.4.0 (draft 2, reviewer asked: Mention the new exporter.): faster runs, clearer errors."
    );
    // Mode both: the decision, the entry and feedback in one answer.
    let file = flow_file(
        "triage.yaml",
        "    - key: triage\n      approval: {mode: both, decisions: [accept, reject], fields: [{name: owner, type: string}]}\n",
    );
    let r = run_quietly(
        &file,
        &["--decide", r#"triage=accept:{"owner": "ana"} Looks right."#],
    );
    let triage = &r["steps"]["triage"];
    assert_eq!(triage["exit"], "accept", "{triage}");
    assert_eq!(
        triage["output"]["response"],
        json!({"owner": "ana"}),
        "{triage}"
    );
    assert_eq!(triage["output"]["feedback"], "Looks right.", "{triage}");
    // Without the entry the answer is refused before anything runs.
    refused(
        &["run", &file, "--decide", "triage=accept", "--quiet"],
        "step `triage` takes a decision and an entry",
    );
}

#[test]
fn a_scripts_stderr_lines_show_under_its_step_and_stay_in_its_record() {
    let flow = flow_file(
        "lines.yaml",
        r#"    - key: build
      script:
        source: |
          echo 'resolving' >&2
          printf 'no line break' >&2
          echo '{"ok": true}'
"#,
    );
    let out = coxswain(&["run", &flow]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let progress = String::from_utf8_lossy(&out.stderr);
    let shown: Vec<&str> = progress
        .lines()
        .filter(|l| l.starts_with("    build │ "))
        .collect();
    assert_eq!(
        shown,
        ["    build │ resolving", "    build │ no line break"],
        "{progress}"
    );
    let started = progress.find("▶ build started").expect("started line");
    let completed = progress.find("✓ build completed").expect("completed line");
    let first = progress.find("build │ resolving").expect("the line");
    assert!(started < first && first < completed, "{progress}");

    let hidden = coxswain(&["run", "--no-script-logs", "--output", "json", &flow]);
    assert_eq!(hidden.status.code(), Some(0), "{hidden:?}");
    assert!(
        !String::from_utf8_lossy(&hidden.stderr).contains("│"),
        "{}",
        String::from_utf8_lossy(&hidden.stderr)
    );
    let record = record(&hidden);
    assert_eq!(
        record["steps"]["build"]["attempts"][0]["log"],
        json!({"text": "resolving\nno line break"}),
        "hidden from the screen, kept in the record"
    );
}
