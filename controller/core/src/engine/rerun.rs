//! Rerun from a step: the starting record of a new run of an ended run's
//! pinned flow, in which the steps that do not follow the chosen step keep
//! the old run's records and the chosen step and what follows it run anew.
//!
//! What "follows" means, decided here once for every layer:
//!
//! - A step follows `KEY` when an arrow path leads from `KEY` to it (its
//!   `after`, or the step before it by default), whatever exit the arrows
//!   leave from; the steps nested in a step that reruns rerun with it.
//! - A step inside a loop or a parallel step cannot rerun alone (a loop's
//!   passes read each other; a part belongs to its round): the rerun starts
//!   at the outermost step that holds it, which runs again from its first
//!   pass or round.
//! - A step of the flow's own list that did not end in a way that lets the
//!   run go on in the old run (never reached, still running when the run was
//!   cancelled, or failed without `onFailure: continue`) reruns as well, with
//!   what follows it: copied, it would end the new run as the old one ended.
//!   A step that failed with `onFailure: continue` is copied as it is.
//! - Send-backs are not arrows: a rerunning approval may send work back to
//!   a copied step, which then runs again (and is no longer marked copied).
//!   The counts of send-backs leaving a rerunning step start again at zero.
//! - A flow with a workspace is not rerun from a step: the copied steps'
//!   changes to the checkouts went with the old run's workspace.
//! - Who may reuse what is not decided here: [`copied_decisions`] names
//!   the approvals a seeded record copies, and each driver applies its rule
//!   (on a cluster: only the old run's creator reuses a person's decision,
//!   and only while the Flow is the one the old run pinned).
//! - `arrowCounts` keep the passes into copied steps; the counts into
//!   rerunning steps start again, so `arrows[]` (rebuilt from the seeded
//!   record) shows the copied part of the graph as it was.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{CopiedFrom, RerunOf, RunPhase, RunStatus, StepPhase};

use super::arrows::arrows;
use super::compiled::Compiled;
use super::work::codes;

/// Why a run cannot be rerun from the step asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RerunError {
    /// The step is not a key of the old run's flow.
    #[error("`{step}` is not a step of the flow run `{run}` ran")]
    UnknownStep {
        /// The old run.
        run: String,
        /// The key asked for.
        step: String,
    },
    /// The old run has not ended, so its records may still change.
    #[error(
        "run `{run}` has not ended (phase {phase:?}); only a run that succeeded, failed or \
         was cancelled can be rerun"
    )]
    NotEnded {
        /// The old run.
        run: String,
        /// Its phase.
        phase: RunPhase,
    },
    /// The old record names no flow digest, so the flow cannot be matched.
    #[error("run `{run}` names no flow digest in its record, so its flow cannot be known")]
    Unpinned {
        /// The old run.
        run: String,
    },
    /// The flow has a workspace: the copied steps' changes to its checkouts
    /// are gone with the old run's workspace, so the steps after them
    /// would work on checkouts without them.
    #[error(
        "run `{run}` ran a flow with a workspace, which cannot be rerun from a step: the \
         copied steps' changes to the checkouts are not kept; start a new run instead"
    )]
    Workspace {
        /// The old run.
        run: String,
    },
    /// The flow given is not the one the old run pinned.
    #[error(
        "run `{run}` ran the flow {record}, but the flow given is {flow}; a rerun runs the \
         flow the old run pinned"
    )]
    DifferentFlow {
        /// The old run.
        run: String,
        /// The digest the old record names.
        record: String,
        /// The digest of the flow given.
        flow: String,
    },
}

/// The record a rerun of `old` from `step` starts with: pinned to the same
/// flow, `Pending`, the copied steps' records marked with `from`, every
/// step that reruns left without a status and due (see the module's
/// rules). [`super::RunMachine::resume`] takes it, and `Event::Start`
/// starts it without making the copied steps due again.
pub fn rerun_from(
    flow: &Compiled<'_>,
    old: &RunStatus,
    step: &str,
    from: CopiedFrom,
) -> Result<RunStatus, RerunError> {
    check_old(flow, old, &from.run)?;
    let reruns = rerun_nodes(flow, old, step).ok_or_else(|| RerunError::UnknownStep {
        run: from.run.clone(),
        step: step.to_string(),
    })?;
    let mut status = RunStatus {
        flow_generation: old.flow_generation,
        flow_digest: old.flow_digest.clone(),
        since: old.since.clone(),
        rerun_of: Some(RerunOf {
            run: from.run.clone(),
            uid: from.uid.clone(),
            step: step.to_string(),
        }),
        ..Default::default()
    };
    for (node, item) in flow.graph.nodes.iter().enumerate() {
        if reruns[node] {
            if item.parent.is_none() {
                status.due.insert(item.key.to_string());
            }
            continue;
        }
        if let Some(record) = old.steps.get(item.key) {
            let mut record = record.clone();
            record.copied_from.get_or_insert_with(|| from.clone());
            status.steps.insert(item.key.to_string(), record);
        }
    }
    let rerun_keys: BTreeSet<&str> = (0..reruns.len())
        .filter(|&n| reruns[n])
        .map(|n| flow.key(n))
        .collect();
    status.arrow_counts = counts_where(&old.arrow_counts, |key| {
        key.rsplit_once("->")
            .is_some_and(|(_, to)| !rerun_keys.contains(to))
    });
    status.send_backs = counts_where(&old.send_backs, |key| {
        key.split_once("->")
            .is_some_and(|(from, _)| !rerun_keys.contains(from))
    });
    status.arrows = arrows(flow, &status);
    Ok(status)
}

