//! Writing a run's record: one write per reconcile, with the conditions
//! people and tools read (`Running`, `Succeeded`), and only when something
//! changed, so the controller's own write does not start a storm.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::api::{Run, RunPhase, RunStatus};
use crate::error::Error;

/// Whether the run has ended.
pub fn is_over(phase: RunPhase) -> bool {
    matches!(
        phase,
        RunPhase::Succeeded | RunPhase::Failed | RunPhase::Cancelled
    )
}

/// Sets `observedGeneration` and the conditions on `status`, keeping each
/// condition's transition time unless its status changed.
pub fn set_conditions(status: &mut RunStatus, generation: Option<i64>, now: Timestamp) {
    let over = is_over(status.phase);
    let phase = format!("{:?}", status.phase);
    let message = match (&status.error, &status.current_step) {
        (Some(error), _) => error.message.clone(),
        (None, Some(step)) if !over => format!("at step {step}"),
        _ => String::new(),
    };
    let running = (if over { "False" } else { "True" }).to_string();
    let succeeded = match status.phase {
        RunPhase::Succeeded => "True",
        RunPhase::Failed | RunPhase::Cancelled => "False",
        _ => "Unknown",
    }
    .to_string();
    let wanted = [("Running", running), ("Succeeded", succeeded)];
    let mut conditions = Vec::with_capacity(wanted.len());
    for (kind, value) in wanted {
        let old = status.conditions.iter().find(|c| c.type_ == kind);
        let since = match old {
            Some(old) if old.status == value => old.last_transition_time.clone(),
            _ => Time(now),
        };
        conditions.push(Condition {
            type_: kind.to_string(),
            status: value,
            reason: phase.clone(),
            message: message.clone(),
            observed_generation: generation,
            last_transition_time: since,
        });
    }
    status.conditions = conditions;
    status.observed_generation = generation;
}

/// Writes `status` (its stored form) to the Run with the resource version
/// the reconcile read: a write based on a stale read fails with a
/// conflict instead of undoing a newer record, and the reconcile runs again.
pub async fn write(client: &kube::Client, run: &Run, status: Value) -> Result<Run, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let name = run.name_any();
    let resource = ApiResource::erase::<Run>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let mut object = DynamicObject::new(&name, &resource).within(&namespace);
    object.metadata.resource_version = run.resource_version();
    object.data = json!({ "status": status });
    let written = api
        .replace_status(&name, &PostParams::default(), &object)
        .await
        .map_err(|e| Error::kube(format!("writing the status of run {namespace}/{name}"), e))?;
    written
        .try_parse::<Run>()
        .map_err(|e| Error::Corrupt(format!("the run {namespace}/{name} as written: {e}")))
}
