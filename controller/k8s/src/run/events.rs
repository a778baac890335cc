//! Events so `kubectl describe run` tells the story: by default one per
//! status write, naming every step transition and the run's outcome in it
//! ([`fold`]); with `--events per-transition`, one per step transition;
//! with `--events notable`, only what a person may act on ([`notable`]).
//! Events are best effort: a lost one never holds a run back — they are
//! sent in the background ([`Publisher`]), after the reconcile that made
//! them went on to launch the next step.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Api, Resource};
use tokio::sync::mpsc;

use coxswain_core::api::{Run, RunPhase, RunStatus, StartedBy, StepPhase, StepStatus};

/// The warning that the controller found `kind` `name` where an object of
/// its own belongs and left it alone: `reason` says what is wrong with it.
pub fn tampered(kind: &str, name: &str, reason: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "Tampered".into(),
        note: Some(cut(reason.to_string())),
        action: format!("Verify{kind}"),
        secondary: Some(ObjectReference {
            kind: Some(kind.to_string()),
            name: Some(name.to_string()),
            ..Default::default()
        }),
    }
}

/// What became of a run's workspace (`WorkspaceCheckout`, `WorkspaceReady`,
/// `WorkspacePush`, `WorkspacePushed`, `WorkspaceFailed`): a warning when
/// `warning`.
pub fn workspace(reason: &str, note: String, warning: bool) -> Event {
    Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(cut(note)),
        action: "Workspace".into(),
        secondary: None,
    }
}

/// The warning that a run waits for its Flow, which does not exist (yet:
/// Argo CD may sync it after the Run).
pub fn flow_missing(reason: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "FlowNotFound".into(),
        note: Some(cut(format!("{reason}; the run starts once it exists"))),
        action: "PinFlow".into(),
        secondary: None,
    }
}

/// The events that tell how `old` became `new`.
pub fn transitions(old: &RunStatus, new: &RunStatus) -> Vec<Event> {
    let mut events = Vec::new();
    for (key, record) in &new.steps {
        let before = old.steps.get(key);
        if let Some(event) = step_event(key, before, record) {
            events.push(event);
        }
    }
    if old.phase != new.phase {
        events.push(run_event(new));
    }
    events
}

/// The events of one status write as one Event: its note lists each
/// transition in order; its reason and type are those of the weightiest
/// (the run's end, then a failure, a person asked, a step completed, a
/// step started), so filters on reasons still find what they look for.
/// One event (or none) is returned as it is.
pub fn fold(events: Vec<Event>) -> Vec<Event> {
    if events.len() <= 1 {
        return events;
    }
    let weight = |e: &Event| {
        WEIGHTS
            .iter()
            .position(|w| e.reason.starts_with(w))
            .unwrap_or(WEIGHTS.len())
    };
    let Some(reason) = events
        .iter()
        .min_by_key(|e| weight(e))
        .map(|e| e.reason.clone())
    else {
        return events;
    };
    let warning = events.iter().any(|e| matches!(e.type_, EventType::Warning));
    let note = events
        .iter()
        .filter_map(|e| e.note.as_deref())
        .collect::<Vec<_>>()
        .join("; ");
    let mut action = events
        .iter()
        .map(|e| e.action.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if action.len() > ACTION_MAX {
        action.truncate(coxswain_core::text::floor_boundary(&action, ACTION_MAX));
    }
    vec![Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason,
        note: Some(cut(note)),
        action,
        secondary: None,
    }]
}

/// Whether `event` is one a person may need to act on: the run's end, a
/// warning (a step failed or is tried again, a Tampered object), a step
/// waiting for a person. A step that started or completed as planned is
/// not; the status says it.
pub fn notable(event: &Event) -> bool {
    matches!(event.type_, EventType::Warning)
        || matches!(
            event.reason.as_str(),
            "RunSucceeded" | "RunWaiting" | "StepWaiting"
        )
}

