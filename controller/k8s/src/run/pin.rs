//! Pinning a Run to its flow: on the first reconcile the Flow's spec is
//! copied into a ConfigMap the Run owns, and the run goes on with that copy
//! whatever happens to the Flow later (edited, deleted). The snapshot's
//! digest is in the status, so a snapshot that changed is refused.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Resource, ResourceExt};

use crate::error::Error;
use crate::names;
use coxswain_core::api::{Flow, FlowSpec, Run};
use coxswain_core::engine::{CompiledFlow, codes};
use coxswain_core::flow::StartProblem;

pub use crate::snapshot::SNAPSHOT_KEY;
use crate::snapshot::{self, Recorded};

/// What pinning found.
pub enum Pinned {
    /// The flow the run goes on with.
    Flow(Arc<CompiledFlow>),
    /// The run cannot start or go on: the error code and the reason, for
    /// its status.
    Refused(&'static str, String),
    /// A ConfigMap under the snapshot's name is not the snapshot the
    /// controller made or would make: nothing runs from it, it is left
    /// alone, and the run fails as tampered with.
    Tampered {
        /// The ConfigMap's name.
        object: String,
        /// What is wrong with it, for the run's status.
        reason: String,
    },
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

/// The flow `run` goes on with: the snapshot its status's `digest` names,
/// checked against that digest; without one (the run starts), the Flow it
/// names, copied into a new snapshot now.
///
/// Nothing is taken by its name alone: anyone who may create ConfigMaps in
/// the namespace can make one under the snapshot's name before the
/// controller does. A snapshot is used only when the flow it holds has the
/// digest the status pinned, or, before anything is pinned, the digest of
/// the Flow the controller itself read.
pub async fn pinned_flow(
    client: &kube::Client,
    cache: &FlowCache,
    run: &Run,
    digest: Option<&str>,
) -> Result<Pinned, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let snapshots: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let pinned = match digest {
        Some(digest) => {
            if let Some(flow) = cache.get(digest) {
                return Ok(Pinned::Flow(flow));
            }
            recorded_snapshot(&snapshots, run, digest).await?
        }
        None => snapshot_flow(client, run, &snapshots).await?,
    };
    if let Pinned::Flow(flow) = &pinned {
        cache.put(flow.clone());
    }
    Ok(pinned)
}

/// The snapshot holding the flow `digest` that the run's status pinned.
async fn recorded_snapshot(
    snapshots: &Api<ConfigMap>,
    run: &Run,
    digest: &str,
) -> Result<Pinned, Error> {
    let found = snapshot::recorded(snapshots, &run.name_any(), digest)
        .await
        .map_err(|e| {
            Error::kube(
                format!("reading the flow snapshot of run {}", run.name_any()),
                e,
            )
        })?;
    Ok(match found {
        Recorded::Flow(flow) => Pinned::Flow(Arc::new(flow)),
        Recorded::Tampered { object, reason } => Pinned::Tampered { object, reason },
        Recorded::Gone(reason) => Pinned::Refused(codes::INTERNAL, reason),
    })
}

fn tampered(name: &str, why: String) -> Pinned {
    Pinned::Tampered {
        object: name.to_string(),
        reason: snapshot::tampered_reason(name, &why),
    }
}

async fn read(snapshots: &Api<ConfigMap>, name: &str) -> Result<Option<ConfigMap>, Error> {
    snapshots
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading the flow snapshot {name}"), e))
}

/// Reads the Flow the run names, checks it and the input, and writes the
/// snapshot; or why the run cannot start (now or ever).
async fn snapshot_flow(
    client: &kube::Client,
    run: &Run,
    snapshots: &Api<ConfigMap>,
) -> Result<Pinned, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let flow_name = &run.spec.flow_ref.name;
    let flows: Api<Flow> = Api::namespaced(client.clone(), &namespace);
    let Some(flow) = flows
        .get_opt(flow_name)
        .await
        .map_err(|e| Error::kube(format!("reading the flow {namespace}/{flow_name}"), e))?
    else {
        return Ok(Pinned::NotYet(format!(
            "the flow `{flow_name}` does not exist in namespace `{namespace}`"
        )));
    };
    let generation = flow.metadata.generation.unwrap_or_default();
    let compiled = match CompiledFlow::start(flow.spec.clone(), run.spec.input.as_ref()) {
        Ok(compiled) => compiled.with_generation(generation),
        Err(problem @ StartProblem::Invalid(_)) => {
            return Ok(Pinned::Refused(
                codes::FLOW_INVALID,
                format!("the flow `{flow_name}` is not valid: {}", problem.list()),
            ));
        }
        Err(problem @ StartProblem::Input(_)) => {
            return Ok(Pinned::Refused(
                codes::INPUT,
                format!(
                    "the run's input does not fit the flow `{flow_name}`: {}",
                    problem.list()
                ),
            ));
        }
    };
    let name = names::flow_snapshot(&run.name_any(), &compiled.get().digest);
    // Made already (by a reconcile whose status write was lost, or by
    // someone else): read before writing, since a create whose answer is
    // lost never says "exists".
    if let Some(existing) = read(snapshots, &name).await? {
        return Ok(adopt(&existing, &name, compiled, flow_name));
    }
    let snapshot = snapshot_object(run, &name, &flow.spec, generation)?;
    match snapshots.create(&PostParams::default(), &snapshot).await {
        Ok(_) => Ok(Pinned::Flow(Arc::new(compiled))),
        // A snapshot of this very flow exists: another reconcile (or a
        // controller before a restart) pinned it first, and its status
        // write was lost. It is taken only if it holds this flow.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let Some(existing) = read(snapshots, &name).await? else {
                // Deleted since: the next reconcile makes it again.
                return Err(Error::Corrupt(format!(
                    "the flow snapshot {namespace}/{name} went away while it was read"
                )));
            };
            Ok(adopt(&existing, &name, compiled, flow_name))
        }
        Err(e) => Err(Error::kube(
            format!("writing the flow snapshot {namespace}/{name}"),
            e,
        )),
    }
}

