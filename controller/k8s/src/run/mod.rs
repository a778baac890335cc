//! The Run reconciler: read the Run, rebuild the engine from its status, feed
//! it what happened, write the status back in one write, then act. Each
//! phase is a function of its own:
//!
//! 1. `read_run` and `gather`: the Run, its status (moved-out values
//!    put back and checked), its pinned flow (checked against its digest),
//!    what became of the attempts the status says run, and the Approvals of
//!    the attempts it waits on (checked to be the ones Coxswain made).
//! 2. `feed`: the engine takes it in, in a fixed order (start, cancel,
//!    finished work, answers, time). Pure; from the work before, the engine
//!    after and what was seen, the core's [`Plan`] says what to do: the same
//!    plan `coxswain run` and the conformance driver follow.
//! 3. `write`: the new record, written once with the resource version
//!    that was read; a stale read fails the write and changes nothing.
//! 4. `act`: only then is anything started, stopped or created. Every
//!    attempt the status says runs and that is not known to run is
//!    launched (under a name built from the work, so launching twice
//!    starts it once), stopped work is cancelled, Approvals are created for
//!    waiting steps. A controller killed before this phase does it after
//!    its restart, from the status alone.

pub mod approvals;
mod archive;
pub mod events;
pub mod in_controller;
pub mod launchers;
pub mod pin;
pub mod rerun;
pub mod status;
pub mod trailing;
pub mod workspace;
pub mod written;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::error::{Error, ValueError};
use crate::jobs::chain::RunChains;
use crate::settings::{EventMode, Settings};
use coxswain_core::api::{
    Approval, Run, RunPhase, RunStatus, StepError, StepKind, StepPhase, Workspace,
};
use coxswain_core::engine::{
    self, Answer, AskRef, CompiledFlow, Event, Plan, RunInfo, RunMachine, Seen, Work,
    WorkspaceWork, codes, step_error,
};
use coxswain_steps::in_process::InProcess;
use coxswain_steps::launch::{Launcher, Observation, WorkId};
use coxswain_steps::records::LookupFailed;

use in_controller::InController;
use launchers::Launchers;
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
    /// that Run (a routing table, not a status: lost on restart, when the
    /// work is launched again anyway).
    pub routes: launchers::Routes,
    /// Moves large values between the status and ConfigMaps.
    pub offloader: crate::offload::Offloader,
    /// The controller's metrics.
    pub metrics: Arc<crate::ops::Metrics>,
    /// How script steps become Jobs.
    pub jobs: Arc<crate::jobs::JobSettings>,
    /// The Runs written and not yet brought back by the watch.
    pub written: written::Written,
    /// The status writes running behind in-controller progress.
    pub trailing: trailing::Trailing,
    /// Queues the Run of the uid sent again (a trailing write failed).
    pub again: futures::channel::mpsc::UnboundedSender<String>,
    /// The records database (saves, lookups, the run archive), when one
    /// is configured.
    pub records: Option<coxswain_records::Store>,
    /// The buckets whose running Runs this replica acts on (all of them
    /// unless replicas share the work).
    pub shards: crate::shards::Shards,
    /// Whether this replica leads: the leader alone archives ended Runs
    /// and deletes them when their retention is up.
    pub leading: tokio::sync::watch::Receiver<bool>,
}

impl Context {
    /// Whether this replica leads now.
    pub fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    /// Whether this replica acts on `run` now: a running one when its
    /// bucket is this replica's (the guard keeps the bucket from being
    /// handed over until the reconcile ends), an ended one when this
    /// replica leads (the archive and retention stay with the leader).
    fn acts_on(&self, run: &Run) -> Option<Option<crate::shards::Entered>> {
        if run.status.as_ref().is_some_and(|s| s.phase.is_over()) {
            return self.leads().then_some(None);
        }
        self.shards.enter(&run.uid().unwrap_or_default()).map(Some)
    }
}

/// How long a Run whose Flow does not exist yet waits before looking again.
const FLOW_MISSING_REQUEUE: Duration = Duration::from_secs(10);

/// Reconciles one Run: gather → feed → write → act.
pub async fn reconcile(run: Arc<Run>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_timer();
    let run = ctx.written.newest(run);
    let Some(_turn) = ctx.acts_on(&run) else {
        // Another replica's bucket, or an ended run and another replica
        // leads: this one is queued again if its bucket comes here.
        return Ok(Action::await_change());
    };
    let (old, flow, trailing) = match read_run(&ctx, &run).await? {
        Read::Ready {
            old,
            flow,
            trailing,
        } => (*old, flow, trailing),
        Read::Done(action) => return Ok(action),
    };
    let input = run
        .spec
        .input
        .clone()
        .unwrap_or(Value::Object(Default::default()));
    let chains = Arc::new(RunChains::of(flow.get(), &input));
    let mut machine = match RunMachine::resume(&flow, input, run_info(&run), old.clone()) {
        Ok(machine) => machine,
        Err(_) if trailing => {
            // Refused from a written status only.
            return Ok(after_writer(&ctx, &run));
        }
        Err(e) => {
            return refuse(&ctx, &run, &old, step_error(codes::INTERNAL, e.to_string())).await;
        }
    };
    let mut launchers = Launchers::new(
        ctx.client.clone(),
        ctx.jobs.clone(),
        &ctx.in_controller,
        &ctx.routes,
        &run,
        chains,
    );
    let mut seen = gather(&ctx, &run, &machine, &launchers, &flow).await?;
    let now = Timestamp::now();
    let mut fed = feed(&run, &mut machine, &mut seen, now);
    // Lookups run now, after the saves just taken in, so the one write
    // below records both the attempt and what it found.
    fed.actions
        .extend(look_up(&ctx, &run, &mut machine, now).await);
    let plan = Plan::new(&fed.actions, &machine, &seen.as_seen(&fed));
    let mut new = machine.summarized();
    keep_stopped_logs(&mut new, &plan, &launchers).await;
    status::set_conditions(&mut new, run.metadata.generation, now);
    let told = std::mem::take(&mut fed.told);
    let ours = trailing || ctx.written.is_ours(&run);
    if ours && runs_ahead(&plan, !seen.asked.is_empty()) {
        let queued = trailing::Queued {
            status: new,
            told,
            forget: plan.forget.clone(),
        };
        let ahead = Ahead {
            ctx: &ctx,
            run: &run,
            old: &old,
            trailing,
            flow: &flow,
        };
        return run_ahead(ahead, queued, &plan, &seen, &launchers).await;
    }
    if trailing {
        // This plan acts on a written status: wait for the writer, then
        // step again from the Run it wrote.
        return Ok(after_writer(&ctx, &run));
    }
    let wrote = match write(&ctx, &run, &old, new, told, Some(machine.flow())).await {
        Ok(written) => written,
        Err(Error::Values(ValueError::Tampered { object, reason })) => {
            tracing::warn!(run = %run.name_any(), %object, "{reason}");
            ctx.events
                .publish(&run, vec![events::tampered("ConfigMap", &object, &reason)]);
            return refuse(&ctx, &run, &old, step_error(codes::TAMPERED, reason)).await;
        }
        Err(e) => return Err(e),
    };
    // The workspace the engine just took in is mounted by what starts now.
    launchers.mounting(machine.status());
    let acting = Acting {
        ctx: &ctx,
        run: &run,
        status: machine.status(),
        plan: &plan,
        seen: &seen,
        launchers: &launchers,
    };
    act(acting, wrote.as_ref()).await
}

