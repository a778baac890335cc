//! The Flow reconciler against a real API server, run in this test process
//! and scoped to the test's namespace: Flows applied with the real kubectl
//! get their `Valid` condition and the STEPS/VALID/SCHEDULE/NEXT/LAST RUN
//! columns (the schedule example's NEXT its next slot), and a
//! `* * * * *` schedule starts Runs named after their minute, with the
//! schedule's input and `$SINCE` from the last scheduled run that succeeded.

use std::time::Duration;

use coxswain_core::api::{Flow, Run};
use coxswain_e2e::{TestNamespace, wait_for, workspace_root};
use coxswain_k8s::names;
use jiff::Timestamp;
use jiff::civil::Weekday;
use jiff::tz::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;
use tokio::sync::oneshot;

const BOUND: Duration = Duration::from_secs(60);

/// A minute slot, plus the time the API server and the controller need.
const SLOT_BOUND: Duration = Duration::from_secs(150);

/// The shared kubectl, with a panic for what the tests do not expect.
struct Kubectl(coxswain_e2e::Kubectl);

impl Kubectl {
    async fn new() -> Self {
        Self(coxswain_e2e::Kubectl::new().await.expect("a test cluster"))
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        self.0.run(args)
    }

    /// Applies `yaml` in `ns`, as a person would.
    fn apply(&self, ns: &str, yaml: &str) {
        self.0.apply(ns, yaml).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Applies `crds/` once per test binary and waits until it is served.
    async fn install_crds(&self) {
        self.0.install_crds().await.expect("the CRDs installed");
    }
}

/// The Flow controller, running until the value drops.
struct FlowController {
    stop: Option<oneshot::Sender<()>>,
}

impl FlowController {
    /// Started as the test's user, which the controller then takes as its
    /// own (the `created-by` of the Runs its schedules start).
    async fn start(ns: &TestNamespace) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let me = coxswain_k8s::admission::whoami(&ns.client())
            .await
            .expect("the API server says who the test is");
        tokio::spawn(coxswain_k8s::flows::run(
            ns.client(),
            Some(ns.name().to_string()),
            me,
            shutdown,
        ));
        Self { stop: Some(stop) }
    }
}

impl Drop for FlowController {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn condition<'a>(flow: &'a Flow, kind: &str) -> Option<&'a Condition> {
    flow.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
}

/// Waits until the Flow's status describes its current generation.
async fn observed(flows: &Api<Flow>, name: &str) -> Flow {
    wait_for(&format!("flow {name} observed"), BOUND, || async {
        let flow = flows.get(name).await?;
        let seen = flow.status.as_ref().and_then(|s| s.observed_generation);
        Ok((seen.is_some()
            && seen == flow.metadata.generation
            && condition(&flow, "Valid").is_some())
        .then_some(flow))
    })
    .await
    .expect("the controller wrote the status")
}

/// A `kubectl get` table as (headers, cells) per row, cut at the header's
/// column starts (an empty cell stays empty; `LAST RUN` stays one header).
fn cells(table: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut lines = table.lines();
    let header = lines.next().expect("a header");
    let bytes = header.as_bytes();
    let mut starts = vec![0];
    for i in 2..bytes.len() {
        if bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' ' {
            starts.push(i);
        }
    }
    let cut = |line: &str| -> Vec<String> {
        starts
            .iter()
            .enumerate()
            .map(|(n, &from)| {
                let to = starts.get(n + 1).copied().unwrap_or(line.len());
                line.get(from..to.min(line.len()))
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .collect()
    };
    let headers = cut(header);
    lines.map(|line| (headers.clone(), cut(line))).collect()
}

const GOOD: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: good}
spec:
  steps:
    - key: fetch
      script: {command: [echo, '{"n": 1}']}
    - key: repeat
      loop:
        until: $loop.iteration >= 2
        maxIterations: 3
        steps:
          - key: again
            script: {command: [echo, again]}
"#;

const BAD: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: bad}
spec:
  steps:
    - key: fetch
      script: {command: [echo, hi]}
    - key: check
      when: $steps.fetch.status ==
      script: {command: [echo, hi]}
    - key: shout
      when: "True"
      script: {command: [echo, hi]}
"#;

