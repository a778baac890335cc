//! The Argo CD health checks of `examples/argocd/` run by gopher-lua, the
//! interpreter Argo CD embeds (`target/e2e/lua-health`, built from
//! `e2e/argocd/` under Argo CD's contract: the object is `obj`, the script
//! returns `{status, message}`), on objects read with `kubectl -o json` from
//! real Flows, Runs and Approvals that `coxswain controller` drives, at each
//! stage of their lives; the scripts in `argocd-cm-patch.yaml` are, byte for
//! byte, the ones run here; and the book's `kubectl patch` of `argocd-cm`
//! (`docs/src/guides/argocd.md`) adds them to one made as Argo CD's install
//! makes it, keeping its keys.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use coxswain_e2e::{Kubectl, Setup, flow, wait_for, workspace_root};
use serde_json::{Value, json};
use tokio::sync::watch;

const BOUND: Duration = Duration::from_secs(90);

/// The kinds with a health check, as Argo CD keys them (`group_kind`).
const KINDS: [&str; 3] = ["Flow", "Run", "Approval"];

/// What a health script returned.
#[derive(Debug, serde::Deserialize)]
struct Health {
    status: String,
    message: String,
}

/// The script Argo CD runs for `kind`, as the repo ships it.
fn script(kind: &str) -> PathBuf {
    workspace_root()
        .join("examples/argocd/health/coxswain.dev")
        .join(kind)
        .join("health.lua")
}

/// `target/e2e/lua-health` (or `E2E_LUA_HEALTH`), built with
/// `e2e/argocd/build` when missing.
fn lua_health() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        coxswain_e2e::built_tool("E2E_LUA_HEALTH", "lua-health", "e2e/argocd/build")
    })
}

