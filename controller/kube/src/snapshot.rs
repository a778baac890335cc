//! Reading back the flow a Run pinned: the snapshot ConfigMap named by the
//! digest in the Run's status, taken only when it holds a flow of exactly
//! that digest. The controller goes on with it; admission reads it to judge
//! a rerun; neither writes here, so this module reconciles nothing.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt};

use crate::names;
use coxswain_core::api::FlowSpec;
use coxswain_core::engine::CompiledFlow;
use coxswain_core::flow::one_line;

/// The key of the snapshot ConfigMap holding the flow's spec as JSON.
pub const SNAPSHOT_KEY: &str = "flow.json";

/// What stands where a run's snapshot goes.
pub enum Recorded {
    /// The flow the run pinned.
    Flow(CompiledFlow),
    /// A ConfigMap under the snapshot's name that is not the snapshot.
    Tampered {
        /// The ConfigMap's name.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing: the snapshot is gone.
    Gone(String),
}

/// The snapshot holding the flow `digest` that run `run`'s status pinned:
/// the one its flow version's runs share, else the run's own (made when
/// the shared one was not a snapshot), else the name runs pinned before
/// snapshots were named by digest. Names only say where to look: a
/// ConfigMap is taken only when it holds a flow of exactly that digest, so
/// one that does not is passed over for the next; it is reported only when
/// none holds the flow.
pub async fn recorded(
    snapshots: &Api<ConfigMap>,
    run: &str,
    digest: &str,
) -> Result<Recorded, kube::Error> {
    let names = [
        names::shared_flow_snapshot(digest),
        names::flow_snapshot(run, digest),
        names::legacy_flow_snapshot(run),
    ];
    let mut wrong = None;
    for name in &names {
        let Some(snapshot) = snapshots.get_opt(name).await? else {
            continue;
        };
        match holding(&snapshot, digest, "the run started with") {
            Ok(flow) => return Ok(Recorded::Flow(flow)),
            Err(why) => {
                wrong.get_or_insert_with(|| tampered(name, why));
            }
        }
    }
    Ok(wrong.unwrap_or_else(|| {
        Recorded::Gone(format!(
            "the run's flow snapshot (ConfigMap {} or {}) is gone, so the run cannot go on \
             with the flow it started with",
            names[0], names[1]
        ))
    }))
}

fn tampered(name: &str, why: String) -> Recorded {
    Recorded::Tampered {
        object: name.to_string(),
        reason: tampered_reason(name, &why),
    }
}

/// What a run's status says of a ConfigMap under its snapshot's name that
/// is not the snapshot (`why`).
pub fn tampered_reason(name: &str, why: &str) -> String {
    format!(
        "the ConfigMap {name} stands where the run's flow snapshot goes but {why}; \
         Coxswain did not write it, so nothing runs from it (it was left alone)"
    )
}

/// The flow `snapshot` holds when it is the flow `digest` (`whose` says
/// whose flow that is, for the message); `Err` says why it is not.
pub fn holding(snapshot: &ConfigMap, digest: &str, whose: &str) -> Result<CompiledFlow, String> {
    let flow = from_snapshot(snapshot)?;
    if flow.get().digest == digest {
        return Ok(flow);
    }
    Err(format!(
        "holds the flow {}, not the flow {digest} {whose}",
        flow.get().digest
    ))
}

/// Reads a snapshot back; `Err` says why it is not one.
pub fn from_snapshot(snapshot: &ConfigMap) -> Result<CompiledFlow, String> {
    let text = snapshot
        .data
        .as_ref()
        .and_then(|d| d.get(SNAPSHOT_KEY))
        .ok_or_else(|| format!("has no `{SNAPSHOT_KEY}`"))?;
    let spec: FlowSpec =
        serde_json::from_str(text).map_err(|e| format!("does not hold a flow: {e}"))?;
    let generation = snapshot
        .annotations()
        .get(names::GENERATION_ANNOTATION)
        .and_then(|g| g.parse().ok());
    let flow = CompiledFlow::new(spec)
        .map_err(|problems| format!("holds an invalid flow: {}", one_line(&problems)))?;
    Ok(match generation {
        Some(generation) => flow.with_generation(generation),
        None => flow,
    })
}
