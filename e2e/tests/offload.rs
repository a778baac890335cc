//! A run with a 1 MiB script output and a 1,000-pass loop keeps a small
//! Run on a real API server: its large values move into ConfigMaps the Run
//! owns, the status comes back whole from the Run and those ConfigMaps,
//! storing it again creates nothing, and ConfigMaps no status references
//! any more are deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use coxswain_core::api::{Run, RunPhase, RunStatus};
use coxswain_core::engine::{Action, CompiledFlow, Done, Event, RunInfo, RunMachine, Work};
use coxswain_e2e::TestNamespace;
use coxswain_k8s::offload::{OffloadSettings, Offloader};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(60);

/// A script step printing 1 MiB, then a loop of 1,000 passes whose step
/// prints 10 KB each time.
const FLOW: &str = r#"
steps:
  - key: big
    script: {source: "print a lot"}
  - key: spin
    loop:
      until: "$loop.iteration >= 1000"
      maxIterations: 1000
      steps:
        - key: tick
          script: {source: "print a little"}
          input: {pass: $loop.iteration}
"#;

/// What each attempt prints: 1 MiB for `big`, 10 KB naming its pass for `tick`.
fn answer(work: &Work) -> Done {
    if work.step == "big" {
        let text = "x".repeat(1 << 20);
        return Done {
            output: Value::String(text.clone()),
            text: Some(text),
            usage: None,
            log: None,
        };
    }
    Done::output(json!({"pass": work.input["pass"], "note": "n".repeat(10_000)}))
}

/// Drives the engine through the whole flow without I/O, as the controller
/// would with finished Jobs; returns the final status.
fn drive(flow: &CompiledFlow) -> RunStatus {
    let mut now = jiff::Timestamp::from_second(1_800_000_000).expect("time");
    let mut machine = RunMachine::new(flow, json!({}), RunInfo::default());
    let mut queue: Vec<Work> = Vec::new();
    let mut actions = machine.handle(Event::Start, now);
    loop {
        for action in actions.drain(..) {
            if let Action::Run(work) = action {
                queue.push(*work);
            }
        }
        let Some(work) = queue.pop() else { break };
        now += jiff::SignedDuration::from_secs(1);
        actions = machine.handle(
            Event::Finished {
                step: work.step.clone(),
                part: None,
                attempt: work.attempt,
                result: Ok(answer(&work)),
            },
            now,
        );
    }
    let record = machine.summarized();
    assert_eq!(record.phase, RunPhase::Succeeded, "{:?}", record.error);
    assert_eq!(record.steps["tick"].attempts.len(), 1000);
    record
}

mod crd_files;

async fn install_run_crd(client: kube::Client) {
    crd_files::install(client, &["runs.yaml"], BOUND).await;
}

/// Creates the Run, retrying while discovery catches up with the new CRD.
async fn create_run(runs: &Api<Run>) -> Run {
    let run: Run = serde_json::from_value(json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": "big-and-long"},
        "spec": {"flowRef": {"name": "big-and-long"}}
    }))
    .expect("run");
    coxswain_e2e::create_when_discovered(runs, &run, BOUND)
        .await
        .expect("created")
}

/// Writes `status` into the Run with one PUT of the status subresource.
async fn write_status(runs: &Api<Run>, run: &Run, status: &Value) -> Run {
    let mut object = serde_json::to_value(run).expect("run JSON");
    object["status"] = status.clone();
    let object: Run = serde_json::from_value(object).expect("a Run with the stored status");
    runs.replace_status("big-and-long", &PostParams::default(), &object)
        .await
        .expect("status written")
}

/// The Run exactly as the API server returns it, in bytes of JSON.
async fn run_size(ns: &TestNamespace) -> usize {
    let resource = ApiResource::erase::<Run>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let object = api.get("big-and-long").await.expect("run");
    serde_json::to_vec(&object).expect("JSON").len()
}

/// The names of the value ConfigMaps in the namespace.
async fn value_config_maps(ns: &TestNamespace) -> BTreeSet<String> {
    let api: Api<ConfigMap> = ns.api();
    let list = api
        .list(&ListParams::default().labels("coxswain.dev/role=value"))
        .await
        .expect("list");
    list.items
        .into_iter()
        .map(|cm| cm.metadata.name.expect("named"))
        .collect()
}

