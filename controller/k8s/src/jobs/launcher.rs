//! [`JobLauncher`]: the acts a Run reconciler performs on script Jobs, each
//! safe to repeat, each finding its objects by name alone.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, Preconditions,
};
use kube::{Client, Resource, ResourceExt};

use super::JobSettings;
use super::chain::RunChains;
use super::manifest::{
    Manifests, RunOwner, STEP_CONTAINER, config_map_digest, inputs_inline, manifests,
};
use super::mounted::MountedWorkspace;
use super::observe::{JobState, Reading, early_result, read_job, read_pod};
use super::wire::{self, LogRef, WireResult};
use crate::names;
use coxswain_core::api::{LOG_TAIL_BYTES, LogTail, Run, StepError};
use coxswain_core::engine::{Failed, Task, Work, WorkResult, codes, step_error};
use coxswain_steps::launch::{Launcher, LauncherError, Observation, WorkId};

/// How many of a log's last lines are read to find a result frame, besides
/// the lines its body may be split into ([`frame_tail_lines`]).
const FRAME_TAIL_LINES: i64 = 4;

/// The shortest piece a container runtime splits a long log line into.
/// containerd and CRI-O write a line longer than their limit (16 KiB by
/// default in containerd) as several "partial" lines, and the kubelet's
/// `tailLines` counts each piece: a 600 kB frame body is about forty
/// lines there. A quarter of containerd's default leaves room for runtimes
/// configured tighter.
const RUNTIME_LOG_PIECE_BYTES: usize = 4 << 10;

/// How many of a log's last lines hold a frame whose body is `bytes`
/// long, however the runtime split it: a few more than the frame, never
/// fewer.
fn frame_tail_lines(bytes: usize) -> i64 {
    let pieces = i64::try_from(bytes.div_ceil(RUNTIME_LOG_PIECE_BYTES)).unwrap_or(i64::MAX);
    FRAME_TAIL_LINES.saturating_add(pieces)
}

/// How many of a stopped pod's last log lines are read for its status
/// (the status keeps at most [`LOG_TAIL_BYTES`] of them).
const STOPPED_TAIL_LINES: i64 = 200;

/// The label the Job controller puts on its pods (Kubernetes 1.27 and later).
const JOB_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// Runs the script steps of one Run as Jobs in the Run's namespace.
#[derive(Clone)]
pub struct JobLauncher {
    pub(super) owner: RunOwner,
    pub(super) settings: Arc<JobSettings>,
    workspace: Option<MountedWorkspace>,
    pub(super) jobs: Api<Job>,
    config_maps: Api<ConfigMap>,
    pods: Api<Pod>,
    /// The run's script chains (none for a run with a workspace).
    pub(super) chains: Arc<RunChains>,
}

