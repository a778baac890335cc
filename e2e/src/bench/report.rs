//! The benchmark's figures and the Markdown table they print as, with the
//! target each is held to beside it.

use std::fmt::Write;

use super::plain::PlainFigures;
use super::workload::Measured;

/// Everything one benchmark run measured (a part not run is `None`).
#[derive(Default)]
pub struct Figures {
    /// The plain status-patch loop.
    pub plain: Option<PlainFigures>,
    /// Runs of in-controller steps.
    pub in_controller: Option<InController>,
    /// Runs of condition steps only.
    pub conditions: Option<Conditions>,
    /// Runs of script steps as Jobs.
    pub jobs: Option<Jobs>,
    /// One script step's pod at a time.
    pub pods: Option<super::pods::PodTimes>,
    /// Memory with many active Runs.
    pub memory: Option<Memory>,
    /// Argo Workflows on the same chains as `conditions`, one entry per
    /// build run (as released; without the post-update sleep).
    pub argo: Vec<ArgoFigures>,
    /// The same Runs over 1, 2, 4 sharded replicas.
    pub shards: Vec<super::shards::ShardPoint>,
}

/// Argo Workflows running pod-less chains, and what it wrote.
pub struct ArgoFigures {
    /// Which build ran them, e.g. `Argo Workflows v4.0.5`.
    pub peer: &'static str,
    /// The flags it ran with beyond its defaults (empty: none).
    pub flags: String,
    /// Its runs, steps and gaps (1-second resolution).
    pub chains: crate::argo::ChainReport,
    /// Every API write from the first submission until they settled.
    pub writes: crate::apimetrics::WriteCounts,
}

/// Runs of in-controller steps.
pub struct InController {
    /// Steps per run.
    pub steps: usize,
    /// Of which http calls.
    pub http_steps: usize,
    /// Calls the local server saw.
    pub calls: usize,
    /// Seconds between one call's answer and the run's next call.
    pub gaps: Vec<f64>,
    /// The controller's RSS after the workload, in MiB.
    pub rss_after: Option<f64>,
    /// Time, writes, outcomes.
    pub measured: Measured,
}

/// Runs of condition steps only (no call, no pod).
pub struct Conditions {
    /// Steps per run.
    pub steps: usize,
    /// Time, writes, outcomes.
    pub measured: Measured,
}

/// Runs of script steps.
pub struct Jobs {
    /// Script steps per run.
    pub steps: usize,
    /// Time, writes, outcomes.
    pub measured: Measured,
}

/// Memory with many active Runs.
pub struct Memory {
    /// Runs waiting on a person.
    pub runs: usize,
    /// The controller's RSS before the Runs were created, in MiB.
    pub idle_mib: f64,
    /// Its RSS with every Run waiting, in MiB.
    pub active_mib: f64,
    /// How long it took until all were waiting, in seconds.
    pub seconds: f64,
}

/// The `q`-quantile (0..=1) of `values`, nearest rank; `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

fn row(out: &mut String, what: &str, figure: &str, target: &str) {
    let _ = writeln!(out, "| {what} | {figure} | {target} |");
}

