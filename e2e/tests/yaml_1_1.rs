//! `coxswain lint` names exactly the words kubectl reads differently: the
//! same file through the real kubectl (a YAML 1.1 reader) and serde_yaml
//! (YAML 1.2) differs in the places lint reports, and once they are quoted
//! as lint says, kubectl reads what Coxswain reads and lint is quiet.

use std::path::{Path, PathBuf};
use std::process::Command;

use coxswain_e2e::{Kubectl, coxswain_bin};
use serde_json::{Value, json};

const FLOW: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: surprising}
spec:
  description: "Asks, with a few words YAML 1.1 takes for others"
  steps:
    - key: ask
      approval:
        decisions: [approve, "no"]
      input: {n: 1, loud: on, mode: 0644, budget: 1_000, plain: 10, t: true}
"#;

/// kubectl with the CRDs installed, and `flow` written to `flow.yaml` in a
/// temporary directory (there while the directory is kept): where each
/// test here starts.
async fn flow_file(flow: &str) -> (Kubectl, tempfile::TempDir, PathBuf) {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("flow.yaml");
    std::fs::write(&file, flow).expect("write the flow");
    (kubectl, dir, file)
}

fn kubectl_reads(kubectl: &Kubectl, file: &Path) -> Value {
    let path = file.to_str().expect("a UTF-8 path");
    let mut object = kubectl.json(&["create", "--dry-run=client", "-o", "json", "-f", path]);
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("namespace");
    }
    object
}

fn lint(file: &Path) -> (i32, Vec<String>) {
    let out = Command::new(coxswain_bin().expect("cargo build -p coxswain first"))
        .arg("lint")
        .arg(file)
        .output()
        .expect("coxswain lint runs");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    (out.status.code().unwrap_or(-1), lines)
}

#[tokio::test]
async fn lint_names_what_kubectl_reads_differently_and_quoting_mends_it() {
    let (kubectl, _dir, file) = flow_file(FLOW).await;

    let by_kubectl = kubectl_reads(&kubectl, &file);
    let by_coxswain: Value = serde_yaml::from_str(FLOW).expect("YAML 1.2");
    let input = |v: &Value| v["spec"]["steps"][0]["input"].clone();
    assert_eq!(
        input(&by_kubectl),
        json!({"false": 1, "loud": true, "mode": 420, "budget": 1000, "plain": 10, "t": true})
    );
    assert_eq!(
        input(&by_coxswain),
        json!({"n": 1, "loud": "on", "mode": "0644", "budget": "1_000", "plain": 10, "t": true})
    );

    let (code, lines) = lint(&file);
    assert_eq!(code, 1, "{lines:?}");
    let named: Vec<&str> = lines.iter().filter_map(|l| l.split('`').nth(1)).collect();
    assert_eq!(named, ["n", "on", "0644", "1_000"], "{lines:#?}");

    // Quoted as lint says: both readers agree, and lint has nothing to say.
    let mended = FLOW.replace(
        "{n: 1, loud: on, mode: 0644, budget: 1_000",
        r#"{"n": 1, loud: "on", mode: "0644", budget: "1_000""#,
    );
    std::fs::write(&file, &mended).expect("write the mended flow");
    let by_coxswain: Value = serde_yaml::from_str(&mended).expect("YAML 1.2");
    assert_eq!(kubectl_reads(&kubectl, &file), by_coxswain);
    assert_eq!(lint(&file), (0, vec![]));
}

/// Where the schema wants text, a bare `true` or `2024` reads alike in both
/// versions but as a boolean and a number: serde_yaml hands Coxswain the
/// text, kubectl sends the value and the API server refuses the flow. Lint
/// names both; quoted as it says, the API server takes the flow.
#[tokio::test]
async fn a_bare_true_where_text_is_expected_is_refused_by_the_api_server_and_named_by_lint() {
    let flow = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: bare-true}\nspec:\n  description: 2024\n  steps:\n    - key: a\n      when: true\n      agent: {prompt: x}\n";
    let (kubectl, _dir, file) = flow_file(flow).await;
    let path = file.to_str().expect("a UTF-8 path");

    let by_kubectl = kubectl_reads(&kubectl, &file);
    assert_eq!(by_kubectl["spec"]["description"], json!(2024));
    assert_eq!(by_kubectl["spec"]["steps"][0]["when"], json!(true));
    let by_coxswain: Value = serde_yaml::from_str(flow).expect("YAML 1.2");
    assert_eq!(by_coxswain["spec"]["steps"][0]["when"], json!(true));
    let refused = kubectl
        .run(&["create", "--dry-run=server", "-f", path])
        .expect_err("the API server refuses a boolean for text");
    assert!(
        refused.contains("spec.steps[0].when") && refused.contains("must be of type string"),
        "{refused}"
    );
    assert!(refused.contains("spec.description"), "{refused}");

    let (code, lines) = lint(&file);
    assert_eq!(code, 1, "{lines:?}");
    let named: Vec<&str> = lines.iter().filter_map(|l| l.split('`').nth(1)).collect();
    assert_eq!(named, ["2024", "true"], "{lines:#?}");
    assert!(lines[1].ends_with("quote it: \"true\""), "{lines:#?}");

    let mended = flow
        .replace("description: 2024", "description: \"2024\"")
        .replace("when: true", "when: \"true\"");
    std::fs::write(&file, &mended).expect("write the mended flow");
    kubectl
        .run(&["create", "--dry-run=server", "-f", path])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lint(&file), (0, vec![]));
}

/// What lint leaves alone because kubectl reads it as serde_yaml does:
/// go-yaml has no base 60 (`1:30` stays text), and `0o755`, `0x1f` and `~`
/// mean the same number or null in both versions.
#[tokio::test]
async fn what_kubectl_reads_alike_is_left_alone_by_lint() {
    let flow = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: alike}\nspec:\n  steps:\n    - key: a\n      agent: {prompt: x}\n      input: {at: 1:30, long: 190:20:30, mode: 0o755, hex: 0x1f, none: ~, t: true}\n";
    let (kubectl, _dir, file) = flow_file(flow).await;
    let by_coxswain: Value = serde_yaml::from_str(flow).expect("YAML 1.2");
    assert_eq!(
        by_coxswain["spec"]["steps"][0]["input"],
        json!({"at": "1:30", "long": "190:20:30", "mode": 493, "hex": 31, "none": null, "t": true})
    );
    assert_eq!(kubectl_reads(&kubectl, &file), by_coxswain);
    assert_eq!(lint(&file), (0, vec![]));
}
