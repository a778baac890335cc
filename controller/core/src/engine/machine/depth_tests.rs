//! The engine keeps no value nested deeper than [`MAX_JSON_DEPTH`]: a step's
//! output, what loops and joins build from them, and the flow's `output:`.
//! A deeper one would make the Run's status unreadable, and with it every
//! list of Runs.

use serde_json::{Value, json};

use crate::api::{
    Attempt, FlowRef, PartStatus, Run, RunPhase, RunSpec, RunStatus, StepPhase, StepStatus,
};
use crate::engine::test_support::{at, compile};
use crate::engine::{Done, Event, RunInfo, RunMachine, codes};
use crate::flow::{MAX_JSON_DEPTH, json_depth};

/// A value `levels` deep, lists and objects in turn.
fn nested(levels: usize) -> Value {
    let mut value = json!("bottom");
    for level in 0..levels {
        value = if level % 2 == 0 {
            json!([value])
        } else {
            json!({ "k": value })
        };
    }
    value
}

fn printed(step: &str, part: Option<usize>, attempt: u32, output: Value) -> Event {
    Event::Finished {
        step: step.into(),
        part,
        attempt,
        result: Ok(Done::output(output)),
    }
}

fn too_deep_message(what: &str, depth: usize) -> String {
    format!(
        "{what} nests arrays and objects {depth} levels deep; at most 64 are kept in a Run's record (deeper records cannot be read back)"
    )
}

#[test]
fn an_output_deeper_than_the_bound_fails_the_attempt_and_a_retry_may_succeed() {
    let flow = compile("steps:\n  - {key: s, script: {source: x}, attempts: 2, backoff: 1m}\n");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    machine.handle(printed("s", None, 1, nested(MAX_JSON_DEPTH + 1)), at(1));
    let record = machine.summarized();
    let s = &record.steps["s"];
    assert_eq!(s.status, StepPhase::Running, "a retry is due");
    assert!(s.retry_at.is_some());
    let error = s.attempts[0].error.as_ref().expect("the attempt failed");
    assert_eq!(error.code, codes::OUTPUT);
    assert_eq!(error.message, too_deep_message("the output", 65));
    assert!(
        json_depth(&serde_json::to_value(&record).unwrap()) < MAX_JSON_DEPTH,
        "nothing deep is kept"
    );

    // A one-minute backoff, spread by up to a quarter.
    machine.handle(Event::Tick, at(100));
    machine.handle(printed("s", None, 2, nested(MAX_JSON_DEPTH)), at(101));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded);
    assert_eq!(record.steps["s"].output, Some(nested(MAX_JSON_DEPTH)));
}