/// What [`read_run`] found: a run to step, or the reconcile's end.
enum Read {
    /// The status with its moved-out values put back, and the pinned flow.
    Ready {
        old: Box<RunStatus>,
        flow: Arc<CompiledFlow>,
        /// `old` is the newest status, not all of it written yet.
        trailing: bool,
    },
    /// Nothing to step (deleted, over, not startable yet, or ended here).
    Done(Action),
}

/// The first part of gathering: the Run's own record and its pinned flow,
/// verified. A Run being deleted, already over, whose status or flow was
/// tampered with, or whose Flow is not there yet, ends the reconcile here.
async fn read_run(ctx: &Context, run: &Run) -> Result<Read, Error> {
    if run.metadata.deletion_timestamp.is_some() {
        ctx.written.forget(run);
        ctx.trailing.forget(&run.uid().unwrap_or_default());
        // Jobs, ConfigMaps and Approvals go with the Run (owner references);
        // work running here is stopped.
        stop_in_controller(ctx, run).await;
        return Ok(Read::Done(Action::await_change()));
    }
    if run.status.as_ref().is_some_and(|s| s.phase.is_over()) {
        // A controller killed between writing the end of a run and stopping
        // its work finds that work here.
        ctx.written.forget(run);
        ctx.trailing.forget(&run.uid().unwrap_or_default());
        stop_leftovers(ctx, run).await?;
        return archive::look_after_end(ctx, run).await.map(Read::Done);
    }
    let trailing = match ctx.trailing.base(run) {
        trailing::Base::Read => None,
        trailing::Base::Trailing(status) => Some(status),
        trailing::Base::Foreign => {
            // Someone else wrote the Run while a write of ours ran behind:
            // that write fails; read the Run again once it did.
            return Ok(Read::Done(after_writer(ctx, run)));
        }
    };
    let stepping_from_trailing = trailing.is_some();
    let old = match trailing {
        // The newest status, not all written yet.
        Some(status) => *status,
        // The status with the values that were moved out of it put back.
        None => match ctx.offloader.load(run).await {
            Ok(old) => old,
            Err(Error::Values(ValueError::Tampered { object, reason })) => {
                return end_tampered_status(ctx, run, &object, reason)
                    .await
                    .map(Read::Done);
            }
            Err(e) => return Err(e),
        },
    };
    if let Some(from) = run.spec.from.as_ref().filter(|_| old.flow_digest.is_none()) {
        return start_rerun(ctx, run, &old, from).await;
    }
    let pinned = pin::pinned_flow(&ctx.client, &ctx.flows, run, old.flow_digest.as_deref()).await?;
    if stepping_from_trailing && !matches!(pinned, Pinned::Flow(_)) {
        // What follows writes at once: after the writer, from the Run read.
        return Ok(Read::Done(after_writer(ctx, run)));
    }
    let flow = match pinned {
        Pinned::Flow(flow) => flow,
        Pinned::Refused(code, reason) => {
            let error = step_error(code, reason);
            return refuse(ctx, run, &old, error).await.map(Read::Done);
        }
        Pinned::Tampered { object, reason } => {
            tracing::warn!(run = %run.name_any(), configmap = %object, "{reason}");
            ctx.events
                .publish(run, vec![events::tampered("ConfigMap", &object, &reason)]);
            let error = step_error(codes::TAMPERED, reason);
            return refuse(ctx, run, &old, error).await.map(Read::Done);
        }
        Pinned::NotYet(reason) => {
            tracing::info!(run = %run.name_any(), "{reason}; looking again soon");
            let mut new = old.clone();
            status::set_flow_missing(&mut new, run.metadata.generation, Timestamp::now(), &reason);
            // Told once, as the run starts waiting for its Flow.
            let told = vec![events::flow_missing(&reason)];
            write(ctx, run, &old, new, told, None).await?;
            return Ok(Read::Done(Action::requeue(FLOW_MISSING_REQUEUE)));
        }
    };
    Ok(Read::Ready {
        old: Box::new(old),
        flow,
        trailing: stepping_from_trailing,
    })
}

