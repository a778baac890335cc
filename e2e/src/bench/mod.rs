//! The benchmark (`cargo run --release -p coxswain-e2e --bin bench`): what
//! `coxswain controller` gets done on `e2e/cluster`, and how close that is
//! to what the API server itself can take on the same machine.
//!
//! In one process it starts the cluster (as the tests do), then measures:
//! 1. a plain status-patch loop (the machine's limit, [`plain`]);
//! 2. N Runs of M in-controller steps (http calls to a local server,
//!    alternating with conditions that read them): steps and runs per
//!    second, API writes per step, step-to-step latency;
//! 3. N Runs of M condition steps only (no call, no pod: what Argo's
//!    pod-less `suspend` steps compare with);
//! 4. Runs of script steps, each a Job whose pod the stand-in node starts;
//! 5. one script step's pod at a time on the node (created → started →
//!    Succeeded): the floor a script step stands on;
//! 6. the controller's memory with many active Runs (each waiting on a
//!    person, so no process or call is held open per Run);
//! 7. Argo Workflows' workflow-controller on the same API server, running
//!    the same N × M as pod-less `suspend` chains: v4.0.5 as released, then
//!    v4.0.5 without its one-second sleep after every workflow update (as
//!    v4.1), each in a namespace of its own and each when `e2e/argo/build`
//!    has built it.
//!
//! and prints a Markdown table ([`report`]).

pub mod objects;
pub mod plain;
pub mod pods;
pub mod report;
pub mod server;
pub mod shards;
pub mod workload;

use std::time::Duration;

use serde_json::{Value, json};

use crate::Result;
use objects::is_over;
use report::{Conditions, Figures, InController, Jobs, Memory};
use workload::{Spec, Stage, rss_mib};

/// What to run, and how much of it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Runs of in-controller steps.
    pub runs: usize,
    /// Steps in each of those runs (http calls and conditions alternating).
    pub steps: usize,
    /// Runs of script steps.
    pub job_runs: usize,
    /// Script steps in each of those runs.
    pub job_steps: usize,
    /// One-step Runs timed one at a time for the pod figures.
    pub pod_runs: usize,
    /// Runs kept active for the memory figure.
    pub active: usize,
    /// How long the plain patch loop runs.
    pub plain_for: Duration,
    /// Workers of the plain patch loop.
    pub plain_workers: usize,
    /// The longest one workload may take.
    pub bound: Duration,
    /// Extra flags for every `coxswain controller`.
    pub controller_args: Vec<String>,
    /// Extra flags for every Argo workflow-controller (none: its defaults).
    pub argo_args: Vec<String>,
    /// Replica counts of the `shards` part.
    pub replicas: Vec<usize>,
    /// Agent steps per run in the `shards` part.
    pub agent_steps: usize,
    /// Which parts to run (all when empty): `plain`, `http`, `conditions`,
    /// `jobs`, `pods`, `memory`, `shards`, `argo` (skipped with a note when Argo is not built).
    pub only: Vec<String>,
}

impl Options {
    fn wants(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }
}