/// The snapshot ConfigMap `name` of `run`, holding `spec`, owned by the run.
fn snapshot_object(
    run: &Run,
    name: &str,
    spec: &FlowSpec,
    generation: i64,
) -> Result<ConfigMap, Error> {
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: run.namespace(),
            owner_references: run.controller_owner_ref(&()).map(|o| vec![o]),
            labels: Some(names::child_labels(run, "flow")),
            annotations: Some(BTreeMap::from([(
                names::GENERATION_ANNOTATION.to_string(),
                generation.to_string(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            SNAPSHOT_KEY.to_string(),
            serde_json::to_string(spec)
                .map_err(|e| Error::Corrupt(format!("the flow cannot be written as JSON: {e}")))?,
        )])),
        immutable: Some(true),
        ..Default::default()
    })
}

/// For a rerun: `flow` (the old run's pinned flow) copied into a snapshot
/// `run` owns, so the rerun goes on with it after the old run and its
/// snapshot are deleted. A ConfigMap already under that name is taken only
/// when it holds exactly this flow. `Pinned::Flow(flow)` once it is there.
pub async fn copy_snapshot(
    client: &kube::Client,
    run: &Run,
    flow: &Arc<CompiledFlow>,
) -> Result<Pinned, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let snapshots: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let digest = &flow.get().digest;
    let name = names::flow_snapshot(&run.name_any(), digest);
    let check = |existing: &ConfigMap| match snapshot::from_snapshot(existing) {
        Ok(found) if found.get().digest == *digest => Pinned::Flow(flow.clone()),
        Ok(found) => tampered(
            &name,
            format!(
                "holds the flow {}, not the flow {digest} of the run it reruns",
                found.get().digest
            ),
        ),
        Err(why) => tampered(&name, why),
    };
    if let Some(existing) = read(&snapshots, &name).await? {
        return Ok(check(&existing));
    }
    let generation = flow.get().generation.unwrap_or_default();
    let snapshot = snapshot_object(run, &name, flow.spec(), generation)?;
    match snapshots.create(&PostParams::default(), &snapshot).await {
        Ok(_) => Ok(Pinned::Flow(flow.clone())),
        Err(kube::Error::Api(status)) if status.code == 409 => match read(&snapshots, &name).await?
        {
            Some(existing) => Ok(check(&existing)),
            None => Err(Error::Corrupt(format!(
                "the flow snapshot {namespace}/{name} went away while it was read"
            ))),
        },
        Err(e) => Err(Error::kube(
            format!("writing the flow snapshot {namespace}/{name}"),
            e,
        )),
    }
}

/// `compiled` (the Flow as the controller read it), when the snapshot
/// `existing` holds exactly that flow; else why it is not the run's.
fn adopt(existing: &ConfigMap, name: &str, compiled: CompiledFlow, flow_name: &str) -> Pinned {
    match snapshot::from_snapshot(existing) {
        Ok(found) if found.get().digest == compiled.get().digest => {
            Pinned::Flow(Arc::new(compiled))
        }
        Ok(found) => tampered(
            name,
            format!(
                "holds the flow {}, not the flow {} of the Flow `{flow_name}`",
                found.get().digest,
                compiled.get().digest
            ),
        ),
        Err(why) => tampered(name, why),
    }
}
