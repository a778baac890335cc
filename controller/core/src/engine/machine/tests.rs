//! The engine driven by hand on small flows: what a status holds after a
//! few events, and what a machine rebuilt from that record alone says.

use serde_json::{Value, json};

use crate::api::{FlowSpec, RunPhase, RunStatus, StepPhase};
use crate::engine::test_support::at;
use crate::engine::{
    Action, CompiledFlow, Done, Event, Failed, ResumeError, RunInfo, RunMachine, codes, step_error,
};

/// A flow from YAML, for a test.
fn spec(yaml: &str) -> FlowSpec {
    serde_yaml::from_str(yaml).expect("test flow is well-formed YAML")
}

/// A new run of `flow` with `input`.
fn fresh<'f>(flow: &'f CompiledFlow, input: Value) -> RunMachine<'f> {
    RunMachine::new(flow, input, RunInfo::default())
}

/// A machine for `flow` with no input, started.
fn started_machine(flow: &CompiledFlow) -> RunMachine<'_> {
    let mut machine = fresh(flow, json!({}));
    machine.handle(Event::Start, at(0));
    machine
}

fn failure() -> Event {
    failure_of("each", Some(0), 1)
}

fn failure_of(step: &str, part: Option<usize>, attempt: u32) -> Event {
    Event::Finished {
        step: step.into(),
        part,
        attempt,
        result: Err(Failed::from(step_error(codes::SCRIPT, "exit 1"))),
    }
}

fn success_of(step: &str, part: Option<usize>, attempt: u32) -> Event {
    Event::Finished {
        step: step.into(),
        part,
        attempt,
        result: Ok(Done::output(json!("ok"))),
    }
}

const PARTS_RETRY: &str = "
steps:
  - key: each
    parallel:
      items: $input.xs
      step: {script: {source: x}, attempts: 3, backoff: 1m}
";

#[test]
fn cancelling_closes_every_part_and_clears_its_retry() {
    let spec = spec(PARTS_RETRY);
    let flow = CompiledFlow::new(spec.clone()).expect("valid");
    let mut machine = fresh(&flow, json!({"xs": ["a", "b"]}));
    let started = machine.handle(Event::Start, at(0));
    assert_eq!(started.len(), 2, "{started:?}");
    machine.handle(failure(), at(1));
    let actions = machine.handle(Event::Cancel, at(2));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Cancelled);
    let each = &record.steps["each"];
    for part in &each.parts {
        assert_eq!(part.retry_at, None, "part {} keeps no retry", part.key);
        assert_eq!(part.status, StepPhase::Failed);
        for a in &part.attempts {
            assert_ne!(
                a.status,
                StepPhase::Running,
                "part {} attempt {}",
                part.key,
                a.number
            );
        }
    }
    assert_eq!(each.retry_at, None);
    // Only the part still working is stopped; the one waiting to retry has nothing running.
    assert_eq!(
        actions,
        vec![Action::Stop {
            step: "each".into(),
            part: Some(1)
        }]
    );
}

#[test]
fn items_with_clashing_names_keep_both_outputs() {
    let spec = spec(
        "
steps:
  - key: each
    parallel: {items: $input.xs, step: {script: {source: x}}}
",
    );
    let flow = CompiledFlow::new(spec.clone()).expect("valid");
    let mut machine = fresh(&flow, json!({"xs": ["Ana B", "ana-b"]}));
    let runs = machine.handle(Event::Start, at(0));
    let mut ids: Vec<String> = runs
        .iter()
        .filter_map(|a| match a {
            Action::Run(w) => Some(w.idempotency_key()),
            _ => None,
        })
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 2, "two parts, two idempotency keys: {ids:?}");
    machine.handle(success_of("each", Some(0), 1), at(1));
    machine.handle(success_of("each", Some(1), 1), at(2));
    let output = machine.summarized().steps["each"]
        .output
        .clone()
        .expect("output");
    assert_eq!(output["by_key"], json!({"ana-b": "ok", "ana-b-2": "ok"}));
}

