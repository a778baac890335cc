//! The Run reconciler: read the Run, rebuild the engine from its status, feed
//! it what happened, write the record back in one write, then act.
//!
//! The order makes a crash at any moment harmless:
//! 1. What happened is gathered: the run just started, `spec.cancel`, work
//!    that finished (read from the Jobs, or from the in-controller tasks), a
//!    person's answer on an Approval, a retry that is due.
//! 2. The engine turns it into a new record, written with the resource
//!    version that was read; a stale read fails the write and changes nothing.
//! 3. Only then is anything started, stopped or created: every attempt the
//!    record says is running and that is not known to run is launched (under
//!    a name built from the work, so launching twice starts it once),
//!    stopped work is cancelled, Approvals are created for waiting steps.
//!    A controller killed before this step does it after its restart, from
//!    the record alone.

pub mod approvals;
pub mod events;
pub mod in_controller;
pub mod pin;
pub mod status;
pub mod written;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::error::Error;
use crate::settings::Settings;
use coxswain_core::api::{Approval, Run, RunPhase, RunStatus, StepError, StepStatus};
use coxswain_core::engine::{self, Event, Failed, RunInfo, RunMachine, Work, codes, step_error};
use coxswain_steps::in_process::InProcess;
use coxswain_steps::launch::{Launcher, LauncherError, Observation, WorkId};

use crate::jobs::JobLauncher;
use in_controller::InController;
use pin::{FlowCache, Pinned};

/// What every reconcile shares. Nothing here is the truth about a run: the
/// in-controller tasks and the flow cache are found again (or redone) from
/// the API server after a restart.
pub struct Context {
    /// The API client.
    pub client: kube::Client,
    /// The controller's settings.
    pub settings: Arc<Settings>,
    /// Agent, http and message attempts running in this process.
    pub in_controller: InProcess<InController>,
    /// Compiled flow snapshots by digest.
    pub flows: FlowCache,
    /// Publishes Events, in the background.
    pub events: events::Publisher,
    /// Which Run each in-controller attempt belongs to, so its end queues
    /// that Run (a routing table, not a record: lost on restart, when the
    /// work is launched again anyway).
    pub routes: crate::controller::Routes,
    /// Moves large values between the status and ConfigMaps.
    pub offloader: crate::offload::Offloader,
    /// The controller's metrics.
    pub metrics: Arc<crate::ops::Metrics>,
    /// How script steps become Jobs.
    pub jobs: Arc<crate::jobs::JobSettings>,
    /// The Runs written and not yet brought back by the watch.
    pub written: written::Written,
}

/// How long a Run whose Flow does not exist yet waits before looking again.
const FLOW_MISSING_REQUEUE: Duration = Duration::from_secs(10);

