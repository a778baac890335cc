//! Which Approval is a run's: an Approval belongs to one attempt of one
//! step of one Run only when what nobody can change afterwards says so (its
//! name, which holds a digest of the Run's uid, its `spec` and its
//! controller owner). The controller takes answers only from those, and
//! whatever acts as a person (the viewer) shows only those.

use kube::ResourceExt;

use crate::names;
use coxswain_core::api::{Approval, Run};

/// The name of the Approval of attempt `attempt` of `step` of `run`.
pub fn approval_name(run: &Run, step: &str, attempt: u32) -> String {
    names::approval(
        &run.name_any(),
        &run.uid().unwrap_or_default(),
        step,
        attempt,
    )
}

/// Why `approval` is not the one `run` made for attempt `attempt` of
/// `step`, if it is not: its name, `spec` and controller owner must all say
/// so. (The name alone proves the run's uid, step and attempt, as no object
/// can be renamed; the rest catches an object made under it by hand.)
pub fn not_ours(approval: &Approval, run: &Run, step: &str, attempt: u32) -> Option<String> {
    let name = approval.name_any();
    let uid = run.uid().unwrap_or_default();
    let spec = &approval.spec;
    let why = if name != approval_name(run, step, attempt) {
        format!("is named for another run, step or attempt than attempt {attempt} of step {step}")
    } else if spec.run != run.name_any() || spec.step != step || spec.attempt != attempt as i32 {
        format!(
            "says it is for run {} step {} attempt {}",
            spec.run, spec.step, spec.attempt
        )
    } else if !names::controlled_by(approval, &uid) {
        format!("is not owned by run {} (uid {uid})", run.name_any())
    } else {
        return None;
    };
    Some(format!(
        "the Approval {name} {why}; Coxswain did not make it for this run, so no answer is taken from it (it was left alone)"
    ))
}