/// Reasons by weight, heaviest first (a prefix matches `RunSucceeded` …).
const WEIGHTS: [&str; 6] = [
    "RunFailed",
    "RunCancelled",
    "Run",
    "StepFailed",
    "StepWaiting",
    "StepCompleted",
];

fn step_event(key: &str, before: Option<&StepStatus>, now: &StepStatus) -> Option<Event> {
    let attempts = |r: &StepStatus| r.attempts.len();
    let retrying = |r: &StepStatus| r.retry_at.is_some();
    let same = before.is_some_and(|b| {
        b.status == now.status && attempts(b) == attempts(now) && retrying(b) == retrying(now)
    });
    if same || now.status == StepPhase::Pending {
        return None;
    }
    let attempt = attempts(now);
    let (reason, type_, note) = match now.status {
        StepPhase::Running if retrying(now) => {
            let error = tail(
                ": ",
                now.attempts
                    .last()
                    .and_then(|a| a.error.as_ref())
                    .map(|e| &e.message),
            );
            let at = now.retry_at.as_deref().unwrap_or_default();
            (
                "StepRetrying",
                EventType::Warning,
                format!("step {key}: attempt {attempt} failed{error}; it is tried again at {at}"),
            )
        }
        StepPhase::Running => ("StepStarted", EventType::Normal, started(key, attempt, now)),
        StepPhase::Waiting => (
            "StepWaiting",
            EventType::Normal,
            format!("step {key}: waiting for a person (attempt {attempt})"),
        ),
        StepPhase::Completed => {
            let exit = tail(", exit ", now.exit.as_ref());
            let note = format!("step {key}: completed{exit}");
            ("StepCompleted", EventType::Normal, note)
        }
        StepPhase::Failed => {
            let error = tail(": ", now.error.as_ref().map(|e| &e.message));
            let note = format!("step {key}: attempt {attempt} failed{error}");
            ("StepFailed", EventType::Warning, note)
        }
        StepPhase::Skipped => {
            let note = format!("step {key}: skipped{}", tail(": ", now.reason.as_ref()));
            ("StepSkipped", EventType::Normal, note)
        }
        StepPhase::Pending => return None,
    };
    // Events with the same action and reason are merged into one series
    // (keeping the first note): each step's attempt is an action of its own.
    let mut action = format!("Step {key} attempt {attempt}");
    action.truncate(ACTION_MAX);
    Some(Event {
        type_,
        reason: reason.into(),
        note: Some(cut(note)),
        action,
        secondary: None,
    })
}

/// `step draft: attempt 3 started`, saying whether it is a retry (and why
/// the one before failed) or work a reviewer sent back.
fn started(key: &str, attempt: usize, now: &StepStatus) -> String {
    let after = |error: Option<&coxswain_core::api::StepError>| {
        error
            .map(|e| format!(", after attempt {} failed: {}", attempt - 1, e.message))
            .unwrap_or_default()
    };
    match now.started_by() {
        StartedBy::First => format!("step {key}: attempt {attempt} started"),
        StartedBy::Retry { after: error, .. } => {
            format!("step {key}: attempt {attempt} started{}", after(error))
        }
        StartedBy::SentBack {
            note, after: error, ..
        } => {
            let feedback = note
                .instructions
                .as_deref()
                .map(|f| format!(": {f}"))
                .unwrap_or_default();
            format!(
                "step {key}: attempt {attempt} started again, {}{feedback}{}",
                note.sent_back(),
                after(error)
            )
        }
    }
}

fn run_event(status: &RunStatus) -> Event {
    let (reason, type_) = match status.phase {
        RunPhase::Pending => ("RunPending", EventType::Normal),
        RunPhase::Running => ("RunRunning", EventType::Normal),
        RunPhase::Waiting => ("RunWaiting", EventType::Normal),
        RunPhase::Succeeded => ("RunSucceeded", EventType::Normal),
        RunPhase::Failed => ("RunFailed", EventType::Warning),
        RunPhase::Cancelled => ("RunCancelled", EventType::Warning),
    };
    let note = match &status.error {
        Some(error) => format!("{:?}: {}", status.phase, error.message),
        None => format!("{:?}", status.phase),
    };
    Event {
        type_,
        reason: reason.into(),
        note: Some(cut(note)),
        action: "Run".into(),
        secondary: None,
    }
}

