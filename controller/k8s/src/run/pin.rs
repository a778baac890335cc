//! Pinning a Run to its flow: on the first reconcile the Flow's spec is
//! copied into a snapshot ConfigMap, and the run goes on with that copy
//! whatever happens to the Flow later (edited, deleted). The snapshot's
//! digest is in the status, so a snapshot that changed is refused. Runs of
//! one flow version share one snapshot named by its digest; a run makes its
//! own only when something else stands under the shared name.

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
    /// The compiled flow of `digest`, when this process has it.
    pub fn get(&self, digest: &str) -> Option<Arc<CompiledFlow>> {
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
            recorded_snapshot(client, &snapshots, run, digest).await?
        }
        None => snapshot_flow(client, run, &snapshots).await?,
    };
    if let Pinned::Flow(flow) = &pinned {
        cache.put(flow.clone());
    }
    Ok(pinned)
}

/// The snapshot holding the flow `digest` that the run's status pinned
/// (made again from the Flow when it is gone and the Flow is unchanged).
async fn recorded_snapshot(
    client: &kube::Client,
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
        Recorded::Gone(reason) => remade(client, run, snapshots, digest, reason).await?,
    })
}

async fn read(snapshots: &Api<ConfigMap>, name: &str) -> Result<Option<ConfigMap>, Error> {
    snapshots
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading the flow snapshot {name}"), e))
}

/// The snapshot a running run pinned was deleted (by hand, or by the
/// garbage collector through an owner someone else gave it): when the Flow
/// the run names still holds exactly the flow pinned (the same digest), it
/// is snapshotted again and the run goes on; else the run cannot, and
/// `gone` says why, with what changed.
async fn remade(
    client: &kube::Client,
    run: &Run,
    snapshots: &Api<ConfigMap>,
    digest: &str,
    gone: String,
) -> Result<Pinned, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let flow_name = &run.spec.flow_ref.name;
    let flows: Api<Flow> = Api::namespaced(client.clone(), &namespace);
    let found = flows
        .get_opt(flow_name)
        .await
        .map_err(|e| Error::kube(format!("reading the flow {namespace}/{flow_name}"), e))?;
    let Some(flow) = found else {
        return Ok(Pinned::Refused(
            codes::INTERNAL,
            format!("{gone}; it cannot be made again: the flow `{flow_name}` is gone too"),
        ));
    };
    let compiled = match CompiledFlow::new(flow.spec.clone()) {
        Ok(compiled) if compiled.get().digest == digest => compiled,
        _ => {
            return Ok(Pinned::Refused(
                codes::INTERNAL,
                format!(
                    "{gone}; it cannot be made again: the flow `{flow_name}` has changed since \
                     the run started (it is not the flow {digest} any more)"
                ),
            ));
        }
    };
    let generation = run
        .status
        .as_ref()
        .and_then(|s| s.flow_generation)
        .or(flow.metadata.generation)
        .unwrap_or_default();
    let compiled = Arc::new(compiled.with_generation(generation));
    tracing::warn!(
        run = %run.name_any(),
        flow = %flow_name,
        "the run's flow snapshot was gone; made again from the flow, which has not changed"
    );
    let source = format!("of the Flow `{flow_name}`");
    keep(snapshots, run, &compiled, &flow.spec, generation, &source).await
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
    let source = format!("of the Flow `{flow_name}`");
    keep(
        snapshots,
        run,
        &Arc::new(compiled),
        &flow.spec,
        generation,
        &source,
    )
    .await
}

/// For a rerun: `flow` (the old run's pinned flow) kept in a snapshot that
/// outlives the old run (the shared one of its digest, or one `run` owns),
/// so the rerun goes on with it after the old run is deleted.
/// `Pinned::Flow(flow)` once it is there.
pub async fn copy_snapshot(
    client: &kube::Client,
    run: &Run,
    flow: &Arc<CompiledFlow>,
) -> Result<Pinned, Error> {
    let snapshots: Api<ConfigMap> =
        Api::namespaced(client.clone(), &run.namespace().unwrap_or_default());
    let generation = flow.get().generation.unwrap_or_default();
    keep(
        &snapshots,
        run,
        flow,
        flow.spec(),
        generation,
        "of the run it reruns",
    )
    .await
}

