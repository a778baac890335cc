//! The `shards` part: the same Runs over 1, 2 and 4 replicas sharing them
//! by bucket (`--sharded`), on the same API server, for two loads: agent
//! steps that hold their model call open (the stand-in answers after
//! [`super::server::MODEL_DELAY`]), where one replica's limit is the calls
//! it may keep open (`--max-in-controller`), and pod-less condition steps,
//! where the limit is the API server and the machine.

use serde_json::{Value, json};

use super::workload::{Measured, Spec, Stage};
use super::{Options, objects::is_over};
use crate::Result;

/// One workload at one replica count.
pub struct ShardPoint {
    /// `agent` or `conditions`.
    pub load: &'static str,
    /// Steps per run.
    pub steps: usize,
    /// Replicas sharing the Runs.
    pub replicas: usize,
    /// Time, writes, outcomes (CPU summed over the replicas).
    pub measured: Measured,
}

/// Measures both loads at every replica count of `options.replicas`.
pub async fn measure(
    client: &kube::Client,
    options: &Options,
) -> Result<(Vec<ShardPoint>, Vec<crate::TestNamespace>)> {
    let (addr, _calls) = super::server::start().await?;
    let model = format!("http://{addr}/v1");
    let agent: Value = (0..options.agent_steps)
        .map(|i| json!({"key": format!("a{i:03}"), "agent": {"prompt": "Say ok."}}))
        .collect();
    let conditions = super::condition_steps(options.steps);
    let mut with_model = options.controller_args.clone();
    with_model.extend([
        "--agent-url".to_string(),
        model,
        "--agent-model".to_string(),
        "stand-in".to_string(),
    ]);
    let mut points = Vec::new();
    let mut kept = Vec::new();
    for &replicas in &options.replicas {
        for (load, steps, count, args) in [
            ("agent", &agent, options.agent_steps, &with_model),
            (
                "conditions",
                &conditions,
                options.steps,
                &options.controller_args,
            ),
        ] {
            let spec = Spec {
                name: load,
                steps: steps.clone(),
                runs: options.runs,
                controller_args: args,
                bound: options.bound,
            };
            eprintln!(
                "shards: {replicas} replica(s), {} runs x {count} {load} steps",
                options.runs
            );
            let stage = Stage::sharded(client, &spec, replicas).await?;
            let measured = stage.measure(&spec, "run", is_over).await?;
            points.push(ShardPoint {
                load,
                steps: count,
                replicas,
                measured,
            });
            kept.push(stage.stop());
        }
    }
    Ok((points, kept))
}
