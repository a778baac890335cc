//! Script steps as Jobs: one Job per attempt, its inputs in a ConfigMap
//! mounted read-only, the result handed back by `coxswain step-exec`.
//! (Being built: see the "jobs" work item.)

/// How script Jobs are made.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JobSettings {}
