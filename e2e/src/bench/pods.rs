//! How long one trivial script step's pod takes on the node the cluster
//! runs: from the pod appearing (a watch sees it created) to its step
//! container started, and to the pod Succeeded, one Run at a time so the
//! figures are the node's and not a queue's. Pod timestamps have
//! one-second resolution, so the times are taken here, from a watch.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;

use super::objects::{create_flow, create_runs, is_over, wait_runs};
use super::report::quantile;
use crate::{ControllerProcess, Error, Result, TestNamespace};

/// The figures of [`measure`].
#[derive(Debug, Clone)]
pub struct PodTimes {
    /// The node: `stand-in` or `real`.
    pub node: &'static str,
    /// Seconds from the pod seen created to its step container started.
    pub started: Vec<f64>,
    /// Seconds from the pod seen created to the pod Succeeded.
    pub succeeded: Vec<f64>,
}

impl PodTimes {
    /// `p50 X s, p90 Y s` of `values`.
    pub fn summary(values: &[f64]) -> String {
        let q = |p| quantile(values, p).map_or("-".into(), |v| format!("{v:.2} s"));
        format!("p50 {}, p90 {}", q(0.5), q(0.9))
    }
}

/// Runs `count` one-step Runs (`echo done`) one after another, timing
/// each step's pod.
pub async fn measure(
    client: &Client,
    count: usize,
    bound: Duration,
) -> Result<(PodTimes, TestNamespace)> {
    let ns = TestNamespace::new().await?;
    let steps = json!([{"key": "echo", "script": {"source": "echo '{\"done\": true}'"}}]);
    create_flow(client, ns.name(), "pod", steps).await?;
    let mut controller = ControllerProcess::for_namespace(ns.name(), &[]).await?;
    // A first run warms the controller, the node and the image cache.
    create_runs(client, ns.name(), "pod", "warm", 1).await?;
    wait_runs(client, ns.name(), "warm", 1, is_over, bound).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let mut times = PodTimes {
        node: match crate::node() {
            crate::Node::Real => "real",
            crate::Node::StandIn => "stand-in",
        },
        started: Vec::new(),
        succeeded: Vec::new(),
    };
    for i in 0..count {
        let prefix = format!("t{i}");
        let selector = format!("coxswain.dev/run={prefix}-00000");
        let config = watcher::Config::default().labels(&selector);
        let mut events = watcher(pods.clone(), config).applied_objects().boxed();
        create_runs(client, ns.name(), "pod", &prefix, 1).await?;
        let (mut seen, mut started) = (None::<Instant>, None::<f64>);
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let next = tokio::time::timeout_at(deadline, events.next()).await;
            let pod = match next {
                Ok(Some(Ok(pod))) => pod,
                Ok(Some(Err(_))) => continue,
                Ok(None) | Err(_) => {
                    return Err(Error::Bench(format!(
                        "run {prefix}-00000's pod did not succeed within {bound:?}"
                    )));
                }
            };
            let at = *seen.get_or_insert_with(Instant::now);
            let status = pod.status.unwrap_or_default();
            let step_started = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|c| c.state.as_ref())
                .any(|s| s.running.is_some() || s.terminated.is_some());
            if step_started && started.is_none() {
                started = Some(at.elapsed().as_secs_f64());
            }
            match status.phase.as_deref() {
                Some("Succeeded") => {
                    times
                        .started
                        .push(started.unwrap_or(at.elapsed().as_secs_f64()));
                    times.succeeded.push(at.elapsed().as_secs_f64());
                    break;
                }
                Some("Failed") => {
                    return Err(Error::Bench(format!("run {prefix}-00000's pod failed")));
                }
                _ => {}
            }
        }
    }
    controller.kill();
    Ok((times, ns))
}
