//! What a Flow's Runs tell its reconciler (the latest one, the scheduled ones
//! still going, the slots already started, when the last success started),
//! and the Run a schedule starts for a slot. Pure: the reconciler hands in
//! the Runs its cache holds.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::names;
use coxswain_core::api::{Flow, FlowRef, Run, RunPhase, RunSpec};

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

/// The slot a Run's `scheduled-at` annotation names, whoever wrote it.
pub fn scheduled_slot(run: &Run) -> Option<Timestamp> {
    run.annotations()
        .get(names::SCHEDULED_AT_ANNOTATION)?
        .parse()
        .ok()
}

/// The slot of a Run that flow `flow`'s schedule started, or `None` for any
/// other Run. A name, a label and the `scheduled-at` annotation can be
/// written by anyone who may create a Run; `created-by` cannot (admission
/// stamps it from who made the request), so a Run is the schedule's only
/// when the controller (`me`) created it, for this flow, under the name the
/// schedule gives that slot. Anything else — a Run made in advance to take a
/// slot's name, or one carrying a forged slot — moves no bookkeeping.
pub fn schedules_own(run: &Run, flow: &str, me: &str) -> Option<Timestamp> {
    let slot = scheduled_slot(run)?;
    let made_by_me = run
        .annotations()
        .get(names::CREATED_BY_ANNOTATION)
        .map(String::as_str)
        == Some(me);
    let named = run.metadata.name.as_deref() == Some(names::scheduled_run(flow, slot).as_str());
    (made_by_me && named && run.spec.flow_ref.name == flow).then_some(slot)
}

/// When a Run started: its status's `startedAt`, else the slot it was
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
    run.status.as_ref().is_some_and(|s| s.phase.is_over())
}

