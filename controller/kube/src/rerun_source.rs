//! The checks on the Run a rerun names (`spec.from`), which admission and
//! the controller make alike: it exists in the namespace under the uid the
//! rerun pinned and ran the same Flow with the same input; that Flow still
//! exists unchanged (so a rerun never outlives a gate its owner added or a
//! Flow its owner withdrew); and a person's decision is copied only into a
//! rerun made by whoever made the old run. This module reads Runs and Flows
//! and reconciles nothing.

use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::{Flow, Run, RunFrom, RunStatus};
use coxswain_core::engine::RerunError;
use coxswain_core::flow::flow_digest;

use crate::names::CREATED_BY_ANNOTATION;

/// Why the Run `spec.from` names cannot be rerun by this Run; the checks
/// admission and the controller both make on the old Run itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceProblem {
    /// No Run of that name in the namespace.
    #[error("spec.from.run: there is no Run `{run}` in namespace `{namespace}` to rerun from")]
    Missing {
        /// The name given.
        run: String,
        /// The namespace.
        namespace: String,
    },
    /// The new Run names another Flow than the old one.
    #[error(
        "spec.flowRef names the Flow `{given}`, but the Run `{run}` ran the Flow `{theirs}`; \
         a rerun names the same Flow (and runs the snapshot the old run pinned)"
    )]
    OtherFlow {
        /// The old Run.
        run: String,
        /// The Flow the new Run names.
        given: String,
        /// The Flow the old Run named.
        theirs: String,
    },
    /// The new Run's input is not the old Run's.
    #[error(
        "spec.input differs from the input of the Run `{run}`; a rerun runs with the old \
         run's input, which its copied steps saw: copy it (or leave both out)"
    )]
    OtherInput {
        /// The old Run.
        run: String,
    },
    /// The old run's status says no rerun can start from it.
    #[error("spec.from: {0}")]
    Record(#[from] RerunError),
    /// The Run under the old name is not the one the rerun pinned.
    #[error(
        "spec.from.uid pins the Run `{run}` with uid {pinned}, but the Run of that name now \
         has uid {found}: it was deleted and made again, and a rerun never starts from \
         another run than the one it named"
    )]
    Remade {
        /// The old Run's name.
        run: String,
        /// The uid the rerun pinned.
        pinned: String,
        /// The uid of the Run found under the name.
        found: String,
    },
    /// The Flow the old run ran is gone: its owner withdrew it.
    #[error(
        "spec.from: the Flow `{flow}` that the Run `{run}` ran no longer exists; a rerun \
         runs only while its Flow exists unchanged, so a withdrawn flow stays withdrawn"
    )]
    FlowGone {
        /// The old Run.
        run: String,
        /// The Flow's name.
        flow: String,
    },
    /// The Flow changed since the old run pinned it.
    #[error(
        "spec.from: the Flow `{flow}` changed since the Run `{run}` ran it (it ran {ran}; \
         the Flow is now {today}); a rerun replays the old flow only while the Flow is \
         unchanged, so every review and gate added since holds: start a new Run of the \
         Flow instead"
    )]
    FlowChanged {
        /// The old Run.
        run: String,
        /// The Flow's name.
        flow: String,
        /// The digest the old run pinned.
        ran: String,
        /// The digest of today's Flow.
        today: String,
    },
    /// The rerun would copy decisions a person made for someone else's run.
    #[error(
        "spec.from: a rerun from `{step}` copies the decision of {} made for the Run \
         `{run}`, which {} created; only they may reuse it. Rerun from `{first}` so the \
         review is asked again",
        list(.decided),
        .creator.as_deref().map_or("someone else".to_string(), |c| format!("`{c}`")),
        first = .decided.first().map_or("", String::as_str)
    )]
    OthersDecision {
        /// The old Run.
        run: String,
        /// The step the rerun starts from.
        step: String,
        /// Who created the old Run, as stamped.
        creator: Option<String>,
        /// The approval steps whose decisions would be copied.
        decided: Vec<String>,
    },
}

