//! Where the tests that act as a person (through kubectl) start: the CRDs
//! installed, a namespace of the test's own, kubectl, and what serves that
//! namespace. One type, so every such test file starts the same way and
//! a change to how a controller is started is made once.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{ControllerProcess, Kubectl, TestNamespace, wait_for};

/// How long [`Setup::serving_admission`] waits for the API server to call
/// the webhook.
const REGISTERED: Duration = Duration::from_secs(90);

/// A flow admission refuses (`True` is not a boolean of the expression
/// language): its refusal shows the webhook is registered and called.
pub const NOT_A_FLOW: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: probe}
spec:
  steps:
    - {key: a, agent: {prompt: x}, when: "$input.x == True"}
"#;

/// A namespace with the CRDs installed, kubectl, and the controllers
/// watching it. Dropping it deletes the namespace (and, when it served
/// admission, the webhook configurations that select only this namespace).
pub struct Setup {
    /// The test's own namespace.
    pub ns: TestNamespace,
    /// kubectl as the cluster's admin (`--as` impersonates people).
    pub kubectl: Kubectl,
    /// The controllers for `ns`: one, unless a test starts more (replicas)
    /// or `coxswain webhook` serves admission alone (none).
    pub controllers: Vec<ControllerProcess>,
    /// `coxswain webhook`, when it serves admission instead of a controller.
    webhook: Option<WebhookProcess>,
    /// Whether webhook configurations were registered for `ns`.
    admission: bool,
}

impl Setup {
    /// The CRDs, a namespace and one controller for it, started with
    /// `flags` after [`ControllerProcess::for_namespace`]'s own.
    pub async fn new(flags: &[&str]) -> Setup {
        let (ns, kubectl) = namespace().await;
        let controller = ControllerProcess::for_namespace(ns.name(), flags)
            .await
            .expect("controller");
        Setup {
            ns,
            kubectl,
            controllers: vec![controller],
            webhook: None,
            admission: false,
        }
    }

