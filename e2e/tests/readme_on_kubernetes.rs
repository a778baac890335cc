//! README's "On Kubernetes" block, run as a person pastes it: whole, in
//! bash, from the repository's root, with the real kubectl and a cluster of
//! its own from `e2e/cluster/up`. (`cargo run -q -p coxswain --` is the
//! `coxswain` this test run built, which is what it runs.)

use std::path::{Path, PathBuf};
use std::process::Command;

/// The first `sh` block after `## On Kubernetes`.
fn on_kubernetes_block(readme: &str) -> String {
    let section = readme
        .split_once("\n## On Kubernetes\n")
        .map(|(_, rest)| rest)
        .expect("README has an On Kubernetes section");
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let end = section[start..].find("\n```").expect("the block ends") + start;
    section[start..end].to_string()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

#[test]
fn the_on_kubernetes_block_runs_pasted_whole() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let block = on_kubernetes_block(&readme);
    let coxswain = coxswain_e2e::coxswain_bin().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        block.contains("cargo run -q -p coxswain -- controller"),
        "{block}"
    );
    let script = block.replace(
        "cargo run -q -p coxswain --",
        &coxswain.display().to_string(),
    );
    // The cluster's state goes to a folder of this test's own, so a
    // cluster someone started with `e2e/cluster/up` is left alone.
    let state = tempfile::tempdir().expect("state dir");
    // A bound on waiting, not a timing assertion; `-x` shows, on failure,
    // the line it stopped at.
    let out = Command::new("timeout")
        .args([
            "--kill-after=10",
            "600",
            "bash",
            "-x",
            "-euo",
            "pipefail",
            "-c",
        ])
        .arg(&script)
        .env_remove("KUBECONFIG")
        .env("E2E_STATE_DIR", state.path())
        .current_dir(&root)
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Whatever happened, the cluster the block started is stopped.
    let _ = Command::new(root.join("e2e/cluster/down"))
        .env("E2E_STATE_DIR", state.path())
        .output();
    let log = std::fs::read_to_string(root.join("controller.log")).unwrap_or_default();
    let _ = std::fs::remove_file(root.join("controller.log"));
    assert!(
        out.status.success(),
        "the block failed ({}):\n{stdout}\n{stderr}\ncontroller.log:\n{log}",
        out.status
    );
    println!("{stdout}");
    assert!(
        stdout.contains(r#""published":true"#),
        "release-1's output: {stdout}"
    );
    assert!(
        stdout.contains("Mention the new exporter") || stdout.contains("draft 2"),
        "the notes were drafted again after the send-back: {stdout}"
    );
    assert!(
        stdout.contains("run.coxswain.dev/hello-1 condition met"),
        "{stdout}"
    );
}
