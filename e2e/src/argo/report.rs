//! What a batch of chains measured: throughput from the watch (when each
//! workflow was seen Succeeded) and step-to-step latency from the node
//! times Argo records in the workflow's status.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::{Error, Result};

/// The figures of one batch of chain workflows, all of which succeeded.
///
/// Step-to-step latency comes from Argo's node `startedAt`/`finishedAt`,
/// which are RFC 3339 times with **1-second resolution**: a gap shorter than
/// a second reads as 0 s or 1 s depending on where the second boundary falls,
/// so p50/p99 are whole seconds and only bound the true figure.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainReport {
    /// Who ran the batch: `argo v4.0.5` or `coxswain`.
    pub engine: String,
    /// Workflows (Argo) or Runs (Coxswain) that succeeded: all that were submitted.
    pub workflows: usize,
    /// Steps per workflow, as submitted.
    pub steps_per_workflow: usize,
    /// The node type of a step (`Suspend`, `Pod`).
    pub node_type: String,
    /// Step nodes (of the chain's node type) that succeeded, over all workflows.
    pub steps: usize,
    /// From the first submission until the last workflow was seen Succeeded.
    pub elapsed: Duration,
    /// `workflows / elapsed`.
    pub workflows_per_second: f64,
    /// `steps / elapsed`.
    pub steps_per_second: f64,
    /// Median of the gaps between a step's `finishedAt` and the next step's
    /// `startedAt` (1-second resolution).
    pub step_latency_p50: Duration,
    /// 99th percentile of the same gaps (1-second resolution).
    pub step_latency_p99: Duration,
    /// How many gaps were measured: `workflows × (steps − 1)`.
    pub latency_samples: usize,
}

impl ChainReport {
    /// Measures a batch run by `engine` (e.g. `argo v4.0.5`, `coxswain`)
    /// from each chain's succeeded steps and step-to-step gaps (see
    /// [`step_gaps`], [`run_step_gaps`]) and the wall time it took.
    pub fn new(
        engine: String,
        node_type: &str,
        steps_per_workflow: usize,
        elapsed: Duration,
        chains: Vec<(usize, Vec<Duration>)>,
    ) -> Self {
        let workflows = chains.len();
        let steps = chains.iter().map(|(n, _)| n).sum();
        let mut gaps: Vec<Duration> = chains.into_iter().flat_map(|(_, g)| g).collect();
        gaps.sort();
        let seconds = elapsed.as_secs_f64().max(f64::EPSILON);
        Self {
            engine,
            workflows,
            steps_per_workflow,
            node_type: node_type.to_string(),
            steps,
            elapsed,
            workflows_per_second: workflows as f64 / seconds,
            steps_per_second: steps as f64 / seconds,
            step_latency_p50: percentile(&gaps, 50.0),
            step_latency_p99: percentile(&gaps, 99.0),
            latency_samples: gaps.len(),
        }
    }
}

impl fmt::Display for ChainReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} workflows x {} {} steps ({} steps succeeded) in {:.2} s: \
             {:.1} workflows/s, {:.1} steps/s; step-to-step p50 {} ms, p99 {} ms \
             over {} gaps{}",
            self.engine,
            self.workflows,
            self.steps_per_workflow,
            self.node_type,
            self.steps,
            self.elapsed.as_secs_f64(),
            self.workflows_per_second,
            self.steps_per_second,
            self.step_latency_p50.as_millis(),
            self.step_latency_p99.as_millis(),
            self.latency_samples,
            if self.engine.starts_with("argo") {
                " (Argo's node times have 1-second resolution)"
            } else {
                ""
            },
        )
    }
}

/// From one workflow's status: how many step nodes of `node_type` (e.g.
/// `Suspend`, `Pod`) succeeded, and the gaps between consecutive ones (each step's
/// `startedAt` minus the previous step's `finishedAt`, never below zero),
/// in the order the steps started.
pub fn step_gaps(status: &Value, node_type: &str) -> Result<(usize, Vec<Duration>)> {
    let mut nodes = Vec::new();
    for (id, node) in status["nodes"].as_object().into_iter().flatten() {
        if node["type"] != node_type || node["phase"] != "Succeeded" {
            continue;
        }
        nodes.push((time(node, id, "startedAt")?, time(node, id, "finishedAt")?));
    }
    Ok((nodes.len(), gaps_between(nodes)))
}

/// As [`step_gaps`], for a Coxswain Run's status: its `completed` steps
/// (`status.steps.KEY.startedAt`/`finishedAt`, sub-second times).
pub fn run_step_gaps(status: &Value) -> Result<(usize, Vec<Duration>)> {
    let mut steps = Vec::new();
    for (key, step) in status["steps"].as_object().into_iter().flatten() {
        if step["status"] != "completed" {
            continue;
        }
        steps.push((
            time(step, key, "startedAt")?,
            time(step, key, "finishedAt")?,
        ));
    }
    Ok((steps.len(), gaps_between(steps)))
}

