//! Workspaces on the cluster: a flow's repos checked out from a real git
//! server (`git daemon`, and `git http-backend` behind lighttpd with basic
//! auth) into a PersistentVolumeClaim the harness's real hostpath
//! provisioner binds, shared by the run's script Jobs, its branch pushed
//! back, the claim gone once the run is over. Driven with kubectl as people
//! drive it.

use std::time::Duration;

use coxswain_e2e::{Setup, wait_for};
use coxswain_test_support::git_server::{GitDaemon, GitHttp};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);

/// A Flow named `name` with `workspace` and `steps` (YAML indented for
/// `spec:`).
fn flow(name: &str, workspace: &str, steps: &str) -> String {
    coxswain_e2e::flow(name, &format!("  workspace:\n{workspace}  steps:\n{steps}"))
}

/// The repo `app` at `url` from `main`, pushed on success.
fn app(url: &str) -> String {
    format!("    repos:\n      - {{name: app, url: \"{url}\", ref: main}}\n    push: onSuccess\n")
}

/// The repo `app` at `url` from `main` with the credentials of the Secret
/// `git-app` ([`git_app_secret`]), pushed on success.
fn authed_app(url: &str) -> String {
    format!(
        "    repos:\n      - {{name: app, url: \"{url}\", ref: main, secretRef: {{name: git-app}}}}\n    push: onSuccess\n"
    )
}

