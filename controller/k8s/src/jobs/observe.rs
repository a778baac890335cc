//! Reading what became of an attempt from its Job and its pod, without
//! calling anything: the launcher fetches, these functions decide.
//!
//! Failures of the pod itself get errors that say what happened: the Job's
//! deadline is the step's timeout (`workflow.timeout`, worded as the local
//! runner words it), an image that cannot be pulled or a container that
//! cannot be made is `workflow.internal_error` with the kubelet's reason (a
//! Secret the step's `env` names but that is missing is
//! `workflow.secret_error`), a wrapper that died without a result gives the
//! container's reason (`OOMKilled`, a signal) and exit code.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::manifest::{INSTALL_CONTAINER, STEP_CONTAINER};
use super::wire::{self, Decoded, LogRef, WireResult};
use crate::names::TIMEOUT_ANNOTATION;
use coxswain_core::api::StepError;
use coxswain_core::engine::{codes, step_error};
use coxswain_steps::script::ScriptError;

/// Where a Job stands.
#[derive(Debug, Clone, PartialEq)]
pub enum JobState {
    /// Still running; `starting` when its pod exists but does not run yet
    /// (then the pod may be stuck, and is worth reading).
    Active {
        /// A pod exists and none is ready.
        starting: bool,
    },
    /// It ran into its deadline: the step's timeout.
    TimedOut(StepError),
    /// It ended (`Complete` or `Failed`); the pod says how.
    Ended {
        /// The Job's own account, for when the pod is gone.
        condition: String,
    },
}

/// Where `job` stands.
pub fn read_job(job: &Job) -> JobState {
    let status = job.status.clone().unwrap_or_default();
    let conditions = || {
        status
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.status == "True")
    };
    // The Job controller says `FailureTarget` before it stops the pod and
    // `Failed` only once the pod is gone: a deadline counts from the first.
    let deadline = conditions().any(|c| {
        (c.type_ == "Failed" || c.type_ == "FailureTarget")
            && c.reason.as_deref() == Some("DeadlineExceeded")
    });
    if deadline {
        return JobState::TimedOut(ScriptError::Timeout(timeout_of(job)).into());
    }
    let ended = conditions().find(|c| c.type_ == "Complete" || c.type_ == "Failed");
    match ended {
        Some(c) => JobState::Ended {
            condition: format!(
                "{} ({}: {})",
                c.type_,
                c.reason.as_deref().unwrap_or("no reason"),
                c.message.as_deref().unwrap_or("no message")
            ),
        },
        None => JobState::Active {
            starting: status.active.unwrap_or(0) > 0 && status.ready.unwrap_or(0) == 0,
        },
    }
}

/// The attempt's timeout, as the Job was given it.
fn timeout_of(job: &Job) -> Duration {
    let annotated = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TIMEOUT_ANNOTATION))
        .and_then(|ms| ms.parse::<u64>().ok())
        .map(Duration::from_millis);
    let deadline = job
        .spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs);
    annotated.or(deadline).unwrap_or_default()
}

/// What a pod says of its attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// Nothing yet: it starts or runs.
    Running,
    /// The wrapper's result.
    Result(WireResult),
    /// The wrapper's result is in the step container's log.
    InLog(LogRef),
    /// The pod failed before or around the wrapper.
    Failed(StepError),
}

/// The wrapper's result in a pod whose step container has ended, before
/// its Job says so (the Job controller gathers pod changes for up to a
/// second before it writes the Job's end): with `backoffLimit: 0` and
/// `restartPolicy: Never` the first pod's end is the attempt's. A pod being
/// deleted is left to its Job, which may be stopping it for its deadline.
pub fn early_result(pod: &Pod) -> Option<Reading> {
    early_result_of(pod, STEP_CONTAINER)
}

/// [`early_result`] for the step in `container` (a later member of a
/// script chain has a container of its own in the chain's pod).
pub fn early_result_of(pod: &Pod, container: &str) -> Option<Reading> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    match read_container(pod, container) {
        reading @ (Reading::Result(_) | Reading::InLog(_)) => Some(reading),
        Reading::Running | Reading::Failed(_) => None,
    }
}