/// Runs `kind`'s health script on `object` under gopher-lua.
fn health(kind: &str, object: &Value) -> Health {
    let mut child = Command::new(lua_health())
        .arg(script(kind))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", lua_health().display()));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(object.to_string().as_bytes())
            .expect("writing the object to lua-health");
    }
    let out = child.wait_with_output().expect("lua-health");
    assert!(
        out.status.success(),
        "the {kind} health script failed on {object:#}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "lua-health printed no health ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Asserts `kind`'s health of `object` is `status`, with a message that
/// contains every one of `parts`; returns the message.
#[track_caller]
fn assert_health(kind: &str, object: &Value, status: &str, parts: &[&str]) -> String {
    let got = health(kind, object);
    assert_eq!(got.status, status, "{got:?} of {object:#}");
    for part in parts {
        assert!(
            got.message.contains(part),
            "{kind} health message {:?} lacks {part:?}; object: {object:#}",
            got.message
        );
    }
    got.message
}

/// A local server the flows' HTTP steps call: `/ok`, `/fail` (422) and
/// `/hold`, which answers once the test releases it (so a run is seen
/// Running).
async fn serve() -> (SocketAddr, watch::Sender<bool>) {
    let (release, released) = watch::channel(false);
    let app = axum::Router::new()
        .route("/ok", get(|| async { axum::Json(json!({"ok": true})) }))
        .route(
            "/fail",
            get(|| async { (StatusCode::UNPROCESSABLE_ENTITY, "no such order") }),
        )
        .route(
            "/hold",
            get(
                |State(mut released): State<watch::Receiver<bool>>| async move {
                    let _ = released.wait_for(|r| *r).await;
                    axum::Json(json!({"held": true}))
                },
            ),
        )
        .with_state(released);
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (addr, release)
}

coxswain_e2e::setup_newtype!(
    /// A [`Setup`] whose kubectl answers in JSON: the objects as the API
    /// server returns them, which is what Argo CD's scripts are given.
    Cluster
);

async fn setup() -> Cluster {
    Cluster(Setup::new(&[]).await)
}

impl Cluster {
    /// kubectl's stdout as JSON (`-o json` is the caller's); panics with
    /// kubectl's message and the controller's log otherwise.
    fn json(&self, args: &[&str], stdin: Option<&str>) -> Value {
        let mut all = vec!["-n", self.ns.name()];
        all.extend_from_slice(args);
        let out = self
            .kubectl
            .run_with_stdin(&all, stdin)
            .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.logs()));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: not JSON: {e}"))
    }

    /// `kubectl apply -o json` of `yaml`: the object as the API server
    /// stored it, before the controller has looked at it.
    fn apply(&self, yaml: &str) -> Value {
        self.json(&["apply", "-f", "-", "-o", "json"], Some(yaml))
    }

    /// `kubectl create -o json` of a Run of `flow`: the Run as created.
    fn create_run(&self, flow: &str) -> Value {
        let run = json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"generateName": format!("{flow}-")},
            "spec": {"flowRef": {"name": flow}},
        });
        self.json(&["create", "-f", "-", "-o", "json"], Some(&run.to_string()))
    }

    /// `kubectl patch --type merge -o json`: the object as patched.
    fn patch(&self, kind: &str, name: &str, patch: Value) -> Value {
        self.patch_as_type(kind, name, "merge", patch)
    }

    /// `kubectl patch --type TYPE -o json` (`merge`, `json`): the object
    /// as patched.
    fn patch_as_type(&self, kind: &str, name: &str, type_: &str, patch: Value) -> Value {
        let patch = patch.to_string();
        self.json(
            &[
                "patch", kind, name, "--type", type_, "-p", &patch, "-o", "json",
            ],
            None,
        )
    }

    fn get(&self, kind: &str, name: &str) -> Value {
        self.json(&["get", kind, name, "-o", "json"], None)
    }

    /// Approval `name` once its `status.FIELD` is `value`.
    async fn approval_when(&self, name: &str, field: &str, value: &str) -> Value {
        let what = format!("approval {name}: status.{field} {value}");
        self.wait("approval", name, &what, |a| a["status"][field] == value)
            .await
    }

    /// The object once `ready` holds of it (within the bound).
    async fn wait(
        &self,
        kind: &str,
        name: &str,
        what: &str,
        ready: impl Fn(&Value) -> bool,
    ) -> Value {
        let found = wait_for(what, BOUND, || async {
            let text = self
                .kubectl
                .run(&["get", kind, name, "-n", self.ns.name(), "-o", "json"])
                .ok();
            let object: Option<Value> = text.and_then(|t| serde_json::from_str(&t).ok());
            Ok(object.filter(|o| ready(o)))
        })
        .await;
        found.unwrap_or_else(|e| {
            panic!(
                "{e}\n{kind} {name}: {:#}\ncontroller log:\n{}",
                self.get(kind, name),
                self.logs()
            )
        })
    }

    async fn wait_phase(&self, run: &str, phase: &'static str) -> Value {
        match self
            .kubectl
            .wait_run(self.ns.name(), run, &[phase], BOUND)
            .await
        {
            Ok(object) => object,
            Err(e) => panic!(
                "{e}\nrun: {:#}\ncontroller log:\n{}",
                self.get("run", run),
                self.logs()
            ),
        }
    }
}

fn name(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .expect("a named object")
        .to_string()
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// `text` as a YAML literal block under a key of `data` (four spaces in).
fn block(text: &str) -> String {
    text.lines()
        .map(|line| match line {
            "" => "\n".to_string(),
            line => format!("    {line}\n"),
        })
        .collect()
}

/// A flow with a call the test holds, a person's review and a last call.
fn reviewed_flow(addr: SocketAddr) -> String {
    flow(
        "reviewed",
        &format!(
            r#"
  steps:
    - key: fetch
      http: {{url: "http://{addr}/hold"}}
    - key: review
      approval: {{decisions: [approve, reject]}}
    - key: publish
      after: [review.approve]
      http: {{url: "http://{addr}/ok"}}
"#
        ),
    )
}

/// The patch file the book tells Argo CD's operators to apply.
const PATCH_FILE: &str = "examples/argocd/argocd-cm-patch.yaml";

/// The argocd-cm health keys, one per kind in `crds/`.
fn crd_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for entry in std::fs::read_dir(workspace_root().join("crds")).expect("crds/") {
        let text = std::fs::read_to_string(entry.expect("crds/ entry").path()).expect("a CRD");
        let crd: serde_yaml::Value = serde_yaml::from_str(&text).expect("a CRD in YAML");
        keys.insert(format!(
            "resource.customizations.health.{}_{}",
            crd["spec"]["group"].as_str().expect("a group"),
            crd["spec"]["names"]["kind"].as_str().expect("a kind"),
        ));
    }
    keys
}