/// The Secret `git-app` (username `robot`, `password`), made as a person
/// makes it with kubectl.
fn git_app_secret(s: &Setup, password: &str) {
    s.kubectl
        .run(&[
            "create",
            "secret",
            "generic",
            "git-app",
            "-n",
            s.ns(),
            "--from-literal=username=robot",
            &format!("--from-literal=password={password}"),
            "--dry-run=client",
            "-o",
            "yaml",
        ])
        .and_then(|yaml| s.kubectl.apply(s.ns(), &yaml))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// How a step `edit` starts that commits a line to `app` on the run's
/// branch; a test adds what the script does then.
const EDIT_AND_COMMIT: &str = r#"    - key: edit
      script:
        source: |
          set -e
          cd app
          echo more >> README
          git commit --quiet -am "by the run"
"#;

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
    - key: each
      parallel:
        items: $input.names
        step:
          input: {name: $item}
          script:
            source: |
              set -e
              printf '{"head": "%s", "readme": "%s"}' "$(git -C app rev-parse HEAD)" "$(tail -n1 app/README)"
    - key: read
      input: {report: $steps.edit.output.report}
      script:
        source: |
          set -e
          report=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/report")
          printf '{"head": "%s", "readme": "%s", "report": "%s", "path": "%s"}' \
            "$(git -C app rev-parse HEAD)" "$(tail -n1 app/README)" "$(cat "$report")" "$report"
"#;

/// The claims of run `run` in the namespace (by the run's label).
fn claims(s: &Setup, run: &str) -> Vec<String> {
    let out = s
        .kubectl
        .run(&[
            "get",
            "pvc",
            "-n",
            s.ns(),
            "-l",
            &format!("coxswain.dev/run={run}"),
            "-o",
            "name",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    out.lines().map(String::from).collect()
}

async fn claims_gone(s: &Setup, run: &str) {
    wait_for("the run's claim to go", BOUND, || async {
        Ok(claims(s, run).is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", claims(s, run), s.logs()));
}

/// `kubectl delete run RUN --wait`, and then its claims go too.
async fn deleted_with_its_claims(s: &Setup, run: &str) {
    s.kubectl
        .run(&["delete", "run", run, "-n", s.ns(), "--wait=true"])
        .unwrap_or_else(|e| panic!("{e}"));
    claims_gone(s, run).await;
}

async fn wait_run(s: &Setup, run: &str, phases: &[&str]) -> Value {
    s.kubectl
        .wait_run(s.ns(), run, phases, BOUND)
        .await
        .unwrap_or_else(|e| {
            let now = s
                .kubectl
                .run(&["get", "run", run, "-n", s.ns(), "-o", "yaml"]);
            panic!("{e}\n{now:?}\n{}", s.logs())
        })
}

fn start(s: &Setup, flow: &str) -> String {
    s.kubectl
        .create_run(s.ns(), flow, &json!({}))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_step_commits_on_the_run_branch_later_steps_read_it_and_the_branch_is_pushed() {
    let git = GitDaemon::start().expect("git daemon");
    let repo = git.create_repo("app");
    let s = Setup::new(&[]).await;
    s.apply(&flow("edit", &app(&repo.url), EDIT_AND_READ));
    // Two runs at once: each its own volume and branch.
    let names = json!({"names": ["one", "two"]});
    let started = || {
        s.kubectl
            .create_run(s.ns(), "edit", &names)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (a, b) = (started(), started());
    for run in [&a, &b] {
        let r = &wait_run(&s, run, &["Succeeded", "Failed"]).await["status"];
        assert_eq!(r["phase"], "Succeeded", "{r:#}\n{}", s.logs());
        let ws = &r["workspace"];
        let branch = format!("coxswain/{run}");
        assert_eq!(ws["branch"], branch.as_str(), "{ws}");
        assert_eq!(ws["repos"][0]["name"], "app");
        assert_eq!(ws["repos"][0]["ref"], "main");
        assert_eq!(ws["repos"][0]["commit"], repo.commit.as_str());
        assert_eq!(ws["node"], "e2e-node", "the checkout pod's node: {ws}");
        let edited = r["steps"]["edit"]["output"]["commit"]
            .as_str()
            .expect("edit's commit")
            .to_string();
        assert_ne!(edited, repo.commit);
        assert_eq!(ws["pushed"][0]["name"], "app");
        assert_eq!(ws["pushed"][0]["commit"], edited.as_str());
        // The server has the branch at the step's commit, on main's.
        assert_eq!(git.branch("app", &branch).as_deref(), Some(edited.as_str()));
        let log = git.log("app", &branch, "%H %s");
        assert_eq!(
            log,
            format!("{edited} edit on {branch}\n{} first", repo.commit),
            "git log {branch} on the server"
        );
        // Later steps, the parts of a fan-out too, saw the commit and the file.
        for part in r["steps"]["each"]["parts"].as_array().expect("parts") {
            assert_eq!(part["output"]["head"], edited.as_str(), "{part}");
            assert_eq!(part["output"]["readme"], "changed", "{part}");
        }
        let read = &r["steps"]["read"]["output"];
        assert_eq!(read["head"], edited.as_str());
        assert_eq!(read["report"], "the report");
        let kept = "/coxswain/workspace/.coxswain/outputs/edit/1/report.txt";
        assert_eq!(r["steps"]["edit"]["output"]["report"], kept);
        assert_eq!(read["path"], kept);
        claims_gone(&s, run).await;
    }
    assert_ne!(
        git.branch("app", &format!("coxswain/{a}")),
        None,
        "both branches pushed"
    );
    assert_eq!(
        git.branch("app", "main").as_deref(),
        Some(repo.commit.as_str())
    );
}

#[tokio::test]
async fn a_bad_ref_fails_the_run_before_its_first_step_naming_the_repo() {
    let git = GitDaemon::start().expect("git daemon");
    let repo = git.create_repo("app");
    let s = Setup::new(&[]).await;
    let workspace = format!(
        "    repos:\n      - {{name: app, url: \"{}\", ref: no-such-branch}}\n    keep: never\n",
        repo.url
    );
    let steps = "    - key: never\n      script: {source: 'echo ran'}\n";
    s.apply(&flow("badref", &workspace, steps));
    let run = start(&s, "badref");
    let r = &wait_run(&s, &run, &["Failed", "Succeeded"]).await["status"];
    assert_eq!(r["phase"], "Failed", "{r:#}");
    assert_eq!(r["error"]["code"], "workspace.failed", "{r:#}");
    let message = r["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with(&format!(
            "repo `app` ({}): fetching the ref `no-such-branch` failed",
            repo.url
        )),
        "{message}"
    );
    assert!(r["steps"].get("never").is_none(), "no step ran: {r:#}");
    claims_gone(&s, &run).await;
}

#[tokio::test]
async fn credentials_come_from_the_repos_secret_and_wrong_ones_fail_the_run_unsaid() {
    let server = GitHttp::start("robot", "s3cret-pw").expect("git over http");
    let repo = server.create_repo("app");
    let s = Setup::new(&[]).await;
    let workspace = authed_app(&repo.url);
    let steps = [
        EDIT_AND_COMMIT,
        r#"          printf '{"commit": "%s"}' "$(git rev-parse HEAD)"
"#,
    ]
    .concat();
    s.apply(&flow("authed", &workspace, &steps));
    git_app_secret(&s, "s3cret-pw");
    let run = start(&s, "authed");
    let r = &wait_run(&s, &run, &["Succeeded", "Failed"]).await["status"];
    assert_eq!(r["phase"], "Succeeded", "{r:#}\n{}", s.logs());
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("commit");
    let branch = format!("coxswain/{run}");
    assert_eq!(server.branch("app", &branch).as_deref(), Some(edited));
    assert_eq!(r["workspace"]["pushed"][0]["commit"], edited);

    git_app_secret(&s, "wrong-pw");
    let run = start(&s, "authed");
    let r = &wait_run(&s, &run, &["Succeeded", "Failed"]).await["status"];
    assert_eq!(r["phase"], "Failed", "{r:#}");
    let message = r["error"]["message"].as_str().expect("message");
    assert!(message.starts_with("repo `app` ("), "{message}");
    let whole = s
        .kubectl
        .run(&["get", "run", &run, "-n", s.ns(), "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !whole.contains("wrong-pw") && !whole.contains("s3cret-pw"),
        "{whole}"
    );
    claims_gone(&s, &run).await;
}

#[tokio::test]
async fn a_claim_that_never_binds_fails_the_run_with_the_reason() {
    let s = Setup::new(&["--workspace-bind-timeout", "3"]).await;
    let workspace = "    storageClassName: no-such-class\n";
    let steps = "    - key: never\n      script: {source: 'echo ran'}\n";
    s.apply(&flow("unbound", workspace, steps));
    let run = start(&s, "unbound");
    let r = &wait_run(&s, &run, &["Failed", "Succeeded"]).await["status"];
    assert_eq!(r["phase"], "Failed", "{r:#}");
    assert_eq!(r["error"]["code"], "workspace.failed");
    let message = r["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("was not ready within 3 s: the claim is Pending (asking the storage class `no-such-class`)"),
        "{message}"
    );
    let condition = r["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Succeeded"))
        .expect("Succeeded condition");
    assert_eq!(condition["message"], message);
    // Said in an Event too.
    let events = s
        .kubectl
        .run(&[
            "get",
            "events",
            "-n",
            s.ns(),
            "--field-selector",
            &format!("involvedObject.name={run},reason=WorkspaceFailed"),
            "-o",
            "json",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(events.contains("no-such-class"), "{events}");
    claims_gone(&s, &run).await;
}

#[tokio::test]
async fn a_run_deleted_mid_run_leaves_no_claim_and_a_killed_controller_checks_out_once() {
    let git = GitDaemon::start().expect("git daemon");
    let repo = git.create_repo("app");
    let mut s = Setup::new(&[]).await;
    let steps = "    - key: wait\n      script: {source: 'sleep 600'}\n";
    s.apply(&flow("slow", &app(&repo.url), steps));
    let run = start(&s, "slow");
    // The controller is killed once the checkout Job exists, and started
    // again: the same Job is taken up, no second one made.
    let checkout_jobs = |s: &Setup| workspace_jobs(s, &run, "workspace-checkout");
    let first = wait_for("the checkout Job", BOUND, || async {
        let jobs = checkout_jobs(&s);
        Ok((!jobs.is_empty()).then_some(jobs))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    s.controllers[0].kill();
    s.controllers[0].restart().expect("controller restarts");
    wait_run(&s, &run, &["Running"]).await;
    wait_for("the step's Job", BOUND, || async {
        let r = s.get("run", &run);
        Ok((r["status"]["steps"]["wait"]["status"] == "running").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{:#}\n{}", s.get("run", &run), s.logs()));
    assert_eq!(checkout_jobs(&s), first, "one checkout Job, the first");
    assert_eq!(claims(&s, &run).len(), 1);
    deleted_with_its_claims(&s, &run).await;
}

#[tokio::test]
async fn keep_on_failure_keeps_a_failed_runs_volume_until_the_run_is_deleted() {
    let s = Setup::new(&[]).await;
    let workspace = "    keep: onFailure\n";
    let steps = r#"    - key: leave
      script:
        source: |
          echo "for the post-mortem" > "$WORKSPACE/notes.txt"
          exit 3
"#;
    s.apply(&flow("kept", workspace, steps));
    let run = start(&s, "kept");
    let r = &wait_run(&s, &run, &["Failed", "Succeeded"]).await["status"];
    assert_eq!(r["phase"], "Failed", "{r:#}");
    let volume = r["workspace"]["volume"]
        .as_str()
        .expect("volume")
        .to_string();
    // Kept: still there (and not being deleted) a while after the end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let claim = s.get("pvc", &volume);
    assert_eq!(
        claim["metadata"]["deletionTimestamp"],
        Value::Null,
        "{claim:#}"
    );
    assert_eq!(claim["status"]["phase"], "Bound");
    // Its file is there for whoever mounts the claim next.
    let pv = claim["spec"]["volumeName"].as_str().expect("bound to a PV");
    let path = s.get("pv", pv)["spec"]["hostPath"]["path"]
        .as_str()
        .expect("a hostPath PV")
        .to_string();
    assert_eq!(
        std::fs::read_to_string(format!("{path}/notes.txt")).expect("the step's file"),
        "for the post-mortem\n"
    );
    deleted_with_its_claims(&s, &run).await;
}

#[tokio::test]
async fn a_step_that_repoints_origin_and_plants_hooks_never_gets_the_push_credentials() {
    use coxswain_test_support::auth_trap::AuthTrap;
    let server = GitHttp::start("robot", "s3cret-pw-77").expect("git over http");
    let repo = server.create_repo("app");
    let trap = AuthTrap::start().expect("the trap listens");
    let s = Setup::new(&[]).await;
    let workspace = authed_app(&repo.url);
    // Anything planted that runs calls the trap, with the password in its
    // path when it has one.
    let steps = [
        EDIT_AND_COMMIT,
        r#"          git remote set-url origin "TRAP/app.git"
          git config url."TRAP/".insteadOf "HONEST/"
          git config credential.helper '!f() { git ls-remote "TRAP/helper/$COXSWAIN_GIT_PASSWORD" >/dev/null 2>&1; }; f'
          printf '#!/bin/sh\ngit ls-remote "TRAP/fsmonitor/$COXSWAIN_GIT_PASSWORD" >/dev/null 2>&1\nexit 1\n' > .git/fsmonitor.sh
          chmod +x .git/fsmonitor.sh
          git config core.fsmonitor "$PWD/.git/fsmonitor.sh"
          for hook in pre-push reference-transaction; do
            printf '#!/bin/sh\ngit ls-remote "TRAP/%s/$COXSWAIN_GIT_PASSWORD" >/dev/null 2>&1\n' "$hook" > ".git/hooks/$hook"
            chmod +x ".git/hooks/$hook"
          done
          printf '{"commit": "%s"}' "$(git rev-parse HEAD)"
"#,
    ]
    .concat()
    .replace("TRAP", trap.url("").trim_end_matches('/'))
    .replace("HONEST", &format!("http://127.0.0.1:{}", server.port()));
    s.apply(&flow("hostile", &workspace, &steps));
    git_app_secret(&s, "s3cret-pw-77");
    let run = start(&s, "hostile");
    let r = &wait_run(&s, &run, &["Succeeded", "Failed"]).await["status"];
    let seen = trap.seen();
    assert!(
        seen.requests.is_empty() && seen.authorizations.is_empty(),
        "the trap was reached: {seen:?}\n{r:#}"
    );
    assert_eq!(r["phase"], "Succeeded", "{r:#}\n{}", s.logs());
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("commit");
    let branch = format!("coxswain/{run}");
    assert_eq!(
        server.branch("app", &branch).as_deref(),
        Some(edited),
        "pushed to the flow's URL"
    );
    assert_eq!(r["workspace"]["pushed"][0]["commit"], edited);
    claims_gone(&s, &run).await;
}

/// The uids of every Job matching `selector` made in the namespace from now
/// on, as a watch sees them.
fn every_job(
    s: &Setup,
    selector: &str,
) -> std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(s.ns.client(), s.ns());
    let stream = watcher(jobs, watcher::Config::default().labels(selector)).applied_objects();
    let into = seen.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(job) = stream.next().await {
            if let Some(uid) = job.ok().and_then(|j| j.metadata.uid) {
                into.lock().expect("lock").insert(uid);
            }
        }
    });
    seen
}

/// The uids of run `run`'s Jobs for workspace work `key`
/// (`workspace-checkout` or `workspace-push`).
fn workspace_jobs(s: &Setup, run: &str, key: &str) -> Vec<String> {
    let out = s.kubectl.json(&[
        "get",
        "jobs",
        "-n",
        s.ns(),
        "-l",
        &format!("coxswain.dev/run={run},coxswain.dev/step={key}"),
        "-o",
        "json",
    ]);
    out["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| j["metadata"]["uid"].as_str().map(String::from))
        .collect()
}

#[tokio::test]
async fn a_controller_killed_at_every_workspace_moment_checks_out_and_pushes_once() {
    let git = GitDaemon::start().expect("git daemon");
    let repo = git.create_repo("app");
    let mut s = Setup::new(&[]).await;
    let steps = r#"    - key: edit
      script:
        source: |
          set -e
          cd app
          echo changed >> README
          git commit --quiet -am "edit on $BRANCH"
          sleep 2
          printf '{"commit": "%s"}' "$(git rev-parse HEAD)"
"#;
    s.apply(&flow("killed", &app(&repo.url), steps));
    // Every push Job made, watched (a short one may come and go between
    // two looks).
    let pushed = every_job(&s, "coxswain.dev/step=workspace-push");
    let run = start(&s, "killed");
    // Each moment holds from when it is reached on (a later one reached
    // first counts too): the controller is SIGKILLed there and started
    // again, and every Job of the workspace seen is remembered.
    type Moment = (&'static str, fn(&Value, usize, usize) -> bool);
    let moments: [Moment; 6] = [
        ("the checkout Job exists", |_, checkouts, _| checkouts > 0),
        ("the record holds the workspace", |r, _, _| {
            r["status"]["workspace"]["volumeUid"].is_string()
        }),
        ("the first step runs", |r, _, _| {
            r["status"]["steps"]["edit"]["status"].is_string()
        }),
        ("the run is held for its push", |r, _, _| {
            r["status"]["workspace"]["pushing"].is_string() || r["status"]["finishedAt"].is_string()
        }),
        ("the push Job exists", |r, _, pushes| {
            pushes > 0 || r["status"]["finishedAt"].is_string()
        }),
        ("the run ended", |r, _, _| {
            r["status"]["finishedAt"].is_string()
        }),
    ];
    let mut checkouts = std::collections::BTreeSet::new();
    let mut pushes = std::collections::BTreeSet::new();
    for (what, reached) in moments {
        wait_for(what, BOUND, || {
            let now = s.get("run", &run);
            checkouts.extend(workspace_jobs(&s, &run, "workspace-checkout"));
            pushes.extend(workspace_jobs(&s, &run, "workspace-push"));
            let hit = reached(&now, checkouts.len(), pushes.len());
            async move { Ok(hit.then_some(())) }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{:#}\n{}", s.get("run", &run), s.logs()));
        s.controllers[0].kill();
        s.controllers[0].restart().expect("controller restarts");
    }
    let r = &wait_run(&s, &run, &["Succeeded", "Failed"]).await["status"];
    assert_eq!(r["phase"], "Succeeded", "{r:#}\n{}", s.logs());
    checkouts.extend(workspace_jobs(&s, &run, "workspace-checkout"));
    pushes.extend(workspace_jobs(&s, &run, "workspace-push"));
    assert_eq!(checkouts.len(), 1, "one checkout Job: {checkouts:?}");
    pushes.extend(pushed.lock().expect("lock").iter().cloned());
    assert_eq!(pushes.len(), 1, "one push Job: {pushes:?}");
    let edited = r["steps"]["edit"]["output"]["commit"]
        .as_str()
        .expect("edit's commit")
        .to_string();
    assert_eq!(
        r["steps"]["edit"]["attempts"].as_array().map(Vec::len),
        Some(1)
    );
    let ws = &r["workspace"];
    assert_eq!(ws["pushed"][0]["commit"], edited.as_str(), "{ws}");
    assert_eq!(ws["pushing"], Value::Null, "{ws}");
    let branch = format!("coxswain/{run}");
    assert_eq!(git.branch("app", &branch).as_deref(), Some(edited.as_str()));
    claims_gone(&s, &run).await;
}
