//! What a driver does after the engine took a step: the one rule that turns
//! the engine's answer into launches, stops, Approvals asked and closed,
//! answers settled and a wake-up time.
//!
//! Every driver of the engine (the controller, `coxswain run`, the
//! conformance driver) feeds it events, then builds a [`Plan`] from the
//! work that ran before the step, the engine after it and what it saw of
//! the outside world, and carries the plan out. The plan is computed from
//! the status, not from the [`Action`]s alone, so a driver that restarted
//! (and never saw the actions that asked for its work) does the same as
//! one that did: an attempt the status says runs and nobody runs is
//! launched, an Approval the status waits for and nobody asked is asked.
//! The actions only order the launches and name what the engine stopped.

use std::collections::HashSet;
use std::time::Duration;

use jiff::Timestamp;

use super::machine::{
    Action, ApprovalRequest, RunMachine, WorkKey, WorkRef, WorkspaceWork, releases,
};
use super::work::Work;
use crate::api::{FlowSpec, RunStatus};
use crate::flow::parse_duration;

/// One Approval: the attempt of a person step it answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AskRef {
    /// The step's key.
    pub step: String,
    /// The attempt it answers.
    pub attempt: u32,
}

impl From<&ApprovalRequest> for AskRef {
    fn from(request: &ApprovalRequest) -> Self {
        AskRef {
            step: request.step.clone(),
            attempt: request.attempt,
        }
    }
}

/// A person's answer the driver handed the engine (or held back), and what
/// the place it came from already says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The Approval it was written on.
    pub ask: AskRef,
    /// Why it was not taken (the engine or the decider check refused it);
    /// `None` when the engine took it.
    pub refused: Option<String>,
    /// The refusal already written back on the Approval, if any, so the same
    /// refusal is not written twice.
    pub noted: Option<String>,
}

/// An answer to write back on its Approval: taken in, or refused with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settle {
    /// The Approval.
    pub ask: AskRef,
    /// Why the answer was refused; `None` when it was taken in.
    pub refused: Option<String>,
}

/// What the driver saw around one step of the engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen<'a> {
    /// The attempts running before the step, as the status said.
    pub before: &'a [Work],
    /// Of those and any launched since, the ones known to be running still
    /// (launched and not finished). Work the status says runs but that is
    /// not here is launched (again: launching is idempotent).
    pub running: &'a [Work],
    /// The attempts whose result the step took in.
    pub finished: &'a [Work],
    /// The Approvals that exist (asked before).
    pub asked: &'a [AskRef],
    /// Of those, the ones still open and unanswered.
    pub open: &'a [AskRef],
    /// The answers the step handled.
    pub answers: &'a [Answer],
    /// The workspace work the status asked for before the step
    /// ([`RunMachine::workspace_work`]).
    pub workspace: Option<WorkspaceWork>,
    /// Whether the step took in how that work ended
    /// ([`Event::Workspace`](super::Event::Workspace)).
    pub workspace_ended: bool,
}

