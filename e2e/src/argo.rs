//! Argo Workflows' workflow-controller (v4.0.5) on the e2e cluster, as the
//! peer Coxswain's benchmark compares with on the same API server
//! (`BENCHMARKS.md`).
//!
//! The controller is built from Go modules by `e2e/argo/build` (not by CI:
//! ~18 minutes cold) and runs out of cluster, namespaced, as its docs allow:
//! [`Argo::start`] installs its CRDs from the Go module cache, creates the
//! namespace and `workflow-controller-configmap`, and starts it with
//! `LEADER_ELECTION_IDENTITY` set (without it, it exits at once).
//! [`Argo::run_chains`] then submits pod-less workflows of `suspend` steps in
//! sequence — the equivalent of Coxswain's condition steps
//! ([`coxswain_chain_flow`]) — and measures them ([`ChainReport`]).

mod chains;
mod coxswain_runs;
mod report;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

pub use chains::{StepKind, argo_chain_workflow, coxswain_chain_flow, coxswain_chain_flow_object};
pub use coxswain_runs::run_coxswain_chains;
pub use report::{ChainReport, percentile, run_step_gaps, step_gaps};

use crate::{Error, Kubectl, Result, client_for, workspace_root};

/// The Argo Workflows release compared with.
pub const ARGO_VERSION: &str = "v4.0.5";

const MODULE: &str = "github.com/argoproj/argo-workflows/v4";
const CONFIGMAP: &str = "workflow-controller-configmap";
/// The PATH the stand-in node gives a container that sets none (an image's).
const NODE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The workflow-controller binary: `E2E_ARGO` when set, else what
/// `e2e/argo/build` makes (`target/e2e/argo/bin/workflow-controller`).
/// Never builds it (too long to do behind a caller's back): see [`build`].
pub fn binary() -> Result<PathBuf> {
    built("E2E_ARGO", "workflow-controller")
}

/// The same v4.0.5 without the one-second sleep after every workflow update,
/// removed as v4.1 removed it (argo-workflows PR #15627,
/// `e2e/argo/nosleep.patch`): `E2E_ARGO_NOSLEEP` when set, else what
/// `e2e/argo/build` makes (`target/e2e/argo/bin/workflow-controller-nosleep`).
pub fn nosleep_binary() -> Result<PathBuf> {
    built("E2E_ARGO_NOSLEEP", "workflow-controller-nosleep")
}

fn built(var: &str, name: &str) -> Result<PathBuf> {
    let bin = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/e2e/argo/bin").join(name));
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(Error::ArgoNotBuilt(bin))
    }
}

/// Runs `e2e/argo/build` (a no-op when the binary is there; ~18 minutes
/// cold) and returns the binary, for a benchmark that wants Argo whatever it
/// costs. Progress goes to this process's stderr.
pub fn build() -> Result<PathBuf> {
    let script = workspace_root().join("e2e/argo/build");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::Build(format!("running {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(Error::Build(format!(
            "e2e/argo/build exited with {}",
            out.status
        )));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Where the Go module cache holds Argo's CRDs (`go mod download`, which
/// `e2e/argo/build` runs, puts them there).
pub fn crd_dir() -> Result<PathBuf> {
    let out = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .map_err(|e| Error::Argo(format!("running `go env GOMODCACHE`: {e}")))?;
    let cache = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dir = Path::new(&cache)
        .join(format!("{MODULE}@{ARGO_VERSION}"))
        .join("manifests/base/crds/minimal");
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(Error::Argo(format!(
            "Argo's CRDs are not in the Go module cache at {}: run e2e/argo/build",
            dir.display()
        )))
    }
}

/// A running workflow-controller managing one namespace; killed (SIGKILL)
/// when dropped. Its output goes to the file [`Argo::log`] names.
pub struct Argo {
    child: Child,
    log: PathBuf,
    client: Client,
    namespace: String,
}

impl Argo {
    /// Installs Argo into `namespace` of the cluster `kubeconfig` names and
    /// starts its controller with default settings; returns once it has run
    /// a one-step workflow to the end (so it leads and its informers serve).
    pub async fn start(kubeconfig: &Path, namespace: &str) -> Result<Self> {
        Self::start_with(kubeconfig, namespace, &[]).await
    }

