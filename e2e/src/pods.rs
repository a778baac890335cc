//! Finished pods: waiting for one, and the disk the stand-in node keeps
//! for them.
//!
//! A script step's pod copies the `coxswain` executable (hundreds of MiB in
//! a debug build) into an emptyDir, and the stand-in node keeps every pod's
//! directory until the harness stops (a kubelet would remove it with the
//! pod). A test that runs dozens of script Jobs frees those copies as their
//! pods finish, so the disk holds only the copies of pods still running.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::ListParams};

use crate::{Result, kubeconfig, wait_for};

/// The emptyDir the controller's Jobs copy the executable into.
const EXECUTABLE_VOLUME: &str = "coxswain-bin";

/// Pod `name` once it has finished (phase `Succeeded` or `Failed`), within
/// `bound`: where a test that runs a pod reads what it did.
pub async fn wait_pod_finished(
    pods: &Api<Pod>,
    name: &str,
    bound: std::time::Duration,
) -> Result<Pod> {
    wait_for(&format!("pod {name} finished"), bound, || async {
        let pod = pods.get(name).await?;
        Ok(finished(&pod).then_some(pod))
    })
    .await
}

/// Whether `pod`'s phase is `Succeeded` or `Failed`.
fn finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Removes the copied executable of every pod in `pods`' namespace that has
/// finished (phase Succeeded or Failed); returns how many bytes it freed.
/// Only files in the pods' own state directories under the harness's
/// state dir are touched; a cluster the harness does not run frees nothing.
pub async fn free_finished_pods(pods: &Api<Pod>) -> Result<u64> {
    let Some(dir) = pods_dir()? else {
        return Ok(0);
    };
    let mut freed = 0;
    for pod in pods.list(&ListParams::default()).await?.items {
        if !finished(&pod) {
            continue;
        }
        let folder = format!(
            "{}_{}_{}",
            pod.namespace().unwrap_or_default(),
            pod.name_any(),
            pod.uid().unwrap_or_default()
        );
        freed += remove_files(&dir.join(folder).join("volumes").join(EXECUTABLE_VOLUME));
    }
    Ok(freed)
}

/// `pods/` beside the kubeconfig the harness wrote, when it exists.
fn pods_dir() -> Result<Option<PathBuf>> {
    let config = kubeconfig()?;
    Ok(config
        .parent()
        .map(|d| d.join("pods"))
        .filter(|d| d.is_dir()))
}

/// Removes the regular files directly in `dir`; returns their total size.
fn remove_files(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut freed = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() && std::fs::remove_file(entry.path()).is_ok() {
            freed += meta.len();
        }
    }
    freed
}
