//! A validation problem with its place in the spec, which the validator
//! and the workspace warnings both report and `coxswain lint` turns into a
//! line and column.

use crate::api::StepProblem;

/// A problem with the path, from the Flow's `spec`, of what it is about:
/// `steps[2].loop.steps[0].after[1]`, `schedule.cron`. The path follows the
/// field as far as the flow has it: a problem with the step's kind names
/// the step (`steps[3].kind`, which no YAML node has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedProblem {
    /// The problem, as [`validate`] reports it.
    pub problem: StepProblem,
    /// Its step's place in `spec` joined to its field.
    pub path: String,
}