#[test]
fn parts_started_again_by_a_loop_pass_have_new_identities() {
    let spec = spec(
        "
steps:
  - key: rounds
    loop:
      until: $loop.iteration == 2
      maxIterations: 3
      steps:
        - key: each
          parallel: {items: $input.xs, step: {script: {source: x}}}
",
    );
    let flow = CompiledFlow::new(spec.clone()).expect("valid");
    let mut machine = fresh(&flow, json!({"xs": ["a", "b"]}));
    let mut pending: Vec<crate::engine::Work> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut actions = machine.handle(Event::Start, at(0));
    let mut t = 0;
    loop {
        for action in actions.drain(..) {
            if let Action::Run(w) = action {
                keys.push(w.idempotency_key());
                pending.push(*w);
            }
        }
        let Some(w) = pending.pop() else { break };
        t += 1;
        let part = w.part.as_ref().map(|p| p.index);
        actions = machine.handle(success_of(&w.step, part, w.attempt), at(t));
    }
    assert_eq!(machine.status().phase, RunPhase::Succeeded);
    assert_eq!(keys.len(), 4, "two parts in each of two passes: {keys:?}");
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct,
        {
            let mut k = keys.clone();
            k.sort();
            k
        },
        "every part attempt has its own idempotency key: {keys:?}"
    );
    // A restart keeps the round: a resumed machine names the same work.
    assert_eq!(machine.summarized().steps["each"].rounds, 2);
}

/// A machine that picks the run up from `record` alone, after a trip
/// through JSON as a Run's status would make.
fn restarted<'f>(flow: &'f CompiledFlow, input: Value, record: &RunStatus) -> RunMachine<'f> {
    let saved = serde_json::to_string(record).expect("record to JSON");
    let state: RunStatus = serde_json::from_str(&saved).expect("record from JSON");
    RunMachine::resume(flow, input, RunInfo::default(), state).expect("same flow")
}

#[test]
fn a_waiting_approval_is_asked_again_after_a_restart() {
    let spec = spec(
        "
steps:
  - key: draft
    script: {source: x}
  - key: review
    approval: {decisions: [approve, reject], show: [draft]}
",
    );
    let flow = CompiledFlow::new(spec.clone()).expect("valid");
    let mut machine = started_machine(&flow);
    let asked: Vec<Action> = machine.handle(success_of("draft", None, 1), at(1));
    let [Action::Ask(request)] = asked.as_slice() else {
        panic!("one ask, got {asked:?}")
    };
    let mut again = restarted(&flow, json!({}), &machine.summarized());
    assert_eq!(again.pending_approvals(), vec![request.clone()]);
    assert!(
        again.handle(Event::Tick, at(2)).is_empty(),
        "a tick asks nothing new"
    );
    assert_eq!(again.next_wake(), None);
}

#[test]
fn a_pending_retry_wakes_the_engine_after_a_restart() {
    let spec = spec(PARTS_RETRY);
    let flow = CompiledFlow::new(spec.clone()).expect("valid");
    let input = json!({"xs": ["a", "b"]});
    let mut machine = fresh(&flow, input.clone());
    machine.handle(Event::Start, at(0));
    let actions = machine.handle(failure(), at(1));
    let [Action::WakeAt(first)] = actions.as_slice() else {
        panic!("one wake, got {actions:?}")
    };
    let first = *first;
    // A one-minute backoff, spread by up to a quarter.
    assert!(first >= at(61) && first < at(76), "{first}");
    let mut again = restarted(&flow, input, &machine.summarized());
    assert_eq!(again.next_wake(), Some(first));
    // The second part fails later and retries later: the earlier wake stays first.
    let actions = again.handle(failure_of("each", Some(1), 1), at(30));
    let [Action::WakeAt(second)] = actions.as_slice() else {
        panic!("one wake, got {actions:?}")
    };
    let second = *second;
    assert!(second >= at(90) && second < at(105), "{second}");
    assert_eq!(again.next_wake(), Some(first));
    let retried = again.handle(Event::Tick, first);
    assert!(matches!(retried.as_slice(), [Action::Run(w)] if w.attempt == 2));
    assert_eq!(
        again.next_wake(),
        Some(second),
        "the second part's retry is still due"
    );
}