impl std::fmt::Debug for JobLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobLauncher")
            .field("owner", &self.owner)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl JobLauncher {
    /// A launcher for `run`'s script steps: cheap to make for each reconcile.
    pub fn for_run(client: Client, settings: Arc<JobSettings>, run: &Run) -> Self {
        let owner = RunOwner::of(run);
        let workspace = run
            .status
            .as_ref()
            .and_then(|s| s.workspace.as_ref())
            .and_then(|w| MountedWorkspace::of(w, &settings));
        JobLauncher {
            workspace,
            jobs: Api::namespaced(client.clone(), &owner.namespace),
            config_maps: Api::namespaced(client.clone(), &owner.namespace),
            pods: Api::namespaced(client, &owner.namespace),
            owner,
            settings,
            chains: Arc::default(),
        }
    }

    /// The launcher with the run's script chains: their first members
    /// start their chain's pod, later members run in it.
    pub fn with_chains(mut self, chains: Arc<RunChains>) -> Self {
        self.chains = chains;
        self
    }

    /// The launcher for the run as `record` has it: its scripts mount the
    /// workspace the status holds (made in this very reconcile, perhaps,
    /// and not yet in the Run that was read).
    pub fn mounting(&mut self, record: &coxswain_core::api::RunStatus) {
        self.workspace = record
            .workspace
            .as_ref()
            .and_then(|w| MountedWorkspace::of(w, &self.settings));
    }

    /// The name of the Job (and inputs ConfigMap) of `id`.
    pub fn job_name(&self, id: &WorkId) -> String {
        names::job(&self.owner.name, id)
    }

    /// The objects `work` becomes, without creating them.
    pub fn manifests(&self, work: &Work) -> Result<Manifests, LauncherError> {
        match &work.task {
            Task::Script(step) => Ok(manifests(
                &self.owner,
                work,
                step,
                &self.settings,
                self.workspace.as_ref(),
            )),
            other => Err(unavailable(
                &WorkId::of(work),
                "launched",
                format!(
                    "only script steps run as Jobs; a {} step runs in the controller",
                    other.kind()
                ),
            )),
        }
    }

    /// Looks at the ConfigMap found under the inputs' name when launching
    /// again: the same inputs are this launcher's (an earlier launch); other
    /// ones are someone else's. Those are left alone and the Job is made
    /// anyway: its pod refuses them (their digest is wrong) and the attempt
    /// fails as tampered with, through the result every attempt reports.
    async fn check_inputs(&self, id: &WorkId, ours: &ConfigMap) -> Result<(), LauncherError> {
        let name = self.job_name(id);
        let found = self
            .config_maps
            .get_opt(&name)
            .await
            .map_err(|e| unavailable(id, "launched", e.to_string()))?;
        if let Some(found) = found
            && config_map_digest(&found) != config_map_digest(ours)
        {
            tracing::warn!(
                run = %self.owner.name,
                configmap = %name,
                "a ConfigMap Coxswain did not write stands under a step's inputs name; its pod will refuse it"
            );
        }
        Ok(())
    }

    /// Whether `job` is one this launcher made for its Run: its controller
    /// owner is the Run's uid (which only exists once the Run does, so no
    /// Job made before it can carry it). Only whoever may create Jobs, which
    /// reads Secrets anyway, could forge that; the pod's own check of its
    /// inputs ([`pod`](super::pod)) holds even then.
    fn owns(&self, job: &Job) -> bool {
        names::controlled_by(job, &self.owner.uid)
    }

    /// The Job `name`, when it is this Run's.
    pub(super) async fn own_job(
        &self,
        id: &WorkId,
        act: &'static str,
    ) -> Result<Option<Job>, LauncherError> {
        let job = self
            .jobs
            .get_opt(&self.job_name(id))
            .await
            .map_err(|e| unavailable(id, act, e.to_string()))?;
        Ok(job.filter(|job| self.owns(job)))
    }

    /// Deletes the inputs ConfigMap of `job` only when it holds what `job`
    /// was made with: a ConfigMap someone else put under that name stays.
    async fn delete_inputs(
        &self,
        id: &WorkId,
        job: &Job,
        act: &'static str,
    ) -> Result<(), LauncherError> {
        let Some(expected) = job
            .annotations()
            .get(crate::names::INPUTS_DIGEST_ANNOTATION)
        else {
            return Ok(());
        };
        if inputs_inline(job) {
            return Ok(());
        }
        let name = self.job_name(id);
        let found = self
            .config_maps
            .get_opt(&name)
            .await
            .map_err(|e| unavailable(id, act, e.to_string()))?;
        let Some(found) = found else { return Ok(()) };
        if config_map_digest(&found) != *expected {
            tracing::warn!(configmap = %name, "left alone a ConfigMap under a step's inputs name that Coxswain did not write");
            return Ok(());
        }
        delete_exactly(&self.config_maps, &name, found.metadata.uid.clone())
            .await
            .map_err(|e| unavailable(id, act, e.to_string()))
    }

    /// What `job` says of its work, reading its pods only when the Job
    /// alone cannot tell.
    pub(super) async fn read(&self, id: &WorkId, job: &Job) -> Result<Observation, LauncherError> {
        if !self.owns(job) {
            return Ok(Observation::Finished(Err(Failed::from(step_error(
                codes::TAMPERED,
                format!(
                    "the Job {} stands where this attempt's Job goes but is not owned by run {}; \
                     Coxswain did not make it, so its result is not taken (it was left alone)",
                    self.job_name(id),
                    self.owner.name
                ),
            )))));
        }
        Ok(match read_job(job) {
            JobState::TimedOut(error) => Observation::Finished(Err(Failed::from(error))),
            JobState::Active { starting } => {
                let pods = self.pods_of(id, job).await?;
                if let Some((pod, reading)) = pods.iter().find_map(|p| Some((p, early_result(p)?)))
                {
                    Observation::Finished(self.taken(id, pod, reading).await?)
                } else if let Some(error) = starting.then(|| stuck(&pods)).flatten() {
                    Observation::Finished(Err(Failed::from(error)))
                } else {
                    Observation::Running
                }
            }
            JobState::Ended { condition } => {
                Observation::Finished(self.ended(id, job, &condition).await?)
            }
        })
    }

    /// The result of a Job that ended, from its pod (newest first).
    async fn ended(
        &self,
        id: &WorkId,
        job: &Job,
        condition: &str,
    ) -> Result<WorkResult, LauncherError> {
        let pods = self.pods_of(id, job).await?;
        let reading = pods
            .iter()
            .map(|pod| (pod, read_pod(pod)))
            .find(|(_, r)| !matches!(r, Reading::Running));
        match reading {
            Some((pod, reading)) => self.taken(id, pod, reading).await,
            None => Ok(Err(Failed::from(step_error(
                codes::INTERNAL,
                format!(
                    "the step's Job ended, {condition}, and left no pod to read its result from"
                ),
            )))),
        }
    }

    /// The attempt's result from what its pod said (`Running` only when a
    /// Job ended with a pod that never did: nothing to read).
    async fn taken(
        &self,
        id: &WorkId,
        pod: &Pod,
        reading: Reading,
    ) -> Result<WorkResult, LauncherError> {
        Ok(match reading {
            Reading::Result(result) => WorkResult::from(result),
            Reading::InLog(reference) => self.result_in_log(id, pod, &reference).await?,
            Reading::Failed(error) => Err(Failed::from(error)),
            Reading::Running => Err(Failed::from(step_error(
                codes::INTERNAL,
                "the step's Job ended and left no pod that ran to read its result from",
            ))),
        })
    }

    /// The pods of `job`, found by the label the Job controller gives them
    /// (never a list of the whole namespace).
    pub(super) async fn pods_of(&self, id: &WorkId, job: &Job) -> Result<Vec<Pod>, LauncherError> {
        let Some(uid) = job.metadata.uid.as_deref() else {
            return Ok(Vec::new());
        };
        let params = ListParams::default().labels(&format!("{JOB_UID_LABEL}={uid}"));
        let mut pods = self
            .pods
            .list(&params)
            .await
            .map_err(|e| unavailable(id, "observed", e.to_string()))?
            .items;
        // Labels are anyone's to write: only the Job's own pods count.
        pods.retain(|pod| names::controlled_by(pod, uid));
        // The newest first: with `backoffLimit: 0` there is one, unless it
        // was evicted and replaced.
        pods.sort_by(|a, b| {
            b.metadata
                .creation_timestamp
                .cmp(&a.metadata.creation_timestamp)
        });
        Ok(pods)
    }

    /// The result a pod wrote to its log, or why it cannot be taken.
    async fn result_in_log(
        &self,
        id: &WorkId,
        pod: &Pod,
        reference: &LogRef,
    ) -> Result<WorkResult, LauncherError> {
        Ok(
            match self.wire_in_log(id, pod, reference, STEP_CONTAINER).await? {
                Ok(result) => WorkResult::from(result),
                Err(error) => Err(Failed::from(error)),
            },
        )
    }

    /// The result the step in `container` wrote to the pod's log as it
    /// was sent, or why it cannot be taken.
    pub(super) async fn wire_in_log(
        &self,
        id: &WorkId,
        pod: &Pod,
        reference: &LogRef,
        container: &str,
    ) -> Result<Result<WireResult, StepError>, LauncherError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        // The frame is the log's last two lines (a header and the body,
        // which the runtime may have split into pieces); a few more
        // tolerate a runtime's line after it.
        let params = LogParams {
            container: Some(container.to_string()),
            tail_lines: Some(frame_tail_lines(reference.bytes)),
            ..LogParams::default()
        };
        let log = match self.pods.logs(&name, &params).await {
            Ok(log) => log,
            Err(kube::Error::Api(status)) if status.code == 404 => String::new(),
            Err(e) => return Err(unavailable(id, "observed", e.to_string())),
        };
        Ok(wire::decode_log(&log, reference).map_err(|problem| {
            step_error(
                codes::INTERNAL,
                format!("cannot read the step's result from pod {name}: {problem}"),
            )
        }))
    }
}