/// Makes sure a snapshot of `flow` stands for `run`: the shared one of its
/// digest (made now when missing, the leader's removal mark taken off when
/// it has one), or, when a ConfigMap that is not this flow stands under the
/// shared name, the run's own. That one is left alone, and noted in the
/// log: a namespace member who made it cannot hold runs back by it, and
/// nothing runs from it. `source` names where `flow` came from (`of …`).
async fn keep(
    snapshots: &Api<ConfigMap>,
    run: &Run,
    flow: &Arc<CompiledFlow>,
    spec: &FlowSpec,
    generation: i64,
    source: &str,
) -> Result<Pinned, Error> {
    let digest = &flow.get().digest;
    let shared = names::shared_flow_snapshot(digest);
    let made = || shared_object(run, &shared, spec, generation);
    match ensure(snapshots, &shared, made, digest, source).await? {
        Kept::Flow(existing) => {
            unmark(snapshots, *existing).await?;
            return Ok(Pinned::Flow(flow.clone()));
        }
        Kept::Other(why) => tracing::warn!(
            run = %run.name_any(),
            reason = %snapshot::tampered_reason(&shared, &why),
            "the shared flow snapshot is not this flow: the run keeps a snapshot of its own"
        ),
    }
    let own = names::flow_snapshot(&run.name_any(), digest);
    let made = || snapshot_object(run, &own, spec, generation);
    Ok(match ensure(snapshots, &own, made, digest, source).await? {
        Kept::Flow(_) => Pinned::Flow(flow.clone()),
        Kept::Other(why) => Pinned::Tampered {
            reason: snapshot::tampered_reason(&own, &why),
            object: own,
        },
    })
}

/// What stands under a snapshot's name.
enum Kept {
    /// The snapshot of the flow looked for.
    Flow(Box<ConfigMap>),
    /// Something else: why it is not that flow.
    Other(String),
}

/// The ConfigMap `name`, made by `make` when missing, checked to hold the
/// flow `digest`. It is read before it is made, since a create whose answer
/// is lost never says "exists" (a reconcile whose status write was lost, a
/// controller before a restart, or anyone else may have made it).
async fn ensure(
    snapshots: &Api<ConfigMap>,
    name: &str,
    make: impl FnOnce() -> Result<ConfigMap, Error>,
    digest: &str,
    source: &str,
) -> Result<Kept, Error> {
    if let Some(existing) = read(snapshots, name).await? {
        return Ok(check(existing, digest, source));
    }
    match snapshots.create(&PostParams::default(), &make()?).await {
        Ok(created) => Ok(Kept::Flow(Box::new(created))),
        Err(kube::Error::Api(status)) if status.code == 409 => match read(snapshots, name).await? {
            Some(existing) => Ok(check(existing, digest, source)),
            // Deleted since: the next reconcile makes it again.
            None => Err(Error::Corrupt(format!(
                "the flow snapshot {name} went away while it was read"
            ))),
        },
        Err(e) => Err(Error::kube(format!("writing the flow snapshot {name}"), e)),
    }
}

/// `Kept::Flow` when `existing` holds the flow `digest`, else why not.
fn check(existing: ConfigMap, digest: &str, source: &str) -> Kept {
    match snapshot::holding(&existing, digest, source) {
        Ok(_) => Kept::Flow(Box::new(existing)),
        Err(why) => Kept::Other(why),
    }
}

/// Takes the leader's removal mark off a shared snapshot a run pins now.
/// The write is made on the version read, and the leader removes only the
/// marked version it saw: one of the two is refused, never both taken.
/// A refusal here fails the reconcile, and the next one pins afresh.
async fn unmark(snapshots: &Api<ConfigMap>, existing: ConfigMap) -> Result<(), Error> {
    if !existing
        .annotations()
        .contains_key(names::UNREFERENCED_ANNOTATION)
    {
        return Ok(());
    }
    let name = existing.name_any();
    crate::snapshots::set_mark(snapshots, existing, None)
        .await
        .map_err(|e| Error::kube(format!("keeping the flow snapshot {name}"), e))
}

/// The shared snapshot `name` of the flow version `spec`: owned by no run
/// (runs of that version come and go; the leader removes it once no Run
/// names its digest), labelled with the Flow it was first made for.
fn shared_object(
    run: &Run,
    name: &str,
    spec: &FlowSpec,
    generation: i64,
) -> Result<ConfigMap, Error> {
    let mut made = snapshot_object(run, name, spec, generation)?;
    made.metadata.owner_references = None;
    made.metadata.labels = Some(BTreeMap::from([
        (
            names::ROLE_LABEL.to_string(),
            names::ROLE_SHARED_SNAPSHOT.to_string(),
        ),
        (
            names::FLOW_LABEL.to_string(),
            names::flow_label(&run.spec.flow_ref.name),
        ),
    ]));
    Ok(made)
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
