//! What a workspace costs before a run's first step (`BENCHMARKS.md`):
//! the time from `kubectl create` of a Run to its first script step's
//! start, for a flow without a workspace and the same flow checking out a
//! repo of 1,000 files from a `git daemon` on 127.0.0.1 into a claim the
//! cluster's hostpath provisioner binds. Runs of the two alternate, one at a
//! time, in the same process, so the ratio compares like with like.
//!
//! ```sh
//! cargo build -p coxswain
//! cargo run -p coxswain-e2e --example workspace_start -- --runs 10
//! ```
//! Starts its own cluster (or uses `KUBECONFIG`) and a controller for its
//! own namespace.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace};
use coxswain_test_support::git_server::GitDaemon;
use jiff::Timestamp;
use serde_json::{Value, json};

/// Files in the repo checked out.
const FILES: usize = 1000;

const STEPS: &str = "  steps:\n    - key: first\n      script: {source: 'echo \"{}\"'}\n";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => 10,
        [flag, n] if flag == "--runs" => n.parse()?,
        other => return Err(format!("usage: workspace_start [--runs N], not {other:?}").into()),
    };
    let git = GitDaemon::start()?;
    let repo = git.create_repo("big");
    grow(&repo.url, FILES)?;
    eprintln!("repo {} holds {FILES} files", repo.url);

    let kubectl = Kubectl::new().await?;
    kubectl.install_crds().await?;
    let ns = TestNamespace::new().await?;
    let _controller = ControllerProcess::for_namespace(ns.name(), &[]).await?;
    let flow = |name: &str, workspace: &str| {
        format!(
            "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: {name}}}\nspec:\n{workspace}{STEPS}"
        )
    };
    kubectl.apply(ns.name(), &flow("plain", ""))?;
    let workspace = format!(
        "  workspace:\n    repos:\n      - {{name: big, url: \"{}\", ref: main}}\n",
        repo.url
    );
    kubectl.apply(ns.name(), &flow("checkout", &workspace))?;

    // One of each first, not counted: images, caches, the first claim.
    for name in ["plain", "checkout"] {
        start_to_first_step(&kubectl, ns.name(), name).await?;
    }
    let (mut plain, mut checkout) = (Vec::new(), Vec::new());
    for i in 0..runs {
        plain.push(start_to_first_step(&kubectl, ns.name(), "plain").await?);
        checkout.push(start_to_first_step(&kubectl, ns.name(), "checkout").await?);
        eprintln!(
            "run {}/{runs}: without {:.2} s, with a workspace {:.2} s",
            i + 1,
            plain[i],
            checkout[i]
        );
    }
    let (p, c) = (median(&mut plain), median(&mut checkout));
    println!("| flow | runs | create → first step, median | p90 |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| no workspace | {runs} | {p:.2} s | {:.2} s |",
        p90(&plain)
    );
    println!(
        "| workspace, {FILES} files (git daemon, depth 1) | {runs} | {c:.2} s | {:.2} s |",
        p90(&checkout)
    );
    println!(
        "\nratio with/without: {:.2}; the workspace adds {:.2} s",
        c / p,
        c - p
    );
    demo(&kubectl, ns.name(), &git, &repo.url).await
}

/// A run that commits and pushes, and what it leaves: its
/// `status.workspace` and the branch as `git log` on the server shows it.
async fn demo(
    kubectl: &Kubectl,
    namespace: &str,
    git: &GitDaemon,
    url: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let flow = format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: demo}}\nspec:\n  workspace:\n    repos:\n      - {{name: big, url: \"{url}\", ref: main}}\n    push: onSuccess\n  steps:\n    - key: edit\n      script:\n        source: |\n          cd big && echo more >> README && git commit -qam \"edit on $BRANCH\" && echo '{{}}'\n"
    );
    kubectl.apply(namespace, &flow)?;
    let (run, object) = ended_run(kubectl, namespace, "demo").await?;
    println!(
        "\nkubectl get run {run} -o jsonpath='{{.status.workspace}}':\n{}",
        serde_json::to_string_pretty(&object["status"]["workspace"])?
    );
    let branch = format!("coxswain/{run}");
    println!(
        "\ngit log --format='%h %s' {branch} (on the server):\n{}",
        git.log("big", &branch, "%h %s")
    );
    Ok(())
}

/// A Run of `flow` created, and the Run once it has ended (within 5
/// minutes): how both the timing and the demo run one.
async fn ended_run(
    kubectl: &Kubectl,
    namespace: &str,
    flow: &str,
) -> Result<(String, Value), Box<dyn std::error::Error>> {
    let run = kubectl.create_run(namespace, flow, &json!({}))?;
    let object = kubectl
        .wait_run(
            namespace,
            &run,
            &["Succeeded", "Failed"],
            Duration::from_secs(300),
        )
        .await?;
    Ok((run, object))
}

/// Seconds from creating a Run of `flow` to its first step's start.
async fn start_to_first_step(
    kubectl: &Kubectl,
    namespace: &str,
    flow: &str,
) -> Result<f64, Box<dyn std::error::Error>> {
    let created = Timestamp::now();
    let (run, object) = ended_run(kubectl, namespace, flow).await?;
    let status = &object["status"];
    if status["phase"] != "Succeeded" {
        return Err(format!("run {run} did not succeed: {status}").into());
    }
    let started: Timestamp = status["steps"]["first"]["startedAt"]
        .as_str()
        .ok_or("no startedAt")?
        .parse()?;
    Ok(started.duration_since(created).as_secs_f64())
}

/// Adds `files` small files to `main` of the repo at `url`.
fn grow(url: &str, files: usize) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let work = dir.path().join("work");
    git(dir.path(), &["clone", "--quiet", url, "work"])?;
    for i in 0..files {
        let sub = work.join(format!("src/m{:02}", i % 50));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(
            sub.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(20),
        )?;
    }
    git(&work, &["add", "."])?;
    git(
        &work,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "--quiet",
            "-m",
            "files",
        ],
    )?;
    git(
        &work,
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
    )?;
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<(), Box<dyn std::error::Error>> {
    let out = Command::new("git").current_dir(dir).args(args).output()?;
    if !out.status.success() {
        return Err(format!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn p90(sorted: &[f64]) -> f64 {
    sorted[(sorted.len() * 9 / 10).min(sorted.len() - 1)]
}
