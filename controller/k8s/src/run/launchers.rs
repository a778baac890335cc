//! Where each attempt of a Run runs: script steps as Jobs of the Run, every
//! other kind as a task in this process. The one place that decides it, so
//! launching, looking, stopping and forgetting always ask the same launcher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use coxswain_core::api::{LogTail, Run};
use coxswain_core::engine::{Task, Work};
use coxswain_steps::in_process::InProcess;
use coxswain_steps::launch::{Launcher, LauncherError, Observation, WorkId};

use super::in_controller::InController;
use crate::jobs::chain::RunChains;
use crate::jobs::{JobLauncher, JobSettings};

/// Run uid → the Run, for in-controller work that finishes: its end queues
/// that Run. A routing table, not a status: lost on restart, when the work
/// is launched again anyway.
pub type Routes = Arc<Mutex<HashMap<String, ObjectRef<Run>>>>;

/// The launchers of one Run's attempts, for one reconcile.
pub struct Launchers<'a> {
    run: &'a Run,
    jobs: JobLauncher,
    in_controller: &'a InProcess<InController>,
    routes: &'a Routes,
}

/// The launcher one attempt runs on.
enum Route<'a> {
    /// A Job of the Run.
    Job(&'a JobLauncher),
    /// A task in this process.
    Here(&'a InProcess<InController>),
}

impl<'a> Launchers<'a> {
    /// The run's Job launcher, which the workspace's checkout and push
    /// Jobs go through too.
    pub fn jobs(&self) -> &JobLauncher {
        &self.jobs
    }

    /// The launchers of `run`'s attempts.
    pub fn new(
        client: kube::Client,
        jobs: Arc<JobSettings>,
        in_controller: &'a InProcess<InController>,
        routes: &'a Routes,
        run: &'a Run,
        chains: Arc<RunChains>,
    ) -> Self {
        Launchers {
            run,
            jobs: JobLauncher::for_run(client, jobs, run).with_chains(chains),
            in_controller,
            routes,
        }
    }

    /// Launches from `record` on: its scripts mount the workspace it holds.
    pub fn mounting(&mut self, record: &coxswain_core::api::RunStatus) {
        self.jobs.mounting(record);
    }

    /// Whether `work` runs as a Job: a pod stuck before it starts does not
    /// change its Job, so a Run with such work is looked at now and then.
    pub fn runs_as_job(work: &Work) -> bool {
        matches!(work.task, Task::Script(_))
    }

    fn route(&self, work: &Work) -> Route<'_> {
        if Self::runs_as_job(work) {
            Route::Job(&self.jobs)
        } else {
            Route::Here(self.in_controller)
        }
    }

    /// What became of `work`.
    pub async fn observe(&self, work: &Work) -> Result<Observation, LauncherError> {
        let id = WorkId::of(work);
        match self.route(work) {
            Route::Job(jobs) => jobs.observe_work(work).await,
            Route::Here(here) => here.observe(&id).await,
        }
    }

    /// Starts `work` (once: launching it again changes nothing). In-process
    /// work is routed back to this Run when it ends.
    pub async fn launch(&self, work: &Work) -> Result<(), LauncherError> {
        match self.route(work) {
            Route::Job(jobs) => jobs.launch(work).await,
            Route::Here(here) => {
                remember(self.routes, self.run);
                here.launch(work).await
            }
        }
    }

    /// For a script, the last lines of its log: read before it is stopped,
    /// for the attempt's status (its pod goes with it).
    pub async fn last_lines(&self, work: &Work) -> Option<LogTail> {
        match self.route(work) {
            Route::Job(jobs) => jobs.last_lines(&WorkId::of(work)).await,
            Route::Here(_) => None,
        }
    }

    /// Stops `work`.
    pub async fn cancel(&self, work: &Work) -> Result<(), LauncherError> {
        let id = WorkId::of(work);
        match self.route(work) {
            Route::Job(jobs) => jobs.cancel(&id).await,
            Route::Here(here) => here.cancel(&id).await,
        }
    }

    /// Lets go of what was kept to read `work`'s result.
    pub async fn forget(&self, work: &Work) -> Result<(), LauncherError> {
        let id = WorkId::of(work);
        match self.route(work) {
            Route::Job(jobs) => jobs.forget(&id).await,
            Route::Here(here) => here.forget(&id).await,
        }
    }
}

/// Routes the ends of `run`'s in-process work to it.
fn remember(routes: &Routes, run: &Run) {
    routes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(run.uid().unwrap_or_default(), ObjectRef::from(run));
}

/// Stops routing to the Run of uid `uid` (it ended or is gone).
pub fn forget_run(routes: &Routes, uid: &str) {
    routes.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
}
