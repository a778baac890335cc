//! The Helm chart (`charts/coxswain`) on the real API server: its RBAC is
//! enough and no more.
//!
//! Each test renders the chart with the helm built from Go modules
//! (`e2e/helm/build`), applies exactly the RBAC it renders (ServiceAccount,
//! Roles, ClusterRoles and bindings), and then either starts `coxswain
//! controller` under the chart's ServiceAccount (a kubeconfig whose user
//! impersonates it, with the environment the chart's Deployment sets) and runs
//! a flow with a script whose output comes back through the pod's log, an
//! http call with a bound Secret and an approval to the end, through the
//! chart's admission webhook configurations; or asks the API server what that account may do (`kubectl auth
//! can-i --as`). A controller with a cluster-wide ClusterRole would also
//! reconcile the other test's namespace, so the tests that start a controller
//! take turns.

mod chart_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::routing::get;
use chart_support::{Installed, Render};
use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);

/// Tests that start a controller run one at a time (see the module doc).
static CONTROLLERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The token the flow's http step sends, from a Secret the chart lets the
/// controller read.
const TOKEN: &str = "s3cret-for-the-publisher";

/// A local server standing in for a release API: `GET /publish` answers
/// whether the request carried `Authorization: Bearer TOKEN`, and remembers
/// every Authorization header it saw.
async fn serve_publisher() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_route = seen.clone();
    let app = axum::Router::new().route(
        "/publish",
        get(move |headers: HeaderMap| {
            let seen = seen_by_route.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let ok = auth == format!("Bearer {TOKEN}");
                seen.lock().expect("lock").push(auth);
                axum::Json(json!({"published": ok}))
            }
        }),
    );
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (addr, seen)
}

fn release_flow(addr: std::net::SocketAddr) -> String {
    format!(
        r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: release}}
spec:
  steps:
    - key: build
      script:
        source: |
          notes=$(head -c 10000 /dev/zero | tr '\0' x)
          printf '{{"version": "1.2.3", "notes": "%s"}}' "$notes"
    - key: publish
      http:
        url: "http://{addr}/publish"
        headers:
          - name: Authorization
            valueFrom: {{secretKeyRef: {{name: publisher, key: authorization}}}}
    - key: review
      approval: {{decisions: [approve], show: [build, publish]}}
"#
    )
}

/// Lets `carol` answer Approvals in a namespace (and nothing else).
const APPROVER_RBAC: &str = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata: {name: approver}
    rules:
      - apiGroups: [coxswain.dev]
        resources: [approvals]
        verbs: [get, patch]
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata: {name: approver}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: approver}
    subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}]
"#;

/// The chart's controller environment for a replica outside the cluster:
/// `COXSWAIN_WEBHOOK_URL` (set by the caller) replaces the Service the
/// chart names, which the API server cannot reach here; everything else —
/// the Secret, the configurations' name, the controller's user — is the
/// chart's.
fn outside_the_cluster(env: Vec<(String, String)>) -> Vec<(String, String)> {
    env.into_iter()
        .filter(|(name, _)| !name.starts_with("COXSWAIN_WEBHOOK_SERVICE"))
        .collect()
}

/// The controller filled in the chart's objects without taking them over:
/// the TLS Secret holds a certificate and keeps its type and Helm's labels,
/// and each configuration has the chart's webhooks, now with a caBundle.
fn the_chart_still_owns_what_admission_filled_in(kubectl: &Kubectl, render: &Render) {
    let ns = render.namespace();
    let name = format!("{}-webhook-tls", render.fullname());
    let secret = kubectl.json(&["get", "secret", &name, "-n", ns, "-o", "json"]);
    assert_eq!(secret["type"], "Opaque", "the chart's type is kept");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm",
        "{}",
        secret["metadata"]
    );
    assert!(secret["data"]["tls.crt"].is_string(), "a certificate");
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let live = kubectl.json(&["get", kind, &render.cluster_name(), "-o", "json"]);
        let names = |config: &Value| -> Vec<Value> {
            config["webhooks"]
                .as_array()
                .map(|hooks| hooks.iter().map(|h| h["name"].clone()).collect())
                .unwrap_or_default()
        };
        let chart_kind = if kind.starts_with("validating") {
            "ValidatingWebhookConfiguration"
        } else {
            "MutatingWebhookConfiguration"
        };
        assert_eq!(names(&live), names(render.one(chart_kind)), "{kind}");
        for hook in live["webhooks"].as_array().into_iter().flatten() {
            assert!(hook["clientConfig"]["caBundle"].is_string(), "{hook}");
        }
        assert_eq!(
            live["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm",
            "{kind}"
        );
    }
}

