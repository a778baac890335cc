//! How the Job launcher runs a script chain: the first member's launch
//! makes the chain's Job ([`chain_manifests`]); a later member's launch
//! finds its container there, and its result is read from that container
//! and taken only when the inputs the pod made are the engine's.
//!
//! A later member runs alone, in a Job of its own as any step does, when
//! the chain cannot hold it: no chain Job (the first member ran alone), its
//! container ran nothing (the member before it failed in the pod and was
//! tried again alone), or the chain's Job ended without it.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::chain::{ChainJob, chain_manifests, chainable};
use super::launcher::JobLauncher;
use super::manifest::{Manifests, attempt_entries, pod_task};
use super::observe::{JobState, Reading, read_container, read_job};
use super::task::entries_digest;
use super::wire::WireResult;
use crate::names;
use coxswain_core::api::StepError;
use coxswain_core::engine::{Failed, Task, Work, WorkResult, codes, step_error};
use coxswain_steps::launch::{LauncherError, Observation, WorkId};
use coxswain_steps::script::work_input_files;

/// What the chain's pod says of one later member.
struct MemberSeen {
    place: ChainJob,
    pod: Option<Pod>,
    reading: Reading,
}

impl JobLauncher {
    /// Launches `work` in a chain's pod when it may: the first member makes
    /// the chain's Job; a later member counts as launched when the chain's
    /// pod holds its container and will run it. `false`: launch it alone.
    pub(super) async fn launch_chained(&self, work: &Work) -> Result<bool, LauncherError> {
        if !chainable(work) {
            return Ok(false);
        }
        let Task::Script(step) = &work.task else {
            return Ok(false);
        };
        let id = WorkId::of(work);
        if let Some(later) = self.chains.after_head(&work.step) {
            let made = chain_manifests(
                &self.owner,
                work,
                step,
                later,
                self.chains.run_input(),
                &self.settings,
            );
            let Some(Manifests { config_map, job }) = made else {
                return Ok(false);
            };
            self.create_attempt(&id, config_map.as_ref(), &job).await?;
            return Ok(true);
        }
        let Some(seen) = self.member_seen(&id, "launched").await? else {
            return Ok(false);
        };
        Ok(match seen.reading {
            Reading::Result(wire) => wire.not_run.is_none(),
            Reading::Running => !matches!(read_job(&seen.place.job), JobState::Ended { .. }),
            Reading::InLog(_) | Reading::Failed(_) => true,
        })
    }

    /// What became of `work`: its own Job's account, or, for a later member
    /// of a chain without one, its container's in the chain's pod.
    pub async fn observe_work(&self, work: &Work) -> Result<Observation, LauncherError> {
        let id = WorkId::of(work);
        let own = coxswain_steps::launch::Launcher::observe(self, &id).await?;
        if !matches!(own, Observation::Unknown) || !chainable(work) {
            return Ok(own);
        }
        let Some(seen) = self.member_seen(&id, "observed").await? else {
            return Ok(own);
        };
        let (head, container) = (&seen.place.head, &seen.place.container);
        Ok(match seen.reading {
            Reading::Result(wire) if wire.not_run.is_some() => Observation::Unknown,
            Reading::Result(wire) => Observation::Finished(self.judged(work, head, wire)),
            Reading::InLog(reference) => {
                let Some(pod) = &seen.pod else {
                    return Ok(Observation::Running);
                };
                match self.wire_in_log(&id, pod, &reference, container).await? {
                    Ok(wire) => Observation::Finished(self.judged(work, head, wire)),
                    Err(error) => Observation::Finished(Err(Failed::from(error))),
                }
            }
            Reading::Failed(error) => Observation::Finished(Err(Failed::from(error))),
            Reading::Running => match read_job(&seen.place.job) {
                JobState::TimedOut(error) => Observation::Finished(Err(Failed::from(error))),
                // Ended without running it: it runs alone.
                JobState::Ended { .. } => Observation::Unknown,
                JobState::Active { .. } => Observation::Running,
            },
        })
    }

    /// The chain's Job holding the later member `id`, and where the member
    /// is in it; `None` when `id` is no later member's first attempt or no
    /// such Job of this Run's names it there.
    pub(super) async fn chain_job_of(
        &self,
        id: &WorkId,
        act: &'static str,
    ) -> Result<Option<ChainJob>, LauncherError> {
        let first = id.attempt == 1 && id.part.is_none() && id.iteration.is_none();
        let Some((head, position)) = self.chains.head_of(&id.step).filter(|_| first) else {
            return Ok(None);
        };
        let head_id = WorkId {
            step: head.to_string(),
            ..id.clone()
        };
        let Some(job) = self.own_job(&head_id, act).await? else {
            return Ok(None);
        };
        // The Job under the first member's name must be this chain's, with
        // this member where the flow puts it.
        let named = job
            .annotations()
            .get(names::CHAIN_ANNOTATION)
            .and_then(|keys| keys.split(',').nth(position - 1))
            .is_some_and(|key| key == id.step);
        Ok(named.then(|| ChainJob {
            job,
            head: head.to_string(),
            container: names::chain_container(position),
        }))
    }

    /// What the chain's pod says of the later member `id`.
    async fn member_seen(
        &self,
        id: &WorkId,
        act: &'static str,
    ) -> Result<Option<MemberSeen>, LauncherError> {
        let Some(place) = self.chain_job_of(id, act).await? else {
            return Ok(None);
        };
        let pods = self.pods_of(id, &place.job).await?;
        let found = pods
            .iter()
            .map(|pod| (pod, read_container(pod, &place.container)))
            .find(|(_, reading)| !matches!(reading, Reading::Running));
        let (pod, reading) = match found {
            Some((pod, reading)) => (Some(pod.clone()), reading),
            None => (pods.first().cloned(), Reading::Running),
        };
        Ok(Some(MemberSeen {
            place,
            pod,
            reading,
        }))
    }

    /// A later member's result, taken only when the pod made the inputs
    /// the engine gives the step: the engine decides what a step receives,
    /// the pod only saves the time of a pod start.
    fn judged(&self, work: &Work, head: &str, wire: WireResult) -> WorkResult {
        let Task::Script(step) = &work.task else {
            return WorkResult::from(wire);
        };
        let mut task = pod_task(work, step, &self.settings, None);
        let files = work_input_files(work).map_err(StepError::from);
        let (_, entries) = attempt_entries(&mut task, files);
        let expected = entries_digest(&entries);
        match wire.inputs_sha256.as_deref() {
            Some(found) if found == expected => WorkResult::from(wire),
            // The pod could not even read its task: its error stands.
            None if wire.error.is_some() => WorkResult::from(wire),
            found => Err(Failed::from(step_error(
                codes::TAMPERED,
                format!(
                    "step `{}` ran in the pod of the chain `{head}` starts, with inputs other than \
                     the ones the run gives it (their digest is {}, not {expected}); its result \
                     is not taken",
                    work.step,
                    found.unwrap_or("missing")
                ),
            ))),
        }
    }
}
