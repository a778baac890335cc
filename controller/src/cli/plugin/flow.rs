//! The flow a Run runs: the snapshot the controller pinned when it started
//! (not today's Flow, which may have changed), read back only when the
//! Run owns it and it holds the digest the Run's record names; before the
//! run started, the Flow it names as it is now.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::cluster::{Cluster, uid};
use super::error::PluginError;
use coxswain_core::api::{Flow, FlowSpec, Run};
use coxswain_k8s::names;
use coxswain_k8s::run::pin::SNAPSHOT_KEY;

/// The run's flow spec, or why it cannot be had.
pub async fn of_run(cluster: &Cluster, run: &Run) -> Result<FlowSpec, PluginError> {
    let name = run.name_any();
    let digest = run.status.as_ref().and_then(|s| s.flow_digest.clone());
    let Some(digest) = digest else {
        let flow = &run.spec.flow_ref.name;
        let found = cluster.api::<Flow>().get_opt(flow).await?;
        return found.map(|f| f.spec).ok_or_else(|| PluginError::NoFlow {
            flow: flow.clone(),
            namespace: cluster.namespace.clone(),
        });
    };
    let config_maps = cluster.api::<ConfigMap>();
    for snapshot in [
        names::flow_snapshot(&name, &digest),
        names::legacy_flow_snapshot(&name),
    ] {
        let Some(found) = config_maps.get_opt(&snapshot).await? else {
            continue;
        };
        return pinned(&found, &uid(run), &digest).map_err(|why| {
            PluginError::Flow(format!("run `{name}`'s flow snapshot {snapshot} {why}"))
        });
    }
    Err(PluginError::Flow(format!(
        "run `{name}`'s flow snapshot (ConfigMap {}) is gone",
        names::flow_snapshot(&name, &digest)
    )))
}

/// The flow a snapshot holds, when the run owns it and its digest is the
/// one the run pinned.
fn pinned(snapshot: &ConfigMap, run_uid: &str, digest: &str) -> Result<FlowSpec, String> {
    if !names::controlled_by(snapshot, run_uid) {
        return Err("is not the run's own (another owner)".into());
    }
    let text = snapshot
        .data
        .as_ref()
        .and_then(|d| d.get(SNAPSHOT_KEY))
        .ok_or_else(|| format!("has no `{SNAPSHOT_KEY}`"))?;
    let spec: FlowSpec =
        serde_json::from_str(text).map_err(|e| format!("does not hold a flow: {e}"))?;
    let held = coxswain_core::flow::flow_digest(&spec);
    if held != digest {
        return Err(format!(
            "holds the flow {held}, not the flow {digest} the run started with"
        ));
    }
    Ok(spec)
}
