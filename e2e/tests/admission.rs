//! Admission against the real API server, with the real kubectl: the
//! controller started as the acceptance checks start it (`coxswain
//! controller --webhook-url https://127.0.0.1:PORT` with only KUBECONFIG)
//! registers its webhooks, and every refusal below is kubectl's own output.
//! People are impersonated (`--as`, `--as-group`) and get their rights from
//! Roles in the test's namespace.

use std::time::Duration;

use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace, wait_for};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(90);

/// Rights of the test's people: everyone may work with flows, runs and
/// approvals; only alice may read the Secret `cms`.
const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: coxswain-user}
rules:
  - apiGroups: [coxswain.dev]
    resources: [flows, runs, approvals]
    verbs: [get, list, watch, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: coxswain-users}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: coxswain-user}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: eve}
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: editors}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-cms}
rules:
  - apiGroups: [""]
    resources: [secrets]
    resourceNames: [cms]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-cms}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-cms}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#;

/// `coxswain webhook` as a process, with only KUBECONFIG set; killed when dropped.
struct WebhookProcess {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl WebhookProcess {
    async fn start(namespace: &str, url: &str) -> WebhookProcess {
        let kubeconfig = tokio::task::spawn_blocking(coxswain_e2e::kubeconfig)
            .await
            .expect("join")
            .expect("kubeconfig");
        let log = coxswain_e2e::workspace_root().join(format!(
            "target/e2e/controllers/webhook-{}-{namespace}.log",
            std::process::id()
        ));
        std::fs::create_dir_all(log.parent().expect("dir")).expect("log dir");
        let file = std::fs::File::create(&log).expect("log file");
        let child = std::process::Command::new(coxswain_e2e::coxswain_bin().expect("built"))
            .args(["webhook", "--namespace", namespace, "--webhook-url", url])
            .env_clear()
            .env("KUBECONFIG", kubeconfig)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start coxswain webhook");
        WebhookProcess { child, log }
    }
}

impl Drop for WebhookProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What serves admission in a test.
enum Server {
    Controller(ControllerProcess),
    Webhook(WebhookProcess),
}

impl Server {
    fn log_text(&self) -> String {
        match self {
            Server::Controller(c) => c.log_text(),
            Server::Webhook(w) => std::fs::read_to_string(&w.log).unwrap_or_default(),
        }
    }
}

/// A namespace with people, kubectl, and a controller serving admission.
struct Setup {
    ns: TestNamespace,
    kubectl: Kubectl,
    controller: Server,
}

impl Drop for Setup {
    /// The webhook configurations only select this namespace; remove them
    /// with it.
    fn drop(&mut self) {
        let name = format!("coxswain-{}", self.ns.name());
        for kind in [
            "validatingwebhookconfiguration",
            "mutatingwebhookconfiguration",
        ] {
            let _ = self
                .kubectl
                .run(&["delete", kind, &name, "--ignore-not-found"]);
        }
    }
}

const NOT_A_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: probe}
spec:
  steps:
    - {key: a, agent: {prompt: x}, when: "$input.x == True"}
"#;

async fn setup() -> Setup {
    setup_with(false, &[]).await
}

/// With `alone`, `coxswain webhook` serves admission and nothing reconciles;
/// else the controller does, with `extra` flags.
async fn setup_with(alone: bool, extra: &[&str]) -> Setup {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    kubectl
        .apply(ns.name(), RBAC)
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "https://127.0.0.1:{}",
        coxswain_e2e::free_port().expect("a free port")
    );
    let controller = if alone {
        Server::Webhook(WebhookProcess::start(ns.name(), &url).await)
    } else {
        let mut args = vec!["--webhook-url", url.as_str()];
        args.extend_from_slice(extra);
        Server::Controller(
            ControllerProcess::for_namespace(ns.name(), &args)
                .await
                .expect("controller"),
        )
    };
    let s = Setup {
        ns,
        kubectl,
        controller,
    };
    // The API server calls the webhook once the controller has registered it.
    let refused = wait_for("the webhook to refuse a bad flow", BOUND, || async {
        Ok(s.kubectl
            .apply(s.ns.name(), NOT_A_FLOW)
            .err()
            .filter(|e| e.contains("admission webhook")))
    })
    .await;
    if let Err(e) = refused {
        panic!("{e}\ncontroller log:\n{}", s.controller.log_text());
    }
    s
}