#[tokio::test]
async fn flows_get_valid_and_the_columns_people_read() {
    let ns = TestNamespace::new().await.expect("namespace");
    let kubectl = Kubectl::new().await;
    kubectl.install_crds().await;
    let _controller = FlowController::start(&ns).await;
    kubectl.apply(ns.name(), GOOD);
    kubectl.apply(ns.name(), BAD);
    let flows: Api<Flow> = ns.api();

    let good = observed(&flows, "good").await;
    let valid = condition(&good, "Valid").expect("Valid");
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "Valid")
    );
    assert_eq!(valid.observed_generation, good.metadata.generation);
    assert_eq!(condition(&good, "Ready").expect("Ready").status, "True");
    let status = good.status.as_ref().expect("status");
    assert_eq!(status.step_count, Some(3));
    assert!(status.problems.is_empty());

    let bad = observed(&flows, "bad").await;
    let invalid = condition(&bad, "Valid").expect("Valid").clone();
    assert_eq!(
        (invalid.status.as_str(), invalid.reason.as_str()),
        ("False", "Invalid")
    );
    let lines: Vec<&str> = invalid.message.lines().collect();
    assert_eq!(lines[0], "2 problems:", "{}", invalid.message);
    assert!(
        lines[1].starts_with("step check: when: ") && lines[1].contains("(character "),
        "{}",
        invalid.message
    );
    assert!(
        lines[2].starts_with("step shout: when: ") && lines[2].contains("(character "),
        "{}",
        invalid.message
    );
    let problems = &bad.status.as_ref().expect("status").problems;
    assert_eq!(
        problems
            .iter()
            .map(|p| (p.step.as_str(), p.field.as_str(), p.character.is_some()))
            .collect::<Vec<_>>(),
        [("check", "when", true), ("shout", "when", true)]
    );
    assert_eq!(condition(&bad, "Ready").expect("Ready").status, "False");

    // A manual Run of `good` becomes its LAST RUN.
    kubectl.apply(
        ns.name(),
        "apiVersion: coxswain.dev/v1alpha1\nkind: Run\nmetadata: {name: good-by-hand}\nspec: {flowRef: {name: good}}\n",
    );
    wait_for("good's last run", BOUND, || async {
        let flow = flows.get("good").await?;
        Ok((flow.status.and_then(|s| s.last_run).as_deref() == Some("good-by-hand")).then_some(()))
    })
    .await
    .expect("lastRun");

    let table = kubectl
        .run(&["get", "flows", "-n", ns.name()])
        .unwrap_or_else(|e| panic!("{e}"));
    let rows = cells(&table);
    assert_eq!(
        rows[0].0,
        [
            "NAME", "STEPS", "VALID", "SCHEDULE", "NEXT", "LAST RUN", "AGE"
        ],
        "{table}"
    );
    assert_eq!(rows[0].1[..6], ["bad", "3", "False", "", "", ""], "{table}");
    assert_eq!(
        rows[1].1[..6],
        ["good", "3", "True", "", "", "good-by-hand"],
        "{table}"
    );

    // Another invalid edit: the message follows the new generation, the
    // transition time stays (the status did not flip).
    kubectl.apply(
        ns.name(),
        &BAD.replace("\"True\"", "$steps.fetch.status == \"done\""),
    );
    let edited = wait_for("bad re-observed", BOUND, || async {
        let flow = flows.get("bad").await?;
        let seen = flow.status.as_ref().and_then(|s| s.observed_generation);
        Ok((seen == flow.metadata.generation && seen > bad.metadata.generation).then_some(flow))
    })
    .await
    .expect("the edit was observed");
    let still = condition(&edited, "Valid").expect("Valid");
    assert_eq!(still.status, "False");
    assert!(
        still.message.starts_with("1 problem:\nstep check: when: "),
        "{}",
        still.message
    );
    assert_eq!(still.last_transition_time, invalid.last_transition_time);
    assert_eq!(still.observed_generation, edited.metadata.generation);
}

/// The first 06:30 of a weekday in Paris strictly after `after`: the next
/// slot of `examples/digest.yaml`'s `30 6 * * 1-5`, worked out here day by
/// day rather than by the controller's cron library.
fn next_weekday_half_past_six_in_paris(after: Timestamp) -> Timestamp {
    let paris = TimeZone::get("Europe/Paris").expect("Europe/Paris");
    let mut day = after.to_zoned(paris.clone()).date();
    loop {
        if !matches!(day.weekday(), Weekday::Saturday | Weekday::Sunday) {
            let slot = day
                .at(6, 30, 0, 0)
                .to_zoned(paris.clone())
                .expect("06:30 exists in Paris")
                .timestamp();
            if slot > after {
                return slot;
            }
        }
        day = day.tomorrow().expect("a next day");
    }
}