/// The longest action the Events API takes.
const ACTION_MAX: usize = 128;

/// An event's note holds at most 1 kB.
fn cut(mut note: String) -> String {
    if note.len() > 1000 {
        note.truncate(coxswain_core::text::floor_boundary(&note, 990));
        note.push_str(" (cut)");
    }
    note
}

/// How many reconciles' events may wait to be sent; past it, events are
/// dropped (they are best effort) rather than memory growing without end.
const QUEUE: usize = 8192;

/// How many reconciles' events are sent at once (each one's in order).
const PARALLEL: usize = 8;

/// The events of one reconcile, about one object.
struct Batch {
    regarding: ObjectReference,
    events: Vec<Event>,
}

/// Sends Events in the background. Awaiting each Event's create in the
/// reconcile put one API round trip per transition between a step's end
/// and the next step's start; and kube's `Recorder` keeps every Event it
/// sent for six minutes (to merge repeats into a series, which ours never
/// are: each names its step and attempt), scanning that cache on every
/// send — memory and time that grew with the steps per second.
#[derive(Clone)]
pub struct Publisher {
    queue: mpsc::Sender<Batch>,
}

impl Publisher {
    /// Starts the sender; Events go out as `reporter` (the controller and
    /// this replica). Must be called inside a Tokio runtime.
    pub fn start(client: kube::Client, reporter: Reporter) -> Self {
        let (queue, batches) = mpsc::channel(QUEUE);
        tokio::spawn(send_all(client, Arc::new(reporter), batches));
        Publisher { queue }
    }

    /// Queues `events` about `run`, in order; returns at once. Events that
    /// do not fit in the queue are dropped and logged.
    pub fn publish(&self, run: &Run, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let batch = Batch {
            regarding: run.object_ref(&()),
            events,
        };
        if let Err(e) = self.queue.try_send(batch) {
            tracing::debug!("an event was dropped: {e}");
        }
    }
}

async fn send_all(client: kube::Client, reporter: Arc<Reporter>, batches: mpsc::Receiver<Batch>) {
    futures::stream::unfold(
        batches,
        |mut rx| async move { rx.recv().await.map(|b| (b, rx)) },
    )
    .for_each_concurrent(PARALLEL, |batch| {
        let (client, reporter) = (client.clone(), reporter.clone());
        async move { send(&client, &reporter, batch).await }
    })
    .await;
}

async fn send(client: &kube::Client, reporter: &Reporter, batch: Batch) {
    let namespace = batch.regarding.namespace.clone().unwrap_or_default();
    let api: Api<K8sEvent> = Api::namespaced(client.clone(), &namespace);
    for event in &batch.events {
        let object = to_k8s(event, &batch.regarding, reporter, Timestamp::now());
        if let Err(e) = api.create(&PostParams::default(), &object).await {
            tracing::debug!(error = %e, "could not publish an event");
        }
    }
}

/// The Event object for `event` about `regarding` at `now`, as kube's
/// `Recorder` makes it (events.k8s.io/v1), with a name unique even for
/// two events of one object in the same nanosecond.
fn to_k8s(
    event: &Event,
    regarding: &ObjectReference,
    reporter: &Reporter,
    now: Timestamp,
) -> K8sEvent {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seq = NEXT.fetch_add(1, Ordering::Relaxed);
    let owner = regarding.name.as_deref().unwrap_or(&reporter.controller);
    K8sEvent {
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        note: event.note.clone(),
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(format!(
                "{owner}.{:x}{:04x}",
                now.as_nanosecond(),
                seq & 0xffff
            )),
            ..Default::default()
        },
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        related: event.secondary.clone(),
        ..Default::default()
    }
}

