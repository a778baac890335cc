//! What the survival tests (`crash.rs`, `failover.rs`) share: the flow
//! with every kind of work, the http server that records each call, the
//! watch that checks no Run's status goes backwards, the person who
//! approves, and the final checks.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::get;
use coxswain_core::api::{Run, RunStatus, StepPhase};
use coxswain_e2e::{Kubectl, TestNamespace, free_finished_pods, wait_for};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt, api::ListParams};
use serde_json::{Value, json};

mod crash;
pub mod forward;

#[allow(unused_imports, reason = "failover.rs uses the rest of the module")]
pub use crash::crash_test;

/// Generous bound for all runs to finish once the killing stops.
pub const FINISH_BOUND: Duration = Duration::from_secs(600);

/// How long the http server holds each call, so kills land mid-call.
pub const CALL_TIME: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------- the flow

/// The flow every run follows. Run input `{"num": N, "id": "rN"}` (`n` would be read by kubectl, YAML 1.1, as `false`).
pub fn flow(addr: SocketAddr) -> String {
    format!(
        r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: crash}}
spec:
  output:
    base: $steps.prepare.output.base
    fan: $steps.fan.output.by_key
    bumped: $steps.bump.output.body.v
    fetched: $steps.fetch.output.body.value
    published: $steps.publish.output.published
  steps:
    - key: prepare
      input: {{num: $input.num}}
      script:
        source: |
          printf '{{"base": %d}}' $(( $(tr -dc 0-9 < "$INPUTS/num") * 10 ))
    - key: fan
      parallel:
        parts:
          - {{key: left, input: {{base: $steps.prepare.output.base, k: 1}}}}
          - {{key: right, input: {{base: $steps.prepare.output.base, k: 2}}}}
        step:
          script:
            source: |
              printf '{{"v": %d}}' $(( $(tr -dc 0-9 < "$INPUTS/base") + $(tr -dc 0-9 < "$INPUTS/k") ))
    - key: count
      loop:
        until: "$loop.iteration >= 4"
        maxIterations: 5
        steps:
          - key: which
            condition:
              paths:
                - {{name: p1, when: "$loop.iteration == 1"}}
                - {{name: p2, when: "$loop.iteration == 2"}}
                - {{name: p3, when: "$loop.iteration == 3"}}
              otherwise: p4
          - key: bump
            http: {{url: "http://{addr}/bump?id={{{{input.json.id}}}}&pass={{{{which.json.result}}}}"}}
    - key: fetch
      http: {{url: "http://{addr}/fetch?id={{{{input.json.id}}}}&base={{{{prepare.json.base}}}}"}}
    - key: review
      approval: {{decisions: [approve], show: [fetch]}}
    - key: publish
      after: [review.approve]
      input: {{v: $steps.fetch.output.body.value}}
      script:
        source: |
          printf '{{"published": %d}}' $(( $(tr -dc 0-9 < "$INPUTS/v") + 1 ))
"#
    )
}

/// What run `n` must end with, computed here from the flow's meaning.
pub fn expected_output(n: i64) -> Value {
    let base = n * 10;
    let fetched = 2 * base + n;
    json!({
        "base": base,
        "fan": {"left": {"v": base + 1}, "right": {"v": base + 2}},
        "bumped": bump(n, PASSES),
        "fetched": fetched,
        "published": fetched + 1,
    })
}

/// How many passes the flow's loop makes.
pub const PASSES: i64 = 4;

/// The http server's answer to pass `pass` of run `n`'s loop.
pub fn bump(n: i64, pass: i64) -> i64 {
    n * 100 + pass
}

/// The logical http requests of run `n` (path and query, as sent).
pub fn expected_requests(n: i64) -> Vec<String> {
    let mut requests: Vec<String> = (1..=PASSES)
        .map(|p| format!("/bump?id=r{n}&pass=p{p}"))
        .collect();
    requests.push(format!("/fetch?id=r{n}&base={}", n * 10));
    requests
}

/// The script attempts of a run with uid `uid`, in the form the controller
/// writes in each Job's `coxswain.dev/work` annotation.
pub fn expected_jobs(uid: &str) -> Vec<String> {
    let mut jobs: Vec<String> = [
        "prepare/a1",
        "fan/1.left/a1",
        "fan/1.right/a1",
        "publish/a1",
    ]
    .iter()
    .map(|w| format!("{uid}/{w}"))
    .collect();
    jobs.sort();
    jobs
}

