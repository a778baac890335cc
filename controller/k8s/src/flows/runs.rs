//! What a Flow's Runs tell its reconciler (the latest one, the scheduled ones
//! still going, the slots already started, when the last success started),
//! and the Run a schedule starts for a slot. Pure: the reconciler hands in
//! the Runs its cache holds.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::{Flow, FlowRef, Run, RunPhase, RunSpec};
use crate::names;

/// What the Runs of one Flow say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// The newest Run of the flow, scheduled or not.
    pub last_run: Option<String>,
    /// Scheduled Runs that have not finished, oldest first.
    pub active: Vec<String>,
    /// The newest slot a scheduled Run was started for.
    pub last_slot: Option<Timestamp>,
    /// When the newest scheduled Run that ended Succeeded started.
    pub last_success_start: Option<Timestamp>,
}

/// Whether a Run was started by its flow's schedule.
pub fn scheduled_slot(run: &Run) -> Option<Timestamp> {
    run.annotations()
        .get(names::SCHEDULED_AT_ANNOTATION)?
        .parse()
        .ok()
}

/// When a Run started: its record's `startedAt`, else the slot it was
/// scheduled for, else its creation.
pub fn run_start(run: &Run) -> Option<Timestamp> {
    run.status
        .as_ref()
        .and_then(|s| s.started_at.as_deref())
        .and_then(|t| t.parse().ok())
        .or_else(|| scheduled_slot(run))
        .or_else(|| run.creation_timestamp().map(|t| t.0))
}

/// Whether a Run has finished.
pub fn finished(run: &Run) -> bool {
    matches!(
        run.status.as_ref().map(|s| s.phase),
        Some(RunPhase::Succeeded | RunPhase::Failed | RunPhase::Cancelled)
    )
}

/// Surveys the Runs of the flow `flow` (Runs of other flows are ignored).
pub fn survey<'a>(flow: &str, runs: impl IntoIterator<Item = &'a Run>) -> Survey {
    let mut survey = Survey::default();
    let mut newest: Option<(Option<Timestamp>, String)> = None;
    let mut active: Vec<(Option<Timestamp>, String)> = Vec::new();
    for run in runs.into_iter().filter(|r| r.spec.flow_ref.name == flow) {
        let key = (run.creation_timestamp().map(|t| t.0), run.name_any());
        if newest.as_ref().is_none_or(|n| key > *n) {
            newest = Some(key.clone());
        }
        let Some(slot) = scheduled_slot(run) else {
            continue;
        };
        survey.last_slot = survey.last_slot.max(Some(slot));
        if !finished(run) {
            active.push(key);
        } else if run.status.as_ref().map(|s| s.phase) == Some(RunPhase::Succeeded) {
            survey.last_success_start = survey.last_success_start.max(run_start(run));
        }
    }
    active.sort();
    survey.active = active.into_iter().map(|(_, name)| name).collect();
    survey.last_run = newest.map(|(_, name)| name);
    survey
}