/// `` `a` ``, `` `a` and `b` ``, `` `a`, `b` and `c` ``.
fn list(keys: &[String]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Who created `run`, as admission stamped it.
pub fn creator(run: &Run) -> Option<&str> {
    run.annotations()
        .get(CREATED_BY_ANNOTATION)
        .map(String::as_str)
}

/// The checks on the old Run that need no flow: it is the Run the rerun
/// pinned by uid (when it pinned one), and it ran the Flow this Run names,
/// with the same input.
pub fn check_source(run: &Run, old: &Run) -> Result<(), SourceProblem> {
    let pinned = run.spec.from.as_ref().and_then(|from| from.uid.as_ref());
    let found = old.uid().unwrap_or_default();
    if let Some(pinned) = pinned.filter(|pinned| **pinned != found) {
        return Err(SourceProblem::Remade {
            run: old.name_any(),
            pinned: pinned.clone(),
            found,
        });
    }
    if run.spec.flow_ref != old.spec.flow_ref {
        return Err(SourceProblem::OtherFlow {
            run: old.name_any(),
            given: run.spec.flow_ref.name.clone(),
            theirs: old.spec.flow_ref.name.clone(),
        });
    }
    if input_of(run) != input_of(old) {
        return Err(SourceProblem::OtherInput {
            run: old.name_any(),
        });
    }
    Ok(())
}

/// The digest of the flow the old run pinned, once it has ended: a run
/// still going, or one that never pinned a flow, cannot be rerun (its
/// snapshot may not exist yet).
pub fn pinned_digest<'s>(old: &Run, status: &'s RunStatus) -> Result<&'s str, SourceProblem> {
    let run = old.name_any();
    if !status.phase.is_over() {
        let phase = status.phase;
        return Err(RerunError::NotEnded { run, phase }.into());
    }
    status
        .flow_digest
        .as_deref()
        .ok_or_else(|| RerunError::Unpinned { run }.into())
}

/// The gates a rerun passes once its seed is known: today's Flow is the
/// one the old run ran ([`check_today`]), and the approvals it copies
/// (`decided`) are reused only by the old run's creator ([`check_reuse`]).
pub fn check_gates(
    run: &Run,
    old: &Run,
    ran: &str,
    today: Option<&Flow>,
    decided: Vec<String>,
) -> Result<(), SourceProblem> {
    check_today(old, ran, today)?;
    check_reuse(run, old, decided)
}

/// The check against today's Flow: it exists, and its spec has the digest
/// the old run pinned (`ran`). A Flow edited back to exactly the old spec
/// passes: what runs is what its owner publishes today.
pub fn check_today(old: &Run, ran: &str, today: Option<&Flow>) -> Result<(), SourceProblem> {
    let flow = old.spec.flow_ref.name.clone();
    let Some(today) = today else {
        return Err(SourceProblem::FlowGone {
            run: old.name_any(),
            flow,
        });
    };
    let digest = flow_digest(&today.spec);
    if digest != ran {
        return Err(SourceProblem::FlowChanged {
            run: old.name_any(),
            flow,
            ran: ran.to_string(),
            today: digest,
        });
    }
    Ok(())
}

/// The rule for copied decisions: `decided` (the approval steps the rerun
/// copies, see [`coxswain_core::engine::copied_decisions`]) may be copied
/// only into a rerun created by the old run's creator. Both creators are
/// the ones admission stamped; a missing stamp matches nobody.
pub fn check_reuse(run: &Run, old: &Run, decided: Vec<String>) -> Result<(), SourceProblem> {
    let theirs = creator(old);
    if decided.is_empty() || (theirs.is_some() && creator(run) == theirs) {
        return Ok(());
    }
    Err(SourceProblem::OthersDecision {
        run: old.name_any(),
        step: run
            .spec
            .from
            .as_ref()
            .map(|from| from.step.clone())
            .unwrap_or_default(),
        creator: theirs.map(str::to_string),
        decided,
    })
}

/// Reads today's Flow of the old run (`None`: deleted).
pub async fn today_flow(client: &kube::Client, old: &Run) -> Result<Option<Flow>, kube::Error> {
    let namespace = old.namespace().unwrap_or_default();
    Api::<Flow>::namespaced(client.clone(), &namespace)
        .get_opt(&old.spec.flow_ref.name)
        .await
}

/// A Run's input as the engine gets it (absent reads as `{}`).
fn input_of(run: &Run) -> Value {
    run.spec.input.clone().unwrap_or_else(|| json!({}))
}

/// Reads the old Run `from` names, in the rerun's own namespace (`None`:
/// there is none; [`SourceProblem::missing`] says so).
pub async fn old_run(
    client: &kube::Client,
    run: &Run,
    from: &RunFrom,
) -> Result<Option<Run>, kube::Error> {
    let namespace = run.namespace().unwrap_or_default();
    Api::<Run>::namespaced(client.clone(), &namespace)
        .get_opt(&from.run)
        .await
}

impl SourceProblem {
    /// No Run `from` names in the namespace of `run`.
    pub fn missing(run: &Run, from: &RunFrom) -> SourceProblem {
        SourceProblem::Missing {
            run: from.run.clone(),
            namespace: run.namespace().unwrap_or_default(),
        }
    }
}
