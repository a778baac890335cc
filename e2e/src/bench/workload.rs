//! One workload: a Flow, a controller for its namespace, N Runs created at
//! once, timed from the first create until the last Run ended, with the
//! API server's write counters read around it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::DynamicObject;
use serde_json::Value;

use super::objects::{self, create_flow, create_runs, is_over, wait_runs};
use crate::apimetrics::{self, WriteCounts};
use crate::{ControllerProcess, Result, TestNamespace};

/// What a workload is.
pub struct Spec<'a> {
    /// Its name in the report and in the Runs' names.
    pub name: &'a str,
    /// The Flow's `spec.steps`.
    pub steps: Value,
    /// How many Runs.
    pub runs: usize,
    /// Flags for `coxswain controller` after the namespace's own.
    pub controller_args: &'a [String],
    /// The longest it may take.
    pub bound: Duration,
}

/// What a workload measured.
pub struct Measured {
    /// Runs created.
    pub runs: usize,
    /// Runs that ended `Succeeded`.
    pub succeeded: usize,
    /// From the first create until the last Run ended, in seconds.
    pub seconds: f64,
    /// Writes the API server counted meanwhile (every client's).
    pub writes: WriteCounts,
    /// The Runs as last seen.
    pub last: HashMap<String, DynamicObject>,
}

/// A namespace with the workload's Flow and a controller for it, warmed up
/// by one Run that ran to its end, so the figures leave out start-up.
pub struct Stage {
    /// The namespace (deleted when dropped).
    pub ns: TestNamespace,
    /// The controller (killed when dropped).
    pub controller: ControllerProcess,
    client: Client,
}

impl Stage {
    /// Makes the namespace, the Flow (named after the workload) and the
    /// controller; with `warm_up`, runs one Run to its end first.
    pub async fn new(client: &Client, spec: &Spec<'_>, warm_up: bool) -> Result<Self> {
        let ns = TestNamespace::new().await?;
        create_flow(client, ns.name(), spec.name, spec.steps.clone()).await?;
        let args: Vec<&str> = spec.controller_args.iter().map(String::as_str).collect();
        let controller = ControllerProcess::for_namespace(ns.name(), &args).await?;
        let stage = Stage {
            ns,
            controller,
            client: client.clone(),
        };
        if warm_up {
            create_runs(client, stage.ns.name(), spec.name, "warm", 1).await?;
            wait_runs(client, stage.ns.name(), "warm", 1, is_over, spec.bound).await?;
        }
        Ok(stage)
    }

    /// Waits until the controller reconciles Runs (its log says so).
    pub async fn started(&self, bound: Duration) -> Result<()> {
        crate::wait_for("the controller to start", bound, || async {
            Ok(self
                .controller
                .log_text()
                .contains("reconciling Runs")
                .then_some(()))
        })
        .await
    }

    /// Kills the controller and hands back the namespace, to be deleted
    /// when the benchmark is over.
    pub fn stop(mut self) -> TestNamespace {
        self.controller.kill();
        self.ns
    }

    /// Creates the workload's Runs and waits until `count` of them are in
    /// a phase `done` accepts.
    pub async fn measure(
        &self,
        spec: &Spec<'_>,
        prefix: &str,
        done: impl Fn(&str) -> bool,
    ) -> Result<Measured> {
        let name = self.ns.name();
        let before = apimetrics::scrape(&self.client).await?;
        let started = Instant::now();
        create_runs(&self.client, name, spec.name, prefix, spec.runs).await?;
        let (ended, runs) = wait_runs(
            &self.client,
            name,
            prefix,
            spec.runs,
            |phase| done(phase),
            spec.bound,
        )
        .await
        .map_err(|e| {
            crate::Error::Bench(format!(
                "{e}; controller log: {}",
                self.controller.log().display()
            ))
        })?;
        let after = apimetrics::scrape(&self.client).await?;
        let last = runs;
        Ok(Measured {
            runs: spec.runs,
            succeeded: last
                .values()
                .filter(|r| objects::phase(r) == "Succeeded")
                .count(),
            seconds: ended.duration_since(started).as_secs_f64(),
            writes: after.since(&before),
            last,
        })
    }
}

/// The resident memory of process `pid` in MiB (`VmRSS` in /proc).
pub fn rss_mib(pid: u32) -> Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| crate::Error::Bench(format!("no VmRSS in /proc/{pid}/status")))?;
    Ok(kib / 1024.0)
}
