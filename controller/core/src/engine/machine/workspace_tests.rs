//! The workspace's lifecycle in the engine: what the status asks for at
//! each point, from a fresh machine and from one resumed from the status
//! (as a restarted controller resumes it), and what the plan says to do.

use serde_json::{Value, json};

use super::*;
use crate::api::{KeepPolicy, PushedBranch, RepoCheckout, WorkspaceStatus};
use crate::engine::test_support::{at, compile, started};
use crate::engine::{CompiledFlow, Done, Plan, Seen};

const PUSHES: &str = "
workspace:
  repos: [{name: app, url: 'https://h/app.git'}]
  push: onSuccess
  keep: onFailure
steps:
  - key: a
    script: {source: x}
";

fn made() -> WorkspaceStatus {
    WorkspaceStatus {
        branch: "coxswain/r".into(),
        repos: vec![RepoCheckout {
            name: "app".into(),
            url: "https://h/app.git".into(),
            ref_: None,
            commit: "c0".into(),
        }],
        volume: Some("r-workspace".into()),
        keep: Some(KeepPolicy::OnFailure),
        ..WorkspaceStatus::default()
    }
}

/// A machine for `flow` whose workspace was made at the start.
fn checked_out(flow: &CompiledFlow) -> RunMachine<'_> {
    let mut m = RunMachine::new(flow, Value::Null, RunInfo::default());
    m.handle(Event::Workspace(WorkspaceEnded::Made(made())), at(0));
    m
}

fn a_done() -> Event {
    Event::Finished {
        step: "a".into(),
        part: None,
        attempt: 1,
        result: Ok(Done::output(json!("ok"))),
    }
}

fn pushed(error: Option<StepError>) -> Event {
    Event::Workspace(WorkspaceEnded::Pushed {
        pushed: vec![PushedBranch {
            name: "app".into(),
            commit: "c1".into(),
        }],
        error,
    })
}

/// The machine resumed from `m`'s record, as a restarted driver has it.
fn resumed<'f>(flow: &'f CompiledFlow, m: &RunMachine<'_>) -> RunMachine<'f> {
    RunMachine::resume(flow, Value::Null, RunInfo::default(), m.status().clone())
        .expect("same flow")
}

#[test]
fn a_run_waits_pending_for_its_checkout_then_starts_its_steps() {
    let flow = compile(PUSHES);
    let mut m = RunMachine::new(&flow, Value::Null, RunInfo::default());
    assert_eq!(m.workspace_work(), Some(WorkspaceWork::CheckOut));
    let actions = m.handle(Event::Start, at(0));
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(m.status().phase, RunPhase::Pending);
    assert_eq!(m.status().started_at, None);
    // From the status alone, the checkout is still what is due.
    assert_eq!(
        resumed(&flow, &m).workspace_work(),
        Some(WorkspaceWork::CheckOut)
    );
    let plan = Plan::new(&actions, &m, &Seen::default());
    assert_eq!(plan.workspace, Some(WorkspaceWork::CheckOut));
    assert!(plan.launch.is_empty() && !plan.release);

    let before = m.workspace_work();
    let actions = m.handle(Event::Workspace(WorkspaceEnded::Made(made())), at(1));
    assert_eq!(m.status().phase, RunPhase::Running);
    assert_eq!(m.status().workspace, Some(made()));
    let seen = Seen {
        workspace: before,
        workspace_ended: true,
        ..Seen::default()
    };
    let plan = Plan::new(&actions, &m, &seen);
    assert_eq!(plan.workspace, None);
    assert_eq!(plan.workspace_forget, Some(WorkspaceWork::CheckOut));
    assert_eq!(plan.launch.len(), 1, "the first step starts with it");
}

#[test]
fn a_run_that_pushes_is_held_running_until_the_push_then_ends_as_it_did() {
    let flow = compile(PUSHES);
    let mut m = checked_out(&flow);
    let actions = m.handle(a_done(), at(1));
    assert_eq!(m.status().phase, RunPhase::Running);
    assert_eq!(m.status().finished_at, None);
    let ws = m.status().workspace.clone().expect("workspace");
    assert_eq!(ws.pushing, Some(RunPhase::Succeeded));
    let plan = Plan::new(&actions, &m, &Seen::default());
    assert_eq!(plan.workspace, Some(WorkspaceWork::Push));
    assert!(!plan.over && !plan.release);
    // Held once: time passing, or a restart, changes nothing.
    let held = m.status().clone();
    m.handle(Event::Tick, at(2));
    assert_eq!(*m.status(), held);
    let mut m = resumed(&flow, &m);
    assert_eq!(m.workspace_work(), Some(WorkspaceWork::Push));
    m.handle(pushed(None), at(3));
    assert_eq!(m.status().phase, RunPhase::Succeeded);
    assert_eq!(
        m.status().finished_at.as_deref(),
        Some(at(3).to_string().as_str())
    );
    let ws = m.status().workspace.clone().expect("workspace");
    assert_eq!((ws.pushing, ws.pushed.len()), (None, 1));
    assert_eq!(m.workspace_work(), None);
    let plan = Plan::new(&[], &m, &Seen::default());
    assert!(
        plan.over && plan.release,
        "a run that succeeded lets its volume go"
    );
    // A second answer for the push is not taken.
    let done = m.status().clone();
    m.handle(pushed(Some(step_error(codes::WORKSPACE, "late"))), at(4));
    assert_eq!(*m.status(), done);
}