/// A rerun's first reconcile (`spec.from`, nothing pinned yet): its status
/// seeded from the old run's, with the old run's pinned flow; or the run
/// refused, saying why.
async fn start_rerun(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    from: &coxswain_core::api::RunFrom,
) -> Result<Read, Error> {
    let error = match rerun::seed(ctx, run, from).await? {
        rerun::Seeded::Ready { status, flow } => {
            return Ok(Read::Ready {
                old: status,
                flow,
                trailing: false,
            });
        }
        rerun::Seeded::Refused(reason) => step_error(codes::RERUN, reason),
        rerun::Seeded::Tampered { object, reason } => {
            tracing::warn!(run = %run.name_any(), configmap = %object, "{reason}");
            ctx.events
                .publish(run, vec![events::tampered("ConfigMap", &object, &reason)]);
            step_error(codes::TAMPERED, reason)
        }
    };
    refuse(ctx, run, old, error).await.map(Read::Done)
}

/// What the reconcile saw of the Run's children before stepping the engine.
struct Gathered {
    /// The attempts the status says run.
    before: Vec<Work>,
    /// Of those, what their launcher says (not looked at for a cancelled run).
    observed: Vec<(Work, Observation)>,
    /// Of those, the ones known to run still (or that could not be looked at).
    running: Vec<Work>,
    /// The Approvals of the attempts the status waits on.
    asked: Vec<approvals::Asked>,
    /// Of those, the ones that exist.
    existing: Vec<AskRef>,
    /// Of those, the ones open and unanswered, that nobody else made.
    open: Vec<AskRef>,
    /// The flow's `workspace`, if it has one.
    workspace_spec: Option<Workspace>,
    /// The workspace work the status asks for, and what became of it.
    workspace: Option<(WorkspaceWork, workspace::Observed)>,
}

impl Gathered {
    /// The plan's view of what was seen, with what feeding took in.
    fn as_seen<'a>(&'a self, fed: &'a Fed) -> Seen<'a> {
        Seen {
            before: &self.before,
            running: &self.running,
            finished: &fed.finished,
            asked: &self.existing,
            open: &self.open,
            answers: &fed.answers,
            workspace: self.workspace.as_ref().map(|(work, _)| *work),
            workspace_ended: fed.workspace_ended,
        }
    }

    /// Whether `work` is to be started: it was not looked at (the step
    /// just asked for it), or its Job is not there.
    fn workspace_unstarted(&self, work: WorkspaceWork) -> bool {
        match &self.workspace {
            Some((seen, observed)) if *seen == work => {
                matches!(observed, workspace::Observed::Unknown)
            }
            _ => true,
        }
    }
}

/// The rest of gathering: the workspace work and each attempt the status
/// says runs, looked at where they run, and the Approvals of the attempts
/// it waits on, each checked to be the one Coxswain made (a foreign one is
/// named in an Event).
async fn gather(
    ctx: &Context,
    run: &Run,
    machine: &RunMachine<'_>,
    launchers: &Launchers<'_>,
    flow: &CompiledFlow,
) -> Result<Gathered, Error> {
    let workspace_spec = flow.spec().workspace.clone();
    let workspace = match (machine.workspace_work(), &workspace_spec) {
        (Some(work), Some(spec)) => Some((
            work,
            workspace::observe(ctx, run, launchers.jobs(), spec, work).await?,
        )),
        _ => None,
    };
    let before = machine.running_work();
    let mut observed = Vec::with_capacity(before.len());
    let mut running = Vec::new();
    // A cancel ends the run before any result could be taken in.
    if !run.spec.cancel {
        // Work waiting for its lookups was never launched.
        for work in before.iter().filter(|w| !w.lookups_due()) {
            match launchers.observe(work).await {
                Ok(Observation::Running) => running.push(work.clone()),
                Ok(seen) => observed.push((work.clone(), seen)),
                Err(e) => {
                    tracing::warn!(run = %run.name_any(), error = %e, "could not observe work");
                    running.push(work.clone());
                }
            }
        }
    }
    let api = approvals_api(ctx, run);
    let asked = approvals::read(&api, run, machine.pending_approvals()).await?;
    for a in &asked {
        if let Some(reason) = &a.foreign {
            tracing::warn!(run = %run.name_any(), approval = %a.name, "{reason}");
            ctx.events
                .publish(run, vec![events::tampered("Approval", &a.name, reason)]);
        }
    }
    let existing = asked
        .iter()
        .filter(|a| a.object.is_some())
        .map(|a| AskRef::from(&a.request))
        .collect();
    let open = approvals::open(&asked, run)
        .map(|a| AskRef::from(&a.request))
        .collect();
    Ok(Gathered {
        before,
        observed,
        running,
        asked,
        existing,
        open,
        workspace_spec,
        workspace,
    })
}

/// What feeding the engine took in.
struct Fed {
    /// What the engine asked for.
    actions: Vec<engine::Action>,
    /// The attempts whose results it took.
    finished: Vec<Work>,
    /// The answers it took or refused.
    answers: Vec<Answer>,
    /// Whether it took in how the workspace work ended.
    workspace_ended: bool,
    /// The Events that tell of it, published with the write.
    told: Vec<kube::runtime::events::Event>,
}

/// Feeds the engine what was gathered, in a fixed order: the start, a
/// cancel, the workspace work's end, finished work, people's answers, then
/// time. Pure: no I/O.
fn feed(run: &Run, machine: &mut RunMachine<'_>, seen: &mut Gathered, now: Timestamp) -> Fed {
    let mut fed = Fed {
        actions: Vec::new(),
        finished: Vec::new(),
        answers: Vec::new(),
        workspace_ended: false,
        told: Vec::new(),
    };
    // A rerun's seeded record holds its copied steps and starts all the same.
    let state = machine.status();
    let fresh =
        state.phase == RunPhase::Pending && (state.steps.is_empty() || state.rerun_of.is_some());
    if fresh {
        fed.actions.extend(machine.handle(Event::Start, now));
    }
    if run.spec.cancel && !machine.status().phase.is_over() {
        fed.actions.extend(machine.handle(Event::Cancel, now));
    }
    if let Some((work, workspace::Observed::Ended(ended, told))) = &mut seen.workspace
        && machine.workspace_work() == Some(*work)
    {
        let event = Event::Workspace((**ended).clone());
        fed.actions.extend(machine.handle(event, now));
        fed.workspace_ended = true;
        fed.told = std::mem::take(told);
    }
    for (work, observation) in &seen.observed {
        if machine.status().phase.is_over() {
            break;
        }
        if let Observation::Finished(result) = observation {
            let id = WorkId::of(work);
            fed.actions
                .extend(machine.handle(id.finished(result.clone()), now));
            fed.finished.push(work.clone());
        }
    }
    take_answers(run, machine, &seen.asked, now, &mut fed);
    if machine.next_wake().is_some_and(|at| at <= now) {
        fed.actions.extend(machine.handle(Event::Tick, now));
    }
    fed
}

