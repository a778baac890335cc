//! Chains: N workflows of M steps in sequence that need no pod, in Argo's
//! form (`suspend: {duration: "0"}` steps) and in Coxswain's (condition
//! steps), submitted at once and watched until all have succeeded.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::report::{ChainReport, run_step_gaps, step_gaps};
use crate::{Error, Result};

/// How many creations are in flight at once: enough that the client is not
/// what limits a controller's throughput.
const SUBMITTERS: usize = 16;
/// The label that tells one batch's workflows from another's.
const BATCH_LABEL: &str = "coxswain.dev/chain-batch";

/// Argo's Workflow kind.
pub(super) fn workflows(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Workflow".into(),
        plural: "workflows".into(),
    };
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// What each step of a chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// `suspend: {duration: "0"}`: Argo's step that needs no pod, the peer
    /// of a Coxswain condition step.
    Suspend,
    /// A container running `sh -c true` in a pod (init, wait and main
    /// containers; on the stand-in node `argoexec` comes from beside the
    /// controller): the peer of a Coxswain script step run as a Job.
    Pod,
}

impl StepKind {
    /// The node `type` Argo records for such a step in `status.nodes`.
    pub fn node_type(self) -> &'static str {
        match self {
            Self::Suspend => "Suspend",
            Self::Pod => "Pod",
        }
    }

    fn template(self) -> Value {
        match self {
            Self::Suspend => json!({"name": "step", "suspend": {"duration": "0"}}),
            Self::Pod => json!({"name": "step", "container": {
                "image": "busybox:1.36",
                "command": ["sh", "-c", "true"],
            }}),
        }
    }
}

/// An Argo Workflow of `steps` steps of `kind` in sequence (`s1` … `sM`,
/// one per step group). Labelled with `batch`.
pub fn argo_chain_workflow(name: &str, steps: usize, kind: StepKind, batch: &str) -> Value {
    let groups: Vec<Value> = (1..=steps)
        .map(|i| json!([{"name": format!("s{i}"), "template": "step"}]))
        .collect();
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "labels": {BATCH_LABEL: batch}},
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "steps": groups}, kind.template()],
        },
    })
}

/// [`coxswain_chain_flow`] as the JSON object the API server takes.
pub fn coxswain_chain_flow_object(name: &str, steps: usize) -> Value {
    let steps: Vec<Value> = (1..=steps)
        .map(|i| json!({"key": format!("s{i}"), "condition": {"when": "true"}}))
        .collect();
    json!({
        "apiVersion": "coxswain.dev/v1alpha1",
        "kind": "Flow",
        "metadata": {"name": name},
        "spec": {"steps": steps},
    })
}

/// The Coxswain Flow equivalent to [`argo_chain_workflow`]: `steps`
/// condition steps `s1` … `sM`, each after the one before (the default
/// arrow), none needing a pod; the comparison runs N Runs of it.
pub fn coxswain_chain_flow(name: &str, steps: usize) -> String {
    let mut yaml = format!(
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata:\n  name: {name}\nspec:\n  steps:\n"
    );
    for i in 1..=steps {
        yaml.push_str(&format!(
            "    - key: s{i}\n      condition: {{when: \"true\"}}\n"
        ));
    }
    yaml
}

/// Whose chains a batch is: Argo Workflows of some step kind, or Coxswain
/// Runs of a chain Flow already applied.
#[derive(Debug, Clone)]
pub(super) enum Engine {
    /// Argo Workflows of [`argo_chain_workflow`].
    Argo(StepKind),
    /// Coxswain Runs of the Flow named (a [`coxswain_chain_flow`]).
    Coxswain(String),
}

impl Engine {
    /// The object to create for one chain of the batch.
    fn object(&self, name: &str, steps: usize, batch: &str) -> Value {
        match self {
            Self::Argo(kind) => argo_chain_workflow(name, steps, *kind, batch),
            Self::Coxswain(flow) => json!({
                "apiVersion": "coxswain.dev/v1alpha1",
                "kind": "Run",
                "metadata": {"name": name, "labels": {BATCH_LABEL: batch}},
                "spec": {"flowRef": {"name": flow}, "input": {}},
            }),
        }
    }

    /// Whether a chain's status says it succeeded, or the error it failed with.
    fn finished(&self, name: &str, status: &Value) -> Result<bool> {
        let phase = status["phase"].as_str().unwrap_or_default();
        let failed = match self {
            Self::Argo(_) => ["Failed", "Error"].contains(&phase),
            Self::Coxswain(_) => ["Failed", "Cancelled"].contains(&phase),
        };
        if failed {
            let message = status["message"]
                .as_str()
                .or(status["error"]["message"].as_str())
                .unwrap_or("(no message)");
            return Err(Error::Argo(format!("{name} ended {phase}: {message}")));
        }
        Ok(phase == "Succeeded")
    }

    /// The succeeded steps and step-to-step gaps of one chain's status.
    fn measure(&self, status: &Value) -> Result<(usize, Vec<Duration>)> {
        match self {
            Self::Argo(kind) => step_gaps(status, kind.node_type()),
            Self::Coxswain(_) => run_step_gaps(status),
        }
    }