impl JobLauncher {
    /// Creates `job` (a workspace's git Job) for the work `id` unless a Job
    /// is there under its name already (the next observe checks whose).
    pub async fn launch_job(&self, id: &WorkId, job: &Job) -> Result<(), LauncherError> {
        create(&self.jobs, job)
            .await
            .map(|_| ())
            .map_err(|e| unavailable(id, "launched", e.to_string()))
    }

    /// The pods of the Job of `id`, when it is this Run's (newest first).
    pub async fn pods_of_work(&self, id: &WorkId) -> Result<Vec<Pod>, LauncherError> {
        match self.own_job(id, "observed").await? {
            Some(job) => self.pods_of(id, &job).await,
            None => Ok(Vec::new()),
        }
    }

    /// Gives a finished Job whose result is recorded the time it may stay
    /// (`ttlSecondsAfterFinished`, counted by Kubernetes from the Job's end;
    /// a Job that ended longer ago than that goes at once). The patch names
    /// the Job's uid, so one made under its name since is not touched.
    async fn expire(&self, job: &Job, ttl: i32) -> Result<(), kube::Error> {
        let already = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
        if already.is_some() {
            return Ok(());
        }
        let patch = serde_json::json!({
            "metadata": {"uid": job.metadata.uid},
            "spec": {"ttlSecondsAfterFinished": ttl},
        });
        let name = job.name_any();
        match self
            .jobs
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // Gone already, or replaced by another object.
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409 | 422) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The last lines of the log of `id`'s running pod, read before it is
    /// stopped so its attempt's status keeps them; `None` when there is no
    /// pod of this Run's Job or it has no log yet.
    pub async fn last_lines(&self, id: &WorkId) -> Option<LogTail> {
        let (job, container) = match self.own_job(id, "cancelled").await.ok()? {
            Some(job) => (job, STEP_CONTAINER.to_string()),
            None => {
                let place = self.chain_job_of(id, "cancelled").await.ok()??;
                (place.job, place.container)
            }
        };
        let pods = self.pods_of(id, &job).await.ok()?;
        let pod = pods.first()?;
        let params = LogParams {
            container: Some(container),
            tail_lines: Some(STOPPED_TAIL_LINES),
            limit_bytes: None,
            ..LogParams::default()
        };
        let log = self
            .pods
            .logs(&pod.metadata.name.clone().unwrap_or_default(), &params)
            .await
            .ok()?;
        // `tailLines` may have dropped earlier lines: a log that fills them
        // all is marked cut.
        let lines = log.lines().count();
        let dropped = i64::try_from(lines).unwrap_or(i64::MAX) >= STOPPED_TAIL_LINES;
        LogTail::of(log.as_bytes(), LOG_TAIL_BYTES, dropped)
    }
}

