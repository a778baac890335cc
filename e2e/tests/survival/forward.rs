//! "A Run's status never goes backwards": one status checked against the
//! one seen just before it (by a watch on the Runs, while the controller is
//! killed and restarted, or replaced by a standby).
//!
//! The order:
//! - the run's phase never leaves a terminal phase (Succeeded, Failed,
//!   Cancelled) and never returns to Pending; its output never changes
//!   once set; its send-back counts never decrease;
//! - a step record, once there, stays; its loop pass (`iteration`), its
//!   rounds of parts and its number of attempts never decrease;
//! - an attempt keeps its number, and once it has ended (completed, failed,
//!   skipped) its status, error, end time, output and text never change
//!   (output and text may only be dropped by trimming, which is never undone);
//! - a step (or part) that has ended stays ended with the same status, exit
//!   and output, unless the same write gave it a new attempt, a new loop
//!   pass, a new round of parts or a send-back that redoes it;
//! - within one round, a parallel step's parts keep their keys and go only
//!   forwards by the same rules.

use coxswain_core::api::{Attempt, PartStatus, RunPhase, RunStatus, StepPhase, StepStatus};

/// Every way `after` goes backwards from `before`, in words.
pub fn check(before: &RunStatus, after: &RunStatus) -> Vec<String> {
    let mut found = Vec::new();
    if before.phase.is_over() && after.phase != before.phase {
        found.push(format!("phase {:?} became {:?}", before.phase, after.phase));
    }
    if before.phase != RunPhase::Pending && after.phase == RunPhase::Pending {
        found.push(format!("phase {:?} became Pending", before.phase));
    }
    if before.output.is_some() && after.output != before.output {
        found.push(format!(
            "the output {:?} became {:?}",
            before.output, after.output
        ));
    }
    for (arrow, count) in &before.send_backs {
        let now = after.send_backs.get(arrow).copied().unwrap_or(0);
        if now < *count {
            found.push(format!(
                "send-backs over {arrow} went from {count} to {now}"
            ));
        }
    }
    let sent_back = total(after) > total(before);
    for (key, old) in &before.steps {
        match after.steps.get(key) {
            None => found.push(format!("step {key} disappeared")),
            Some(new) => step(&mut found, key, old, new, sent_back),
        }
    }
    found
}

fn total(status: &RunStatus) -> i64 {
    status.send_backs.values().map(|c| i64::from(*c)).sum()
}

fn is_done(status: StepPhase) -> bool {
    matches!(
        status,
        StepPhase::Completed | StepPhase::Failed | StepPhase::Skipped
    )
}

fn step(found: &mut Vec<String>, key: &str, old: &StepStatus, new: &StepStatus, sent_back: bool) {
    let pass = |r: &StepStatus| r.iteration.unwrap_or(0);
    if pass(new) < pass(old) {
        found.push(format!(
            "step {key}: pass {} became {}",
            pass(old),
            pass(new)
        ));
    }
    if new.rounds < old.rounds {
        found.push(format!(
            "step {key}: rounds {} became {}",
            old.rounds, new.rounds
        ));
    }
    attempts(found, key, &old.attempts, &new.attempts);
    let redone = sent_back
        || pass(new) > pass(old)
        || new.rounds > old.rounds
        || new.attempts.len() > old.attempts.len();
    let changed = new.status != old.status || new.exit != old.exit || new.output != old.output;
    if is_done(old.status) && !redone && changed {
        found.push(format!(
            "step {key} ended {:?} (exit {:?}, output {:?}) and became {:?} (exit {:?}, output {:?})",
            old.status, old.exit, old.output, new.status, new.exit, new.output
        ));
    }
    if new.rounds == old.rounds && !sent_back && pass(new) == pass(old) {
        parts(found, key, &old.parts, &new.parts);
    }
}

fn parts(found: &mut Vec<String>, key: &str, old: &[PartStatus], new: &[PartStatus]) {
    for (i, o) in old.iter().enumerate() {
        let Some(n) = new.get(i) else {
            found.push(format!("step {key}: part {} disappeared", o.key));
            continue;
        };
        if n.key != o.key {
            found.push(format!("step {key}: part {} became part {}", o.key, n.key));
            continue;
        }
        let at = format!("{key} part {}", o.key);
        attempts(found, &at, &o.attempts, &n.attempts);
        if is_done(o.status)
            && n.attempts.len() == o.attempts.len()
            && (n.status != o.status || n.output != o.output)
        {
            found.push(format!(
                "step {at} ended {:?} with {:?} and became {:?} with {:?}",
                o.status, o.output, n.status, n.output
            ));
        }
    }
}

fn attempts(found: &mut Vec<String>, key: &str, old: &[Attempt], new: &[Attempt]) {
    if new.len() < old.len() {
        found.push(format!(
            "step {key}: {} attempts became {}",
            old.len(),
            new.len()
        ));
    }
    for (o, n) in old.iter().zip(new) {
        if n.number != o.number {
            found.push(format!(
                "step {key}: attempt {} became attempt {}",
                o.number, n.number
            ));
            continue;
        }
        if o.trimmed && !n.trimmed {
            found.push(format!("step {key}: attempt {} was untrimmed", o.number));
        }
        if !is_done(o.status) {
            continue;
        }
        let kept = |a: &Option<_>, b: &Option<_>| a == b || n.trimmed;
        let same = n.status == o.status
            && n.error == o.error
            && n.finished_at == o.finished_at
            && kept(&o.output, &n.output)
            && (o.text == n.text || n.trimmed);
        if !same {
            found.push(format!(
                "step {key}: attempt {} ended {:?} (output {:?}, error {:?}) and became {:?} (output {:?}, error {:?})",
                o.number, o.status, o.output, o.error, n.status, n.output, n.error
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(number: i32, status: StepPhase) -> Attempt {
        Attempt {
            number,
            status,
            ..Attempt::default()
        }
    }

    fn with_step(phase: RunPhase, record: StepStatus) -> RunStatus {
        let mut s = RunStatus {
            phase,
            ..RunStatus::default()
        };
        s.steps.insert("a".into(), record);
        s
    }

    #[test]
    fn going_on_is_forwards_and_going_back_is_caught() {
        let running = with_step(
            RunPhase::Running,
            StepStatus {
                status: StepPhase::Running,
                attempts: vec![attempt(1, StepPhase::Running)],
                ..StepStatus::default()
            },
        );
        let done = with_step(
            RunPhase::Succeeded,
            StepStatus {
                status: StepPhase::Completed,
                output: Some(serde_json::json!(1)),
                attempts: vec![attempt(1, StepPhase::Completed)],
                ..StepStatus::default()
            },
        );
        assert!(check(&running, &done).is_empty());
        assert!(check(&done, &done).is_empty());
        let back = check(&done, &running);
        assert!(back.iter().any(|p| p.contains("phase")), "{back:?}");
        assert!(
            back.iter().any(|p| p.contains("attempt 1 ended")),
            "{back:?}"
        );
        // A second attempt (a retry, a pass) may run the step again.
        let mut again = running.clone();
        again.steps.get_mut("a").expect("a").attempts = vec![
            attempt(1, StepPhase::Completed),
            attempt(2, StepPhase::Running),
        ];
        let mut done_running = done.clone();
        done_running.phase = RunPhase::Running;
        assert!(check(&done_running, &again).is_empty());
        // Losing an attempt is caught.
        assert!(!check(&again, &running).is_empty());
    }
}
