//! What the admission tests (`admission_*.rs`, one file per kind) share.
//! They run against the real API server, with the real kubectl: the
//! controller, started with only KUBECONFIG (`coxswain controller
//! --webhook-url https://127.0.0.1:PORT`), registers its own
//! webhooks, and every refusal they check is kubectl's own output. People
//! are impersonated (`--as`, `--as-group`) and get their rights from Roles
//! in the test's namespace ([`RBAC`]).
#![allow(dead_code, reason = "each admission test binary uses its own parts")]

use std::time::Duration;

use coxswain_e2e::{NOT_A_FLOW, Setup, wait_for};
use serde_json::{Value, json};

pub const BOUND: Duration = Duration::from_secs(90);

/// Rights of the test's people: everyone may work with flows, runs and
/// approvals; only alice may read the Secret `cms`.
pub const RBAC: &str = r#"
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

coxswain_e2e::setup_newtype!(
    /// A [`Setup`] serving admission, with what the admission tests do
    /// through it.
    pub Admission
);

/// A controller serving admission for a namespace with [`RBAC`]'s people.
pub async fn setup() -> Admission {
    setup_with(false, &[]).await
}

/// With `alone`, `coxswain webhook` serves admission and nothing reconciles;
/// else the controller does, with `extra` flags.
pub async fn setup_with(alone: bool, extra: &[&str]) -> Admission {
    Admission(Setup::serving_admission(RBAC, alone, extra).await)
}

impl Admission {
    /// `kubectl apply` of `yaml` as `user`.
    pub fn apply_as(&self, user: &[&str], yaml: &str) -> Result<String, String> {
        self.kubectl_as(user, &["apply", "-f", "-"], Some(yaml))
    }

    /// Creates a Run of `flow` as alice, which admission must accept, and
    /// checks that it stamped her name on it (`coxswain.dev/created-by`).
    pub fn run_created_by_alice(&self, flow: &str, input: Value) -> String {
        let run = self
            .create_run_as(&ALICE, flow, input)
            .unwrap_or_else(|e| panic!("{e}"));
        let stored = self.get("run", &run);
        assert_eq!(
            stored["metadata"]["annotations"]["coxswain.dev/created-by"],
            "alice"
        );
        run
    }

    /// Creates a Run of `flow` as `user`; returns its name.
    pub fn create_run_as(&self, user: &[&str], flow: &str, input: Value) -> Result<String, String> {
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

    /// A merge patch of `kind/name` as `user`.
    pub fn patch_as(
        &self,
        user: &[&str],
        kind: &str,
        name: &str,
        patch: Value,
    ) -> Result<String, String> {
        let mut args = user.to_vec();
        args.extend_from_slice(&[kind, name]);
        self.kubectl
            .merge_patch(self.ns(), &args, &patch.to_string())
    }

    /// The Approval of the first attempt of `step`, once the controller made it.
    pub async fn approval(&self, run: &str, step: &str) -> Value {
        let name = self.kubectl.approval_name(self.ns.name(), run, step, 1);
        let found = wait_for(&format!("approval {name}"), BOUND, || async {
            Ok(self
                .kubectl
                .run(&["get", "approval", &name, "-n", self.ns.name(), "-o", "json"])
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok()))
        })
        .await;
        found.unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.logs()))
    }

    /// The name of the Approval the controller made for `step` of `run`,
    /// once it is there ([`Admission::approval`]).
    pub async fn approval_name(&self, run: &str, step: &str) -> String {
        let approval = self.approval(run, step).await;
        approval["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string()
    }

    /// The Run once its phase is one of `phases`; panics with the Run and
    /// the controller's log if it is not within [`BOUND`].
    pub async fn wait_phase(&self, run: &str, phases: &[&str]) -> Value {
        self.0.wait_phase(run, phases, BOUND).await
    }

    /// The caBundle of each validating webhook, base64 as stored.
    pub fn ca_bundles(&self) -> Vec<String> {
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
    pub async fn wait_bundle(&self, bundle: &str) {
        wait_for("the new caBundle registered", BOUND, || async {
            let now = self.ca_bundles();
            Ok((!now.is_empty() && now.iter().all(|b| b == bundle)).then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.logs()));
    }

    /// Waits until the webhook refuses a bad flow in its own words: the API
    /// server reached it and trusted its certificate, which it checks
    /// against the registered caBundle (a new bundle gets a new client, so
    /// a new handshake).
    pub async fn wait_refusing(&self) {
        let refused = wait_for("the webhook to refuse a bad flow", BOUND, || async {
            Ok(self
                .kubectl
                .apply(self.ns.name(), NOT_A_FLOW)
                .err()
                .filter(|e| e.contains("denied the request")))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.logs()));
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

/// Asserts kubectl refused with the webhook's message containing every fragment.
pub fn assert_refused(
    outcome: Result<String, String>,
    webhook: &str,
    fragments: &[&str],
) -> String {
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

pub const ALICE: [&str; 2] = ["--as", "alice"];
pub const BOB: [&str; 2] = ["--as", "bob"];
pub const EVE: [&str; 2] = ["--as", "eve"];

/// A Flow named `name` with only `steps` (YAML list items, indented as
/// under `steps:`).
pub fn flow(name: &str, steps: &str) -> String {
    coxswain_e2e::flow(name, &format!("  steps:\n{steps}"))
}

pub const REVIEWED: &str = r#"
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