/// Runs the lookups of the attempts about to start and of the person
/// steps about to be asked, and hands the engine what they found; a
/// database that cannot answer now leaves them waiting for the next
/// reconcile (the plan lists them again), anything else fails the attempt.
async fn look_up(
    ctx: &Context,
    run: &Run,
    machine: &mut RunMachine<'_>,
    now: Timestamp,
) -> Vec<engine::Action> {
    let (work, people) = machine.lookups_due();
    if work.is_empty() && people.is_empty() {
        return Vec::new();
    }
    let records = crate::records::records(ctx.records.as_ref());
    let facts = run_info(run);
    let mut actions = Vec::new();
    for work in &work {
        let found = records.look_up(work).await;
        let part = work.part.as_ref().map(|p| p.index);
        let slot = (work.step.as_str(), part, work.attempt);
        actions.extend(take_found(run, machine, slot, found, now));
    }
    for request in &people {
        let found = records.look_up_for(request, &facts).await;
        let slot = (request.step.as_str(), None, request.attempt);
        actions.extend(take_found(run, machine, slot, found, now));
    }
    actions
}

/// Hands the engine what the lookups of one attempt (`step`, `part`,
/// `attempt`) found: the records, the step's failure, or, when the
/// database did not answer, that the attempt waits (said in its status).
fn take_found(
    run: &Run,
    machine: &mut RunMachine<'_>,
    (step, part, attempt): (&str, Option<usize>, u32),
    found: Result<serde_json::Map<String, serde_json::Value>, LookupFailed>,
    now: Timestamp,
) -> Vec<engine::Action> {
    let found = match found {
        Ok(found) => Ok(found),
        Err(LookupFailed::Step(error)) => Err(error),
        Err(LookupFailed::Unavailable(reason)) => {
            tracing::warn!(run = %run.name_any(), %step, "{reason}; trying again");
            let reason = waiting_for_database(&reason);
            let step = step.to_string();
            let waiting = Event::LookupsWaiting {
                step,
                part,
                attempt,
                reason,
            };
            return machine.handle(waiting, now);
        }
    };
    let step = step.to_string();
    machine.handle(
        Event::LookedUp {
            step,
            part,
            attempt,
            found,
        },
        now,
    )
}

/// What an attempt's status says while its lookups wait for the records
/// database.
fn waiting_for_database(reason: &str) -> String {
    format!(
        "waiting for the records database, which did not answer ({reason}); asking again every {} s",
        crate::settings::ERROR_REQUEUE.as_secs()
    )
}

/// Hands the engine the answers written on the Approvals of the attempts
/// still waiting; an Approval Coxswain did not make fails its attempt.
fn take_answers(
    run: &Run,
    machine: &mut RunMachine<'_>,
    asked: &[approvals::Asked],
    now: Timestamp,
    fed: &mut Fed,
) {
    let waiting: Vec<AskRef> = machine
        .pending_approvals()
        .iter()
        .map(AskRef::from)
        .collect();
    for a in asked {
        let ask = AskRef::from(&a.request);
        // An attempt that stopped waiting meanwhile takes no answer; its
        // Approval is closed by the plan.
        if !waiting.contains(&ask) {
            continue;
        }
        if let Some(reason) = &a.foreign {
            let error = step_error(codes::TAMPERED, reason.clone());
            fed.actions
                .extend(machine.fail_waiting(&ask.step, ask.attempt, error, now));
            continue;
        }
        let taken = if a.request.approvals > 1 {
            // Each answer is checked as a single one is; those counted may
            // take a decision, those refused are named either way.
            let ballots = a.ballots(run);
            let not_counted = (!ballots.refused.is_empty()).then(|| ballots.refused.join("; "));
            match (ballots.decision, not_counted) {
                (Some(decision), _) => machine
                    .decide(&ask.step, ask.attempt, decision, now)
                    .map_err(|refused| refused.to_string()),
                (None, Some(why)) => Err(why),
                (None, None) => continue,
            }
        } else {
            let Some(answer) = a.answer() else { continue };
            // Admission checked who answered; the answer is not taken on its
            // word (it may be missing, or gone around).
            match a.check_decider(run) {
                Err(refused) => Err(refused.to_string()),
                Ok(()) => machine
                    .decide(&ask.step, ask.attempt, answer, now)
                    .map_err(|refused| refused.to_string()),
            }
        };
        let refused = match taken {
            Ok(more) => {
                fed.actions.extend(more);
                None
            }
            Err(reason) => Some(reason),
        };
        fed.answers.push(Answer {
            ask,
            refused,
            noted: a.refused().map(str::to_string),
        });
    }
}

/// The one place a reconcile writes a Run's status: `new` (its
/// conditions set), when it differs from `old`. Then what changed is
/// counted (the steps of `flow`, when the engine ran, and the run's end)
/// and told: the Events `told`, then the story of the change. Says
/// whether it wrote, and what.
async fn write(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    new: RunStatus,
    told: Vec<kube::runtime::events::Event>,
    flow: Option<&engine::Compiled<'_>>,
) -> Result<Option<RunStatus>, Error> {
    if new == *old {
        return Ok(None);
    }
    write_status(ctx, run, &new).await?;
    tell(ctx, run, old, &new, told, flow);
    Ok(Some(new))
}