/// Reconciles one Run.
pub async fn reconcile(run: Arc<Run>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_timer();
    let run = ctx.written.newest(run);
    if run.metadata.deletion_timestamp.is_some() {
        ctx.written.forget(&run);
        // Jobs, ConfigMaps and Approvals go with the Run (owner references);
        // work running here is stopped.
        stop_in_controller(&ctx, &run).await;
        return Ok(Action::await_change());
    }
    if run.status.as_ref().is_some_and(|s| s.phase.is_over()) {
        // A controller killed between writing the end of a run and stopping
        // its work finds that work here.
        ctx.written.forget(&run);
        stop_leftovers(&ctx, &run).await?;
        return Ok(Action::await_change());
    }
    // The record with the values that were moved out of the status put back.
    let old = match ctx.offloader.load(&run).await {
        Ok(old) => old,
        Err(Error::Tampered { object, reason }) => {
            return end_tampered_record(&ctx, &run, &object, reason).await;
        }
        Err(e) => return Err(e),
    };
    let flow = match pin::pinned_flow(&ctx.client, &ctx.flows, &run, old.flow_digest.as_deref())
        .await?
    {
        Pinned::Flow(flow) => flow,
        Pinned::Refused(reason) => {
            return refuse(&ctx, &run, &old, step_error(codes::INTERNAL, reason)).await;
        }
        Pinned::Tampered { object, reason } => {
            tracing::warn!(run = %run.name_any(), configmap = %object, "{reason}");
            ctx.events
                .publish(&run, vec![events::tampered("ConfigMap", &object, &reason)]);
            return refuse(&ctx, &run, &old, step_error(codes::TAMPERED, reason)).await;
        }
        Pinned::NotYet(reason) => {
            tracing::info!(run = %run.name_any(), "{reason}; looking again soon");
            let mut new = old.clone();
            status::set_flow_missing(&mut new, run.metadata.generation, Timestamp::now(), &reason);
            if new != old {
                write_record(&ctx, &run, &new).await?;
            }
            return Ok(Action::requeue(FLOW_MISSING_REQUEUE));
        }
    };
    let info = run_info(&run);
    let input = run
        .spec
        .input
        .clone()
        .unwrap_or(Value::Object(Default::default()));
    let mut machine = match RunMachine::resume(&flow, input, info, old.clone()) {
        Ok(machine) => machine,
        Err(e) => {
            return refuse(&ctx, &run, &old, step_error(codes::INTERNAL, e.to_string())).await;
        }
    };
    Reconcile {
        ctx: &ctx,
        run: &run,
        machine: &mut machine,
        now: Timestamp::now(),
    }
    .go(old)
    .await
}

/// One pass over a run whose engine is rebuilt.
struct Reconcile<'a, 'f> {
    ctx: &'a Context,
    run: &'a Run,
    machine: &'a mut RunMachine<'f>,
    now: Timestamp,
}