impl Setup {
    fn kubectl_as(
        &self,
        user: &[&str],
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, String> {
        let mut all: Vec<&str> = user.to_vec();
        all.extend_from_slice(&["-n", self.ns.name()]);
        all.extend_from_slice(args);
        self.kubectl.run_with_stdin(&all, stdin)
    }

    fn apply_as(&self, user: &[&str], yaml: &str) -> Result<String, String> {
        self.kubectl_as(user, &["apply", "-f", "-"], Some(yaml))
    }

    /// Creates a Run of `flow` as `user`; returns its name.
    fn create_run_as(&self, user: &[&str], flow: &str, input: Value) -> Result<String, String> {
        let run = json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"generateName": format!("{flow}-")},
            "spec": {"flowRef": {"name": flow}, "input": input},
        });
        self.kubectl_as(
            user,
            &["create", "-f", "-", "-o", "name"],
            Some(&run.to_string()),
        )
        .map(|out| {
            out.trim()
                .trim_start_matches("run.coxswain.dev/")
                .to_string()
        })
    }

    fn get(&self, kind: &str, name: &str) -> Value {
        self.kubectl
            .json(&["get", kind, name, "-n", self.ns.name(), "-o", "json"])
    }

    fn patch_as(
        &self,
        user: &[&str],
        kind: &str,
        name: &str,
        patch: Value,
    ) -> Result<String, String> {
        self.kubectl_as(
            user,
            &[
                "patch",
                kind,
                name,
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ],
            None,
        )
    }

    /// The Approval of the first attempt of `step`, once the controller made it.
    async fn approval(&self, run: &str, step: &str) -> Value {
        let name = self.kubectl.approval_name(self.ns.name(), run, step, 1);
        let found = wait_for(&format!("approval {name}"), BOUND, || async {
            Ok(self
                .kubectl
                .run(&["get", "approval", &name, "-n", self.ns.name(), "-o", "json"])
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok()))
        })
        .await;
        found.unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.controller.log_text()))
    }
}

/// Asserts kubectl refused with the webhook's message containing every fragment.
fn assert_refused(outcome: Result<String, String>, webhook: &str, fragments: &[&str]) -> String {
    let error = match outcome {
        Ok(out) => panic!("expected a refusal, kubectl said: {out}"),
        Err(error) => error,
    };
    let prefix = format!("admission webhook \"{webhook}\" denied the request: ");
    assert!(error.contains(&prefix), "{error}");
    for fragment in fragments {
        assert!(
            error.contains(fragment),
            "{fragment:?} missing from: {error}"
        );
    }
    // kubectl's own line, as a person sees it.
    let line = error
        .lines()
        .find(|l| l.contains(&prefix))
        .unwrap_or_default()
        .to_string();
    eprintln!("kubectl: {line}");
    line
}

const ALICE: [&str; 2] = ["--as", "alice"];
const BOB: [&str; 2] = ["--as", "bob"];
const EVE: [&str; 2] = ["--as", "eve"];

fn flow(name: &str, steps: &str) -> String {
    format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {{name: {name}}}\nspec:\n  steps:\n{steps}"
    )
}

