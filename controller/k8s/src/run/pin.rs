//! Pinning a Run to its flow: on the first reconcile the Flow's spec is
//! copied into a ConfigMap the Run owns, and the run goes on with that copy
//! whatever happens to the Flow later (edited, deleted). The snapshot's
//! digest is in the record, so a snapshot that changed is refused.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use crate::api::{Flow, FlowSpec, Run, StepProblem};
use crate::engine::CompiledFlow;
use crate::error::Error;
use crate::names;

/// The key of the snapshot ConfigMap holding the flow's spec as JSON.
pub const SNAPSHOT_KEY: &str = "flow.json";

/// The annotation on the snapshot naming the Flow generation it copied.
pub const GENERATION_ANNOTATION: &str = "coxswain.dev/flow-generation";

/// What pinning found.
pub enum Pinned {
    /// The flow the run goes on with.
    Flow(Arc<CompiledFlow>),
    /// The run cannot start: the reason, for its record.
    Refused(String),
    /// Not yet: the Flow does not exist (it may be synced after the Run).
    NotYet(String),
}

/// Compiled flows by digest: snapshots never change, so this is only a cache.
#[derive(Default)]
pub struct FlowCache(Mutex<HashMap<String, Arc<CompiledFlow>>>);

/// Most compiled flows kept; the cache starts over past it.
const CACHE_MAX: usize = 512;

impl FlowCache {
    fn get(&self, digest: &str) -> Option<Arc<CompiledFlow>> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(digest)
            .cloned()
    }

    fn put(&self, flow: Arc<CompiledFlow>) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= CACHE_MAX {
            map.clear();
        }
        map.insert(flow.get().digest.clone(), flow);
    }
}

/// The flow `run` goes on with: its snapshot when it has one, else the
/// Flow it names, copied into a new snapshot now.
pub async fn pinned_flow(
    client: &kube::Client,
    cache: &FlowCache,
    run: &Run,
    digest: Option<&str>,
) -> Result<Pinned, Error> {
    if let Some(flow) = digest.and_then(|d| cache.get(d)) {
        return Ok(Pinned::Flow(flow));
    }
    let namespace = run.namespace().unwrap_or_default();
    let name = names::flow_snapshot(&run.name_any());
    let snapshots: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let existing = snapshots
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading the flow snapshot {namespace}/{name}"), e))?;
    let pinned = match existing {
        Some(snapshot) => from_snapshot(&snapshot, &name)?,
        None if digest.is_some() => {
            return Ok(Pinned::Refused(format!(
                "the run's flow snapshot (ConfigMap {name}) is gone, so the run cannot go on \
                 with the flow it started with"
            )));
        }
        None => match snapshot_flow(client, run, &snapshots, &name).await? {
            Ok(flow) => flow,
            Err(not_pinned) => return Ok(not_pinned),
        },
    };
    if let Some(digest) = digest
        && pinned.get().digest != digest
    {
        return Ok(Pinned::Refused(format!(
            "the run's flow snapshot (ConfigMap {name}) holds the flow {}, not the flow {digest} \
             the run started with",
            pinned.get().digest
        )));
    }
    let flow = Arc::new(pinned);
    cache.put(flow.clone());
    Ok(Pinned::Flow(flow))
}

/// Reads a snapshot back.
fn from_snapshot(snapshot: &ConfigMap, name: &str) -> Result<CompiledFlow, Error> {
    let corrupt = |why: String| Error::Corrupt(format!("the flow snapshot {name} {why}"));
    let text = snapshot
        .data
        .as_ref()
        .and_then(|d| d.get(SNAPSHOT_KEY))
        .ok_or_else(|| corrupt(format!("has no `{SNAPSHOT_KEY}`")))?;
    let spec: FlowSpec =
        serde_json::from_str(text).map_err(|e| corrupt(format!("does not hold a flow: {e}")))?;
    let generation = snapshot
        .annotations()
        .get(GENERATION_ANNOTATION)
        .and_then(|g| g.parse().ok());
    let flow = CompiledFlow::new(spec).map_err(|problems| {
        corrupt(format!(
            "holds an invalid flow: {}",
            problems_text(&problems)
        ))
    })?;
    Ok(match generation {
        Some(generation) => flow.with_generation(generation),
        None => flow,
    })
}

/// Reads the Flow the run names, checks it and the input, and writes the
/// snapshot. `Err` carries why the run cannot start (now or ever).
async fn snapshot_flow(
    client: &kube::Client,
    run: &Run,
    snapshots: &Api<ConfigMap>,
    name: &str,
) -> Result<Result<CompiledFlow, Pinned>, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let flow_name = &run.spec.flow_ref.name;
    let flows: Api<Flow> = Api::namespaced(client.clone(), &namespace);
    let Some(flow) = flows
        .get_opt(flow_name)
        .await
        .map_err(|e| Error::kube(format!("reading the flow {namespace}/{flow_name}"), e))?
    else {
        return Ok(Err(Pinned::NotYet(format!(
            "the flow `{flow_name}` does not exist in namespace `{namespace}`"
        ))));
    };
    let generation = flow.metadata.generation.unwrap_or_default();
    let compiled = match CompiledFlow::new(flow.spec.clone()) {
        Ok(compiled) => compiled.with_generation(generation),
        Err(problems) => {
            return Ok(Err(Pinned::Refused(format!(
                "the flow `{flow_name}` is not valid: {}",
                problems_text(&problems)
            ))));
        }
    };
    if let Some(schema) = &flow.spec.input {
        let input = run
            .spec
            .input
            .clone()
            .unwrap_or(Value::Object(Default::default()));
        let problems = crate::flow::check_input(schema, &input);
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            return Ok(Err(Pinned::Refused(format!(
                "the run's input does not fit the flow `{flow_name}`: {}",
                list.join("; ")
            ))));
        }
    }
    let snapshot = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.clone()),
            owner_references: run.controller_owner_ref(&()).map(|o| vec![o]),
            labels: Some(names::child_labels(run, "flow")),
            annotations: Some(BTreeMap::from([(
                GENERATION_ANNOTATION.to_string(),
                generation.to_string(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            SNAPSHOT_KEY.to_string(),
            serde_json::to_string(&flow.spec)
                .map_err(|e| Error::Corrupt(format!("the flow cannot be written as JSON: {e}")))?,
        )])),
        immutable: Some(true),
        ..Default::default()
    };
    match snapshots.create(&PostParams::default(), &snapshot).await {
        Ok(_) => Ok(Ok(compiled)),
        // Another reconcile (or a controller before a restart) pinned it
        // first: go on with what it pinned.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = snapshots
                .get(name)
                .await
                .map_err(|e| Error::kube(format!("reading the flow snapshot {name}"), e))?;
            Ok(Ok(from_snapshot(&existing, name)?))
        }
        Err(e) => Err(Error::kube(
            format!("writing the flow snapshot {namespace}/{name}"),
            e,
        )),
    }
}

/// Validation problems on one line, each with its step, field and character.
pub fn problems_text(problems: &[StepProblem]) -> String {
    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
    list.join("; ")
}