impl Reconcile<'_, '_> {
    async fn go(self, old: RunStatus) -> Result<Action, Error> {
        let Reconcile {
            ctx,
            run,
            machine,
            now,
        } = self;
        let approvals: Api<Approval> =
            Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
        // Work the record says runs, before anything happens to the run
        // (a cancel ends it; its work must still be stopped).
        let before: Vec<Work> = machine.running_work();
        let mut actions = Vec::new();
        if old.phase == RunPhase::Pending && old.steps.is_empty() {
            actions.extend(machine.handle(Event::Start, now));
        }
        if run.spec.cancel && !machine.state().phase.is_over() {
            actions.extend(machine.handle(Event::Cancel, now));
        }
        // What became of that work, while the run goes on.
        let mut known_running = Vec::new();
        let mut finished = Vec::new();
        for work in &before {
            if machine.state().phase.is_over() {
                break;
            }
            let id = WorkId::of(work);
            match observe(ctx, run, work, &id).await {
                Ok(Observation::Running) => known_running.push(id),
                Ok(Observation::Finished(result)) => {
                    actions.extend(machine.handle(id.finished(result), now));
                    finished.push((work.clone(), id));
                }
                Ok(Observation::Unknown) => {}
                Err(e) => {
                    tracing::warn!(run = %run.name_any(), error = %e, "could not observe work");
                    known_running.push(id);
                }
            }
        }
        // A person's answers.
        let asked = approvals::read(&approvals, run, machine.pending_approvals()).await?;
        let mut settled = Vec::new();
        for a in &asked {
            if let Some(reason) = &a.foreign {
                tracing::warn!(run = %run.name_any(), approval = %a.name, "{reason}");
                ctx.events
                    .publish(run, vec![events::tampered("Approval", &a.name, reason)]);
                let error = step_error(codes::TAMPERED, reason.clone());
                actions.extend(machine.fail_waiting(
                    &a.request.step,
                    a.request.attempt,
                    error,
                    now,
                ));
                continue;
            }
            let Some(answer) = a.answer() else { continue };
            // Admission checked who answered; the answer is not taken on
            // its word (it may be missing, or gone around).
            if let Err(refused) = a.check_decider(run) {
                let reason = refused.to_string();
                if a.refused() != Some(reason.as_str()) {
                    settled.push((a.name.clone(), Some(reason)));
                }
                continue;
            }
            match machine.decide(&a.request.step, a.request.attempt, answer, now) {
                Ok(more) => {
                    actions.extend(more);
                    settled.push((a.name.clone(), None));
                }
                Err(refused) => {
                    let reason = refused.to_string();
                    if a.refused() != Some(reason.as_str()) {
                        settled.push((a.name.clone(), Some(reason)));
                    }
                }
            }
        }
        // Time.
        if machine.next_wake().is_some_and(|at| at <= now) {
            actions.extend(machine.handle(Event::Tick, now));
        }

        // The record, written once.
        let mut new = machine.record().clone();
        status::set_conditions(&mut new, run.metadata.generation, now);
        let wrote = new != old;
        if wrote {
            if let Err(e) = write_record(ctx, run, &new).await {
                return match e {
                    Error::Tampered { object, reason } => {
                        tracing::warn!(run = %run.name_any(), %object, "{reason}");
                        ctx.events
                            .publish(run, vec![events::tampered("ConfigMap", &object, &reason)]);
                        refuse(ctx, run, &old, step_error(codes::TAMPERED, reason)).await
                    }
                    e => Err(e),
                };
            }
            count(ctx, machine, &old, &new);
            ctx.events.publish(run, story(ctx, &old, &new));
        }

        // Acting on it.
        for (work, id) in &finished {
            if let Err(e) = forget(ctx, run, work, id).await {
                tracing::debug!(error = %e, "could not forget finished work");
            }
        }
        let by_place: HashMap<(String, Option<usize>), &Work> = before
            .iter()
            .map(|w| ((w.step.clone(), w.part.as_ref().map(|p| p.index)), w))
            .collect();
        for action in &actions {
            if let engine::Action::Stop { step, part } = action
                && let Some(work) = by_place.get(&(step.clone(), *part))
            {
                let id = WorkId::of(work);
                if let Err(e) = cancel(ctx, run, work, &id).await {
                    tracing::warn!(error = %e, "could not stop work");
                }
            }
        }
        let over = new.phase.is_over();
        if !over {
            let to_launch: Vec<Work> = machine
                .running_work()
                .into_iter()
                .filter(|w| !known_running.contains(&WorkId::of(w)))
                .collect();
            // Work is launched only from a record known to be current: the
            // write just made proves it; without one, the Run read may be
            // older than a record that already saw this work finish (and
            // forgot it), and launching it again would run it twice.
            if !wrote && !to_launch.is_empty() && !is_current(ctx, run).await? {
                return Ok(Action::requeue(STALE_REQUEUE));
            }
            for work in to_launch {
                if let Err(e) = launch(ctx, run, &work).await {
                    // Launching is retried by the next reconcile; the record
                    // already says the attempt runs.
                    tracing::warn!(run = %run.name_any(), error = %e, "could not launch work");
                    return Ok(Action::requeue(crate::settings::ERROR_REQUEUE));
                }
            }
            // Approvals for the attempts waiting now; those read above exist.
            let existing: Vec<&str> = asked
                .iter()
                .filter(|a| a.object.is_some())
                .map(|a| a.name.as_str())
                .collect();
            let read: Vec<&str> = asked.iter().map(|a| a.name.as_str()).collect();
            for request in machine.pending_approvals() {
                let a = approvals::Asked::new(run, request);
                if !existing.contains(&a.name.as_str()) {
                    // Earlier attempts first: once this one exists, this
                    // is not done again.
                    approvals::settle_earlier(&approvals, run, &new, &a.request, &read).await?;
                    let show = ctx.offloader.store_shown(run, &a.request.show).await?;
                    if let Some(reason) = approvals::create(&approvals, run, &a, show).await? {
                        // Taken up by the next reconcile's read, which
                        // fails the attempt.
                        tracing::warn!(run = %run.name_any(), approval = %a.name, "{reason}");
                        return Ok(Action::requeue(STALE_REQUEUE));
                    }
                }
            }
        } else {
            // The run is over: whatever of its work did not finish stops.
            for work in &before {
                let id = WorkId::of(work);
                if !finished.iter().any(|(_, done)| *done == id)
                    && let Err(e) = cancel(ctx, run, work, &id).await
                {
                    tracing::warn!(run = %run.name_any(), error = %e, "could not stop work");
                }
            }
            let uid = run.uid().unwrap_or_default();
            ctx.routes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&uid);
        }
        for (name, refused) in settled {
            approvals::settle(&approvals, &name, refused.as_deref()).await?;
        }
        // Attempts that stopped waiting unanswered (a timeout): their
        // Approvals are closed so nobody answers into the void. An ended
        // run's are closed by `stop_leftovers`.
        if !over {
            let waiting = machine.pending_approvals();
            for a in approvals::replaced(&asked, &waiting) {
                let reason =
                    approvals::attempt_ended_reason(&new, &a.request.step, a.request.attempt);
                approvals::close(&approvals, &a.name, &reason).await?;
            }
        }
        // A pod stuck before it starts (an image that cannot be pulled, a
        // missing Secret) does not change its Job: look again now and then
        // while scripts run.
        let scripts_run = !over && machine.running_work().iter().any(is_script);
        let wake = machine.next_wake().filter(|_| !over).map(|at| {
            Duration::try_from(at.duration_since(Timestamp::now()))
                .unwrap_or_default()
                .max(Duration::from_millis(10))
        });
        Ok(match (wake, scripts_run) {
            (Some(wait), true) => Action::requeue(wait.min(SCRIPT_RECHECK)),
            (Some(wait), false) => Action::requeue(wait),
            (None, true) => Action::requeue(SCRIPT_RECHECK),
            (None, false) => Action::await_change(),
        })
    }
}

