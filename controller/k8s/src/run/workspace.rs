//! The run's workspace work on a cluster, as the engine's plan asks for
//! it ([`coxswain_core::engine::WorkspaceWork`]): the checkout makes the
//! run's volume (a PersistentVolumeClaim the Run controls) and a Job that
//! clones into it; the push is a second Job on the same volume; the volume
//! is deleted once the plan says the run let it go.
//!
//! Nothing here decides: [`observe`] says what became of the work, the
//! engine takes it in, and [`launch`], [`stop`], [`forget`] and
//! [`release`] carry out the plan. Each is idempotent and reads what it
//! needs from the API server and the status, so a controller killed at any
//! point finds the same Jobs under the same names and makes no second
//! checkout. The claim is taken for the run's only when the Run controls
//! it; its uid is then recorded, and nothing but that object is ever
//! mounted as, or deleted as, the run's volume.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as CoreEvent, PersistentVolumeClaim, Pod};
use kube::api::{ListParams, PostParams};
use kube::runtime::events::Event;
use kube::{Api, ResourceExt};

use super::{Context, events};
use crate::error::Error;
use crate::jobs::RunOwner;
use crate::jobs::workspace::{GitAct, GitTask, Pushed, claim, git_job};
use crate::jobs::{JobLauncher, delete_exactly};
use crate::names;
use coxswain_core::api::{Run, RunStatus, StepError, Workspace, WorkspaceStatus};
use coxswain_core::engine::{WorkspaceEnded, WorkspaceWork, codes, step_error};
use coxswain_steps::launch::{Launcher, Observation};

/// What became of the workspace work the status asks for.
pub enum Observed {
    /// Not started (or its Job is gone): launch it.
    Unknown,
    /// Still running.
    Running,
    /// It ended: the engine takes this in, and these Events tell people,
    /// once the status saying so is written.
    Ended(Box<WorkspaceEnded>, Vec<Event>),
}

/// How often a run waiting for its checkout or push looks again when no
/// Job changed (a pod that cannot be placed changes nothing).
pub const RECHECK: Duration = Duration::from_secs(5);

/// The Job id of `work` for run `uid`.
fn work_id(work: WorkspaceWork, uid: &str) -> coxswain_steps::launch::WorkId {
    GitAct::from(work).work_id(uid)
}

/// What became of `work`, from its Job (and for the checkout, its claim).
pub async fn observe(
    ctx: &Context,
    run: &Run,
    launcher: &JobLauncher,
    workspace: &Workspace,
    work: WorkspaceWork,
) -> Result<Observed, Error> {
    match work {
        WorkspaceWork::CheckOut => observe_checkout(ctx, run, launcher, workspace).await,
        WorkspaceWork::Push => observe_push(run, launcher).await,
    }
}

