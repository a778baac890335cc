//! Starting the cluster once per test binary. The harness is started with
//! `--exit-on-stdin-eof` and its stdin is held open for the life of the test
//! process, so the cluster dies with the tests however they end.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Condvar, Mutex, OnceLock},
    time::Duration,
};

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{Error, Result};

/// The running harness; kept (never dropped) so its stdin stays open.
struct Harness {
    _child: Child,
    _stdin: ChildStdin,
}

static KUBECONFIG: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
static HARNESS: Mutex<Option<Harness>> = Mutex::new(None);
/// The harness's pid, once this process started it.
static HARNESS_PID: OnceLock<u32> = OnceLock::new();
/// How many times the harness said kube-apiserver was restarted and ready
/// (`APISERVER_RESTARTED=N` on its stdout).
static RESTARTS: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

/// Which node runs the pods of this test binary's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// The harness's stand-in (`e2e/cluster/node`): each container a host
    /// process on the host's files, the image ignored. Fast (a pod in
    /// about 0.3 s), so most suites use it.
    StandIn,
    /// A real kubelet with containerd and runc (`harness --node real`):
    /// images, users, seccomp, volumes and termination messages as on a
    /// user's cluster (a pod in about 2 s).
    Real,
}

static NODE: OnceLock<Node> = OnceLock::new();

/// The node this test binary's pods run on: [`Node::Real`] once
/// [`use_real_node`] was called or when `E2E_NODE=real`, else the stand-in.
pub fn node() -> Node {
    *NODE.get_or_init(|| match std::env::var("E2E_NODE").as_deref() {
        Ok("real") => Node::Real,
        _ => Node::StandIn,
    })
}

/// Makes this test binary's cluster run its pods on the real node. Call it
/// before anything starts the cluster (first thing in each test of a
/// binary that needs it); it panics if the cluster already runs on the
/// stand-in, since one binary has one cluster.
pub fn use_real_node() {
    assert_eq!(
        *NODE.get_or_init(|| Node::Real),
        Node::Real,
        "this test binary's cluster already runs on the stand-in node; call use_real_node() before the first client()"
    );
}

/// The harness's state folder (logs, the real node's containerd socket):
/// the one this process started, else `E2E_STATE_DIR`, else
/// `target/e2e/cluster` (where `e2e/cluster/up` keeps it).
pub fn state_dir() -> PathBuf {
    if let Some(dir) = STATE_DIR.get() {
        return dir.clone();
    }
    std::env::var_os("E2E_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/e2e/cluster"))
}

static STATE_DIR: OnceLock<PathBuf> = OnceLock::new();

/// The workspace root (where `target/` and `e2e/cluster/` are), so the harness
/// is found and built the same way from any test binary.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ has a parent")
        .to_path_buf()
}

/// The admin kubeconfig of the cluster, starting the cluster on first use
/// (or `KUBECONFIG` when set), so tests share one control plane per binary.
pub fn kubeconfig() -> Result<PathBuf> {
    KUBECONFIG
        .get_or_init(|| start().map_err(|e| e.to_string()))
        .clone()
        .map_err(Error::Start)
}

fn harness_binary(root: &Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("E2E_HARNESS") {
        return Ok(PathBuf::from(p));
    }
    let bin = root.join("target/e2e/harness");
    if bin.exists() && std::env::var_os("E2E_REBUILD").is_none() {
        return Ok(bin);
    }
    let status = Command::new(root.join("e2e/cluster/build"))
        .stdout(Stdio::null())
        .status()
        .map_err(|e| Error::Build(format!("running e2e/cluster/build: {e}")))?;
    if !status.success() {
        return Err(Error::Build(format!(
            "e2e/cluster/build exited with {status}"
        )));
    }
    Ok(bin)
}