/// Waits until the API server calls the chart's admission: a Flow with a
/// capitalised `True` is refused, naming the step and the character.
async fn admission_is_on(kubectl: &Kubectl, ns: &str) {
    const BAD: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: shouting}
spec:
  steps:
    - key: a
      when: "True"
      script: {source: "true"}
"#;
    let dry_run = ["create", "--dry-run=server", "-n", ns, "-f", "-"];
    coxswain_e2e::wait_for("admission refuses a bad flow", BOUND, || async {
        Ok(kubectl.run_with_stdin(&dry_run, Some(BAD)).err())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let refusal = kubectl.apply(ns, BAD).expect_err("a bad flow is refused");
    assert!(
        refusal.contains(r#"admission webhook "flows.coxswain.dev" denied"#)
            && refusal.contains("step a")
            && refusal.contains("character"),
        "{refusal}"
    );
}

/// Runs the release flow to its end with a controller started as the chart
/// would start it, under the chart's ServiceAccount only.
async fn a_flow_runs_to_the_end_under_the_charts_rbac(scope: &str, sharded: bool) {
    let _turn = CONTROLLERS.lock().await;
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let ns = ns.name();
    let render = Render::new(
        ns,
        &[
            &format!("scope={scope}"),
            &format!("controller.sharded={sharded}"),
            "controller.allowNet={127.0.0.1/32}",
            "flowSecrets[0].names={publisher}",
        ],
    );
    let mut installed = Installed::rbac(&render).await;
    let port = coxswain_e2e::free_port().expect("a free port");
    let base = format!("https://127.0.0.1:{port}");
    installed.admission(&render, &base);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "publisher"},
        "stringData": {"authorization": format!("Bearer {TOKEN}")},
    });
    kubectl
        .apply(ns, &secret.to_string())
        .unwrap_or_else(|e| panic!("{e}"));

    let (addr, seen) = serve_publisher().await;
    let kubeconfig = installed.impersonating_kubeconfig();
    // Debug logs: a standby's refused watch of the Lease is logged at debug.
    // Two replicas, as the chart runs them: one leads, one watches the
    // Lease, both serve admission (the API server calls the first).
    let replica = |listen: u16| {
        let env = outside_the_cluster(render.controller_env(
            ns,
            &[
                ("COXSWAIN_METRICS_ADDR", "127.0.0.1:0"),
                ("COXSWAIN_LOG_LEVEL", "coxswain_k8s=debug,info"),
                ("COXSWAIN_WEBHOOK_URL", &base),
                ("COXSWAIN_WEBHOOK_LISTEN", &format!("127.0.0.1:{listen}")),
            ],
        ));
        ControllerProcess::start_with(&kubeconfig, &[], &env).expect("controller starts")
    };
    let controllers = [
        replica(port),
        replica(coxswain_e2e::free_port().expect("a free port")),
    ];
    let logs = || {
        controllers
            .iter()
            .map(|c| c.log_text())
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    admission_is_on(&kubectl, ns).await;
    the_chart_still_owns_what_admission_filled_in(&kubectl, &render);
    kubectl
        .apply(ns, &release_flow(addr))
        .unwrap_or_else(|e| panic!("{e}"));
    let run = kubectl
        .create_run(ns, "release", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let created = kubectl.json(&["get", "run", &run, "-n", ns, "-o", "json"]);
    assert_eq!(
        created["metadata"]["annotations"]["coxswain.dev/created-by"], "admin",
        "the mutating webhook stamped the creator: {created}"
    );
    let explain = |e: coxswain_e2e::Error| -> ! {
        let run = kubectl.run(&["get", "run", &run, "-n", ns, "-o", "yaml"]);
        panic!("{e}\nrun: {run:?}\ncontroller logs:\n{}", logs())
    };
    let waiting = kubectl
        .wait_run(ns, &run, &["Waiting", "Failed"], BOUND)
        .await
        .unwrap_or_else(|e| explain(e));
    assert_eq!(waiting["status"]["phase"], "Waiting", "{waiting}");
    let approval = kubectl.approval_name(ns, &run, "review", 1);
    let asked = kubectl.json(&["get", "approval", &approval, "-n", ns, "-o", "json"]);
    assert_eq!(
        asked["spec"]["show"]["publish"]["body"]["published"], true,
        "{asked}"
    );
    let approve = |who: &[&str]| {
        let mut args = vec![
            "patch",
            "approval",
            &approval,
            "-n",
            ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"decision":"approve"}}"#,
        ];
        args.extend(who);
        kubectl.run(&args)
    };
    let own = approve(&[]).expect_err("the run's creator may not approve it");
    assert!(own.contains("approvals.coxswain.dev"), "{own}");
    kubectl
        .apply(ns, APPROVER_RBAC)
        .unwrap_or_else(|e| panic!("{e}"));
    approve(&["--as", "carol"]).unwrap_or_else(|e| panic!("{e}"));
    let decided = kubectl.json(&["get", "approval", &approval, "-n", ns, "-o", "json"]);
    assert_eq!(
        decided["spec"]["decidedBy"]["username"], "carol",
        "{decided}"
    );
    let done = kubectl
        .wait_run(ns, &run, &["Succeeded", "Failed", "Cancelled"], BOUND)
        .await
        .unwrap_or_else(|e| explain(e));
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    // The script's 10 kB output came back through the pod's log (more than
    // a termination message holds) and moved into a ConfigMap the Run owns.
    assert_eq!(
        done["status"]["steps"]["build"]["status"], "completed",
        "{}",
        done["status"]
    );
    let values = done["status"]["values"].to_string();
    assert!(
        values.contains("configMap") || values.contains("ConfigMap"),
        "{values}"
    );
    assert_eq!(
        seen.lock().expect("lock").as_slice(),
        [format!("Bearer {TOKEN}")],
        "the secret reached the server once"
    );
    // The chart's Lease, held by this controller under the chart's account.
    let lease = kubectl.json(&["get", "lease", &render.fullname(), "-n", ns, "-o", "json"]);
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| h.starts_with("coxswain-chart-test-")),
        "{lease}"
    );
    if sharded {
        // Both replicas hold buckets, under the chart's account (the second
        // takes its share within a few Lease renewals of starting, which a
        // quick run may not last).
        let buckets = format!("{}-buckets", render.fullname());
        coxswain_e2e::wait_for("both replicas to hold buckets", BOUND, || async {
            let map = kubectl.json(&["get", "lease", &buckets, "-n", ns, "-o", "json"]);
            let holders: Vec<String> = map["metadata"]["annotations"]["coxswain.dev/buckets"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or_default();
            let each = controllers.iter().all(|c| {
                let mine = format!("-{}", c.pid());
                holders.iter().any(|h| h.ends_with(&mine))
            });
            Ok(each.then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    }
    let log = logs();
    assert!(
        !log.contains("forbidden"),
        "a replica was refused something:\n{log}"
    );
}

#[tokio::test]
async fn sharded_replicas_run_a_flow_to_the_end_under_the_charts_rbac() {
    a_flow_runs_to_the_end_under_the_charts_rbac("namespace", true).await;
}

#[tokio::test]
async fn namespace_scoped_rbac_is_enough_to_run_a_flow_to_the_end() {
    a_flow_runs_to_the_end_under_the_charts_rbac("namespace", false).await;
}

#[tokio::test]
async fn cluster_scoped_rbac_is_enough_to_run_a_flow_to_the_end() {
    a_flow_runs_to_the_end_under_the_charts_rbac("cluster", false).await;
}

/// What the chart's account may do, asked of the API server for each
/// `(verb, resource, namespace)`.
fn assert_can(installed: &Installed, cases: &[(&str, &str, Option<&str>, bool)]) {
    let mut wrong = Vec::new();
    for (verb, resource, namespace, expected) in cases {
        let allowed = installed.can_i(verb, resource, *namespace);
        if allowed != *expected {
            wrong.push(format!(
                "{verb} {resource} in {}: {} (expected {})",
                namespace.unwrap_or("all namespaces"),
                if allowed { "allowed" } else { "denied" },
                if *expected { "allowed" } else { "denied" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn namespace_scoped_rbac_grants_nothing_outside_its_namespace_or_beyond_the_named_secrets() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let home = TestNamespace::new().await.expect("namespace");
    let other = TestNamespace::new().await.expect("namespace");
    let (ns, elsewhere) = (Some(home.name()), Some(other.name()));
    let render = Render::new(
        home.name(),
        &["scope=namespace", "flowSecrets[0].names={publisher}"],
    );
    let installed = Installed::rbac(&render).await;
    let lease = format!("leases.coordination.k8s.io/{}", render.fullname());
    assert_can(
        &installed,
        &[
            // What the controller does, in its namespace.
            ("watch", "runs.coxswain.dev", ns, true),
            ("update", "runs.coxswain.dev:status", ns, true),
            ("create", "jobs.batch", ns, true),
            // A finished Job's time to stay, once its result is recorded.
            ("patch", "jobs.batch", ns, true),
            ("get", "pods:log", ns, true),
            // A step's pod that ended is read at once.
            ("watch", "pods", ns, true),
            ("create", "approvals.coxswain.dev", ns, true),
            ("get", "secrets/publisher", ns, true),
            ("patch", &lease, ns, true),
            // Secrets: only the one named, and only `get`.
            ("get", "secrets/someone-elses", ns, false),
            ("list", "secrets", ns, false),
            ("watch", "secrets", ns, false),
            ("create", "secrets", ns, false),
            // Nothing in another namespace.
            ("list", "runs.coxswain.dev", elsewhere, false),
            ("create", "jobs.batch", elsewhere, false),
            ("get", "configmaps", elsewhere, false),
            ("get", "secrets/publisher", elsewhere, false),
            ("list", "runs.coxswain.dev", None, false),
            // Not even in its namespace: a Flow's spec (GitOps: only its
            // author writes it), a Run's or an Approval's spec, deleting
            // Runs, pods of its own, other Leases.
            ("update", "flows.coxswain.dev", ns, false),
            ("patch", "flows.coxswain.dev", ns, false),
            ("update", "runs.coxswain.dev", ns, false),
            ("delete", "runs.coxswain.dev", ns, false),
            ("patch", "approvals.coxswain.dev", ns, false),
            ("create", "pods", ns, false),
            (
                "patch",
                "leases.coordination.k8s.io/someone-elses",
                ns,
                false,
            ),
            ("create", "roles.rbac.authorization.k8s.io", ns, false),
        ],
    );
}

#[tokio::test]
async fn cluster_scoped_rbac_reads_no_secret_and_writes_no_flow() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let home = TestNamespace::new().await.expect("namespace");
    let other = TestNamespace::new().await.expect("namespace");
    let (ns, elsewhere) = (Some(home.name()), Some(other.name()));
    let render = Render::new(home.name(), &["webhook.enabled=true"]);
    let installed = Installed::rbac(&render).await;
    let admission = format!(
        "validatingwebhookconfigurations.admissionregistration.k8s.io/{}",
        render.cluster_name()
    );
    assert_can(
        &installed,
        &[
            ("list", "runs.coxswain.dev", None, true),
            ("create", "jobs.batch", elsewhere, true),
            (
                "create",
                "subjectaccessreviews.authorization.k8s.io",
                None,
                true,
            ),
            ("patch", &admission, None, true),
            ("get", "secrets/coxswain-webhook-tls", ns, true),
            ("update", "secrets/coxswain-webhook-tls", ns, true),
            ("create", "secrets", ns, false),
            ("get", "secrets", elsewhere, false),
            ("get", "secrets/publisher", ns, false),
            ("list", "secrets", None, false),
            ("update", "flows.coxswain.dev", elsewhere, false),
            ("delete", "runs.coxswain.dev", elsewhere, false),
            (
                "patch",
                "validatingwebhookconfigurations.admissionregistration.k8s.io/someone-elses",
                None,
                false,
            ),
            (
                "create",
                "validatingwebhookconfigurations.admissionregistration.k8s.io",
                None,
                false,
            ),
            (
                "create",
                "clusterroles.rbac.authorization.k8s.io",
                None,
                false,
            ),
        ],
    );
}

#[test]
fn the_charts_crds_are_the_generated_ones() {
    let root = coxswain_e2e::workspace_root();
    let names = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    let (crds, chart) = (root.join("crds"), root.join("charts/coxswain/crds"));
    assert_eq!(names(&crds), names(&chart), "the same files");
    for name in names(&crds) {
        let read = |dir: &std::path::Path| std::fs::read(dir.join(&name)).expect("readable");
        assert!(
            read(&crds) == read(&chart),
            "charts/coxswain/crds/{name} differs from crds/{name}: run `cp crds/*.yaml charts/coxswain/crds/`"
        );
    }
}

#[test]
fn every_variable_the_chart_sets_is_one_the_controller_reads() {
    let render = Render::new(
        "coxswain-system",
        &[
            "scope=namespace",
            "controller.allowNet={10.0.0.0/8}",
            "controller.offloadThreshold=4096",
            "controller.statusBudget=100000",
            "controller.jobs.maxOutput=1024",
            "controller.jobs.ttlAfterFinished=0",
            "agent.baseUrl=https://models.example/v1",
            "agent.model=small",
            "agent.provider=vllm",
            "agent.mode=tools",
            "agent.timeout=30",
            "agent.maxTokens=512",
            "agent.apiKeySecret.name=model-key",
            "chat.slackEvents.enabled=true",
            "chat.commands=false",
            "webhook.clientCA.configMapName=apiserver-client-ca",
        ],
    );
    let help = std::process::Command::new(coxswain_e2e::coxswain_bin().expect("built"))
        .args(["controller", "--help"])
        .output()
        .expect("coxswain controller --help");
    let help = String::from_utf8_lossy(&help.stdout);
    // Read by AgentConfig::from_lookup (controller/steps/src/agent/mod.rs),
    // not by flags.
    let agent = [
        "COXSWAIN_AGENT_BASE_URL",
        "COXSWAIN_AGENT_API_KEY",
        "COXSWAIN_AGENT_MODEL",
        "COXSWAIN_AGENT_PROVIDER",
        "COXSWAIN_AGENT_MODE",
        "COXSWAIN_AGENT_TIMEOUT",
        "COXSWAIN_AGENT_MAX_TOKENS",
    ];
    let env = render.deployment_env();
    let names: Vec<&str> = env.iter().filter_map(|e| e["name"].as_str()).collect();
    for name in &names {
        let known = help.contains(&format!("[env: {name}="))
            || agent.contains(name)
            || ["POD_NAME", "POD_NAMESPACE"].contains(name);
        assert!(
            known,
            "the chart sets {name}, which the controller does not read"
        );
    }
    for expected in [
        "COXSWAIN_NAMESPACE",
        "COXSWAIN_JOB_TTL_AFTER_FINISHED",
        "COXSWAIN_WEBHOOK_SERVICE",
        "COXSWAIN_WEBHOOK_SECRET",
        "COXSWAIN_SLACK_EVENTS_LISTEN",
        "COXSWAIN_CHAT_COMMANDS",
        "COXSWAIN_WEBHOOK_CLIENT_CA",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for name in agent {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let key = env
        .iter()
        .find(|e| e["name"] == "COXSWAIN_AGENT_API_KEY")
        .expect("the API key");
    assert_eq!(
        key["valueFrom"]["secretKeyRef"],
        json!({"name": "model-key", "key": "api-key"}),
        "the API key comes from the Secret, never a value"
    );
}

/// Slack's Events API endpoint is off unless asked for; on, every replica
/// listens on the port (the variable the controller reads), the container
/// and a Service name it `slack-events`, and the NetworkPolicy lets it in.
#[test]
fn the_slack_events_endpoint_is_exposed_only_when_enabled() {
    let off = Render::new("coxswain-system", &["networkPolicy.enabled=true"]);
    assert!(
        !off.text().contains("slack-events") && !off.text().contains("SLACK"),
        "off by default"
    );
    let on = Render::new(
        "coxswain-system",
        &[
            "chat.slackEvents.enabled=true",
            "chat.slackEvents.port=9090",
            "networkPolicy.enabled=true",
        ],
    );
    let listen = on.deployment_var("COXSWAIN_SLACK_EVENTS_LISTEN");
    assert_eq!(listen["value"], "0.0.0.0:9090");
    let ports = &on.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(
        ports
            .as_array()
            .expect("ports")
            .contains(&json!({"name": "slack-events", "containerPort": 9090, "protocol": "TCP"})),
        "{ports}"
    );
    let name = format!("{}-slack-events", on.fullname());
    let service = on
        .all("Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == name.as_str())
        .unwrap_or_else(|| panic!("the Service {name}"));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "slack-events", "port": 9090, "targetPort": "slack-events", "protocol": "TCP"}])
    );
    let ingress = &on.one("NetworkPolicy")["spec"]["ingress"];
    assert!(
        ingress
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["ports"] == json!([{"port": "slack-events", "protocol": "TCP"}])),
        "{ingress}"
    );
    let bad = Render::try_new("coxswain-system", &["chat.slackEvents.port=0"]);
    assert!(
        bad.is_err_and(|e| e.contains("slackEvents")),
        "port 0 refused"
    );
}

/// With `webhook.clientCA` the API server's client CA is mounted from its
/// ConfigMap and named to the controller, and `networkPolicy.webhookFrom`
/// narrows who reaches the webhook port; without them nothing is mounted
/// and the port stays open to every source.
#[test]
fn the_webhook_can_require_the_api_servers_certificate_and_address() {
    let off = Render::new("coxswain-system", &["networkPolicy.enabled=true"]);
    assert!(
        off.deployment_var("COXSWAIN_WEBHOOK_CLIENT_CA").is_null(),
        "no client CA unless asked"
    );
    let webhook_rule = |render: &Render| {
        render.one("NetworkPolicy")["spec"]["ingress"]
            .as_array()
            .expect("rules")
            .iter()
            .find(|r| r["ports"] == json!([{"port": "webhook", "protocol": "TCP"}]))
            .cloned()
            .expect("a rule for the webhook port")
    };
    assert_eq!(webhook_rule(&off).get("from"), None);
    let on = Render::new(
        "coxswain-system",
        &[
            "webhook.clientCA.configMapName=apiserver-client-ca",
            "networkPolicy.enabled=true",
            "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/28",
        ],
    );
    let ca = on.deployment_var("COXSWAIN_WEBHOOK_CLIENT_CA");
    assert_eq!(ca["value"], "/etc/coxswain/webhook-client-ca/ca.crt");
    let pod = &on.one("Deployment")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "webhook-client-ca", "configMap": {"name": "apiserver-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}])
    );
    assert_eq!(
        pod["containers"][0]["volumeMounts"],
        json!([{"name": "webhook-client-ca", "mountPath": "/etc/coxswain/webhook-client-ca", "readOnly": true}])
    );
    assert_eq!(
        webhook_rule(&on)["from"],
        json!([{"ipBlock": {"cidr": "10.0.0.0/28"}}])
    );
}

/// The chart's webhook configurations are the ones the admission server
/// writes into them (`coxswain_k8s::admission::register`), field for
/// field but the caBundle the server adds: a webhook the server does not
/// know would be called without a CA and refuse every write, and one the
/// chart lacks would be added back at every start and removed at every
/// upgrade.
#[test]
fn the_charts_webhook_configurations_are_the_servers() {
    use coxswain_k8s::admission::register::{Endpoint, mutating, validating};
    for (namespace, sets) in [
        (None, &["webhook.enabled=true"][..]),
        (Some("team-a"), &["scope=namespace"][..]),
    ] {
        let render = Render::new(namespace.unwrap_or("coxswain-system"), sets);
        let config = render.cluster_name();
        let endpoint = Endpoint::Service {
            namespace: namespace.unwrap_or("coxswain-system").to_string(),
            name: format!("{}-webhook", render.fullname()),
            port: 443,
        };
        // The user the chart tells the controller it is: the status webhook
        // leaves that user's writes alone.
        let user = render.deployment_var("COXSWAIN_WEBHOOK_CONTROLLER_USER");
        let controller_user = user["value"].as_str().expect("the controller's user");
        for (kind, mut servers) in [
            (
                "ValidatingWebhookConfiguration",
                validating(&config, &endpoint, "", namespace, controller_user),
            ),
            (
                "MutatingWebhookConfiguration",
                mutating(&config, &endpoint, "", namespace),
            ),
        ] {
            for hook in servers["webhooks"].as_array_mut().expect("webhooks") {
                hook["clientConfig"]
                    .as_object_mut()
                    .expect("clientConfig")
                    .remove("caBundle");
            }
            let charts = render.one(kind);
            assert_eq!(charts["metadata"]["name"], servers["metadata"]["name"]);
            assert_eq!(
                charts["webhooks"], servers["webhooks"],
                "{kind} ({namespace:?}): the chart's differs from the server's"
            );
        }
    }
}

#[test]
fn values_the_schema_refuses_name_the_field() {
    for (set, field) in [
        ("scope=everywhere", "/scope"),
        ("controller.allowNet={not-a-cidr}", "/controller/allowNet/0"),
        ("controller.jobs.runAsUser=0", "/controller/jobs/runAsUser"),
        ("agent.provider=gpt", "/agent/provider"),
        ("replicas=2", "replicas"),
    ] {
        let err = Render::try_new("coxswain-system", &[set]).expect_err(set);
        assert!(err.contains(field), "{set}: {err}");
    }
}

#[test]
fn the_default_install_is_two_hardened_replicas_with_probes_and_services() {
    let render = Render::new("coxswain-system", &["webhook.enabled=true"]);
    let deployment = render.one("Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    let value = |name: &str| render.deployment_var(name);
    assert_eq!(value("COXSWAIN_IMAGE")["value"], container["image"]);
    assert_eq!(
        value("POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(
        value("POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert_eq!(value("COXSWAIN_LEADER_ELECTION")["value"], "true");
    assert_eq!(value("COXSWAIN_NAMESPACE"), Value::Null, "cluster scope");
    let ports: Vec<(Value, Value)> = render
        .all("Service")
        .iter()
        .map(|s| {
            (
                s["spec"]["ports"][0]["name"].clone(),
                s["spec"]["ports"][0]["targetPort"].clone(),
            )
        })
        .collect();
    assert!(
        ports.contains(&(json!("metrics"), json!("metrics"))),
        "{ports:?}"
    );
    assert!(
        ports.contains(&(json!("webhook"), json!("webhook"))),
        "{ports:?}"
    );
    assert!(render.all("ServiceMonitor").is_empty());
    assert!(render.all("NetworkPolicy").is_empty());
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let hook = &render.one(kind)["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail", "{kind}");
        assert_eq!(
            hook["rules"][0]["apiGroups"],
            json!(["coxswain.dev"]),
            "{kind}"
        );
    }
}

/// The rendered chart means the same to kubectl (YAML 1.1) as to a YAML 1.2
/// reader, as everything Coxswain ships must (a bare `on` or `no` would be a
/// boolean to one and text to the other): kubectl's client-side dry run
/// prints the objects as it read them, before any server default.
#[tokio::test]
async fn kubectl_reads_the_rendered_chart_as_yaml_1_2_does() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let dir = coxswain_e2e::workspace_root().join("target/e2e/chart-rendered");
    std::fs::create_dir_all(&dir).expect("directory");
    for (shape, sets) in [
        ("default", &[][..]),
        (
            "namespaced",
            &[
                "scope=namespace",
                "flowSecrets[0].names={cms,slack}",
                "controller.allowNet={10.0.0.0/8}",
                "agent.baseUrl=https://models.example/v1",
                "agent.apiKeySecret.name=model-key",
                "networkPolicy.enabled=true",
            ][..],
        ),
    ] {
        let render = Render::new("coxswain-system", sets);
        let file = dir.join(format!("{shape}-{}.yaml", std::process::id()));
        std::fs::write(&file, render.text()).expect("written");
        let path = file.to_string_lossy();
        let out = kubectl
            .run(&["create", "--dry-run=client", "-o", "json", "-f", &path])
            .unwrap_or_else(|e| panic!("{e}"));
        // One JSON object per rendered object, one after the other.
        let items: Vec<Value> = serde_json::Deserializer::from_str(&out)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("kubectl's output is not JSON: {e}"));
        assert_eq!(
            items.len(),
            render.docs().len(),
            "{shape}: every object read"
        );
        for (kubectls, ours) in items.iter().zip(render.docs()) {
            assert_eq!(
                kubectls, ours,
                "{shape}: kubectl reads {} {} differently",
                ours["kind"], ours["metadata"]["name"]
            );
        }
        let _ = std::fs::remove_file(&file);
    }
}

/// The run viewer is off by default: nothing of it is rendered.
#[test]
fn the_run_viewer_is_not_installed_by_default() {
    let render = Render::new("coxswain-system", &[]);
    let of_the_viewer: Vec<String> = render
        .docs()
        .iter()
        .filter(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"] == "ui"
                || d["metadata"]["name"] == "coxswain-ui"
        })
        .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
        .collect();
    assert!(of_the_viewer.is_empty(), "{of_the_viewer:?}");
    assert_eq!(render.all("Deployment").len(), 1, "only the controller");
}

/// With `ui.enabled` the viewer runs `coxswain ui --auth token` on its
/// port as its own ServiceAccount, hardened as the controller is, probed on
/// /healthz, behind a Service that selects its pods and none of the
/// controller's (nor the controller's Services its pods).
#[test]
fn the_run_viewer_serves_tokens_on_its_port_as_an_account_of_its_own() {
    let render = Render::new(
        "team-a",
        &[
            "ui.enabled=true",
            "ui.port=9494",
            "ui.service.type=LoadBalancer",
        ],
    );
    let deployment = render
        .named("Deployment", "coxswain-ui")
        .expect("its Deployment");
    assert_eq!(deployment["spec"]["replicas"], 1);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "coxswain-ui");
    assert_eq!(
        pod["automountServiceAccountToken"], true,
        "the in-cluster CA"
    );
    let container = &pod["containers"][0];
    assert_eq!(container["command"], json!(["/usr/local/bin/coxswain"]));
    assert_eq!(
        container["args"],
        json!(["ui", "--listen", "0.0.0.0:9494", "--auth", "token"])
    );
    assert_eq!(
        container["ports"],
        json!([{"name": "http", "containerPort": 9494, "protocol": "TCP"}])
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(
            container[probe]["httpGet"],
            json!({"path": "/healthz", "port": "http"}),
            "{probe}"
        );
    }
    let controller = render.controller_deployment();
    let controller_pod = &controller["spec"]["template"]["spec"];
    assert_eq!(container["image"], controller_pod["containers"][0]["image"]);
    assert_eq!(pod["securityContext"], controller_pod["securityContext"]);
    assert_eq!(
        container["securityContext"],
        controller_pod["containers"][0]["securityContext"]
    );

    let account = render
        .named("ServiceAccount", "coxswain-ui")
        .expect("its ServiceAccount");
    assert_eq!(account["metadata"]["namespace"], "team-a");
    let service = render.named("Service", "coxswain-ui").expect("its Service");
    assert_eq!(service["spec"]["type"], "LoadBalancer");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "http", "port": 9494, "targetPort": "http", "protocol": "TCP"}])
    );
    let selects = |selector: &Value, labels: &Value| {
        selector
            .as_object()
            .expect("a selector")
            .iter()
            .all(|(k, v)| &labels[k] == v)
    };
    let viewer_pods = &deployment["spec"]["template"]["metadata"]["labels"];
    let controller_pods = &controller["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&service["spec"]["selector"], viewer_pods));
    assert!(!selects(&service["spec"]["selector"], controller_pods));
    for other in render.all("Service") {
        if other["metadata"]["name"] != "coxswain-ui" {
            assert!(
                !selects(&other["spec"]["selector"], viewer_pods),
                "{} selects the viewer",
                other["metadata"]["name"]
            );
        }
    }

    // No binding names the viewer's account.
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        for binding in render.all(kind) {
            assert!(
                !binding["subjects"].to_string().contains("coxswain-ui"),
                "{kind} {} binds the viewer",
                binding["metadata"]["name"]
            );
        }
    }

    let own_image = Render::new(
        "team-a",
        &["ui.enabled=true", "ui.image=registry.example/viewer:1"],
    );
    let deployment = own_image
        .named("Deployment", "coxswain-ui")
        .expect("its Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/viewer:1"
    );
    for (set, field) in [
        ("ui.port=0", "/ui/port"),
        ("ui.service.type=External", "/ui/service/type"),
        ("ui.replica=2", "ui"),
    ] {
        let err = Render::try_new("team-a", &["ui.enabled=true", set]).expect_err(set);
        assert!(err.contains(field), "{set}: {err}");
    }
}

