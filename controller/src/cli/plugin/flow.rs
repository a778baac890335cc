//! The flow a Run runs: the snapshot the controller pinned when it started
//! (not today's Flow, which may have changed), taken only when it holds
//! the digest the Run's record names (read as the controller reads it);
//! before the run started, the Flow it names as it is now.

use kube::ResourceExt;

use super::cluster::Cluster;
use super::error::PluginError;
use coxswain_core::api::{Flow, FlowSpec, Run};
use coxswain_k8s::run::pin::{Pinned, read_pinned};

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
    match read_pinned(&cluster.client, run, &digest).await {
        Ok(Pinned::Flow(flow)) => Ok(flow.spec().as_ref().clone()),
        Ok(
            Pinned::Tampered { reason, .. } | Pinned::Refused(_, reason) | Pinned::NotYet(reason),
        ) => Err(PluginError::Flow(format!("run `{name}`: {reason}"))),
        Err(e) => Err(PluginError::Flow(format!(
            "run `{name}`'s flow snapshot cannot be read: {e}"
        ))),
    }
}
