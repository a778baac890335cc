//! Saves and lookups in the engine: a save is work whose task carries its
//! key and value read from the run; a step with lookups starts only once
//! the driver ran them and the engine recorded what they found, which then
//! reaches the step as inputs and survives in the attempt's status.

use serde_json::{Map, Value, json};

use crate::api::{FlowSpec, RunPhase, StepError, StepPhase};
use crate::engine::test_support::at;
use crate::engine::{
    Action, CompiledFlow, Done, Event, RunInfo, RunMachine, Task, Work, codes, step_error,
};

fn spec(yaml: &str) -> FlowSpec {
    serde_yaml::from_str(yaml).expect("test flow is well-formed YAML")
}

fn runs(actions: &[Action]) -> Vec<&Work> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Run(w) => Some(w.as_ref()),
            _ => None,
        })
        .collect()
}

fn done(step: &str, attempt: u32, output: Value) -> Event {
    Event::Finished {
        step: step.into(),
        part: None,
        attempt,
        result: Ok(Done::output(output)),
    }
}

/// What the driver found for the lookups of `step`'s `attempt`.
fn looked_up(step: &str, attempt: u32, found: Result<Map<String, Value>, StepError>) -> Event {
    Event::LookedUp {
        step: step.into(),
        part: None,
        attempt,
        found,
    }
}

/// A machine resumed from `machine`'s status alone, as a restarted driver's.
fn resumed<'f>(flow: &'f CompiledFlow, machine: &RunMachine<'_>) -> RunMachine<'f> {
    RunMachine::resume(
        flow,
        json!({}),
        RunInfo::default(),
        machine.status().clone(),
    )
    .expect("same flow")
}

