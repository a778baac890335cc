//! `coxswain controller`: runs Flows and Runs on the cluster the kubeconfig
//! (or the in-cluster service account) names.

use std::process::ExitCode;

/// Options of `coxswain controller`; each flag also reads an environment variable.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    settings: coxswain_k8s::Settings,
}

/// Runs until SIGTERM or SIGINT; exit 1 when the controller could not start
/// or lost its Lease.
pub fn run(args: Args) -> ExitCode {
    super::serve("controller", coxswain_k8s::controller::run(args.settings))
}