#[test]
fn a_record_is_never_resumed_with_another_flow() {
    let first = spec("steps: [{key: a, script: {source: x}}]");
    let changed = spec("steps: [{key: a, script: {source: y}}]");
    let first = CompiledFlow::new(first.clone())
        .expect("valid")
        .with_generation(3);
    let changed = CompiledFlow::new(changed.clone()).expect("valid");
    let mut machine = fresh(&first, json!({}));
    machine.handle(Event::Start, at(0));
    let record = machine.summarized();
    assert_eq!(
        record.flow_digest.as_deref(),
        Some(first.get().digest.as_str())
    );
    assert_eq!(record.flow_generation, Some(3));
    let refused = RunMachine::resume(&changed, json!({}), RunInfo::default(), record.clone())
        .err()
        .expect("refused");
    let message = refused.to_string();
    assert!(
        message.contains(&first.get().digest) && message.contains(&changed.get().digest),
        "{message}"
    );
    // A started record that names no flow is refused too.
    let unpinned = RunStatus {
        flow_digest: None,
        ..record
    };
    assert!(matches!(
        RunMachine::resume(&first, json!({}), RunInfo::default(), unpinned),
        Err(ResumeError::Unpinned { .. })
    ));
}

#[test]
fn since_comes_back_from_the_record() {
    let spec = spec("steps: [{key: a, script: {source: x}, input: {since: $run.since}}]");
    let flow = CompiledFlow::new(spec.clone()).expect("valid");
    let run = RunInfo {
        since: Some("1799990000".into()),
        ..Default::default()
    };
    let mut machine = RunMachine::new(&flow, json!({}), run);
    machine.handle(Event::Start, at(0));
    let record = machine.summarized();
    assert_eq!(record.since.as_deref(), Some("1799990000"));
    let again =
        RunMachine::resume(&flow, json!({}), RunInfo::default(), record).expect("same flow");
    let work = again.running_work();
    assert_eq!(work.len(), 1);
    assert_eq!(work[0].run.since.as_deref(), Some("1799990000"));
    assert_eq!(work[0].input, json!({"since": "1799990000"}));
}

const REVIEW_AND_ENTRY: &str = "
steps:
  - key: review
    approval: {decisions: [approve, reject]}
  - key: assign
    approval: {mode: entry, fields: [{name: owner, type: string}, {name: count, type: integer}]}
";

fn answer(decision: Option<&str>, response: Option<Value>) -> crate::engine::Decision {
    crate::engine::Decision {
        decision: decision.map(str::to_string),
        response,
        ..Default::default()
    }
}

#[test]
fn a_decision_the_step_does_not_offer_is_refused_and_changes_nothing() {
    let flow = CompiledFlow::new(spec(REVIEW_AND_ENTRY)).expect("valid");
    let mut machine = started_machine(&flow);
    let before = machine.summarized();
    let refused = machine
        .decide("review", 1, answer(Some("maybe"), None), at(1))
        .expect_err("refused");
    assert_eq!(
        refused.to_string(),
        "`maybe` is not a decision of step `review`; choose one of approve, reject"
    );
    assert_eq!(
        machine.summarized(),
        before,
        "a refused answer changes nothing"
    );
    let stale = machine.decide("review", 2, answer(Some("approve"), None), at(1));
    assert!(matches!(
        stale,
        Err(crate::engine::DecideError::NotWaiting { .. })
    ));
    let asked = machine
        .decide("review", 1, answer(Some("approve"), None), at(2))
        .expect("taken");
    assert!(matches!(asked.as_slice(), [Action::Ask(r)] if r.step == "assign"));
}

