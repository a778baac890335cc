//! Writing a run's status: one write per reconcile, with the conditions
//! people and tools read (`Running`, `Succeeded`), and only when something
//! changed, so the controller's own write does not start a storm.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::error::Error;
use coxswain_core::api::conditions::{
    FALSE, REASON_FLOW_NOT_FOUND, RUNNING, SUCCEEDED, TRUE, UNKNOWN,
};
use coxswain_core::api::{Run, RunPhase, RunStatus};

/// Sets `observedGeneration` and the conditions on `status`, keeping each
/// condition's transition time unless its status changed.
pub fn set_conditions(status: &mut RunStatus, generation: Option<i64>, now: Timestamp) {
    let over = status.phase.is_over();
    let phase = format!("{:?}", status.phase);
    let message = match (&status.error, &status.current_step) {
        (Some(error), _) => error.message.clone(),
        (None, Some(step)) if !over => format!("at step {step}"),
        _ => String::new(),
    };
    let running = (if over { FALSE } else { TRUE }).to_string();
    let succeeded = match status.phase {
        RunPhase::Succeeded => TRUE,
        RunPhase::Failed | RunPhase::Cancelled => FALSE,
        _ => UNKNOWN,
    }
    .to_string();
    let wanted = [(RUNNING, running), (SUCCEEDED, succeeded)];
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

/// Marks a run that cannot start yet because its Flow is missing: the
/// `Running` condition is False with the reason, and the run stays Pending.
pub fn set_flow_missing(
    status: &mut RunStatus,
    generation: Option<i64>,
    now: Timestamp,
    why: &str,
) {
    let since = status
        .conditions
        .iter()
        .find(|c| c.type_ == RUNNING && c.status == FALSE && c.reason == REASON_FLOW_NOT_FOUND)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    status.conditions = vec![Condition {
        type_: RUNNING.into(),
        status: FALSE.into(),
        reason: REASON_FLOW_NOT_FOUND.into(),
        message: why.to_string(),
        observed_generation: generation,
        last_transition_time: since,
    }];
    status.observed_generation = generation;
}

/// The record in the form the Run's status stores.
pub fn stored(status: &RunStatus) -> Result<Value, Error> {
    serde_json::to_value(status)
        .map_err(|e| Error::Corrupt(format!("the run's record cannot be written as JSON: {e}")))
}

/// Writes `status` (its stored form) to the Run with the resource version
/// the reconcile read: a write based on a stale read fails with a
/// conflict instead of undoing a newer record, and the reconcile runs again.
///
/// A write whose answer was lost (a 5xx, a dropped connection) may still
/// have been applied. The Run is then read back: when it holds this record
/// under a new resource version, the write counts as done, so what follows
/// a write (the transition's Events and metrics, marking answers consumed)
/// is not skipped by a reconcile that would find nothing left to do.
pub async fn write(client: &kube::Client, run: &Run, status: Value) -> Result<Run, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let name = run.name_any();
    let resource = ApiResource::erase::<Run>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let mut object = DynamicObject::new(&name, &resource).within(&namespace);
    object.metadata.resource_version = run.resource_version();
    object.data = json!({ "status": status });
    // Named in the Run's managedFields (else "unknown").
    let params = PostParams {
        field_manager: Some(crate::names::FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let written = match api.replace_status(&name, &params, &object).await {
        Ok(written) => written,
        Err(e) => {
            let landed = if may_have_landed(&e) {
                read_back(&api, run, &status).await
            } else {
                None
            };
            match landed {
                Some(written) => {
                    tracing::info!(run = %name, %namespace, error = %e, "the status write's answer was lost, but the record holds it");
                    written
                }
                None => {
                    return Err(Error::kube(
                        format!("writing the status of run {namespace}/{name}"),
                        e,
                    ));
                }
            }
        }
    };
    written
        .try_parse::<Run>()
        .map_err(|e| Error::Corrupt(format!("the run {namespace}/{name} as written: {e}")))
}

/// Whether a failed request may have been applied all the same: the API
/// server failed after taking it (a 5xx) or its answer never arrived. A
/// refusal (409, 422, 404…) or a request that was never built was not.
fn may_have_landed(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code >= 500,
        kube::Error::HyperError(_)
        | kube::Error::Service(_)
        | kube::Error::ReadEvents(_)
        | kube::Error::SerdeError(_) => true,
        _ => false,
    }
}

/// The Run as it is now, if it holds `status` under another resource
/// version than `run`'s: the write that carried `status` was applied.
async fn read_back(api: &Api<DynamicObject>, run: &Run, status: &Value) -> Option<DynamicObject> {
    let now = api.get_opt(&run.name_any()).await.ok()??;
    if now.metadata.resource_version == run.resource_version() {
        return None;
    }
    same_status(now.data.get("status")?, status).then_some(now)
}

/// Whether two stored records say the same, compared as records: the API
/// server may drop nulls or order keys otherwise than they were sent.
fn same_status(kept: &Value, sent: &Value) -> bool {
    let read = |v: &Value| serde_json::from_value::<RunStatus>(v.clone()).ok();
    matches!((read(kept), read(sent)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_the_same_without_its_nulls_and_not_with_another_phase() {
        let sent = json!({"phase": "Running", "error": null, "steps": {}});
        let kept = json!({"steps": {}, "phase": "Running"});
        assert!(same_status(&kept, &sent));
        assert!(!same_status(&json!({"phase": "Succeeded"}), &sent));
        assert!(!same_status(&json!("not a record"), &sent));
    }

    #[test]
    fn only_failures_that_may_have_been_applied_are_read_back() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        assert!(may_have_landed(&api(500)));
        assert!(may_have_landed(&api(503)));
        assert!(!may_have_landed(&api(409)));
        assert!(!may_have_landed(&api(422)));
        let cut = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(may_have_landed(&kube::Error::ReadEvents(cut)));
    }

    #[test]
    fn conditions_keep_their_time_until_their_status_changes() {
        let t1: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let t2: Timestamp = "2026-01-01T00:05:00Z".parse().expect("time");
        let mut status = RunStatus {
            phase: RunPhase::Running,
            ..Default::default()
        };
        set_conditions(&mut status, Some(1), t1);
        status.phase = RunPhase::Waiting;
        set_conditions(&mut status, Some(1), t2);
        let running = &status.conditions[0];
        assert_eq!(
            (running.type_.as_str(), running.status.as_str()),
            ("Running", "True")
        );
        assert_eq!(
            running.last_transition_time,
            Time(t1),
            "still running: time kept"
        );
        assert_eq!(running.reason, "Waiting");
        status.phase = RunPhase::Succeeded;
        set_conditions(&mut status, Some(1), t2);
        assert_eq!(status.conditions[0].status, "False");
        assert_eq!(status.conditions[0].last_transition_time, Time(t2));
        assert_eq!(status.conditions[1].status, "True");
        assert_eq!(status.observed_generation, Some(1));
    }
}