/// What to do after one step of the engine, in the order a driver does it:
/// forget, stop, launch, ask, settle, close; then wake up at `wake`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// The run ended with this step (or before it): nothing is launched or
    /// asked, and whatever of its work did not finish is stopped.
    pub over: bool,
    /// Finished attempts whose results were taken in: what was kept to
    /// read their result can go.
    pub forget: Vec<Work>,
    /// Attempts to stop: running before, stopped by the engine (or by the
    /// run's end) and not finished.
    pub stop: Vec<Work>,
    /// Attempts to start: the status says they run and nobody runs them;
    /// those the engine just asked for first, in its order.
    pub launch: Vec<Work>,
    /// Attempts that may start only once their lookups ran
    /// ([`Work::lookups_due`]): the driver runs the lookups and hands the
    /// engine [`Event::LookedUp`](super::Event::LookedUp); nothing is
    /// launched for them yet.
    pub lookups: Vec<Work>,
    /// Of the attempts known to run ([`Seen::running`]), by position, those
    /// the status still says run (none once over); see [`Plan::running`].
    pub kept: Vec<usize>,
    /// Approvals to create: the status waits for them and none was asked.
    pub ask: Vec<ApprovalRequest>,
    /// Approvals that may be asked only once their step's lookups ran
    /// ([`ApprovalRequest::lookups_due`]): the driver runs the lookups and
    /// hands the engine [`Event::LookedUp`](super::Event::LookedUp).
    pub ask_lookups: Vec<ApprovalRequest>,
    /// Answers to write back on their Approvals.
    pub settle: Vec<Settle>,
    /// Open Approvals nobody waits for any more (their attempt ended
    /// without an answer): closed, so nobody answers into the void.
    pub close: Vec<AskRef>,
    /// When the engine wants a [`Tick`](super::Event::Tick).
    pub wake: Option<Timestamp>,
    /// The workspace work the status asks for after the step: the driver
    /// looks at it, starts it when it does not run (starting is
    /// idempotent, as for attempts) and hands the engine how it ended.
    pub workspace: Option<WorkspaceWork>,
    /// Workspace work whose end was taken in: what was kept to read it can go.
    pub workspace_forget: Option<WorkspaceWork>,
    /// Workspace work no longer wanted (the run was cancelled while it
    /// ran): stopped.
    pub workspace_stop: Option<WorkspaceWork>,
    /// The run is over and its workspace's `keep` lets it go: the driver
    /// deletes it.
    pub release: bool,
    /// The run is over: what becomes of it ([`hand_off`]).
    pub hand_off: Option<HandOff>,
}

/// What becomes of a run that ended: the driver keeps it in its records
/// database, when it has one, and once `keep_for` has passed since it
/// ended, may let it go (on a cluster: delete the Run, once the archive
/// holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HandOff {
    /// How long the flow keeps its ended runs (`retention.finishedRuns`);
    /// `None`: as long as the driver keeps them by default.
    pub keep_for: Option<Duration>,
}

/// The hand-off of a run whose status is `status`, by its flow `spec`;
/// `None` while it has not ended. Drivers that read an ended run back
/// (the controller, at each look) ask this as the plan does.
pub fn hand_off(spec: &FlowSpec, status: &RunStatus) -> Option<HandOff> {
    if !status.phase.is_over() {
        return None;
    }
    let keep_for = spec
        .retention
        .as_ref()
        .and_then(|r| r.finished_runs.as_deref())
        .and_then(|text| parse_duration(text).ok());
    Some(HandOff { keep_for })
}

impl Plan {
    /// The plan after the engine, now `machine`, returned `actions` for
    /// the events the driver fed it, having seen `seen`.
    pub fn new(actions: &[Action], machine: &RunMachine<'_>, seen: &Seen<'_>) -> Plan {
        let over = machine.status().phase.is_over();
        let mut plan = Plan {
            over,
            forget: seen.finished.to_vec(),
            stop: stopped(actions, seen, over),
            settle: seen.answers.iter().filter_map(settle).collect(),
            ..Plan::default()
        };
        plan.workspace = machine.workspace_work();
        match seen.workspace {
            Some(before) if seen.workspace_ended => plan.workspace_forget = Some(before),
            Some(before) if plan.workspace != Some(before) => plan.workspace_stop = Some(before),
            _ => {}
        }
        plan.release = releases(machine.status());
        plan.hand_off = hand_off(machine.flow().spec, machine.status());
        if over {
            return plan;
        }
        let refs = machine.running_refs();
        let wanted: HashSet<WorkKey<'_>> = refs.iter().map(|r| r.key).collect();
        let known: HashSet<WorkKey<'_>> = seen.running.iter().map(WorkKey::of).collect();
        let (launch, lookups) = to_launch(actions, machine, &refs, &wanted, &known)
            .into_iter()
            .partition(|w| !w.lookups_due());
        plan.launch = launch;
        plan.lookups = lookups;
        plan.kept = (0..seen.running.len())
            .filter(|&i| wanted.contains(&WorkKey::of(&seen.running[i])))
            .collect();
        let waiting = machine.pending_approvals();
        plan.close = seen
            .open
            .iter()
            .filter(|a| !waiting.iter().any(|w| AskRef::from(w) == **a))
            .cloned()
            .collect();
        let (ask, ask_lookups) = waiting
            .into_iter()
            .filter(|w| !seen.asked.contains(&AskRef::from(w)))
            .partition(|w| !w.lookups_due());
        plan.ask = ask;
        plan.ask_lookups = ask_lookups;
        plan.wake = machine.next_wake();
        plan
    }
}