#[tokio::test]
async fn kubectl_get_flows_shows_the_schedule_example_and_its_next_slot() {
    let ns = TestNamespace::new().await.expect("namespace");
    let kubectl = Kubectl::new().await;
    kubectl.install_crds().await;
    let _controller = FlowController::start(&ns).await;
    let before = Timestamp::now();
    let digest = std::fs::read_to_string(workspace_root().join("examples/digest.yaml"))
        .expect("examples/digest.yaml");
    kubectl.apply(ns.name(), &digest);
    kubectl.apply(ns.name(), GOOD);
    // A schedule that cannot start runs: its zone is no IANA zone (the API
    // server keeps it; admission, not installed here, would refuse it).
    kubectl.apply(
        ns.name(),
        &digest
            .replace("name: digest", "name: nowhere")
            .replace("timeZone: Europe/Paris", "timeZone: Europe/Atlantis"),
    );
    let flows: Api<Flow> = ns.api();
    observed(&flows, "good").await;
    observed(&flows, "nowhere").await;
    let flow = wait_for("digest's next slot", BOUND, || async {
        let flow = flows.get("digest").await?;
        let next = flow
            .status
            .as_ref()
            .and_then(|s| s.next_schedule_time.clone());
        Ok(next.is_some().then_some(flow))
    })
    .await
    .expect("nextScheduleTime");
    let expected = next_weekday_half_past_six_in_paris(before);

    let table = kubectl
        .run(&["get", "flows", "-n", ns.name()])
        .unwrap_or_else(|e| panic!("{e}"));
    println!("$ kubectl get flows\n{table}");
    let rows = cells(&table);
    assert_eq!(
        rows[0].0,
        [
            "NAME", "STEPS", "VALID", "SCHEDULE", "NEXT", "LAST RUN", "AGE"
        ],
        "{table}"
    );
    let row = |name: &str| -> Vec<String> {
        rows.iter()
            .map(|(_, cells)| cells.clone())
            .find(|cells| cells[0] == name)
            .unwrap_or_else(|| panic!("no {name} in {table}"))
    };
    let digest_row = row("digest");
    assert_eq!(
        digest_row[..4],
        ["digest", "2", "True", "30 6 * * 1-5"],
        "{table}"
    );
    let next: Timestamp = digest_row[4].parse().unwrap_or_else(|e| {
        panic!(
            "NEXT {:?} is no RFC 3339 time ({e}): {table}",
            digest_row[4]
        )
    });
    assert!(next > Timestamp::now(), "NEXT {next} is not in the future");
    assert_eq!(next, expected, "{table}");
    assert_eq!(digest_row[5], "", "no run yet: {table}");
    assert_eq!(row("good")[3..6], ["", "", ""], "no schedule: {table}");
    let nowhere = row("nowhere");
    assert_eq!(nowhere[3], "30 6 * * 1-5", "{table}");
    assert_eq!(
        nowhere[4], "",
        "a schedule that cannot start runs has no NEXT: {table}"
    );
    let nowhere = flows.get("nowhere").await.expect("nowhere");
    assert_eq!(condition(&nowhere, "Ready").expect("Ready").status, "False");
    assert_eq!(
        flow.status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_deref()),
        None,
        "no slot has come since the flow was made"
    );
}

/// A Flow the API server keeps (a loop's body is free JSON to its schema,
/// the steps being recursive) but Coxswain cannot read: it must not stop the
/// watch of other Flows.
const UNREADABLE: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: unreadable}
spec:
  steps:
    - key: repeat
      loop:
        until: $loop.iteration >= 2
        maxIterations: 3
        steps:
          - key: again
            attempts: three
            script: {command: [echo, again]}
"#;