/// The Run the schedule starts for `slot`: named after the flow and the
/// slot's minute, labelled with the flow, owned by it (deleting the Flow
/// deletes its scheduled Runs, as a CronJob's Jobs go with it), and
/// annotated with the slot and `$SINCE` (Unix seconds; empty for the first).
pub fn scheduled_run(flow: &Flow, slot: Timestamp, since: Option<Timestamp>) -> Run {
    let name = flow.name_any();
    let annotations = BTreeMap::from([
        (names::SCHEDULED_AT_ANNOTATION.to_string(), slot.to_string()),
        (
            names::SINCE_ANNOTATION.to_string(),
            since.map(|t| t.as_second().to_string()).unwrap_or_default(),
        ),
    ]);
    Run {
        metadata: ObjectMeta {
            name: Some(names::scheduled_run(&name, slot)),
            namespace: flow.namespace(),
            labels: Some(BTreeMap::from([(
                names::FLOW_LABEL.to_string(),
                names::flow_label(&name),
            )])),
            annotations: Some(annotations),
            owner_references: flow.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: RunSpec {
            flow_ref: FlowRef { name },
            input: flow.spec.schedule.as_ref().and_then(|s| s.input.clone()),
            cancel: false,
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;
    use crate::api::{FlowSpec, RunStatus, Schedule};

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a test time")
    }

    fn run(name: &str, flow: &str, created: &str) -> Run {
        let mut run = Run::new(
            name,
            RunSpec {
                flow_ref: FlowRef { name: flow.into() },
                ..Default::default()
            },
        );
        run.metadata.creation_timestamp = Some(Time(at(created)));
        run
    }

    fn scheduled(name: &str, slot: &str, phase: Option<(RunPhase, &str)>) -> Run {
        let mut r = run(name, "f", slot);
        r.annotations_mut()
            .insert(names::SCHEDULED_AT_ANNOTATION.into(), slot.into());
        r.status = phase.map(|(phase, started)| RunStatus {
            phase,
            started_at: Some(started.into()),
            ..Default::default()
        });
        r
    }

    #[test]
    fn the_survey_finds_the_newest_run_the_active_ones_and_the_last_success() {
        let runs = [
            scheduled(
                "f-1",
                "2030-01-01T10:01:00Z",
                Some((RunPhase::Succeeded, "2030-01-01T10:01:02Z")),
            ),
            scheduled(
                "f-2",
                "2030-01-01T10:02:00Z",
                Some((RunPhase::Failed, "2030-01-01T10:02:03Z")),
            ),
            scheduled("f-3", "2030-01-01T10:03:00Z", None),
            scheduled(
                "f-4",
                "2030-01-01T10:04:00Z",
                Some((RunPhase::Running, "2030-01-01T10:04:01Z")),
            ),
            run("manual", "f", "2030-01-01T10:05:00Z"),
            run("other-flow", "g", "2030-01-01T11:00:00Z"),
        ];
        let survey = survey("f", &runs);
        assert_eq!(survey.last_run.as_deref(), Some("manual"));
        assert_eq!(survey.active, ["f-3", "f-4"]);
        assert_eq!(survey.last_slot, Some(at("2030-01-01T10:04:00Z")));
        assert_eq!(survey.last_success_start, Some(at("2030-01-01T10:01:02Z")));
    }

    #[test]
    fn no_runs_no_survey() {
        assert_eq!(survey("f", &[]), Survey::default());
    }

    #[test]
    fn a_scheduled_run_carries_name_label_owner_annotations_and_input() {
        let mut flow = Flow::new(
            "nightly",
            FlowSpec {
                schedule: Some(Schedule {
                    cron: "* * * * *".into(),
                    input: Some(json!({"region": "eu"})),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        flow.metadata.namespace = Some("team".into());
        flow.metadata.uid = Some("uid-1".into());
        let slot = at("2030-01-01T10:02:00Z");
        let first = scheduled_run(&flow, slot, None);
        assert_eq!(first.name_any(), "nightly-31558202");
        assert_eq!(first.namespace().as_deref(), Some("team"));
        assert_eq!(first.labels()[names::FLOW_LABEL], "nightly");
        assert_eq!(
            first.annotations()[names::SCHEDULED_AT_ANNOTATION],
            "2030-01-01T10:02:00Z"
        );
        assert_eq!(first.annotations()[names::SINCE_ANNOTATION], "");
        let owner = &first.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Flow", "nightly", "uid-1")
        );
        assert_eq!(first.spec.input, Some(json!({"region": "eu"})));
        assert_eq!(first.spec.flow_ref.name, "nightly");
        let later = scheduled_run(&flow, slot, Some(at("2030-01-01T10:01:02Z")));
        assert_eq!(later.annotations()[names::SINCE_ANNOTATION], "1893492062");
        // The same slot always gives the same name.
        assert_eq!(later.name_any(), first.name_any());
        assert_eq!(scheduled_slot(&later), Some(slot));
    }
}
