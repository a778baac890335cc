//! The kubectl plugin against a real cluster: `coxswain kubectl …` (and
//! once through a `kubectl-coxswain` link, found on `PATH` by the real
//! kubectl) with a controller serving the test's namespace. Every command
//! with its exit code: start (--watch), get, logs (from pods, followed, and
//! from the status once the pods are gone), graph, wait, cancel, watch, and
//! approve against the admission webhook (an answer it refuses is printed
//! as it came).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use coxswain_e2e::{Setup, coxswain_bin, flow, wait_for};
use serde_json::Value;

const BOUND: Duration = Duration::from_secs(60);

fn hello() -> String {
    flow(
        "hello",
        r#"
  input:
    type: object
    required: [name]
    properties: {name: {type: string}}
  output: {greeting: $steps.greet.output.greeting}
  steps:
    - key: greet
      input: {name: $input.name}
      script:
        source: |
          name=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/name")
          echo "hello from the plugin, $name" >&2
          printf '{"greeting": "hi %s"}\n' "$name"
    - key: fan
      parallel:
        parts: [{key: a, label: First}, {key: b}]
        step:
          script:
            source: |
              echo "part at work" >&2
              echo '{}'
"#,
    )
}

/// Two flows: one whose script fails, one whose script sleeps.
fn failing_and_sleepy() -> String {
    [
        flow(
            "failing",
            r#"
  steps:
    - key: explode
      script:
        source: |
          echo "boom: the disk is full" >&2
          exit 3
"#,
        ),
        flow(
            "sleepy",
            r#"
  steps:
    - key: nap
      script:
        source: |
          echo "started sleeping" >&2
          sleep 60
"#,
        ),
    ]
    .join("---\n")
}

/// No people of its own: the admin of the test cluster starts and answers.
const NOTHING: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plugin-test}\n";

fn review() -> String {
    flow(
        "review",
        r#"
  steps:
    - key: draft
      script: {source: "echo '{\"notes\": \"v1\"}'"}
    - key: review
      approval: {show: [draft], decisions: [approve, changes], allowSelfApproval: true}
    - key: publish
      after: [review.approve]
      script: {source: "echo '{\"published\": true}'"}
"#,
    )
}

/// A flow whose second step fails until a file exists (the pods of the
/// stand-in node are processes of this machine).
fn flaky() -> String {
    flow(
        "flaky",
        r#"
  input:
    type: object
    required: [marker]
    properties: {marker: {type: string}}
  steps:
    - key: prepare
      script: {source: "echo '{\"ok\": true}'"}
    - key: check
      input: {marker: $input.marker}
      script:
        source: |
          marker=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/marker")
          if [ -f "$marker" ]; then echo '{"fixed": true}'; else echo "no $marker yet" >&2; exit 1; fi
"#,
    )
}

/// What one plugin command printed and how it exited.
struct Said {
    code: Option<i32>,
    out: String,
    err: String,
}

impl Said {
    fn of(o: Output) -> Said {
        Said {
            code: o.status.code(),
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts the exit code; returns stdout.
    fn exits(&self, code: i32) -> &str {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.out,
            self.err
        );
        &self.out
    }
}

/// `coxswain kubectl ARGS -n NS --kubeconfig K`: kubectl's flags after the
/// command, as kubectl hands them to a plugin; no KUBECONFIG in the
/// environment, so the flag is what is read.
fn plugin(s: &Setup, args: &[&str]) -> Said {
    let output = Command::new(coxswain_bin().expect("the coxswain binary"))
        .arg("kubectl")
        .args(args)
        .arg("-n")
        .arg(s.ns())
        .arg("--kubeconfig")
        .arg(s.kubectl.kubeconfig())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("coxswain kubectl");
    Said::of(output)
}

/// `coxswain kubectl ARGS -n NS` started and left running (`logs -f`,
/// `watch`), its output piped, for a test that reads it as it comes.
fn plugin_started(s: &Setup, args: &[&str]) -> std::process::Child {
    Command::new(coxswain_bin().expect("built"))
        .arg("kubectl")
        .args(args)
        .args(["-n", s.ns()])
        .env("KUBECONFIG", s.kubectl.kubeconfig())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("coxswain kubectl {args:?}: {e}"))
}