fn found(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

const SAVE: &str = "
steps:
  - key: fetch
    script: {source: x}
  - key: remember
    save:
      collection: tickets
      key: $steps.fetch.output.id
  - key: note
    save:
      collection: notes
      key: fixed
      value: {title: $steps.fetch.output.title, seen: true}
";

#[test]
fn a_save_reads_its_key_and_value_from_the_run() {
    let flow = CompiledFlow::new(spec(SAVE)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    let fetched = json!({"id": 42, "title": "Disk full"});
    let actions = machine.handle(done("fetch", 1, fetched.clone()), at(1));
    let work = runs(&actions);
    let Task::Save(save) = &work[0].task else {
        panic!("a save step is save work: {work:?}")
    };
    assert_eq!(save.collection, "tickets");
    assert_eq!(save.key_text(), Ok("42".to_string()));
    assert_eq!(
        save.value, fetched,
        "the default value is the previous output"
    );
    let saved = json!({"collection": "tickets", "key": "42", "version": 1, "created": true});
    let actions = machine.handle(done("remember", 1, saved.clone()), at(2));
    let Task::Save(note) = &runs(&actions)[0].task else {
        panic!("second save")
    };
    assert_eq!(note.key_text(), Ok("fixed".to_string()));
    assert_eq!(note.value, json!({"title": "Disk full", "seen": true}));
    assert_eq!(machine.status().steps["remember"].output, Some(saved));
}

#[test]
fn a_key_that_is_not_text_or_a_number_is_refused_saying_what_it_was() {
    let flow = CompiledFlow::new(spec(SAVE)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    let actions = machine.handle(done("fetch", 1, json!({"id": ["a"]})), at(1));
    let Task::Save(save) = &runs(&actions)[0].task else {
        panic!("save work")
    };
    let error = save.key_text().expect_err("a list is no key");
    assert_eq!(error.code, codes::EXPRESSION);
    assert!(error.message.contains("list"), "{}", error.message);
    let actions = machine.handle(done("fetch", 1, json!({})), at(1));
    assert!(runs(&actions).is_empty(), "stale news starts nothing");
}

const LOOKUP: &str = r#"
steps:
  - key: fetch
    script: {source: x}
  - key: triage
    input: {ticket: $steps.fetch.output}
    lookup:
      - name: similar
        collection: tickets
        where: '$record.value.component == $steps.fetch.output.component'
        orderBy: $record.savedAt
        descending: true
        limit: 5
    script: {source: x}
  - key: post
    lookup:
      - {name: recent, collection: tickets}
    http: {url: "https://example.com/{{recent.json.0.key}}"}
"#;

#[test]
fn a_step_with_lookups_waits_for_them_then_gets_them_as_inputs() {
    let flow = CompiledFlow::new(spec(LOOKUP)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    let actions = machine.handle(done("fetch", 1, json!({"component": "db"})), at(1));
    let work = runs(&actions);
    assert!(work[0].lookups_due(), "the lookup runs first: {work:?}");
    let lookup = &work[0].lookups[0];
    assert_eq!(
        (
            lookup.name.as_str(),
            lookup.collection.as_str(),
            lookup.limit
        ),
        ("similar", "tickets", 5)
    );
    assert!(lookup.descending);
    // What its condition reads from the run travels with the work.
    assert_eq!(
        work[0].data.steps["fetch"]["output"],
        json!({"component": "db"})
    );
    // A restarted driver is told the same: the attempt runs, its lookup due.
    assert!(machine.running_work()[0].lookups_due());

    let records = json!([{"key": "t1", "value": {"component": "db"}, "version": 1}]);
    let actions = machine.handle(
        looked_up("triage", 1, Ok(found(&[("similar", records.clone())]))),
        at(2),
    );
    let work = runs(&actions);
    assert!(!work[0].lookups_due());
    assert_eq!(
        work[0].input,
        json!({"ticket": {"component": "db"}, "similar": records})
    );
    let attempt = &machine.status().steps["triage"].attempts[0];
    assert_eq!(
        attempt.lookups.as_ref().map(|l| l["similar"].clone()),
        Some(records.clone()),
        "the attempt keeps what it saw"
    );
    // Rebuilt from the record alone, the work has what was found.
    let again = resumed(&flow, &machine);
    let rebuilt = again.running_work();
    assert_eq!(rebuilt[0].input["similar"], records);
    // A second answer for the same attempt changes nothing.
    let late = machine.handle(
        looked_up("triage", 1, Ok(found(&[("similar", json!([]))]))),
        at(3),
    );
    assert!(runs(&late).is_empty());
    assert_eq!(
        machine.status().steps["triage"].attempts[0]
            .lookups
            .as_ref()
            .map(|l| l["similar"].clone()),
        Some(records)
    );

    // Placeholders read a lookup by its name.
    let actions = machine.handle(done("triage", 1, json!("ok")), at(4));
    let recent = json!([{"key": "t9"}]);
    assert!(runs(&actions)[0].lookups_due());
    let actions = machine.handle(
        looked_up("post", 1, Ok(found(&[("recent", recent.clone())]))),
        at(5),
    );
    let post = runs(&actions)[0];
    assert_eq!(post.data.steps["recent"]["output"], recent);
    assert_eq!(post.input["recent"], recent);
}

#[test]
fn a_lookup_that_fails_fails_its_attempt_and_a_retry_looks_again() {
    let yaml = LOOKUP.replace(
        "    script: {source: x}\n  - key: post",
        "    script: {source: x}\n    attempts: 2\n    backoff: 1s\n  - key: post",
    );
    let flow = CompiledFlow::new(spec(&yaml)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    machine.handle(done("fetch", 1, json!({"component": "db"})), at(1));
    let error = step_error(codes::EXPRESSION, "where fails on record `t4`");
    machine.handle(looked_up("triage", 1, Err(error.clone())), at(2));
    let triage = &machine.status().steps["triage"];
    assert_eq!(triage.attempts[0].error, Some(error));
    assert_eq!(triage.status, StepPhase::Running, "waiting to retry");
    let actions = machine.handle(Event::Tick, at(10));
    let work = runs(&actions);
    assert_eq!(work[0].attempt, 2);
    assert!(work[0].lookups_due(), "the retry looks again");
    machine.handle(
        looked_up("triage", 2, Err(step_error(codes::EXPRESSION, "again"))),
        at(11),
    );
    assert_eq!(machine.status().phase, RunPhase::Failed);
}

#[test]
fn parts_look_up_each_for_itself() {
    let yaml = "
steps:
  - key: each
    parallel:
      items: $input.xs
      step:
        lookup:
          - {name: seen, collection: c, where: '$record.key == $item'}
        script: {source: x}
";
    let flow = CompiledFlow::new(spec(yaml)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({"xs": ["a", "b"]}), RunInfo::default());
    let actions = machine.handle(Event::Start, at(0));
    let work = runs(&actions);
    assert_eq!(work.len(), 2);
    assert!(work.iter().all(|w| w.lookups_due()));
    assert_eq!(work[1].data.roots["item"], json!("b"));
    let actions = machine.handle(
        Event::LookedUp {
            step: "each".into(),
            part: Some(1),
            attempt: 1,
            found: Ok(found(&[("seen", json!([{"key": "b"}]))])),
        },
        at(1),
    );
    let part = runs(&actions)[0];
    assert_eq!(part.part.as_ref().map(|p| p.index), Some(1));
    assert_eq!(part.input, json!({"input": "b", "seen": [{"key": "b"}]}));
    assert!(
        machine.running_work()[0].lookups_due(),
        "part 0 still waits"
    );
}

#[test]
fn a_person_is_asked_once_the_lookups_of_the_approval_are_recorded() {
    let yaml = r#"
steps:
  - key: draft
    script: {source: x}
  - key: review
    lookup:
      - {name: earlier, collection: drafts, where: '$record.value.topic == $steps.draft.output.topic'}
    approval: {decisions: [approve, changes], show: [draft]}
"#;
    let flow = CompiledFlow::new(spec(yaml)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    let actions = machine.handle(done("draft", 1, json!({"topic": "db"})), at(1));
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Ask(_))),
        "nobody is asked before the lookup ran: {actions:?}"
    );
    let pending = machine.pending_approvals();
    assert!(pending[0].lookups_due());
    assert_eq!(
        pending[0].data.steps["draft"]["output"],
        json!({"topic": "db"})
    );
    let earlier = json!([{"key": "d1", "value": {"topic": "db"}}]);
    let actions = machine.handle(
        looked_up("review", 1, Ok(found(&[("earlier", earlier.clone())]))),
        at(2),
    );
    let asked: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Ask(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1, "{actions:?}");
    assert_eq!(asked[0].show["earlier"], earlier);
    assert_eq!(asked[0].show["draft"], json!({"topic": "db"}));
    // Rebuilt from the record, the request shows the same.
    let again = resumed(&flow, &machine);
    let pending = again.pending_approvals();
    assert!(!pending[0].lookups_due());
    assert_eq!(pending[0].show["earlier"], earlier);
}

#[test]
fn lookups_the_database_cannot_answer_keep_the_attempt_waiting_and_say_why() {
    let flow = CompiledFlow::new(spec(LOOKUP)).expect("valid");
    let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
    machine.handle(Event::Start, at(0));
    machine.handle(done("fetch", 1, json!({"component": "db"})), at(1));
    let reason = "waiting for the records database, which did not answer (connection refused)";
    let actions = machine.handle(
        Event::LookupsWaiting {
            step: "triage".into(),
            part: None,
            attempt: 1,
            reason: reason.into(),
        },
        at(2),
    );
    assert!(runs(&actions).is_empty(), "nothing starts: {actions:?}");
    let triage = &machine.status().steps["triage"];
    assert_eq!(triage.status, StepPhase::Running);
    assert_eq!(triage.attempts[0].waiting.as_deref(), Some(reason));
    assert!(machine.running_work()[0].lookups_due(), "still due");
    // Once the database answers, the attempt runs and the note goes.
    let actions = machine.handle(
        looked_up("triage", 1, Ok(found(&[("similar", json!([]))]))),
        at(3),
    );
    assert!(!runs(&actions)[0].lookups_due());
    assert_eq!(machine.status().steps["triage"].attempts[0].waiting, None);
    // A late note for an attempt no longer waiting changes nothing.
    machine.handle(
        Event::LookupsWaiting {
            step: "triage".into(),
            part: None,
            attempt: 1,
            reason: reason.into(),
        },
        at(4),
    );
    assert_eq!(machine.status().steps["triage"].attempts[0].waiting, None);
}