// ------------------------------------------------------- the http server

/// One call the server answered.
#[derive(Clone, Debug)]
pub struct Call {
    /// Path and query, which name the logical request.
    pub target: String,
    /// Its `Idempotency-Key` (empty when missing).
    pub key: String,
    /// When it came, in ms since the test started ([`since_start`]).
    pub at: u128,
}

/// Milliseconds since the test process first asked, for logs that line up
/// the calls with the kills.
pub fn since_start() -> u128 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis()
}

/// A local http server that answers the flow's calls from their query
/// alone (so a repeat gets the same answer) and records every call.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    pub fn record(&self, path: &str, query: &HashMap<String, String>, headers: &HeaderMap) {
        let mut pairs: Vec<String> = ["id", "pass", "base"]
            .iter()
            .filter_map(|k| query.get(*k).map(|v| format!("{k}={v}")))
            .collect();
        pairs.dedup();
        let key = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(Call {
            target: format!("{path}?{}", pairs.join("&")),
            key,
            at: since_start(),
        });
    }

    pub fn all(&self) -> Vec<Call> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub fn number(text: Option<&String>) -> i64 {
    text.map(|t| t.trim_start_matches(|c: char| !c.is_ascii_digit()))
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1)
}

async fn serve() -> (SocketAddr, Calls) {
    type Q = Query<HashMap<String, String>>;
    let calls = Calls::default();
    let app = axum::Router::new()
        .route(
            "/bump",
            get(
                |State(c): State<Calls>, Query(q): Q, headers: HeaderMap| async move {
                    c.record("/bump", &q, &headers);
                    tokio::time::sleep(CALL_TIME).await;
                    axum::Json(json!({"v": bump(number(q.get("id")), number(q.get("pass")))}))
                },
            ),
        )
        .route(
            "/fetch",
            get(
                |State(c): State<Calls>, Query(q): Q, headers: HeaderMap| async move {
                    c.record("/fetch", &q, &headers);
                    tokio::time::sleep(CALL_TIME).await;
                    let value = 2 * number(q.get("base")) + number(q.get("id"));
                    axum::Json(json!({"value": value}))
                },
            ),
        )
        .with_state(calls.clone());
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (addr, calls)
}

// ------------------------------------------------------------ the watch

/// What the watch on the Runs saw: the latest status of each and every
/// step backwards it caught.
#[derive(Default)]
pub struct Watched {
    pub latest: HashMap<String, RunStatus>,
    /// Run uid → name.
    pub names: HashMap<String, String>,
    pub events: usize,
    pub backwards: Vec<String>,
}

pub type Watch = Arc<Mutex<Watched>>;