#[test]
fn an_entry_must_have_exactly_the_declared_fields_and_types() {
    let flow = CompiledFlow::new(spec(REVIEW_AND_ENTRY)).expect("valid");
    let mut machine = started_machine(&flow);
    machine
        .decide("review", 1, answer(Some("approve"), None), at(1))
        .expect("taken");
    let bad = json!({"owner": null, "count": "1", "extra": true});
    let refused = machine
        .decide("assign", 1, answer(None, Some(bad)), at(2))
        .expect_err("refused");
    assert!(refused.to_string().contains("`owner`"), "{refused}");
    assert_eq!(machine.status().steps["assign"].status, StepPhase::Waiting);
    let good = json!({"owner": "ana", "count": 2});
    machine
        .decide("assign", 1, answer(None, Some(good.clone())), at(3))
        .expect("taken");
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded);
    assert_eq!(record.result(), Some(&good));
}

/// 100 kB of one letter: a large output that is easy to count in a status.
fn big(letter: char) -> String {
    letter.to_string().repeat(100_000)
}

/// A script that printed `text` (not JSON): its output is that string.
fn printed(step: &str, part: Option<usize>, text: String) -> Event {
    Event::Finished {
        step: step.into(),
        part,
        attempt: 1,
        result: Ok(Done {
            output: Value::String(text.clone()),
            text: Some(text),
            usage: None,
            log: None,
        }),
    }
}

/// The record as stored: each large value of the steps appears once
/// there, plus the copies the run's own `output` holds (a flow without
/// `output:` shows its last step's output there, as people read it); the
/// whole stays near their total size, and reading it back rebuilds every
/// copy.
fn assert_stored_once(record: &RunStatus, values: &[String]) {
    let stored = serde_json::to_string(record).expect("record to JSON");
    let output = serde_json::to_string(&record.output).expect("output to JSON");
    let mut total = 0;
    for value in values {
        let in_output = output.matches(value.as_str()).count();
        assert_eq!(
            stored.matches(value.as_str()).count(),
            1 + in_output,
            "one copy each in the steps"
        );
        total += value.len() * (1 + in_output);
    }
    let limit = total * 5 / 4;
    assert!(stored.len() < limit, "{} bytes stored", stored.len());
    let read: RunStatus = serde_json::from_str(&stored).expect("record from JSON");
    assert_eq!(&read, record, "reading the record back rebuilds its views");
}

/// The status of a run of two scripts, `a` then `b`, that finished with
/// `a_done` and `b_done`.
fn run_a_then_b(a_done: Event, b_done: Event) -> RunStatus {
    let flow = CompiledFlow::new(spec(
        "steps:\n  - {key: a, script: {source: x}}\n  - {key: b, script: {source: x}}\n",
    ))
    .expect("valid");
    let mut machine = started_machine(&flow);
    machine.handle(a_done, at(1));
    machine.handle(b_done, at(2));
    machine.summarized()
}

#[test]
fn two_large_outputs_are_stored_once_each() {
    let record = run_a_then_b(printed("a", None, big('a')), printed("b", None, big('b')));
    assert_eq!(record.phase, RunPhase::Succeeded);
    assert_eq!(record.result(), Some(&json!(big('b'))));
    assert_eq!(
        record.output,
        Some(json!(big('b'))),
        "the run shows its result"
    );
    assert_eq!(record.output_from.as_deref(), Some("b"));
    assert_eq!(record.steps["b"].attempts[0].output, Some(json!(big('b'))));
    assert_stored_once(&record, &[big('a'), big('b')]);
}

/// A script that printed a JSON object: its text is that object as JSON.
fn printed_json(step: &str, output: Value) -> Event {
    Event::Finished {
        step: step.into(),
        part: None,
        attempt: 1,
        result: Ok(Done {
            text: Some(output.to_string()),
            output,
            usage: None,
            log: None,
        }),
    }
}