#[tokio::test]
async fn kubectl_apply_of_a_bad_flow_is_refused_naming_step_and_character() {
    let s = setup().await;
    let malformed = flow(
        "malformed",
        "    - {key: draft, agent: {prompt: x}, when: \"$input.x == 'open\"}\n",
    );
    assert_refused(
        s.apply_as(&ALICE, &malformed),
        "flows.coxswain.dev",
        &[
            "flow malformed is not valid (1 problem): step draft: when: ",
            "(character ",
        ],
    );
    let capitalised = flow(
        "capitalised",
        "    - {key: draft, agent: {prompt: x}, when: \"$input.ready == True\"}\n",
    );
    assert_refused(
        s.apply_as(&ALICE, &capitalised),
        "flows.coxswain.dev",
        &["step draft: when: ", "`true`", "(character 17)"],
    );
    let later = flow(
        "later",
        "    - {key: draft, agent: {prompt: x}, input: {notes: $steps.review.output.notes}}\n    - {key: review, agent: {prompt: Review it.}}\n",
    );
    assert_refused(
        s.apply_as(&ALICE, &later),
        "flows.coxswain.dev",
        &["step draft: input.notes: ", "`review`", "(character "],
    );
    // Every problem of a flow in one refusal.
    let two = flow(
        "two",
        "    - {key: a, agent: {prompt: x}, when: \"$input.x == True\"}\n    - {key: b, agent: {prompt: Review it.}, after: [c]}\n    - {key: c, agent: {prompt: z}}\n",
    );
    assert_refused(
        s.apply_as(&ALICE, &two),
        "flows.coxswain.dev",
        &["(2 problems): step a: when: ", "; step b: after[0]: "],
    );
    for name in ["malformed", "capitalised", "later", "two"] {
        assert!(
            s.kubectl_as(&[], &["get", "flow", name], None).is_err(),
            "{name} was stored"
        );
    }
    // A valid flow is accepted, created and then updated.
    let good = flow(
        "good",
        "    - {key: draft, agent: {prompt: x}, when: \"$input.ready == true\"}\n",
    );
    s.apply_as(&ALICE, &good).unwrap_or_else(|e| panic!("{e}"));
    let edited = good.replace("prompt: x", "prompt: Write more.");
    s.apply_as(&ALICE, &edited)
        .unwrap_or_else(|e| panic!("{e}"));
    // An update that breaks it is refused; the stored flow stays as it was.
    let broken = good.replace("== true", "== True");
    assert_refused(
        s.apply_as(&ALICE, &broken),
        "flows.coxswain.dev",
        &["step draft: when: "],
    );
    assert_eq!(
        s.get("flow", "good")["spec"]["steps"][0]["agent"]["prompt"],
        "Write more."
    );
}

const REVIEWED: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: reviewed}
spec:
  input:
    type: object
    required: [brief]
    properties: {brief: {type: string}, words: {type: integer}}
  steps:
    - key: review
      approval:
        decisions: [approve, changes]
        approvers: {users: [bob], groups: [editors]}
"#;

#[tokio::test]
async fn runs_need_a_valid_flow_and_fitting_input_and_record_their_creator() {
    let s = setup().await;
    s.apply_as(&ALICE, REVIEWED)
        .unwrap_or_else(|e| panic!("{e}"));
    // The self-managed CA is in the Secret and is what the API server trusts.
    let secret = s.get("secret", "coxswain-webhook-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let config = s.kubectl.json(&[
        "get",
        "validatingwebhookconfiguration",
        &format!("coxswain-{}", s.ns.name()),
        "-o",
        "json",
    ]);
    for hook in config["webhooks"].as_array().expect("webhooks") {
        assert_eq!(hook["clientConfig"]["caBundle"], secret["data"]["ca.crt"]);
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["sideEffects"], "None");
    }
    assert_refused(
        s.create_run_as(&ALICE, "reviewed", json!({"brief": "x", "words": "many"})),
        "runs.coxswain.dev",
        &["the input does not fit the Flow `reviewed`: input.words: expected integer"],
    );
    assert_refused(
        s.create_run_as(&ALICE, "reviewed", json!({"words": 3})),
        "runs.coxswain.dev",
        &["input: ", "brief"],
    );
    assert_refused(
        s.create_run_as(&ALICE, "missing", json!({})),
        "runs.coxswain.dev",
        &["there is no Flow `missing`"],
    );
    let run = s
        .create_run_as(&ALICE, "reviewed", json!({"brief": "hello"}))
        .unwrap_or_else(|e| panic!("{e}"));
    let stored = s.get("run", &run);
    assert_eq!(
        stored["metadata"]["annotations"]["coxswain.dev/created-by"],
        "alice"
    );

    // Nobody forges or moves the creator.
    let forged = json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"generateName": "reviewed-", "annotations": {"coxswain.dev/created-by": "bob"}},
        "spec": {"flowRef": {"name": "reviewed"}, "input": {"brief": "x"}},
    });
    assert_refused(
        s.kubectl_as(&EVE, &["create", "-f", "-"], Some(&forged.to_string())),
        "runs.coxswain.dev",
        &["`bob` is not you (`eve`)"],
    );
    assert_refused(
        s.patch_as(
            &ALICE,
            "run",
            &run,
            json!({"metadata": {"annotations": {"coxswain.dev/created-by": "bob"}}}),
        ),
        "runs.coxswain.dev",
        &["never changes"],
    );
    // The spec is fixed, except cancel.
    assert_refused(
        s.patch_as(
            &ALICE,
            "run",
            &run,
            json!({"spec": {"input": {"brief": "other"}}}),
        ),
        "runs.coxswain.dev",
        &["does not change after it is created, except `cancel`"],
    );
    s.patch_as(&ALICE, "run", &run, json!({"spec": {"cancel": true}}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.get("run", &run)["spec"]["cancel"], true);
}