/// Surveys the Runs of the flow `flow` (Runs of other flows are ignored).
/// Only the schedule's own Runs ([`schedules_own`], made by `me`) count as
/// scheduled: a foreign one never holds a slot, blocks `Forbid`, is
/// cancelled by `Replace` or sets `$SINCE`.
pub fn survey<'a>(flow: &str, me: &str, runs: impl IntoIterator<Item = &'a Run>) -> Survey {
    let mut survey = Survey::default();
    let mut newest: Option<(Option<Timestamp>, String)> = None;
    let mut active: Vec<(Option<Timestamp>, String)> = Vec::new();
    for run in runs.into_iter().filter(|r| r.spec.flow_ref.name == flow) {
        let key = (run.creation_timestamp().map(|t| t.0), run.name_any());
        if newest.as_ref().is_none_or(|n| key > *n) {
            newest = Some(key.clone());
        }
        let Some(slot) = schedules_own(run, flow, me) else {
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
/// annotated with the slot, `$SINCE` (Unix seconds; empty for the first)
/// and the controller (`me`) as its creator.
pub fn scheduled_run(flow: &Flow, slot: Timestamp, since: Option<Timestamp>, me: &str) -> Run {
    let name = flow.name_any();
    let annotations = BTreeMap::from([
        (names::SCHEDULED_AT_ANNOTATION.to_string(), slot.to_string()),
        // What admission would stamp; written here too so the schedule
        // knows its own Runs where no webhook runs.
        (names::CREATED_BY_ANNOTATION.to_string(), me.to_string()),
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
            from: None,
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;
    use coxswain_core::api::{FlowSpec, RunStatus, Schedule};

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

    const ME: &str = "system:serviceaccount:coxswain:coxswain";

    /// The name the schedule of `f` gives `slot`.
    fn slot_name(slot: &str) -> String {
        names::scheduled_run("f", at(slot))
    }

    /// A Run the schedule of `f` started for `slot`.
    fn scheduled(slot: &str, phase: Option<(RunPhase, &str)>) -> Run {
        let mut r = run(&slot_name(slot), "f", slot);
        r.annotations_mut()
            .insert(names::SCHEDULED_AT_ANNOTATION.into(), slot.into());
        r.annotations_mut()
            .insert(names::CREATED_BY_ANNOTATION.into(), ME.into());
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
                "2030-01-01T10:01:00Z",
                Some((RunPhase::Succeeded, "2030-01-01T10:01:02Z")),
            ),
            scheduled(
                "2030-01-01T10:02:00Z",
                Some((RunPhase::Failed, "2030-01-01T10:02:03Z")),
            ),
            scheduled("2030-01-01T10:03:00Z", None),
            scheduled(
                "2030-01-01T10:04:00Z",
                Some((RunPhase::Running, "2030-01-01T10:04:01Z")),
            ),
            run("manual", "f", "2030-01-01T10:05:00Z"),
            run("other-flow", "g", "2030-01-01T11:00:00Z"),
        ];
        let survey = survey("f", ME, &runs);
        assert_eq!(survey.last_run.as_deref(), Some("manual"));
        assert_eq!(
            survey.active,
            [
                slot_name("2030-01-01T10:03:00Z"),
                slot_name("2030-01-01T10:04:00Z")
            ]
        );
        assert_eq!(survey.last_slot, Some(at("2030-01-01T10:04:00Z")));
        assert_eq!(survey.last_success_start, Some(at("2030-01-01T10:01:02Z")));
    }

    #[test]
    fn no_runs_no_survey() {
        assert_eq!(survey("f", ME, &[]), Survey::default());
    }

    #[test]
    fn runs_the_schedule_did_not_make_move_none_of_its_bookkeeping() {
        let own = scheduled(
            "2030-01-01T10:01:00Z",
            Some((RunPhase::Succeeded, "2030-01-01T10:01:02Z")),
        );
        // A member's Run under the next slot's name, with every mark of a
        // scheduled Run but the creator.
        let mut taken = scheduled("2030-01-01T10:02:00Z", None);
        taken
            .annotations_mut()
            .insert(names::CREATED_BY_ANNOTATION.into(), "mallory".into());
        // A forged slot far ahead, to stop the schedule; and a success to
        // move `$SINCE`.
        let mut ahead = scheduled("2031-01-01T00:00:00Z", None);
        ahead.annotations_mut().remove(names::CREATED_BY_ANNOTATION);
        let mut success = scheduled(
            "2030-01-01T10:03:00Z",
            Some((RunPhase::Succeeded, "2030-01-01T10:03:01Z")),
        );
        success.metadata.name = Some("f-not-the-slot-name".into());
        let mut other_flow = scheduled("2030-01-01T10:04:00Z", None);
        other_flow.spec.flow_ref.name = "g".into();
        let runs = [own.clone(), taken, ahead, success, other_flow];
        let survey = survey("f", ME, &runs);
        assert_eq!(survey.active, Vec::<String>::new());
        assert_eq!(survey.last_slot, Some(at("2030-01-01T10:01:00Z")));
        assert_eq!(survey.last_success_start, Some(at("2030-01-01T10:01:02Z")));
        assert_eq!(
            schedules_own(&own, "f", ME),
            Some(at("2030-01-01T10:01:00Z"))
        );
        assert_eq!(schedules_own(&own, "f", "someone-else"), None);
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
        let first = scheduled_run(&flow, slot, None, "me");
        assert_eq!(first.name_any(), "nightly-31558202");
        assert_eq!(first.namespace().as_deref(), Some("team"));
        assert_eq!(first.labels()[names::FLOW_LABEL], "nightly");
        assert_eq!(
            first.annotations()[names::SCHEDULED_AT_ANNOTATION],
            "2030-01-01T10:02:00Z"
        );
        assert_eq!(first.annotations()[names::SINCE_ANNOTATION], "");
        assert_eq!(first.annotations()[names::CREATED_BY_ANNOTATION], "me");
        assert_eq!(schedules_own(&first, "nightly", "me"), Some(slot));
        let owner = &first.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Flow", "nightly", "uid-1")
        );
        assert_eq!(first.spec.input, Some(json!({"region": "eu"})));
        assert_eq!(first.spec.flow_ref.name, "nightly");
        let later = scheduled_run(&flow, slot, Some(at("2030-01-01T10:01:02Z")), "me");
        assert_eq!(later.annotations()[names::SINCE_ANNOTATION], "1893492062");
        // The same slot always gives the same name.
        assert_eq!(later.name_any(), first.name_any());
        assert_eq!(scheduled_slot(&later), Some(slot));
    }
}