impl JobLauncher {
    /// Creates an attempt's objects (each only once: one already there
    /// under its name counts as made, the inputs checked to be ours).
    pub(super) async fn create_attempt(
        &self,
        id: &WorkId,
        config_map: Option<&ConfigMap>,
        job: &Job,
    ) -> Result<(), LauncherError> {
        if let Some(config_map) = config_map {
            let made = create(&self.config_maps, config_map)
                .await
                .map_err(|e| unavailable(id, "launched", e.to_string()))?;
            if !made {
                self.check_inputs(id, config_map).await?;
            }
        }
        create(&self.jobs, job)
            .await
            .map(|_| ())
            .map_err(|e| unavailable(id, "launched", e.to_string()))
    }
}

impl Launcher for JobLauncher {
    async fn launch(&self, work: &Work) -> Result<(), LauncherError> {
        if self.launch_chained(work).await? {
            return Ok(());
        }
        let Manifests { config_map, job } = self.manifests(work)?;
        self.create_attempt(&WorkId::of(work), config_map.as_ref(), &job)
            .await
    }

    async fn observe(&self, id: &WorkId) -> Result<Observation, LauncherError> {
        let job = self
            .jobs
            .get_opt(&self.job_name(id))
            .await
            .map_err(|e| unavailable(id, "observed", e.to_string()))?;
        match job {
            None => Ok(Observation::Unknown),
            Some(job) => self.read(id, &job).await,
        }
    }