#[tokio::test]
async fn approvals_are_decided_once_by_an_approver_who_did_not_start_the_run() {
    let s = setup().await;
    s.apply_as(&ALICE, REVIEWED)
        .unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(
            &["--as", "alice", "--as-group", "editors"],
            "reviewed",
            json!({"brief": "hello"}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let approval = s.approval(&run, "review").await;
    let name = approval["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();

    // Only the controller creates Approvals.
    let mut copy = approval.clone();
    copy["metadata"] = json!({"name": "forged"});
    assert_refused(
        s.kubectl_as(&EVE, &["create", "-f", "-"], Some(&copy.to_string())),
        "approvals.coxswain.dev",
        &["Approvals are created by the Coxswain controller"],
    );
    let decide = json!({"spec": {"decision": "approve"}});
    assert_refused(
        s.patch_as(&EVE, "approval", &name, decide.clone()),
        "approvals.coxswain.dev",
        &["`eve` may not decide step `review`: it is for users `bob` and members of `editors`"],
    );
    assert_refused(
        s.patch_as(
            &["--as", "alice", "--as-group", "editors"],
            "approval",
            &name,
            decide.clone(),
        ),
        "approvals.coxswain.dev",
        &["`alice` created run", "allowSelfApproval: true"],
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"decision": "maybe"}}),
        ),
        "approvals.coxswain.dev",
        &["`maybe` is not a decision of step `review`; choose one of approve, changes"],
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"approvers": null}}),
        ),
        "approvals.coxswain.dev",
        &["is the controller's"],
    );
    // A member of editors decides; who and when are stamped, whatever was sent.
    let carol = ["--as", "carol", "--as-group", "editors"];
    s.patch_as(
        &carol,
        "approval",
        &name,
        json!({"spec": {"decision": "approve", "feedback": "Fine.", "decidedBy": {"username": "boss"}}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let decided = s.get("approval", &name);
    assert_eq!(
        decided["spec"]["decidedBy"]["username"], "carol",
        "{decided}"
    );
    assert!(
        decided["spec"]["decidedBy"]["groups"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("editors"))),
        "{decided}"
    );
    assert!(
        decided["spec"]["decidedAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{decided}"
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"decision": "changes"}}),
        ),
        "approvals.coxswain.dev",
        &["was already decided `approve` by `carol`; an answer never changes"],
    );
    let done = s
        .kubectl
        .wait_run(s.ns.name(), &run, &["Succeeded"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.controller.log_text()));
    assert_eq!(done["status"]["phase"], "Succeeded");
}

#[tokio::test]
async fn entries_have_exactly_their_fields_and_self_approval_is_opt_in() {
    let s = setup().await;
    let entry = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: assign}
spec:
  steps:
    - key: assign
      approval:
        mode: entry
        fields: [{name: owner, type: string}, {name: count, type: integer}]
        allowSelfApproval: true
