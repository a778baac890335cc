//! The controller's Prometheus metrics, in one registry served at `/metrics`.
//! The reconcilers call the small typed API below; label values come from the
//! core's enums (or `&'static str`), so no label can grow without bound.

use std::{sync::Arc, time::Duration};

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramTimer, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, Opts, Registry, TextEncoder, exponential_buckets,
};

use coxswain_core::api::{RunPhase, StepKind, StepPhase};

/// Every metric of the controller, registered in one [`Registry`].
pub struct Metrics {
    registry: Registry,
    runs_finished: IntCounterVec,
    steps_finished: IntCounterVec,
    step_seconds: HistogramVec,
    reconcile_seconds: Histogram,
    reconcile_errors: IntCounterVec,
    queue_depth: IntGauge,
    active_runs: IntGauge,
    unreadable_runs: IntGauge,
    in_controller: IntGauge,
    agent_tokens: IntCounterVec,
    status_writes: IntCounter,
    runs_archived: IntCounter,
    runs_retired: IntCounter,
    status_bytes: Histogram,
    leader: IntGauge,
    buckets: IntGauge,
}

/// Times one reconcile; the duration is recorded when it is dropped, so
/// every way out of a reconcile (`?` included) is measured.
#[must_use = "the reconcile is measured until this is dropped"]
pub struct ReconcileTimer(#[allow(dead_code)] HistogramTimer);

/// One agent, http or message attempt running inside the controller; the
/// gauge goes down again when it is dropped, however the task ends.
#[must_use = "the attempt counts as running until this is dropped"]
pub struct RunningAttempt(IntGauge);

impl Drop for RunningAttempt {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Buckets of one metric: `count` steps from `start`, each `factor` times the last.
fn buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    // The arguments are constants below, all positive with factor > 1.
    exponential_buckets(start, factor, count).expect("constant bucket layout is valid")
}

/// Registers `metric` in `registry` and hands it back.
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> M {
    // Each name below is registered once into a registry made for it.
    registry
        .register(Box::new(metric.clone()))
        .expect("each metric is registered once under a valid name");
    metric
}

impl Metrics {
    /// A fresh registry holding every metric at zero (terminal run phases
    /// and token kinds are present from the start, so dashboards see them).
    pub fn new() -> Arc<Metrics> {
        let registry = Registry::new();
        let r = &registry;
        let metrics = Metrics {
            runs_finished: registered(
                r,
                counter_vec(
                    "coxswain_runs_finished_total",
                    "Runs that finished, by phase.",
                    &["phase"],
                ),
            ),
            steps_finished: registered(
                r,
                counter_vec(
                    "coxswain_steps_finished_total",
                    "Step attempts that finished, by kind and outcome.",
                    &["kind", "outcome"],
                ),
            ),
            step_seconds: registered(
                r,
                histogram_vec(
                    "coxswain_step_duration_seconds",
                    "How long step attempts took, by kind.",
                    buckets(0.1, 4.0, 9),
                    &["kind"],
                ),
            ),
            reconcile_seconds: registered(
                r,
                histogram(
                    "coxswain_reconcile_duration_seconds",
                    "How long one reconcile of a Run took.",
                    buckets(0.001, 4.0, 8),
                ),
            ),
            reconcile_errors: registered(
                r,
                counter_vec(
                    "coxswain_reconcile_errors_total",
                    "Reconciles that failed and will be retried, by error.",
                    &["error"],
                ),
            ),
            queue_depth: registered(
                r,
                gauge(
                    "coxswain_work_queue_depth",
                    "Runs waiting to be reconciled.",
                ),
            ),
            active_runs: registered(
                r,
                gauge("coxswain_active_runs", "Runs started and not finished."),
            ),
            unreadable_runs: registered(
                r,
                gauge(
                    "coxswain_unreadable_runs",
                    "Runs the controller cannot read (each has a Warning Event saying why); none of them is reconciled.",
                ),
            ),
            in_controller: registered(
                r,
                gauge(
                    "coxswain_in_controller_attempts",
                    "Agent, http and message attempts running inside the controller.",
                ),
            ),
            agent_tokens: registered(
                r,
                counter_vec(
                    "coxswain_agent_tokens_total",
                    "Tokens agent steps used, by type (prompt or completion).",
                    &["type"],
                ),
            ),
            status_writes: registered(
                r,
                IntCounter::new("coxswain_status_writes_total", "Writes of a Run's status.")
                    .expect("valid counter"),
            ),
            runs_archived: registered(
                r,
                IntCounter::new(
                    "coxswain_runs_archived_total",
                    "Runs that ended and were written to the records database.",
                )
                .expect("valid counter"),
            ),
            runs_retired: registered(
                r,
                IntCounter::new(
                    "coxswain_runs_deleted_by_retention_total",
                    "Finished Runs deleted from the cluster once archived and past their retention.",
                )
                .expect("valid counter"),
            ),
            status_bytes: registered(
                r,
                histogram(
                    "coxswain_status_bytes",
                    "Size of a Run's status as written, in bytes.",
                    buckets(1024.0, 4.0, 8),
                ),
            ),
            leader: registered(
                r,
                gauge(
                    "coxswain_leader",
                    "1 while this replica holds the Lease and reconciles, else 0.",
                ),
            ),
            buckets: registered(
                r,
                gauge(
                    "coxswain_buckets",
                    "Buckets whose running Runs this replica acts on (of 64; all of them unless sharded).",
                ),
            ),
            registry,
        };
        for phase in [RunPhase::Succeeded, RunPhase::Failed, RunPhase::Cancelled] {
            metrics
                .runs_finished
                .with_label_values(&[phase_label(phase)]);
        }
        for kind in ["prompt", "completion"] {
            metrics.agent_tokens.with_label_values(&[kind]);
        }
        Arc::new(metrics)
    }

    /// Every metric in Prometheus' text format, as `/metrics` serves it.
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail, and the families come from our own
        // registry, whose metrics are all well formed.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "cannot encode metrics");
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Starts timing one reconcile; recorded when the timer is dropped.
    pub fn reconcile_timer(&self) -> ReconcileTimer {
        ReconcileTimer(self.reconcile_seconds.start_timer())
    }

    /// Counts a reconcile that failed; `label` is short and fixed, such as
    /// `coxswain_k8s::Error::metric_label` gives.
    pub fn reconcile_failed(&self, label: &'static str) {
        self.reconcile_errors.with_label_values(&[label]).inc();
    }

    /// Counts a Run written to the archive.
    pub fn run_archived(&self) {
        self.runs_archived.inc();
    }

    /// Counts a finished Run deleted by retention.
    pub fn run_deleted_by_retention(&self) {
        self.runs_retired.inc();
    }

    /// Counts a run that reached `phase` (call once, when it finishes).
    pub fn run_finished(&self, phase: RunPhase) {
        self.runs_finished
            .with_label_values(&[phase_label(phase)])
            .inc();
    }

    /// Counts a step attempt of `kind` that ended as `outcome` after `took`.
    pub fn step_finished(&self, kind: &StepKind<'_>, outcome: StepPhase, took: Duration) {
        let kind = kind.name();
        self.steps_finished
            .with_label_values(&[kind, outcome.as_str()])
            .inc();
        self.step_seconds
            .with_label_values(&[kind])
            .observe(took.as_secs_f64());
    }

    /// Adds the tokens one agent attempt used.
    pub fn tokens(&self, prompt: u64, completion: u64) {
        self.agent_tokens
            .with_label_values(&["prompt"])
            .inc_by(prompt);
        self.agent_tokens
            .with_label_values(&["completion"])
            .inc_by(completion);
    }

    /// Sets how many Runs are started and not finished.
    pub fn set_active_runs(&self, runs: usize) {
        self.active_runs.set(saturating_i64(runs));
    }

    /// Sets how many Runs in the cache could not be read, so an alert can
    /// say that some Run sits unreconciled.
    pub fn set_unreadable_runs(&self, runs: usize) {
        self.unreadable_runs.set(saturating_i64(runs));
    }

    /// Sets how many Runs wait to be reconciled.
    pub fn set_queue_depth(&self, runs: usize) {
        self.queue_depth.set(saturating_i64(runs));
    }

    /// Counts an attempt running inside the controller until the returned
    /// guard is dropped.
    pub fn attempt_running(&self) -> RunningAttempt {
        self.in_controller.inc();
        RunningAttempt(self.in_controller.clone())
    }

    /// Counts one write of a Run's status of `bytes` bytes.
    pub fn status_written(&self, bytes: usize) {
        self.status_writes.inc();
        self.status_bytes.observe(bytes as f64);
    }

    /// Records whether this replica leads (and so reconciles).
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Sets how many buckets this replica acts on, so a dashboard shows
    /// how the sharded replicas split the Runs and when buckets move.
    pub fn set_buckets(&self, buckets: u32) {
        self.buckets.set(i64::from(buckets));
    }
}

/// The label of a run's phase, as the Run's status writes it.
fn phase_label(phase: RunPhase) -> &'static str {
    match phase {
        RunPhase::Pending => "Pending",
        RunPhase::Running => "Running",
        RunPhase::Waiting => "Waiting",
        RunPhase::Succeeded => "Succeeded",
        RunPhase::Failed => "Failed",
        RunPhase::Cancelled => "Cancelled",
    }
}

fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

// The constructors below take constant names and help texts; the prometheus
// crate refuses only invalid names, which a test (`every_family_is_served`) would catch.

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter")
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("valid gauge")
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("valid histogram")
}

fn histogram_vec(name: &str, help: &str, buckets: Vec<f64>, labels: &[&str]) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("valid histogram")
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::Step;

    fn script_step() -> Step {
        serde_json::from_value(serde_json::json!({"key": "build", "script": {"source": "true"}}))
            .expect("a script step")
    }

    #[test]
    fn every_family_is_served() {
        let metrics = Metrics::new();
        {
            let _timer = metrics.reconcile_timer();
        }
        metrics.reconcile_failed("conflict");
        metrics.run_finished(RunPhase::Succeeded);
        let step = script_step();
        let kind = step.kind().expect("one kind");
        metrics.step_finished(&kind, StepPhase::Completed, Duration::from_millis(1500));
        metrics.tokens(120, 30);
        metrics.set_active_runs(3);
        metrics.set_queue_depth(2);
        let attempt = metrics.attempt_running();
        metrics.status_written(2048);
        metrics.set_leader(true);
        metrics.set_buckets(21);
        let text = metrics.encode();
        for line in [
            r#"coxswain_runs_finished_total{phase="Succeeded"} 1"#,
            r#"coxswain_runs_finished_total{phase="Failed"} 0"#,
            r#"coxswain_steps_finished_total{kind="script",outcome="completed"} 1"#,
            r#"coxswain_step_duration_seconds_count{kind="script"} 1"#,
            r#"coxswain_step_duration_seconds_sum{kind="script"} 1.5"#,
            "coxswain_reconcile_duration_seconds_count 1",
            r#"coxswain_reconcile_errors_total{error="conflict"} 1"#,
            "coxswain_work_queue_depth 2",
            "coxswain_active_runs 3",
            "coxswain_in_controller_attempts 1",
            r#"coxswain_agent_tokens_total{type="prompt"} 120"#,
            r#"coxswain_agent_tokens_total{type="completion"} 30"#,
            "coxswain_status_writes_total 1",
            "coxswain_status_bytes_sum 2048",
            "coxswain_leader 1",
            "coxswain_buckets 21",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        drop(attempt);
        assert!(
            metrics
                .encode()
                .lines()
                .any(|l| l == "coxswain_in_controller_attempts 0"),
            "a dropped attempt stops counting"
        );
    }

    #[test]
    fn counters_add_up() {
        let metrics = Metrics::new();
        metrics.tokens(1, 2);
        metrics.tokens(10, 20);
        metrics.run_finished(RunPhase::Failed);
        metrics.run_finished(RunPhase::Failed);
        let text = metrics.encode();
        assert!(
            text.contains(r#"coxswain_agent_tokens_total{type="prompt"} 11"#),
            "{text}"
        );
        assert!(
            text.contains(r#"coxswain_agent_tokens_total{type="completion"} 22"#),
            "{text}"
        );
        assert!(
            text.contains(r#"coxswain_runs_finished_total{phase="Failed"} 2"#),
            "{text}"
        );
    }
}
