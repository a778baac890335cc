//! Reruns from a step, driven through the engine: an old run is driven to
//! its end, a rerun is seeded from its status, and the machine resumed from
//! that seed runs only what the rules say reruns.

use serde_json::{Value, json};

use crate::api::{CopiedFrom, RunPhase, RunStatus, StepPhase};
use crate::engine::test_support::{at, compile, started};
use crate::engine::{
    Action, CompiledFlow, Decision, Done, Event, Failed, RerunError, RunInfo, RunMachine, codes,
    copied_decisions, first_failed_step, rerun_from, step_error,
};

fn old_run() -> CopiedFrom {
    CopiedFrom {
        run: "old".into(),
        uid: "uid-old".into(),
    }
}

/// Runs every piece of work the actions ask for, failing the steps in
/// `failing`, until nothing more is asked; returns the steps run, in order.
fn drive(machine: &mut RunMachine<'_>, mut actions: Vec<Action>, failing: &[&str]) -> Vec<String> {
    let mut ran = Vec::new();
    let mut clock = 1;
    while !actions.is_empty() {
        let action = actions.remove(0);
        let Action::Run(work) = action else { continue };
        ran.push(work.step.clone());
        let result = if failing.contains(&work.step.as_str()) {
            Err(Failed::from(step_error(codes::SCRIPT, "exit 1")))
        } else {
            Ok(Done::output(json!({"by": work.step})))
        };
        clock += 1;
        actions.extend(machine.handle(
            Event::Finished {
                step: work.step.clone(),
                part: work.part.as_ref().map(|p| p.index),
                attempt: work.attempt,
                result,
            },
            at(clock),
        ));
    }
    ran
}

/// A whole run of `flow` with the steps in `failing` failing: its status.
fn ended(flow: &CompiledFlow, failing: &[&str]) -> RunStatus {
    let mut machine = RunMachine::new(flow, json!({"xs": [1, 2]}), RunInfo::default());
    let mut actions = machine.handle(Event::Start, at(0));
    if machine.workspace_work().is_some() {
        let made = crate::engine::WorkspaceEnded::Made(Default::default());
        actions = machine.handle(Event::Workspace(made), at(0));
    }
    drive(&mut machine, actions, failing);
    machine.summarized()
}

/// Seeds a rerun of `old` from `step`, runs it with nothing failing, and
/// returns the steps it ran and its status.
fn rerun(flow: &CompiledFlow, old: &RunStatus, step: &str) -> (Vec<String>, RunStatus) {
    let seed = rerun_from(flow.get(), old, step, old_run()).expect("rerun allowed");
    let mut machine =
        RunMachine::resume(flow, json!({"xs": [1, 2]}), RunInfo::default(), seed).expect("resume");
    let actions = machine.handle(Event::Start, at(100));
    let ran = drive(&mut machine, actions, &[]);
    (ran, machine.summarized())
}

const LINE: &str = "
steps:
  - {key: a, script: {source: x}}
  - {key: b, script: {source: x}}
  - {key: c, script: {source: x}}
";

#[test]
fn the_steps_before_the_key_are_copied_and_only_the_rest_runs() {
    let flow = compile(LINE);
    let old = ended(&flow, &["c"]);
    assert_eq!(old.phase, RunPhase::Failed);
    let (ran, new) = rerun(&flow, &old, "c");
    assert_eq!(ran, ["c"]);
    assert_eq!(new.phase, RunPhase::Succeeded);
    for key in ["a", "b"] {
        assert_eq!(new.steps[key].copied_from, Some(old_run()), "{key}");
        assert_eq!(new.steps[key].attempts, old.steps[key].attempts, "{key}");
        assert_eq!(new.steps[key].output, old.steps[key].output, "{key}");
    }
    assert_eq!(new.steps["c"].copied_from, None);
    assert_eq!(new.steps["c"].status, StepPhase::Completed);
    assert_eq!(new.output_from.as_deref(), Some("c"));
    let of = new.rerun_of.expect("rerunOf");
    assert_eq!(
        (of.run.as_str(), of.uid.as_str(), of.step.as_str()),
        ("old", "uid-old", "c")
    );
    assert_eq!(new.flow_digest, old.flow_digest);
    assert_eq!(new.progress.as_deref(), Some("3/3"));
}