/// Asserts `data` holds, under each kind's key, the tested script byte for
/// byte; `what` names where `data` was read.
#[track_caller]
fn assert_holds_the_scripts(data: &serde_json::Map<String, Value>, what: &str) {
    for kind in KINDS {
        let key = format!("resource.customizations.health.coxswain.dev_{kind}");
        let tested = std::fs::read_to_string(script(kind)).expect("the script");
        assert!(
            data.get(&key).and_then(Value::as_str) == Some(tested.as_str()),
            "{key} in {what} differs from {}; its value should read:\n  {key}: |\n{}",
            script(kind).display(),
            block(&tested)
        );
    }
}

#[test]
fn the_patch_file_holds_only_data_with_byte_for_byte_the_scripts_tested() {
    let text = std::fs::read_to_string(workspace_root().join(PATCH_FILE)).expect("the patch");
    let patch: Value = serde_yaml::from_str(&text).expect("the patch is YAML");
    let top: Vec<&String> = patch.as_object().expect("a mapping").keys().collect();
    assert_eq!(top, ["data"], "a merge patch of data only: {PATCH_FILE}");
    let data = patch["data"].as_object().expect("data is a mapping");
    let keys: BTreeSet<String> = data.keys().cloned().collect();
    assert_eq!(keys, crd_keys(), "one health check per kind of crds/");
    assert_holds_the_scripts(data, PATCH_FILE);
    let command = book_command().join(" ");
    assert!(
        text.lines()
            .any(|l| l.trim_start_matches('#').trim() == command),
        "{PATCH_FILE} shows the book's command ({GUIDE}): {command}"
    );
}

/// The book's page that tells how to add the health checks to Argo CD.
const GUIDE: &str = "docs/src/guides/argocd.md";

/// The book's command that adds the health checks to `argocd-cm`, as words.
fn book_command() -> Vec<String> {
    let guide = std::fs::read_to_string(workspace_root().join(GUIDE)).expect(GUIDE);
    let line = guide
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("kubectl patch configmap argocd-cm"))
        .unwrap_or_else(|| panic!("{GUIDE} shows the kubectl patch of argocd-cm"));
    line.split_whitespace().map(String::from).collect()
}

/// An `argocd-cm` as Argo CD's install leaves it (`kubectl apply` of its
/// manifests), with keys of its own that nothing of Coxswain's may remove.
const ARGOCD_INSTALL_CM: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
    coxswain.dev/e2e: argocd-cm
data:
  url: https://argocd.example.com
  admin.enabled: "true"
  resource.customizations.health.apps_Deployment: |
    hs = {}
    hs.status = "Healthy"
    hs.message = "a script of the operator's own"
    return hs
"#;

/// `kubectl get` of Argo CD's `argocd-cm`, as JSON.
const GET_ARGOCD_CM: [&str; 7] = [
    "get",
    "configmap",
    "argocd-cm",
    "-n",
    "argocd",
    "-o",
    "json",
];

/// The `data` Argo CD's install put in [`ARGOCD_INSTALL_CM`].
fn install_data() -> serde_json::Map<String, Value> {
    let cm: Value = serde_yaml::from_str(ARGOCD_INSTALL_CM).expect("YAML");
    cm["data"].as_object().expect("data").clone()
}

