//! The chart rendered by the real helm, and its RBAC applied to the test
//! cluster: what `tests/chart.rs` needs.

use std::path::PathBuf;
use std::process::Command;

use coxswain_e2e::{Kubectl, workspace_root};
use serde_json::{Value, json};

/// The helm built from Go modules: `E2E_HELM`, else `target/e2e/helm`,
/// built with `e2e/helm/build` when missing.
fn helm() -> PathBuf {
    coxswain_e2e::built_tool("E2E_HELM", "helm", "e2e/helm/build")
}

/// `helm template coxswain charts/coxswain --namespace NS --set …`, read.
#[derive(Debug)]
pub struct Render {
    namespace: String,
    text: String,
    docs: Vec<Value>,
}

impl Render {
    /// The chart rendered into `namespace` with `sets` (`key=value` as
    /// `--set` takes them); panics with helm's message if it refuses.
    pub fn new(namespace: &str, sets: &[&str]) -> Self {
        Self::try_new(namespace, sets).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Render::new`], with helm's message as the error.
    pub fn try_new(namespace: &str, sets: &[&str]) -> Result<Self, String> {
        let mut command = Command::new(helm());
        command
            .args(["template", "coxswain"])
            .arg(workspace_root().join("charts/coxswain"))
            .args(["--namespace", namespace]);
        for set in sets {
            command.args(["--set", set]);
        }
        let output = command.output().map_err(|e| format!("helm: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc)
                .map_err(|e| format!("helm's output is not YAML: {e}"))?;
            if !value.is_null() {
                docs.push(value);
            }
        }
        Ok(Self {
            namespace: namespace.to_string(),
            text,
            docs,
        })
    }

    /// helm's output, as it would be applied.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Every rendered object, as serde_yaml (YAML 1.2) reads it.
    pub fn docs(&self) -> &[Value] {
        &self.docs
    }

    /// Every rendered object of `kind`.
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.docs.iter().filter(|d| d["kind"] == kind).collect()
    }

    /// The one rendered object of `kind`.
    pub fn one(&self, kind: &str) -> &Value {
        match self.all(kind).as_slice() {
            [one] => one,
            other => panic!("{} objects of kind {kind}", other.len()),
        }
    }

    /// The rendered object of `kind` named `name`, if there is one.
    pub fn named(&self, kind: &str, name: &str) -> Option<&Value> {
        self.all(kind)
            .into_iter()
            .find(|d| d["metadata"]["name"] == name)
    }

    /// The controller's Deployment (with `ui.enabled` the run viewer's is
    /// another).
    pub fn controller_deployment(&self) -> &Value {
        let controllers: Vec<&Value> = self
            .all("Deployment")
            .into_iter()
            .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "controller")
            .collect();
        match controllers.as_slice() {
            [one] => one,
            other => panic!("{} controller Deployments", other.len()),
        }
    }

    /// The release namespace it was rendered into.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The release's objects' name (the Deployment's, the Lease's).
    pub fn fullname(&self) -> String {
        self.controller_deployment()["metadata"]["name"]
            .as_str()
            .expect("named")
            .to_string()
    }

    /// The name of the release's cluster-scoped objects.
    pub fn cluster_name(&self) -> String {
        format!("{}-{}", self.fullname(), self.namespace)
    }

    /// The ServiceAccount the Deployment runs as.
    pub fn service_account(&self) -> String {
        self.controller_deployment()["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .expect("a service account")
            .to_string()
    }

    /// The controller container's `env`, as rendered.
    pub fn deployment_env(&self) -> Vec<Value> {
        self.controller_deployment()["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The controller's variable `name` as the Deployment sets it (with its
    /// `value` or `valueFrom`), or null when it sets none.
    pub fn deployment_var(&self, name: &str) -> Value {
        self.deployment_env()
            .into_iter()
            .find(|e| e["name"] == name)
            .unwrap_or(Value::Null)
    }

    /// The variables the Deployment gives the controller, resolved as the
    /// kubelet would for a pod named `coxswain-chart-test` in `namespace`,
    /// then `overrides` (e.g. a free metrics port instead of the pod's).
    pub fn controller_env(
        &self,
        namespace: &str,
        overrides: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .deployment_env()
            .iter()
            .map(|e| {
                let name = e["name"].as_str().expect("named").to_string();
                let value = match (&e["value"], &e["valueFrom"]["fieldRef"]["fieldPath"]) {
                    (Value::String(value), _) => value.clone(),
                    (_, Value::String(path)) if path == "metadata.name" => {
                        "coxswain-chart-test".into()
                    }
                    (_, Value::String(path)) if path == "metadata.namespace" => namespace.into(),
                    _ => panic!("the test cannot resolve {e}"),
                };
                (name, value)
            })
            .collect();
        for (name, value) in overrides {
            env.retain(|(n, _)| n != name);
            env.push((name.to_string(), value.to_string()));
        }
        env
    }
}

/// The chart's RBAC applied to the cluster; its cluster-scoped objects are
/// deleted when dropped (the namespaced ones go with the test namespace).
pub struct Installed {
    kubectl: Kubectl,
    user: String,
    cluster_scoped: Vec<String>,
}

/// The kinds that make up the chart's identity and its grants.
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

impl Installed {
    /// Applies exactly the RBAC objects `render` holds.
    pub async fn rbac(render: &Render) -> Self {
        let kubectl = Kubectl::new().await.expect("kubectl");
        let items: Vec<Value> = render
            .docs
            .iter()
            .filter(|d| RBAC_KINDS.iter().any(|k| d["kind"] == *k))
            .cloned()
            .collect();
        let cluster_scoped = items
            .iter()
            .filter(|d| d["kind"].as_str().is_some_and(|k| k.starts_with("Cluster")))
            .map(|d| {
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap_or_default().to_lowercase(),
                    d["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        kubectl
            .run_with_stdin(&["apply", "-f", "-"], Some(&list.to_string()))
            .unwrap_or_else(|e| panic!("{e}"));
        Self {
            kubectl,
            user: format!(
                "system:serviceaccount:{}:{}",
                render.namespace,
                render.service_account()
            ),
            cluster_scoped,
        }
    }

    /// Applies the chart's webhook configurations and its empty TLS Secret
    /// as they render, except that each webhook's `clientConfig.service`
    /// becomes `url: BASE + path` — what controller-runtime's envtest does
    /// for a webhook served outside the cluster, since the stand-in node's
    /// pods have no Service network the API server could reach.
    pub fn admission(&mut self, render: &Render, base: &str) {
        let mut items = Vec::new();
        for doc in render.docs() {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if kind == "Secret" {
                items.push(doc.clone());
                continue;
            }
            if !kind.ends_with("WebhookConfiguration") {
                continue;
            }
            let mut config = doc.clone();
            for hook in config["webhooks"].as_array_mut().expect("webhooks") {
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .expect("a service path")
                    .to_string();
                hook["clientConfig"] = json!({"url": format!("{base}{path}")});
            }
            self.cluster_scoped.push(format!(
                "{}/{}",
                kind.to_lowercase(),
                config["metadata"]["name"].as_str().unwrap_or_default()
            ));
            items.push(config);
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        self.kubectl
            .run_with_stdin(
                &["apply", "-n", &render.namespace, "-f", "-"],
                Some(&list.to_string()),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// A kubeconfig whose user impersonates the chart's ServiceAccount
    /// (`as:`, which kube-rs honours as kubectl does), so a client using it
    /// has exactly the chart's grants.
    pub fn impersonating_kubeconfig(&self) -> PathBuf {
        let text = std::fs::read_to_string(self.kubectl.kubeconfig()).expect("kubeconfig");
        let mut config: Value = serde_yaml::from_str(&text).expect("kubeconfig is YAML");
        for user in config["users"].as_array_mut().expect("users") {
            user["user"]["as"] = json!(self.user);
        }
        let dir = workspace_root().join("target/e2e/chart-kubeconfigs");
        std::fs::create_dir_all(&dir).expect("kubeconfig directory");
        let path = dir.join(format!("{}.yaml", self.user.replace(':', "_")));
        std::fs::write(&path, serde_yaml::to_string(&config).expect("YAML")).expect("written");
        path
    }

    /// Whether the chart's account may `verb` the `resource` (kubectl's
    /// `TYPE[/NAME]`, with `:SUBRESOURCE` after the type) in `namespace`
    /// (`None`: in all namespaces, or a cluster-scoped resource).
    pub fn can_i(&self, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
        self.can_i_as(&self.user, verb, resource, namespace)
    }

    /// As [`Installed::can_i`], for another `user` (the run viewer's
    /// account, `system:serviceaccount:NS:NAME`).
    pub fn can_i_as(
        &self,
        user: &str,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> bool {
        let (target, subresource) = match resource.split_once(':') {
            Some((target, sub)) => (target, Some(sub)),
            None => (resource, None),
        };
        let mut args = vec!["auth", "can-i", verb, target, "--as", user];
        let sub;
        if let Some(s) = subresource {
            sub = format!("--subresource={s}");
            args.push(&sub);
        }
        match namespace {
            Some(ns) => args.extend(["-n", ns]),
            None => args.push("--all-namespaces"),
        }
        match self.kubectl.run(&args) {
            Ok(out) if out.trim() == "yes" => true,
            Err(e) if e.lines().any(|l| l.trim() == "no") => false,
            other => panic!("kubectl {args:?}: {other:?}"),
        }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        for object in &self.cluster_scoped {
            let _ = self
                .kubectl
                .run(&["delete", object, "--ignore-not-found", "--wait=false"]);
        }
    }
}