/// Whether a watched pod's change may end an attempt now, so its Run is
/// worth reconciling: a step's container ended (the step's own, or a
/// later chain member's), or the pod did.
pub fn pod_ended(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let step_ended = status.container_statuses.iter().flatten().any(|c| {
        let a_step = c.name == STEP_CONTAINER || c.name.starts_with("next-");
        a_step && c.state.as_ref().is_some_and(|s| s.terminated.is_some())
    });
    step_ended || matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// Waiting reasons after which a container will not start by itself in any
/// useful time: the attempt fails with the kubelet's words.
const STUCK: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// What `pod` says of its attempt.
pub fn read_pod(pod: &Pod) -> Reading {
    read_container(pod, STEP_CONTAINER)
}

/// What `pod` says of the attempt that runs in `container`: its result
/// once it ended, or why the pod will not run it. Other step containers
/// (a chain's later members) are not this attempt's business.
pub fn read_container(pod: &Pod, container: &str) -> Reading {
    let status = pod.status.clone().unwrap_or_default();
    let step = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container);
    if let Some(reading) = step.and_then(ended_step) {
        return reading;
    }
    for init in status.init_container_statuses.iter().flatten() {
        if let Some(t) = init.state.as_ref().and_then(|s| s.terminated.as_ref())
            && t.exit_code != 0
        {
            return Reading::Failed(step_error(
                codes::INTERNAL,
                format!(
                    "the step's pod could not start: init container `{INSTALL_CONTAINER}` ended with {}{}",
                    how(t.reason.as_deref(), t.exit_code, t.signal),
                    tail(t.message.as_deref())
                ),
            ));
        }
    }
    let waiting = status.init_container_statuses.iter().flatten().chain(step);
    for c in waiting {
        if let Some(failed) = stuck(c) {
            return Reading::Failed(failed);
        }
    }
    if status.phase.as_deref() == Some("Failed") {
        return Reading::Failed(step_error(
            codes::INTERNAL,
            format!(
                "the step's pod failed: {}{}",
                status.reason.as_deref().unwrap_or("no reason given"),
                tail(status.message.as_deref())
            ),
        ));
    }
    Reading::Running
}

/// The step container's end, when it has ended.
fn ended_step(c: &ContainerStatus) -> Option<Reading> {
    let t = c.state.as_ref()?.terminated.as_ref()?;
    let message = t.message.as_deref().unwrap_or_default();
    Some(match wire::decode_message(message) {
        Some(Decoded::Result(result)) => Reading::Result(result),
        Some(Decoded::InLog(reference)) => Reading::InLog(reference),
        None => Reading::Failed(step_error(
            codes::INTERNAL,
            format!(
                "the step's wrapper ended without a result: container `{}` ended with {}{}",
                c.name,
                how(t.reason.as_deref(), t.exit_code, t.signal),
                tail(Some(message))
            ),
        )),
    })
}

/// A container waiting for a reason it will not get past.
fn stuck(c: &ContainerStatus) -> Option<StepError> {
    let waiting = c.state.as_ref()?.waiting.as_ref()?;
    let reason = waiting.reason.as_deref()?;
    if !STUCK.contains(&reason) {
        return None;
    }
    let message = waiting.message.as_deref().unwrap_or_default();
    let code =
        if reason == "CreateContainerConfigError" && message.to_lowercase().contains("secret") {
            codes::SECRET
        } else {
            codes::INTERNAL
        };
    Some(step_error(
        code,
        format!(
            "the step's pod could not start: container `{}` is waiting ({reason}){}",
            c.name,
            tail(Some(message))
        ),
    ))
}

/// `reason, exit code N` (and the signal, when there was one).
fn how(reason: Option<&str>, exit_code: i32, signal: Option<i32>) -> String {
    let mut how = format!("{}, exit code {exit_code}", reason.unwrap_or("no reason"));
    if let Some(signal) = signal.filter(|s| *s != 0) {
        how.push_str(&format!(", signal {signal}"));
    }
    how
}