#[test]
fn json_outputs_are_stored_without_their_text() {
    let record = run_a_then_b(
        printed_json("a", json!({"body": big('a')})),
        printed_json("b", json!({"body": big('b')})),
    );
    assert_eq!(record.phase, RunPhase::Succeeded);
    let stored = serde_json::to_value(&record).expect("record to JSON");
    assert_eq!(stored["steps"]["a"]["textFromOutput"], true);
    assert!(stored["steps"]["a"].get("text").is_none());
    assert_stored_once(&record, &[big('a'), big('b')]);
    let read: RunStatus = serde_json::from_value(stored).expect("read back");
    assert_eq!(
        read.steps["a"].text.as_deref(),
        Some(json!({"body": big('a')}).to_string().as_str()),
        "`$steps.a.text` is rebuilt from the output"
    );
}

#[test]
fn large_part_outputs_are_stored_once_each() {
    let flow = CompiledFlow::new(spec(
        "steps:\n  - key: each\n    parallel: {items: $input.xs, step: {script: {source: x}}}\n",
    ))
    .expect("valid");
    let mut machine = fresh(&flow, json!({"xs": ["p", "q"]}));
    machine.handle(Event::Start, at(0));
    machine.handle(printed("each", Some(0), big('p')), at(1));
    machine.handle(printed("each", Some(1), big('q')), at(2));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded);
    let gathered = record.steps["each"].output.as_ref().expect("gathered");
    assert_eq!(gathered["by_key"]["q"], json!(big('q')));
    assert_stored_once(&record, &[big('p'), big('q')]);
}

const HURRIED: &str = "
steps:
  - key: review
    attempts: 2
    backoff: 1m
    timeout: 1h
    approval: {decisions: [approve]}
";

fn approve() -> crate::engine::Decision {
    crate::engine::Decision {
        decision: Some("approve".into()),
        feedback: None,
        response: None,
        decided_by: None,
        ballots: Vec::new(),
    }
}

#[test]
fn an_unanswered_approval_times_out_is_asked_again_then_fails() {
    let flow = CompiledFlow::new(spec(HURRIED)).expect("valid");
    let mut machine = fresh(&flow, json!({}));
    let asked = machine.handle(Event::Start, at(0));
    assert!(
        matches!(asked.as_slice(), [Action::Ask(r)] if r.attempt == 1),
        "{asked:?}"
    );
    assert_eq!(machine.next_wake(), Some(at(3600)));
    // Nothing happens before the hour is up.
    assert!(machine.handle(Event::Tick, at(3599)).is_empty());
    assert_eq!(machine.pending_approvals().len(), 1);
    // Then the attempt fails with a timeout and waits out its backoff.
    machine.handle(Event::Tick, at(3600));
    let record = machine.summarized();
    let review = &record.steps["review"];
    assert_eq!(review.attempts[0].status, StepPhase::Failed);
    let error = review.attempts[0].error.clone().expect("an error");
    assert_eq!(error.code, codes::TIMEOUT);
    assert_eq!(error.message, "nobody answered within 1h");
    assert!(
        machine.pending_approvals().is_empty(),
        "nobody is asked during the backoff"
    );
    assert!(machine.running_work().is_empty());
    let retry = machine.next_wake().expect("a retry");
    // The retry asks again: attempt 2, a new deadline from its own start.
    let again = machine.handle(Event::Tick, retry);
    assert!(
        matches!(again.as_slice(), [Action::Ask(r)] if r.attempt == 2),
        "{again:?}"
    );
    let deadline = machine.next_wake().expect("a deadline");
    assert_eq!(
        deadline,
        retry
            .checked_add(jiff::SignedDuration::from_hours(1))
            .expect("time")
    );
    // A record rebuilt from the status alone knows the same deadline.
    let record = machine.summarized();
    let resumed =
        RunMachine::resume(&flow, json!({}), RunInfo::default(), record.clone()).expect("resume");
    assert_eq!(resumed.next_wake(), Some(deadline));
    // The answer to the first, expired attempt is refused; the second ends it.
    assert!(machine.decide("review", 1, approve(), deadline).is_err());
    machine.handle(Event::Tick, deadline);
    assert_eq!(machine.summarized().phase, RunPhase::Failed);
    assert_eq!(machine.summarized().steps["review"].attempts.len(), 2);
}