impl Figures {
    /// The table, with a line of writes by resource under each workload.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("| what | figure | target |\n| --- | --- | --- |\n");
        let plain_rate = self.plain.as_ref().map(PlainFigures::rate);
        if let Some(p) = &self.plain {
            row(
                &mut out,
                &format!(
                    "plain status-patch loop ({} workers, merge patch on runs/status)",
                    p.workers
                ),
                &format!(
                    "**{:.0} patches/s** ({} in {:.1} s, {} errors); kube-apiserver CPU {} per patch",
                    p.rate(),
                    p.patches,
                    p.seconds,
                    p.errors,
                    p.apiserver_cpu.map_or("-".to_string(), |c| format!(
                        "{:.2} ms",
                        c * 1000.0 / p.patches.max(1) as f64
                    ))
                ),
                "the machine's limit",
            );
        }
        if let Some(c) = &self.in_controller {
            self.in_controller_rows(&mut out, c, plain_rate);
        }
        if let Some(c) = &self.conditions {
            let m = &c.measured;
            let steps = (m.runs * c.steps) as f64;
            row(
                &mut out,
                &format!("condition steps only: {} runs × {} steps", m.runs, c.steps),
                &format!(
                    "{:.1} s, {}/{} succeeded; **{:.0} steps/s**, **{:.1} runs/s**",
                    m.seconds,
                    m.succeeded,
                    m.runs,
                    steps / m.seconds,
                    m.runs as f64 / m.seconds
                ),
                "",
            );
            row(
                &mut out,
                "— API writes per run",
                &format!(
                    "**{:.2}** ({:.2} run status writes): {}",
                    m.writes.total() as f64 / m.runs as f64,
                    m.writes.resource("runs", "status") as f64 / m.runs as f64,
                    breakdown(m, m.runs as f64)
                ),
                "",
            );
            row(
                &mut out,
                "— CPU per run: controller, kube-apiserver",
                &cpu(m, m.runs as f64),
                "",
            );
        }
        if let Some(j) = &self.jobs {
            let m = &j.measured;
            let steps = (m.runs * j.steps) as f64;
            row(
                &mut out,
                &format!("script steps as Jobs: {} runs × {} steps", m.runs, j.steps),
                &format!(
                    "{:.1} s, {}/{} succeeded; **{:.2} steps/s**, {:.2} runs/s; {:.1} s per step within a run",
                    m.seconds,
                    m.succeeded,
                    m.runs,
                    steps / m.seconds,
                    m.runs as f64 / m.seconds,
                    m.seconds / j.steps as f64
                ),
                "",
            );
            row(
                &mut out,
                "— run status writes per script step transition (two a step: started, ended)",
                &format!(
                    "**{:.2}** ({:.2} per step)",
                    m.writes.resource("runs", "status") as f64 / (2.0 * steps),
                    m.writes.resource("runs", "status") as f64 / steps
                ),
                &format!(
                    "≤ 1: {}",
                    verdict(m.writes.resource("runs", "status") as f64 <= 2.0 * steps)
                ),
            );
            row(
                &mut out,
                "— CPU per script step: controller, kube-apiserver",
                &cpu(m, steps),
                "",
            );
            row(
                &mut out,
                "— all API writes per script step (every client: ours, job controller, node)",
                &format!(
                    "{:.1}: {}",
                    m.writes.total() as f64 / steps,
                    breakdown(m, steps)
                ),
                "",
            );
        }
        if let Some(p) = &self.pods {
            row(
                &mut out,
                &format!(
                    "one script step's pod on the {} node, {} one at a time: created → step container started",
                    p.node,
                    p.started.len()
                ),
                &super::pods::PodTimes::summary(&p.started),
                "",
            );
            row(
                &mut out,
                "— created → pod Succeeded",
                &super::pods::PodTimes::summary(&p.succeeded),
                "",
            );
        }
        if let Some(m) = &self.memory {
            row(
                &mut out,
                &format!(
                    "controller memory (RSS) with {} runs waiting on a person",
                    m.runs
                ),
                &format!(
                    "**{:.0} MiB** (idle before: {:.0} MiB; all waiting after {:.1} s)",
                    m.active_mib, m.idle_mib, m.seconds
                ),
                &format!("≤ 150 MiB: {}", verdict(m.active_mib <= 150.0)),
            );
        }
        for a in &self.argo {
            self.argo_rows(&mut out, a);
        }
        self.shard_rows(&mut out);
        out
    }

    fn shard_rows(&self, out: &mut String) {
        for p in &self.shards {
            let m = &p.measured;
            let rate = m.runs as f64 / m.seconds;
            let one = self
                .shards
                .iter()
                .find(|q| q.load == p.load && q.replicas == 1)
                .map(|q| q.measured.runs as f64 / q.measured.seconds);
            row(
                out,
                &format!(
                    "sharded, {} replica(s): {} runs × {} {} steps",
                    p.replicas, m.runs, p.steps, p.load
                ),
                &format!(
                    "{:.1} s, {}/{} succeeded; **{:.1} runs/s**{}; {:.2} API writes per run; CPU per run: {}",
                    m.seconds,
                    m.succeeded,
                    m.runs,
                    rate,
                    one.map_or(String::new(), |one| format!(
                        " ({:.2}× one replica)",
                        rate / one
                    )),
                    m.writes.total() as f64 / m.runs.max(1) as f64,
                    cpu(m, m.runs as f64)
                ),
                "",
            );
        }
    }

    fn argo_rows(&self, out: &mut String, a: &ArgoFigures) {
        let c = &a.chains;
        let runs = c.workflows.max(1) as f64;
        let ours = self.conditions.as_ref().map(|k| {
            let m = &k.measured;
            (
                m.runs as f64 / m.seconds,
                m.writes.total() as f64 / m.runs.max(1) as f64,
            )
        });
        row(
            out,
            &format!(
                "{}, {}: {} workflows × {} `suspend: 0` steps",
                a.peer,
                if a.flags.is_empty() {
                    "default settings".to_string()
                } else {
                    format!("`{}`", a.flags)
                },
                c.workflows,
                c.steps_per_workflow
            ),
            &format!(
                "{:.1} s; **{:.0} steps/s**, **{:.1} workflows/s**; step-to-step p50 {:.0} s, p99 {:.0} s (1-second resolution)",
                c.elapsed.as_secs_f64(),
                c.steps_per_second,
                c.workflows_per_second,
                c.step_latency_p50.as_secs_f64(),
                c.step_latency_p99.as_secs_f64()
            ),
            "",
        );
        let writes = a.writes.total() as f64 / runs;
        row(
            out,
            "— API writes per workflow",
            &format!(
                "**{writes:.2}**: {}",
                a.writes
                    .by_resource()
                    .iter()
                    .map(|(r, n)| format!("{r} {:.2}", *n as f64 / runs))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "",
        );
        if let Some((our_rate, our_writes)) = ours {
            let ratio = our_rate / c.workflows_per_second.max(f64::MIN_POSITIVE);
            row(
                out,
                "— Coxswain condition runs/s ÷ this Argo's workflows/s (same N × M, same run)",
                &format!("**{ratio:.1}×**; writes per run {our_writes:.2} vs {writes:.2}"),
                &format!(
                    "≥ 5× and no more writes: {}",
                    verdict(ratio >= 5.0 && our_writes <= writes)
                ),
            );
        }
    }

    fn in_controller_rows(&self, out: &mut String, c: &InController, plain: Option<f64>) {
        let m = &c.measured;
        let steps = (m.runs * c.steps) as f64;
        let rate = steps / m.seconds;
        row(
            out,
            &format!(
                "in-controller steps: {} runs × {} steps ({} http calls to a local server, {} conditions)",
                m.runs,
                c.steps,
                c.http_steps,
                c.steps - c.http_steps
            ),
            &format!(
                "{:.1} s, {}/{} succeeded, {} calls; **{:.0} steps/s**, **{:.1} runs/s**",
                m.seconds,
                m.succeeded,
                m.runs,
                c.calls,
                rate,
                m.runs as f64 / m.seconds
            ),
            "",
        );
        let status = m.writes.resource("runs", "status") as f64;
        row(
            out,
            "— run status writes per step (each step moves at least once)",
            &format!(
                "**{:.2}** ({:.2} per http step)",
                status / steps,
                status / (m.runs * c.http_steps) as f64
            ),
            &format!("≤ 1: {}", verdict(status <= steps)),
        );
        row(
            out,
            "— all API writes per step",
            &format!(
                "{:.2} ({:.1} per run): {}",
                m.writes.total() as f64 / steps,
                m.writes.total() as f64 / m.runs as f64,
                breakdown(m, steps)
            ),
            "",
        );
        if let Some(plain) = plain {
            row(
                out,
                "— steps/s ÷ plain patches/s",
                &format!(
                    "**{:.0}%** (status writes/s ÷ plain: {:.0}%)",
                    100.0 * rate / plain,
                    100.0 * status / m.seconds / plain
                ),
                &format!("≥ 50%: {}", verdict(rate >= plain / 2.0)),
            );
        }
        let ms =
            |q| quantile(&c.gaps, q).map_or("-".to_string(), |s| format!("{:.1} ms", s * 1000.0));
        let p50 = quantile(&c.gaps, 0.5);
        row(
            out,
            "— step-to-step latency (an http answer → the run's next call, a condition between)",
            &format!(
                "p50 **{}**, p99 {} ({} gaps)",
                ms(0.5),
                ms(0.99),
                c.gaps.len()
            ),
            &format!("p50 ≤ 20 ms: {}", verdict(p50.is_some_and(|p| p <= 0.020))),
        );
        row(
            out,
            "— CPU per step: controller, kube-apiserver",
            &cpu(m, steps),
            "",
        );
        let bytes = m
            .last
            .values()
            .next()
            .map(|r| r.data["status"].to_string().len());
        if let Some(bytes) = bytes {
            row(
                out,
                "— a finished Run's status (compact JSON)",
                &format!("{bytes} bytes"),
                "",
            );
        }
        if let Some(rss) = c.rss_after {
            row(out, "— controller RSS after", &format!("{rss:.0} MiB"), "");
        }
    }
}

