//! [`InProcess`]: work run as tokio tasks inside this process — the local
//! runner's every step, the controller's http, agent and message steps.
//!
//! What it knows lives in memory only: a new `InProcess` (a restart) knows
//! nothing, so its driver sees [`Observation::Unknown`] for work its status
//! says was running, and launches it again under the same [`WorkId`] (and so
//! the same idempotency key).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use coxswain_core::engine::{Failed, Work, WorkResult, codes, step_error};

use super::Executor;
use super::launch::{Launcher, LauncherError, Observation, WorkId};

/// Runs each piece of work as a tokio task with an [`Executor`], and keeps
/// each result until the driver [`forget`](Launcher::forget)s it. Results
/// are also forgotten when the work is cancelled and when the `InProcess`
/// is dropped; dropping it stops all work still running.
pub struct InProcess<E> {
    executor: Arc<E>,
    shared: Arc<Shared>,
}

/// The ids of work that finished, in the order it finished: what a driver
/// waits on instead of polling. Each id comes once; [`Launcher::observe`]
/// then gives its result.
#[derive(Debug)]
pub struct Finishes(mpsc::UnboundedReceiver<WorkId>);

impl Finishes {
    /// The next work to finish; `None` once its `InProcess` and every task
    /// it started are gone.
    pub async fn next(&mut self) -> Option<WorkId> {
        self.0.recv().await
    }
}

/// What the tasks and the launcher share.
struct Shared {
    entries: Mutex<HashMap<WorkId, Entry>>,
    /// Tells a task's entry from one launched later under the same id
    /// (after a cancel), so a late finisher cannot overwrite it.
    next_token: AtomicU64,
    finishes: mpsc::UnboundedSender<WorkId>,
}

enum Entry {
    Running { token: u64, task: JoinHandle<()> },
    Finished(WorkResult),
}

impl Shared {
    /// The entries; a task that panicked while holding the lock leaves the
    /// map as it was, so the poison is ignored.
    fn entries(&self) -> MutexGuard<'_, HashMap<WorkId, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the result of the task `token` for `id`, unless that task was
    /// cancelled (its entry is gone or belongs to a newer launch).
    fn settle(&self, id: &WorkId, token: u64, result: WorkResult) {
        let mut entries = self.entries();
        let current =
            matches!(entries.get(id), Some(Entry::Running { token: t, .. }) if *t == token);
        if current {
            entries.insert(id.clone(), Entry::Finished(result));
            // No receiver left means no driver is waiting: nothing to wake.
            let _ = self.finishes.send(id.clone());
        }
    }
}

impl<E: Executor + 'static> InProcess<E> {
    /// A launcher running work with `executor`, and the stream of ids of
    /// work that finished.
    pub fn new(executor: Arc<E>) -> (Self, Finishes) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            entries: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(0),
            finishes: sender,
        });
        (InProcess { executor, shared }, Finishes(receiver))
    }
}

/// Which work an [`InProcess`] holds now (running, or finished and not yet
/// forgotten): what cancelling would throw away. A sharded controller
/// reads it to give up idle buckets before busy ones.
#[derive(Clone)]
pub struct Held(Arc<Shared>);

impl Held {
    /// The ids of the work held, in no order.
    pub fn ids(&self) -> Vec<WorkId> {
        self.0.entries().keys().cloned().collect()
    }
}

impl<E> InProcess<E> {
    /// A view of the work held, which outlives nothing it looks at.
    pub fn held(&self) -> Held {
        Held(Arc::clone(&self.shared))
    }

    /// Cancels every piece of work `which` picks (all the work of a Run
    /// being deleted, say) and forgets it; returns how many were running.
    pub async fn cancel_where(&self, which: impl Fn(&WorkId) -> bool) -> usize {
        let tasks: Vec<JoinHandle<()>> = {
            let mut entries = self.shared.entries();
            let ids: Vec<WorkId> = entries.keys().filter(|id| which(id)).cloned().collect();
            ids.iter()
                .filter_map(|id| match entries.remove(id) {
                    Some(Entry::Running { task, .. }) => Some(task),
                    _ => None,
                })
                .collect()
        };
        let running = tasks.len();
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
        running
    }
}

impl<E> std::fmt::Debug for InProcess<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("known", &self.shared.entries().len())
            .finish()
    }
}