#[test]
fn an_approval_answered_in_time_never_times_out() {
    let flow = CompiledFlow::new(spec(HURRIED)).expect("valid");
    let mut machine = started_machine(&flow);
    machine
        .decide("review", 1, approve(), at(10))
        .expect("taken");
    assert_eq!(machine.summarized().phase, RunPhase::Succeeded);
    assert_eq!(machine.next_wake(), None);
    assert!(machine.handle(Event::Tick, at(7200)).is_empty());
}

#[test]
fn a_waiting_approval_failed_by_its_driver_is_asked_again_then_fails_the_run() {
    let flow = CompiledFlow::new(spec(HURRIED)).expect("valid");
    let mut machine = started_machine(&flow);
    let tampered = || step_error(codes::TAMPERED, "the Approval is not the run's");
    // A stale attempt number changes nothing.
    assert!(
        machine
            .fail_waiting("review", 2, tampered(), at(1))
            .is_empty()
    );
    assert_eq!(machine.pending_approvals().len(), 1);
    machine.fail_waiting("review", 1, tampered(), at(1));
    let record = machine.summarized();
    let first = &record.steps["review"].attempts[0];
    assert_eq!(first.status, StepPhase::Failed);
    assert_eq!(
        first.error.as_ref().map(|e| e.code.as_str()),
        Some(codes::TAMPERED)
    );
    // The answer to the failed attempt is refused; a retry asks anew.
    assert!(machine.decide("review", 1, approve(), at(2)).is_err());
    let retry = machine.next_wake().expect("a retry");
    let again = machine.handle(Event::Tick, retry);
    assert!(
        matches!(again.as_slice(), [Action::Ask(r)] if r.attempt == 2),
        "{again:?}"
    );
    machine.fail_waiting("review", 2, tampered(), retry);
    assert_eq!(machine.summarized().phase, RunPhase::Failed);
}

const BOTH_AND_SEND_BACK: &str = "
steps:
  - key: build
    script: {source: x}
  - key: triage
    approval:
      mode: both
      show: [build]
      decisions: [accept, changes]
      fields: [{name: owner, type: string}]
    sendBack: [{exit: changes, to: build}]
";

/// The one attempt the actions ask to run.
fn run_of(actions: &[Action]) -> &crate::engine::Work {
    let runs: Vec<&crate::engine::Work> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Run(w) => Some(&**w),
            _ => None,
        })
        .collect();
    assert_eq!(runs.len(), 1, "{actions:?}");
    runs[0]
}

#[test]
fn a_redone_script_gets_the_reviewers_decision_and_feedback() {
    let flow = CompiledFlow::new(spec(BOTH_AND_SEND_BACK)).expect("valid");
    let mut machine = fresh(&flow, json!({}));
    let first = machine.handle(Event::Start, at(0));
    assert_eq!(run_of(&first).review, None, "a first attempt has no review");
    machine.handle(success_of("build", None, 1), at(1));
    let changes = crate::engine::Decision {
        decision: Some("changes".into()),
        feedback: Some("Pin the base image.".into()),
        response: Some(json!({"owner": "ana"})),
        decided_by: Some("bob".into()),
        ballots: Vec::new(),
    };
    let again = machine.decide("triage", 1, changes, at(2)).expect("taken");
    let redo = run_of(&again);
    assert_eq!((redo.step.as_str(), redo.attempt), ("build", 2));
    let review = redo.review.as_ref().expect("the redone script is told");
    assert_eq!(
        review.for_script(),
        json!({
            "decision": "changes",
            "feedback": "Pin the base image.",
            "by": "bob",
            "reviewed": {"build": "ok"},
        })
    );
    // A machine rebuilt from the status builds the same work.
    let rebuilt = restarted(&flow, json!({}), &machine.summarized());
    let running = rebuilt.running_work();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].review, redo.review);
}