/// The checkout: the claim must be the Run's own; then its Job's result
/// is the workspace's record, and a Job that could not start in time (the
/// claim never bound, the pod never placed) fails the run saying why.
async fn observe_checkout(
    ctx: &Context,
    run: &Run,
    launcher: &JobLauncher,
    workspace: &Workspace,
) -> Result<Observed, Error> {
    let owner = RunOwner::of(run);
    let name = names::workspace_claim(&owner.name, &owner.uid);
    let Some(claim_object) = read_claim(ctx, &owner.namespace, &name).await? else {
        return Ok(Observed::Unknown);
    };
    if !names::controlled_by(&claim_object, &owner.uid) {
        let reason = format!(
            "the PersistentVolumeClaim {name} stands where run {}'s workspace goes but is not owned by it; Coxswain did not make it, so the run does not use it (it was left alone)",
            owner.name
        );
        tracing::warn!(run = %owner.name, claim = %name, "{reason}");
        let told = vec![events::tampered("PersistentVolumeClaim", &name, &reason)];
        let error = step_error(codes::TAMPERED, reason);
        let ended = WorkspaceEnded::NotMade {
            error,
            workspace: None,
        };
        return Ok(Observed::Ended(Box::new(ended), told));
    }
    let id = work_id(WorkspaceWork::CheckOut, &owner.uid);
    let observed = launcher
        .observe(&id)
        .await
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    let branch = workspace.branch_for(&owner.name);
    let made = |node: Option<String>| WorkspaceStatus {
        branch: branch.clone(),
        volume: Some(name.clone()),
        volume_uid: claim_object.metadata.uid.clone(),
        keep: Some(workspace.keep()),
        node,
        ..WorkspaceStatus::default()
    };
    let failed = |error: StepError, told: &str| {
        let note = events::workspace("WorkspaceFailed", told.to_string(), true);
        let ended = WorkspaceEnded::NotMade {
            error,
            workspace: Some(made(None)),
        };
        Observed::Ended(Box::new(ended), vec![note])
    };
    match observed {
        Observation::Unknown => Ok(Observed::Unknown),
        Observation::Running => {
            let limit = Duration::from_secs(ctx.jobs.workspace.bind_timeout_seconds);
            if since(&claim_object) < limit {
                return Ok(Observed::Running);
            }
            match not_started(ctx, run, launcher, &claim_object, limit).await? {
                Some(reason) => Ok(failed(
                    step_error(codes::WORKSPACE, reason.clone()),
                    &reason,
                )),
                None => Ok(Observed::Running),
            }
        }
        Observation::Finished(Ok(done)) => {
            let checked: WorkspaceStatus = match serde_json::from_value(done.output) {
                Ok(checked) => checked,
                Err(e) => {
                    let error = step_error(
                        codes::INTERNAL,
                        format!(
                            "the checkout Job's result is not a workspace record ({e}); do the controller and the workspace image differ in version?"
                        ),
                    );
                    let told = error.message.clone();
                    return Ok(failed(error, &told));
                }
            };
            let status = WorkspaceStatus {
                repos: checked.repos,
                ..made(checked.node)
            };
            let note = ready_note(&status, &name);
            let told = vec![events::workspace("WorkspaceReady", note, false)];
            Ok(Observed::Ended(
                Box::new(WorkspaceEnded::Made(status)),
                told,
            ))
        }
        Observation::Finished(Err(failed_job)) => {
            let told = failed_job.error.message.clone();
            Ok(failed(failed_job.error, &told))
        }
    }
}

