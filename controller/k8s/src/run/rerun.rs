//! Rerun from a step on the cluster (`spec.from`): on a rerun's first
//! reconcile the old Run is read (same namespace, the uid admission
//! pinned), checked with admission's rules (today's Flow unchanged, a
//! person's decision copied only for the old run's creator), its status
//! loaded with its moved-out values put back, its pinned flow read from its
//! snapshot (checked against its digest) and copied into a snapshot the new
//! Run owns; the engine's [`rerun_from`] seeds the new record from it.
//!
//! After that first write nothing of the old Run is read again: the new
//! record holds the copied steps whole (large values are moved out again
//! into ConfigMaps the new Run owns, so retention deleting the old Run
//! loses nothing), and `status.rerunOf` names the old Run by uid.

use std::sync::Arc;

use kube::ResourceExt;

use crate::error::{Error, ValueError};
use coxswain_core::api::{CopiedFrom, Run, RunFrom, RunStatus};
use coxswain_core::engine::{CompiledFlow, codes, copied_decisions, rerun_from};

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
    /// The rerun cannot start: why, for its status.
    Refused(String),
    /// An object the controller made for one of the runs was replaced.
    Tampered {
        /// The object's name.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
}

pub use crate::rerun_source::{
    SourceProblem, check_gates, check_source, old_run, pinned_digest, today_flow,
};

/// Seeds the status of `run`, a rerun of `from`, as its first reconcile.
pub async fn seed(ctx: &Context, run: &Run, from: &RunFrom) -> Result<Seeded, Error> {
    let old = match old_run(&ctx.client, run, from).await {
        Ok(Some(old)) => old,
        Ok(None) => {
            return Ok(Seeded::Refused(
                SourceProblem::missing(run, from).to_string(),
            ));
        }
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
        Err(Error::Values(ValueError::Tampered { object, reason })) => {
            return Ok(Seeded::Tampered { object, reason });
        }
        Err(e) => return Err(e),
    };
    let flow = match old_flow(ctx, &old, &status).await? {
        Pinned::Flow(flow) => flow,
        Pinned::Tampered { object, reason } => return Ok(Seeded::Tampered { object, reason }),
        Pinned::Refused(_, reason) | Pinned::NotYet(reason) => return Ok(Seeded::Refused(reason)),
    };
    let source = CopiedFrom {
        run: old.name_any(),
        uid: old.uid().unwrap_or_default(),
    };
    let seeded = match rerun_from(flow.get(), &status, &from.step, source) {
        Ok(seeded) => seeded,
        Err(e) => return Ok(Seeded::Refused(SourceProblem::from(e).to_string())),
    };
    let today = today_flow(&ctx.client, &old).await.map_err(|e| {
        let what = format!("reading the Flow {} to rerun it", old.spec.flow_ref.name);
        Error::kube(what, e)
    })?;
    let decided = copied_decisions(flow.get(), &seeded);
    if let Err(problem) = check_gates(run, &old, &flow.get().digest, today.as_ref(), decided) {
        return Ok(Seeded::Refused(problem.to_string()));
    }
    match pin::copy_snapshot(&ctx.client, run, &flow).await? {
        Pinned::Flow(_) => {}
        Pinned::Tampered { object, reason } => return Ok(Seeded::Tampered { object, reason }),
        Pinned::Refused(..) | Pinned::NotYet(_) => {
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
/// the digest its status names; a run not ended or never pinned is
/// refused first (its snapshot may not exist yet). A refusal's reason is
/// the whole message for the rerun's record.
async fn old_flow(ctx: &Context, old: &Run, status: &RunStatus) -> Result<Pinned, Error> {
    let run = old.name_any();
    let digest = match pinned_digest(old, status) {
        Ok(digest) => digest,
        Err(problem) => return Ok(Pinned::Refused(codes::RERUN, problem.to_string())),
    };
    Ok(
        match pin::pinned_flow(&ctx.client, &ctx.flows, old, Some(digest)).await? {
            Pinned::Refused(_, reason) | Pinned::NotYet(reason) => Pinned::Refused(
                codes::RERUN,
                format!("spec.from: the flow of the Run `{run}` cannot be read: {reason}"),
            ),
            pinned => pinned,
        },
    )
}