impl<E: Executor + 'static> Launcher for InProcess<E> {
    async fn launch(&self, work: &Work) -> Result<(), LauncherError> {
        let id = WorkId::of(work);
        let mut entries = self.shared.entries();
        if entries.contains_key(&id) {
            return Ok(());
        }
        let token = self.shared.next_token.fetch_add(1, Ordering::Relaxed);
        let settle = Settle {
            shared: Arc::clone(&self.shared),
            id: id.clone(),
            token,
            settled: false,
        };
        let task = tokio::spawn(run_one(Arc::clone(&self.executor), work.clone(), settle));
        entries.insert(id, Entry::Running { token, task });
        Ok(())
    }

    async fn observe(&self, id: &WorkId) -> Result<Observation, LauncherError> {
        Ok(match self.shared.entries().get(id) {
            Some(Entry::Running { .. }) => Observation::Running,
            Some(Entry::Finished(result)) => Observation::Finished(result.clone()),
            None => Observation::Unknown,
        })
    }

    async fn cancel(&self, id: &WorkId) -> Result<(), LauncherError> {
        let removed = self.shared.entries().remove(id);
        if let Some(Entry::Running { task, .. }) = removed {
            task.abort();
            // Resolves once the task's future is dropped: the executor has
            // stopped (a script's process group was killed).
            let _ = task.await;
        }
        Ok(())
    }

    async fn forget(&self, id: &WorkId) -> Result<(), LauncherError> {
        let mut entries = self.shared.entries();
        if matches!(entries.get(id), Some(Entry::Finished(_))) {
            entries.remove(id);
        }
        Ok(())
    }
}

/// Stops all work still running: nothing outlives its launcher.
impl<E> Drop for InProcess<E> {
    fn drop(&mut self) {
        for (_, entry) in self.shared.entries().drain() {
            if let Entry::Running { task, .. } = entry {
                task.abort();
            }
        }
    }
}

/// One task: run the work, record its result.
async fn run_one<E: Executor>(executor: Arc<E>, work: Work, settle: Settle) {
    let result = executor.run(&work).await;
    settle.done(result);
}

/// Records a task's result; if the executor panicked instead, records that
/// the attempt failed, so its driver is not left waiting forever.
struct Settle {
    shared: Arc<Shared>,
    id: WorkId,
    token: u64,
    settled: bool,
}

