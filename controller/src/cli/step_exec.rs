//! `coxswain step-exec`: the wrapper that runs a script step inside its Job's
//! pod and hands the result back. (Being built: see the "jobs" work item.)

use std::process::ExitCode;

/// Options of `coxswain step-exec`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the step in this pod.
pub fn run(_args: Args) -> ExitCode {
    eprintln!("coxswain step-exec: not built yet");
    ExitCode::FAILURE
}