#[test]
fn a_both_mode_answer_gives_the_decision_and_the_entry() {
    let flow = CompiledFlow::new(spec(BOTH_AND_SEND_BACK)).expect("valid");
    let mut machine = started_machine(&flow);
    machine.handle(success_of("build", None, 1), at(1));
    // A decision without the entry is refused.
    let refused = machine
        .decide("triage", 1, answer(Some("accept"), None), at(2))
        .expect_err("no entry");
    assert!(refused.to_string().contains("`owner`"), "{refused}");
    let ballots = vec![
        crate::engine::Ballot {
            by: "ana".into(),
            decision: "accept".into(),
            feedback: None,
        },
        crate::engine::Ballot {
            by: "cy".into(),
            decision: "accept".into(),
            feedback: Some("fine".into()),
        },
    ];
    let accept = crate::engine::Decision {
        decision: Some("accept".into()),
        feedback: Some("fine".into()),
        response: Some(json!({"owner": "ana"})),
        decided_by: Some("ana, cy".into()),
        ballots,
    };
    machine.decide("triage", 1, accept, at(3)).expect("taken");
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded);
    assert_eq!(
        record.steps["triage"].output,
        Some(json!({
            "decision": "accept",
            "feedback": "fine",
            "decidedBy": "ana, cy",
            "response": {"owner": "ana"},
            "answers": [
                {"by": "ana", "decision": "accept", "feedback": null},
                {"by": "cy", "decision": "accept", "feedback": "fine"},
            ],
        }))
    );
    assert_eq!(
        record.steps["triage"].exit.as_deref(),
        Some("accept"),
        "the decision is the exit"
    );
}

fn log(text: &str) -> crate::api::LogTail {
    crate::api::LogTail {
        text: text.into(),
        cut: false,
    }
}

#[test]
fn each_attempt_keeps_its_scripts_log_until_it_is_trimmed() {
    let flow = CompiledFlow::new(spec(
        "
steps:
  - key: build
    script: {source: x}
    attempts: 7
    backoff: 1s
",
    ))
    .unwrap();
    let mut machine = started_machine(&flow);
    for attempt in 1..=6 {
        let failed = Failed {
            log: Some(log(&format!("try {attempt} broke\n"))),
            ..Failed::from(step_error(codes::SCRIPT, "exit 1"))
        };
        let event = Event::Finished {
            step: "build".into(),
            part: None,
            attempt,
            result: Err(failed),
        };
        machine.handle(event, at(i64::from(attempt) * 1000));
        machine.handle(Event::Tick, at(i64::from(attempt) * 1000 + 500));
    }
    let done = Done {
        log: Some(log("built\n")),
        ..Done::output(json!({"ok": true}))
    };
    let event = Event::Finished {
        step: "build".into(),
        part: None,
        attempt: 7,
        result: Ok(done),
    };
    machine.handle(event, at(10_000));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded);
    let attempts = &record.steps["build"].attempts;
    assert_eq!(attempts.len(), 7);
    assert_eq!(attempts[6].log, Some(log("built\n")), "a success keeps it");
    assert_eq!(attempts[5].log, Some(log("try 6 broke\n")), "a failure too");
    // Only the latest attempts keep what they printed.
    assert!(attempts[1].trimmed && attempts[1].log.is_none());
    assert!(!attempts[2].trimmed && attempts[2].log.is_some());
}