"#;
    s.apply_as(&ALICE, entry).unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(&ALICE, "assign", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let name = s.kubectl.approval_name(s.ns.name(), &run, "assign", 1);
    s.approval(&run, "assign").await;
    assert_refused(
        s.patch_as(
            &ALICE,
            "approval",
            &name,
            json!({"spec": {"response": {"owner": "ana"}}}),
        ),
        "approvals.coxswain.dev",
        &["the entry for step `assign` lacks `count` (a whole number)"],
    );
    assert_refused(
        s.patch_as(
            &ALICE,
            "approval",
            &name,
            json!({"spec": {"response": {"owner": "ana", "count": "2"}}}),
        ),
        "approvals.coxswain.dev",
        &["`count` in the entry for step `assign` must be a whole number; it is text"],
    );
    // allowSelfApproval: the run's creator may answer this one.
    s.patch_as(
        &ALICE,
        "approval",
        &name,
        json!({"spec": {"response": {"owner": "ana", "count": 2}}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.get("approval", &name)["spec"]["decidedBy"]["username"],
        "alice"
    );
    s.kubectl
        .wait_run(s.ns.name(), &run, &["Succeeded"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.controller.log_text()));
}

#[tokio::test]
async fn nobody_gains_a_secret_through_a_flow() {
    let s = setup().await;
    let binds = |url: &str| {
        format!(
            r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: publish}}
spec:
  steps:
    - key: publish
      http:
        method: POST
        url: "{url}"
        headers: [{{name: Authorization, valueFrom: {{secretKeyRef: {{name: cms, key: token}}}}}}]
"#
        )
    };
    let fixed = binds("https://cms.example.com/api/posts/{{input.json.id}}");
    assert_refused(
        s.apply_as(&EVE, &fixed),
        "flows.coxswain.dev",
        &["step publish: http.headers[0].valueFrom: `eve` may not read the Secret `cms`"],
    );
    s.apply_as(&ALICE, &fixed).unwrap_or_else(|e| panic!("{e}"));
    // Not even someone who may read it lets run input choose the host.
    let chosen = binds("https://{{input.json.host}}/api/posts");
    assert_refused(
        s.apply_as(&ALICE, &chosen.replace("publish}", "exfiltrate}")),
        "flows.coxswain.dev",
        &[
            "step publish: http.url: this step sends the Secret `cms` in a header",
            "(character 9)",
        ],
    );
    assert_refused(
        s.kubectl_as(
            &[],
            &["apply", "-f", "-"],
            Some(&chosen.replace("publish}", "exfiltrate}")),
        ),
        "flows.coxswain.dev",
        &["choose where the secret goes"],
    );
}

#[tokio::test]
async fn coxswain_webhook_alone_serves_the_same_checks() {
    let s = setup_with(true, &[]).await;
    s.apply_as(&ALICE, REVIEWED)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        s.create_run_as(&ALICE, "reviewed", json!({"brief": 1})),
        "runs.coxswain.dev",
        &["input.brief: expected string"],
    );
    let run = s
        .create_run_as(&ALICE, "reviewed", json!({"brief": "hello"}))
        .unwrap_or_else(|e| panic!("{e}"));
    let stored = s.get("run", &run);
    assert_eq!(
        stored["metadata"]["annotations"]["coxswain.dev/created-by"],
        "alice"
    );
}

impl Setup {
    /// The caBundle of each validating webhook, base64 as stored.
    fn ca_bundles(&self) -> Vec<String> {
        let config = format!("coxswain-{}", self.ns.name());
        let out = self
            .kubectl
            .run(&[
                "get",
                "validatingwebhookconfiguration",
                &config,
                "-o",
                "jsonpath={.webhooks[*].clientConfig.caBundle}",
            ])
            .unwrap_or_else(|e| panic!("{e}"));
        out.split_whitespace().map(str::to_string).collect()
    }