#[tokio::test]
async fn a_flow_coxswain_cannot_read_is_reported_and_others_still_reconcile() {
    let ns = TestNamespace::new().await.expect("namespace");
    let kubectl = Kubectl::new().await;
    kubectl.install_crds().await;
    let _controller = FlowController::start(&ns).await;
    kubectl.apply(ns.name(), UNREADABLE);
    kubectl.apply(ns.name(), GOOD);
    let flows: Api<Flow> = ns.api();
    assert_eq!(
        condition(&observed(&flows, "good").await, "Valid")
            .expect("Valid")
            .status,
        "True"
    );
    let raw = wait_for("unreadable observed", BOUND, || async {
        let out = kubectl
            .run(&["get", "flow", "unreadable", "-n", ns.name(), "-o", "json"])
            .unwrap_or_else(|e| panic!("{e}"));
        let flow: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        Ok(flow["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Valid").cloned()))
    })
    .await
    .expect("the unreadable flow got a Valid condition");
    assert_eq!(raw["status"], "False");
    let message = raw["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("1 problem:\nthe flow's spec could not be read: ")
            && message.contains("three"),
        "{message}"
    );
}

const SCHEDULED: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: every-minute}
spec:
  schedule:
    cron: "* * * * *"
    timeZone: Europe/Paris
    input: {region: eu, sizes: [1, 2]}
  steps:
    - key: report
      script: {command: [echo, '{}']}
"#;

/// The scheduled Runs of `every-minute`, oldest slot first.
async fn scheduled(runs: &Api<Run>) -> Vec<Run> {
    let selector = format!("{}=every-minute", names::FLOW_LABEL);
    let mut list = runs
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list runs")
        .items;
    list.sort_by_key(|r| r.annotations().get(names::SCHEDULED_AT_ANNOTATION).cloned());
    list
}

fn slot(run: &Run) -> jiff::Timestamp {
    run.annotations()[names::SCHEDULED_AT_ANNOTATION]
        .parse()
        .expect("scheduled-at is RFC 3339")
}

#[tokio::test]
async fn a_schedule_fires_twice_and_the_second_run_sees_since() {
    let ns = TestNamespace::new().await.expect("namespace");
    let kubectl = Kubectl::new().await;
    kubectl.install_crds().await;
    let _controller = FlowController::start(&ns).await;
    kubectl.apply(ns.name(), SCHEDULED);
    let flows: Api<Flow> = ns.api();
    let runs: Api<Run> = ns.api();
    let flow = observed(&flows, "every-minute").await;
    assert_eq!(condition(&flow, "Ready").expect("Ready").status, "True");

    let first = wait_for("the first scheduled run", SLOT_BOUND, || async {
        Ok(scheduled(&runs).await.into_iter().next())
    })
    .await
    .expect("the schedule started a run");
    let first_slot = slot(&first);
    assert_eq!(first_slot.as_second() % 60, 0, "a minute slot");
    assert_eq!(
        first.name_any(),
        format!("every-minute-{}", first_slot.as_second() / 60)
    );
    assert_eq!(first.annotations()[names::SINCE_ANNOTATION], "");
    assert_eq!(
        first.spec.input,
        Some(json!({"region": "eu", "sizes": [1, 2]}))
    );
    assert_eq!(first.spec.flow_ref.name, "every-minute");
    let owner = &first.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Flow", flow.uid().as_deref().unwrap_or(""))
    );

    // The first run ends Succeeded, as the Run reconciler would record it.
    let started = first_slot + jiff::SignedDuration::from_secs(2);
    runs.patch_status(
        &first.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded", "startedAt": started.to_string(),
                                        "finishedAt": (started + jiff::SignedDuration::from_secs(1)).to_string()}})),
    )
    .await
    .expect("write the first run's status");

    let second = wait_for("the second scheduled run", SLOT_BOUND, || async {
        Ok(scheduled(&runs).await.into_iter().nth(1))
    })
    .await
    .expect("the schedule started a second run");
    let second_slot = slot(&second);
    assert_eq!(second_slot, first_slot + jiff::SignedDuration::from_mins(1));
    assert_eq!(
        second.name_any(),
        format!("every-minute-{}", second_slot.as_second() / 60)
    );
    assert_eq!(
        second.annotations()[names::SINCE_ANNOTATION],
        started.as_second().to_string()
    );
    assert_eq!(second.spec.input, first.spec.input);

    let flow = wait_for("the flow's bookkeeping", BOUND, || async {
        let flow = flows.get("every-minute").await?;
        let done = flow
            .status
            .as_ref()
            .is_some_and(|s| s.last_run.as_deref() == Some(second.name_any().as_str()));
        Ok(done.then_some(flow))
    })
    .await
    .expect("lastRun is the second run");
    let status = flow.status.expect("status");
    assert_eq!(
        status.last_successful_run_start.as_deref(),
        Some(started.to_string().as_str())
    );
    let last: jiff::Timestamp = status
        .last_schedule_time
        .as_deref()
        .expect("lastScheduleTime")
        .parse()
        .expect("RFC 3339");
    assert!(last >= second_slot, "{last} {second_slot}");
}