    /// As [`Argo::start`], with `extra` flags after the defaults (e.g.
    /// `--qps 1000 --burst 2000` to lift client-go's throttle of 20 QPS).
    pub async fn start_with(kubeconfig: &Path, namespace: &str, extra: &[&str]) -> Result<Self> {
        Self::start_binary(&binary()?, kubeconfig, namespace, extra).await
    }

    /// As [`Argo::start_with`], running the controller `bin` (e.g.
    /// [`nosleep_binary`]).
    pub async fn start_binary(
        bin: &Path,
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> Result<Self> {
        let client = client_for(kubeconfig).await?;
        install_crds(kubeconfig).await?;
        create_namespace(&client, namespace).await?;
        create_configmap(&client, namespace, bin).await?;
        allow_executor(&client, namespace).await?;
        let (child, log) = spawn(bin, kubeconfig, namespace, extra)?;
        let mut argo = Self {
            child,
            log,
            client,
            namespace: namespace.to_string(),
        };
        argo.await_ready().await?;
        Ok(argo)
    }

    /// Runs a one-step workflow to the end, failing early (with the log's
    /// tail) if the controller exits.
    async fn await_ready(&mut self) -> Result<()> {
        let api = chains::workflows(&self.client, &self.namespace);
        let ready = chains::run(
            api,
            1,
            1,
            chains::Engine::Argo(StepKind::Suspend),
            Duration::from_secs(120),
            "warm-up",
        );
        tokio::pin!(ready);
        loop {
            tokio::select! {
                report = &mut ready => return report.map(drop).map_err(|e| self.explain(e)),
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        return Err(Error::Argo(format!(
                            "workflow-controller exited ({status}) before it ran a workflow; log {}:\n{}",
                            self.log.display(),
                            tail(&self.log_text(), 20)
                        )));
                    }
                }
            }
        }
    }

    fn explain(&self, e: Error) -> Error {
        Error::Argo(format!(
            "{e}; workflow-controller log {}:\n{}",
            self.log.display(),
            tail(&self.log_text(), 20)
        ))
    }

    /// Submits `workflows` workflows of `steps` `suspend: {duration: "0"}`
    /// steps in sequence, waits (at most `bound`) until all Succeeded and
    /// measures them. Any workflow that fails ends it with an error.
    pub async fn run_chains(
        &self,
        workflows: usize,
        steps: usize,
        bound: Duration,
    ) -> Result<ChainReport> {
        self.run_chains_of(StepKind::Suspend, workflows, steps, bound)
            .await
    }

    /// As [`Argo::run_chains`], with steps of `kind` (pod steps need
    /// `argoexec` beside the controller: `ARGO_BUILD_ARGOEXEC=1 e2e/argo/build`).
    pub async fn run_chains_of(
        &self,
        kind: StepKind,
        workflows: usize,
        steps: usize,
        bound: Duration,
    ) -> Result<ChainReport> {
        let api = chains::workflows(&self.client, &self.namespace);
        chains::run(
            api,
            workflows,
            steps,
            chains::Engine::Argo(kind),
            bound,
            "chain",
        )
        .await
        .map_err(|e| self.explain(e))
    }

    /// The namespace it manages (its Lease and ConfigMap are there too).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Where its log goes.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its log so far, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its process id (e.g. to read its memory from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Argo {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Applies Argo's CRDs (server-side: the workflow CRD is too big for the
/// last-applied annotation) and waits until Workflows are served.
async fn install_crds(kubeconfig: &Path) -> Result<()> {
    let dir = crd_dir()?;
    let kubectl = Kubectl::for_kubeconfig(kubeconfig);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("argoproj.io_") && n.ends_with(".yaml"))
        })
        .collect();
    files.sort();
    for file in &files {
        let file = file.to_string_lossy();
        kubectl
            .run(&["apply", "--server-side", "--force-conflicts", "-f", &file])
            .map_err(Error::Argo)?;
    }
    kubectl
        .run(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/workflows.argoproj.io",
            "crd/workflowtaskresults.argoproj.io",
        ])
        .map_err(Error::Argo)?;
    crate::wait_for(
        "Argo's Workflow resource served",
        Duration::from_secs(60),
        || async {
            Ok(kubectl
                .run(&["get", "workflows.argoproj.io", "-A", "-o", "name"])
                .ok()
                .map(drop))
        },
    )
    .await
}