/// Removes run directories of test processes that are gone.
fn prune_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.rsplit('-').next().unwrap_or_default();
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn start() -> Result<PathBuf> {
    if let Some(k) = std::env::var_os("KUBECONFIG") {
        return Ok(PathBuf::from(k));
    }
    let root = workspace_root();
    let bin = harness_binary(&root)?;
    let runs = root.join("target/e2e/runs");
    prune_runs(&runs);
    let exe = std::env::current_exe()?;
    let stem = exe
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "test".into());
    let dir = runs.join(format!("{stem}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let log = std::fs::File::create(dir.join("harness.log"))?;
    let _ = STATE_DIR.set(dir.clone());
    let node = match node() {
        Node::StandIn => "standin",
        Node::Real => "real",
    };
    let mut child = Command::new(&bin)
        .arg("--dir")
        .arg(&dir)
        .args(["--node", node])
        .arg("--exit-on-stdin-eof")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| Error::Start(format!("{}: {e}", bin.display())))?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let kubeconfig = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(path) = line.strip_prefix("KUBECONFIG=") {
                    break PathBuf::from(path);
                }
            }
            _ => {
                let _ = child.wait();
                return Err(Error::Start(format!(
                    "harness exited before it was ready; see {}",
                    dir.join("harness.log").display()
                )));
            }
        }
    };
    // Drain stdout so the harness never blocks on a full pipe, noting
    // each finished API server restart.
    std::thread::spawn(move || {
        for line in lines.map_while(std::result::Result::ok) {
            if let Some(n) = line.strip_prefix("APISERVER_RESTARTED=") {
                let (count, changed) = &RESTARTS;
                *count.lock().unwrap_or_else(|e| e.into_inner()) = n.trim().parse().unwrap_or(0);
                changed.notify_all();
            }
        }
    });
    let _ = HARNESS_PID.set(child.id());
    *HARNESS.lock().unwrap_or_else(|e| e.into_inner()) = Some(Harness {
        _child: child,
        _stdin: stdin,
    });
    Ok(kubeconfig)
}

/// Installs ring as rustls' process-wide provider, since kube (ring) and the
/// webhook server's rustls would otherwise clash over which provider the
/// process uses.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client for the cluster (admin), created for the calling runtime: every
/// `#[tokio::test]` has its own runtime, so clients are not shared.
pub async fn client() -> Result<Client> {
    install_crypto_provider();
    let path = tokio::task::spawn_blocking(kubeconfig)
        .await
        .map_err(|e| Error::Start(e.to_string()))??;
    client_for(&path).await
}

/// A client for the cluster a kubeconfig file names, for callers handed a
/// kubeconfig (e.g. [`crate::Argo::start`]) rather than the test binary's.
pub async fn client_for(path: &Path) -> Result<Client> {
    install_crypto_provider();
    let kc = Kubeconfig::read_from(path)?;
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(cfg)?)
}

/// How long a restart of kube-apiserver may take before it counts as failed.
const RESTART_BOUND: Duration = Duration::from_secs(180);

/// Restarts the test cluster's kube-apiserver (same etcd, port and
/// certificates: the harness does it on SIGUSR1) and returns once the new
/// one is ready. Connections drop and are refused meanwhile, as during an
/// upgrade. Every test of the binary shares the cluster, so a test that
/// restarts it belongs in a test binary of its own. Not available when
/// the tests use a cluster given by `KUBECONFIG`.
pub async fn restart_apiserver() -> Result<()> {
    tokio::task::spawn_blocking(|| {
        kubeconfig()?;
        let pid = *HARNESS_PID.get().ok_or_else(|| {
            Error::Start(
                "the API server can only be restarted in a cluster these tests started (KUBECONFIG is set)".into(),
            )
        })?;
        let (count, changed) = &RESTARTS;
        let before = *count.lock().unwrap_or_else(|e| e.into_inner());
        let status = Command::new("kill")
            .args(["-USR1", &pid.to_string()])
            .status()?;
        if !status.success() {
            return Err(Error::Start(format!("kill -USR1 {pid} (the harness) failed: {status}")));
        }
        let guard = count.lock().unwrap_or_else(|e| e.into_inner());
        let (_guard, timeout) = changed
            .wait_timeout_while(guard, RESTART_BOUND, |n| *n <= before)
            .unwrap_or_else(|e| e.into_inner());
        if timeout.timed_out() {
            return Err(Error::Timeout(
                RESTART_BOUND,
                "kube-apiserver to restart (see harness.log and logs/kube-apiserver.log)".into(),
            ));
        }
        Ok(())
    })
    .await
    .map_err(|e| Error::Start(e.to_string()))?
}
