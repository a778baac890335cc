//! The flow a Run runs, read as a person: the snapshot the controller
//! pinned when the run started (not today's Flow, which may have changed),
//! taken only when it holds the digest the Run's status names; before the
//! run started, the Flow it names as it is now.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, ResourceExt};

use coxswain_core::api::{Flow, Run};
use coxswain_core::engine::CompiledFlow;
use coxswain_core::flow::one_line;
use coxswain_kube::snapshot::{self, Recorded};

/// Why a run's flow cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// The run has not started and the Flow it names does not exist.
    #[error("the flow `{flow}` does not exist in namespace `{namespace}`")]
    Missing {
        /// The Flow the run names.
        flow: String,
        /// Where it was looked for.
        namespace: String,
    },
    /// The flow exists but cannot be used: its snapshot was replaced or is
    /// gone, or the Flow is not valid.
    #[error("{0}")]
    Unusable(String),
    /// The API server refused or failed reading the Flow.
    #[error("reading the flow `{flow}`: {source}")]
    Kube {
        /// The Flow the run names.
        flow: String,
        /// The client's error (a 403 says the person may not read it).
        #[source]
        source: kube::Error,
    },
}

/// The flow `run` goes on with, read anew with `client`'s credentials each
/// time, never from a cache shared between callers: whoever reads a flow
/// must be let read it. Someone who may read the Run but not its
/// ConfigMaps gets today's Flow, when it still has the pinned digest.
pub async fn of_run(client: &Client, run: &Run) -> Result<Arc<CompiledFlow>, FlowError> {
    let digest = run.status.as_ref().and_then(|s| s.flow_digest.clone());
    let Some(digest) = digest else {
        return live(client, run).await;
    };
    let snapshots: Api<ConfigMap> =
        Api::namespaced(client.clone(), &run.namespace().unwrap_or_default());
    match snapshot::recorded(&snapshots, &run.name_any(), &digest).await {
        Ok(Recorded::Flow(flow)) => Ok(Arc::new(flow)),
        Ok(Recorded::Tampered { reason, .. } | Recorded::Gone(reason)) => {
            Err(FlowError::Unusable(reason))
        }
        Err(e) => match live(client, run).await {
            Ok(flow) if flow.get().digest == digest => Ok(flow),
            _ => Err(FlowError::Unusable(format!(
                "the run's flow snapshot cannot be read ({e}), and the Flow `{}` has changed \
                 since the run started (or cannot be read either)",
                run.spec.flow_ref.name
            ))),
        },
    }
}

/// The Flow `run` names, as it is now.
async fn live(client: &Client, run: &Run) -> Result<Arc<CompiledFlow>, FlowError> {
    let namespace = run.namespace().unwrap_or_default();
    let name = &run.spec.flow_ref.name;
    let flows: Api<Flow> = Api::namespaced(client.clone(), &namespace);
    let found = flows
        .get_opt(name)
        .await
        .map_err(|source| FlowError::Kube {
            flow: name.clone(),
            source,
        })?;
    let Some(flow) = found else {
        return Err(FlowError::Missing {
            flow: name.clone(),
            namespace,
        });
    };
    CompiledFlow::new(flow.spec)
        .map(Arc::new)
        .map_err(|problems| {
            FlowError::Unusable(format!(
                "the flow `{name}` is not valid: {}",
                one_line(&problems)
            ))
        })
}