/// The gap before each step but the first, in the order they started.
fn gaps_between(mut times: Vec<(jiff::Timestamp, jiff::Timestamp)>) -> Vec<Duration> {
    times.sort();
    times
        .windows(2)
        .map(|w| Duration::try_from(w[1].0.duration_since(w[0].1)).unwrap_or(Duration::ZERO))
        .collect()
}

fn time(node: &Value, id: &str, field: &str) -> Result<jiff::Timestamp> {
    let text = node[field].as_str().ok_or_else(|| {
        Error::Argo(format!(
            "workflow node {id} has no {field} (status.nodes.{id}.{field})"
        ))
    })?;
    text.parse().map_err(|e| {
        Error::Argo(format!(
            "workflow node {id}: {field} {text:?} is not an RFC 3339 time: {e}"
        ))
    })
}

/// The `p`th percentile (nearest rank) of `sorted`; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(kind: &str, phase: &str, started: &str, finished: &str) -> Value {
        json!({"type": kind, "phase": phase, "startedAt": started, "finishedAt": finished})
    }

    #[test]
    fn gaps_follow_the_order_steps_started_and_skip_other_nodes() {
        let status = json!({"phase": "Succeeded", "nodes": {
            "w": node("Steps", "Succeeded", "2026-11-30T10:00:00Z", "2026-11-30T10:00:09Z"),
            "g1": node("StepGroup", "Succeeded", "2026-11-30T10:00:00Z", "2026-11-30T10:00:02Z"),
            "c": node("Suspend", "Succeeded", "2026-11-30T10:00:05Z", "2026-11-30T10:00:05Z"),
            "a": node("Suspend", "Succeeded", "2026-11-30T10:00:00Z", "2026-11-30T10:00:01Z"),
            "b": node("Suspend", "Succeeded", "2026-11-30T10:00:03Z", "2026-11-30T10:00:04Z"),
        }});
        let (steps, gaps) = step_gaps(&status, "Suspend").unwrap();
        assert_eq!(steps, 3);
        assert_eq!(gaps, [Duration::from_secs(2), Duration::from_secs(1)]);
    }

    #[test]
    fn a_node_without_times_is_an_error_naming_it() {
        let status = json!({"nodes": {"n1": {"type": "Suspend", "phase": "Succeeded", "startedAt": "2026-11-30T10:00:00Z"}}});
        let err = step_gaps(&status, "Suspend").unwrap_err().to_string();
        assert!(err.contains("n1") && err.contains("finishedAt"), "{err}");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 50.0), ms(50));
        assert_eq!(percentile(&sorted, 99.0), ms(99));
        assert_eq!(percentile(&[ms(7)], 99.0), ms(7));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn report_counts_workflows_steps_and_rates() {
        let status = json!({"nodes": {
            "a": node("Suspend", "Succeeded", "2026-11-30T10:00:00Z", "2026-11-30T10:00:00Z"),
            "b": node("Suspend", "Succeeded", "2026-11-30T10:00:01Z", "2026-11-30T10:00:01Z"),
        }});
        let one = step_gaps(&status, "Suspend").unwrap();
        let report = ChainReport::new(
            "argo".into(),
            "Suspend",
            2,
            Duration::from_secs(2),
            vec![one.clone(), one],
        );
        assert_eq!(
            (report.workflows, report.steps, report.latency_samples),
            (2, 4, 2),
            "{report}"
        );
        assert_eq!(report.workflows_per_second, 1.0);
        assert_eq!(report.steps_per_second, 2.0);
        assert_eq!(report.step_latency_p50, Duration::from_secs(1));
    }

    #[test]
    fn a_runs_completed_steps_give_sub_second_gaps() {
        let step = |status: &str, started: &str, finished: &str| json!({"status": status, "startedAt": started, "finishedAt": finished});
        let status = json!({"phase": "Succeeded", "steps": {
            "s2": step("completed", "2026-11-30T10:00:00.030Z", "2026-11-30T10:00:00.031Z"),
            "s1": step("completed", "2026-11-30T10:00:00.010Z", "2026-11-30T10:00:00.012Z"),
            "s3": step("skipped", "2026-11-30T10:00:00.050Z", "2026-11-30T10:00:00.050Z"),
        }});
        let (steps, gaps) = run_step_gaps(&status).unwrap();
        assert_eq!(steps, 2);
        assert_eq!(gaps, [Duration::from_millis(18)]);
    }
}