/// What follows a status write, whoever made it: the steps that settled
/// are counted, and the Events `told` are published with the story of
/// how `old` became `new`.
fn tell(
    ctx: &Context,
    run: &Run,
    old: &RunStatus,
    new: &RunStatus,
    mut told: Vec<kube::runtime::events::Event>,
    flow: Option<&engine::Compiled<'_>>,
) {
    count(ctx, flow, old, new);
    told.extend(story(ctx, old, new));
    ctx.events.publish(run, told);
}

/// Lets go of the results of finished in-controller attempts, once a
/// written status records them.
async fn forget_in_controller(ctx: &Context, works: &[Work]) {
    for work in works {
        if let Err(e) = ctx.in_controller.forget(&WorkId::of(work)).await {
            tracing::debug!(error = %e, "could not forget finished work");
        }
    }
}

/// Whether the plan asks for nothing but in-controller work started (and
/// the results of finished in-controller work let go of): then nothing
/// has to wait for the status that asks for it to be written. `asking`:
/// the run waits on Approvals (whose tallies the reconcile keeps).
fn runs_ahead(plan: &Plan, asking: bool) -> bool {
    !plan.over
        && plan.hand_off.is_none()
        && plan.stop.is_empty()
        && plan.lookups.is_empty()
        && plan.ask.is_empty()
        && plan.ask_lookups.is_empty()
        && plan.settle.is_empty()
        && plan.close.is_empty()
        && plan.workspace.is_none()
        && plan.workspace_forget.is_none()
        && plan.workspace_stop.is_none()
        && !plan.release
        && !asking
        && plan
            .launch
            .iter()
            .chain(&plan.forget)
            .all(|work| !Launchers::runs_as_job(work))
}

/// What a reconcile that runs ahead of its status write steps from.
struct Ahead<'a> {
    ctx: &'a Arc<Context>,
    run: &'a Arc<Run>,
    /// The newest status, written or not, and known to be this
    /// controller's.
    old: &'a RunStatus,
    /// Whether `old` waits to be written still.
    trailing: bool,
    flow: &'a Arc<CompiledFlow>,
}

/// Starts the in-controller work the plan asks for at once, and hands the
/// status that says it runs to the run's trailing writer (see
/// [`trailing`]).
async fn run_ahead(
    ahead: Ahead<'_>,
    queued: trailing::Queued,
    plan: &Plan,
    seen: &Gathered,
    launchers: &Launchers<'_>,
) -> Result<Action, Error> {
    let Ahead {
        ctx,
        run,
        old,
        trailing,
        flow,
    } = ahead;
    let mut later = look_again(plan, &seen.running);
    for work in &plan.launch {
        if let Err(e) = launchers.launch(work).await {
            // The status says the attempt runs: the next reconcile
            // launches it again.
            tracing::warn!(run = %run.name_any(), error = %e, "could not launch work");
            later = Action::requeue(crate::settings::ERROR_REQUEUE);
            break;
        }
    }
    if queued.status == *old && (queued.forget.is_empty() || !trailing) {
        // Nothing new to write; what was let go of is recorded in a
        // written status (or nothing was).
        forget_in_controller(ctx, &queued.forget).await;
        return Ok(later);
    }
    let base = ctx.written.newest(run.clone());
    match ctx.trailing.push(base.clone(), queued) {
        trailing::Pushed::Queued => {}
        trailing::Pushed::Start(first) => {
            tokio::spawn(write_behind(
                ctx.clone(),
                base,
                old.clone(),
                *first,
                flow.clone(),
            ));
        }
        // Stepped from a status that will not be written: step again
        // from the Run (the work just launched is found running).
        trailing::Pushed::Stale => return Ok(Action::requeue(Duration::ZERO)),
    }
    Ok(later)
}

/// The reconcile's end when what it would do has to wait for the run's
/// trailing writer: the writer queues the run again once it stopped
/// (without holding one of the reconciles that may run at once), or it
/// already stopped and the run is stepped again now, from what it wrote.
fn after_writer(ctx: &Context, run: &Run) -> Action {
    if ctx.trailing.want(&run.uid().unwrap_or_default()) {
        Action::await_change()
    } else {
        Action::requeue(Duration::ZERO)
    }
}

/// A run's trailing writer: writes `first`, then what waits behind it,
/// each on the Run the write before returned, counting and telling each
/// write as a reconcile does its own, and letting go of the results each
/// one recorded. Stops when nothing waits, when the run's bucket is no
/// longer this replica's, or at a failed write (the run is then queued
/// again and read afresh: nothing it recorded was let go of).
async fn write_behind(
    ctx: Arc<Context>,
    mut base: Arc<Run>,
    mut old: RunStatus,
    first: trailing::Queued,
    flow: Arc<CompiledFlow>,
) {
    let uid = base.uid().unwrap_or_default();
    let mut next = first;
    loop {
        let written = match ctx.shards.enter(&uid) {
            Some(_turn) => write_status(&ctx, &base, &next.status).await,
            None => {
                ctx.trailing.failed(&uid);
                return;
            }
        };
        let written = match written {
            Ok(written) => written,
            Err(e) => {
                tracing::info!(run = %base.name_any(), error = %e, "a status write running behind the run failed; reading the run again");
                ctx.trailing.failed(&uid);
                let _ = ctx.again.unbounded_send(uid);
                return;
            }
        };
        let (following, wanted) = ctx.trailing.wrote(&uid, written.clone());
        if wanted {
            let _ = ctx.again.unbounded_send(uid.clone());
        }
        tell(
            &ctx,
            &written,
            &old,
            &next.status,
            next.told,
            Some(flow.get()),
        );
        forget_in_controller(&ctx, &next.forget).await;
        old = next.status;
        base = written;
        match following {
            Some(queued) => next = queued,
            None => return,
        }
    }
}