#[tokio::test]
async fn the_book_command_adds_the_health_checks_and_keeps_every_key_of_argocd_cm() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    let words = book_command();
    assert!(
        words.windows(2).any(|w| w == ["-n", "argocd"]),
        "the book's command ({GUIDE}) patches argocd-cm in the argocd namespace: {words:?}"
    );
    // The namespace Argo CD installs into; a cluster whose argocd-cm is
    // not this test's own is left alone.
    match kubectl.run(&["create", "namespace", "argocd"]) {
        Ok(_) => {}
        Err(e) if e.contains("AlreadyExists") => {
            if let Ok(out) = kubectl.run(&GET_ARGOCD_CM) {
                let cm: Value = serde_json::from_str(&out).expect("JSON");
                assert_eq!(
                    cm["metadata"]["labels"]["coxswain.dev/e2e"], "argocd-cm",
                    "this cluster has an argocd-cm of its own; this test would change it"
                );
                kubectl
                    .run(&["delete", "configmap", "argocd-cm", "-n", "argocd"])
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        Err(e) => panic!("{e}"),
    }
    let get = || kubectl.json(&GET_ARGOCD_CM);
    // `kubectl apply` of argocd-cm as Argo CD's install applies it.
    let install = || {
        kubectl
            .apply("argocd", ARGOCD_INSTALL_CM)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    install();
    let installed = get();

    // Exactly the book's command, run from the repository's root.
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| match workspace_root().join(w) {
            path if w.contains('/') && path.exists() => path.to_string_lossy().into_owned(),
            _ => w.clone(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kubectl.run(&args).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.trim(), "configmap/argocd-cm patched", "{words:?}");
    let patched = get();
    let data = patched["data"].as_object().expect("data");
    for (key, value) in install_data() {
        assert_eq!(
            data.get(&key),
            Some(&value),
            "{key} of Argo CD's install, after the patch"
        );
    }
    assert_holds_the_scripts(
        data,
        "argocd-cm as the API server stored it after the patch",
    );
    let mut expected: BTreeSet<String> = install_data().keys().cloned().collect();
    expected.extend(crd_keys());
    let keys: BTreeSet<String> = data.keys().cloned().collect();
    assert_eq!(
        keys, expected,
        "Argo CD's keys and Coxswain's, nothing else"
    );
    assert_eq!(
        patched["metadata"]["labels"], installed["metadata"]["labels"],
        "the labels are Argo CD's still"
    );

    // A second time changes nothing, not even the resource version.
    let again = kubectl.run(&args).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.trim(), "configmap/argocd-cm patched (no change)");
    let twice = get();
    assert_eq!(
        twice["metadata"]["resourceVersion"],
        patched["metadata"]["resourceVersion"]
    );
    assert_eq!(twice["data"], patched["data"]);

    // Argo CD's install applied again (an upgrade) keeps the health checks:
    // client-side apply removes only keys it applied before.
    install();
    let upgraded = get();
    assert_eq!(
        upgraded["data"], patched["data"],
        "after Argo CD's install is applied again"
    );
    kubectl
        .run(&["delete", "namespace", "argocd", "--wait=false"])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Why the book says patch, not apply: `kubectl apply` of a ConfigMap with
/// only Coxswain's keys, with `flags`, on an `argocd-cm` made as Argo CD's
/// install makes it, in a namespace of its own; the keys left.
async fn keys_left_by_apply(flags: &[&str]) -> BTreeSet<String> {
    let kubectl = Kubectl::new().await.expect("kubectl");
    let ns = coxswain_e2e::TestNamespace::new().await.expect("namespace");
    kubectl
        .run_with_stdin(
            &["apply", "-n", ns.name(), "-f", "-"],
            Some(ARGOCD_INSTALL_CM),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(workspace_root().join(PATCH_FILE)).expect("the patch");
    let patch: Value = serde_yaml::from_str(&text).expect("YAML");
    let ours = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-cm"},
        "data": patch["data"],
    });
    let mut args = vec!["apply", "-n", ns.name()];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["-f", "-"]);
    kubectl
        .run_with_stdin(&args, Some(&ours.to_string()))
        .unwrap_or_else(|e| panic!("{e}"));
    let cm = kubectl.json(&[
        "get",
        "configmap",
        "argocd-cm",
        "-n",
        ns.name(),
        "-o",
        "json",
    ]);
    cm["data"]
        .as_object()
        .expect("data")
        .keys()
        .cloned()
        .collect()
}

#[tokio::test]
async fn client_side_apply_of_only_the_health_keys_would_remove_argo_cds_keys() {
    // The install's keys are in its last applied configuration, not in ours.
    assert_eq!(keys_left_by_apply(&[]).await, crd_keys());
}

/// Server-side apply under a field manager of its own removes them too, at
/// once: kubectl hands the client-side apply's fields over to that manager,
/// which then no longer applies them.
#[tokio::test]
async fn server_side_apply_of_only_the_health_keys_would_remove_argo_cds_keys() {
    let flags = ["--server-side", "--field-manager=coxswain-health"];
    assert_eq!(keys_left_by_apply(&flags).await, crd_keys());
}

#[tokio::test]
async fn a_flow_is_progressing_until_validated_then_healthy_or_degraded_with_its_problems() {
    let (addr, _release) = serve().await;
    let s = setup().await;

    let created = s.apply(&reviewed_flow(addr));
    assert!(created.get("status").is_none(), "{created:#}");
    assert_health("Flow", &created, "Progressing", &["validate"]);

    let valid = s
        .wait("flow", "reviewed", "the flow validated", |f| {
            f["status"]["observedGeneration"] == 1 && condition(f, "Valid").is_some()
        })
        .await;
    assert_eq!(condition(&valid, "Valid").expect("Valid")["status"], "True");
    assert_health("Flow", &valid, "Healthy", &["passed validation"]);

    // An edit from Git: a new generation the controller has not checked.
    let edited = s.apply(&reviewed_flow(addr).replace("[approve, reject]", "[approve, redo]"));
    assert_eq!(edited["metadata"]["generation"], 2, "{edited:#}");
    assert_eq!(edited["status"]["observedGeneration"], 1, "{edited:#}");
    assert_health("Flow", &edited, "Progressing", &["this generation"]);
    let checked = s
        .wait("flow", "reviewed", "the edit validated", |f| {
            f["status"]["observedGeneration"] == 2
        })
        .await;
    assert_health("Flow", &checked, "Healthy", &[]);

    // Derived from the real object: a valid flow whose schedule cannot
    // start runs (`Ready` False) is not healthy either.
    let mut unready = checked.clone();
    let conditions = unready["status"]["conditions"]
        .as_array_mut()
        .expect("conditions");
    for c in conditions.iter_mut().filter(|c| c["type"] == "Ready") {
        c["status"] = json!("False");
        c["reason"] = json!("ScheduleUnusable");
        c["message"] = json!("the schedule cannot start runs");
    }
    assert_health(
        "Flow",
        &unready,
        "Degraded",
        &["the schedule cannot start runs"],
    );

    s.apply(&flow(
        "broken",
        r#"
  steps:
    - key: first
      http: {url: "http://127.0.0.1:1/"}
    - key: second
      when: $steps.first.output.ok == True
      http: {url: "http://127.0.0.1:1/"}
    - key: third
      when: "$steps.first.status == "
      http: {url: "http://127.0.0.1:1/"}
"#,
    ));
    let broken = s
        .wait("flow", "broken", "the broken flow checked", |f| {
            condition(f, "Valid").is_some_and(|c| c["status"] == "False")
        })
        .await;
    let message = assert_health(
        "Flow",
        &broken,
        "Degraded",
        &[
            "2 problems:",
            "step second: when: write `true` in lowercase",
            "step third: when: ",
            "(character ",
        ],
    );
    assert_eq!(
        Some(message.as_str()),
        condition(&broken, "Valid").and_then(|c| c["message"].as_str()),
        "the message is the Valid condition's"
    );
}

#[tokio::test]
async fn a_run_and_its_approval_have_the_health_of_each_stage_until_it_succeeds() {
    let (addr, release) = serve().await;
    let s = setup().await;
    s.apply(&reviewed_flow(addr));

    let created = s.create_run("reviewed");
    let run = name(&created);
    assert!(created.get("status").is_none(), "{created:#}");
    assert_health("Run", &created, "Progressing", &["start the run"]);

    let running = s.wait_phase(&run, "Running").await;
    assert_health(
        "Run",
        &running,
        "Progressing",
        &["Running at step fetch", "0/3"],
    );
    release.send_replace(true);

    let waiting = s.wait_phase(&run, "Waiting").await;
    assert_health(
        "Run",
        &waiting,
        "Suspended",
        &["Waiting for a person at step review", "1/3"],
    );
    let approval = s.kubectl.approval_name(s.ns.name(), &run, "review", 1);
    let asked = s.get("approval", &approval);
    assert_health(
        "Approval",
        &asked,
        "Suspended",
        &[&format!(
            "decide (approve, reject) on step review of run {run}"
        )],
    );

    let decided = s.patch(
        "approval",
        &approval,
        json!({"spec": {"decision": "approve"}}),
    );
    assert_health(
        "Approval",
        &decided,
        "Healthy",
        &["Answered approve", "waiting for the run"],
    );
    let consumed = s
        .wait("approval", &approval, "the answer taken in", |a| {
            a["status"]["consumed"] == true
        })
        .await;
    assert_health("Approval", &consumed, "Healthy", &["the run took it in"]);

    let done = s.wait_phase(&run, "Succeeded").await;
    assert_health("Run", &done, "Healthy", &["succeeded", "3/3"]);
}

#[tokio::test]
async fn failed_cancelled_and_flowless_runs_and_a_refused_answer_are_not_healthy() {
    let (addr, release) = serve().await;
    release.send_replace(true);
    let s = setup().await;
    s.apply(&reviewed_flow(addr));
    s.apply(&flow(
        "failing",
        &format!(
            r#"
  steps:
    - key: order
      http: {{url: "http://{addr}/fail"}}
"#
        ),
    ));

    let failing = name(&s.create_run("failing"));
    let failed = s.wait_phase(&failing, "Failed").await;
    let error = failed["status"]["error"]["message"]
        .as_str()
        .expect("a failed run says why")
        .to_string();
    let message = assert_health("Run", &failed, "Degraded", &["422", "no such order"]);
    assert_eq!(message, error);

    // A Run of a flow that does not exist (yet: Argo CD may sync it next)
    // stays Pending, looked at again and again.
    let flowless = name(&s.create_run("nowhere"));
    let missing = format!(
        "the flow `nowhere` does not exist in namespace `{}`",
        s.ns.name()
    );
    // The controller says so in the Run's `Running` condition, which the
    // health check shows.
    let pending = wait_for("the missing flow noticed", BOUND, || async {
        let run = s.get("run", &flowless);
        let said = run["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"] == "FlowNotFound"));
        Ok(said.then_some(run))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(pending["status"]["phase"], "Pending", "{pending}");
    assert_health("Run", &pending, "Progressing", &[&missing]);

    let cancelled = name(&s.create_run("reviewed"));
    s.wait_phase(&cancelled, "Waiting").await;
    let approval = s
        .kubectl
        .approval_name(s.ns.name(), &cancelled, "review", 1);
    s.patch(
        "approval",
        &approval,
        json!({"spec": {"decision": "maybe"}}),
    );
    let refused = s
        .wait("approval", &approval, "the answer refused", |a| {
            a["status"]["refused"].is_string()
        })
        .await;
    let reason = refused["status"]["refused"].as_str().unwrap_or_default();
    assert_eq!(refused["status"]["state"], "refused", "{refused}");
    assert_health(
        "Approval",
        &refused,
        "Degraded",
        &["The answer was refused: ", reason],
    );

    // The cancel as written: the controller has not taken it in yet.
    let asked = s.patch("run", &cancelled, json!({"spec": {"cancel": true}}));
    assert_eq!(asked["status"]["phase"], "Waiting", "{asked:#}");
    assert_health("Run", &asked, "Progressing", &["take in the run's change"]);
    let ended = s.wait_phase(&cancelled, "Cancelled").await;
    assert_health("Run", &ended, "Degraded", &["the run was cancelled"]);
    // Nobody is left waiting to answer a run that ended.
    let closed = s
        .wait("approval", &approval, "the approval closed", |a| {
            a["status"]["closed"].is_string()
        })
        .await;
    assert_health(
        "Approval",
        &closed,
        "Healthy",
        &[
            "Closed: run ",
            " ended Cancelled before an answer was taken in",
        ],
    );
}

#[tokio::test]
async fn an_entry_is_suspended_until_filled_in_then_healthy() {
    let s = setup().await;
    s.apply(&flow(
        "assign",
        r#"
  steps:
    - key: owner
      approval: {mode: entry, fields: [{name: owner, type: string}, {name: days, type: integer}]}
"#,
    ));
    let run = name(&s.create_run("assign"));
    let waiting = s.wait_phase(&run, "Waiting").await;
    assert_health("Run", &waiting, "Suspended", &["at step owner"]);
    let approval = s.kubectl.approval_name(s.ns.name(), &run, "owner", 1);
    let asked = s.get("approval", &approval);
    assert_health(
        "Approval",
        &asked,
        "Suspended",
        &[&format!("fill in (owner, days) on step owner of run {run}")],
    );
    let filled = s.patch(
        "approval",
        &approval,
        json!({"spec": {"response": {"owner": "ada", "days": 3}}}),
    );
    assert_health("Approval", &filled, "Healthy", &["Answered an entry"]);
    let done = s.wait_phase(&run, "Succeeded").await;
    assert_health("Run", &done, "Healthy", &["1/1"]);
    let consumed = s.get("approval", &approval);
    assert_eq!(consumed["status"]["consumed"], true, "{consumed:#}");
    assert_health("Approval", &consumed, "Healthy", &["the run took it in"]);
}

#[tokio::test]
async fn an_approval_of_two_approvers_says_how_far_they_got_then_who_agreed() {
    let s = setup().await;
    s.apply(&flow(
        "doubly",
        r#"
  steps:
    - key: review
      approval: {decisions: [approve, reject], approvals: 2}
"#,
    ));
    let run = name(&s.create_run("doubly"));
    let approval = s.kubectl.approval_name(s.ns.name(), &run, "review", 1);
    let asked = s.approval_when(&approval, "state", "open").await;
    assert_health(
        "Approval",
        &asked,
        "Suspended",
        &[
            "decide (approve, reject) on step review",
            "(no answer yet of 2)",
        ],
    );
    // No admission here, so the stamps are written by hand, as the mutating
    // webhook would write them.
    let add = |by: &str| {
        let answer = json!({"decision": "approve", "decidedBy": {"username": by}});
        let patch = json!([{"op": "add", "path": "/spec/answers/-", "value": answer}]);
        s.patch_as_type("approval", &approval, "json", patch)
    };
    add("bob");
    let one = s.approval_when(&approval, "tally", "approve 1 of 2").await;
    assert_health("Approval", &one, "Suspended", &["(approve 1 of 2)"]);
    add("carol");
    let taken = s.approval_when(&approval, "state", "taken").await;
    assert_health(
        "Approval",
        &taken,
        "Healthy",
        &["Answered approve by bob, carol; the run took it in"],
    );
    s.wait_phase(&run, "Succeeded").await;
}