impl Plan {
    /// Every attempt the status says runs after the step: those of
    /// `running` (the [`Seen::running`] the plan was made with) it keeps,
    /// and those to launch. Nothing once the run is over.
    pub fn running<'a>(&'a self, running: &'a [Work]) -> impl Iterator<Item = &'a Work> + 'a {
        self.kept
            .iter()
            .filter_map(move |&i| running.get(i))
            .chain(&self.launch)
    }
}

/// Whether `a` and `b` are the same attempt of the same place: their
/// [`WorkKey`]s, the one definition of what tells attempts apart.
pub fn same_attempt(a: &Work, b: &Work) -> bool {
    WorkKey::of(a) == WorkKey::of(b)
}

fn part_index(work: &Work) -> Option<usize> {
    work.part.as_ref().map(|p| p.index)
}

/// The work running before that the engine stopped, and once the run is
/// over all of it that did not finish; each attempt once.
fn stopped(actions: &[Action], seen: &Seen<'_>, over: bool) -> Vec<Work> {
    let finished = |w: &Work| seen.finished.iter().any(|f| same_attempt(f, w));
    let mut stop: Vec<Work> = Vec::new();
    let mut add = |w: &Work| {
        if !finished(w) && !stop.iter().any(|s| same_attempt(s, w)) {
            stop.push(w.clone());
        }
    };
    for action in actions {
        if let Action::Stop { step, part } = action {
            seen.before
                .iter()
                .filter(|w| w.step == *step && part_index(w) == *part)
                .for_each(&mut add);
        }
    }
    if over {
        seen.before.iter().for_each(&mut add);
    }
    stop
}

