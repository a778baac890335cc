//! `coxswain ui` in local mode, with real processes: a record made by
//! `coxswain run --output json` and the records file it archived into are
//! served with the flow of `--flow`, in the same JSON shapes as a
//! cluster's runs; a run of no `--flow` file says so; answers are refused;
//! and in headless Chromium an arrow of the run shows the value that moved.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use coxswain_test_support::browser::Browser;
use coxswain_test_support::viewer::Viewer;
use serde_json::{Value, json};

/// Longest wait for the page to show something.
const SHOWN: Duration = Duration::from_secs(30);

/// A flow that is not in any `--flow` file given to the viewer.
const STRAY: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: stray}
spec:
  steps:
    - key: only
      script: {source: "echo '{\"n\": 1}'"}
"#;

fn hello_flow() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hello.yaml")
}

/// Runs `flow` with `input`, archiving into `records`; writes the record
/// (`--output json`) to `out` and gives it back.
fn run_to(flow: &Path, input: &str, records: &Path, out: &Path) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .arg("run")
        .arg(flow)
        .args(["--input", input, "--output", "json", "--quiet", "--records"])
        .arg(records)
        .output()
        .expect("coxswain run");
    assert!(
        o.status.success(),
        "coxswain run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(out, &o.stdout).expect("write the record");
    serde_json::from_slice(&o.stdout).expect("the record is JSON")
}