#[test]
fn a_failed_push_fails_a_run_that_succeeded_and_the_record_keeps_both_commits() {
    let flow = compile(PUSHES);
    let mut m = checked_out(&flow);
    m.handle(a_done(), at(1));
    m.handle(
        pushed(Some(step_error(
            codes::WORKSPACE,
            "repo docs: push refused",
        ))),
        at(2),
    );
    let record = m.status();
    assert_eq!(record.phase, RunPhase::Failed);
    let ws = record.workspace.clone().expect("workspace");
    assert_eq!(
        (ws.repos[0].commit.as_str(), ws.pushed[0].commit.as_str()),
        ("c0", "c1")
    );
    assert_eq!(
        record.error.as_ref().map(|e| e.code.as_str()),
        Some(codes::WORKSPACE)
    );
    assert!(
        !releases(record),
        "keep: onFailure keeps a failed run's volume"
    );
}

#[test]
fn only_what_the_policy_pushes_is_held() {
    let flow = compile(PUSHES);
    let mut m = checked_out(&flow);
    m.handle(
        Event::Finished {
            step: "a".into(),
            part: None,
            attempt: 1,
            result: Err(step_error(codes::SCRIPT, "exit 1").into()),
        },
        at(1),
    );
    assert_eq!(
        m.status().phase,
        RunPhase::Failed,
        "onSuccess does not push a failed run"
    );
    assert_eq!(m.workspace_work(), None);

    let always = compile(&PUSHES.replace("onSuccess", "always"));
    let mut m = checked_out(&always);
    m.handle(Event::Cancel, at(1));
    assert_eq!(
        m.status().phase,
        RunPhase::Running,
        "always pushes a cancelled run"
    );
    // The cancel that ended it does not stop its push, however often it is said.
    m.handle(Event::Cancel, at(2));
    assert_eq!(m.workspace_work(), Some(WorkspaceWork::Push));
    m.handle(pushed(None), at(3));
    assert_eq!(m.status().phase, RunPhase::Cancelled);

    let never = compile(&PUSHES.replace("onSuccess", "never"));
    let mut m = checked_out(&never);
    m.handle(a_done(), at(1));
    assert_eq!(m.status().phase, RunPhase::Succeeded);
}

#[test]
fn a_cancel_during_the_push_of_a_run_that_succeeded_stops_it() {
    let flow = compile(PUSHES);
    let mut m = checked_out(&flow);
    m.handle(a_done(), at(1));
    let before = m.workspace_work();
    let actions = m.handle(Event::Cancel, at(2));
    assert_eq!(m.status().phase, RunPhase::Cancelled);
    let error = m.status().error.clone().expect("error");
    assert_eq!(error.code, codes::CANCELLED);
    assert!(error.message.contains("pushed"), "{}", error.message);
    let seen = Seen {
        workspace: before,
        ..Seen::default()
    };
    let plan = Plan::new(&actions, &m, &seen);
    assert_eq!(plan.workspace_stop, Some(WorkspaceWork::Push));
    assert!(
        !plan.release,
        "keep: onFailure keeps a cancelled run's volume"
    );
}

#[test]
fn a_checkout_that_fails_or_is_cancelled_ends_the_run_before_its_first_step() {
    let flow = compile(PUSHES);
    let (mut m, _) = started(&flow);
    let before = m.workspace_work();
    let actions = m.handle(Event::Cancel, at(1));
    assert_eq!(m.status().phase, RunPhase::Cancelled);
    let seen = Seen {
        workspace: before,
        ..Seen::default()
    };
    let plan = Plan::new(&actions, &m, &seen);
    assert_eq!(plan.workspace_stop, Some(WorkspaceWork::CheckOut));
    assert!(!plan.release, "no volume was recorded");
    // What the stopped checkout made no longer counts.
    m.handle(Event::Workspace(WorkspaceEnded::Made(made())), at(2));
    assert_eq!(
        (m.status().phase, m.status().workspace.clone()),
        (RunPhase::Cancelled, None)
    );

    let (mut m, _) = started(&flow);
    let partial = WorkspaceStatus {
        repos: Vec::new(),
        ..made()
    };
    m.handle(
        Event::Workspace(WorkspaceEnded::NotMade {
            error: step_error(codes::WORKSPACE, "repo app: no ref `nope`"),
            workspace: Some(partial.clone()),
        }),
        at(1),
    );
    let record = m.status();
    assert_eq!(record.phase, RunPhase::Failed);
    assert_eq!(record.workspace, Some(partial), "not held for a push");
    assert!(record.steps.is_empty());
    assert!(!releases(record), "keep: onFailure");
}
