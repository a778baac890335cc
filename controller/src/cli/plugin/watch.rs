//! `start --watch`, `watch RUN` and `wait RUN`: a watch on one Run (no
//! polling) until it ends. The live view prints each step's transitions as
//! `coxswain run` does locally (the same printer), then the run's outcome
//! and, when it succeeded, its output on stdout.

use std::collections::BTreeSet;
use std::process::ExitCode;

use futures::TryStreamExt;
use jiff::Timestamp;
use kube::runtime::{WatchStreamExt, watcher};

use super::cluster::Cluster;
use super::error::PluginError;
use crate::local::Progress;
use coxswain_core::api::{Run, RunPhase, RunStatus, StepPhase, StepStatus};

/// Watches the Run `name` until it ends, handing every version of it to
/// `seen`; returns the Run as it ended.
pub async fn until_over(
    cluster: &Cluster,
    name: &str,
    mut seen: impl FnMut(&Run),
) -> Result<Run, PluginError> {
    // A get first: a Run that is not there, or not readable, is said at
    // once (the watcher would retry for ever).
    let first = cluster.run(name).await?;
    seen(&first);
    if phase(&first).is_over() {
        return Ok(first);
    }
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = Box::pin(watcher(cluster.runs(), config).default_backoff());
    loop {
        let event = match events.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => return Err(PluginError::Client("the watch ended".into())),
            Err(e) => match PluginError::from(e) {
                // Rights or the resource gone: retrying cannot help.
                PluginError::Server(s) if matches!(s.code, 401 | 403 | 404) => {
                    return Err(PluginError::Server(s));
                }
                // A dropped connection: the watcher starts again.
                _ => continue,
            },
        };
        match event {
            watcher::Event::Apply(run) | watcher::Event::InitApply(run) => {
                seen(&run);
                if phase(&run).is_over() {
                    return Ok(run);
                }
            }
            watcher::Event::Delete(_) => return Err(PluginError::RunDeleted(name.to_string())),
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

/// Where a Run stands (`Pending` before the controller wrote a status).
pub fn phase(run: &Run) -> RunPhase {
    run.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

/// The live view of the Run `name` until it ends: exit 0 when it
/// succeeded, 1 when it failed or was cancelled, 2 when it could not be
/// watched.
pub async fn live(cluster: &Cluster, name: &str) -> ExitCode {
    let mut progress = Progress::new(false);
    let mut hinted = BTreeSet::new();
    let watched = until_over(cluster, name, |run| {
        if let Some(status) = &run.status {
            progress.changed(status, &in_order(status));
            let hints = hint_answers(name, status, &mut hinted);
            if !hints.is_empty() {
                progress.suspend();
                eprint!("{hints}");
            }
        }
    })
    .await;
    match watched {
        Ok(run) => {
            let status = run.status.unwrap_or_default();
            progress.finished(&status);
            outcome(&status)
        }
        Err(e) => {
            progress.suspend();
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

/// Prints a succeeded run's output on stdout; the exit code of its phase.
fn outcome(status: &RunStatus) -> ExitCode {
    if status.phase != RunPhase::Succeeded {
        return ExitCode::FAILURE;
    }
    let output = status.result().cloned().unwrap_or_default();
    match serde_json::to_string_pretty(&output) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("cannot print the output: {e}"),
    }
    ExitCode::SUCCESS
}

/// The step keys in the order their latest change happened, so one status
/// write that completed `a` and started `b` prints `a` first (also when
/// both happened at the same recorded instant).
fn in_order(status: &RunStatus) -> Vec<String> {
    let mut keys: Vec<(Change, &String)> = status
        .steps
        .iter()
        .map(|(key, record)| (last_change(record), key))
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, key)| key.clone()).collect()
}

/// When the step last changed, as a time (texts of different precisions
/// do not sort as times), whether that change was a start, and when the
/// step started: of two steps that ended at once, the one that started
/// first ended first.
/// A skipped step (never started) comes after the steps that ended then.
fn last_change(record: &StepStatus) -> Change {
    let time = |t: Option<&str>| t.and_then(|t| t.parse().ok());
    let started = time(record.started_at.as_deref());
    let start = (started.is_none(), started);
    match record.status {
        StepPhase::Running | StepPhase::Waiting => (started, true, start),
        _ => (
            time(record.finished_at.as_deref()).or(started),
            false,
            start,
        ),
    }
}

/// When, whether a start, and (never started, when started).
type Change = (Option<Timestamp>, bool, (bool, Option<Timestamp>));

/// Under a step that starts waiting for a person, how to answer it here:
/// the lines to print (none when no step started waiting).
fn hint_answers(name: &str, status: &RunStatus, hinted: &mut BTreeSet<String>) -> String {
    let mut hints = String::new();
    for (key, record) in &status.steps {
        if record.status != StepPhase::Waiting {
            hinted.remove(key);
        } else if hinted.insert(key.clone()) {
            hints.push_str(&format!(
                "    answer with: kubectl coxswain approve {name} {key} --decision …\n"
            ));
        }
    }
    hints
}

/// `wait RUN`: exit 0 when the run succeeded, 1 when it failed or was
/// cancelled (with its error), 2 on a timeout or when it cannot be watched.
pub async fn wait(cluster: &Cluster, name: &str, timeout: Option<&str>) -> ExitCode {
    let bound = match timeout.map(coxswain_core::flow::parse_duration) {
        None => None,
        Some(Ok(bound)) => Some(bound),
        Some(Err(e)) => {
            eprintln!("--timeout: {e}");
            return ExitCode::from(2);
        }
    };
    let last = std::cell::Cell::new(RunPhase::Pending);
    let watched = until_over(cluster, name, |run| last.set(phase(run)));
    let ended = match bound {
        Some(bound) => {
            let ended = tokio::time::timeout(bound, watched).await;
            ended.unwrap_or_else(|_| {
                Err(PluginError::TimedOut {
                    run: name.to_string(),
                    waited: timeout.unwrap_or_default().to_string(),
                    phase: format!("{:?}", last.get()),
                })
            })
        }
        None => watched.await,
    };
    let status = match ended {
        Ok(run) => run.status.unwrap_or_default(),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match status.phase {
        RunPhase::Succeeded => {
            println!("run.coxswain.dev/{name} succeeded");
            ExitCode::SUCCESS
        }
        phase => {
            let word = if phase == RunPhase::Cancelled {
                "was cancelled"
            } else {
                "failed"
            };
            let why = status
                .error
                .as_ref()
                .map(|e| format!(": {}: {}", e.code, e.message))
                .unwrap_or_default();
            eprintln!("run.coxswain.dev/{name} {word}{why}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writes_transitions_print_in_the_order_they_happened() {
        let status: RunStatus = serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "steps": {
                "a_skipped": {"status": "skipped", "finishedAt": "2026-01-01T00:00:02.5Z"},
                "b_started": {"status": "running", "startedAt": "2026-01-01T00:00:02.5Z"},
                "c_checked": {"status": "completed",
                    "startedAt": "2026-01-01T00:00:02.5Z", "finishedAt": "2026-01-01T00:00:02.5Z"},
                "d_first": {"status": "completed",
                    "startedAt": "2026-01-01T00:00:01Z", "finishedAt": "2026-01-01T00:00:02.500Z"},
                "e_early": {"status": "completed",
                    "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:02Z"}
            }
        }))
        .expect("a status");
        assert_eq!(
            in_order(&status),
            ["e_early", "d_first", "c_checked", "a_skipped", "b_started"]
        );
    }
}