/// What people read when the volume is ready.
fn ready_note(status: &WorkspaceStatus, claim: &str) -> String {
    if status.repos.is_empty() {
        return format!("the volume {claim} is ready");
    }
    status
        .repos
        .iter()
        .map(|r| {
            format!(
                "checked out {} ({}) at {} on {}",
                r.name,
                r.ref_.as_deref().unwrap_or("HEAD"),
                short(&r.commit),
                status.branch
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The push: its Job's result, the branches pushed.
async fn observe_push(run: &Run, launcher: &JobLauncher) -> Result<Observed, Error> {
    let id = work_id(WorkspaceWork::Push, &run.uid().unwrap_or_default());
    let observed = launcher
        .observe(&id)
        .await
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    let result = match observed {
        Observation::Unknown => return Ok(Observed::Unknown),
        Observation::Running => return Ok(Observed::Running),
        Observation::Finished(result) => result,
    };
    let pushed = match result {
        Ok(done) => serde_json::from_value(done.output).unwrap_or_else(|e| Pushed {
            pushed: Vec::new(),
            error: Some(step_error(
                codes::INTERNAL,
                format!("the push Job's result is not a list of pushed branches ({e})"),
            )),
        }),
        Err(failed) => Pushed {
            pushed: Vec::new(),
            error: Some(failed.error),
        },
    };
    let note = pushed
        .pushed
        .iter()
        .map(|p| format!("pushed to {} at {}", p.name, short(&p.commit)))
        .collect::<Vec<_>>()
        .join("; ");
    let note = match &pushed.error {
        Some(e) if note.is_empty() => e.message.clone(),
        Some(e) => format!("{note}; {}", e.message),
        None => note,
    };
    let warning = pushed.error.is_some();
    let told = vec![events::workspace("WorkspacePushed", note, warning)];
    let ended = WorkspaceEnded::Pushed {
        pushed: pushed.pushed,
        error: pushed.error,
    };
    Ok(Observed::Ended(Box::new(ended), told))
}

/// Starts `work`: for the checkout the claim (made if missing; used only
/// when the Run controls it) and the clone Job; for the push, the push
/// Job on the run's recorded volume.
pub async fn launch(
    ctx: &Context,
    run: &Run,
    launcher: &JobLauncher,
    run_status: &RunStatus,
    workspace: &Workspace,
    work: WorkspaceWork,
) -> Result<(), Error> {
    let owner = RunOwner::of(run);
    let id = work_id(work, &owner.uid);
    let (job, note) = match work {
        WorkspaceWork::CheckOut => {
            let name = names::workspace_claim(&owner.name, &owner.uid);
            let claims: Api<PersistentVolumeClaim> =
                Api::namespaced(ctx.client.clone(), &owner.namespace);
            if read_claim(ctx, &owner.namespace, &name).await?.is_none() {
                let made = claim(&owner, workspace, &ctx.jobs);
                match claims.create(&PostParams::default(), &made).await {
                    // Made between the read and now: checked when observed.
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {}
                    Err(e) => return Err(Error::kube(format!("creating the claim {name}"), e)),
                }
            }
            let branch = workspace.branch_for(&owner.name);
            let repos: Vec<&str> = workspace.repos.iter().map(|r| r.name.as_str()).collect();
            let note = if repos.is_empty() {
                format!("making the run's volume {name}")
            } else {
                format!(
                    "checking out {} on {branch} into the volume {name}",
                    repos.join(", ")
                )
            };
            let task = GitTask {
                workspace: workspace.clone(),
                branch,
            };
            let job = git_job(&owner, GitAct::Checkout, &task, &name, None, &ctx.jobs);
            (job, events::workspace("WorkspaceCheckout", note, false))
        }
        WorkspaceWork::Push => {
            let made = run_status.workspace.clone().unwrap_or_default();
            let claim = made.volume.clone().unwrap_or_default();
            let node = made.node.as_deref().filter(|_| ctx.jobs.pins_pods());
            let task = GitTask {
                workspace: workspace.clone(),
                branch: made.branch.clone(),
            };
            let job = git_job(&owner, GitAct::Push, &task, &claim, node, &ctx.jobs);
            let ending = made.pushing.unwrap_or_default();
            let note = format!("pushing {} (the run ended {ending:?})", made.branch);
            (job, events::workspace("WorkspacePush", note, false))
        }
    };
    launcher
        .launch_job(&id, &job)
        .await
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    ctx.events.publish(run, vec![note]);
    Ok(())
}

/// Stops `work` the run no longer wants (it was cancelled): its Job goes,
/// and a claim made for a checkout the status never took goes with it.
pub async fn stop(
    ctx: &Context,
    run: &Run,
    launcher: &JobLauncher,
    run_status: &RunStatus,
    work: WorkspaceWork,
) -> Result<(), Error> {
    let owner = RunOwner::of(run);
    if let Err(e) = launcher.cancel(&work_id(work, &owner.uid)).await {
        tracing::debug!(error = %e, "could not stop the workspace Job");
    }
    let recorded = run_status
        .workspace
        .as_ref()
        .is_some_and(|w| w.volume_uid.is_some());
    if work != WorkspaceWork::CheckOut || recorded {
        // A recorded volume is released (or kept) as its `keep` says.
        return Ok(());
    }
    let name = names::workspace_claim(&owner.name, &owner.uid);
    if let Some(found) = read_claim(ctx, &owner.namespace, &name)
        .await?
        .filter(|c| names::controlled_by(c, &owner.uid))
    {
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(ctx.client.clone(), &owner.namespace);
        delete_claim(&claims, &name, found.metadata.uid.clone()).await?;
    }
    Ok(())
}

/// Lets the Job of `work` go once its end is recorded (it stays for
/// `kubectl logs` until its time is up; one still trying is stopped).
pub async fn forget(run: &Run, launcher: &JobLauncher, work: WorkspaceWork) {
    if let Err(e) = launcher
        .forget(&work_id(work, &run.uid().unwrap_or_default()))
        .await
    {
        tracing::debug!(error = %e, "could not expire the workspace Job");
    }
}

/// Reads the claim `name`, if there is one.
async fn read_claim(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<PersistentVolumeClaim>, Error> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    claims
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading the claim {name}"), e))
}

/// How long ago `claim` was made.
fn since(claim: &PersistentVolumeClaim) -> Duration {
    let Some(created) = &claim.metadata.creation_timestamp else {
        return Duration::ZERO;
    };
    Duration::try_from(Timestamp::now().duration_since(created.0)).unwrap_or_default()
}

/// Why the checkout has not started `limit` after the claim was made, if
/// it has not: the claim is not bound, or its pod is not running.
async fn not_started(
    ctx: &Context,
    run: &Run,
    launcher: &JobLauncher,
    claim: &PersistentVolumeClaim,
    limit: Duration,
) -> Result<Option<String>, Error> {
    let name = claim.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let seconds = limit.as_secs();
    if phase != "Bound" {
        let why = last_warning(ctx, &namespace, "PersistentVolumeClaim", &name).await;
        let class = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .map_or_else(
                || "the cluster's default class".to_string(),
                |c| format!("the storage class `{c}`"),
            );
        return Ok(Some(format!(
            "the run's volume {name} was not ready within {seconds} s: the claim is {phase} (asking {class}){}",
            why.map(|w| format!(": {w}")).unwrap_or_default()
        )));
    }
    let id = GitAct::Checkout.work_id(&run.uid().unwrap_or_default());
    let pods: Vec<Pod> = launcher
        .pods_of_work(&id)
        .await
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    let waiting = pods
        .iter()
        .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"));
    let Some(pod) = waiting else {
        return Ok(None);
    };
    let pod_name = pod.name_any();
    let unscheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .and_then(|c| c.message.clone());
    let why = match unscheduled {
        Some(message) => Some(message),
        None => last_warning(ctx, &namespace, "Pod", &pod_name).await,
    };
    Ok(Some(format!(
        "the checkout pod {pod_name} could not start on the run's volume {name} within {seconds} s{}",
        why.map(|w| format!(": {w}")).unwrap_or_default()
    )))
}

/// The newest warning Event about `kind` `name`, as `Reason: message`.
async fn last_warning(ctx: &Context, namespace: &str, kind: &str, name: &str) -> Option<String> {
    let api: Api<CoreEvent> = Api::namespaced(ctx.client.clone(), namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind={kind},involvedObject.name={name},type=Warning"
    ));
    let list = match api.list(&params).await {
        Ok(list) => list.items,
        Err(e) => {
            tracing::debug!(error = %e, "could not read the Events of {kind} {name}");
            return None;
        }
    };
    list.into_iter()
        .max_by_key(|e| {
            e.last_timestamp
                .clone()
                .map(|t| t.0)
                .or_else(|| e.event_time.clone().map(|t| t.0))
        })
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
}

/// Deletes the volume of a run that ended when the plan lets it go
/// ([`coxswain_core::engine::releases`]): only the claim whose uid the
/// status holds, after the run's Jobs (whose pods hold it).
pub async fn release(ctx: &Context, run: &Run, run_status: &RunStatus) -> Result<(), Error> {
    if !coxswain_core::engine::releases(run_status) {
        return Ok(());
    }
    let Some(ws) = run_status.workspace.as_ref() else {
        return Ok(());
    };
    let (Some(name), Some(uid)) = (ws.volume.as_ref(), ws.volume_uid.as_ref()) else {
        return Ok(());
    };
    let namespace = run.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let found = read_claim(ctx, &namespace, name).await?;
    if found.is_none_or(|c| c.metadata.uid.as_deref() != Some(uid)) {
        return Ok(());
    }
    // Kubernetes keeps a claim while any pod that mounted it exists, a
    // finished one too: the run's Jobs go first (their pods with them; the
    // record keeps each attempt's last stderr lines).
    delete_jobs(ctx, run, &namespace).await?;
    delete_claim(&claims, name, Some(uid.clone())).await
}

/// Deletes every Job of `run` (only those the Run controls).
async fn delete_jobs(ctx: &Context, run: &Run, namespace: &str) -> Result<(), Error> {
    use k8s_openapi::api::batch::v1::Job;
    let uid = run.uid().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    let selector = format!("{}={uid}", names::RUN_UID_LABEL);
    let list = jobs
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::kube(format!("listing the Jobs of run {}", run.name_any()), e))?;
    for job in list.items.iter().filter(|j| names::controlled_by(*j, &uid)) {
        let name = job.name_any();
        delete_exactly(&jobs, &name, job.metadata.uid.clone())
            .await
            .map_err(|e| Error::kube(format!("deleting the Job {name}"), e))?;
    }
    Ok(())
}

/// Deletes the claim `name` if it is still the object with `uid`.
async fn delete_claim(
    claims: &Api<PersistentVolumeClaim>,
    name: &str,
    uid: Option<String>,
) -> Result<(), Error> {
    delete_exactly(claims, name, uid)
        .await
        .map_err(|e| Error::kube(format!("deleting the claim {name}"), e))
}

/// A commit's first 12 hex digits.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