/// How often a Run with scripts running is looked at even when nothing
/// it watches changed.
const SCRIPT_RECHECK: Duration = Duration::from_secs(20);

/// How soon a reconcile that read a stale Run looks again (the watch
/// brings the current one meanwhile).
const STALE_REQUEUE: Duration = Duration::from_millis(200);

/// Whether `run` is the Run as the API server has it now (a quorum read).
async fn is_current(ctx: &Context, run: &Run) -> Result<bool, Error> {
    let api: Api<Run> = Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    let name = run.name_any();
    let now = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading the run {name}"), e))?;
    Ok(now.is_some_and(|now| now.resource_version() == run.resource_version()))
}

/// Writes `new` as the Run's status, its large values moved into
/// ConfigMaps first, and deletes the value ConfigMaps it no longer needs.
async fn write_record(ctx: &Context, run: &Run, new: &RunStatus) -> Result<(), Error> {
    let stored = ctx.offloader.store(run, new).await?;
    let written = status::write(&ctx.client, run, stored.status.clone()).await?;
    ctx.written.wrote(run, written);
    ctx.metrics.status_written(stored.bytes);
    // Only a status that referenced moved values can leave some unused
    // (ConfigMaps made for a write that then failed go with the Run).
    let had_values = run.status.as_ref().is_some_and(|s| !s.values.is_empty());
    if had_values && let Err(e) = ctx.offloader.collect(run, &stored.status).await {
        tracing::debug!(error = %e, "could not delete unused value ConfigMaps");
    }
    Ok(())
}

/// The Events that tell how `old` became `new`, one per write unless the
/// settings ask for one per transition.
fn story(ctx: &Context, old: &RunStatus, new: &RunStatus) -> Vec<kube::runtime::events::Event> {
    let all = events::transitions(old, new);
    if ctx.settings.event_per_transition {
        all
    } else {
        events::fold(all)
    }
}