const TAKEN: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: nightly}
spec:
  schedule:
    cron: "* * * * *"
    input: {region: eu}
  steps:
    - {key: a, condition: {when: "true"}}
"#;

/// The next minute slot at least 15 s away, so the Run made for it is in
/// place before the schedule reaches it.
async fn a_slot_ahead() -> jiff::Timestamp {
    loop {
        let now = jiff::Timestamp::now();
        let next = jiff::Timestamp::from_second((now.as_second() / 60 + 1) * 60).expect("a time");
        if next.duration_since(now) >= jiff::SignedDuration::from_secs(15) {
            return next;
        }
        tokio::time::sleep(Duration::from_secs(16)).await;
    }
}

#[tokio::test]
async fn a_run_made_in_advance_under_a_slots_name_does_not_take_the_slot() {
    let ns = TestNamespace::new().await.expect("namespace");
    let kubectl = Kubectl::new().await;
    kubectl.install_crds().await;
    let flows: Api<Flow> = ns.api();
    let runs: Api<Run> = ns.api();
    // A member creates the next slot's Run before the schedule does, with an
    // input of their own and every mark of a scheduled Run but its creator.
    let slot = a_slot_ahead().await;
    let name = names::scheduled_run("nightly", slot);
    let foreign = json!({
        "apiVersion": "coxswain.dev/v1alpha1",
        "kind": "Run",
        "metadata": {
            "name": name,
            "labels": {names::FLOW_LABEL: "nightly"},
            "annotations": {
                names::SCHEDULED_AT_ANNOTATION: slot.to_string(),
                names::SINCE_ANNOTATION: "",
                names::CREATED_BY_ANNOTATION: "mallory",
            },
        },
        "spec": {"flowRef": {"name": "nightly"}, "input": {"region": "attacker"}},
    });
    kubectl
        .0
        .run_with_stdin(
            &["create", "-n", ns.name(), "-f", "-"],
            Some(&foreign.to_string()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let _controller = FlowController::start(&ns).await;
    kubectl.apply(ns.name(), TAKEN);

    // The slot is recorded as taken, on the Flow, naming the Run.
    let events: Api<k8s_openapi::api::events::v1::Event> = ns.api();
    let note = wait_for("the taken slot's event", SLOT_BOUND, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list.items.into_iter().find_map(|e| {
            let about_flow =
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nightly");
            (about_flow && e.reason.as_deref() == Some("ScheduleSlotTaken"))
                .then(|| e.note.unwrap_or_default())
        }))
    })
    .await
    .expect("an Event on the Flow");
    assert!(
        note.contains(&name) && note.contains("mallory") && note.contains("missed"),
        "{note}"
    );
    // The foreign Run is left as it was: not cancelled, its input its own.
    let left = runs.get(&name).await.expect("the foreign run");
    assert!(!left.spec.cancel);
    assert_eq!(left.spec.input, Some(json!({"region": "attacker"})));

    // The next slot is the schedule's own, with the schedule's input.
    let next = slot + jiff::SignedDuration::from_mins(1);
    let own_name = names::scheduled_run("nightly", next);
    let own = wait_for("the next slot's own run", SLOT_BOUND, || async {
        Ok(runs.get_opt(&own_name).await?)
    })
    .await
    .expect("the schedule started the next slot");
    assert_eq!(own.spec.input, Some(json!({"region": "eu"})));
    let me = coxswain_k8s::admission::whoami(&ns.client())
        .await
        .expect("whoami");
    assert_eq!(
        own.annotations()[names::CREATED_BY_ANNOTATION],
        me,
        "the schedule's Run says who made it"
    );
    // `$SINCE` comes from the schedule's own runs only.
    assert_eq!(own.annotations()[names::SINCE_ANNOTATION], "");
    let flow = flows.get("nightly").await.expect("flow");
    let last: jiff::Timestamp = flow
        .status
        .and_then(|s| s.last_schedule_time)
        .expect("lastScheduleTime")
        .parse()
        .expect("RFC 3339");
    assert!(last >= next, "{last} {next}");
}
