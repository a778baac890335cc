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
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(coxswain_k8s::controller::run(args.settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coxswain controller: {e}");
            ExitCode::FAILURE
        }
    }
}
