//! The checks on the Run a rerun names (`spec.from`) that need no flow:
//! it exists in the namespace and ran the same Flow with the same input.
//! Admission and the controller make them alike; this module reads Runs
//! and reconciles nothing.

use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::{Run, RunFrom};
use coxswain_core::engine::RerunError;

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