/// Counts the steps that settled, the tokens they used and the run's end.
fn count(ctx: &Context, machine: &RunMachine<'_>, old: &RunStatus, new: &RunStatus) {
    let compiled = machine.flow();
    for (key, record) in &new.steps {
        let before = old.steps.get(key);
        let settled = matches!(record.status, StepStatus::Completed | StepStatus::Failed);
        let same = before.is_some_and(|b| {
            b.status == record.status && b.attempts.len() == record.attempts.len()
        });
        if !settled || same {
            continue;
        }
        let kind = compiled
            .node(key)
            .and_then(|n| compiled.steps[n].step.kind());
        let took = match (&record.started_at, &record.finished_at) {
            (Some(a), Some(b)) => match (a.parse::<Timestamp>(), b.parse::<Timestamp>()) {
                (Ok(a), Ok(b)) => Duration::try_from(b.duration_since(a)).unwrap_or_default(),
                _ => Duration::ZERO,
            },
            _ => Duration::ZERO,
        };
        if let Some(kind) = kind {
            ctx.metrics.step_finished(&kind, record.status, took);
        }
        let seen = before.map_or(0, |b| b.attempts.len());
        for attempt in record.attempts.iter().skip(seen) {
            if let Some(usage) = &attempt.usage {
                ctx.metrics.tokens(
                    usage.prompt_tokens.max(0) as u64,
                    usage.completion_tokens.max(0) as u64,
                );
            }
        }
    }
    if !old.phase.is_over() && new.phase.is_over() {
        ctx.metrics.run_finished(new.phase);
    }
}

/// The facts the engine and the executors get about the run.
fn run_info(run: &Run) -> RunInfo {
    RunInfo {
        name: run.name_any(),
        namespace: run.namespace().unwrap_or_default(),
        uid: run.uid().unwrap_or_default(),
        since: run
            .annotations()
            .get(crate::names::SINCE_ANNOTATION)
            .filter(|s| !s.is_empty())
            .cloned(),
    }
}

/// Ends a run that cannot start or go on, with the reason in its record.
async fn refuse(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    error: StepError,
) -> Result<Action, Error> {
    let mut new = old.clone();
    new.phase = RunPhase::Failed;
    new.error = Some(error);
    let now = Timestamp::now();
    if new.finished_at.is_none() {
        new.finished_at = Some(now.to_string());
    }
    status::set_conditions(&mut new, run.metadata.generation, now);
    if new != *old {
        write_record(ctx, run, &new).await?;
        ctx.metrics.run_finished(new.phase);
        ctx.events.publish(run, story(ctx, old, &new));
    }
    Ok(Action::await_change())
}

/// Ends a run whose record cannot be read back because a value moved out
/// of it was replaced: the status is written as it is stored (its values
/// by reference), failed with the reason; nothing runs from it again.
async fn end_tampered_record(
    ctx: &Context,
    run: &Run,
    object: &str,
    reason: String,
) -> Result<Action, Error> {
    tracing::warn!(run = %run.name_any(), %object, "{reason}");
    ctx.events
        .publish(run, vec![events::tampered("ConfigMap", object, &reason)]);
    let mut stored = run.status.clone().unwrap_or_default();
    stored.phase = RunPhase::Failed;
    stored.error = Some(step_error(codes::TAMPERED, reason));
    let now = Timestamp::now();
    stored.finished_at.get_or_insert_with(|| now.to_string());
    status::set_conditions(&mut stored, run.metadata.generation, now);
    let value = serde_json::to_value(&stored)
        .map_err(|e| Error::Corrupt(format!("the status of run {}: {e}", run.name_any())))?;
    let written = status::write(&ctx.client, run, value).await?;
    ctx.written.wrote(run, written);
    ctx.metrics.run_finished(stored.phase);
    stop_in_controller(ctx, run).await;
    Ok(Action::await_change())
}