/// Watches every Run of `runs`, checking each event against the one
/// before it ([`forward::check`]).
pub fn watch_runs(runs: Api<Run>) -> Watch {
    let watched = Watch::default();
    let into = watched.clone();
    tokio::spawn(async move {
        let mut stream = watcher(runs, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(item) = stream.next().await {
            let mut w = into.lock().unwrap_or_else(|e| e.into_inner());
            let run = match item {
                Ok(run) => run,
                Err(e) => {
                    w.backwards.push(format!("the watch failed: {e}"));
                    continue;
                }
            };
            let name = run.name_any();
            let now = run.status.clone().unwrap_or_default();
            w.events += 1;
            if let Some(before) = w.latest.get(&name) {
                let found = forward::check(before, &now);
                w.backwards
                    .extend(found.into_iter().map(|p| format!("run {name}: {p}")));
            }
            w.names.insert(run.uid().unwrap_or_default(), name.clone());
            w.latest.insert(name, now);
        }
    });
    watched
}

/// Whether the attempt an `Idempotency-Key` (`uid/step/…/attempt`) names
/// has ended in its run's status, or its run has.
fn recorded(w: &Watched, key: &str) -> bool {
    let parts: Vec<&str> = key.split('/').collect();
    let (Some(uid), Some(step), Some(attempt)) = (
        parts.first(),
        parts.get(1),
        parts.last().and_then(|a| a.parse::<i32>().ok()),
    ) else {
        return false;
    };
    let Some(status) = w.names.get(*uid).and_then(|n| w.latest.get(n)) else {
        return false;
    };
    status.phase.is_over()
        || status.steps.get(*step).is_some_and(|s| {
            s.attempts.iter().any(|a| {
                a.number == attempt && matches!(a.status, StepPhase::Completed | StepPhase::Failed)
            })
        })
}

/// How many of `names` the watch has not yet seen end.
pub fn unfinished(watch: &Watch, names: &[String]) -> usize {
    let w = watch.lock().unwrap_or_else(|e| e.into_inner());
    names
        .iter()
        .filter(|n| !w.latest.get(*n).is_some_and(|s| s.phase.is_over()))
        .count()
}

// --------------------------------------------------- the test's helpers

/// The executable the controllers' Jobs copy into each step pod: on the
/// stand-in node the stripped `coxswain` (55 MiB, not 340), or dozens of
/// pods at once would fill the disk; on the real node the image's own.
pub fn job_executable() -> String {
    if coxswain_e2e::node() == coxswain_e2e::Node::Real {
        // The image's static executable: pods there run images.
        return coxswain_k8s::jobs::IN_IMAGE_EXECUTABLE.to_string();
    }
    coxswain_e2e::stripped_coxswain_bin()
        .expect("the coxswain binary (cargo build -p coxswain)")
        .to_string_lossy()
        .into_owned()
}

/// A seeded random number generator (SplitMix64): the same seed gives the
/// same kill moments.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A duration in `[low, high)`.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let span = (high - low).as_millis().max(1) as u64;
        low + Duration::from_millis(self.next() % span)
    }
}

pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed: `CRASH_SEED`, else the clock.
pub fn seed() -> u64 {
    env_number(
        "CRASH_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    )
}

/// Approves unanswered Approvals of the namespace with `kubectl patch`, as
/// a person would, as many as `allowed` says so far, until `stop`; returns
/// how many it approved.
pub fn approve_all(
    kubectl: Arc<Kubectl>,
    ns: String,
    allowed: Arc<std::sync::atomic::AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    tokio::task::spawn_blocking(move || {
        let mut approved = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if approved >= allowed.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            let list = kubectl
                .run(&["get", "approvals", "-n", &ns, "-o", "json"])
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .unwrap_or(Value::Null);
            for a in list["items"].as_array().cloned().unwrap_or_default() {
                if !a["spec"]["decision"].is_null()
                    || approved >= allowed.load(std::sync::atomic::Ordering::Relaxed)
                {
                    continue;
                }
                let name = a["metadata"]["name"].as_str().unwrap_or_default();
                let patched = kubectl.run(&[
                    "patch",
                    "approval",
                    name,
                    "-n",
                    &ns,
                    "--type",
                    "merge",
                    "-p",
                    r#"{"spec":{"decision":"approve"}}"#,
                ]);
                if patched.is_ok() {
                    approved += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        approved
    })
}

/// Frees the executables finished pods copied, every few seconds, until
/// `stop` (see [`free_finished_pods`]).
pub fn free_disk(
    pods: Api<Pod>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = free_finished_pods(&pods).await;
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let _ = free_finished_pods(&pods).await;
    })
}

/// The namespace, kubectl, the flow and the runs, with a watch on them and
/// a person approving what they are asked.
pub struct Scene {
    pub ns: TestNamespace,
    pub kubectl: Arc<Kubectl>,
    pub calls: Calls,
    pub watch: Watch,
    /// Run name → its `n`.
    pub runs: BTreeMap<String, i64>,
    pub stop: Arc<std::sync::atomic::AtomicBool>,
    /// How many approvals the person may have given so far (runs wait at
    /// their approval until then, so they do not all end before the test
    /// is done with them).
    pub approving: Arc<std::sync::atomic::AtomicUsize>,
    pub approver: Option<tokio::task::JoinHandle<usize>>,
    pub freer: Option<tokio::task::JoinHandle<()>>,
}

impl Scene {
    /// Installs the CRDs in a fresh namespace and serves the http calls.
    pub async fn new() -> Scene {
        let kubectl = Kubectl::new().await.expect("kubectl");
        kubectl.install_crds().await.expect("CRDs");
        let ns = TestNamespace::new().await.expect("namespace");
        let (addr, calls) = serve().await;
        kubectl
            .apply(ns.name(), &flow(addr))
            .unwrap_or_else(|e| panic!("{e}"));
        let watch = watch_runs(ns.api());
        Scene {
            ns,
            kubectl: Arc::new(kubectl),
            calls,
            watch,
            runs: BTreeMap::new(),
            stop: Arc::default(),
            approving: Arc::default(),
            approver: None,
            freer: None,
        }
    }

    /// Creates `count` Runs with `kubectl create`, and the person who
    /// approves once [`Scene::approve`] is called.
    pub fn start_runs(&mut self, count: i64) {
        for n in 1..=count {
            let name = self
                .kubectl
                .create_run(
                    self.ns.name(),
                    "crash",
                    &json!({"num": n, "id": format!("r{n}")}),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            self.runs.insert(name, n);
        }
        self.approver = Some(approve_all(
            self.kubectl.clone(),
            self.ns.name().to_string(),
            self.approving.clone(),
            self.stop.clone(),
        ));
        self.freer = Some(free_disk(self.ns.api(), self.stop.clone()));
    }

    /// The person may give `count` approvals in all, from now on.
    pub fn approve(&self, count: usize) {
        self.approving
            .store(count, std::sync::atomic::Ordering::Relaxed);
    }

    /// The logical requests whose latest call the Runs have not recorded
    /// yet (the attempt its `Idempotency-Key` names has not ended, and its
    /// run has not either).
    pub fn unrecorded_calls(&self) -> Vec<String> {
        let calls = self.calls.all();
        let w = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let mut open: Vec<String> = calls
            .iter()
            .filter(|c| !recorded(&w, &c.key))
            .map(|c| c.target.clone())
            .collect();
        open.sort();
        open.dedup();
        open
    }

    /// Waits until none of `calls` (logical requests) is unrecorded.
    pub async fn wait_recorded(&self, calls: &[String], logs: impl Fn() -> String) {
        let waited = wait_for(
            "the calls in flight to be recorded",
            FINISH_BOUND,
            || async {
                let open = self.unrecorded_calls();
                Ok((!calls.iter().any(|c| open.contains(c))).then_some(()))
            },
        )
        .await;
        if let Err(e) = waited {
            panic!(
                "{e}: {:?}\ncontroller log (tail):\n{}",
                self.unrecorded_calls(),
                tail(&logs(), 120)
            );
        }
    }

    /// How many status events the watch has seen so far.
    pub fn events(&self) -> usize {
        self.watch.lock().unwrap_or_else(|e| e.into_inner()).events
    }

    pub fn names(&self) -> Vec<String> {
        self.runs.keys().cloned().collect()
    }

    pub fn unfinished(&self) -> usize {
        unfinished(&self.watch, &self.names())
    }

    /// Waits until every run has ended; stops approving.
    pub async fn wait_all_over(&mut self, logs: impl Fn() -> String) -> usize {
        let names = self.names();
        let waited = wait_for("every run to end", FINISH_BOUND, || async {
            Ok((unfinished(&self.watch, &names) == 0).then_some(()))
        })
        .await;
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let approved = match self.approver.take() {
            Some(a) => a.await.unwrap_or_default(),
            None => 0,
        };
        if let Some(f) = self.freer.take() {
            let _ = f.await;
        }
        if let Err(e) = waited {
            let table = self
                .kubectl
                .run(&["get", "runs", "-n", self.ns.name()])
                .unwrap_or_default();
            panic!(
                "{e}\n{table}\ncontroller log (tail):\n{}",
                tail(&logs(), 120)
            );
        }
        approved
    }

    /// Checks everything the test promises; returns the figures.
    pub async fn check(&self) -> Figures {
        let list = self
            .kubectl
            .json(&["get", "runs", "-n", self.ns.name(), "-o", "json"]);
        let mut uids = BTreeMap::new();
        for run in list["items"].as_array().cloned().unwrap_or_default() {
            let name = run["metadata"]["name"].as_str().unwrap_or_default();
            let n = self.runs[name];
            let status = &run["status"];
            assert_eq!(status["phase"], "Succeeded", "run {name}: {status}");
            assert_eq!(status["output"], expected_output(n), "run {name}: {status}");
            for step in ["prepare", "fetch", "review", "publish"] {
                assert_eq!(
                    attempts(&status["steps"][step]),
                    1,
                    "run {name} step {step}: {status}"
                );
            }
            assert_eq!(
                attempts(&status["steps"]["bump"]) as i64,
                PASSES,
                "{status}"
            );
            for part in status["steps"]["fan"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                assert_eq!(attempts(&part), 1, "run {name}: {part}");
            }
            uids.insert(
                run["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                name.to_string(),
            );
        }
        assert_eq!(uids.len(), self.runs.len(), "{list}");
        let jobs = self.check_jobs(&uids).await;
        let (logical, repeated, max) = self.check_calls();
        let w = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            w.backwards.is_empty(),
            "a status went backwards:\n{}",
            w.backwards.join("\n")
        );
        Figures {
            jobs,
            logical,
            repeated,
            max_calls: max,
            events: w.events,
        }
    }

    /// Exactly one Job per script attempt: the Jobs the controller labelled
    /// for each run are those its attempts name, none twice.
    pub async fn check_jobs(&self, uids: &BTreeMap<String, String>) -> usize {
        let jobs: Api<Job> = self.ns.api();
        let list = jobs
            .list(&ListParams::default().labels("coxswain.dev/role=step"))
            .await
            .expect("jobs");
        let mut by_run: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for job in &list.items {
            let uid = job
                .labels()
                .get("coxswain.dev/run-uid")
                .cloned()
                .unwrap_or_default();
            let work = job
                .annotations()
                .get("coxswain.dev/work")
                .cloned()
                .unwrap_or_default();
            by_run.entry(uid).or_default().push(work);
        }
        for (uid, name) in uids {
            let mut made = by_run.remove(uid).unwrap_or_default();
            made.sort();
            assert_eq!(made, expected_jobs(uid), "the Jobs of run {name}");
        }
        assert!(by_run.is_empty(), "Jobs of no run: {by_run:?}");
        list.items.len()
    }

    /// Each logical request was made, at most twice, a repeat with the
    /// same key; no key served two requests. Returns (logical requests,
    /// repeated ones, most calls of one).
    pub fn check_calls(&self) -> (usize, usize, usize) {
        let mut by_target: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut times: BTreeMap<String, Vec<u128>> = BTreeMap::new();
        for call in self.calls.all() {
            times.entry(call.target.clone()).or_default().push(call.at);
            by_target.entry(call.target).or_default().push(call.key);
        }
        let mut expected: Vec<String> = self
            .runs
            .values()
            .flat_map(|n| expected_requests(*n))
            .collect();
        expected.sort();
        let seen: Vec<String> = by_target.keys().cloned().collect();
        assert_eq!(seen, expected, "the logical requests made");
        let mut keys_seen: HashMap<String, String> = HashMap::new();
        for (target, keys) in &by_target {
            assert!(
                keys.len() <= 2,
                "{target} was called {} times: {keys:?}, at {:?} ms",
                keys.len(),
                times[target]
            );
            assert!(
                keys.iter().all(|k| !k.is_empty() && k == &keys[0]),
                "{target} was repeated with another Idempotency-Key: {keys:?}"
            );
            if let Some(other) = keys_seen.insert(keys[0].clone(), target.clone()) {
                panic!("{target} and {other} share the Idempotency-Key {}", keys[0]);
            }
        }
        let repeated = by_target.values().filter(|k| k.len() > 1).count();
        let max = by_target.values().map(Vec::len).max().unwrap_or(0);
        (by_target.len(), repeated, max)
    }
}

pub fn attempts(record: &Value) -> usize {
    record["attempts"].as_array().map(Vec::len).unwrap_or(0)
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a test saw, printed for the README's figures.
#[derive(Debug)]
#[allow(dead_code)]
pub struct Figures {
    pub jobs: usize,
    pub logical: usize,
    pub repeated: usize,
    pub max_calls: usize,
    pub events: usize,
}