/// Runs every wanted part and returns the figures.
pub async fn run(options: &Options) -> Result<Figures> {
    let client = crate::client().await?;
    crate::Kubectl::new().await?.install_crds().await?;
    if crate::node() == crate::Node::Real {
        // `E2E_NODE=real`: script steps run the built images there.
        eprintln!("the real node: building and loading the images");
        tokio::task::spawn_blocking(crate::real_node_images)
            .await
            .map_err(|e| crate::Error::Bench(e.to_string()))??;
    }
    let mut figures = Figures::default();
    // Namespaces are deleted only at the end: deleting one (the namespace
    // controller removing every object in it) would count as writes of
    // the next workload.
    let mut kept = Vec::new();
    if options.wants("plain") {
        eprintln!(
            "plain status-patch loop: {} workers for {:?}",
            options.plain_workers, options.plain_for
        );
        let ns = crate::TestNamespace::new().await?;
        figures.plain = Some(
            plain::patch_loop(&client, ns.name(), options.plain_workers, options.plain_for).await?,
        );
        kept.push(ns);
    }
    if options.wants("http") {
        let (measured, ns) = in_controller(&client, options).await?;
        figures.in_controller = Some(measured);
        kept.push(ns);
    }
    if options.wants("conditions") {
        let (measured, ns) = conditions(&client, options).await?;
        figures.conditions = Some(measured);
        kept.push(ns);
    }
    if options.wants("jobs") {
        let (measured, ns) = jobs(&client, options).await?;
        figures.jobs = Some(measured);
        kept.push(ns);
    }
    if options.wants("pods") {
        eprintln!("pods: {} one-step runs, one at a time", options.pod_runs);
        let (measured, ns) = pods::measure(&client, options.pod_runs, options.bound).await?;
        figures.pods = Some(measured);
        kept.push(ns);
    }
    if options.wants("memory") {
        let (measured, ns) = memory(&client, options).await?;
        figures.memory = Some(measured);
        kept.push(ns);
    }
    if options.wants("shards") {
        let (points, namespaces) = shards::measure(&client, options).await?;
        figures.shards = points;
        kept.extend(namespaces);
    }
    if options.wants("argo") {
        for (peer, binary) in ARGO_PEERS {
            match binary() {
                Ok(bin) => {
                    let (measured, ns) = argo(&client, options, peer, &bin).await?;
                    figures.argo.push(measured);
                    kept.push(ns);
                }
                Err(e) => eprintln!("argo: {peer} skipped ({e})"),
            }
        }
    }
    eprintln!("deleting the benchmark's namespaces");
    drop(kept);
    Ok(figures)
}

/// Where a build of Argo's workflow-controller is, if it is built.
type FindArgo = fn() -> Result<std::path::PathBuf>;

/// The Argo builds the `argo` part runs, one after the other: the release,
/// and the same without the one-second sleep after every workflow update
/// that v4.1 removed (argo-workflows PR #15627; `e2e/argo/nosleep.patch`).
const ARGO_PEERS: [(&str, FindArgo); 2] = [
    ("Argo Workflows v4.0.5", crate::argo::binary),
    (
        "Argo Workflows v4.0.5 without the 1 s sleep after each update (as v4.1, PR #15627)",
        crate::argo::nosleep_binary,
    ),
];

/// Argo's workflow-controller `bin` (its default settings and
/// `options.argo_args`) running `runs` pod-less chains of `steps` suspend
/// steps in a namespace of its own, with its API writes counted as ours.
async fn argo(
    client: &kube::Client,
    options: &Options,
    peer: &'static str,
    bin: &std::path::Path,
) -> Result<(report::ArgoFigures, crate::TestNamespace)> {
    eprintln!(
        "argo: {peer}: {} workflows x {} suspend steps",
        options.runs, options.steps
    );
    let ns = crate::TestNamespace::new().await?;
    let extra: Vec<&str> = options.argo_args.iter().map(String::as_str).collect();
    let argo = crate::Argo::start_binary(bin, &crate::kubeconfig()?, ns.name(), &extra).await?;
    let before = crate::apimetrics::scrape(client).await?;
    let chains = argo
        .run_chains(options.runs, options.steps, options.bound)
        .await?;
    let after = workload::settled_writes(client, &before, options.bound).await?;
    drop(argo);
    let figures = report::ArgoFigures {
        peer,
        flags: options.argo_args.join(" "),
        chains,
        writes: after.since(&before),
    };
    Ok((figures, ns))
}

/// `steps` condition steps that are always true: no call, no pod.
pub fn condition_steps(steps: usize) -> Value {
    (0..steps)
        .map(|i| json!({"key": format!("c{i:03}"), "condition": {"when": "true"}}))
        .collect()
}

