//! Flows and Runs as the benchmark makes and watches them, through the
//! plain API (dynamic objects): the benchmark measures the controller, so
//! it uses no code of the controller's own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::{Error, Result};

/// How many creates are in flight at once.
const CREATE_CONCURRENCY: usize = 16;

/// The Run resource.
pub fn run_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coxswain.dev", "v1alpha1", "Run"),
        "runs",
    )
}

fn flow_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coxswain.dev", "v1alpha1", "Flow"),
        "flows",
    )
}

/// The Runs of `namespace`.
pub fn runs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &run_resource())
}

/// Creates the Flow `name` with `steps` (the `spec.steps` list).
pub async fn create_flow(client: &Client, namespace: &str, name: &str, steps: Value) -> Result<()> {
    let resource = flow_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let mut flow = DynamicObject::new(name, &resource).within(namespace);
    flow.data = json!({"spec": {"steps": steps}});
    api.create(&PostParams::default(), &flow).await?;
    Ok(())
}

/// A Run of `flow` named `name`, with no input.
pub fn run_object(namespace: &str, name: &str, flow: &str) -> DynamicObject {
    let mut run = DynamicObject::new(name, &run_resource()).within(namespace);
    run.data = json!({"spec": {"flowRef": {"name": flow}}});
    run
}

/// Creates `count` Runs of `flow` (`PREFIX-00000`, …), 16 at a time, and
/// returns when the last was created.
pub async fn create_runs(
    client: &Client,
    namespace: &str,
    flow: &str,
    prefix: &str,
    count: usize,
) -> Result<()> {
    let api = runs(client, namespace);
    stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let run = run_object(namespace, &format!("{prefix}-{i:05}"), flow);
            async move { api.create(&PostParams::default(), &run).await.map(drop) }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// A Run's phase (`Pending` before the controller wrote one).
pub fn phase(run: &DynamicObject) -> &str {
    run.data["status"]["phase"].as_str().unwrap_or("Pending")
}

/// Whether a phase is an end.
pub fn is_over(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed" | "Cancelled")
}

/// Watches the Runs of `namespace` until `count` of those named
/// `prefix…` are in a phase `done` accepts; returns when that happened and the Runs as last seen.
/// Fails after `bound` naming how many got there, so a stuck benchmark
/// says where it stuck.
pub async fn wait_runs(
    client: &Client,
    namespace: &str,
    prefix: &str,
    count: usize,
    done: impl Fn(&str) -> bool,
    bound: Duration,
) -> Result<(Instant, HashMap<String, DynamicObject>)> {
    let api = runs(client, namespace);
    let mut seen: HashMap<String, DynamicObject> = HashMap::new();
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let reached = seen.values().filter(|r| done(phase(r))).count();
        if reached >= count {
            return Ok((Instant::now(), seen));
        }
        let next = tokio::time::timeout_at(deadline, events.next()).await;
        let event = match next {
            Err(_) => {
                let mut phases: HashMap<&str, usize> = HashMap::new();
                for r in seen.values() {
                    *phases.entry(phase(r)).or_default() += 1;
                }
                return Err(Error::Timeout(
                    bound,
                    format!(
                        "{count} runs in {namespace} to get there; {reached} did (phases: {phases:?})"
                    ),
                ));
            }
            Ok(None) => return Err(Error::Bench("the watch of the Runs ended".into())),
            Ok(Some(Err(e))) => {
                tracing_free_warn(&format!("watching runs: {e}"));
                continue;
            }
            Ok(Some(Ok(event))) => event,
        };
        match event {
            watcher::Event::Apply(run) | watcher::Event::InitApply(run) => {
                let name = run.metadata.name.clone().unwrap_or_default();
                if name.starts_with(prefix) {
                    seen.insert(name, run);
                }
            }
            watcher::Event::Delete(run) => {
                seen.remove(run.metadata.name.as_deref().unwrap_or_default());
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

/// The benchmark prints progress and warnings on stderr.
fn tracing_free_warn(message: &str) {
    eprintln!("warning: {message}");
}
