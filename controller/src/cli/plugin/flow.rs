//! The flow a Run runs, as `coxswain_client::flow::of_run` reads it with
//! the plugin user's credentials, in the plugin's errors.

use kube::ResourceExt;

use super::cluster::Cluster;
use super::error::PluginError;
use coxswain_client::flow::{self, FlowError};
use coxswain_core::api::{FlowSpec, Run};

/// The run's flow spec, or why it cannot be had.
pub async fn of_run(cluster: &Cluster, run: &Run) -> Result<FlowSpec, PluginError> {
    match flow::of_run(&cluster.client, run).await {
        Ok(flow) => Ok(flow.spec().as_ref().clone()),
        Err(FlowError::Missing { flow, namespace }) => Err(PluginError::NoFlow { flow, namespace }),
        Err(FlowError::Kube { source, .. }) => Err(source.into()),
        Err(e @ FlowError::Unusable(_)) => {
            Err(PluginError::Flow(format!("run `{}`: {e}", run.name_any())))
        }
    }
}