    async fn cancel(&self, id: &WorkId) -> Result<(), LauncherError> {
        let name = self.job_name(id);
        let Some(job) = self.own_job(id, "cancelled").await? else {
            // A later member of a chain stops with its chain's pod.
            if let Some(super::chain::ChainJob { job, .. }) =
                self.chain_job_of(id, "cancelled").await?
            {
                delete_exactly(&self.jobs, &job.name_any(), job.metadata.uid.clone())
                    .await
                    .map_err(|e| unavailable(id, "cancelled", e.to_string()))?;
            }
            return Ok(());
        };
        delete_exactly(&self.jobs, &name, job.metadata.uid.clone())
            .await
            .map_err(|e| unavailable(id, "cancelled", e.to_string()))?;
        self.delete_inputs(id, &job, "cancelled").await
    }

    async fn forget(&self, id: &WorkId) -> Result<(), LauncherError> {
        let name = self.job_name(id);
        let Some(job) = self.own_job(id, "forgotten").await? else {
            return Ok(());
        };
        self.delete_inputs(id, &job, "forgotten").await?;
        // A finished Job stays for `kubectl logs` until its time is up
        // (counted from now: its result is read and recorded, so nothing is
        // lost when Kubernetes deletes it); one whose pod could not start is
        // still trying: stop it.
        let still_trying = matches!(read_job(&job), JobState::Active { .. })
            && !self
                .pods_of(id, &job)
                .await?
                .iter()
                .any(|p| early_result(p).is_some());
        if still_trying {
            delete_exactly(&self.jobs, &name, job.metadata.uid.clone())
                .await
                .map_err(|e| unavailable(id, "forgotten", e.to_string()))?;
        } else if let Some(ttl) = self.settings.ttl_after_finished.0 {
            self.expire(&job, ttl)
                .await
                .map_err(|e| unavailable(id, "forgotten", e.to_string()))?;
        }
        Ok(())
    }
}

/// Creates `object`: `true` when this call made it, `false` when one under
/// its name existed already (which the caller must check before trusting).
pub(super) async fn create<K>(api: &Api<K>, object: &K) -> Result<bool, kube::Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.reason == "AlreadyExists" => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes `name`, only the object with `uid` (the one just read and
/// checked; one made under its name since stays), with background
/// propagation (a Job's pods go too); one already gone counts as deleted.
pub async fn delete_exactly<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<String>,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Gone, or replaced by another object (uid precondition failed).
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

pub(super) fn unavailable(id: &WorkId, act: &'static str, reason: String) -> LauncherError {
    LauncherError::Unavailable {
        id: id.to_string(),
        act,
        reason,
    }
}

/// Why the pod of a Job that has not started running never will, if so.
fn stuck(pods: &[Pod]) -> Option<StepError> {
    pods.iter().find_map(|pod| match read_pod(pod) {
        Reading::Failed(error) => Some(error),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_read_holds_a_frame_body_the_runtime_split_into_pieces() {
        // containerd splits at 16 KiB: a 614,448-byte body is 38 lines,
        // then the header before it and the frame's own line break.
        let containerd_lines = 614_448usize.div_ceil(16 << 10) as i64 + 2;
        assert!(frame_tail_lines(614_448) >= containerd_lines);
        assert_eq!(frame_tail_lines(0), FRAME_TAIL_LINES);
        assert_eq!(frame_tail_lines(4096), FRAME_TAIL_LINES + 1);
        assert!(frame_tail_lines(usize::MAX) > 0, "no overflow");
    }
}