/// Carries out the plan, once the status that asks for it is written:
/// let go of what ended, start what the status says runs, then write the
/// answers back; says when to look again.
async fn act(acting: Acting<'_>, written: Option<&RunStatus>) -> Result<Action, Error> {
    let_go(acting).await?;
    if !acting.plan.over
        && let Some(later) = start(acting, written.is_some()).await?
    {
        return Ok(later);
    }
    answer_back(acting).await?;
    // The run just ended: it is handed off from the status just written.
    // A replica that does not lead leaves it to the leader, which sees
    // the ended run come by.
    if let (Some(handed), Some(status), true) = (acting.plan.hand_off, written, acting.ctx.leads())
    {
        return archive::hand_off(acting.ctx, acting.run, Some(status), handed).await;
    }
    Ok(look_again(acting.plan, &acting.seen.running))
}

/// What carrying out a plan works with: the run, the status just written
/// (which asks for the plan), the plan, what was seen, the launchers.
#[derive(Clone, Copy)]
struct Acting<'a> {
    ctx: &'a Context,
    run: &'a Run,
    status: &'a RunStatus,
    plan: &'a Plan,
    seen: &'a Gathered,
    launchers: &'a Launchers<'a>,
}

/// Forgets what finished, stops what the engine stopped (the workspace's
/// work too), and once the run is over, its routes and its volume.
async fn let_go(acting: Acting<'_>) -> Result<(), Error> {
    let Acting {
        ctx,
        run,
        status,
        plan,
        launchers,
        ..
    } = acting;
    if let Some(work) = plan.workspace_forget {
        workspace::forget(run, launchers.jobs(), work).await;
    }
    if let Some(work) = plan.workspace_stop {
        workspace::stop(ctx, run, launchers.jobs(), status, work).await?;
    }
    for work in &plan.forget {
        if let Err(e) = launchers.forget(work).await {
            tracing::debug!(error = %e, "could not forget finished work");
        }
    }
    for work in &plan.stop {
        if let Err(e) = launchers.cancel(work).await {
            tracing::warn!(run = %run.name_any(), error = %e, "could not stop work");
        }
    }
    if plan.over {
        launchers::forget_run(&ctx.routes, &run.uid().unwrap_or_default());
        workspace::release(ctx, run, status).await?;
    }
    Ok(())
}

/// Starts the workspace work and the attempts the status says run and
/// nobody runs, then asks the people it waits for; `Some` when the
/// reconcile ends early (a stale read, a launch to retry, a foreign
/// Approval).
async fn start(acting: Acting<'_>, wrote: bool) -> Result<Option<Action>, Error> {
    let Acting {
        ctx,
        run,
        status,
        plan,
        seen,
        launchers,
    } = acting;
    let start_workspace = plan
        .workspace
        .filter(|&work| seen.workspace_unstarted(work))
        .zip(seen.workspace_spec.as_ref());
    // Work is launched only from a status known to be current: the write
    // just made proves it; without one, the Run read may be older than a
    // status that already saw this work finish (and forgot it), and
    // launching it again would run it twice.
    let launches = !plan.launch.is_empty() || start_workspace.is_some();
    if !wrote && launches && !is_current(ctx, run).await? {
        return Ok(Some(Action::requeue(STALE_REQUEUE)));
    }
    if let Some((work, spec)) = start_workspace {
        workspace::launch(ctx, run, launchers.jobs(), status, spec, work).await?;
    }
    for work in &plan.launch {
        if let Err(e) = launchers.launch(work).await {
            // Launching is retried by the next reconcile; the status
            // already says the attempt runs.
            tracing::warn!(run = %run.name_any(), error = %e, "could not launch work");
            return Ok(Some(Action::requeue(crate::settings::ERROR_REQUEUE)));
        }
    }
    ask(acting).await
}

/// Writes the answers taken or refused back on their Approvals, the
/// standing tally of steps that need several approvers, and closes the
/// Approvals nobody waits for any more (an ended run's are closed by
/// `stop_leftovers`).
async fn answer_back(acting: Acting<'_>) -> Result<(), Error> {
    let (run, plan, seen) = (acting.run, acting.plan, acting.seen);
    let api = approvals_api(acting.ctx, run);
    for settle in &plan.settle {
        let name = approvals::approval_name(run, &settle.ask.step, settle.ask.attempt);
        let asked = seen
            .asked
            .iter()
            .find(|a| AskRef::from(&a.request) == settle.ask);
        let taken = asked.and_then(|a| a.taken(run));
        let tally = asked
            .filter(|a| a.request.approvals > 1)
            .and_then(|a| a.ballots(run).tally);
        approvals::settle(
            &api,
            &name,
            settle.refused.as_deref(),
            taken.as_ref(),
            tally.as_deref(),
        )
        .await?;
    }
    // How the answers of steps that need several approvers stand, where
    // that changed (those settled just now were written with it).
    for a in &seen.asked {
        let ask = AskRef::from(&a.request);
        let settled = plan.settle.iter().any(|s| s.ask == ask);
        if a.request.approvals <= 1 || settled || plan.close.contains(&ask) {
            continue;
        }
        if let Some(tally) = a.ballots(run).tally
            && a.object.is_some()
            && a.shown_tally() != Some(tally.as_str())
        {
            approvals::show_tally(&api, &a.name, &tally).await?;
        }
    }
    for ask in &plan.close {
        let name = approvals::approval_name(run, &ask.step, ask.attempt);
        let reason = approvals::attempt_ended_reason(acting.status, &ask.step, ask.attempt);
        approvals::close(&api, &name, &reason).await?;
    }
    Ok(())
}

/// Keeps the last lines of the scripts the plan stops in their attempts'
/// records, read before the write that stops them (their pods go with
/// them, and `kubectl logs` with their pods).
async fn keep_stopped_logs(new: &mut RunStatus, plan: &Plan, launchers: &Launchers<'_>) {
    for work in &plan.stop {
        if let Some(log) = launchers.last_lines(work).await {
            engine::keep_stopped_log(new, work, log);
        }
    }
}