/// The attempts of `refs` (the status's, `wanted` by key) not `known` to
/// run, those the engine just asked for first in the order it asked; only
/// the work of attempts it did not hand over is built again.
fn to_launch(
    actions: &[Action],
    machine: &RunMachine<'_>,
    refs: &[WorkRef<'_>],
    wanted: &HashSet<WorkKey<'_>>,
    known: &HashSet<WorkKey<'_>>,
) -> Vec<Work> {
    let mut launch: Vec<Work> = Vec::new();
    let mut taken: HashSet<WorkKey<'_>> = HashSet::new();
    for action in actions {
        // Work asked for before its lookups were recorded is built again
        // below, from the status as it stands.
        if let Action::Run(asked) = action
            && !asked.lookups_due()
        {
            let key = WorkKey::of(asked);
            if wanted.contains(&key) && !known.contains(&key) && taken.insert(key) {
                launch.push((**asked).clone());
            }
        }
    }
    for r in refs {
        if !known.contains(&r.key)
            && !taken.contains(&r.key)
            && let Some(work) = machine.work_of(r)
        {
            launch.push(work);
        }
    }
    launch
}

/// The write-back an answer needs: a taken answer is settled; a refusal
/// is written unless the Approval already says just that.
fn settle(answer: &Answer) -> Option<Settle> {
    match &answer.refused {
        None => Some(Settle {
            ask: answer.ask.clone(),
            refused: None,
        }),
        Some(why) if answer.noted.as_deref() != Some(why.as_str()) => Some(Settle {
            ask: answer.ask.clone(),
            refused: Some(why.clone()),
        }),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::engine::test_support::{at, compile, started};
    use crate::engine::{Decision, Done, Event, RunInfo};

    fn done(work: &Work) -> Event {
        Event::Finished {
            step: work.step.clone(),
            part: part_index(work),
            attempt: work.attempt,
            result: Ok(Done::output(json!("ok"))),
        }
    }

    fn places(works: &[Work]) -> Vec<(String, Option<usize>, u32)> {
        works
            .iter()
            .map(|w| (w.step.clone(), part_index(w), w.attempt))
            .collect()
    }

    const TWO: &str = "
steps:
  - key: a
    script: {source: x}
  - key: b
    script: {source: x}
";

    #[test]
    fn the_work_asked_for_is_launched_in_the_engines_order_and_once() {
        let flow = compile(TWO);
        let (machine, actions) = started(&flow);
        let plan = Plan::new(&actions, &machine, &Seen::default());
        assert_eq!(places(&plan.launch), [("a".into(), None, 1)]);
        assert!(!plan.over && plan.stop.is_empty() && plan.ask.is_empty());

        // Known to run: not launched again, whatever the actions say.
        let seen = Seen {
            running: &plan.launch,
            ..Seen::default()
        };
        let again = Plan::new(&actions, &machine, &seen);
        assert!(again.launch.is_empty(), "{:?}", places(&again.launch));
        let running: Vec<Work> = again.running(&plan.launch).cloned().collect();
        assert_eq!(places(&running), [("a".into(), None, 1)]);
    }

    #[test]
    fn a_driver_that_saw_no_actions_launches_what_the_record_says_runs() {
        let flow = compile(TWO);
        let (machine, _) = started(&flow);
        let record = machine.summarized();
        let resumed =
            RunMachine::resume(&flow, Value::Null, RunInfo::default(), record).expect("resumes");
        let plan = Plan::new(&[], &resumed, &Seen::default());
        assert_eq!(places(&plan.launch), [("a".into(), None, 1)]);
    }

    #[test]
    fn finished_work_is_forgotten_and_the_next_step_launched() {
        let flow = compile(TWO);
        let (mut machine, _) = started(&flow);
        let before = machine.running_work();
        let actions = machine.handle(done(&before[0]), at(1));
        let seen = Seen {
            before: &before,
            finished: &before,
            ..Seen::default()
        };
        let plan = Plan::new(&actions, &machine, &seen);
        assert_eq!(places(&plan.forget), [("a".into(), None, 1)]);
        assert!(plan.stop.is_empty(), "finished work is not stopped");
        assert_eq!(places(&plan.launch), [("b".into(), None, 1)]);
    }

    #[test]
    fn an_ended_run_is_handed_off_with_its_flows_retention() {
        let flow = compile(&format!("retention: {{finishedRuns: 2h}}\n{TWO}"));
        let (mut machine, actions) = started(&flow);
        let plan = Plan::new(&actions, &machine, &Seen::default());
        assert_eq!(plan.hand_off, None, "a running run is not handed off");
        for step in ["a", "b"] {
            let before = machine.running_work();
            assert_eq!(before[0].step, step);
            machine.handle(done(&before[0]), at(1));
        }
        let plan = Plan::new(&[], &machine, &Seen::default());
        assert!(plan.over);
        let two_hours = Some(Duration::from_secs(7200));
        assert_eq!(
            plan.hand_off,
            Some(HandOff {
                keep_for: two_hours
            })
        );
        // Read back (as a driver does at each later look), the same.
        let status = machine.status();
        assert_eq!(hand_off(flow.spec(), status), plan.hand_off);
        // Without a retention the driver's default holds.
        assert_eq!(
            hand_off(compile(TWO).spec(), status),
            Some(HandOff { keep_for: None })
        );
    }

    const PARTS: &str = "
steps:
  - key: each
    parallel:
      items: $input.xs
      step: {script: {source: x}}
";

    #[test]
    fn a_cancel_stops_what_ran_once_and_not_what_just_finished() {
        let flow = compile(PARTS);
        let mut machine = RunMachine::new(&flow, json!({"xs": [1, 2, 3]}), RunInfo::default());
        machine.handle(Event::Start, at(0));
        let before = machine.running_work();
        assert_eq!(before.len(), 3);
        // One part's result comes in, then the run is cancelled.
        let mut actions = machine.handle(done(&before[1]), at(1));
        actions.extend(machine.handle(Event::Cancel, at(1)));
        assert_eq!(
            actions
                .iter()
                .filter(|a| matches!(a, Action::Stop { .. }))
                .count(),
            2,
            "{actions:?}"
        );
        let finished = [before[1].clone()];
        let seen = Seen {
            before: &before,
            running: &before,
            finished: &finished,
            ..Seen::default()
        };
        let plan = Plan::new(&actions, &machine, &seen);
        assert!(plan.over);
        assert_eq!(
            places(&plan.stop),
            [("each".into(), Some(0), 1), ("each".into(), Some(2), 1)]
        );
        assert_eq!(places(&plan.forget), [("each".into(), Some(1), 1)]);
        assert!(plan.launch.is_empty() && plan.kept.is_empty() && plan.wake.is_none());
    }

    const REVIEW: &str = "
steps:
  - key: review
    approval: {decisions: [approve]}
    timeout: 1h
    attempts: 2
    backoff: 0s
  - key: after
    script: {source: x}
";

    #[test]
    fn a_waiting_step_is_asked_once_and_closed_when_it_stops_waiting() {
        let flow = compile(REVIEW);
        let (mut machine, actions) = started(&flow);
        let plan = Plan::new(&actions, &machine, &Seen::default());
        assert_eq!(plan.ask.len(), 1);
        let asked = [AskRef::from(&plan.ask[0])];
        assert!(plan.wake.is_some(), "the timeout wakes the engine");

        let seen = Seen {
            asked: &asked,
            open: &asked,
            ..Seen::default()
        };
        let again = Plan::new(&[], &machine, &seen);
        assert!(again.ask.is_empty() && again.close.is_empty());

        let timeout = again.wake.expect("a wake-up");
        let actions = machine.handle(Event::Tick, timeout);
        let plan = Plan::new(&actions, &machine, &seen);
        assert!(!plan.over, "the second attempt is to come");
        assert_eq!(plan.close, asked, "the timed-out Approval is closed");
    }

    #[test]
    fn an_answer_is_settled_once_and_a_refusal_only_when_it_changed() {
        let flow = compile(REVIEW);
        let (mut machine, _) = started(&flow);
        let ask = AskRef::from(&machine.pending_approvals()[0]);
        let decision = Decision {
            decision: Some("approve".into()),
            ..Decision::default()
        };
        let actions = machine
            .decide(&ask.step, ask.attempt, decision, at(1))
            .expect("taken");
        let answers = [
            Answer {
                ask: ask.clone(),
                refused: None,
                noted: None,
            },
            Answer {
                ask: AskRef {
                    step: "review".into(),
                    attempt: 9,
                },
                refused: Some("no".into()),
                noted: Some("no".into()),
            },
            Answer {
                ask: AskRef {
                    step: "review".into(),
                    attempt: 8,
                },
                refused: Some("not you".into()),
                noted: Some("no".into()),
            },
        ];
        let seen = Seen {
            answers: &answers,
            ..Seen::default()
        };
        let plan = Plan::new(&actions, &machine, &seen);
        assert_eq!(
            plan.settle,
            [
                Settle { ask, refused: None },
                Settle {
                    ask: AskRef {
                        step: "review".into(),
                        attempt: 8
                    },
                    refused: Some("not you".into())
                },
            ]
        );
        assert_eq!(places(&plan.launch), [("after".into(), None, 1)]);
    }
}
