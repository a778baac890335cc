//! `coxswain webhook`: serves admission (Flow, Run and Approval checks)
//! alone, without reconciling; `coxswain controller --webhook-url …` serves
//! the same from every controller replica.

use std::process::ExitCode;

/// Options of `coxswain webhook`; each flag also reads an environment variable.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    settings: coxswain_k8s::admission::WebhookSettings,
}

/// Runs until SIGTERM or SIGINT; exit 1 when admission could not start.
pub fn run(args: Args) -> ExitCode {
    super::serve("webhook", coxswain_k8s::admission::run_alone(args.settings))
}