/// Creates the Approvals the plan asks for, each after settling those of
/// its step's earlier attempts; `Some` when one under its name is not this
/// run's (the next reconcile reads it and fails the attempt).
async fn ask(acting: Acting<'_>) -> Result<Option<Action>, Error> {
    let api = approvals_api(acting.ctx, acting.run);
    let read: Vec<&str> = acting.seen.asked.iter().map(|a| a.name.as_str()).collect();
    for request in &acting.plan.ask {
        let a = approvals::Asked::new(acting.run, request.clone());
        // Earlier attempts first: once this one exists, this is not
        // done again.
        approvals::settle_earlier(&api, acting.run, acting.status, &a.request, &read).await?;
        let show = acting
            .ctx
            .offloader
            .store_shown(acting.run, &a.request.show)
            .await?;
        if let Some(reason) = approvals::create(&api, acting.run, &a, show).await? {
            // Taken up by the next reconcile's read, which fails the
            // attempt.
            tracing::warn!(run = %acting.run.name_any(), approval = %a.name, "{reason}");
            return Ok(Some(Action::requeue(STALE_REQUEUE)));
        }
    }
    Ok(None)
}

/// When to reconcile again: at the engine's wake-up, and now and then
/// while Jobs run (a pod stuck before it starts, on an image that cannot be
/// pulled or a missing Secret, does not change its Job).
fn look_again(plan: &Plan, running: &[Work]) -> Action {
    if !plan.lookups.is_empty() || !plan.ask_lookups.is_empty() {
        // The records database could not answer: ask it again soon.
        return Action::requeue(crate::settings::ERROR_REQUEUE);
    }
    if plan.workspace.is_some() {
        // A claim that does not bind changes no Job: its time limit is
        // checked by looking.
        return Action::requeue(workspace::RECHECK);
    }
    let jobs_run = plan.running(running).any(Launchers::runs_as_job);
    let wake = plan.wake.map(|at| {
        Duration::try_from(at.duration_since(Timestamp::now()))
            .unwrap_or_default()
            .max(Duration::from_millis(10))
    });
    match (wake, jobs_run) {
        (Some(wait), true) => Action::requeue(wait.min(SCRIPT_RECHECK)),
        (Some(wait), false) => Action::requeue(wait),
        (None, true) => Action::requeue(SCRIPT_RECHECK),
        (None, false) => Action::await_change(),
    }
}

fn approvals_api(ctx: &Context, run: &Run) -> Api<Approval> {
    Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default())
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
async fn write_status(ctx: &Context, run: &Run, new: &RunStatus) -> Result<Arc<Run>, Error> {
    let stored = ctx.offloader.store(run, new).await?;
    let written = status::write(&ctx.client, run, stored.status.clone()).await?;
    let written = ctx.written.wrote(run, written);
    ctx.metrics.status_written(stored.bytes);
    // Only a status that referenced moved values can leave some unused
    // (ConfigMaps made for a write that then failed go with the Run).
    let had_values = run.status.as_ref().is_some_and(|s| !s.values.is_empty());
    if had_values && let Err(e) = ctx.offloader.collect(run, &stored.status).await {
        tracing::debug!(error = %e, "could not delete unused value ConfigMaps");
    }
    Ok(written)
}

/// The Events that tell how `old` became `new`, as the settings ask: one
/// per write, one per transition, or only the notable ones.
fn story(ctx: &Context, old: &RunStatus, new: &RunStatus) -> Vec<kube::runtime::events::Event> {
    let all = events::transitions(old, new);
    match ctx.settings.events {
        EventMode::PerTransition => all,
        EventMode::PerWrite => events::fold(all),
        EventMode::Notable => events::fold(all.into_iter().filter(events::notable).collect()),
    }
}