/// `sep` and what `part` says, or nothing without it.
fn tail(sep: &str, part: Option<&impl std::fmt::Display>) -> String {
    part.map(|p| format!("{sep}{p}")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{Attempt, StepError};

    fn step(status: StepPhase, attempts: usize) -> StepStatus {
        StepStatus {
            status,
            attempts: (1..=attempts as i32)
                .map(|number| Attempt {
                    number,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn each_transition_is_an_event_of_its_own_and_nothing_else_is() {
        let mut old = RunStatus::default();
        old.steps
            .insert("draft".into(), step(StepPhase::Running, 1));
        old.steps
            .insert("same".into(), step(StepPhase::Completed, 1));
        let mut new = old.clone();
        new.phase = RunPhase::Failed;
        let mut failed = step(StepPhase::Failed, 1);
        failed.error = Some(StepError {
            code: "script.failed".into(),
            message: "exit 3".into(),
        });
        new.steps.insert("draft".into(), failed);
        new.steps.insert("next".into(), step(StepPhase::Running, 1));
        let events = transitions(&old, &new);
        let seen: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e.reason.as_str(), e.action.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("StepFailed", "Step draft attempt 1"),
                ("StepStarted", "Step next attempt 1"),
                ("RunFailed", "Run"),
            ]
        );
        assert_eq!(events[0].type_, EventType::Warning);
        assert!(
            events[0]
                .note
                .as_deref()
                .is_some_and(|n| n.contains("exit 3"))
        );
        // A second attempt of a running step is a new event, not a repeat.
        let mut again = new.clone();
        again
            .steps
            .insert("next".into(), step(StepPhase::Running, 2));
        let events = transitions(&new, &again);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].action, "Step next attempt 2");
    }

    #[test]
    fn notable_events_are_the_runs_end_failures_and_waits() {
        let mut old = RunStatus::default();
        old.steps.insert("a".into(), step(StepPhase::Running, 1));
        old.steps.insert("b".into(), step(StepPhase::Running, 1));
        let mut new = old.clone();
        new.steps.insert("a".into(), step(StepPhase::Completed, 1));
        new.steps.insert("b".into(), step(StepPhase::Waiting, 1));
        new.steps.insert("c".into(), step(StepPhase::Running, 1));
        new.steps.insert("d".into(), step(StepPhase::Failed, 1));
        new.phase = RunPhase::Running;
        let kept: Vec<String> = transitions(&old, &new)
            .into_iter()
            .filter(notable)
            .map(|e| e.reason)
            .collect();
        assert_eq!(kept, ["StepWaiting", "StepFailed"]);
        let mut ended = new.clone();
        ended.phase = RunPhase::Succeeded;
        let kept: Vec<String> = transitions(&new, &ended)
            .into_iter()
            .filter(notable)
            .map(|e| e.reason)
            .collect();
        assert_eq!(kept, ["RunSucceeded"]);
    }

    fn only_event(old: &RunStatus, new: &RunStatus) -> Event {
        let mut events = transitions(old, new);
        assert_eq!(
            events.len(),
            1,
            "{:?}",
            events.iter().map(|e| &e.note).collect::<Vec<_>>()
        );
        events.remove(0)
    }

    #[test]
    fn a_retry_says_why_the_attempt_before_failed_and_a_send_back_is_no_retry() {
        let mut old = RunStatus::default();
        old.steps
            .insert("flaky".into(), step(StepPhase::Running, 1));
        // Attempt 1 failed; attempt 2 is due later.
        let mut failed = old.clone();
        let record = failed.steps.get_mut("flaky").expect("step");
        record.retry_at = Some("2026-12-01T10:00:05Z".into());
        record.attempts[0].error = Some(StepError {
            code: "script.failed".into(),
            message: "the service is warming up".into(),
        });
        let retrying = only_event(&old, &failed);
        assert_eq!(retrying.reason, "StepRetrying");
        assert_eq!(retrying.type_, EventType::Warning);
        assert_eq!(
            retrying.note.as_deref(),
            Some(
                "step flaky: attempt 1 failed: the service is warming up; it is tried again at 2026-12-01T10:00:05Z"
            )
        );
        // Attempt 2 starts, and says what it follows.
        let mut second = failed.clone();
        let record = second.steps.get_mut("flaky").expect("step");
        record.retry_at = None;
        record.attempts.push(Attempt {
            number: 2,
            ..Default::default()
        });
        let started = only_event(&failed, &second);
        assert_eq!(
            started.note.as_deref(),
            Some(
                "step flaky: attempt 2 started, after attempt 1 failed: the service is warming up"
            )
        );

        // Work a reviewer sent back is done again: not a retry.
        let mut old = RunStatus::default();
        old.steps
            .insert("draft".into(), step(StepPhase::Completed, 1));
        let mut redo = old.clone();
        let record = redo.steps.get_mut("draft").expect("step");
        record.status = StepPhase::Running;
        record.round_start = 1;
        record.attempts.push(Attempt {
            number: 2,
            ..Default::default()
        });
        record.review = Some(coxswain_core::api::ReviewNote {
            from: "review".into(),
            to: "draft".into(),
            reviewer: "alice".into(),
            decision: "changes".into(),
            instructions: Some("Cut the intro.".into()),
            ..Default::default()
        });
        let again = only_event(&old, &redo);
        assert_eq!(again.reason, "StepStarted");
        assert_eq!(
            again.note.as_deref(),
            Some(
                "step draft: attempt 2 started again, sent back by review (changes, alice): Cut the intro."
            )
        );
    }

    fn run_named(name: &str) -> Run {
        let mut run = Run::new(
            name,
            coxswain_core::api::RunSpec {
                flow_ref: coxswain_core::api::FlowRef { name: "f".into() },
                input: None,
                cancel: false,
                from: None,
            },
        );
        run.metadata.namespace = Some("ns".into());
        run.metadata.uid = Some("uid-1".into());
        run
    }

    /// Reads one HTTP request (head and body) from `socket`.
    async fn read_request(socket: &mut tokio::net::TcpStream) -> String {
        use tokio::io::AsyncReadExt;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.expect("read");
            assert!(n > 0, "the connection closed mid-request");
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_string())
                    })
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    return text;
                }
            }
        }
    }

    /// The reconcile hands its events over and goes on: nothing it does
    /// waits for the API server to take them (here a server that reads the
    /// request and never answers), and they still go out, in order.
    #[tokio::test]
    async fn publishing_does_not_wait_for_the_api_server_and_events_go_out_in_order() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let client =
            kube::Client::try_from(kube::Config::new(url.parse().expect("uri"))).expect("client");
        let publisher = Publisher::start(
            client,
            Reporter {
                controller: "coxswain".into(),
                instance: Some("test".into()),
            },
        );
        let mut old = RunStatus::default();
        old.steps.insert("a".into(), step(StepPhase::Running, 1));
        let mut new = old.clone();
        new.steps.insert("a".into(), step(StepPhase::Completed, 1));
        new.steps.insert("b".into(), step(StepPhase::Running, 1));
        // Returns though nothing was answered (it is not even async).
        publisher.publish(&run_named("r1"), transitions(&old, &new));

        let (mut socket, _) = listener.accept().await.expect("accept");
        let first = read_request(&mut socket).await;
        assert!(
            first.starts_with("POST /apis/events.k8s.io/v1/namespaces/ns/events"),
            "{first}"
        );
        assert!(first.contains("\"reason\":\"StepCompleted\""), "{first}");
        assert!(first.contains("\"action\":\"Step a attempt 1\""), "{first}");
        assert!(
            first.contains("\"reportingController\":\"coxswain\""),
            "{first}"
        );
        assert!(
            first.contains("\"name\":\"r1\""),
            "regarding the run: {first}"
        );
        // The second event of the batch waits for the first's answer.
        socket
            .try_write(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
            .expect("answer");
        let second = read_request(&mut socket).await;
        assert!(second.contains("\"reason\":\"StepStarted\""), "{second}");
        assert!(
            second.contains("\"action\":\"Step b attempt 1\""),
            "{second}"
        );
    }

    #[test]
    fn events_of_one_object_in_the_same_instant_get_different_names() {
        let reporter = Reporter {
            controller: "coxswain".into(),
            instance: None,
        };
        let run = run_named("r1");
        let regarding = run.object_ref(&());
        let now = Timestamp::now();
        let event = step_event("a", None, &step(StepPhase::Running, 1)).expect("an event");
        let one = to_k8s(&event, &regarding, &reporter, now);
        let two = to_k8s(&event, &regarding, &reporter, now);
        assert_ne!(one.metadata.name, two.metadata.name);
        assert!(
            one.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("r1.")),
            "{:?}",
            one.metadata.name
        );
        assert_eq!(one.reporting_instance.as_deref(), Some("coxswain"));
        assert_eq!(one.type_.as_deref(), Some("Normal"));
    }

    #[test]
    fn one_write_is_one_event_naming_each_transition_with_the_weightiest_reason() {
        let mut old = RunStatus::default();
        old.steps.insert("a".into(), step(StepPhase::Running, 1));
        let mut new = old.clone();
        new.steps.insert("a".into(), step(StepPhase::Completed, 1));
        new.steps.insert("b".into(), step(StepPhase::Completed, 1));
        new.steps.insert("c".into(), step(StepPhase::Running, 1));
        let folded = fold(transitions(&old, &new));
        assert_eq!(folded.len(), 1);
        let event = &folded[0];
        assert_eq!(event.reason, "StepCompleted");
        assert_eq!(
            event.note.as_deref(),
            Some("step a: completed; step b: completed; step c: attempt 1 started")
        );
        assert_eq!(
            event.action,
            "Step a attempt 1, Step b attempt 1, Step c attempt 1"
        );
        assert_eq!(event.type_, EventType::Normal);

        // A failure that ends the run: the run's end leads, as a warning.
        let mut failed = new.clone();
        let mut c = step(StepPhase::Failed, 1);
        c.error = Some(StepError {
            code: "http.status".into(),
            message: "503".into(),
        });
        failed.steps.insert("c".into(), c);
        failed.phase = RunPhase::Failed;
        let folded = fold(transitions(&new, &failed));
        assert_eq!(folded.len(), 1);
        assert_eq!(folded[0].reason, "RunFailed");
        assert_eq!(folded[0].type_, EventType::Warning);
        assert!(
            folded[0]
                .note
                .as_deref()
                .is_some_and(|n| n.starts_with("step c: attempt 1 failed: 503; Failed")),
            "{:?}",
            folded[0].note
        );
        // A single event stays as it is.
        let mut done = old.clone();
        done.steps.insert("a".into(), step(StepPhase::Completed, 1));
        let one = fold(transitions(&old, &done));
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].reason.as_str(), one[0].action.as_str()),
            ("StepCompleted", "Step a attempt 1")
        );
    }

    #[test]
    fn a_folded_action_stays_within_what_the_api_takes() {
        let mut old = RunStatus::default();
        let mut new = RunStatus::default();
        for i in 0..40 {
            old.steps
                .insert(format!("step-{i}"), step(StepPhase::Running, 1));
            new.steps
                .insert(format!("step-{i}"), step(StepPhase::Completed, 1));
        }
        let folded = fold(transitions(&old, &new));
        assert!(folded[0].action.len() <= ACTION_MAX);
        assert!(folded[0].note.as_deref().is_some_and(|n| n.len() <= 1000));
    }

    #[test]
    fn long_notes_are_cut_and_say_so() {
        let note = cut("é".repeat(800));
        assert!(
            note.len() <= 1000 && note.ends_with("(cut)"),
            "{}",
            note.len()
        );
    }
}