/// CPU milliseconds per step (or run) of the controller and of the API server.
fn cpu(m: &Measured, steps: f64) -> String {
    let ms =
        |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{:.2} ms", s * 1000.0 / steps));
    format!("{}, {}", ms(m.controller_cpu), ms(m.apiserver_cpu))
}

/// Writes per step (or run) by resource, the largest first.
fn breakdown(m: &Measured, steps: f64) -> String {
    m.writes
        .by_resource()
        .iter()
        .take(8)
        .map(|(r, n)| format!("{r} {:.2}", *n as f64 / steps))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(3.0));
        assert_eq!(quantile(&v, 0.99), Some(5.0));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    fn writes(counts: &[(&str, u64)]) -> crate::apimetrics::WriteCounts {
        let text: String = counts
            .iter()
            .map(|(resource, n)| {
                format!("apiserver_request_total{{resource=\"{resource}\",subresource=\"\",verb=\"POST\"}} {n}\n")
            })
            .collect();
        crate::apimetrics::parse(&text)
    }

    fn argo(peer: &'static str, workflows: usize, seconds: u64, events: u64) -> ArgoFigures {
        let chains = (0..workflows).map(|_| (10, vec![])).collect();
        ArgoFigures {
            peer,
            flags: String::new(),
            chains: crate::argo::ChainReport::new(
                "argo".into(),
                "Suspend",
                10,
                Duration::from_secs(seconds),
                chains,
            ),
            writes: writes(&[("workflows", 2 * workflows as u64), ("events", events)]),
        }
    }

    #[test]
    fn every_argo_build_gets_its_rows_and_its_own_ratio() {
        let figures = Figures {
            conditions: Some(Conditions {
                steps: 10,
                measured: Measured {
                    runs: 100,
                    succeeded: 100,
                    seconds: 2.0,
                    writes: writes(&[("runs", 100), ("events", 100)]),
                    last: Default::default(),
                    controller_cpu: None,
                    apiserver_cpu: None,
                },
            }),
            argo: vec![
                argo("Argo A", 100, 20, 300),
                ArgoFigures {
                    flags: "--qps=1000".into(),
                    ..argo("Argo B", 100, 5, 100)
                },
            ],
            ..Default::default()
        };
        let table = figures.markdown();
        let rows: Vec<&str> = table.lines().collect();
        let at = |peer: &str| {
            rows.iter()
                .position(|r| r.starts_with(&format!("| {peer}: 100 workflows × 10")))
                .unwrap_or_else(|| panic!("no row for {peer} in\n{table}"))
        };
        let (a, b) = (at("Argo A, default settings"), at("Argo B, `--qps=1000`"));
        assert!(a < b, "{table}");
        // Coxswain: 50 runs/s and 2 writes a run; A: 5 workflows/s and 5
        // writes; B: 20 workflows/s and 3 writes.
        assert!(
            rows[a + 1].contains("**5.00**: events 3.00, workflows 2.00"),
            "{table}"
        );
        assert!(
            rows[a + 2].contains("**10.0×**; writes per run 2.00 vs 5.00"),
            "{table}"
        );
        assert!(
            rows[b + 1].contains("**3.00**: workflows 2.00, events 1.00"),
            "{table}"
        );
        assert!(
            rows[b + 2].contains("**2.5×**; writes per run 2.00 vs 3.00"),
            "{table}"
        );
        assert!(
            rows[b + 2].ends_with("≥ 5× and no more writes: **missed** |"),
            "{table}"
        );
    }
}