#[test]
fn a_key_that_did_not_fail_reruns_with_everything_after_it() {
    let flow = compile(LINE);
    let old = ended(&flow, &["c"]);
    let (ran, new) = rerun(&flow, &old, "b");
    assert_eq!(ran, ["b", "c"]);
    assert_eq!(new.steps["b"].copied_from, None);
    assert_eq!(
        new.steps["b"].attempts.len(),
        1,
        "b's old attempts are not kept"
    );
    assert_eq!(new.steps["a"].copied_from, Some(old_run()));
}

#[test]
fn a_step_that_went_on_after_failing_is_copied_as_failed() {
    let flow = compile(
        "
steps:
  - {key: a, script: {source: x}, onFailure: continue}
  - {key: b, script: {source: x}}
  - {key: c, script: {source: x}}
",
    );
    let old = ended(&flow, &["a", "c"]);
    assert_eq!(old.steps["a"].status, StepPhase::Failed);
    assert_eq!(first_failed_step(flow.get(), &old).as_deref(), Some("c"));
    let (ran, new) = rerun(&flow, &old, "c");
    assert_eq!(ran, ["c"]);
    assert_eq!(new.phase, RunPhase::Succeeded);
    assert_eq!(new.steps["a"].status, StepPhase::Failed);
    assert_eq!(new.steps["a"].copied_from, Some(old_run()));
}

#[test]
fn a_branch_that_does_not_follow_the_key_is_copied_and_failed_ones_rerun() {
    let flow = compile(
        "
steps:
  - {key: a, script: {source: x}}
  - {key: b, script: {source: x}}
  - {key: c, script: {source: x}, after: [a]}
  - {key: d, script: {source: x}, after: [a]}
  - {key: e, script: {source: x}, after: [b, c, d]}
",
    );
    let old = ended(&flow, &["d"]);
    assert_eq!(old.phase, RunPhase::Failed);
    assert_eq!(first_failed_step(flow.get(), &old).as_deref(), Some("d"));
    // From b: c is a sibling branch and is copied; d failed and stopped the
    // run, so it reruns too (copied, it would fail the new run again).
    let (mut ran, new) = rerun(&flow, &old, "b");
    ran.sort();
    assert_eq!(ran, ["b", "d", "e"]);
    assert_eq!(new.phase, RunPhase::Succeeded);
    assert_eq!(new.steps["c"].copied_from, Some(old_run()));
    assert_eq!(new.steps["a"].copied_from, Some(old_run()));
}

#[test]
fn arrows_and_their_counts_are_copied_for_copied_steps_only() {
    let flow = compile(LINE);
    let old = ended(&flow, &["c"]);
    assert_eq!(old.arrow_counts.get("a->b"), Some(&1));
    assert_eq!(old.arrow_counts.get("b->c"), Some(&1));
    let seed = rerun_from(flow.get(), &old, "c", old_run()).expect("seed");
    assert_eq!(seed.arrow_counts.get("a->b"), Some(&1));
    assert_eq!(
        seed.arrow_counts.get("b->c"),
        None,
        "counted again when c starts"
    );
    let a_b = |s: &RunStatus| {
        s.arrows
            .iter()
            .find(|a| a.from == "a" && a.to == "b")
            .cloned()
    };
    assert_eq!(a_b(&seed), a_b(&old), "the copied arrow reads as before");
    let b_c = seed.arrows.iter().find(|a| a.to == "c").expect("b->c");
    assert!(!b_c.taken, "{b_c:?}");
    let (_, new) = rerun(&flow, &old, "c");
    assert_eq!(new.arrow_counts.get("b->c"), Some(&1));
    assert!(new.arrows.iter().all(|a| a.taken), "{:?}", new.arrows);
}