/// Counts the steps that settled, the tokens they used and the run's end.
fn count(ctx: &Context, flow: Option<&engine::Compiled<'_>>, old: &RunStatus, new: &RunStatus) {
    for (key, record) in new.steps.iter().filter(|_| flow.is_some()) {
        let before = old.steps.get(key);
        let settled = matches!(record.status, StepPhase::Completed | StepPhase::Failed);
        let same = before.is_some_and(|b| {
            b.status == record.status && b.attempts.len() == record.attempts.len()
        });
        if !settled || same {
            continue;
        }
        let kind = flow.and_then(|compiled| {
            let node = compiled.node(key)?;
            compiled.steps[node].step.kind()
        });
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

/// Ends a run that cannot start or go on, with the reason in its status.
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
    write(ctx, run, old, new, Vec::new(), None).await?;
    Ok(Action::await_change())
}

/// Ends a run whose status cannot be read back because a value moved out
/// of it was replaced: the status is written as it is stored (its values
/// by reference), failed with the reason; nothing runs from it again.
async fn end_tampered_status(
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

/// What a run of a flow can leave behind when it ends, so an ended run
/// whose flow makes no Jobs or no Approvals is not looked after with a
/// list of each (two reads of the API server per run, on every reconcile
/// of an ended run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Leftovers {
    /// Jobs: the flow has script steps or a workspace.
    jobs: bool,
    /// Approvals: the flow has approval steps.
    approvals: bool,
}

impl Leftovers {
    /// Both, when the flow is not known here.
    const ANY: Leftovers = Leftovers {
        jobs: true,
        approvals: true,
    };

    fn of(flow: &engine::Compiled<'_>) -> Leftovers {
        // A parallel step's parts run the step it holds (`part`).
        let kinds = || {
            flow.steps
                .iter()
                .flat_map(|s| std::iter::once(s).chain(s.part.as_deref()))
                .filter_map(|s| s.step.kind())
        };
        Leftovers {
            jobs: flow.spec.workspace.is_some()
                || kinds().any(|k| matches!(k, StepKind::Script(_))),
            approvals: kinds().any(|k| matches!(k, StepKind::Approval(_))),
        }
    }
}

/// Stops the Jobs of an ended run that still run and its in-controller
/// work, and closes the Approvals nobody answered.
async fn stop_leftovers(ctx: &Context, run: &Run) -> Result<(), Error> {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{DeleteParams, ListParams};
    let uid = run.uid().unwrap_or_default();
    ctx.in_controller.cancel_where(|id| id.run == uid).await;
    let namespace = run.namespace().unwrap_or_default();
    let phase = run.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let reason = format!(
        "run {} ended {phase:?} before an answer was taken in",
        run.name_any()
    );
    let left = run
        .status
        .as_ref()
        .and_then(|s| s.flow_digest.as_deref())
        .and_then(|digest| ctx.flows.get(digest))
        .map_or(Leftovers::ANY, |flow| Leftovers::of(flow.get()));
    if left.approvals {
        let approvals: Api<Approval> = Api::namespaced(ctx.client.clone(), &namespace);
        let closed = approvals::close_unanswered(&approvals, run, &reason).await?;
        if closed > 0 {
            tracing::info!(run = %run.name_any(), closed, "closed the unanswered approvals of an ended run");
        }
    }
    if let Some(status) = run.status.as_ref() {
        workspace::release(ctx, run, status).await?;
    }
    if !left.jobs {
        return Ok(());
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
    let running: Vec<Job> = list
        .items
        .into_iter()
        .filter(|job| {
            !job.status
                .as_ref()
                .is_some_and(|s| s.completion_time.is_some() || s.failed.unwrap_or(0) > 0)
        })
        .collect();
    if running.is_empty() {
        return Ok(());
    }
    // A Job whose pod ended is done even before the Job controller says
    // so (its result may be what ended the run): the pods are read only
    // when a Job still looks running.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let ended_pods: Vec<Pod> = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| {
            Error::kube(
                format!("listing the pods of run {namespace}/{}", run.name_any()),
                e,
            )
        })?
        .items
        .into_iter()
        .filter(crate::jobs::pod_ended)
        .collect();
    for job in running {
        let uid = job.metadata.uid.as_deref().unwrap_or_default();
        if ended_pods
            .iter()
            .any(|pod| crate::names::controlled_by(pod, uid))
        {
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
    launchers::forget_run(&ctx.routes, &uid);
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::engine::{CompiledFlow, Task};

    fn work(task: Task) -> Work {
        Work {
            step: "s".into(),
            part: None,
            attempt: 1,
            iteration: None,
            task,
            input: Value::Null,
            timeout: None,
            data: Default::default(),
            run: Default::default(),
            review: None,
            lookups: Vec::new(),
        }
    }

    fn http() -> Work {
        let step = serde_json::from_value(serde_json::json!({"url": "http://example.test"}))
            .expect("an http step");
        work(Task::Http(step))
    }

    #[test]
    fn only_in_controller_work_runs_ahead_of_its_status_write() {
        let calls = Plan {
            launch: vec![http()],
            forget: vec![http()],
            ..Default::default()
        };
        assert!(runs_ahead(&calls, false));
        assert!(runs_ahead(&Plan::default(), false), "nothing to do");
        // A run that waits on Approvals keeps their tallies after a write.
        assert!(!runs_ahead(&calls, true));
        let script = work(Task::Script(Default::default()));
        let cases = [
            (
                "a Job to start",
                Plan {
                    launch: vec![http(), script.clone()],
                    ..Default::default()
                },
            ),
            (
                "a Job to let go of",
                Plan {
                    forget: vec![script],
                    ..Default::default()
                },
            ),
            (
                "work to stop",
                Plan {
                    stop: vec![http()],
                    ..Default::default()
                },
            ),
            (
                "the run's end",
                Plan {
                    over: true,
                    ..Default::default()
                },
            ),
            (
                "lookups that could not run",
                Plan {
                    lookups: vec![http()],
                    ..Default::default()
                },
            ),
            (
                "the workspace",
                Plan {
                    workspace: Some(WorkspaceWork::CheckOut),
                    ..Default::default()
                },
            ),
            (
                "the workspace to release",
                Plan {
                    release: true,
                    ..Default::default()
                },
            ),
        ];
        for (what, plan) in cases {
            assert!(
                !runs_ahead(&plan, false),
                "{what} waits for the written status"
            );
        }
    }

    fn leftovers(steps: serde_json::Value) -> Leftovers {
        let spec: coxswain_core::api::FlowSpec =
            serde_json::from_value(serde_json::json!({ "steps": steps })).expect("flow");
        Leftovers::of(CompiledFlow::new(spec).expect("compiles").get())
    }

    #[test]
    fn an_ended_run_is_searched_only_for_what_its_flow_makes() {
        let http = serde_json::json!({"key": "a", "http": {"url": "http://example.com"}});
        assert_eq!(
            leftovers(serde_json::json!([http])),
            Leftovers {
                jobs: false,
                approvals: false
            }
        );
        let script = serde_json::json!({"key": "s", "script": {"source": "true"}});
        assert_eq!(
            leftovers(serde_json::json!([http, script])),
            Leftovers {
                jobs: true,
                approvals: false
            }
        );
        let ask = serde_json::json!({"key": "ok", "approval": {"decisions": ["yes", "no"]}});
        assert_eq!(
            leftovers(serde_json::json!([ask])),
            Leftovers {
                jobs: false,
                approvals: true
            }
        );
        // Inside a loop, and as the step of a parallel step's parts.
        let in_loop = serde_json::json!([
            {"key": "again", "loop": {"until": "true", "maxIterations": 2, "steps": [
                {"key": "inner", "approval": {"decisions": ["yes", "no"]}}
            ]}}
        ]);
        assert_eq!(
            leftovers(in_loop),
            Leftovers {
                jobs: false,
                approvals: true
            }
        );
        let parts = serde_json::json!([
            {"key": "each", "parallel": {"items": "$input.list", "step": {"script": {"source": "true"}}}}
        ]);
        assert_eq!(
            leftovers(parts),
            Leftovers {
                jobs: true,
                approvals: false
            }
        );
    }
}
