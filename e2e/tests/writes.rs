//! What a run costs the API server, counted by the API server itself
//! (`apiserver_request_total`): one status write when a run starts, at
//! most one per in-controller call that ends (conditions after a call are
//! settled in the same write; a call that ends while the write before it
//! is in flight starts the next one at once, and their statuses go in one
//! later write), and one at its end. A reconcile that reads the Run before
//! the watch brought back the controller's own last write neither writes
//! again (a 409 Conflict is a write too) nor waits. The Events that tell
//! the story still arrive, sent in the background, one per status write,
//! and name every step's end.
//!
//! One test in its own binary: it has the cluster to itself, so every
//! write to `runs/status` is this test's.

use std::time::Duration;

use coxswain_e2e::bench::objects::{create_flow, create_runs, is_over, phase, wait_runs};
use coxswain_e2e::bench::{http_steps, server};
use coxswain_e2e::{ControllerProcess, apimetrics, wait_for};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

const BOUND: Duration = Duration::from_secs(120);
const RUNS: usize = 8;
/// Four http calls, each followed by a condition reading it.
const STEPS: usize = 8;

#[tokio::test]
async fn a_run_writes_its_status_at_its_start_at_most_once_per_call_and_tells_its_story() {
    let (_kubectl, ns) = coxswain_e2e::kubectl_and_namespace().await;
    let client = ns.client();
    let (addr, calls) = server::start().await.expect("server");
    create_flow(&client, ns.name(), "calls", http_steps(addr, STEPS))
        .await
        .expect("flow");
    let controller = ControllerProcess::for_namespace(ns.name(), &[])
        .await
        .expect("controller");

    let before = apimetrics::scrape(&client).await.expect("metrics");
    create_runs(&client, ns.name(), "calls", "run", RUNS)
        .await
        .expect("runs");
    let (_, runs) = wait_runs(&client, ns.name(), "run", RUNS, is_over, BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    let after = apimetrics::scrape(&client).await.expect("metrics");
    for run in runs.values() {
        assert_eq!(phase(run), "Succeeded", "{:?}", run.data["status"]);
    }
    let http = STEPS / 2;
    assert_eq!(calls.count(), RUNS * http, "each call made once");
    let writes = after.since(&before);
    let status_writes = writes.resource("runs", "status");
    // Two writes a run at least (its start, its end); one per call at
    // most, the end's included.
    assert!(
        (2 * RUNS as u64..=(RUNS * (http + 1)) as u64).contains(&status_writes),
        "status writes (every response code) for {RUNS} runs of {http} calls: {:?}",
        writes.by_resource()
    );

    // The story of one run, as `kubectl describe` shows it: an Event per
    // status write, naming each transition in it.
    let events: Api<Event> = Api::namespaced(client.clone(), ns.name());
    let story = wait_for("the events of run-00000", BOUND, || async {
        let list = events
            .list(&ListParams::default().fields("regarding.name=run-00000"))
            .await?;
        // Sent in the background: waited for until every step's end is told.
        let told: Vec<&str> = list
            .items
            .iter()
            .filter_map(|e| e.note.as_deref())
            .collect();
        let told = told.join("; ");
        let all = (0..STEPS).all(|i| told.contains(&format!("step s{i:03}: completed")));
        Ok(all.then_some(list.items))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        (2..=http + 1).contains(&story.len()),
        "one per write: {story:?}"
    );
    let notes: Vec<&str> = story.iter().filter_map(|e| e.note.as_deref()).collect();
    let told = notes.join("; ");
    for i in 0..STEPS {
        assert!(told.contains(&format!("step s{i:03}: completed")), "{told}");
    }
    // The first call starts in the run's first write, before anything ends.
    assert!(told.contains("step s000: attempt 1 started"), "{told}");
}
