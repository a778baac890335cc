//! Argo Workflows' side of the benchmark's comparison (`BENCHMARKS.md`),
//! runnable alone:
//! N pod-less workflows of M `suspend: {duration: "0"}` steps in sequence on
//! the e2e cluster, with the API writes they cost.
//!
//! ```sh
//! e2e/argo/build    # once: ~18 minutes cold
//! E2E_HARNESS=target/e2e/harness cargo run -p coxswain-e2e --example argo_chains -- \
//!     --workflows 200 --steps 10 [-- EXTRA-CONTROLLER-FLAGS, e.g. --qps 1000 --burst 2000]
//! ```
//! `--pods` makes every step a container (`sh -c true`) instead of a
//! `suspend`; the pods run `argoexec` from beside the controller (build it
//! with `ARGO_BUILD_ARGOEXEC=1 e2e/argo/build`). At most 10 pods: each copies
//! argoexec (~110 MB) into an emptyDir on the host's disk.
//! Starts its own cluster (or uses `KUBECONFIG`), a namespace `argo-bench-PID`,
//! and Argo's controller with default settings unless flags follow `--`.
//! `--coxswain` then runs the same N × M as Runs of the equivalent Coxswain
//! Flow (condition steps) with `target/debug/coxswain controller` (run
//! `cargo build -p coxswain` first) in `coxswain-bench-PID`, after Argo stops.

use std::time::Duration;

use coxswain_e2e::apimetrics::{self, WriteCounts};
use coxswain_e2e::argo::{ChainReport, StepKind, run_coxswain_chains};
use coxswain_e2e::{Argo, ControllerProcess, Kubectl, client_for, kubeconfig};

/// The most pod steps one `--pods` batch may run (see the disk note in `parse_args`).
const MAX_POD_STEPS: usize = 10;

/// What the command line asked for.
struct Args {
    workflows: usize,
    steps: usize,
    bound: Duration,
    kind: StepKind,
    coxswain: bool,
    extra: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        workflows: 200,
        steps: 10,
        bound: Duration::from_secs(1800),
        kind: StepKind::Suspend,
        coxswain: false,
        extra: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            let text = it.next().ok_or(format!("{name} needs a number"))?;
            text.parse()
                .map_err(|_| format!("{name}: {text:?} is not a whole number"))
        };
        match arg.as_str() {
            "--workflows" => args.workflows = number("--workflows")? as usize,
            "--steps" => args.steps = number("--steps")? as usize,
            "--bound-seconds" => args.bound = Duration::from_secs(number("--bound-seconds")?),
            "--pods" => args.kind = StepKind::Pod,
            "--coxswain" => args.coxswain = true,
            "--" => args.extra.extend(it.by_ref()),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; use --workflows N --steps M [--pods | --coxswain] [--bound-seconds S] [-- FLAGS]"
                ));
            }
        }
    }
    if args.workflows == 0 || args.steps == 0 {
        return Err("--workflows and --steps must be at least 1".into());
    }
    if args.coxswain && args.kind == StepKind::Pod {
        return Err("--coxswain compares pod-less chains only: leave out --pods".into());
    }
    if args.kind == StepKind::Pod && args.workflows * args.steps > MAX_POD_STEPS {
        return Err(format!(
            "--pods runs {} pods; at most {MAX_POD_STEPS}: on the stand-in node every Argo pod \
             copies argoexec (~110 MB) into an emptyDir on the host's disk, kept until the \
             cluster stops",
            args.workflows * args.steps
        ));
    }
    Ok(args)
}

/// The controller's resident memory now and at its peak, from /proc.
fn memory(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    format!("RSS {} (peak {})", field("VmRSS:"), field("VmHWM:"))
}

/// Prints a batch's report, the controller's memory and the API writes
/// counted between `before` and `after`.
fn print_batch(report: &ChainReport, pid: u32, before: &WriteCounts, after: &WriteCounts) {
    let delta = after.since(before);
    println!("{report}");
    println!("controller memory after the batch: {}", memory(pid));
    let all = delta.total();
    // Lease renewals and the stand-in node's status run on a clock, whatever the work.
    let work = all - delta.resource("leases", "") - delta.resource("nodes", "status");
    let chains = report.workflows as f64;
    println!(
        "API writes during the batch: {all} in all, {work} without Lease and node-status renewals \
         (includes the {} creations): {:.2} per workflow, {:.3} per step",
        report.workflows,
        work as f64 / chains,
        work as f64 / (chains * report.steps_per_workflow as f64)
    );
    for (key, n) in &delta.0 {
        let resource = if key.subresource.is_empty() {
            key.resource.clone()
        } else {
            format!("{}/{}", key.resource, key.subresource)
        };
        println!("  {:>6} {resource:<40} {n}", key.verb);
    }
}

/// The same chains as Runs of the equivalent Coxswain Flow, driven by
/// `target/debug/coxswain controller` (build it first), in a namespace of
/// their own so neither controller sees the other's objects.
async fn coxswain_batch(
    kubeconfig: &std::path::Path,
    args: &Args,
) -> Result<(), Box<dyn std::error::Error>> {
    let kubectl = Kubectl::for_kubeconfig(kubeconfig);
    kubectl.install_crds().await?;
    let namespace = format!("coxswain-bench-{}", std::process::id());
    kubectl.run(&["create", "namespace", &namespace])?;
    let controller = ControllerProcess::start_with(
        kubeconfig,
        &[
            "--namespace",
            &namespace,
            "--lease-namespace",
            &namespace,
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        &[],
    )?;
    let client = client_for(kubeconfig).await?;
    // A first run of one step, so the controller is up before the clock starts.
    run_coxswain_chains(&client, &namespace, 1, 1, Duration::from_secs(120)).await?;
    let before = apimetrics::scrape(&client).await?;
    let report =
        run_coxswain_chains(&client, &namespace, args.workflows, args.steps, args.bound).await?;
    let after = apimetrics::scrape(&client).await?;
    print_batch(&report, controller.pid(), &before, &after);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let kubeconfig = tokio::task::spawn_blocking(kubeconfig).await??;
    let namespace = format!("argo-bench-{}", std::process::id());
    let extra: Vec<&str> = args.extra.iter().map(String::as_str).collect();
    let mut argo = Argo::start_with(&kubeconfig, &namespace, &extra).await?;
    let client = client_for(&kubeconfig).await?;
    eprintln!("argo started (log {}); submitting", argo.log().display());

    let before = apimetrics::scrape(&client).await?;
    let report = argo
        .run_chains_of(args.kind, args.workflows, args.steps, args.bound)
        .await?;
    let after = apimetrics::scrape(&client).await?;
    println!(
        "argo controller flags: {}",
        if extra.is_empty() {
            "defaults".to_string()
        } else {
            extra.join(" ")
        }
    );
    print_batch(&report, argo.pid(), &before, &after);
    argo.kill();
    if args.coxswain {
        coxswain_batch(&kubeconfig, &args).await?;
    }
    Ok(())
}
