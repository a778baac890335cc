//! Coxswain's side of the comparison: Runs of the chain Flow equivalent to
//! Argo's pod-less workflows, measured the same way (a watch for
//! throughput; step times from the status, here with sub-second resolution).

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};

use super::chains::{self, Engine};
use super::report::ChainReport;
use crate::{Error, Result};

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "coxswain.dev".into(),
        version: "v1alpha1".into(),
        api_version: "coxswain.dev/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Applies a chain Flow of `steps` condition steps (`chain-<steps>`) in
/// `namespace`, submits `runs` Runs of it, waits (at most `bound`) until
/// all Succeeded and measures them like [`crate::Argo::run_chains`].
/// A `coxswain controller` must be running for the namespace (e.g.
/// [`crate::ControllerProcess::for_namespace`]) with the CRDs installed.
pub async fn run_coxswain_chains(
    client: &Client,
    namespace: &str,
    runs: usize,
    steps: usize,
    bound: Duration,
) -> Result<ChainReport> {
    let flow = format!("chain-{steps}");
    let object: DynamicObject =
        serde_json::from_value(chains::coxswain_chain_flow_object(&flow, steps))
            .map_err(|e| Error::Argo(format!("flow {flow}: {e}")))?;
    let flows: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource("Flow", "flows"));
    match flows.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let api = Api::namespaced_with(client.clone(), namespace, &resource("Run", "runs"));
    chains::run(api, runs, steps, Engine::Coxswain(flow), bound, "chain").await
}