/// `steps` steps: an http call to `addr`, then a condition reading it, …
pub fn http_steps(addr: std::net::SocketAddr, steps: usize) -> Value {
    let list: Vec<Value> = (0..steps)
        .map(|i| {
            if i % 2 == 0 {
                json!({"key": format!("s{i:03}"), "http": {"url": format!("http://{addr}/step")}})
            } else {
                json!({"key": format!("s{i:03}"), "condition": {"when": format!("$steps.s{:03}.output.ok", i - 1)}})
            }
        })
        .collect();
    Value::Array(list)
}

async fn in_controller(
    client: &kube::Client,
    options: &Options,
) -> Result<(InController, crate::TestNamespace)> {
    let (addr, calls) = server::start().await?;
    let spec = Spec {
        name: "calls",
        steps: http_steps(addr, options.steps),
        runs: options.runs,
        controller_args: &options.controller_args,
        bound: options.bound,
    };
    eprintln!(
        "in-controller: {} runs x {} steps",
        options.runs, options.steps
    );
    let stage = Stage::new(client, &spec, true).await?;
    calls.clear();
    let measured = stage.measure(&spec, "run", is_over).await?;
    let rss = rss_mib(stage.controller.pid()).ok();
    let figures = InController {
        steps: options.steps,
        http_steps: options.steps.div_ceil(2),
        calls: calls.count(),
        gaps: calls.gaps(),
        rss_after: rss,
        measured,
    };
    Ok((figures, stage.stop()))
}

async fn conditions(
    client: &kube::Client,
    options: &Options,
) -> Result<(Conditions, crate::TestNamespace)> {
    let spec = Spec {
        name: "conditions",
        steps: condition_steps(options.steps),
        runs: options.runs,
        controller_args: &options.controller_args,
        bound: options.bound,
    };
    eprintln!(
        "conditions: {} runs x {} steps",
        options.runs, options.steps
    );
    let stage = Stage::new(client, &spec, true).await?;
    let measured = stage.measure(&spec, "run", is_over).await?;
    let figures = Conditions {
        steps: options.steps,
        measured,
    };
    Ok((figures, stage.stop()))
}

async fn jobs(client: &kube::Client, options: &Options) -> Result<(Jobs, crate::TestNamespace)> {
    let steps: Vec<Value> = (0..options.job_steps)
        .map(|i| json!({"key": format!("j{i:02}"), "script": {"source": "echo done"}}))
        .collect();
    let spec = Spec {
        name: "scripts",
        steps: Value::Array(steps),
        runs: options.job_runs,
        controller_args: &options.controller_args,
        bound: options.bound,
    };
    eprintln!(
        "jobs: {} runs x {} script steps",
        options.job_runs, options.job_steps
    );
    let stage = Stage::new(client, &spec, true).await?;
    let measured = stage.measure(&spec, "run", is_over).await?;
    let figures = Jobs {
        steps: options.job_steps,
        measured,
    };
    Ok((figures, stage.stop()))
}

async fn memory(
    client: &kube::Client,
    options: &Options,
) -> Result<(Memory, crate::TestNamespace)> {
    let spec = Spec {
        name: "waiting",
        steps: json!([{"key": "ask", "approval": {"decisions": ["approve", "reject"]}}]),
        runs: options.active,
        controller_args: &options.controller_args,
        bound: options.bound,
    };
    eprintln!("memory: {} runs waiting on a person", options.active);
    let stage = Stage::new(client, &spec, false).await?;
    stage.started(options.bound).await?;
    let idle = rss_mib(stage.controller.pid())?;
    let measured = stage.measure(&spec, "run", |p| p == "Waiting").await?;
    // Let the reconciles that follow the last write settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let active = rss_mib(stage.controller.pid())?;
    let figures = Memory {
        runs: options.active,
        idle_mib: idle,
        active_mib: active,
        seconds: measured.seconds,
    };
    Ok((figures, stage.stop()))
}