/// Stops the Jobs of an ended run that still run and its in-controller
/// work, and closes the Approvals nobody answered.
async fn stop_leftovers(ctx: &Context, run: &Run) -> Result<(), Error> {
    use k8s_openapi::api::batch::v1::Job;
    use kube::api::{DeleteParams, ListParams};
    let uid = run.uid().unwrap_or_default();
    ctx.in_controller.cancel_where(|id| id.run == uid).await;
    let namespace = run.namespace().unwrap_or_default();
    let phase = run.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let reason = format!(
        "run {} ended {phase:?} before an answer was taken in",
        run.name_any()
    );
    let approvals: Api<Approval> = Api::namespaced(ctx.client.clone(), &namespace);
    let closed = approvals::close_unanswered(&approvals, run, &reason).await?;
    if closed > 0 {
        tracing::info!(run = %run.name_any(), closed, "closed the unanswered approvals of an ended run");
    }
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let selector = format!("{}={uid}", crate::names::RUN_UID_LABEL);
    let list = jobs
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| {
            Error::kube(
                format!("listing the Jobs of run {namespace}/{}", run.name_any()),
                e,
            )
        })?;
    for job in list.items {
        let done = job
            .status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some() || s.failed.unwrap_or(0) > 0);
        if done {
            continue;
        }
        let name = job.name_any();
        match jobs.delete(&name, &DeleteParams::background()).await {
            Ok(_) => {
                tracing::info!(run = %run.name_any(), job = %name, "stopped a Job of an ended run")
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                return Err(Error::kube(
                    format!("deleting the Job {namespace}/{name}"),
                    e,
                ));
            }
        }
    }
    Ok(())
}

/// Stops whatever this process runs for a Run being deleted.
async fn stop_in_controller(ctx: &Context, run: &Run) {
    let uid = run.uid().unwrap_or_default();
    let stopped = ctx.in_controller.cancel_where(|id| id.run == uid).await;
    if stopped > 0 {
        tracing::info!(run = %run.name_any(), stopped, "stopped the work of a deleted run");
    }
    ctx.routes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&uid);
}

fn is_script(work: &Work) -> bool {
    matches!(work.task, engine::Task::Script(_))
}

/// Where a piece of work runs: script steps as Jobs of the Run, the rest
/// as tasks in this process.
fn jobs(ctx: &Context, run: &Run) -> JobLauncher {
    JobLauncher::for_run(ctx.client.clone(), ctx.jobs.clone(), run)
}

async fn observe(
    ctx: &Context,
    run: &Run,
    work: &Work,
    id: &WorkId,
) -> Result<Observation, LauncherError> {
    if is_script(work) {
        jobs(ctx, run).observe(id).await
    } else {
        ctx.in_controller.observe(id).await
    }
}

async fn launch(ctx: &Context, run: &Run, work: &Work) -> Result<(), LauncherError> {
    if is_script(work) {
        return jobs(ctx, run).launch(work).await;
    }
    ctx.routes.lock().unwrap_or_else(|e| e.into_inner()).insert(
        work.run.uid.clone(),
        kube::runtime::reflector::ObjectRef::from(run),
    );
    ctx.in_controller.launch(work).await
}

async fn cancel(ctx: &Context, run: &Run, work: &Work, id: &WorkId) -> Result<(), LauncherError> {
    if is_script(work) {
        jobs(ctx, run).cancel(id).await
    } else {
        ctx.in_controller.cancel(id).await
    }
}

async fn forget(ctx: &Context, run: &Run, work: &Work, id: &WorkId) -> Result<(), LauncherError> {
    if is_script(work) {
        jobs(ctx, run).forget(id).await
    } else {
        ctx.in_controller.forget(id).await
    }
}

/// The failure recorded when work could not be launched at all.
#[allow(dead_code)]
fn launch_failed(error: LauncherError) -> Failed {
    Failed::from(step_error(codes::INTERNAL, error.to_string()))
}
