//! The controller behind a fault-injecting proxy (`coxswain_e2e::faults`):
//! the API server answers it with 409, 429, 500 and 503 now and then,
//! delays it, cuts its watches, and loses the answers of writes it applied
//! (the controller sees an error for a change that happened). Runs of a flow with a script step (a
//! Job), an in-controller http call and a condition must still all finish
//! with the right outputs, each call made once, and the controller must
//! back off: the proxy counts every request it sends.

mod doubling;

use std::time::Duration;

use coxswain_e2e::{ControllerProcess, FaultPlan, FaultProxy};
use doubling::{ended_right, flow};
use serde_json::json;

/// Runs started at once.
const RUNS: u64 = 6;

/// Generous bound for all runs to finish (not a timing assertion).
const BOUND: Duration = Duration::from_secs(150);

#[tokio::test]
async fn runs_finish_right_through_api_faults_and_the_controller_backs_off() {
    let (addr, doubler, kubectl, ns) = doubling::start().await;
    let proxy = FaultProxy::start(FaultPlan::from_env())
        .await
        .expect("fault proxy");
    let controller = ControllerProcess::for_namespace_via(proxy.kubeconfig(), ns.name(), &[])
        .expect("controller");
    let fail = |what: String| -> ! {
        panic!(
            "{what}\nseed {} (E2E_FAULT_SEED repeats it)\n{}\ncontroller log:\n{}",
            proxy.plan().seed,
            proxy.tally().report(),
            controller.log_text()
        )
    };
    kubectl
        .apply(ns.name(), &flow(addr, 0))
        .unwrap_or_else(|e| fail(e));
    let runs: Vec<(u64, String)> = (1..=RUNS)
        .map(|n| {
            let run = kubectl
                .create_run(ns.name(), "doubling", &json!({"num": n}))
                .unwrap_or_else(|e| fail(e));
            (n, run)
        })
        .collect();

    for (n, run) in &runs {
        let done = match kubectl
            .wait_run(ns.name(), run, &["Succeeded", "Failed", "Cancelled"], BOUND)
            .await
        {
            Ok(done) => done,
            Err(e) => fail(format!(
                "{e}\n{}",
                kubectl
                    .run(&["get", "run", run, "-n", ns.name(), "-o", "yaml"])
                    .unwrap_or_default()
            )),
        };
        if !ended_right(&done, *n) {
            fail(format!(
                "run {run} (num = {n}) ended wrong: {}",
                done["status"]
            ));
        }
    }

    // One Job per run: no create was repeated into a second Job.
    let jobs = kubectl
        .run(&["get", "jobs", "-n", ns.name(), "-o", "name"])
        .unwrap_or_else(|e| fail(e));
    if jobs.lines().count() != RUNS as usize {
        fail(format!("{RUNS} runs made these Jobs:\n{jobs}"));
    }

    // Each call was made once: a faulted status write never made the
    // controller call again.
    for n in 1..=RUNS {
        let keys = doubler.calls(n);
        if keys.len() != 1 {
            fail(format!(
                "/double?num={n} was called {} times: {keys:?}",
                keys.len()
            ));
        }
    }

    let tally = proxy.tally();
    let faults = tally.faults();
    eprintln!(
        "seed {}: {RUNS} runs finished\n{}",
        proxy.plan().seed,
        tally.report()
    );
    let errors: usize = faults
        .iter()
        .filter(|(f, _)| f.is_error())
        .map(|(_, n)| n)
        .sum();
    let plan = proxy.plan();
    if errors == 0 && plan.internal + plan.unavailable + plan.too_many_requests > 0.0 {
        fail("the proxy injected no error: the test proved nothing".into());
    }
    // Backing off: after an error, the same request (method, path and
    // selectors; for a create, the same body) is not sent again more than REPEATS times
    // within the next second. A reconcile that failed is retried after
    // 500 ms (a conflict) or 5 s; a watcher that failed backs off from
    // 800 ms. But one path can be asked by every run at once — each run's
    // first reconcile reads the Flow, and the snapshot its flow version's
    // runs share, that one twice when two runs make it at once (read,
    // create refused as existing, read) — so up to 2 × RUNS reads of one
    // path may fall in one second without any retry; two more for a
    // reconcile that a new event queues. A hot retry loop sends tens or
    // hundreds.
    const REPEATS: usize = 2 * RUNS as usize + 2;
    let (repeats, target) = tally.most_repeats_after_error(Duration::from_secs(1));
    if repeats > REPEATS {
        fail(format!(
            "after an error, {target} was sent {repeats} times within a second (at most {REPEATS})"
        ));
    }
    // Spending: see README "API faults" for how PER_RUN is derived.
    let spent = tally
        .requests()
        .iter()
        .filter(|s| !matches!(s.kind.resource.as_str(), "leases" | "discovery"))
        .filter(|s| s.kind.verb != "watch")
        .count();
    let bound = PER_RUN * RUNS as usize + PER_ERROR * errors;
    eprintln!(
        "figures: seed {}, {RUNS} runs right, {} requests, {errors} errors, \
         most repeats after an error {repeats} ({target}; at most {REPEATS}), \
         {spent} requests without leases, discovery and watches (at most {bound})",
        plan.seed,
        tally.total()
    );
    if spent > bound {
        fail(format!(
            "the controller sent {spent} requests (not counting leases, discovery and watches) for {RUNS} runs and {errors} errors; at most {bound}"
        ));
    }
    drop(controller);
}

/// Requests a run of this flow costs without faults, not counting leases,
/// discovery and watches: measured 130 for 6 runs (about 22 a run: 3 status
/// writes, 6 Events, the input and flow-snapshot ConfigMaps, the Job, and
/// the reads of the Flow, the Job and its pods), rounded up to 25 for the
/// reconciles that Job and watch events queue and that find nothing to do.
/// `E2E_FAULT_SCALE=0` measures it again.
const PER_RUN: usize = 25;

/// Requests one injected error may add: the failed reconcile runs again in
/// full. The most one reconcile of this flow sends is about 10 (the value
/// ConfigMaps, the Flow, the Job and its pods, the Approvals, a quorum read
/// of the Run, the status write, a Job and its input ConfigMap, Events).
const PER_ERROR: usize = 10;
