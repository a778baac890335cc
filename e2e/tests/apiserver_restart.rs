//! kube-apiserver restarted while runs are in flight (same etcd, port and
//! certificates, as in an upgrade): the controller's watches and requests
//! fail for a few seconds, then every run goes on and ends right. A test
//! binary of its own: the restart hits every test sharing the cluster.

mod doubling;

use std::time::Duration;

use coxswain_e2e::{ControllerProcess, restart_apiserver, wait_for};
use doubling::{ended_right, flow};
use serde_json::{Value, json};

/// Runs in flight when the API server restarts.
const BEFORE: u64 = 4;
/// Runs created after it is back.
const AFTER: u64 = 2;
/// Generous bound for every wait (not a timing assertion).
const BOUND: Duration = Duration::from_secs(150);

#[tokio::test]
async fn runs_in_flight_finish_right_across_an_api_server_restart() {
    let (addr, doubler, kubectl, ns) = doubling::start().await;
    let mut controllers = vec![
        ControllerProcess::for_namespace(ns.name(), &[])
            .await
            .expect("controller"),
    ];
    let logs = |controllers: &[ControllerProcess]| {
        controllers
            .iter()
            .map(ControllerProcess::log_text)
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    // The scripts sleep, so the runs are mid-step when the server goes.
    kubectl
        .apply(ns.name(), &flow(addr, 3))
        .unwrap_or_else(|e| panic!("{e}"));
    let create = |num: u64| {
        kubectl
            .create_run(ns.name(), "doubling", &json!({"num": num}))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let mut runs: Vec<(u64, String)> = (1..=BEFORE).map(|n| (n, create(n))).collect();
    let get = |run: &str| -> Result<Value, String> {
        let text = kubectl.run(&["get", "run", run, "-n", ns.name(), "-o", "json"])?;
        serde_json::from_str(&text).map_err(|e| format!("kubectl get run {run}: {e}"))
    };
    // In flight: every run's script step is running (its Job launched).
    wait_for("every run's script step running", BOUND, || async {
        Ok(runs
            .iter()
            .all(|(_, run)| {
                get(run).is_ok_and(|r| r["status"]["steps"]["make"]["status"] == "running")
            })
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&controllers)));

    restart_apiserver()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs(&controllers)));
    runs.extend((BEFORE + 1..=BEFORE + AFTER).map(|n| (n, create(n))));

    // Wait for every run to end. A controller that exits (its Lease lost
    // while the server was away) is started again, as its Deployment would.
    let mut restarted = 0;
    let over = ["Succeeded", "Failed", "Cancelled"];
    let deadline = tokio::time::Instant::now() + BOUND;
    let ended = loop {
        let states: Vec<Result<Value, String>> = runs.iter().map(|(_, run)| get(run)).collect();
        if states.iter().all(|s| {
            s.as_ref()
                .is_ok_and(|r| over.contains(&r["status"]["phase"].as_str().unwrap_or_default()))
        }) {
            break states;
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "runs not over within {BOUND:?}: {states:?}\n{}",
                logs(&controllers)
            );
        }
        let current = controllers.last_mut().expect("a controller");
        if current.exited() {
            restarted += 1;
            controllers.push(
                ControllerProcess::for_namespace(ns.name(), &[])
                    .await
                    .expect("controller"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for ((num, run), state) in runs.iter().zip(&ended) {
        let state = state.as_ref().expect("ended");
        assert!(
            ended_right(state, *num),
            "run {run} (num = {num}) ended wrong: {}\n{}",
            state["status"],
            logs(&controllers)
        );
        // Called once; called again only by a restarted controller, and
        // then with the same Idempotency-Key.
        let keys = doubler.calls(*num);
        assert!(
            !keys.is_empty() && keys.len() <= 1 + restarted && keys.iter().all(|k| *k == keys[0]),
            "/double?num={num}: {keys:?} ({restarted} controller restarts)"
        );
    }
    eprintln!(
        "{} runs ended right across an API server restart ({} in flight); controller restarted {restarted} times",
        runs.len(),
        BEFORE
    );
}