/// `: message` (its last 2 KiB), or nothing for no message.
fn tail(message: Option<&str>) -> String {
    let message = message.unwrap_or_default().trim();
    if message.is_empty() {
        return String::new();
    }
    const KEEP: usize = 2048;
    let mut start = message.len().saturating_sub(KEEP);
    while !message.is_char_boundary(start) {
        start += 1;
    }
    format!(": {}", &message[start..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(status: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "j", "annotations": {TIMEOUT_ANNOTATION: "1500"}},
            "spec": {"activeDeadlineSeconds": 2, "template": {}},
            "status": status,
        }))
        .expect("a job")
    }

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).expect("a pod")
    }

    /// What is read of a pod in `phase` whose step container (of `image`)
    /// is in `state`.
    fn read_step(phase: &str, image: &str, state: serde_json::Value) -> Reading {
        read_pod(&pod(json!({"phase": phase, "containerStatuses": [{
            "name": "step", "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": state
        }]})))
    }

    /// The error of a reading that must be a failure.
    fn failure(reading: Reading) -> StepError {
        let Reading::Failed(error) = reading else {
            panic!("failure expected: {reading:?}");
        };
        error
    }

    #[test]
    fn the_deadline_is_the_timeout_worded_as_locally() {
        let state = read_job(&job(json!({"conditions": [
            {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}
        ]})));
        let JobState::TimedOut(error) = state else {
            panic!("timed out expected: {state:?}");
        };
        assert_eq!(error.code, codes::TIMEOUT);
        assert_eq!(
            error.message,
            "the script ran longer than its timeout of 1500ms and was stopped"
        );
    }

    #[test]
    fn an_active_job_is_starting_until_its_pod_is_ready() {
        let starting = read_job(&job(json!({"active": 1, "ready": 0})));
        assert_eq!(starting, JobState::Active { starting: true });
        let running = read_job(&job(json!({"active": 1, "ready": 1})));
        assert_eq!(running, JobState::Active { starting: false });
        let ended = read_job(&job(json!({"conditions": [
            {"type": "Complete", "status": "True"}
        ]})));
        assert!(matches!(ended, JobState::Ended { .. }), "{ended:?}");
    }

    #[test]
    fn an_image_that_cannot_be_pulled_fails_with_the_kubelets_reason() {
        let reading = read_step(
            "Pending",
            "nope:1",
            json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope:1\""}}),
        );
        let error = failure(reading);
        assert_eq!(error.code, codes::INTERNAL);
        assert!(
            error.message.contains("ImagePullBackOff"),
            "{}",
            error.message
        );
        assert!(error.message.contains("nope:1"), "{}", error.message);
    }

    #[test]
    fn a_missing_secret_is_a_secret_error() {
        let reading = read_step(
            "Pending",
            "i",
            json!({"waiting": {"reason": "CreateContainerConfigError", "message": "secret \"api\" not found"}}),
        );
        assert!(
            matches!(&reading, Reading::Failed(e) if e.code == codes::SECRET),
            "{reading:?}"
        );
    }

    #[test]
    fn a_killed_wrapper_gives_the_containers_reason() {
        let reading = read_step(
            "Failed",
            "i",
            json!({"terminated": {"reason": "OOMKilled", "exitCode": 137}}),
        );
        let error = failure(reading);
        assert_eq!(error.code, codes::INTERNAL);
        assert!(
            error.message.contains("OOMKilled, exit code 137"),
            "{}",
            error.message
        );
    }

    #[test]
    fn the_wrappers_message_is_the_result() {
        let message = wire::encode(&WireResult {
            output: Some(json!(1)),
            text: Some("1".into()),
            error: None,
            log: None,
            ..WireResult::default()
        })
        .message;
        let reading = read_step(
            "Succeeded",
            "i",
            json!({"terminated": {"reason": "Completed", "exitCode": 0, "message": message}}),
        );
        assert!(
            matches!(&reading, Reading::Result(r) if r.output == Some(json!(1))),
            "{reading:?}"
        );
    }

    #[test]
    fn a_deadline_counts_once_the_job_controller_aims_at_failure() {
        let state = read_job(&job(json!({"active": 1, "ready": 1, "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"}
        ]})));
        assert!(matches!(state, JobState::TimedOut(_)), "{state:?}");
        let other = read_job(&job(json!({"active": 1, "ready": 1, "conditions": [
            {"type": "FailureTarget", "status": "False", "reason": "DeadlineExceeded"}
        ]})));
        assert_eq!(other, JobState::Active { starting: false });
    }

    #[test]
    fn a_result_is_taken_from_an_ended_pod_before_its_job_ends_unless_the_pod_is_deleted() {
        let message = wire::encode(&WireResult {
            output: Some(json!(2)),
            text: Some("2".into()),
            error: None,
            log: None,
            ..WireResult::default()
        })
        .message;
        let ended = |phase: &str| {
            pod(json!({"phase": phase, "containerStatuses": [{
                "name": "step", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"reason": "Completed", "exitCode": 0, "message": message}}
            }]}))
        };
        // The kubelet may say the container ended before the pod's phase.
        for phase in ["Running", "Succeeded"] {
            let pod = ended(phase);
            assert!(pod_ended(&pod));
            let early = early_result(&pod);
            assert!(
                matches!(&early, Some(Reading::Result(r)) if r.output == Some(json!(2))),
                "{early:?}"
            );
        }
        let mut deleted = ended("Running");
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_eq!(early_result(&deleted), None);
        // Running, or ended without a result: the Job has the last word.
        let running = pod(json!({"phase": "Running", "containerStatuses": [{
            "name": "step", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {}}
        }]}));
        assert!(!pod_ended(&running));
        assert_eq!(early_result(&running), None);
        let killed = pod(json!({"phase": "Failed", "containerStatuses": [{
            "name": "step", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
        }]}));
        assert!(pod_ended(&killed));
        assert_eq!(early_result(&killed), None);
    }
}
