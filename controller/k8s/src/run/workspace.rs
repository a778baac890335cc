//! The workspace phases of a Run's reconcile, on either side of the
//! engine: before the first step, the run's volume is claimed and its repos
//! checked out by a Job ([`before_steps`]); once the engine says the run is
//! over and the flow pushes, the run is held `Running` while a second Job
//! pushes its branch ([`push`]); when the run has ended, its volume is
//! deleted unless the flow keeps it ([`release`]).
//!
//! Each phase reads what it needs from the API server and the record, and
//! writes what it learned to the record before anything else happens, so a
//! controller killed at any point finds the same Jobs under the same names
//! and makes no second checkout. The claim is taken for the run's only when
//! the Run controls it; its uid is then recorded, and nothing but that
//! object is ever mounted as, or deleted as, the run's volume.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as CoreEvent, PersistentVolumeClaim, Pod};
use kube::api::{ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::{Context, events, refuse, status, write_record};
use crate::error::Error;
use crate::jobs::RunOwner;
use crate::jobs::workspace::{GitAct, GitTask, Pushed, claim, git_job};
use crate::jobs::{JobLauncher, delete_exactly};
use crate::names;
use coxswain_core::api::{
    KeepPolicy, Run, RunPhase, RunStatus, StepError, Workspace, WorkspaceStatus,
};
use coxswain_core::engine::{codes, step_error};
use coxswain_steps::launch::{Launcher, Observation};

/// What the workspace phase decided.
pub enum Prepared {
    /// The workspace is there: step the engine.
    Ready,
    /// Not yet (or the run ended here): the reconcile ends with this.
    Done(Action),
}

/// How often a run waiting for its checkout or push looks again when no
/// Job changed (a pod that cannot be placed changes nothing).
const RECHECK: Duration = Duration::from_secs(5);

/// How soon the reconcile after a record write runs.
const AFTER_WRITE: Duration = Duration::from_millis(200);

/// Before the engine steps a run whose flow declares `workspace`: the
/// push, when the run is held for it; else the checkout, until the record
/// says the workspace was made.
pub async fn before_steps(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    workspace: &Workspace,
) -> Result<Prepared, Error> {
    let made = old.workspace.as_ref();
    if let Some(ending) = made.and_then(|w| w.pushing) {
        return push(ctx, run, old, workspace, ending)
            .await
            .map(Prepared::Done);
    }
    if made.is_some_and(|w| w.volume_uid.is_some()) {
        return Ok(Prepared::Ready);
    }
    if run.spec.cancel {
        // Nothing ran yet: the engine cancels the run, and what the
        // checkout had begun is stopped here.
        stop_checkout(ctx, run).await?;
        return Ok(Prepared::Ready);
    }
    check_out(ctx, run, old, workspace)
        .await
        .map(Prepared::Done)
}

/// The claim, then the checkout Job, then the record.
async fn check_out(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    workspace: &Workspace,
) -> Result<Action, Error> {
    let owner = RunOwner::of(run);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &owner.namespace);
    let name = names::workspace_claim(&owner.name, &owner.uid);
    let found = match claims.get_opt(&name).await {
        Ok(found) => found,
        Err(e) => return Err(Error::kube(format!("reading the claim {name}"), e)),
    };
    let claim_object = match found {
        Some(found) => found,
        None => {
            let made = claim(&owner, workspace, &ctx.jobs);
            match claims.create(&PostParams::default(), &made).await {
                Ok(created) => created,
                // Made between the read and now: read again next time.
                Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {
                    return Ok(Action::requeue(AFTER_WRITE));
                }
                Err(e) => return Err(Error::kube(format!("creating the claim {name}"), e)),
            }
        }
    };
    if !names::controlled_by(&claim_object, &owner.uid) {
        let reason = format!(
            "the PersistentVolumeClaim {name} stands where run {}'s workspace goes but is not owned by it; Coxswain did not make it, so the run does not use it (it was left alone)",
            owner.name
        );
        tracing::warn!(run = %owner.name, claim = %name, "{reason}");
        ctx.events.publish(
            run,
            vec![events::tampered("PersistentVolumeClaim", &name, &reason)],
        );
        return refuse(ctx, run, old, step_error(codes::TAMPERED, reason)).await;
    }
    let branch = workspace.branch_for(&owner.name);
    let launcher = JobLauncher::for_run(ctx.client.clone(), ctx.jobs.clone(), run);
    let id = GitAct::Checkout.work_id(&owner.uid);
    let observed = launcher
        .observe(&id)
        .await
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    let made = |node: Option<String>| WorkspaceStatus {
        branch: branch.clone(),
        volume: Some(name.clone()),
        volume_uid: claim_object.metadata.uid.clone(),
        keep: Some(workspace.keep()),
        node,
        ..WorkspaceStatus::default()
    };
    match observed {
        Observation::Unknown => {
            let task = GitTask {
                workspace: workspace.clone(),
                branch: branch.clone(),
            };
            let job = git_job(&owner, GitAct::Checkout, &task, &name, None, &ctx.jobs);
            launcher
                .launch_job(&id, &job)
                .await
                .map_err(|e| Error::Corrupt(e.to_string()))?;
            let repos: Vec<&str> = workspace.repos.iter().map(|r| r.name.as_str()).collect();
            let note = if repos.is_empty() {
                format!("making the run's volume {name}")
            } else {
                format!(
                    "checking out {} on {branch} into the volume {name}",
                    repos.join(", ")
                )
            };
            ctx.events.publish(
                run,
                vec![events::workspace("WorkspaceCheckout", note, false)],
            );
            Ok(Action::requeue(RECHECK))
        }
        Observation::Running => {
            let waited = since(&claim_object);
            let limit = Duration::from_secs(ctx.jobs.workspace.bind_timeout_seconds);
            if waited < limit {
                return Ok(Action::requeue(RECHECK.min(limit - waited)));
            }
            match not_started(ctx, run, &launcher, &claim_object, limit).await? {
                Some(reason) => {
                    launcher.cancel(&id).await.ok();
                    let mut new = old.clone();
                    new.workspace = Some(made(None));
                    ctx.events.publish(
                        run,
                        vec![events::workspace("WorkspaceFailed", reason.clone(), true)],
                    );
                    refuse(ctx, run, &new, step_error(codes::WORKSPACE, reason)).await
                }
                None => Ok(Action::requeue(RECHECK)),
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
                    return refuse(ctx, run, old, error).await;
                }
            };
            let mut new = old.clone();
            let node = checked.node.clone();
            new.workspace = Some(WorkspaceStatus {
                repos: checked.repos,
                ..made(node)
            });
            status::set_conditions(&mut new, run.metadata.generation, Timestamp::now());
            write_record(ctx, run, &new).await?;
            let note = match new.workspace.as_ref().map(|w| w.repos.as_slice()) {
                Some([]) | None => format!("the volume {name} is ready"),
                Some(repos) => repos
                    .iter()
                    .map(|r| {
                        format!(
                            "checked out {} ({}) at {} on {branch}",
                            r.name,
                            r.ref_.as_deref().unwrap_or("HEAD"),
                            short(&r.commit)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            };
            ctx.events
                .publish(run, vec![events::workspace("WorkspaceReady", note, false)]);
            if let Err(e) = launcher.forget(&id).await {
                tracing::debug!(error = %e, "could not expire the checkout Job");
            }
            Ok(Action::requeue(AFTER_WRITE))
        }
        Observation::Finished(Err(failed)) => {
            let mut new = old.clone();
            new.workspace = Some(made(None));
            ctx.events.publish(
                run,
                vec![events::workspace(
                    "WorkspaceFailed",
                    failed.error.message.clone(),
                    true,
                )],
            );
            refuse(ctx, run, &new, failed.error).await
        }
    }
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

/// Stops a checkout begun for a run cancelled before its first step, and
/// deletes the claim made for it (only the Run's own).
async fn stop_checkout(ctx: &Context, run: &Run) -> Result<(), Error> {
    let owner = RunOwner::of(run);
    let launcher = JobLauncher::for_run(ctx.client.clone(), ctx.jobs.clone(), run);
    let id = GitAct::Checkout.work_id(&owner.uid);
    if let Err(e) = launcher.cancel(&id).await {
        tracing::debug!(error = %e, "could not stop the checkout Job");
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &owner.namespace);
    let name = names::workspace_claim(&owner.name, &owner.uid);
    let found = claims
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading the claim {name}"), e))?;
    if let Some(found) = found.filter(|c| names::controlled_by(c, &owner.uid)) {
        delete_claim(&claims, &name, found.metadata.uid.clone()).await?;
    }
    Ok(())
}

/// The push of a run held for it: the push Job, then the run's end.
async fn push(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    workspace: &Workspace,
    ending: RunPhase,
) -> Result<Action, Error> {
    let owner = RunOwner::of(run);
    let launcher = JobLauncher::for_run(ctx.client.clone(), ctx.jobs.clone(), run);
    let id = GitAct::Push.work_id(&owner.uid);
    let made = old.workspace.clone().unwrap_or_default();
    // A cancel that ended the run is no reason to stop its push (`push:
    // always`); one that came during the push is.
    if run.spec.cancel && ending != RunPhase::Cancelled {
        if let Err(e) = launcher.cancel(&id).await {
            tracing::debug!(error = %e, "could not stop the push Job");
        }
        let error = step_error(
            codes::CANCELLED,
            "the run was cancelled while its branch was being pushed",
        );
        return end(
            ctx,
            run,
            old,
            RunPhase::Cancelled,
            Pushed {
                pushed: Vec::new(),
                error: Some(error),
            },
        )
        .await;
    }
    let observed = launcher
        .observe(&id)
        .await
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    match observed {
        Observation::Unknown => {
            let claim = made.volume.clone().unwrap_or_default();
            let node = made.node.as_deref().filter(|_| ctx.jobs.pins_pods());
            let task = GitTask {
                workspace: workspace.clone(),
                branch: made.branch.clone(),
            };
            let job = git_job(&owner, GitAct::Push, &task, &claim, node, &ctx.jobs);
            launcher
                .launch_job(&id, &job)
                .await
                .map_err(|e| Error::Corrupt(e.to_string()))?;
            ctx.events.publish(
                run,
                vec![events::workspace(
                    "WorkspacePush",
                    format!("pushing {} (the run ended {ending:?})", made.branch),
                    false,
                )],
            );
            Ok(Action::requeue(RECHECK))
        }
        Observation::Running => Ok(Action::requeue(RECHECK)),
        Observation::Finished(result) => {
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
            let action = end(ctx, run, old, ending, pushed).await?;
            if let Err(e) = launcher.forget(&id).await {
                tracing::debug!(error = %e, "could not expire the push Job");
            }
            Ok(action)
        }
    }
}

/// Ends a run held for its push: the phase it ended with (`Failed` when
/// the push of a run that succeeded failed), what was pushed, the end time.
async fn end(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    ending: RunPhase,
    pushed: Pushed,
) -> Result<Action, Error> {
    let mut new = old.clone();
    new.phase = ending;
    if let Some(ws) = new.workspace.as_mut() {
        ws.pushing = None;
    }
    let note = pushed
        .pushed
        .iter()
        .map(|p| format!("pushed to {} at {}", p.name, short(&p.commit)))
        .collect::<Vec<_>>()
        .join("; ");
    let failure: Option<StepError> = pushed.error;
    let warning = failure.is_some();
    let note = match &failure {
        Some(e) if note.is_empty() => e.message.clone(),
        Some(e) => format!("{note}; {}", e.message),
        None => note,
    };
    new.workspace_pushed(pushed.pushed, failure);
    let now = Timestamp::now();
    new.finished_at = Some(now.to_string());
    status::set_conditions(&mut new, run.metadata.generation, now);
    write_record(ctx, run, &new).await?;
    ctx.metrics.run_finished(new.phase);
    let mut story = vec![events::workspace("WorkspacePushed", note, warning)];
    story.extend(super::story(ctx, old, &new));
    ctx.events.publish(run, story);
    Ok(Action::requeue(AFTER_WRITE))
}

/// Deletes the volume of a run that ended, unless its flow keeps it: only
/// the claim whose uid the record holds.
pub async fn release(ctx: &Context, run: &Run) -> Result<(), Error> {
    let Some(status) = run.status.as_ref() else {
        return Ok(());
    };
    let Some(ws) = status.workspace.as_ref() else {
        return Ok(());
    };
    let (Some(name), Some(uid)) = (ws.volume.as_ref(), ws.volume_uid.as_ref()) else {
        return Ok(());
    };
    let keep = match ws.keep.unwrap_or_default() {
        KeepPolicy::Never => false,
        KeepPolicy::OnFailure => status.phase != RunPhase::Succeeded,
        KeepPolicy::Always => true,
    };
    if keep {
        return Ok(());
    }
    let namespace = run.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let found = claims
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading the claim {name}"), e))?;
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
