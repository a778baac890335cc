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
    /// CPU seconds the controller used meanwhile.
    pub controller_cpu: Option<f64>,
    /// CPU seconds the kube-apiserver used meanwhile.
    pub apiserver_cpu: Option<f64>,
}

/// A namespace with the workload's Flow and a controller for it, warmed up
/// by one Run that ran to its end, so the figures leave out start-up.
pub struct Stage {
    /// The namespace (deleted when dropped).
    pub ns: TestNamespace,
    /// The controller (killed when dropped).
    pub controller: ControllerProcess,
    /// More replicas sharing the Runs with it (`--sharded`), if any.
    pub others: Vec<ControllerProcess>,
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
            others: Vec::new(),
            client: client.clone(),
        };
        if warm_up {
            stage.warm_up(spec).await?;
        }
        Ok(stage)
    }

    /// As [`Stage::new`] with `replicas` controllers sharing the Runs by
    /// bucket (`--sharded`), warmed up once every bucket is held.
    pub async fn sharded(client: &Client, spec: &Spec<'_>, replicas: usize) -> Result<Self> {
        let ns = TestNamespace::new().await?;
        create_flow(client, ns.name(), spec.name, spec.steps.clone()).await?;
        let mut args: Vec<&str> = vec!["--leader-election=true", "--sharded=true"];
        args.extend(spec.controller_args.iter().map(String::as_str));
        let mut all = Vec::new();
        for _ in 0..replicas.max(1) {
            all.push(ControllerProcess::for_namespace(ns.name(), &args).await?);
        }
        let controller = all.remove(0);
        let stage = Stage {
            ns,
            controller,
            others: all,
            client: client.clone(),
        };
        stage.wait_split(spec.bound).await?;
        stage.warm_up(spec).await?;
        Ok(stage)
    }

    /// Waits until the replicas hold every bucket between them, each some.
    async fn wait_split(&self, bound: Duration) -> Result<()> {
        let leases = kube::Api::namespaced(self.client.clone(), self.ns.name());
        let pids = self.pids();
        crate::wait_for("the replicas to split the buckets", bound, || async {
            let map = crate::shards::bucket_map(&leases).await;
            let shares = crate::shards::shares(&map, &pids);
            Ok(shares.filter(|s| s.iter().all(|n| *n > 0)).map(|_| ()))
        })
        .await
    }

    async fn warm_up(&self, spec: &Spec<'_>) -> Result<()> {
        create_runs(&self.client, self.ns.name(), spec.name, "warm", 1).await?;
        wait_runs(&self.client, self.ns.name(), "warm", 1, is_over, spec.bound).await?;
        Ok(())
    }

    /// The process ids of every replica.
    pub fn pids(&self) -> Vec<u32> {
        std::iter::once(&self.controller)
            .chain(&self.others)
            .map(ControllerProcess::pid)
            .collect()
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
        for other in &mut self.others {
            other.kill();
        }
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
        let apiserver = crate::kubeconfig().ok().and_then(|k| apiserver_pid(&k));
        let cpu = |pid: Option<u32>| pid.and_then(|p| cpu_seconds(p).ok());
        let controllers = || {
            self.pids()
                .into_iter()
                .map(|p| cpu(Some(p)))
                .sum::<Option<f64>>()
        };
        let cpu_before = (controllers(), cpu(apiserver));
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
        // Writes that trail the last transition (Events sent in the
        // background, the garbage collector) belong to the workload too.
        let after = settled_writes(&self.client, &before, spec.bound).await?;
        let cpu_after = (controllers(), cpu(apiserver));
        let used = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
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
            controller_cpu: used(cpu_after.0, cpu_before.0),
            apiserver_cpu: used(cpu_after.1, cpu_before.1),
        })
    }
}

/// Scrapes the write counters until two scrapes half a second apart
/// agree (within `bound`), and returns the last (also for the Argo part).
pub async fn settled_writes(
    client: &Client,
    before: &WriteCounts,
    bound: Duration,
) -> Result<WriteCounts> {
    let deadline = Instant::now() + bound;
    let mut last = apimetrics::scrape(client).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = apimetrics::scrape(client).await?;
        // Node and lease heartbeats go on for ever: only the workload's
        // own kinds of writes must stop.
        let busy =
            |c: &WriteCounts| c.since(before).total() - c.since(before).resource("leases", "");
        if busy(&now) == busy(&last) || Instant::now() > deadline {
            return Ok(now);
        }
        last = now;
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

/// CPU seconds (user + system) process `pid` used so far, from
/// /proc/PID/stat (in clock ticks of 1/100 s, Linux's USER_HZ).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    match (tick(11), tick(12)) {
        (Some(user), Some(system)) => Ok((user + system) / 100.0),
        _ => Err(crate::Error::Bench(format!(
            "/proc/{pid}/stat has no CPU times"
        ))),
    }
}

/// The kube-apiserver of the cluster whose kubeconfig is `kubeconfig`:
/// the harness's child whose command line names the kubeconfig's folder.
pub fn apiserver_pid(kubeconfig: &std::path::Path) -> Option<u32> {
    let dir = kubeconfig.parent()?.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(" kube-apiserver ") && cmdline.contains(&dir) {
            return Some(pid);
        }
    }
    None
}