impl Settle {
    fn done(mut self, result: WorkResult) {
        self.settled = true;
        self.shared.settle(&self.id, self.token, result);
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        // Dropped unsettled without a panic: the task was cancelled, and
        // whoever cancelled it already forgot it.
        if !self.settled && std::thread::panicking() {
            let error = step_error(
                codes::INTERNAL,
                "the step's executor stopped unexpectedly (a bug in coxswain); see the log",
            );
            self.shared
                .settle(&self.id, self.token, Err(Failed::from(error)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use serde_json::{Value, json};
    use tokio::sync::Semaphore;

    use super::*;
    use coxswain_core::api::ScriptStep;
    use coxswain_core::engine::{Done, RunInfo, Task};

    /// Counts its runs; each run waits for a permit, then answers its attempt.
    struct Gated {
        runs: AtomicUsize,
        gate: Semaphore,
    }

    impl Default for Gated {
        fn default() -> Self {
            Gated {
                runs: AtomicUsize::new(0),
                gate: Semaphore::new(0),
            }
        }
    }

    impl Executor for Gated {
        async fn run(&self, work: &Work) -> WorkResult {
            self.runs.fetch_add(1, Ordering::SeqCst);
            let _permit = self.gate.acquire().await.expect("gate open");
            if work.step == "boom" {
                panic!("the executor broke");
            }
            Ok(Done::output(json!({"attempt": work.attempt})))
        }
    }

    fn work(step: &str, attempt: u32) -> Work {
        Work {
            step: step.into(),
            part: None,
            attempt,
            iteration: None,
            task: Task::Script(ScriptStep::default()),
            input: Value::Null,
            timeout: None,
            data: Default::default(),
            run: RunInfo {
                uid: "run-1".into(),
                ..Default::default()
            },
            review: None,
            lookups: Vec::new(),
        }
    }

    /// A launcher over a fresh [`Gated`] executor, which the test opens.
    fn gated() -> (Arc<Gated>, InProcess<Gated>, Finishes) {
        let executor = Arc::new(Gated::default());
        let (launcher, finishes) = InProcess::new(Arc::clone(&executor));
        (executor, launcher, finishes)
    }

    #[tokio::test]
    async fn launching_the_same_work_twice_runs_it_once() {
        let (executor, launcher, mut finishes) = gated();
        let w = work("build", 1);
        launcher.launch(&w).await.unwrap();
        launcher.launch(&w).await.unwrap();
        executor.gate.add_permits(10);
        assert_eq!(finishes.next().await, Some(WorkId::of(&w)));
        // Finished and not forgotten: still known, so not run again.
        launcher.launch(&w).await.unwrap();
        assert_eq!(executor.runs.load(Ordering::SeqCst), 1);
        // Another attempt is other work.
        launcher.launch(&work("build", 2)).await.unwrap();
        assert_eq!(finishes.next().await, Some(WorkId::of(&work("build", 2))));
        assert_eq!(executor.runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_finished_result_is_observed_until_forgotten() {
        let (executor, launcher, mut finishes) = gated();
        let w = work("build", 3);
        let id = WorkId::of(&w);
        assert_eq!(launcher.observe(&id).await.unwrap(), Observation::Unknown);
        launcher.launch(&w).await.unwrap();
        assert_eq!(launcher.observe(&id).await.unwrap(), Observation::Running);
        executor.gate.add_permits(1);
        assert_eq!(finishes.next().await, Some(id.clone()));
        let expected = Observation::Finished(Ok(Done::output(json!({"attempt": 3}))));
        assert_eq!(launcher.observe(&id).await.unwrap(), expected);
        assert_eq!(launcher.observe(&id).await.unwrap(), expected);
        launcher.forget(&id).await.unwrap();
        assert_eq!(launcher.observe(&id).await.unwrap(), Observation::Unknown);
    }

    #[tokio::test]
    async fn held_work_is_running_or_finished_and_unforgotten() {
        let (executor, launcher, mut finishes) = gated();
        let held = launcher.held();
        assert!(held.ids().is_empty());
        let (a, b) = (work("a", 1), work("b", 1));
        launcher.launch(&a).await.unwrap();
        launcher.launch(&b).await.unwrap();
        let mut ids = held.ids();
        ids.sort_by(|x, y| x.step.cmp(&y.step));
        assert_eq!(ids, vec![WorkId::of(&a), WorkId::of(&b)]);
        executor.gate.add_permits(2);
        finishes.next().await;
        finishes.next().await;
        assert_eq!(held.ids().len(), 2, "finished, not yet forgotten");
        launcher.forget(&WorkId::of(&a)).await.unwrap();
        assert_eq!(held.ids(), vec![WorkId::of(&b)]);
        launcher.cancel(&WorkId::of(&b)).await.unwrap();
        assert!(held.ids().is_empty());
    }

    #[tokio::test]
    async fn after_a_restart_running_work_is_unknown() {
        let executor = Arc::new(Gated::default());
        let (before, _finishes) = InProcess::new(Arc::clone(&executor));
        let w = work("build", 1);
        before.launch(&w).await.unwrap();
        assert_eq!(
            before.observe(&WorkId::of(&w)).await.unwrap(),
            Observation::Running
        );
        let (after, _finishes) = InProcess::new(Arc::clone(&executor));
        assert_eq!(
            after.observe(&WorkId::of(&w)).await.unwrap(),
            Observation::Unknown
        );
    }

    #[tokio::test]
    async fn cancelled_work_is_forgotten_and_never_reported() {
        let (executor, launcher, mut finishes) = gated();
        let stopped = work("build", 1);
        let id = WorkId::of(&stopped);
        launcher.launch(&stopped).await.unwrap();
        launcher.cancel(&id).await.unwrap();
        assert_eq!(launcher.observe(&id).await.unwrap(), Observation::Unknown);
        // Cancelling again, or cancelling unknown work, is fine.
        launcher.cancel(&id).await.unwrap();
        // The next id to finish is other work: the cancelled one never is.
        let other = work("other", 1);
        launcher.launch(&other).await.unwrap();
        executor.gate.add_permits(10);
        assert_eq!(finishes.next().await, Some(WorkId::of(&other)));
    }

    #[tokio::test]
    async fn an_executor_that_panics_fails_the_attempt() {
        let (executor, launcher, mut finishes) = gated();
        let w = work("boom", 1);
        launcher.launch(&w).await.unwrap();
        executor.gate.add_permits(1);
        let id = finishes.next().await.unwrap();
        match launcher.observe(&id).await.unwrap() {
            Observation::Finished(Err(failed)) => assert_eq!(failed.error.code, codes::INTERNAL),
            other => panic!("expected a failed attempt, got {other:?}"),
        }
    }
}