/// The run viewer acts only with the tokens people sign in with: the API
/// server lets its own account read or change no Flow, Run, Approval or
/// Secret, in its namespace or any other, in either scope, while the
/// controller's account, installed alongside, may (so the answers come from
/// the chart's RBAC as applied, not from a check that always says no).
#[tokio::test]
async fn the_run_viewers_account_may_read_or_change_nothing() {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    for scope in ["cluster", "namespace"] {
        let home = TestNamespace::new().await.expect("namespace");
        let ns = Some(home.name());
        let render = Render::new(
            home.name(),
            &[
                "ui.enabled=true",
                &format!("scope={scope}"),
                "flowSecrets[0].names={publisher}",
            ],
        );
        let installed = Installed::rbac(&render).await;
        let accounts = kubectl
            .run(&["get", "serviceaccounts", "-n", home.name(), "-o", "name"])
            .expect("accounts");
        assert!(
            accounts.lines().any(|l| l == "serviceaccount/coxswain-ui"),
            "{scope}: the viewer's account was applied: {accounts}"
        );
        assert!(
            installed.can_i("list", "runs.coxswain.dev", ns),
            "{scope}: the controller's account may list Runs"
        );
        let viewer = format!("system:serviceaccount:{}:coxswain-ui", home.name());
        let mut allowed = Vec::new();
        for resource in [
            "flows.coxswain.dev",
            "runs.coxswain.dev",
            "approvals.coxswain.dev",
            "secrets",
            "secrets/publisher",
        ] {
            for verb in ["get", "list", "watch", "create", "patch"] {
                for namespace in [ns, None] {
                    if installed.can_i_as(&viewer, verb, resource, namespace) {
                        allowed.push(format!("{verb} {resource} in {namespace:?}"));
                    }
                }
            }
        }
        assert!(allowed.is_empty(), "{scope}: the viewer may {allowed:?}");
    }
}