    /// Who ran it and what a step was, for the report.
    fn labels(&self) -> (String, &'static str) {
        match self {
            Self::Argo(kind) => (format!("argo {}", super::ARGO_VERSION), kind.node_type()),
            Self::Coxswain(_) => ("coxswain".to_string(), "condition"),
        }
    }
}

/// Submits the batch, watches it to the end and measures it.
pub(super) async fn run(
    api: Api<DynamicObject>,
    count: usize,
    steps: usize,
    engine: Engine,
    bound: Duration,
    prefix: &str,
) -> Result<ChainReport> {
    let batch = format!("{prefix}-{}-{}", std::process::id(), unique());
    let config = watcher::Config::default().labels(&format!("{BATCH_LABEL}={batch}"));
    let mut events = watcher(api.clone(), config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let start = Instant::now();
    let deadline = start + bound;
    let submit = tokio::spawn(submit(api, count, steps, engine.clone(), batch.clone()));
    tokio::pin!(submit);
    let mut submitted = false;
    let mut done: BTreeMap<String, Value> = BTreeMap::new();
    let mut last = start;
    let mut watch_error = None;
    while done.len() < count {
        let event = tokio::select! {
            joined = &mut submit, if !submitted => {
                joined.map_err(|e| Error::Argo(format!("submitting workflows: {e}")))??;
                submitted = true;
                continue;
            }
            event = tokio::time::timeout_at(deadline, events.next()) => event,
        };
        let what = || {
            let seen = watch_error
                .as_ref()
                .map(|e| format!("; last watch error: {e}"));
            format!(
                "{count} workflows of batch {batch} to succeed ({} did){}",
                done.len(),
                seen.unwrap_or_default()
            )
        };
        let object = match event {
            Err(_) => return Err(Error::Timeout(bound, what())),
            Ok(None) => {
                return Err(Error::Argo(format!(
                    "the watch ended while waiting for {}",
                    what()
                )));
            }
            // The watcher recovers (after a back-off) from a failed request:
            // keep the error for the message should the bound run out.
            Ok(Some(Err(e))) => {
                watch_error = Some(e);
                continue;
            }
            Ok(Some(Ok(object))) => object,
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        let status = object.data.get("status").cloned().unwrap_or(Value::Null);
        if !done.contains_key(&name) && engine.finished(&name, &status)? {
            done.insert(name, status);
            last = Instant::now();
        }
    }
    let measured = done
        .values()
        .map(|status| engine.measure(status))
        .collect::<Result<Vec<_>>>()?;
    let (who, step) = engine.labels();
    Ok(ChainReport::new(who, step, steps, last - start, measured))
}

/// Creates the batch's workflows, [`SUBMITTERS`] at a time.
async fn submit(
    api: Api<DynamicObject>,
    count: usize,
    steps: usize,
    engine: Engine,
    batch: String,
) -> Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..SUBMITTERS.min(count) {
        let (api, batch, engine) = (api.clone(), batch.clone(), engine.clone());
        tasks.spawn(async move {
            for i in (worker..count).step_by(SUBMITTERS) {
                let name = format!("{batch}-{i}");
                let object: DynamicObject =
                    serde_json::from_value(engine.object(&name, steps, &batch))
                        .map_err(|e| Error::Argo(format!("workflow {name}: {e}")))?;
                api.create(&PostParams::default(), &object).await?;
            }
            Ok::<(), Error>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|e| Error::Argo(format!("submitting workflows: {e}")))??;
    }
    Ok(())
}

fn unique() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argo_workflow_runs_its_steps_in_sequence_without_pods() {
        let wf = argo_chain_workflow("w", 3, StepKind::Suspend, "b");
        let groups = wf["spec"]["templates"][0]["steps"].as_array().unwrap();
        // One step per group: groups run one after another.
        let names: Vec<&str> = groups
            .iter()
            .map(|g| {
                assert_eq!(g.as_array().unwrap().len(), 1);
                g[0]["name"].as_str().unwrap()
            })
            .collect();
        assert_eq!(names, ["s1", "s2", "s3"]);
        assert_eq!(wf["spec"]["templates"][1]["suspend"]["duration"], "0");
        let pod = argo_chain_workflow("w", 1, StepKind::Pod, "b");
        assert_eq!(pod["spec"]["templates"][1]["container"]["command"][0], "sh");
        assert_eq!(wf["metadata"]["labels"][BATCH_LABEL], "b");
    }

    #[test]
    fn coxswain_flow_has_one_condition_step_per_argo_step() {
        let yaml = coxswain_chain_flow("chain", 4);
        let flow: Value = serde_yaml::from_str(&yaml).unwrap();
        let steps = flow["spec"]["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[3]["key"], "s4");
        assert_eq!(steps[3]["condition"]["when"], "true");
        assert!(steps.iter().all(|s| s.get("after").is_none()));
        // The object the API server is given is the same flow.
        assert_eq!(flow, coxswain_chain_flow_object("chain", 4));
        // And Coxswain itself takes it: a valid flow whose steps chain.
        let flow: coxswain_core::api::Flow = serde_yaml::from_str(&yaml).unwrap();
        coxswain_core::engine::CompiledFlow::new(flow.spec).expect("a valid flow");
    }
}