#[test]
fn a_step_inside_a_loop_reruns_its_whole_loop_and_what_follows() {
    let flow = compile(
        "
steps:
  - {key: first, script: {source: x}}
  - key: again
    loop:
      until: $loop.iteration == 2
      maxIterations: 3
      steps:
        - {key: inner, script: {source: x}}
        - {key: check, script: {source: x}}
  - {key: last, script: {source: x}}
",
    );
    let old = ended(&flow, &["last"]);
    assert_eq!(old.steps["check"].status, StepPhase::Completed);
    let (ran, new) = rerun(&flow, &old, "check");
    assert_eq!(ran, ["inner", "check", "inner", "check", "last"]);
    assert_eq!(new.phase, RunPhase::Succeeded);
    assert_eq!(new.steps["first"].copied_from, Some(old_run()));
    assert_eq!(new.steps["again"].copied_from, None);
    assert_eq!(new.steps["inner"].copied_from, None);
    // From `last`, the loop and its body are copied whole.
    let (ran, new) = rerun(&flow, &old, "last");
    assert_eq!(ran, ["last"]);
    assert_eq!(new.steps["inner"].copied_from, Some(old_run()));
}

#[test]
fn exits_not_taken_are_copied_skipped() {
    let flow = compile(
        "
steps:
  - key: check
    condition: {when: \"$input.xs[0] == 1\"}
  - {key: yes, script: {source: x}, after: [check.true]}
  - {key: no, script: {source: x}, after: [check.false]}
  - {key: last, script: {source: x}, after: [yes, no]}
",
    );
    let old = ended(&flow, &["last"]);
    assert_eq!(old.steps["no"].status, StepPhase::Skipped);
    let (ran, new) = rerun(&flow, &old, "last");
    assert_eq!(ran, ["last"]);
    assert_eq!(new.steps["no"].status, StepPhase::Skipped);
    assert_eq!(new.steps["no"].copied_from, Some(old_run()));
    // From the condition: both exits' steps are decided again.
    let (ran, new) = rerun(&flow, &old, "check");
    assert_eq!(ran, ["yes", "last"]);
    assert_eq!(new.steps["no"].copied_from, None);
    assert_eq!(new.steps["no"].status, StepPhase::Skipped);
}

const REVIEWED: &str = "
steps:
  - {key: build, script: {source: x}}
  - key: review
    approval: {show: [build], decisions: [approve, changes]}
    sendBack: [{exit: changes, to: build}]
  - {key: ship, script: {source: x}}
";

fn decide(machine: &mut RunMachine<'_>, attempt: u32, decision: &str) -> Vec<Action> {
    let answer = Decision {
        decision: Some(decision.into()),
        decided_by: Some("alice".into()),
        ..Default::default()
    };
    machine
        .decide("review", attempt, answer, at(50 + i64::from(attempt)))
        .expect("answer accepted")
}

/// The status of a run of `flow` (REVIEWED) whose review is answered with
/// `answers`, one per round, and whose `ship` fails once reached.
fn reviewed_run(flow: &CompiledFlow, answers: &[&str]) -> RunStatus {
    let mut machine = RunMachine::new(flow, Value::Null, RunInfo::default());
    let actions = machine.handle(Event::Start, at(0));
    drive(&mut machine, actions, &[]);
    for (attempt, answer) in (1..).zip(answers) {
        let actions = decide(&mut machine, attempt, answer);
        drive(&mut machine, actions, &["ship"]);
    }
    machine.summarized()
}

#[test]
fn send_back_counts_start_again_only_for_a_rerunning_sender() {
    let flow = compile(REVIEWED);
    let old = reviewed_run(&flow, &["changes", "approve"]);
    assert_eq!(old.phase, RunPhase::Failed);
    assert_eq!(old.send_backs.get("review->build"), Some(&1));
    let from_ship = rerun_from(flow.get(), &old, "ship", old_run()).expect("seed");
    assert_eq!(from_ship.send_backs.get("review->build"), Some(&1));
    assert_eq!(
        from_ship.steps["build"].attempts.len(),
        2,
        "both rounds kept"
    );
    let from_review = rerun_from(flow.get(), &old, "review", old_run()).expect("seed");
    assert!(
        from_review.send_backs.is_empty(),
        "{:?}",
        from_review.send_backs
    );
    // A rerun review that sends work back makes the copied build its own.
    let mut machine =
        RunMachine::resume(&flow, Value::Null, RunInfo::default(), from_review).expect("resume");
    let actions = machine.handle(Event::Start, at(100));
    assert!(
        matches!(actions.as_slice(), [Action::Ask(_)]),
        "{actions:?}"
    );
    let actions = decide(&mut machine, 1, "changes");
    let ran = drive(&mut machine, actions, &[]);
    assert_eq!(ran, ["build"]);
    assert_eq!(machine.summarized().steps["build"].copied_from, None);
}

#[test]
fn a_rerun_names_the_decisions_it_copies_and_only_those() {
    let flow = compile(REVIEWED);
    let old = reviewed_run(&flow, &["approve"]);
    let from_ship = rerun_from(flow.get(), &old, "ship", old_run()).expect("seed");
    assert_eq!(copied_decisions(flow.get(), &from_ship), ["review"]);
    // From the review (or before it) the review is asked again: nothing copied.
    for step in ["review", "build"] {
        let seeded = rerun_from(flow.get(), &old, step, old_run()).expect("seed");
        assert!(copied_decisions(flow.get(), &seeded).is_empty(), "{step}");
    }
    // An approval never reached (skipped on the old run's path) holds no decision.
    let mut skipped = from_ship.clone();
    skipped.steps.get_mut("review").expect("copied").status = StepPhase::Skipped;
    assert!(copied_decisions(flow.get(), &skipped).is_empty());
}

#[test]
fn a_decision_inside_a_copied_composite_counts() {
    let flow = compile(
        "
steps:
  - key: both
    loop:
      until: $loop.iteration == 2
      maxIterations: 3
      steps:
        - {key: check, approval: {decisions: [approve]}}
        - {key: build, script: {source: x}}
  - {key: ship, script: {source: x}}
",
    );
    let mut old = RunStatus {
        phase: RunPhase::Failed,
        flow_digest: Some(flow.get().digest.clone()),
        ..Default::default()
    };
    for (key, status) in [("both", StepPhase::Completed), ("ship", StepPhase::Failed)] {
        old.steps.insert(
            key.into(),
            crate::api::StepStatus {
                status,
                ..Default::default()
            },
        );
    }
    let seeded = rerun_from(flow.get(), &old, "ship", old_run()).expect("seed");
    assert_eq!(copied_decisions(flow.get(), &seeded), ["check"]);
}

#[test]
fn a_cancelled_run_reruns_what_never_ended() {
    let flow = compile(LINE);
    let (mut machine, mut actions) = started(&flow);
    // a finishes; b is cancelled while it runs.
    let Some(Action::Run(work)) = actions.pop() else {
        panic!("a runs first")
    };
    machine.handle(
        Event::Finished {
            step: work.step,
            part: None,
            attempt: work.attempt,
            result: Ok(Done::output(json!(1))),
        },
        at(1),
    );
    machine.handle(Event::Cancel, at(2));
    let old = machine.summarized();
    assert_eq!(old.phase, RunPhase::Cancelled);
    assert_eq!(first_failed_step(flow.get(), &old).as_deref(), Some("b"));
    // Asked from `c`, b (stopped mid-run) still runs again.
    let (ran, new) = rerun(&flow, &old, "c");
    assert_eq!(ran, ["b", "c"]);
    assert_eq!(new.phase, RunPhase::Succeeded);
}

#[test]
fn a_rerun_is_refused_with_what_is_wrong() {
    let flow = compile(LINE);
    let old = ended(&flow, &["c"]);
    assert_eq!(
        rerun_from(flow.get(), &old, "nope", old_run()),
        Err(RerunError::UnknownStep {
            run: "old".into(),
            step: "nope".into()
        })
    );
    let mut running = old.clone();
    running.phase = RunPhase::Running;
    let err = rerun_from(flow.get(), &running, "c", old_run()).expect_err("refused");
    assert!(err.to_string().contains("has not ended"), "{err}");
    let other = compile("steps: [{key: c, script: {source: y}}]");
    let err = rerun_from(other.get(), &old, "c", old_run()).expect_err("refused");
    assert!(matches!(err, RerunError::DifferentFlow { .. }), "{err}");
    let mut unpinned = old.clone();
    unpinned.flow_digest = None;
    let err = rerun_from(flow.get(), &unpinned, "c", old_run()).expect_err("refused");
    assert!(matches!(err, RerunError::Unpinned { .. }), "{err}");
    let succeeded = ended(&flow, &[]);
    assert_eq!(first_failed_step(flow.get(), &succeeded), None);
    let with_workspace = compile(&format!("workspace: {{}}\n{LINE}"));
    let old = ended(&with_workspace, &["c"]);
    let err = rerun_from(with_workspace.get(), &old, "c", old_run()).expect_err("refused");
    assert!(matches!(err, RerunError::Workspace { .. }), "{err}");
}

#[test]
fn a_rerun_of_a_rerun_keeps_where_each_record_first_came_from() {
    let flow = compile(LINE);
    let old = ended(&flow, &["c"]);
    let (_, second) = rerun(&flow, &old, "b");
    let mut failed_again = second.clone();
    failed_again.phase = RunPhase::Failed;
    let newer = CopiedFrom {
        run: "second".into(),
        uid: "uid-2".into(),
    };
    let seed = rerun_from(flow.get(), &failed_again, "c", newer.clone()).expect("seed");
    assert_eq!(seed.steps["a"].copied_from, Some(old_run()));
    assert_eq!(seed.steps["b"].copied_from, Some(newer));
}

#[test]
fn the_first_failed_step_is_the_one_that_failed_not_one_stopped_with_the_run() {
    let flow = compile(
        "
steps:
  - {key: a, script: {source: x}}
  - {key: b, script: {source: x}, after: [a]}
  - {key: c, script: {source: x}, after: [a]}
",
    );
    // b still runs when c fails: b is stopped (failed, cancelled), c failed.
    let (mut machine, mut actions) = started(&flow);
    let Some(Action::Run(a)) = actions.pop() else {
        panic!("a runs first")
    };
    let started = machine.handle(
        Event::Finished {
            step: a.step,
            part: None,
            attempt: 1,
            result: Ok(Done::output(json!(1))),
        },
        at(1),
    );
    assert_eq!(started.len(), 2, "{started:?}");
    machine.handle(
        Event::Finished {
            step: "c".into(),
            part: None,
            attempt: 1,
            result: Err(Failed::from(step_error(codes::SCRIPT, "exit 1"))),
        },
        at(2),
    );
    let old = machine.summarized();
    assert_eq!(old.phase, RunPhase::Failed);
    assert_eq!(old.steps["b"].status, StepPhase::Failed);
    assert_eq!(first_failed_step(flow.get(), &old).as_deref(), Some("c"));
    // Rerun from c: b, stopped with the run, runs again as well.
    let (mut ran, new) = rerun(&flow, &old, "c");
    ran.sort();
    assert_eq!(ran, ["b", "c"]);
    assert_eq!(new.phase, RunPhase::Succeeded);
}
