//! `bench`: Coxswain's benchmark on `e2e/cluster` (see `BENCHMARKS.md`).
//!
//! ```sh
//! cargo build --release -p coxswain -p coxswain-e2e --bin bench
//! E2E_HARNESS=target/e2e/harness target/release/bench --runs 200 --steps 10
//! ```
//!
//! It drives `coxswain controller` from the same directory as itself
//! (`target/release/coxswain`), starts the cluster as the e2e tests do (or
//! uses `KUBECONFIG`), and prints a Markdown table on stdout.

use std::time::Duration;

use clap::Parser;
use coxswain_e2e::bench::{self, Options};

/// Measures `coxswain controller` against the API server's own limit.
#[derive(Parser, Debug)]
#[command(name = "bench")]
struct Args {
    /// Runs of in-controller steps.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Steps per run: http calls to a local server and conditions, alternating.
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Runs of script steps (each step a Job; the stand-in node starts a process).
    #[arg(long, default_value_t = 10)]
    job_runs: usize,
    /// Script steps per run.
    #[arg(long, default_value_t = 2)]
    job_steps: usize,
    /// One-step Runs timed one at a time (the `pods` part).
    #[arg(long, default_value_t = 10)]
    pod_runs: usize,
    /// Runs kept active (waiting on a person) for the memory figure.
    #[arg(long, default_value_t = 1000)]
    active: usize,
    /// Seconds the plain status-patch loop runs.
    #[arg(long, default_value_t = 10)]
    plain_seconds: u64,
    /// Workers of the plain status-patch loop.
    #[arg(long, default_value_t = 16)]
    plain_workers: usize,
    /// The most seconds one workload may take.
    #[arg(long, default_value_t = 600)]
    bound_seconds: u64,
    /// A flag for every `coxswain controller` (repeat it), e.g.
    /// `--controller-arg=--reconcile-concurrency=32`.
    #[arg(long = "controller-arg", allow_hyphen_values = true)]
    controller_args: Vec<String>,
    /// A flag for every Argo workflow-controller of the argo part (repeat
    /// it), e.g. `--argo-arg=--qps=1000 --argo-arg=--burst=2000`; none: Argo's defaults.
    #[arg(long = "argo-arg", allow_hyphen_values = true)]
    argo_args: Vec<String>,
    /// Replica counts of the shards part (repeat it, or `--replicas 1,2,4`).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4])]
    replicas: Vec<usize>,
    /// Agent steps per run in the shards part (the stand-in model answers after 2 s).
    #[arg(long, default_value_t = 3)]
    agent_steps: usize,
    /// Run only these parts: plain, http, conditions, jobs, pods, memory, shards, argo
    /// (repeat it; argo needs `e2e/argo/build` first).
    #[arg(long)]
    only: Vec<String>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let options = Options {
        runs: args.runs,
        steps: args.steps,
        job_runs: args.job_runs,
        job_steps: args.job_steps,
        pod_runs: args.pod_runs,
        active: args.active,
        plain_for: Duration::from_secs(args.plain_seconds),
        plain_workers: args.plain_workers,
        bound: Duration::from_secs(args.bound_seconds),
        controller_args: args.controller_args,
        argo_args: args.argo_args,
        replicas: args.replicas,
        agent_steps: args.agent_steps,
        only: args.only,
    };
    match bench::run(&options).await {
        Ok(figures) => {
            println!("{}", figures.markdown());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