    /// Waits until every webhook carries `bundle` (base64).
    async fn wait_bundle(&self, bundle: &str) {
        wait_for("the new caBundle registered", BOUND, || async {
            let now = self.ca_bundles();
            Ok((!now.is_empty() && now.iter().all(|b| b == bundle)).then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.controller.log_text()));
    }

    /// Waits until the webhook refuses a bad flow in its own words: the API
    /// server reached it and trusted its certificate, which it checks
    /// against the registered caBundle (a new bundle gets a new client, so
    /// a new handshake).
    async fn wait_refusing(&self) {
        let refused = wait_for("the webhook to refuse a bad flow", BOUND, || async {
            Ok(self
                .kubectl
                .apply(self.ns.name(), NOT_A_FLOW)
                .err()
                .filter(|e| e.contains("denied the request")))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.controller.log_text()));
        assert_refused(
            Err(refused),
            "flows.coxswain.dev",
            &["flow probe is not valid", "step a: when: "],
        );
        let good = flow("fine", "    - {key: a, condition: {when: \"true\"}}\n");
        self.kubectl
            .apply(self.ns.name(), &good)
            .unwrap_or_else(|e| panic!("a good flow is admitted: {e}"));
    }
}

/// Deleting the TLS Secret is how a person rotates the self-managed CA: the
/// running controller makes a new CA and certificate, serves them and
/// registers the new caBundle without a restart.
#[tokio::test]
async fn a_deleted_tls_secret_is_made_anew_served_and_registered_without_a_restart() {
    let s = setup_with(false, &["--webhook-cert-check", "1s"]).await;
    let ns = s.ns.name();
    let secret_ca = || -> Option<String> {
        s.kubectl
            .run(&[
                "get",
                "secret",
                "coxswain-webhook-tls",
                "-n",
                ns,
                "-o",
                "jsonpath={.data.ca\\.crt}",
            ])
            .ok()
            .filter(|ca| !ca.is_empty())
    };
    let before = secret_ca().expect("the controller made the TLS Secret");
    s.wait_bundle(&before).await;

    s.kubectl
        .run(&["delete", "secret", "coxswain-webhook-tls", "-n", ns])
        .unwrap_or_else(|e| panic!("{e}"));
    let made = wait_for("a new TLS Secret", BOUND, || async {
        Ok(secret_ca().filter(|ca| *ca != before))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", s.controller.log_text()));
    s.wait_bundle(&made).await;
    s.wait_refusing().await;
    assert!(
        s.controller
            .log_text()
            .contains("webhook certificate reloaded"),
        "{}",
        s.controller.log_text()
    );
}

/// Writes `cert` into `dir` as the kubelet mounts a Secret (cert-manager's
/// included): the files in a folder of their own, `..data` pointing at it
/// (swapped by a rename, so a reader sees one version or the other) and
/// each key a link through `..data`.
fn mount_secret(dir: &std::path::Path, version: u32, cert: &coxswain_e2e::tls::LoopbackCert) {
    let folder = format!("..v{version}");
    std::fs::create_dir_all(dir.join(&folder)).expect("the version's folder");
    for (name, text) in [
        ("tls.crt", &cert.cert_pem),
        ("tls.key", &cert.key_pem),
        ("ca.crt", &cert.ca_pem),
    ] {
        std::fs::write(dir.join(&folder).join(name), text).expect("a mounted file");
    }
    let swap = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&swap);
    std::os::unix::fs::symlink(&folder, &swap).expect("the new ..data");
    std::fs::rename(&swap, dir.join("..data")).expect("..data swapped");
    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).expect("a key's link");
        }
    }
}

/// cert-manager renews the certificate in the mounted Secret: the running
/// controller serves the new one and registers the new CA from `ca.crt`
/// without a restart.
#[tokio::test]
async fn a_certificate_renewed_in_the_cert_dir_is_served_and_registered_without_a_restart() {
    use base64::Engine;
    let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let dir = coxswain_e2e::workspace_root().join(format!(
        "target/e2e/cert-dirs/{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    let first = coxswain_e2e::tls::loopback_cert("first CA").expect("a certificate");
    mount_secret(&dir, 1, &first);
    let path = dir.to_string_lossy().into_owned();
    let s = setup_with(
        false,
        &["--webhook-cert-dir", &path, "--webhook-cert-check", "1s"],
    )
    .await;
    s.wait_bundle(&encode(&first.ca_pem)).await;

    let second = coxswain_e2e::tls::loopback_cert("second CA").expect("a certificate");
    mount_secret(&dir, 2, &second);
    s.wait_bundle(&encode(&second.ca_pem)).await;
    s.wait_refusing().await;
    let _ = std::fs::remove_dir_all(&dir);
}
