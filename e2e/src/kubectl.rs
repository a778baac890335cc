//! The real kubectl against the test cluster, as users and Argo CD drive it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::{kubeconfig, workspace_root};

/// kubectl with the test cluster's kubeconfig and a discovery cache of its
/// own (a stale cache in `~/.kube` never answers for a CRD created a moment
/// ago). `E2E_KUBECTL` names the binary, else `/usr/bin/kubectl`, else `PATH`'s.
pub struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    /// kubectl for the cluster of this test binary (started on first use).
    pub async fn new() -> crate::Result<Self> {
        let kubeconfig = tokio::task::spawn_blocking(kubeconfig)
            .await
            .map_err(|e| crate::Error::Start(e.to_string()))??;
        Ok(Self::for_kubeconfig(&kubeconfig))
    }

    /// kubectl for the cluster `kubeconfig` names (e.g. one handed to
    /// [`crate::Argo::start`]), not necessarily the test binary's.
    pub fn for_kubeconfig(kubeconfig: &Path) -> Self {
        let cache = workspace_root().join(format!(
            "target/e2e/kubectl-cache-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        Self {
            binary: binary(),
            kubeconfig: kubeconfig.to_path_buf(),
            cache,
        }
    }

    /// The kubeconfig it uses.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// kubectl's stdout, or its stdout and stderr as the error.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        self.run_with_stdin(args, None)
    }

    /// As [`Kubectl::run`], with `stdin` fed to it (for `-f -`).
    pub fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let mut command = Command::new(&self.binary);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.binary.display()))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .map_err(|e| format!("writing kubectl's stdin: {e}"))?;
        }
        let output = child
            .wait_with_output()
            .map_err(|e| format!("waiting for kubectl: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "kubectl {}: {}\n{stdout}{stderr}",
                args.join(" "),
                output.status
            ))
        }
    }

    /// kubectl's stdout as JSON; panics with kubectl's message otherwise
    /// (for tests).
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: not JSON: {e}"))
    }

    /// The name of the Approval of attempt `attempt` of `step` of Run `run`,
    /// which need not exist yet: names end with a digest of the Run's uid
    /// (read here), the step and the attempt.
    pub fn approval_name(&self, namespace: &str, run: &str, step: &str, attempt: u32) -> String {
        coxswain_k8s::names::approval(run, &self.uid(namespace, "run", run), step, attempt)
    }

    /// The uid of `kind/name` in `namespace` (trimmed), which the names
    /// and labels the controller makes for an object are derived from;
    /// panics with kubectl's message if it cannot be read (for tests).
    pub fn uid(&self, namespace: &str, kind: &str, name: &str) -> String {
        self.run(&[
            "get",
            kind,
            name,
            "-n",
            namespace,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_string()
    }

    /// `kubectl patch ARGS --type merge -p PATCH` in `namespace`, where
    /// `args` name the object (`[KIND, NAME]`, as a person answers an
    /// Approval or cancels a Run) and any flags more: `--subresource=status`
    /// (what only the controller writes, which tests write to build a state
    /// it must then handle), `--as USER`, `-o json`. The one way tests
    /// patch an object, written once.
    pub fn merge_patch(
        &self,
        namespace: &str,
        args: &[&str],
        patch: &str,
    ) -> Result<String, String> {
        let mut all = vec!["patch", "-n", namespace];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--type", "merge", "-p", patch]);
        self.run(&all)
    }

    /// The Events in `namespace` that `field_selector` picks
    /// (`involvedObject.name=RUN`, `…,reason=FlowNotFound`), as
    /// `kubectl get events -o json` lists them; panics with kubectl's
    /// message if they cannot be read (for tests).
    pub fn events(&self, namespace: &str, field_selector: &str) -> Vec<Value> {
        let list = self.json(&[
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            field_selector,
            "-o",
            "json",
        ]);
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// `kubectl apply -f -` of `yaml` in `namespace`.
    pub fn apply(&self, namespace: &str, yaml: &str) -> Result<String, String> {
        self.run_with_stdin(&["apply", "-n", namespace, "-f", "-"], Some(yaml))
    }

    /// `kubectl create` of a Run of `flow` with `input` (named after the
    /// flow, `generateName`), as a person starts one; returns its name.
    pub fn create_run(&self, namespace: &str, flow: &str, input: &Value) -> Result<String, String> {
        let run = serde_json::json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"generateName": format!("{flow}-")},
            "spec": {"flowRef": {"name": flow}, "input": input},
        });
        let out = self.run_with_stdin(
            &["create", "-n", namespace, "-f", "-", "-o", "name"],
            Some(&run.to_string()),
        )?;
        Ok(out
            .trim()
            .trim_start_matches("run.coxswain.dev/")
            .to_string())
    }

    /// The Run `run` as `kubectl get -o json` prints it, once its phase is
    /// one of `phases` (within `bound`).
    pub async fn wait_run(
        &self,
        namespace: &str,
        run: &str,
        phases: &[&str],
        bound: std::time::Duration,
    ) -> crate::Result<Value> {
        crate::wait_for(&format!("run {run} in {phases:?}"), bound, || async {
            let Ok(text) = self.run(&["get", "run", run, "-n", namespace, "-o", "json"]) else {
                return Ok(None);
            };
            let object: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let phase = object["status"]["phase"].as_str().unwrap_or_default();
            Ok(phases.contains(&phase).then_some(object))
        })
        .await
    }

    /// Applies `crds/` (client-side) and waits until every CRD is served;
    /// once per test binary, however many tests ask at once.
    pub async fn install_crds(&self) -> crate::Result<()> {
        static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
        INSTALLED
            .get_or_try_init(|| self.apply_crds())
            .await
            .map(drop)
    }

    async fn apply_crds(&self) -> crate::Result<()> {
        let dir = workspace_root().join("crds");
        let dir = dir.to_string_lossy();
        self.run(&["apply", "-f", &dir])
            .map_err(crate::Error::Start)?;
        self.run(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/flows.coxswain.dev",
            "crd/runs.coxswain.dev",
            "crd/approvals.coxswain.dev",
        ])
        .map_err(crate::Error::Start)?;
        crate::wait_for(
            "the Run resource served",
            std::time::Duration::from_secs(60),
            || async {
                Ok(self
                    .run(&["get", "runs", "-A", "-o", "name"])
                    .ok()
                    .map(drop))
            },
        )
        .await
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cache);
    }
}

/// The words of `line`, a line of a table kubectl printed (`kubectl get
/// runs`): what tests compare a header's or a row's columns with.
pub fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("E2E_KUBECTL") {
        return PathBuf::from(path);
    }
    let usr_bin = Path::new("/usr/bin/kubectl");
    if usr_bin.exists() {
        usr_bin.to_path_buf()
    } else {
        PathBuf::from("kubectl")
    }
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
