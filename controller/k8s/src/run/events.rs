//! An Event per step transition and per run outcome, so `kubectl describe
//! run` tells the story. Events are best effort: a lost one never holds a
//! run back.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};

use crate::api::{Run, RunPhase, RunStatus, StepRecord, StepStatus};

/// The events that tell how `old` became `new`.
pub fn transitions(old: &RunStatus, new: &RunStatus) -> Vec<Event> {
    let mut events = Vec::new();
    for (key, record) in &new.steps {
        let before = old.steps.get(key);
        if let Some(event) = step_event(key, before, record) {
            events.push(event);
        }
    }
    if old.phase != new.phase {
        events.push(run_event(new));
    }
    events
}

fn step_event(key: &str, before: Option<&StepRecord>, now: &StepRecord) -> Option<Event> {
    let attempts = |r: &StepRecord| r.attempts.len();
    let same = before.is_some_and(|b| b.status == now.status && attempts(b) == attempts(now));
    if same || now.status == StepStatus::Pending {
        return None;
    }
    let attempt = attempts(now);
    let (reason, type_, note) = match now.status {
        StepStatus::Running => (
            "StepStarted",
            EventType::Normal,
            format!("step {key}: attempt {attempt} started"),
        ),
        StepStatus::Waiting => (
            "StepWaiting",
            EventType::Normal,
            format!("step {key}: waiting for a person (attempt {attempt})"),
        ),
        StepStatus::Completed => {
            let exit = now
                .exit
                .as_deref()
                .map(|e| format!(", exit {e}"))
                .unwrap_or_default();
            (
                "StepCompleted",
                EventType::Normal,
                format!("step {key}: completed{exit}"),
            )
        }
        StepStatus::Failed => {
            let error = now
                .error
                .as_ref()
                .map(|e| format!(": {}", e.message))
                .unwrap_or_default();
            (
                "StepFailed",
                EventType::Warning,
                format!("step {key}: attempt {attempt} failed{error}"),
            )
        }
        StepStatus::Skipped => {
            let why = now
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            (
                "StepSkipped",
                EventType::Normal,
                format!("step {key}: skipped{why}"),
            )
        }
        StepStatus::Pending => return None,
    };
    // Events with the same action and reason are merged into one series
    // (keeping the first note): each step's attempt is an action of its own.
    let mut action = format!("Step {key} attempt {attempt}");
    action.truncate(ACTION_MAX);
    Some(Event {
        type_,
        reason: reason.into(),
        note: Some(cut(note)),
        action,
        secondary: None,
    })
}

fn run_event(status: &RunStatus) -> Event {
    let (reason, type_) = match status.phase {
        RunPhase::Pending => ("RunPending", EventType::Normal),
        RunPhase::Running => ("RunRunning", EventType::Normal),
        RunPhase::Waiting => ("RunWaiting", EventType::Normal),
        RunPhase::Succeeded => ("RunSucceeded", EventType::Normal),
        RunPhase::Failed => ("RunFailed", EventType::Warning),
        RunPhase::Cancelled => ("RunCancelled", EventType::Warning),
    };
    let note = match &status.error {
        Some(error) => format!("{:?}: {}", status.phase, error.message),
        None => format!("{:?}", status.phase),
    };
    Event {
        type_,
        reason: reason.into(),
        note: Some(cut(note)),
        action: "Run".into(),
        secondary: None,
    }
}

/// The longest action the Events API takes.
const ACTION_MAX: usize = 128;

/// An event's note holds at most 1 kB.
fn cut(mut note: String) -> String {
    if note.len() > 1000 {
        let mut end = 990;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str(" (cut)");
    }
    note
}

/// Publishes `events` about `run`; failures are logged, never returned.
pub async fn publish(recorder: &Recorder, run: &Run, events: Vec<Event>) {
    let reference = run.object_ref(&());
    for event in events {
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "could not publish an event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Attempt, StepError};

    fn step(status: StepStatus, attempts: usize) -> StepRecord {
        StepRecord {
            status,
            attempts: (1..=attempts as i32)
                .map(|number| Attempt {
                    number,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn each_transition_is_an_event_of_its_own_and_nothing_else_is() {
        let mut old = RunStatus::default();
        old.steps
            .insert("draft".into(), step(StepStatus::Running, 1));
        old.steps
            .insert("same".into(), step(StepStatus::Completed, 1));
        let mut new = old.clone();
        new.phase = RunPhase::Failed;
        let mut failed = step(StepStatus::Failed, 1);
        failed.error = Some(StepError {
            code: "script.failed".into(),
            message: "exit 3".into(),
        });
        new.steps.insert("draft".into(), failed);
        new.steps
            .insert("next".into(), step(StepStatus::Running, 1));
        let events = transitions(&old, &new);
        let seen: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e.reason.as_str(), e.action.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("StepFailed", "Step draft attempt 1"),
                ("StepStarted", "Step next attempt 1"),
                ("RunFailed", "Run"),
            ]
        );
        assert_eq!(events[0].type_, EventType::Warning);
        assert!(
            events[0]
                .note
                .as_deref()
                .is_some_and(|n| n.contains("exit 3"))
        );
        // A second attempt of a running step is a new event, not a repeat.
        let mut again = new.clone();
        again
            .steps
            .insert("next".into(), step(StepStatus::Running, 2));
        let events = transitions(&new, &again);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].action, "Step next attempt 2");
    }

    #[test]
    fn long_notes_are_cut_and_say_so() {
        let note = cut("é".repeat(800));
        assert!(
            note.len() <= 1000 && note.ends_with("(cut)"),
            "{}",
            note.len()
        );
    }
}