/// Two runs (hello, and a flow not given as `--flow`), each as a record
/// file and in the records file, and the viewer serving them.
struct Setup {
    _dir: tempfile::TempDir,
    hello: Value,
    ui: Viewer,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let records = dir.path().join("records.sqlite3");
    let rec = dir.path().join("rec.json");
    let hello = run_to(
        &hello_flow(),
        r#"{"names": ["Ada"], "loud": true}"#,
        &records,
        &rec,
    );
    let stray_flow = dir.path().join("stray.yaml");
    std::fs::write(&stray_flow, STRAY).expect("write the flow");
    let stray = dir.path().join("stray.json");
    run_to(&stray_flow, "{}", &records, &stray);
    let flow = hello_flow();
    let ui = Viewer::start(
        Path::new(env!("CARGO_BIN_EXE_coxswain")),
        [
            "--flow".as_ref(),
            flow.as_os_str(),
            "--record".as_ref(),
            rec.as_os_str(),
            "--record".as_ref(),
            stray.as_os_str(),
            "--records".as_ref(),
            records.as_os_str(),
        ],
        &[],
    );
    Setup {
        _dir: dir,
        hello,
        ui,
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

async fn get(ui: &Viewer, path: &str) -> (u16, Value) {
    let r = client()
        .get(ui.at(&format!("/api/v1{path}")))
        .send()
        .await
        .expect("GET");
    let code = r.status().as_u16();
    (code, r.json().await.expect("JSON answer"))
}

#[tokio::test]
async fn local_runs_are_served_in_the_cluster_shapes() {
    let s = setup();
    let (code, list) = get(&s.ui, "/namespaces/local/runs").await;
    assert_eq!(code, 200, "{list}");
    let runs = list["runs"].as_array().expect("runs");
    let names: Vec<&str> = runs.iter().filter_map(|r| r["name"].as_str()).collect();
    // Two record files and the two runs the records file archived.
    assert_eq!(runs.len(), 4, "{list}");
    assert!(names.contains(&"rec") && names.contains(&"stray"), "{list}");
    let archived: Vec<&Value> = runs
        .iter()
        .filter(|r| r["name"] != "rec" && r["name"] != "stray")
        .collect();
    assert!(
        archived.iter().any(|r| r["flow"] == "hello"),
        "the archived hello run: {list}"
    );
    let rec = runs.iter().find(|r| r["name"] == "rec").expect("rec");
    assert_eq!(rec["phase"], "Succeeded");
    assert_eq!(rec["flow"], "hello");

    // The run page: every step as its record says, arrows with what moved.
    let (code, page) = get(&s.ui, "/namespaces/local/runs/rec").await;
    assert_eq!(code, 200, "{page}");
    assert!(page.get("flowProblem").is_none(), "{page}");
    assert_eq!(page["approvals"], json!([]));
    let boxes = page["picture"]["steps"].as_array().expect("boxes");
    assert_eq!(boxes.len(), 7, "{page}");
    for b in boxes {
        let key = b["key"].as_str().expect("key");
        let want = if key == "whisper" {
            "skipped"
        } else {
            "completed"
        };
        assert_eq!(b["status"], want, "step {key}: {b}");
        assert_eq!(b["status"], s.hello["steps"][key]["status"], "{key}");
    }
    let arrow = page["picture"]["arrows"]
        .as_array()
        .expect("arrows")
        .iter()
        .find(|a| a["id"] == "count->check")
        .expect("count->check")
        .clone();
    assert_eq!(arrow["state"], "taken", "{arrow}");
    let moved: Value =
        serde_json::from_str(arrow["moved"][0]["json"].as_str().expect("moved json"))
            .expect("moved is JSON");
    assert_eq!(moved, json!({"count": 1}));

    // Arrow in full, a value of the record, a step and its log.
    let (code, full) = get(&s.ui, "/namespaces/local/runs/rec/arrows/count->check").await;
    assert_eq!(code, 200, "{full}");
    assert_eq!(full["state"], "taken");
    let (code, value) = get(
        &s.ui,
        "/namespaces/local/runs/rec/values?path=/steps/count/output",
    )
    .await;
    assert_eq!(code, 200, "{value}");
    assert_eq!(value["value"], json!({"count": 1}));
    let (code, step) = get(&s.ui, "/namespaces/local/runs/rec/steps/greet").await;
    assert_eq!(code, 200, "{step}");
    assert_eq!(step["kind"], "parallel");
    assert_eq!(step["record"]["status"], "completed");
    let (code, log) = get(&s.ui, "/namespaces/local/runs/rec/steps/count/log").await;
    assert_eq!(code, 200, "{log}");
    assert_eq!(log["pods"], json!([]));

    // A run of a flow no --flow file holds: not drawn, and why.
    let (code, stray) = get(&s.ui, "/namespaces/local/runs/stray").await;
    assert_eq!(code, 200, "{stray}");
    assert!(stray["picture"].is_null(), "{stray}");
    let problem = stray["flowProblem"].as_str().expect("flowProblem");
    assert!(
        problem.contains("no --flow file holds the flow this run ran"),
        "{problem}"
    );
    let (code, _) = get(&s.ui, "/namespaces/local/runs/stray/arrows/x->y").await;
    assert_eq!(code, 409);

    // Flows: those of the --flow files, the digest the run pinned.
    let (_, flows) = get(&s.ui, "/namespaces/local/flows").await;
    assert_eq!(flows["flows"][0]["name"], "hello", "{flows}");
    assert_eq!(flows["flows"].as_array().map(Vec::len), Some(1));
    let (code, flow) = get(&s.ui, "/namespaces/local/flows/hello").await;
    assert_eq!(code, 200, "{flow}");
    assert_eq!(flow["digest"], s.hello["flowDigest"]);

    // Another namespace: nothing there.
    let (code, _) = get(&s.ui, "/namespaces/default/runs").await;
    assert_eq!(code, 404);

    // Answers are given at the terminal, not here.
    let r = client()
        .post(s.ui.at("/api/v1/namespaces/local/approvals/anything/answer"))
        .header("x-coxswain", "1")
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status().as_u16(), 400);
    let said: Value = r.json().await.expect("JSON");
    assert!(
        said["error"].as_str().unwrap_or("").contains("terminal"),
        "{said}"
    );
}

#[tokio::test]
async fn a_live_stream_sends_the_run_once_and_stays_open() {
    let s = setup();
    let mut r = client()
        .get(s.ui.at("/api/v1/namespaces/local/runs?watch=true"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status().as_u16(), 200);
    let mut text = String::new();
    while !text.contains("event: ready") {
        let chunk = tokio::time::timeout(SHOWN, r.chunk())
            .await
            .expect("events come")
            .expect("the stream")
            .expect("the stream is open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(text.matches("event: run\n").count(), 4, "{text}");
    // Nothing more than keep-alives follows, and the stream stays open.
    let more = tokio::time::timeout(Duration::from_secs(2), r.chunk()).await;
    assert!(more.is_err(), "the stream ended or sent more: {more:?}");
}

#[tokio::test]
async fn an_arrow_shows_what_moved_in_the_browser() {
    let s = setup();
    let browser = Browser::start().await.expect("chromium");
    browser
        .goto(&s.ui.at("/namespaces/local/runs/rec"))
        .await
        .expect("open the run");
    browser
        .wait_for(r#"[data-step="greet"][data-status="completed"]"#, SHOWN)
        .await
        .expect("the graph");
    assert_eq!(
        browser.text("[data-phase]").await.expect("phase"),
        "Succeeded"
    );
    browser
        .click(r#"[data-arrow="count->check"] .handle"#)
        .await
        .expect("click the arrow");
    browser
        .wait_for("[data-moved-value]", SHOWN)
        .await
        .expect("the arrow's panel");
    let moved = browser
        .text("[data-moved-value]")
        .await
        .expect("moved value");
    let moved: Value = serde_json::from_str(&moved).expect("the moved value is JSON");
    assert_eq!(moved, json!({"count": 1}));
    browser.close().await.expect("close");
}

#[test]
fn a_file_that_is_no_record_stops_the_start_saying_which() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{}").expect("write");
    let o = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["ui", "--listen", "127.0.0.1:0", "--record"])
        .arg(&bad)
        .output()
        .expect("coxswain ui");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&bad.display().to_string()) && err.contains("no `phase`"),
        "{err}"
    );
}
