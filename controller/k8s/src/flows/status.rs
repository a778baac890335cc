//! A Flow's status, computed from its spec and what its Runs say, without
//! I/O: the reconciler writes it only when it differs from the stored one,
//! and a condition keeps its `lastTransitionTime` unless its status flips,
//! so the same Flow always gives the same status (no reconcile storms).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use coxswain_core::api::conditions::{
    self, READY, REASON_INVALID, REASON_READY, REASON_SCHEDULE_UNUSABLE, REASON_VALID, VALID,
};
use coxswain_core::api::{FlowSpec, FlowStatus, StepProblem};
use coxswain_core::flow::{FlowGraph, Limits, validate_graph};

/// The longest condition message the API server accepts (the `Condition`
/// schema's `maxLength`).
const MESSAGE_MAX: usize = 32_768;

/// What validation says of a flow: its size and every problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Every keyed step, nested ones included.
    pub step_count: i32,
    /// Every problem, in document order; empty when the flow is valid.
    pub problems: Vec<StepProblem>,
}

/// Runs the validator `coxswain lint` and the webhook use.
pub fn check(spec: &FlowSpec) -> Verdict {
    let graph = FlowGraph::new(&spec.steps);
    let problems = validate_graph(spec, &graph, &Limits::default());
    Verdict {
        step_count: i32::try_from(graph.nodes.len()).unwrap_or(i32::MAX),
        problems,
    }
}

/// A flow whose spec could not even be read into Coxswain's types (possible
/// where the admission webhook is not installed): one problem, the reason.
pub fn unreadable(reason: &str) -> Verdict {
    Verdict {
        step_count: 0,
        problems: vec![StepProblem {
            message: format!("the flow's spec could not be read: {reason}"),
            ..Default::default()
        }],
    }
}

/// The `Valid` condition's message: every problem on a line of its own,
/// cut (saying so) where the API server's limit would refuse it; the
/// status's `problems` keeps them all.
pub fn problems_message(problems: &[StepProblem]) -> String {
    let count = problems.len();
    let mut message = match count {
        1 => "1 problem:".to_string(),
        n => format!("{n} problems:"),
    };
    for (shown, problem) in problems.iter().enumerate() {
        // As `coxswain lint` prints it (without file and flow).
        let line = format!("\n{problem}");
        let rest = count - shown;
        let note = format!("\n… and {rest} more (see status.problems)");
        if message.len() + line.len() + note.len() > MESSAGE_MAX {
            message.push_str(&note);
            break;
        }
        message.push_str(&line);
    }
    message
}

/// What the schedule's bookkeeping says, for the status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bookkeeping {
    /// The latest Run of the flow, scheduled or not.
    pub last_run: Option<String>,
    /// When the schedule last started a Run (its slot).
    pub last_schedule_time: Option<Timestamp>,
    /// When the schedule's last Run that succeeded started.
    pub last_successful_run_start: Option<Timestamp>,
    /// Why the flow's schedule cannot be followed, when it cannot.
    pub schedule_problem: Option<String>,
    /// The next slot the schedule starts a Run for, when it has one.
    pub next_schedule_time: Option<Timestamp>,
}

/// The status a Flow should have now, from the stored one (for transition
/// times), its generation, the validator's verdict and the bookkeeping.
pub fn compose(
    old: &FlowStatus,
    generation: Option<i64>,
    verdict: &Verdict,
    book: &Bookkeeping,
    now: Timestamp,
) -> FlowStatus {
    let mut status = FlowStatus {
        observed_generation: generation,
        conditions: old.conditions.clone(),
        step_count: Some(verdict.step_count),
        problems: verdict.problems.clone(),
        last_run: book.last_run.clone(),
        last_schedule_time: book.last_schedule_time.map(|t| t.to_string()),
        last_successful_run_start: book.last_successful_run_start.map(|t| t.to_string()),
        next_schedule_time: None,
    };
    let valid = verdict.problems.is_empty();
    if valid && book.schedule_problem.is_none() {
        // Only a schedule that can start runs has a next slot to show.
        status.next_schedule_time = book.next_schedule_time.map(|t| t.to_string());
    }
    let (reason, message) = if valid {
        (REASON_VALID, "The flow passed validation.".to_string())
    } else {
        (REASON_INVALID, problems_message(&verdict.problems))
    };
    let stamp = Stamp { generation, now };
    set_condition(&mut status.conditions, VALID, valid, reason, message, stamp);
    let (ready, reason, message) = match (&book.schedule_problem, valid) {
        (_, false) => (
            false,
            REASON_INVALID,
            "Runs of this flow cannot start until its problems are fixed (see the Valid condition).",
        ),
        (Some(problem), true) => (false, REASON_SCHEDULE_UNUSABLE, problem.as_str()),
        (None, true) => (true, REASON_READY, "Runs of this flow can start."),
    };
    set_condition(
        &mut status.conditions,
        READY,
        ready,
        reason,
        message.to_string(),
        stamp,
    );
    status
}

