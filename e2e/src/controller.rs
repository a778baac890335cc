//! `coxswain controller` started as a process, as a person starts it from a
//! checkout: with only `KUBECONFIG` set, so a test passes only if nothing
//! else of the developer's environment is needed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::{coxswain_bin, kubeconfig, workspace_root};

/// A running controller, killed (SIGKILL) when dropped. Its stderr goes to
/// a log file named in [`ControllerProcess::log`]. It keeps how it was
/// started, so [`ControllerProcess::restart`] starts it again the same way.
pub struct ControllerProcess {
    child: Child,
    log: PathBuf,
    kubeconfig: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl ControllerProcess {
    /// Starts `coxswain controller ARGS…` with the test cluster's kubeconfig
    /// and nothing else of the environment but `PATH` and `HOME`.
    pub async fn start(args: &[&str]) -> crate::Result<Self> {
        let kubeconfig = tokio::task::spawn_blocking(kubeconfig)
            .await
            .map_err(|e| crate::Error::Start(e.to_string()))??;
        Self::start_with(&kubeconfig, args, &[])
    }

    /// Starts `coxswain controller ARGS…` with `kubeconfig` (e.g. one whose
    /// user impersonates a ServiceAccount, to run the controller with only
    /// that account's RBAC) and the variables in `env`, as a Deployment
    /// sets them; nothing else of the environment but `PATH` and `HOME`.
    pub fn start_with(
        kubeconfig: &Path,
        args: &[&str],
        env: &[(String, String)],
    ) -> crate::Result<Self> {
        let dir = workspace_root().join("target/e2e/controllers");
        std::fs::create_dir_all(&dir).map_err(|e| crate::Error::Start(e.to_string()))?;
        let log = dir.join(format!("{}-{}.log", std::process::id(), unique()));
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let child = spawn(kubeconfig, &args, env, &log, false)?;
        Ok(Self {
            child,
            log,
            kubeconfig: kubeconfig.to_path_buf(),
            args,
            env: env.to_vec(),
        })
    }

    /// Kills it with SIGKILL and starts it again with the same kubeconfig,
    /// flags and environment, as a Deployment restarts a crashed pod. The
    /// new process appends to the same log, so one log tells the story of
    /// every life.
    pub fn restart(&mut self) -> crate::Result<()> {
        self.kill();
        self.child = spawn(&self.kubeconfig, &self.args, &self.env, &self.log, true)?;
        Ok(())
    }

    /// A controller for one test's namespace: it watches only that
    /// namespace, keeps its Lease there, serves metrics on a free port, may
    /// call the test's servers on the loopback address, and gives step pods
    /// the stripped executable ([`crate::stripped_coxswain_bin`]: each pod
    /// keeps its own copy until it is deleted, and a debug build's copies
    /// filled the disk); `extra` flags come after those. Controllers
    /// started with [`ControllerProcess::start_with`] (the chart's tests)
    /// keep the default of no flag: their own executable.
    pub async fn for_namespace(namespace: &str, extra: &[&str]) -> crate::Result<Self> {
        let kubeconfig = tokio::task::spawn_blocking(kubeconfig)
            .await
            .map_err(|e| crate::Error::Start(e.to_string()))??;
        Self::for_namespace_via(&kubeconfig, namespace, extra)
    }

    /// As [`ControllerProcess::for_namespace`], reaching the API server
    /// through `kubeconfig` (a fault proxy's).
    pub fn for_namespace_via(
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> crate::Result<Self> {
        // On the real node pods run images: the init container copies the
        // image's static executable. On the stand-in, the host's, stripped
        // (made only when no `--job-executable` is given).
        let executable = match (extra.contains(&"--job-executable"), crate::node()) {
            (true, _) => None,
            (false, crate::Node::Real) => Some(crate::images::IN_IMAGE_EXECUTABLE.to_string()),
            (false, crate::Node::StandIn) => Some(
                crate::stripped_coxswain_bin()?
                    .to_string_lossy()
                    .into_owned(),
            ),
        };
        let mut args = vec![
            "--namespace",
            namespace,
            "--lease-namespace",
            namespace,
            "--metrics-addr",
            "127.0.0.1:0",
            "--allow-net",
            "127.0.0.1/32",
        ];
        if let Some(executable) = &executable {
            args.extend(["--job-executable", executable]);
        }
        args.extend_from_slice(extra);
        Self::start_with(kubeconfig, &args, &[])
    }

    /// Where its log goes.
    pub fn log(&self) -> &PathBuf {
        &self.log
    }

    /// Its log so far, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What it serves at `path` (`/metrics`, `/readyz`) on the metrics
    /// address its log names, with the status code; `None` until it
    /// answers.
    pub async fn served(&self, path: &str) -> Option<(u16, String)> {
        let log = self.log_text();
        let addr = log
            .lines()
            .rev()
            .find(|l| l.contains("serving /metrics"))?
            .split("bound=")
            .nth(1)?
            .trim()
            .to_string();
        let response = reqwest::get(format!("http://{addr}{path}")).await.ok()?;
        let code = response.status().as_u16();
        Some((code, response.text().await.ok()?))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (e.g. after losing its Lease), reaping it if so.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Kills it with SIGKILL, as a node failure would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `coxswain controller ARGS…` with its stderr in `log` (appended
/// to when `append`, so a restarted controller continues the same log).
fn spawn(
    kubeconfig: &Path,
    args: &[String],
    env: &[(String, String)],
    log: &Path,
    append: bool,
) -> crate::Result<Child> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(log)
        .map_err(|e| crate::Error::Start(format!("{}: {e}", log.display())))?;
    let bin = coxswain_bin()?;
    Command::new(&bin)
        .arg("controller")
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .map_err(|e| crate::Error::Start(format!("cannot start {}: {e}", bin.display())))
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn unique() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
