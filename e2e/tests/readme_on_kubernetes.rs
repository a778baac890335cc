//! README's tour on a cluster, run as a person pastes it: whole, in bash,
//! from the repository's root, with the real kubectl and a cluster of its
//! own from `e2e/cluster/up`. (`cargo run -q -p coxswain --` is the
//! `coxswain` this test run built, which is what it runs.) The book's
//! Getting started page holds the same block; it is checked to be the same
//! text, so one run tests both.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The blocks marked ```` ```sh runnable-on-cluster ```` in a page.
fn on_cluster_blocks(page: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find("```sh runnable-on-cluster\n") {
        let start = at + "```sh runnable-on-cluster\n".len();
        let end = rest[start..].find("\n```").expect("the block ends") + start;
        found.push(rest[start..end].to_string());
        rest = &rest[end..];
    }
    found
}

/// README's one cluster block, which the book's Getting started repeats.
fn on_kubernetes_block(readme: &str, book: &str) -> String {
    let blocks = on_cluster_blocks(readme);
    assert_eq!(blocks.len(), 1, "README has one runnable-on-cluster block");
    assert_eq!(
        on_cluster_blocks(book),
        blocks,
        "docs/src/getting-started.md holds README's cluster block, the same text"
    );
    blocks[0].clone()
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
    let book = std::fs::read_to_string(root.join("docs/src/getting-started.md"))
        .expect("the book's Getting started");
    let block = on_kubernetes_block(&readme, &book);
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