/// The generation a condition describes and the time of a change.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    generation: Option<i64>,
    now: Timestamp,
}

/// Sets a condition, keeping its `lastTransitionTime` unless its status flips.
fn set_condition(
    conditions: &mut Vec<Condition>,
    kind: &str,
    ok: bool,
    reason: &str,
    message: String,
    stamp: Stamp,
) {
    let status = if ok {
        conditions::TRUE
    } else {
        conditions::FALSE
    };
    let existing = conditions.iter().position(|c| c.type_ == kind);
    let since = existing
        .map(|i| &conditions[i])
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(stamp.now));
    let condition = Condition {
        type_: kind.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: stamp.generation,
        last_transition_time: since,
    };
    match existing {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> FlowSpec {
        serde_json::from_str(json).expect("a test flow")
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a test time")
    }

    fn condition<'a>(status: &'a FlowStatus, kind: &str) -> &'a Condition {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == kind)
            .expect("the condition")
    }

    const VALID_FLOW: &str = r#"{"steps": [
        {"key": "outer", "loop": {"until": "$loop.iteration >= 2", "maxIterations": 3, "steps": [
            {"key": "inner", "script": {"command": ["echo", "hi"]}}]}},
        {"key": "last", "script": {"command": ["echo", "done"]}}]}"#;

    const INVALID_FLOW: &str = r#"{"steps": [
        {"key": "first", "script": {"command": ["echo", "hi"]}},
        {"key": "second", "when": "$steps.first.status == ", "script": {"command": ["echo", "hi"]}},
        {"key": "third", "when": "True", "script": {"command": ["echo", "hi"]}}]}"#;

    /// The first status of a flow whose check gave `verdict`, with nothing
    /// else kept.
    fn first_status(verdict: &Verdict, generation: Option<i64>) -> FlowStatus {
        let (old, book) = (FlowStatus::default(), Bookkeeping::default());
        compose(&old, generation, verdict, &book, at("2030-01-01T00:00:00Z"))
    }

    #[test]
    fn a_valid_flow_counts_nested_steps_and_is_valid_and_ready() {
        let verdict = check(&spec(VALID_FLOW));
        assert_eq!(verdict.step_count, 3);
        let status = first_status(&verdict, Some(4));
        let valid = condition(&status, VALID);
        assert_eq!(
            (valid.status.as_str(), valid.observed_generation),
            ("True", Some(4))
        );
        assert_eq!(condition(&status, READY).status, "True");
        assert_eq!(status.observed_generation, Some(4));
        assert!(status.problems.is_empty());
    }

    #[test]
    fn an_invalid_flow_lists_every_problem_with_step_field_and_character() {
        let verdict = check(&spec(INVALID_FLOW));
        assert_eq!(verdict.problems.len(), 2, "{:?}", verdict.problems);
        let status = first_status(&verdict, Some(1));
        let valid = condition(&status, VALID);
        assert_eq!(
            (valid.status.as_str(), valid.reason.as_str()),
            ("False", "Invalid")
        );
        let lines: Vec<&str> = valid.message.lines().collect();
        assert_eq!(lines[0], "2 problems:");
        assert!(lines[1].starts_with("step second: when: "), "{lines:?}");
        assert!(
            lines[1].ends_with(')') && lines[1].contains("(character "),
            "{lines:?}"
        );
        assert!(lines[2].starts_with("step third: when: "), "{lines:?}");
        assert_eq!(condition(&status, READY).status, "False");
        assert_eq!(status.problems, verdict.problems);
    }

    #[test]
    fn the_same_flow_later_gives_the_same_status() {
        let verdict = check(&spec(VALID_FLOW));
        let book = Bookkeeping::default();
        let first = compose(
            &FlowStatus::default(),
            Some(1),
            &verdict,
            &book,
            at("2030-01-01T00:00:00Z"),
        );
        let again = compose(&first, Some(1), &verdict, &book, at("2030-01-02T00:00:00Z"));
        assert_eq!(again, first);
    }

    #[test]
    fn a_transition_time_changes_only_when_the_status_flips() {
        let t0 = at("2030-01-01T00:00:00Z");
        let t1 = at("2030-01-02T00:00:00Z");
        let t2 = at("2030-01-03T00:00:00Z");
        let book = Bookkeeping::default();
        let invalid = compose(
            &FlowStatus::default(),
            Some(1),
            &check(&spec(INVALID_FLOW)),
            &book,
            t0,
        );
        // Another invalid edit: the message changes, the time does not.
        let mut other = check(&spec(INVALID_FLOW));
        other.problems.truncate(1);
        let still = compose(&invalid, Some(2), &other, &book, t1);
        let valid = condition(&still, VALID);
        assert_eq!(valid.last_transition_time, Time(t0));
        assert!(valid.message.starts_with("1 problem:"), "{}", valid.message);
        assert_eq!(valid.observed_generation, Some(2));
        // Fixed: the status flips and the time moves.
        let fixed = compose(&still, Some(3), &check(&spec(VALID_FLOW)), &book, t2);
        assert_eq!(condition(&fixed, VALID).last_transition_time, Time(t2));
        assert_eq!(condition(&fixed, READY).last_transition_time, Time(t2));
    }

    #[test]
    fn an_unusable_schedule_keeps_a_valid_flow_from_being_ready() {
        let book = Bookkeeping {
            schedule_problem: Some("schedule.timeZone: `X` is not a time zone".into()),
            ..Default::default()
        };
        let status = compose(
            &FlowStatus::default(),
            Some(1),
            &check(&spec(VALID_FLOW)),
            &book,
            at("2030-01-01T00:00:00Z"),
        );
        let ready = condition(&status, READY);
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "ScheduleUnusable")
        );
        assert_eq!(condition(&status, VALID).status, "True");
        assert_eq!(status.next_schedule_time, None);
    }

    #[test]
    fn the_next_slot_is_shown_only_while_the_schedule_can_start_runs() {
        let next = at("2030-01-01T06:30:00Z");
        let now = at("2030-01-01T00:00:00Z");
        let book = Bookkeeping {
            next_schedule_time: Some(next),
            ..Default::default()
        };
        let valid = compose(
            &FlowStatus::default(),
            Some(1),
            &check(&spec(VALID_FLOW)),
            &book,
            now,
        );
        assert_eq!(
            valid.next_schedule_time.as_deref(),
            Some("2030-01-01T06:30:00Z")
        );
        let invalid = compose(&valid, Some(2), &check(&spec(INVALID_FLOW)), &book, now);
        assert_eq!(invalid.next_schedule_time, None);
        let refused = Bookkeeping {
            schedule_problem: Some("the scheduled run t-1 was refused: bad input".into()),
            ..book
        };
        let unusable = compose(&valid, Some(1), &check(&spec(VALID_FLOW)), &refused, now);
        assert_eq!(unusable.next_schedule_time, None);
    }

    #[test]
    fn a_huge_problem_list_is_cut_under_the_limit_and_says_so() {
        let problems: Vec<StepProblem> = (0..2_000)
            .map(|i| StepProblem {
                step: format!("s{i}"),
                field: "when".into(),
                message: "x".repeat(40),
                character: Some(3),
            })
            .collect();
        let message = problems_message(&problems);
        assert!(message.len() <= MESSAGE_MAX, "{}", message.len());
        assert!(message.starts_with("2000 problems:\nstep s0: when: "));
        assert!(
            message.ends_with("more (see status.problems)"),
            "{}",
            &message[message.len() - 80..]
        );
    }

    #[test]
    fn an_unreadable_spec_is_one_problem_saying_why() {
        let verdict = unreadable("unknown field `stpes`");
        assert_eq!(
            problems_message(&verdict.problems),
            "1 problem:\nthe flow's spec could not be read: unknown field `stpes`"
        );
    }
}