    /// The CRDs, a namespace with `rbac` applied (the test's people and
    /// their Roles), and admission served on a free loopback port: by a
    /// controller started with `--webhook-url` and `flags`, or with `alone`
    /// by `coxswain webhook`, which reconciles nothing. Returns once the
    /// API server calls the webhook (a flow that is not valid is refused).
    pub async fn serving_admission(rbac: &str, alone: bool, flags: &[&str]) -> Setup {
        let (ns, kubectl) = namespace().await;
        kubectl
            .apply(ns.name(), rbac)
            .unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "https://127.0.0.1:{}",
            crate::free_port().expect("a free port")
        );
        let mut s = Setup {
            ns,
            kubectl,
            controllers: Vec::new(),
            webhook: None,
            admission: true,
        };
        if alone {
            s.webhook = Some(WebhookProcess::start(s.ns.name(), &url).await);
        } else {
            let mut args = vec!["--webhook-url", url.as_str()];
            args.extend_from_slice(flags);
            s.controllers.push(
                ControllerProcess::for_namespace(s.ns.name(), &args)
                    .await
                    .expect("controller"),
            );
        }
        // The API server calls the webhook once it has been registered.
        let refused = wait_for("the webhook to refuse a bad flow", REGISTERED, || async {
            match s.kubectl.apply(s.ns.name(), NOT_A_FLOW) {
                Err(e) => Ok(Some(e).filter(|e| e.contains("admission webhook"))),
                // Stored before the API server knew the webhook: delete it,
                // or the next apply changes nothing and asks no one.
                Ok(_) => {
                    let _ = s.kubectl.run(&[
                        "delete",
                        "flow",
                        "probe",
                        "-n",
                        s.ns.name(),
                        "--ignore-not-found",
                    ]);
                    Ok(None)
                }
            }
        })
        .await;
        if let Err(e) = refused {
            panic!("{e}\ncontroller log:\n{}", s.logs());
        }
        s
    }

    /// The namespace's name.
    pub fn ns(&self) -> &str {
        self.ns.name()
    }

    /// Every log of what serves the namespace, for failure messages.
    pub fn logs(&self) -> String {
        let webhook = self.webhook.as_ref().map(WebhookProcess::log_text);
        self.controllers
            .iter()
            .map(ControllerProcess::log_text)
            .chain(webhook)
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    /// `kubectl apply` of `yaml` in the namespace; panics with kubectl's
    /// message if it is refused.
    pub fn apply(&self, yaml: &str) {
        self.kubectl
            .apply(self.ns(), yaml)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// `kind/name` in the namespace as `kubectl get -o json` prints it.
    pub fn get(&self, kind: &str, name: &str) -> Value {
        self.kubectl
            .json(&["get", kind, name, "-n", self.ns(), "-o", "json"])
    }

    /// The `kind/name` of each `kind` object in the namespace whose labels
    /// match `selector` (`kubectl get KIND -l SELECTOR -o name`).
    pub fn names(&self, kind: &str, selector: &str) -> Vec<String> {
        let out = self
            .kubectl
            .run(&["get", kind, "-n", self.ns(), "-l", selector, "-o", "name"])
            .unwrap_or_else(|e| panic!("{e}"));
        out.lines().map(String::from).collect()
    }

    /// Each `kind` object in the namespace whose labels match `selector`,
    /// as `kubectl get KIND -l SELECTOR -o json` lists it (the Jobs or
    /// Approvals made for a run).
    pub fn items(&self, kind: &str, selector: &str) -> Vec<Value> {
        let list = self
            .kubectl
            .json(&["get", kind, "-n", self.ns(), "-l", selector, "-o", "json"]);
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits, up to `timeout`, until `kubectl get ARGS -o name` in the
    /// namespace lists nothing (`["run", name, "--ignore-not-found"]`,
    /// `["pods", "-l", selector]`); an error of kubectl's ends the wait.
    pub async fn wait_none(
        &self,
        what: &str,
        timeout: Duration,
        args: &[&str],
    ) -> crate::Result<()> {
        wait_for(what, timeout, || async {
            let mut all = vec!["get"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["-n", self.ns(), "-o", "name"]);
            let listed = self.kubectl.run(&all).map_err(crate::Error::Start)?;
            Ok(listed.trim().is_empty().then_some(()))
        })
        .await
    }

    /// `kubectl create` of a Run of `flow` with `input` in the namespace,
    /// as a person starts one; its name. Panics with kubectl's message if
    /// it is refused.
    pub fn create_run(&self, flow: &str, input: Value) -> String {
        self.kubectl
            .create_run(self.ns(), flow, &input)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The Run `run` as `kubectl get -o json` prints it, once its phase is
    /// one of `phases`; after `bound`, panics with the run and every log.
    pub async fn wait_phase(&self, run: &str, phases: &[&str], bound: Duration) -> Value {
        match self.kubectl.wait_run(self.ns(), run, phases, bound).await {
            Ok(object) => object,
            Err(e) => panic!(
                "{e}\nrun: {}\ncontroller log:\n{}",
                self.get("run", run),
                self.logs()
            ),
        }
    }

    /// [`Kubectl::merge_patch`] of `kind/name` in the namespace (an
    /// Approval's decision, a Run's cancel); panics with kubectl's message
    /// if it is refused.
    pub fn merge_patch(&self, kind: &str, name: &str, patch: &str) {
        self.kubectl
            .merge_patch(self.ns(), &[kind, name], patch)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Waits, up to `bound`, until `kind/name` exists in the namespace (an
    /// Approval the controller is to ask); panics with every log after.
    pub async fn wait_exists(&self, kind: &str, name: &str, bound: Duration) {
        wait_for(&format!("{kind} {name}"), bound, || async {
            Ok(self
                .kubectl
                .run(&["get", kind, name, "-n", self.ns()])
                .ok()
                .map(drop))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
    }

    /// Waits, up to `bound`, until `kind/name` is gone from the namespace
    /// (a run deleted by retention); panics with every log after.
    pub async fn wait_deleted(&self, what: &str, kind: &str, name: &str, bound: Duration) {
        self.wait_none(what, bound, &[kind, name, "--ignore-not-found"])
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
    }

    /// kubectl in the namespace as `user` (`["--as", "alice"]`, groups
    /// too), with `stdin`; its stdout, or its error output.
    pub fn kubectl_as(
        &self,
        user: &[&str],
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, String> {
        let mut all: Vec<&str> = user.to_vec();
        all.extend_from_slice(&["-n", self.ns()]);
        all.extend_from_slice(args);
        self.kubectl.run_with_stdin(&all, stdin)
    }
}

impl Drop for Setup {
    /// The webhook configurations only select this namespace; remove them
    /// with it.
    fn drop(&mut self) {
        if !self.admission {
            return;
        }
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

/// The CRDs installed and a fresh namespace.
async fn namespace() -> (TestNamespace, Kubectl) {
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    (ns, kubectl)
}

/// `coxswain webhook` as a process, with only KUBECONFIG set; killed when dropped.
struct WebhookProcess {
    child: Child,
    log: PathBuf,
}

impl WebhookProcess {
    async fn start(namespace: &str, url: &str) -> WebhookProcess {
        let kubeconfig = tokio::task::spawn_blocking(crate::kubeconfig)
            .await
            .expect("join")
            .expect("kubeconfig");
        let log = crate::workspace_root().join(format!(
            "target/e2e/controllers/webhook-{}-{namespace}.log",
            std::process::id()
        ));
        std::fs::create_dir_all(log.parent().expect("dir")).expect("log dir");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(crate::coxswain_bin().expect("built"))
            .args(["webhook", "--namespace", namespace, "--webhook-url", url])
            .env_clear()
            .env("KUBECONFIG", kubeconfig)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start coxswain webhook");
        WebhookProcess { child, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for WebhookProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Declares `struct NAME(Setup)` (`pub NAME` for a `pub` one), a test file's own kind of [`Setup`], that
/// derefs to it (also mutably): the file adds the methods its tests share
/// with `impl NAME { … }`. Doc comments before the name go on the struct.
#[macro_export]
macro_rules! setup_newtype {
    ($(#[$attr:meta])* $vis:vis $name:ident) => {
        $(#[$attr])*
        $vis struct $name($crate::Setup);

        impl ::std::ops::Deref for $name {
            type Target = $crate::Setup;

            fn deref(&self) -> &$crate::Setup {
                &self.0
            }
        }

        impl ::std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut $crate::Setup {
                &mut self.0
            }
        }
    };
}