#[tokio::test]
async fn a_mebibyte_and_a_thousand_passes_fit_and_come_back() {
    let spec: coxswain_core::api::FlowSpec = serde_yaml::from_str(FLOW).expect("flow YAML");
    let flow = CompiledFlow::new(spec).expect("valid flow");
    let record = drive(&flow);
    let full = serde_json::to_vec(&record).expect("JSON").len();

    let ns = TestNamespace::new().await.expect("namespace");
    install_run_crd(ns.client()).await;
    let runs: Api<Run> = ns.api();
    let run = create_run(&runs).await;
    let offloader = Offloader::new(ns.client(), &OffloadSettings::default()).expect("settings");

    let stored = offloader.store(&run, &record).await.expect("store");
    assert!(!stored.over_budget, "{} bytes", stored.bytes);
    let run = write_status(&runs, &run, &stored.status).await;
    let size = run_size(&ns).await;
    println!(
        "record {full} bytes in memory's stored form; status {} bytes; Run object {size} bytes; \
         {} ConfigMaps created",
        stored.bytes, stored.created
    );
    assert!(size < 512 << 10, "the Run weighs {size} bytes");
    let made = value_config_maps(&ns).await;
    assert_eq!(made.len(), stored.created);

    // The 1 MiB text is in two pieces, immutable, owned by the Run.
    let big = run
        .status
        .as_ref()
        .expect("status")
        .values
        .iter()
        .find(|v| v.path == "/steps/big/text")
        .expect("the big text moved")
        .clone();
    assert_eq!(big.config_maps.len(), 2);
    let cms: Api<ConfigMap> = ns.api();
    let first = cms.get(&big.config_maps[0]).await.expect("piece");
    assert_eq!(first.immutable, Some(true));
    let owner = &first.metadata.owner_references.expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Run", run.metadata.uid.as_deref().expect("uid"))
    );
    let shown = run.status.as_ref().expect("status").steps["big"]
        .text
        .clone()
        .expect("a preview in place");
    assert!(
        shown.starts_with("[moved out of the status: 1048578 bytes"),
        "{shown}"
    );

    // Read back, by this controller and by a restarted one (no cache).
    assert_eq!(offloader.load(&run).await.expect("load"), record);
    let restarted = Offloader::new(ns.client(), &OffloadSettings::default()).expect("settings");
    let loaded = restarted.load(&run).await.expect("load after a restart");
    assert_eq!(loaded, record, "the record the machine had");

    // Storing the same record again creates nothing, with or without a cache.
    for offloader in [
        &offloader,
        &Offloader::new(ns.client(), &OffloadSettings::default()).expect("settings"),
    ] {
        let again = offloader.store(&run, &loaded).await.expect("store again");
        assert_eq!(again.created, 0);
        assert_eq!(again.status, stored.status, "the same status");
    }
    assert_eq!(value_config_maps(&ns).await, made);

    // Once the big output is no longer in the status, its pieces go.
    let mut smaller = loaded.clone();
    let big_step = smaller.steps.get_mut("big").expect("big");
    big_step.text = Some("short now".into());
    big_step.output = Some(json!("short now"));
    for attempt in &mut big_step.attempts {
        attempt.text = Some("short now".into());
        attempt.output = Some(json!("short now"));
    }
    let next = offloader
        .store(&run, &smaller)
        .await
        .expect("store smaller");
    assert_eq!(next.created, 0);
    let run = write_status(&runs, &run, &next.status).await;
    assert_eq!(
        offloader
            .collect(&run, &next.status)
            .await
            .expect("collect"),
        2
    );
    let left = value_config_maps(&ns).await;
    let expected: BTreeSet<String> = made
        .difference(&big.config_maps.iter().cloned().collect())
        .cloned()
        .collect();
    assert_eq!(left, expected);
    assert_eq!(offloader.load(&run).await.expect("load"), smaller);
    assert_eq!(
        offloader
            .collect(&run, &next.status)
            .await
            .expect("collect again"),
        0
    );

    // What a person is shown keeps its own ConfigMaps, which collect leaves.
    let draft = json!({"body": "d".repeat(50_000)});
    let show = std::collections::BTreeMap::from([("draft".to_string(), draft)]);
    let shown = offloader
        .store_shown(&run, &show)
        .await
        .expect("store shown");
    let preview = shown["draft"].as_str().expect("a preview");
    assert!(
        preview.starts_with("[moved out of the status: "),
        "{preview}"
    );
    let listed = cms
        .list(&ListParams::default().labels("coxswain.dev/role=shown"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
    let shown_name = listed.items[0].metadata.name.clone().expect("named");
    assert!(preview.contains(&shown_name), "{preview}");
    assert_eq!(
        offloader
            .collect(&run, &next.status)
            .await
            .expect("collect"),
        0
    );
    cms.get(&shown_name).await.expect("still there");
}