#[test]
fn a_part_output_deeper_than_the_bound_fails_that_part() {
    let flow = compile(
        "steps:\n  - key: each\n    parallel: {items: $input.xs, step: {script: {source: x}}}\n",
    );
    let mut machine = RunMachine::new(&flow, json!({"xs": ["a", "b"]}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    machine.handle(printed("each", Some(0), 1, json!("fine")), at(1));
    machine.handle(printed("each", Some(1), 1, nested(100)), at(2));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Failed);
    let part = &record.steps["each"].parts[1];
    assert_eq!(part.status, StepPhase::Failed);
    assert_eq!(
        part.error.as_ref().map(|e| e.message.clone()),
        Some(too_deep_message("the output", 100))
    );
    assert_eq!(part.output, None);
}

#[test]
fn a_loop_that_would_wrap_its_steps_too_deep_fails() {
    // A loop's output is {"iterations", "steps": {KEY: output}}: two levels
    // around its last step's output.
    let flow = compile(
        "steps:\n  - key: again\n    loop:\n      until: 'true'\n      maxIterations: 2\n      steps:\n        - {key: s, script: {source: x}}\n",
    );
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    machine.handle(printed("s", None, 1, nested(MAX_JSON_DEPTH - 1)), at(1));
    let record = machine.summarized();
    assert_eq!(record.steps["s"].status, StepPhase::Completed);
    let again = &record.steps["again"];
    assert_eq!(again.status, StepPhase::Failed);
    assert_eq!(
        again.error.as_ref().map(|e| e.message.clone()),
        Some(too_deep_message("the step's output", 65))
    );
    assert_eq!(record.phase, RunPhase::Failed);
}

const WRAPPING_OUTPUT: &str = "
steps:
  - {key: s, script: {source: x}}
output:
  report:
    body: $steps.s.output
";

#[test]
fn a_flow_output_that_would_be_too_deep_fails_the_run_instead_of_being_written() {
    let flow = compile(WRAPPING_OUTPUT);
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    // 63 levels, wrapped in two more by `output:`.
    machine.handle(printed("s", None, 1, nested(MAX_JSON_DEPTH - 1)), at(1));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Failed);
    assert_eq!(record.output, None);
    let error = record.error.as_ref().expect("the run says why");
    assert_eq!(error.code, codes::OUTPUT);
    assert_eq!(
        error.message,
        too_deep_message("the flow's `output:`", MAX_JSON_DEPTH + 1)
    );

    // Two levels less fit.
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    machine.handle(printed("s", None, 1, nested(MAX_JSON_DEPTH - 2)), at(1));
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded);
    assert_eq!(record.output.as_ref().map(json_depth), Some(MAX_JSON_DEPTH));
}

/// A Run holding a value at the bound in every place the status keeps one,
/// each as deep in the status as it can sit.
fn run_at_the_bound() -> Run {
    let deep = nested(MAX_JSON_DEPTH);
    let attempt = Attempt {
        number: 1,
        status: StepPhase::Completed,
        output: Some(deep.clone()),
        ..Default::default()
    };
    let part = PartStatus {
        key: "p".into(),
        label: "p".into(),
        item: Some(deep.clone()),
        status: StepPhase::Completed,
        output: Some(deep.clone()),
        attempts: vec![attempt.clone(), attempt.clone()],
        ..Default::default()
    };
    let step = StepStatus {
        status: StepPhase::Completed,
        output: Some(deep.clone()),
        attempts: vec![attempt.clone(), attempt],
        parts: vec![part],
        ..Default::default()
    };
    let mut run = Run::new(
        "deep",
        RunSpec {
            flow_ref: FlowRef { name: "f".into() },
            input: Some(deep.clone()),
            cancel: false,
            from: None,
        },
    );
    run.metadata.namespace = Some("team".into());
    run.status = Some(RunStatus {
        phase: RunPhase::Succeeded,
        steps: [("s".to_string(), step)].into(),
        output: Some(deep),
        ..Default::default()
    });
    run
}

#[test]
fn a_record_with_values_at_the_bound_reads_back_inside_a_list_of_runs() {
    let run = run_at_the_bound();
    // What a list of Runs from the API server looks like.
    let list = json!({
        "apiVersion": "coxswain.dev/v1alpha1",
        "kind": "RunList",
        "metadata": {"resourceVersion": "1"},
        "items": [serde_json::to_value(&run).unwrap()],
    });
    let depth = json_depth(&list);
    // Every level the status and the list add, with room to spare below
    // serde_json's 128.
    assert!(depth <= MAX_JSON_DEPTH + 12, "{depth}");
    assert!(depth + 32 < 128, "{depth}");
    let text = serde_json::to_string(&list).unwrap();
    let back: Value = serde_json::from_str(&text).expect("the list reads back");
    let read: Run = serde_json::from_value(back["items"][0].clone()).expect("as a Run");
    assert_eq!(read.status, run.status);
    assert_eq!(read.spec, run.spec);
    // And straight into the Run type, as kube's client decodes a list.
    #[derive(serde::Deserialize)]
    struct RunList {
        items: Vec<Run>,
    }
    let typed: RunList = serde_json::from_str(&text).expect("typed list reads back");
    assert_eq!(typed.items[0].status, run.status);
}
