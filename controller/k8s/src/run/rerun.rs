//! Rerun from a step on the cluster (`spec.from`): on a rerun's first
//! reconcile the old Run is read (same namespace), checked, its record
//! loaded with its moved-out values put back, its pinned flow read from its
//! snapshot (checked against its digest) and copied into a snapshot the new
//! Run owns; the engine's [`rerun_from`] seeds the new record from it.
//!
//! After that first write nothing of the old Run is read again: the new
//! record holds the copied steps whole (large values are moved out again
//! into ConfigMaps the new Run owns, so retention deleting the old Run
//! loses nothing), and `status.rerunOf` names the old Run by uid.

use std::sync::Arc;

use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::error::Error;
use coxswain_core::api::{CopiedFrom, Run, RunFrom, RunStatus};
use coxswain_core::engine::{CompiledFlow, RerunError, rerun_from};

use super::Context;
use super::pin::{self, Pinned};

/// What seeding a rerun found.
pub enum Seeded {
    /// The rerun's starting record and the old run's pinned flow.
    Ready {
        /// The seeded record (`Pending`, copied steps marked).
        status: Box<RunStatus>,
        /// The flow the old run pinned, now pinned by the new one too.
        flow: Arc<CompiledFlow>,
    },
    /// The rerun cannot start: why, for its record.
    Refused(String),
    /// An object the controller made for one of the runs was replaced.
    Tampered {
        /// The object's name.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
}

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
    /// The old run's record says no rerun can start from it.
    #[error("spec.from: {0}")]
    Record(#[from] RerunError),
}

/// The checks on the old Run that need no flow: it ran the Flow this Run
/// names, with the same input.
pub fn check_source(run: &Run, old: &Run) -> Result<(), SourceProblem> {
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

/// A Run's input as the engine gets it (absent reads as `{}`).
fn input_of(run: &Run) -> Value {
    run.spec.input.clone().unwrap_or_else(|| json!({}))
}

/// Reads the old Run `from` names; `Err(problem)` when there is none.
pub async fn old_run(
    client: &kube::Client,
    run: &Run,
    from: &RunFrom,
) -> Result<Result<Run, SourceProblem>, kube::Error> {
    let namespace = run.namespace().unwrap_or_default();
    let runs: Api<Run> = Api::namespaced(client.clone(), &namespace);
    Ok(runs
        .get_opt(&from.run)
        .await?
        .ok_or(SourceProblem::Missing {
            run: from.run.clone(),
            namespace,
        }))
}

/// Seeds the record of `run`, a rerun of `from`, as its first reconcile.
pub async fn seed(ctx: &Context, run: &Run, from: &RunFrom) -> Result<Seeded, Error> {
    let old = match old_run(&ctx.client, run, from).await {
        Ok(Ok(old)) => old,
        Ok(Err(problem)) => return Ok(Seeded::Refused(problem.to_string())),
        Err(e) => {
            let what = format!("reading the Run {} to rerun from", from.run);
            return Err(Error::kube(what, e));
        }
    };
    if let Err(problem) = check_source(run, &old) {
        return Ok(Seeded::Refused(problem.to_string()));
    }
    let status = match ctx.offloader.load(&old).await {
        Ok(status) => status,
        Err(Error::Tampered { object, reason }) => return Ok(Seeded::Tampered { object, reason }),
        Err(e) => return Err(e),
    };
    let flow = match old_flow(ctx, &old, &status).await? {
        Ok(flow) => flow,
        Err(not) => return Ok(not),
    };
    let source = CopiedFrom {
        run: old.name_any(),
        uid: old.uid().unwrap_or_default(),
    };
    let seeded = match rerun_from(flow.get(), &status, &from.step, source) {
        Ok(seeded) => seeded,
        Err(e) => return Ok(Seeded::Refused(SourceProblem::from(e).to_string())),
    };
    match pin::copy_snapshot(&ctx.client, run, &flow).await? {
        Ok(()) => {}
        Err(Pinned::Tampered { object, reason }) => return Ok(Seeded::Tampered { object, reason }),
        Err(_) => {
            return Ok(Seeded::Refused(
                "the flow snapshot could not be copied".into(),
            ));
        }
    }
    Ok(Seeded::Ready {
        status: Box::new(seeded),
        flow,
    })
}

/// The old run's pinned flow, read from its snapshot and checked against
/// the digest its record names; a run not ended or never pinned is
/// refused first (its snapshot may not exist yet).
async fn old_flow(
    ctx: &Context,
    old: &Run,
    status: &RunStatus,
) -> Result<Result<Arc<CompiledFlow>, Seeded>, Error> {
    let run = old.name_any();
    let refused = |e: RerunError| Ok(Err(Seeded::Refused(SourceProblem::from(e).to_string())));
    if !status.phase.is_over() {
        let phase = status.phase;
        return refused(RerunError::NotEnded { run, phase });
    }
    let Some(digest) = status.flow_digest.as_deref() else {
        return refused(RerunError::Unpinned { run });
    };
    Ok(
        match pin::pinned_flow(&ctx.client, &ctx.flows, old, Some(digest)).await? {
            Pinned::Flow(flow) => Ok(flow),
            Pinned::Tampered { object, reason } => Err(Seeded::Tampered { object, reason }),
            Pinned::Refused(_, reason) | Pinned::NotYet(reason) => Err(Seeded::Refused(format!(
                "spec.from: the flow of the Run `{run}` cannot be read: {reason}"
            ))),
        },
    )
}