#[test]
fn a_stopped_attempts_log_is_kept_once_its_attempt_has_ended() {
    let flow = CompiledFlow::new(spec("steps: [{key: nap, script: {source: sleep 600}}]")).unwrap();
    let mut machine = fresh(&flow, json!({}));
    let started = machine.handle(Event::Start, at(0));
    let work = started
        .into_iter()
        .find_map(|a| match a {
            Action::Run(work) => Some(*work),
            _ => None,
        })
        .expect("the step is launched");
    let mut record = machine.summarized();
    assert!(
        !crate::engine::keep_stopped_log(&mut record, &work, log("early\n")),
        "not while it still runs"
    );
    machine.handle(Event::Cancel, at(1));
    let mut record = machine.summarized();
    assert!(crate::engine::keep_stopped_log(
        &mut record,
        &work,
        log("napping\n")
    ));
    assert_eq!(record.steps["nap"].attempts[0].log, Some(log("napping\n")));
    assert!(
        !crate::engine::keep_stopped_log(&mut record, &work, log("again\n")),
        "kept once"
    );
}

const CRITIQUED: &str = "
steps:
  - key: write
    agent: {prompt: Write a post.}
  - key: critic
    agent:
      prompt: Review the post.
      reviews: write
      decisions:
        - {name: approve}
        - {name: changes, description: the post needs work}
    sendBack: [{exit: changes, to: write}]
  - key: publish
    after: [critic.approve]
    script: {source: x}
";

/// The attempt of `step` the actions start, if any.
fn started<'a>(actions: &'a [Action], step: &str) -> Option<&'a crate::engine::Work> {
    actions.iter().find_map(|a| match a {
        Action::Run(work) if work.step == step => Some(work.as_ref()),
        _ => None,
    })
}

#[test]
fn an_agent_that_decides_sends_work_back_with_its_instructions() {
    let flow = CompiledFlow::new(spec(CRITIQUED)).expect("valid");
    let mut machine = started_machine(&flow);
    let wrote = |attempt: u32, draft: &str| Event::Finished {
        step: "write".into(),
        part: None,
        attempt,
        result: Ok(Done::output(json!(draft))),
    };
    let actions = machine.handle(wrote(1, "Draft one."), at(1));
    let critic = started(&actions, "critic").expect("the critic runs");
    let crate::engine::Task::Agent(task) = &critic.task else {
        panic!("an agent task")
    };
    assert_eq!(task.given[0].name, "write");
    assert_eq!(task.given[0].role, "reviewed");
    assert_eq!(task.given[0].value, Some(json!("Draft one.")));
    let decided = |decision: &str, instructions: &str| Event::Finished {
        step: "critic".into(),
        part: None,
        attempt: if decision == "changes" { 1 } else { 2 },
        result: Ok(Done::output(json!({
            "decision": decision, "instructions": instructions, "output": null
        }))),
    };
    let actions = machine.handle(decided("changes", "Cut the intro to two sentences."), at(2));
    let record = machine.summarized();
    assert_eq!(record.steps["critic"].exit.as_deref(), Some("changes"));
    assert_eq!(
        record.steps["critic"].output,
        Some(json!({"decision": "changes", "instructions": "Cut the intro to two sentences."}))
    );
    let write = started(&actions, "write").expect("the work goes back to the writer");
    let request = write.review.as_ref().expect("with a change request");
    assert_eq!(request.reviewer, "critic");
    assert_eq!(request.decision, "changes");
    assert_eq!(request.instructions, "Cut the intro to two sentences.");
    assert_eq!(
        request.reviewed,
        [("write".to_string(), json!("Draft one."))]
    );
    let crate::engine::Task::Agent(task) = &write.task else {
        panic!("an agent task")
    };
    assert_eq!(task.change_request.as_ref(), Some(request));
    assert!(started(&actions, "publish").is_none());

    let actions = machine.handle(wrote(2, "Draft two."), at(3));
    assert!(started(&actions, "critic").is_some(), "reviewed again");
    let actions = machine.handle(decided("approve", ""), at(4));
    assert!(started(&actions, "publish").is_some(), "{actions:?}");
    let record = machine.summarized();
    assert_eq!(record.send_backs.get("critic->write"), Some(&1));
    assert_eq!(
        record.steps["critic"].output,
        Some(json!({"decision": "approve", "instructions": null}))
    );
}