/// The counts of `counts` whose `from->to` key `keep` keeps: a rerun carries
/// over the counts of the arrows (and send-backs) it does not run again.
fn counts_where(
    counts: &BTreeMap<String, i32>,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, i32> {
    counts
        .iter()
        .filter(|(key, _)| keep(key))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The approval steps whose decision a seeded rerun record copies from
/// the old run, in document order: an approval step copied with a status
/// that is not pending or skipped, or nested in a loop or parallel step
/// copied that way (its parts' decisions travel with it). A person made
/// each of those decisions for the old run; who may reuse them is the
/// caller's rule (on a cluster: only the old run's creator).
pub fn copied_decisions(flow: &Compiled<'_>, seeded: &RunStatus) -> Vec<String> {
    let copied = |node: usize| {
        seeded.steps.get(flow.key(node)).is_some_and(|record| {
            record.copied_from.is_some()
                && !matches!(record.status, StepPhase::Pending | StepPhase::Skipped)
        })
    };
    (0..flow.graph.nodes.len())
        .filter(|&node| flow.graph.nodes[node].step.approval.is_some())
        .filter(|&node| copied(node) || flow.graph.enclosing(node).any(copied))
        .map(|node| flow.key(node).to_string())
        .collect()
}

/// The old run must have ended and have run this very flow.
fn check_old(flow: &Compiled<'_>, old: &RunStatus, run: &str) -> Result<(), RerunError> {
    if !old.phase.is_over() {
        return Err(RerunError::NotEnded {
            run: run.to_string(),
            phase: old.phase,
        });
    }
    match &old.flow_digest {
        None => Err(RerunError::Unpinned {
            run: run.to_string(),
        }),
        Some(digest) if *digest != flow.digest => Err(RerunError::DifferentFlow {
            run: run.to_string(),
            record: digest.clone(),
            flow: flow.digest.clone(),
        }),
        Some(_) if flow.spec.workspace.is_some() => Err(RerunError::Workspace {
            run: run.to_string(),
        }),
        Some(_) => Ok(()),
    }
}

/// Per node, whether it runs again in a rerun from `step`; `None` when
/// `step` is not a key of the flow.
pub fn rerun_nodes(flow: &Compiled<'_>, old: &RunStatus, step: &str) -> Option<Vec<bool>> {
    let start = outermost(flow, flow.node(step)?);
    let mut reruns = vec![false; flow.graph.nodes.len()];
    reruns[start] = true;
    for &node in &flow.graph.lists[0] {
        if !went_on(flow, old, node) {
            reruns[node] = true;
        }
    }
    mark_downstream(flow, &mut reruns);
    Some(reruns)
}

/// The step of the flow's own list that holds `node` (or `node` itself).
fn outermost(flow: &Compiled<'_>, node: usize) -> usize {
    flow.graph.enclosing(node).last().unwrap_or(node)
}

/// Whether the old run's status of a top-level step lets the run go on past
/// it: completed, skipped, or failed with `onFailure: continue`.
fn went_on(flow: &Compiled<'_>, old: &RunStatus, node: usize) -> bool {
    match old.steps.get(flow.key(node)).map(|r| r.status) {
        Some(StepPhase::Completed | StepPhase::Skipped) => !old.due.contains(flow.key(node)),
        Some(StepPhase::Failed) => flow.steps[node].continue_on_failure,
        _ => false,
    }
}

/// Adds to the marked steps every step an arrow path leads to from one of
/// them, and every step nested in one of those. Arrows point forward in
/// document order and a nested step comes after its composite, so one pass
/// in order suffices.
fn mark_downstream(flow: &Compiled<'_>, reruns: &mut [bool]) {
    for (node, item) in flow.graph.nodes.iter().enumerate() {
        let after_marked = item.preds.iter().any(|a| reruns[a.from]);
        let inside_marked = item.parent.is_some_and(|p| reruns[p]);
        if after_marked || inside_marked {
            reruns[node] = true;
        }
    }
}

/// The step `retry RUN` reruns from: the first step of the flow's own
/// list, in document order, that failed on its own (not stopped because the
/// run ended) without `onFailure: continue`; else the first that failed or
/// never ended (a cancelled run). `None` when every step let the run go on.
pub fn first_failed_step(flow: &Compiled<'_>, status: &RunStatus) -> Option<String> {
    let top = &flow.graph.lists[0];
    let failed_itself = |n: usize| {
        let record = status.steps.get(flow.key(n));
        record.is_some_and(|r| {
            r.status == StepPhase::Failed
                && r.error.as_ref().is_none_or(|e| e.code != codes::CANCELLED)
        }) && !flow.steps[n].continue_on_failure
    };
    top.iter()
        .copied()
        .find(|&n| failed_itself(n))
        .or_else(|| top.iter().copied().find(|&n| !went_on(flow, status, n)))
        .map(|n| flow.key(n).to_string())
}