async fn create_namespace(client: &Client, namespace: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
    }))
    .map_err(|e| Error::Argo(format!("namespace {namespace}: {e}")))?;
    create_or_keep(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await,
    )
}

/// The controller's ConfigMap: Argo's defaults but two. The metrics port:
/// the default 9090 may be taken on a shared machine, and the controller
/// panics when it cannot listen. And the executor's `PATH`: on the stand-in
/// node the host's files are the image, and a pod step's init and wait
/// containers run `argoexec` from the PATH, so the directory of the
/// controller (where `ARGO_BUILD_ARGOEXEC=1 e2e/argo/build` puts `argoexec`)
/// comes first.
async fn create_configmap(client: &Client, namespace: &str, controller: &Path) -> Result<()> {
    let port = crate::free_port()?;
    let bin_dir = controller.parent().unwrap_or(Path::new("."));
    let path = format!("{}:{NODE_PATH}", bin_dir.display());
    let executor = json!({"env": [{"name": "PATH", "value": path}]});
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": namespace},
        "data": {
            "metricsConfig": format!("port: {port}\n"),
            "executor": executor.to_string(),
        },
    }))
    .map_err(|e| Error::Argo(format!("configmap: {e}")))?;
    create_or_keep(
        Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &cm)
            .await,
    )
}

/// The Role Argo's quick-start gives the `default` ServiceAccount for the
/// emissary executor: a pod step's `wait` container reports its outputs as a
/// WorkflowTaskResult. Pod-less steps do not need it.
async fn allow_executor(client: &Client, namespace: &str) -> Result<()> {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "argo-executor", "namespace": namespace},
        "rules": [{
            "apiGroups": ["argoproj.io"],
            "resources": ["workflowtaskresults"],
            "verbs": ["create", "patch"],
        }],
    }))
    .map_err(|e| Error::Argo(format!("executor role: {e}")))?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "argo-executor-default", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-executor"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
    }))
    .map_err(|e| Error::Argo(format!("executor role binding: {e}")))?;
    let pp = PostParams::default();
    create_or_keep(
        Api::<Role>::namespaced(client.clone(), namespace)
            .create(&pp, &role)
            .await,
    )?;
    create_or_keep(
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .create(&pp, &binding)
            .await,
    )
}

fn create_or_keep<T>(result: std::result::Result<T, kube::Error>) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn spawn(
    bin: &Path,
    kubeconfig: &Path,
    namespace: &str,
    extra: &[&str],
) -> Result<(Child, PathBuf)> {
    let dir = workspace_root().join("target/e2e/argo/logs");
    std::fs::create_dir_all(&dir)?;
    let id = format!("coxswain-e2e-{}-{}", std::process::id(), unique());
    let log = dir.join(format!("{id}.log"));
    let file = std::fs::File::create(&log)?;
    let stdout = file.try_clone()?;
    let child = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--namespaced",
            "--managed-namespace",
            namespace,
            "--namespace",
            namespace,
        ])
        .args([
            "--configmap",
            CONFIGMAP,
            "--executor-image",
            "argoexec:local",
        ])
        .args(extra)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("LEADER_ELECTION_IDENTITY", &id)
        .envs(passed_env())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(file)
        .spawn()
        .map_err(|e| Error::Argo(format!("cannot start {}: {e}", bin.display())))?;
    Ok((child, log))
}

/// The controller's own settings that only come from its environment
/// (e.g. `DEFAULT_REQUEUE_TIME`), passed as `E2E_ARGO_ENV_<NAME>=value`
/// so a benchmark can tune them without leaking the rest of its environment.
fn passed_env() -> Vec<(String, std::ffi::OsString)> {
    std::env::vars_os()
        .filter_map(|(k, v)| {
            let name = k.to_str()?.strip_prefix("E2E_ARGO_ENV_")?.to_string();
            Some((name, v))
        })
        .collect()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn unique() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