/// The run name in `run.coxswain.dev/NAME created`.
fn created(out: &str) -> String {
    out.lines()
        .find_map(|l| {
            l.strip_prefix("run.coxswain.dev/")?
                .strip_suffix(" created")
        })
        .unwrap_or_else(|| panic!("a created run in: {out}"))
        .to_string()
}

#[tokio::test]
async fn start_watch_get_logs_graph_and_wait_on_a_run_that_succeeds() {
    let s = Setup::new(&[]).await;
    s.apply(&hello());

    // An input the flow refuses is said before anything is created.
    let said = plugin(&s, &["start", "hello", "--input", "{}"]);
    said.exits(1);
    assert!(said.err.contains("does not fit flow hello"), "{}", said.err);
    let said = plugin(&s, &["start", "nosuch"]);
    said.exits(1);
    assert!(said.err.contains("no flow `nosuch`"), "{}", said.err);

    let said = plugin(
        &s,
        &["start", "hello", "--input", r#"{"name": "Ada"}"#, "--watch"],
    );
    let out = said.exits(0);
    let run = created(out);
    assert!(run.starts_with("hello-"), "{run}");
    let output: Value = serde_json::from_str(out.split_once('\n').map_or("", |(_, rest)| rest))
        .unwrap_or_else(|e| panic!("the run's output after the name ({e}): {out}"));
    assert_eq!(output["greeting"], "hi Ada", "{out}");
    for line in [
        "▶ greet started",
        "✓ greet completed in ",
        "✓ fan completed in ",
        "run succeeded in ",
    ] {
        assert!(said.err.contains(line), "{line:?} in:\n{}", said.err);
    }
    let started = said.err.find("▶ greet started").unwrap_or_default();
    let completed = said.err.find("✓ greet completed").unwrap_or_default();
    assert!(started < completed, "{}", said.err);

    // The steps as a tree, parts under their step.
    let tree = plugin(&s, &["get", &run]).exits(0).to_string();
    assert!(
        tree.starts_with(&format!(
            "run {run} (flow hello): Succeeded, 2/2 steps settled"
        )),
        "{tree}"
    );
    assert!(tree.contains("├─ greet  ✓ completed in "), "{tree}");
    assert!(tree.contains("└─ fan  ✓ completed in "), "{tree}");
    assert!(tree.contains("   ├─ [a] First  ✓ completed"), "{tree}");
    assert!(tree.contains("   └─ [b]  ✓ completed"), "{tree}");

    // Logs of one step, bare; of every step, each line under its step.
    // The pod's log: the script's stderr, and its stdout (the result).
    let said = plugin(&s, &["logs", &run, "greet"]);
    let log = said.exits(0);
    assert!(
        log.lines().any(|l| l == "hello from the plugin, Ada"),
        "{log}"
    );
    assert!(!log.contains(" │ "), "one step: no prefix: {log}");
    let all = plugin(&s, &["logs", &run]).exits(0).to_string();
    assert!(
        all.lines()
            .any(|l| l == "greet │ hello from the plugin, Ada"),
        "{all}"
    );
    assert!(all.contains("fan[a] │ part at work"), "{all}");
    assert!(all.contains("fan[b] │ part at work"), "{all}");
    // Following a step that ended prints its log and returns.
    let said = plugin(&s, &["logs", &run, "greet", "-f"]);
    assert_eq!(said.exits(0), log);
    let said = plugin(&s, &["logs", &run, "nosuch"]);
    said.exits(1);
    assert!(said.err.contains("has no step `nosuch`"), "{}", said.err);

    // The graph from the run's pinned flow, with its statuses.
    let graph = plugin(&s, &["graph", &run]).exits(0).to_string();
    assert!(graph.starts_with("flowchart TD\n"), "{graph}");
    assert!(graph.contains("classDef completed"), "{graph}");
    assert!(graph.contains("greet"), "{graph}");
    let dot = plugin(&s, &["graph", &run, "--format", "dot"])
        .exits(0)
        .to_string();
    assert!(dot.starts_with("digraph"), "{dot}");

    let said = plugin(&s, &["wait", &run]);
    assert_eq!(
        said.exits(0).trim(),
        format!("run.coxswain.dev/{run} succeeded")
    );
    let said = plugin(&s, &["get", "nosuch"]);
    said.exits(1);
    assert!(
        said.err.contains("no run `nosuch` in namespace"),
        "{}",
        said.err
    );

    // The real kubectl finds the plugin on PATH through a link named
    // kubectl-coxswain, and hands it -n; KUBECONFIG comes from the
    // environment, as kubectl's own does.
    let bin = tempfile::tempdir().expect("a temp dir");
    std::os::unix::fs::symlink(
        coxswain_bin().expect("built"),
        bin.path().join("kubectl-coxswain"),
    )
    .expect("link");
    let through = |args: &[&str]| kubectl_plugin(bin.path(), &s, args);
    let said = through(&["coxswain", "get", &run, "-n", s.ns()]);
    assert_eq!(said.exits(0), tree);
    let said = through(&["coxswain", "-n", s.ns(), "wait", &run, "--timeout", "10s"]);
    said.exits(0);
    let said = through(&["coxswain", "--help"]);
    assert!(
        said.exits(0).contains("Usage: kubectl coxswain"),
        "{}",
        said.out
    );

    // Without -n, the context's namespace; --context picks the context.
    let own = bin.path().join("kubeconfig");
    std::fs::copy(s.kubectl.kubeconfig(), &own).expect("a kubeconfig of the test's own");
    let own_arg = own.display().to_string();
    let context = s
        .kubectl
        .run(&["config", "current-context"])
        .unwrap_or_else(|e| panic!("{e}"));
    let context = context.trim();
    s.kubectl
        .run(&[
            "config",
            "set-context",
            context,
            "--namespace",
            s.ns(),
            "--kubeconfig",
            &own_arg,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let bare = |args: &[&str]| {
        Said::of(
            Command::new(coxswain_bin().expect("built"))
                .arg("kubectl")
                .args(args)
                .env("KUBECONFIG", &own)
                .output()
                .expect("coxswain kubectl"),
        )
    };
    assert_eq!(bare(&["get", &run]).exits(0), tree);
    assert_eq!(bare(&["get", &run, "--context", context]).exits(0), tree);
    let said = bare(&["get", &run, "--context", "nosuch"]);
    said.exits(1);
    assert!(said.err.contains("nosuch"), "{}", said.err);
}

/// The real kubectl with `PATH` led by `bin` and the test cluster's
/// KUBECONFIG.
fn kubectl_plugin(bin: &Path, s: &Setup, args: &[&str]) -> Said {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let kubectl = std::env::var_os("E2E_KUBECTL").unwrap_or_else(|| "kubectl".into());
    let output = Command::new(kubectl)
        .args(args)
        .env("PATH", std::env::join_paths(dirs).expect("a PATH"))
        .env("KUBECONFIG", s.kubectl.kubeconfig())
        .stdin(Stdio::null())
        .output()
        .expect("kubectl");
    Said::of(output)
}

#[tokio::test]
async fn a_failed_run_waits_1_a_cancelled_one_too_and_logs_outlive_pods() {
    let s = Setup::new(&[]).await;
    s.apply(&failing_and_sleepy());

    let failed = created(plugin(&s, &["start", "failing"]).exits(0));
    let said = plugin(&s, &["wait", &failed, "--timeout", "60s"]);
    said.exits(1);
    assert!(
        said.err
            .contains(&format!("run.coxswain.dev/{failed} failed: ")),
        "{}",
        said.err
    );
    // Watching an ended run shows how it went, and its exit.
    let said = plugin(&s, &["watch", &failed]);
    said.exits(1);
    assert!(said.err.contains("✗ explode failed"), "{}", said.err);
    assert!(said.err.contains("run failed"), "{}", said.err);
    let tree = plugin(&s, &["get", &failed]).exits(0).to_string();
    assert!(tree.contains("└─ explode  ✗ failed in "), "{tree}");
    let said = plugin(&s, &["logs", &failed, "explode"]);
    assert_eq!(said.exits(0).trim(), "boom: the disk is full");
    // With the Job and its pods gone, the status's tail stands in.
    s.kubectl
        .run(&[
            "delete",
            "jobs",
            "-n",
            s.ns(),
            "-l",
            &format!("coxswain.dev/run={failed}"),
            "--cascade=foreground",
            "--wait",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    let selector = format!("coxswain.dev/run={failed}");
    s.wait_none("the pods gone", BOUND, &["pods", "-l", &selector])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let said = plugin(&s, &["logs", &failed, "explode"]);
    assert_eq!(said.exits(0).trim(), "boom: the disk is full");
    assert!(
        said.err.contains("pods of step explode are gone"),
        "{}",
        said.err
    );

    // Without admission an answer that does not fit is written; the
    // controller refuses it, and approve waits for its word.
    s.apply(&review());
    let review = created(plugin(&s, &["start", "review"]).exits(0));
    s.wait_phase(&review, &["Waiting"], BOUND).await;
    wait_for("the approval", BOUND, || async {
        let said = plugin(&s, &["approve", &review, "--decision", "maybe"]);
        Ok((!said.err.contains("no open Approval")).then_some(said))
    })
    .await
    .map(|said| {
        said.exits(1);
        assert!(
            said.err
                .contains("the answer was not taken: `maybe` is not a decision of step `review`"),
            "{}",
            said.err
        );
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    let said = plugin(&s, &["approve", &review, "--decision", "approve"]);
    assert!(
        said.exits(0).ends_with("; the run took it in\n"),
        "{}",
        said.out
    );
    plugin(&s, &["wait", &review, "--timeout", "60s"]).exits(0);

    // A run that sleeps: wait times out (2), logs -f follows it, cancel
    // ends it, and wait says so (1).
    let sleepy = created(plugin(&s, &["start", "sleepy"]).exits(0));
    let said = plugin(&s, &["wait", &sleepy, "--timeout", "1s"]);
    said.exits(2);
    assert!(said.err.contains("timed out after 1s"), "{}", said.err);
    let mut follow = plugin_started(&s, &["logs", &sleepy, "nap", "-f"]);
    let stdout = follow.stdout.take().expect("stdout");
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let line = seen.recv_timeout(BOUND);
    if line.is_err() {
        let _ = follow.kill();
    }
    assert_eq!(line.as_deref(), Ok("started sleeping"), "{}", s.logs());
    let said = plugin(&s, &["cancel", &sleepy]);
    assert_eq!(
        said.exits(0).trim(),
        format!("run.coxswain.dev/{sleepy} cancelled")
    );
    let said = plugin(&s, &["wait", &sleepy, "--timeout", "60s"]);
    said.exits(1);
    assert!(said.err.contains("was cancelled"), "{}", said.err);
    // logs -f ends with the step.
    let start = Instant::now();
    let ended = loop {
        if let Some(status) = follow.try_wait().expect("logs -f") {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = follow.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        ended.and_then(|s| s.code()),
        Some(0),
        "logs -f ended with the run"
    );
}

#[tokio::test]
async fn approve_answers_the_open_approval_and_a_refusal_is_printed_as_it_came() {
    let s = Setup::serving_admission(NOTHING, false, &[]).await;
    s.apply(&review());
    let run = created(plugin(&s, &["start", "review"]).exits(0));
    s.wait_phase(&run, &["Waiting"], BOUND).await;
    // The Approval may lag its run's Waiting by a write.
    wait_for("the approval", BOUND, || async {
        let said = plugin(&s, &["approve", &run, "--decision", "maybe"]);
        Ok((!said.err.contains("no open Approval")).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    let said = plugin(&s, &["approve", &run, "review", "--decision", "maybe"]);
    said.exits(1);
    assert!(said.err.starts_with("Error from server"), "{}", said.err);
    assert!(said.err.contains("denied the request"), "{}", said.err);
    assert!(
        said.err
            .contains("`maybe` is not a decision of step `review`; choose one of approve, changes"),
        "{}",
        said.err
    );
    let said = plugin(&s, &["approve", &run, "publish", "--decision", "approve"]);
    said.exits(1);
    assert!(
        said.err.contains("no open Approval for step `publish`"),
        "{}",
        said.err
    );
    assert!(
        said.err
            .contains("step review (decisions approve, changes)"),
        "{}",
        said.err
    );

    // A live view of the waiting run says how to answer, and ends with it.
    let mut watching = plugin_started(&s, &["watch", &run]);
    let stderr = watching.stderr.take().expect("stderr");
    let (lines, seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line.clone());
            all.push(line);
        }
        all.join("\n")
    });
    let hint = format!("answer with: kubectl coxswain approve {run} review --decision …");
    let deadline = Instant::now() + BOUND;
    while let Ok(line) = seen.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if line.contains(&hint) {
            break;
        }
    }
    let said = plugin(
        &s,
        &[
            "approve",
            &run,
            "review",
            "--decision",
            "approve",
            "--feedback",
            "Fine.",
        ],
    );
    assert!(said.exits(0).contains("answered (run"), "{}", said.out);
    let said = plugin(&s, &["wait", &run, "--timeout", "60s"]);
    said.exits(0);
    let mut watched = Said::of(watching.wait_with_output().expect("watch ended"));
    watched.err = reader.join().expect("stderr read");
    assert!(
        watched.exits(0).contains("\"published\": true"),
        "{}",
        watched.out
    );
    for line in [
        "… review waits for a person",
        &hint,
        "✓ review completed → approve",
        "✓ publish completed in ",
        "run succeeded in ",
    ] {
        assert!(watched.err.contains(line), "{line:?} in:\n{}", watched.err);
    }
    let approvals = s.items("approvals", &format!("coxswain.dev/run={run}"));
    let approval = &approvals[0];
    assert_eq!(approval["spec"]["decision"], "approve", "{approval}");
    assert_eq!(approval["spec"]["feedback"], "Fine.", "{approval}");
    assert!(
        approval["spec"]["decidedBy"]["username"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "stamped by admission: {approval}"
    );
    let tree = plugin(&s, &["get", &run]).exits(0).to_string();
    assert!(tree.contains("review  ✓ completed → approve"), "{tree}");
    assert!(tree.contains("publish  ✓ completed"), "{tree}");
    let said = plugin(&s, &["approve", &run, "--decision", "approve"]);
    said.exits(1);
    assert!(said.err.contains("has no open Approval"), "{}", said.err);
}

#[tokio::test]
async fn retry_reruns_a_failed_run_from_its_failed_step() {
    let s = Setup::new(&[]).await;
    s.apply(&flaky());
    let dir = coxswain_e2e::workspace_root().join("target/e2e");
    std::fs::create_dir_all(&dir).expect("target/e2e");
    let marked = tempfile::tempdir_in(&dir).expect("a temp dir");
    let marker = marked.path().join("fixed");
    let input = serde_json::json!({"marker": marker.display().to_string()}).to_string();
    let old = created(plugin(&s, &["start", "flaky", "--input", &input]).exits(0));
    plugin(&s, &["wait", &old, "--timeout", "60s"]).exits(1);
    let said = plugin(&s, &["retry", &old, "--from", "nosuch"]);
    said.exits(1);
    assert!(said.err.contains("has no step `nosuch`"), "{}", said.err);

    std::fs::write(&marker, "").expect("the marker");
    let said = plugin(&s, &["retry", &old, "--watch"]);
    let out = said.exits(0);
    assert!(
        out.contains(&format!("(a rerun of {old} from step check)")),
        "{out}"
    );
    assert!(out.contains("\"fixed\": true"), "{out}");
    let new = out
        .lines()
        .find_map(|l| l.strip_prefix("run.coxswain.dev/")?.split(' ').next())
        .expect("the rerun's name")
        .to_string();
    let tree = plugin(&s, &["get", &new]).exits(0).to_string();
    assert!(
        tree.contains("prepare  ✓ completed") && tree.contains(&format!("(copied from run {old})")),
        "{tree}\n{}",
        s.get("run", &new)
    );
    // Only the step rerun got a Job.
    let jobs = s.items("jobs", &format!("coxswain.dev/run={new}"));
    let steps: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["metadata"]["labels"]["coxswain.dev/step"].as_str())
        .collect();
    assert_eq!(steps, ["check"], "{jobs:?}");
}
