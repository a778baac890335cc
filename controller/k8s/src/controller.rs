//! `coxswain controller`: every reconciler, wired together, run by the
//! replica that holds the Lease, with metrics and health served by all.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::{oneshot, watch};

use crate::error::{Error, StartError};
use crate::guard::Guarded;
use crate::offload::Offloader;
use crate::ops::{self, Health, Leadership, Metrics, Readiness};
use crate::run::in_controller::InController;
use crate::run::launchers::Routes;
use crate::run::{self, Context};
use crate::settings::{ERROR_REQUEUE, Settings};
use crate::shards::{BucketSet, OnLost, ShardSettings, Shards};
use coxswain_core::api::{Approval, Run};
use coxswain_steps::in_process::InProcess;
use coxswain_steps::local::{AgentFlags, LocalConfig};
use coxswain_steps::net::{NetPolicy, parse_block};

/// Runs the controller until SIGTERM or SIGINT (`Ok`), or until this replica
/// loses its Lease (`Err`: the process exits non-zero and is restarted as a
/// standby).
pub async fn run(settings: Settings) -> Result<(), StartError> {
    ops::init_tracing(&settings.ops.log)?;
    let stop = ops::shutdown_signal()?;
    tokio::pin!(stop);
    let client = Client::try_default().await.map_err(StartError::Connect)?;
    let settings = Arc::new(settings);
    let me = Me::new(client.clone(), &settings);
    let (metrics, health) = (Metrics::new(), Health::new());
    ops::serve(&settings.ops, metrics.clone(), health.clone()).await?;
    // Migrations run before anything reads or writes a record; a database
    // newer than this build stops the controller here, saying so.
    let records = crate::records::connect(&settings.records).await?;
    // Every replica answers admission, the standbys too: the API server
    // calls whichever the Service picks.
    let admission = if settings.admission.enabled() {
        Some(
            crate::admission::start(
                client.clone(),
                &settings.admission,
                settings.namespace.as_deref(),
                settings.records.configured(),
            )
            .await?,
        )
    } else {
        None
    };
    let slack_events = slack_events(client.clone(), &settings, me.clone()).await?;
    health.set(Readiness::Standby);
    let sharded = settings.ops.sharded && settings.ops.leader_election;
    if settings.ops.sharded && !sharded {
        tracing::warn!(
            "--sharded is ignored without leader election: this replica reconciles every Run"
        );
    }
    // Alone or one of several standing by: wait for the Lease before
    // anything. Sharded: every replica works at once on its buckets, and
    // the Lease only says who runs what stays with one.
    let leadership: Held = Arc::default();
    if settings.ops.leader_election && !sharded {
        tokio::select! {
            taken = Leadership::acquire(client.clone(), &settings.ops) => {
                *leadership.lock().await = Some(taken?);
            }
            signal = &mut stop => {
                tracing::info!(%signal, "stopped while waiting for the Lease");
                return Ok(());
            }
        }
    }
    let (leads, leading) = watch::channel(!sharded);
    if let (Some(store), Some(keep)) = (records.clone(), settings.records.archive) {
        tokio::spawn(crate::records::prune_archive(store, keep, leading.clone()));
    }
    metrics.set_leader(!sharded);
    health.set(Readiness::Syncing);

    let (quit, quitting) = watch::channel(false);
    let on_quit = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|q| *q).await;
    };
    let (lost_tx, lost_rx) = futures::channel::mpsc::unbounded();
    let (shards, keeper) = if sharded {
        let (shards, keeper) = Shards::start(
            client.clone(),
            shard_settings(&client, &settings.ops),
            cancel_on_loss(lost_tx),
        );
        (shards, Some(keeper))
    } else {
        (Shards::everything(), None)
    };
    let runs = reconcile_runs(
        client.clone(),
        settings.clone(),
        metrics.clone(),
        health.clone(),
        records,
        Sharing {
            shards,
            leading: leading.clone(),
            lost: lost_rx,
            sharded,
        },
        on_quit(quitting.clone()),
    );
    let flows = {
        let (client, namespace, me) = (client.clone(), settings.namespace.clone(), me.clone());
        let (waiting, quitting) = (on_quit(quitting.clone()), on_quit(quitting));
        let mut leading = leading.clone();
        async move {
            // Schedules compare Runs against who made them: once known, on
            // the leader.
            let me = tokio::select! {
                me = async { let _ = leading.wait_for(|l| *l).await; me.get().await } => me,
                () = waiting => return Ok(()),
            };
            crate::flows::run(client, namespace, me, quitting).await
        }
    };
    let chat = chat(
        client.clone(),
        settings.clone(),
        me,
        leading.clone(),
        on_quit(quit.subscribe()),
    )?;
    let work = async {
        let (runs, flows, ()) = tokio::join!(runs, flows, chat);
        (runs, flows)
    };
    tokio::pin!(work);
    let lost = lose(
        client.clone(),
        &settings.ops,
        sharded,
        leadership.clone(),
        leads,
        metrics.clone(),
    );
    let outcome = tokio::select! {
        (runs, flows) = &mut work => runs.and(flows),
        signal = &mut stop => {
            tracing::info!(%signal, "shutting down: finishing the reconciles in flight");
            health.set(Readiness::Stopping);
            let _ = quit.send(true);
            let (runs, flows) = work.await;
            runs.and(flows)
        }
        lost = lost => {
            health.set(Readiness::Stopping);
            let _ = quit.send(true);
            Err(lost.into())
        }
    };
    health.set(Readiness::Stopping);
    metrics.set_leader(false);
    if let Some(keeper) = keeper {
        keeper.stop().await;
    }
    let leadership = leadership.lock().await.take();
    if let Some(leadership) = leadership
        && outcome.is_ok()
    {
        leadership.release().await?;
    }
    if let Some(admission) = admission {
        admission.stop();
    }
    if let Some(slack_events) = slack_events {
        slack_events.stop();
    }
    tracing::info!("coxswain controller stopped");
    outcome
}

/// The Lease this replica holds, once it holds it: released on a graceful
/// shutdown.
type Held = Arc<tokio::sync::Mutex<Option<Leadership>>>;

/// Resolves when this replica loses the Lease. Sharded, it first waits to
/// take it, then says it leads; a replica that cannot take it for a
/// reason retrying will not mend stops with that error.
async fn lose(
    client: Client,
    ops: &crate::ops::OpsSettings,
    sharded: bool,
    held: Held,
    leads: watch::Sender<bool>,
    metrics: Arc<Metrics>,
) -> crate::ops::OpsError {
    if sharded {
        let taken = match Leadership::acquire(client, ops).await {
            Ok(taken) => taken,
            Err(e) => return e,
        };
        *held.lock().await = Some(taken);
        metrics.set_leader(true);
        let _ = leads.send(true);
        tracing::info!(
            "leading: schedules, chat commands, the archive and snapshot removal run here"
        );
    }
    let lost = held.lock().await.as_ref().map(Leadership::lost);
    match lost {
        Some(lost) => lost.await,
        None => std::future::pending().await,
    }
}

/// Where this replica's shard Leases are and who it is in them.
fn shard_settings(client: &Client, ops: &crate::ops::OpsSettings) -> ShardSettings {
    ShardSettings {
        namespace: ops.lease_namespace(client.default_namespace()),
        lease_name: ops.lease_name.clone(),
        identity: ops.identity(),
        duration: ops.lease_duration,
    }
}

/// Buckets this replica stops acting on, with a word back once their
/// in-process work is cancelled.
type Lost = futures::channel::mpsc::UnboundedReceiver<(BucketSet, oneshot::Sender<()>)>;

/// The hook the shard keeper calls for lost buckets: hands them to the Run
/// reconciler, which cancels their in-process work, and waits for that.
fn cancel_on_loss(
    to: futures::channel::mpsc::UnboundedSender<(BucketSet, oneshot::Sender<()>)>,
) -> OnLost {
    Arc::new(move |lost| {
        let to = to.clone();
        Box::pin(async move {
            let (done, cancelled) = oneshot::channel();
            if to.unbounded_send((lost, done)).is_ok() {
                let _ = tokio::time::timeout(Duration::from_secs(5), cancelled).await;
            }
        })
    })
}

/// How this replica shares the Runs with the others.
struct Sharing {
    shards: Shards,
    leading: watch::Receiver<bool>,
    lost: Lost,
    /// Whether buckets and leadership can come later (else everything is
    /// this replica's from the start, and the first list queues it all).
    sharded: bool,
}

/// The user this controller acts as, which admission stamps as the
/// `created-by` of every Run it creates: `--webhook-controller-user` when
/// given, else what the API server says — asked when first needed (by the
/// schedules and the chat), and again until it answers, so an API server
/// that fails or loses answers for a while holds back only those, never
/// the Runs.
#[derive(Clone)]
struct Me {
    client: Client,
    fixed: Option<String>,
    asked: Arc<tokio::sync::OnceCell<String>>,
}

/// How long to wait before asking the API server again who this is.
const WHOAMI_PAUSE: Duration = Duration::from_secs(10);

impl Me {
    fn new(client: Client, settings: &Settings) -> Self {
        Me {
            client,
            fixed: settings.admission.webhook_controller_user.clone(),
            asked: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    async fn get(&self) -> String {
        if let Some(user) = &self.fixed {
            return user.clone();
        }
        self.asked
            .get_or_init(|| async {
                loop {
                    match crate::admission::whoami(&self.client).await {
                        Ok(user) => return user,
                        Err(e) => {
                            tracing::warn!(error = %e, "schedules and chat wait until the API server says who this controller is");
                            tokio::time::sleep(WHOAMI_PAUSE).await;
                        }
                    }
                }
            })
            .await
            .clone()
    }
}

/// The conversation commands' followers and outcome poster, on the
/// leader, until `shutdown`; nothing when `--chat-commands=false`.
fn chat(
    client: Client,
    settings: Arc<Settings>,
    me: Me,
    mut leading: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<impl Future<Output = ()>, StartError> {
    let policy = net_policy(&settings)?;
    Ok(async move {
        if settings.chat.chat_commands {
            let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
            let me = tokio::select! {
                me = async { let _ = leading.wait_for(|l| *l).await; me.get().await } => me,
                () = shutdown.clone() => return,
            };
            let reporter = Reporter {
                controller: "coxswain".into(),
                instance: Some(settings.ops.identity()),
            };
            crate::chat::run(
                client,
                settings.namespace.clone(),
                policy,
                reporter,
                me,
                shutdown,
            )
            .await;
        }
    })
}

/// Slack's Events API endpoint, served by every replica like admission
/// (Slack calls whichever the Service picks); nothing without
/// `--slack-events-listen`, or with `--chat-commands=false`.
async fn slack_events(
    client: Client,
    settings: &Settings,
    me: Me,
) -> Result<Option<crate::chat::slack::SlackEvents>, StartError> {
    let Some(addr) = settings.chat.slack_events_listen else {
        return Ok(None);
    };
    if !settings.chat.chat_commands {
        tracing::warn!(%addr, "--slack-events-listen is ignored: --chat-commands is false");
        return Ok(None);
    }
    let me = me.get().await;
    let policy = Arc::new(net_policy(settings)?);
    let served =
        crate::chat::slack::start(client, addr, settings.namespace.clone(), policy, me).await?;
    Ok(Some(served))
}

/// The network policy of everything the controller reaches for a flow:
/// the cluster's defaults, with `--allow-net`'s ranges let through.
fn net_policy(settings: &Settings) -> Result<NetPolicy, StartError> {
    let mut allowed = Vec::new();
    for block in &settings.allow_net {
        allowed.push(
            parse_block(block)
                .map_err(|e| StartError::Setting(format!("--allow-net {block}: {e}")))?,
        );
    }
    Ok(NetPolicy::cluster().allowing(allowed))
}

/// The uids of Runs to queue again: their in-controller work ended, or a
/// status write running behind them failed.
type Again = futures::stream::BoxStream<'static, String>;

/// The Run reconciler, until `shutdown`.
async fn reconcile_runs(
    client: Client,
    settings: Arc<Settings>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    records: Option<coxswain_records::Store>,
    sharing: Sharing,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), StartError> {
    let Sharing {
        shards,
        leading,
        lost,
        sharded,
    } = sharing;
    let (ctx, finishes) = context(
        client.clone(),
        settings.clone(),
        metrics.clone(),
        records,
        shards.clone(),
        leading.clone(),
    )?;
    let held = ctx.in_controller.held();
    shards.tell_working(Arc::new(move || {
        crate::shards::of_runs(held.ids().iter().map(|id| id.run.as_str()))
    }));
    let (finished_tx, finished_rx) = futures::channel::mpsc::unbounded();
    tokio::spawn(route_finishes(
        finishes,
        ctx.routes.clone(),
        finished_tx.clone(),
    ));
    let jobs: Api<Job> = scoped(&client, settings.namespace.as_deref());
    let approvals: Api<Approval> = scoped(&client, settings.namespace.as_deref());
    // Each Run is read on its own: one that does not read is reported and
    // left alone instead of failing the list of every Run (see `guard`).
    let runs: Api<Guarded<Run>> = scoped(&client, settings.namespace.as_deref());
    let pods: Api<Pod> = scoped(&client, settings.namespace.as_deref());
    let controller = Controller::new(runs, watcher::Config::default().any_semantic());
    let known = controller.store();
    let controller = controller
        .watches(
            pods,
            watcher::Config::default().labels(crate::names::RUN_UID_LABEL),
            move |pod| run_of_ended_pod(&pod, &known),
        )
        .owns(
            jobs,
            watcher::Config::default().labels(crate::names::RUN_UID_LABEL),
        )
        .owns(approvals, watcher::Config::default())
        .reconcile_on(finished_rx)
        .with_config(Config::default().concurrency(settings.reconcile_concurrency))
        .graceful_shutdown_on(shutdown);
    tokio::spawn(watch_store(controller.store(), metrics.clone(), health));
    let sweeper = tokio::spawn(lead_sweeper(
        client.clone(),
        settings.clone(),
        controller.store(),
        leading.clone(),
    ));
    let queuer = sharded.then(|| {
        tokio::spawn(queue_what_comes_here(
            controller.store(),
            shards.watch(),
            leading,
            finished_tx,
        ))
    });
    let canceller = tokio::spawn(cancel_lost(lost, ctx.clone()));
    let counter = tokio::spawn(count_buckets(shards.watch(), metrics.clone()));
    tracing::info!("reconciling Runs");
    let reporter = Reporter {
        controller: "coxswain".into(),
        instance: Some(settings.ops.identity()),
    };
    let guarded = Arc::new(Guard {
        ctx,
        recorder: Recorder::new(client.clone(), reporter),
        reported: Mutex::default(),
    });
    controller
        .run(reconcile_guarded, guarded_error_policy, guarded)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile");
            }
        })
        .await;
    sweeper.abort();
    if let Some(queuer) = queuer {
        queuer.abort();
    }
    canceller.abort();
    counter.abort();
    Ok(())
}

/// Removes unused flow snapshots while this replica leads.
async fn lead_sweeper(
    client: Client,
    settings: Arc<Settings>,
    store: Store<Guarded<Run>>,
    mut leading: watch::Receiver<bool>,
) {
    if leading.wait_for(|l| *l).await.is_err() {
        return;
    }
    crate::snapshots::remove_unnamed(
        client,
        settings.namespace.clone(),
        store,
        settings.snapshots.clone(),
    )
    .await;
}

/// Queues the Runs that became this replica's to act on: those of a bucket
/// it gained, and the ended ones once it leads (their archive). Runs it
/// looked at before were left alone then, without a requeue.
async fn queue_what_comes_here(
    store: Store<Guarded<Run>>,
    mut buckets: watch::Receiver<BucketSet>,
    mut leading: watch::Receiver<bool>,
    to: futures::channel::mpsc::UnboundedSender<ObjectRef<Guarded<Run>>>,
) {
    crate::store::wait_until_ready(&store).await;
    let (mut had, mut led) = (0, false);
    loop {
        let (now, leads) = (*buckets.borrow_and_update(), *leading.borrow_and_update());
        let gained = now & !had;
        let archive = leads && !led;
        (had, led) = (now, leads);
        if gained != 0 || archive {
            for guarded in store.state() {
                let Ok(run) = &guarded.0 else { continue };
                let over = run.status.as_ref().is_some_and(|s| s.phase.is_over());
                let uid = run.uid().unwrap_or_default();
                if (over && archive) || (!over && crate::shards::holds(gained, &uid)) {
                    let _ = to.unbounded_send(ObjectRef::from_obj(&*guarded));
                }
            }
        }
        tokio::select! {
            changed = buckets.changed() => if changed.is_err() { return },
            changed = leading.changed() => if changed.is_err() { return },
        }
    }
}

/// Keeps the `coxswain_buckets` gauge up to date.
async fn count_buckets(mut buckets: watch::Receiver<BucketSet>, metrics: Arc<Metrics>) {
    loop {
        metrics.set_buckets(buckets.borrow_and_update().count_ones());
        if buckets.changed().await.is_err() {
            return;
        }
    }
}

/// Cancels the in-process work (agent, http and message attempts) of the
/// Runs in buckets this replica no longer acts on: the replica taking the
/// bucket launches it again, under the same idempotency key.
async fn cancel_lost(mut lost: Lost, ctx: Arc<Context>) {
    while let Some((buckets, done)) = lost.next().await {
        // The replica taking them writes their Runs next: nothing written
        // here is the newest any more, and nothing waits to be.
        ctx.trailing
            .fail_where(|uid| crate::shards::holds(buckets, uid));
        ctx.written
            .forget_where(|uid| crate::shards::holds(buckets, uid));
        let cancelled = ctx
            .in_controller
            .cancel_where(|id| crate::shards::holds(buckets, &id.run))
            .await;
        if cancelled > 0 {
            tracing::info!(
                cancelled,
                "cancelled the in-process work of buckets handed over"
            );
        }
        let _ = done.send(());
    }
}

/// What the Run reconciler shares, around the Runs that could not be read.
struct Guard {
    ctx: Arc<Context>,
    /// Events about Runs that could not be read.
    recorder: Recorder,
    /// Run uid → the resource version last reported unreadable, so each
    /// version gets one Event however often it is looked at.
    reported: Mutex<HashMap<String, String>>,
}

/// Reconciles a Run that reads; reports one that does not, once per
/// version, and leaves it alone (no requeue: its next change is looked at).
async fn reconcile_guarded(run: Arc<Guarded<Run>>, guard: Arc<Guard>) -> Result<Action, Error> {
    match &run.0 {
        Ok(run) => run::reconcile(run.clone(), guard.ctx.clone()).await,
        Err(invalid) => {
            report_unreadable(invalid, &guard).await;
            Ok(Action::await_change())
        }
    }
}

fn guarded_error_policy(run: Arc<Guarded<Run>>, error: &Error, guard: Arc<Guard>) -> Action {
    match &run.0 {
        Ok(run) => error_policy(run.clone(), error, guard.ctx.clone()),
        Err(_) => Action::await_change(),
    }
}

/// A log line, and a Warning Event on the Run, for a Run that cannot be
/// read: nothing of it runs until it is fixed or deleted.
async fn report_unreadable(invalid: &InvalidObject, guard: &Guard) {
    let meta = &invalid.metadata;
    let (namespace, name) = (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    );
    tracing::warn!(
        run = %format!("{namespace}/{name}"),
        error = %invalid.error,
        "a Run that cannot be read is skipped; the other Runs are reconciled"
    );
    let (Some(uid), Some(version)) = (&meta.uid, &meta.resource_version) else {
        return;
    };
    {
        let mut reported = guard.reported.lock().unwrap_or_else(|e| e.into_inner());
        if reported.get(uid) == Some(version) {
            return;
        }
        reported.insert(uid.clone(), version.clone());
    }
    let regarding = ObjectReference {
        api_version: Some(Run::api_version(&()).into_owned()),
        kind: Some(Run::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: Some(uid.clone()),
        resource_version: Some(version.clone()),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "Unreadable".into(),
        note: Some(coxswain_steps::net::preview(
            &format!(
                "The controller cannot read this Run, so it does not run it: {}. Delete it and start a new one.",
                invalid.error
            ),
            1000,
        )),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = guard.recorder.publish(&event, &regarding).await {
        tracing::debug!(error = %e, "could not publish the unreadable Run's event");
    }
}

/// Marks the replica ready once the Runs are listed, then keeps the
/// active-runs and unreadable-runs gauges up to date from the same cache.
async fn watch_store(store: Store<Guarded<Run>>, metrics: Arc<Metrics>, health: Arc<Health>) {
    if !crate::store::wait_until_ready(&store).await {
        return;
    }
    health.set(Readiness::Ready);
    loop {
        let (mut active, mut unreadable) = (0, 0);
        for guarded in store.state() {
            match &guarded.0 {
                Ok(r) => {
                    if !r.status.as_ref().is_some_and(|s| s.phase.is_over()) {
                        active += 1;
                    }
                }
                Err(_) => unreadable += 1,
            }
        }
        metrics.set_active_runs(active);
        metrics.set_unreadable_runs(unreadable);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

fn context(
    client: Client,
    settings: Arc<Settings>,
    metrics: Arc<Metrics>,
    records: Option<coxswain_records::Store>,
    shards: Shards,
    leading: watch::Receiver<bool>,
) -> Result<(Arc<Context>, Again), StartError> {
    let policy = net_policy(&settings)?;
    let agent = LocalConfig::from_env(AgentFlags {
        url: settings.agent.agent_url.clone(),
        model: settings.agent.agent_model.clone(),
        ..Default::default()
    })
    .map(|c| c.agent)
    .map_err(|e| e.to_string());
    let executors = InController::new(
        client.clone(),
        agent,
        policy,
        settings.max_in_controller,
        metrics.clone(),
        crate::records::records(records.as_ref()),
    );
    let (in_controller, finishes) = InProcess::new(Arc::new(executors));
    let reporter = Reporter {
        controller: "coxswain".into(),
        instance: Some(settings.ops.identity()),
    };
    let offloader = Offloader::new(client.clone(), &settings.offload)?;
    let settings_jobs = settings.jobs.clone();
    let (again, again_rx) = futures::channel::mpsc::unbounded();
    let ctx = Arc::new(Context {
        events: run::events::Publisher::start(client.clone(), reporter),
        client,
        settings,
        in_controller,
        flows: Default::default(),
        routes: Routes::default(),
        offloader,
        metrics,
        jobs: Arc::new(settings_jobs),
        written: Default::default(),
        trailing: Default::default(),
        again,
        records,
        shards,
        leading,
    });
    // A Run is queued again when its in-controller work ends, or when a
    // status write running behind it failed.
    let ended = futures::stream::unfold(finishes, |mut finishes| async move {
        finishes.next().await.map(|id| (id.run, finishes))
    });
    let again = futures::stream::select(ended, again_rx).boxed();
    Ok((ctx, again))
}

/// The Run to reconcile when a step's pod ended: its result is read from
/// the pod at once, not a second later when the Job controller writes the
/// Job's end. The labels only point the way (anyone may write them): the
/// reconcile takes a pod's result only through the Run's own Job.
fn run_of_ended_pod(pod: &Pod, runs: &Store<Guarded<Run>>) -> Option<ObjectRef<Guarded<Run>>> {
    if !crate::jobs::pod_ended(pod) {
        return None;
    }
    let labels = pod.metadata.labels.as_ref()?;
    let name = match labels.get(crate::names::RUN_NAME_LABEL) {
        Some(name) => name.clone(),
        // Names longer than a label: found by the uid among the known Runs.
        None => {
            let uid = labels.get(crate::names::RUN_UID_LABEL)?;
            runs.state()
                .iter()
                .find(|run| run.meta().uid.as_deref() == Some(uid.as_str()))?
                .name_any()
        }
    };
    let mut run = ObjectRef::<Guarded<Run>>::new(&name);
    run.namespace = pod.namespace();
    Some(run)
}

/// Queues the Run of each in-controller attempt that finishes.
async fn route_finishes(
    mut finishes: Again,
    routes: Routes,
    to: futures::channel::mpsc::UnboundedSender<ObjectRef<Guarded<Run>>>,
) {
    while let Some(run) = finishes.next().await {
        let target = routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&run)
            .cloned();
        if let Some(target) = target {
            let mut guarded = ObjectRef::<Guarded<Run>>::new(&target.name);
            guarded.namespace = target.namespace;
            if to.unbounded_send(guarded).is_err() {
                return;
            }
        }
    }
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn error_policy(run: Arc<Run>, error: &Error, ctx: Arc<Context>) -> Action {
    use kube::ResourceExt;
    ctx.metrics.reconcile_failed(error.metric_label());
    if error.metric_label() == "conflict" {
        // A stale read: the watch brings the newer Run; look again soon.
        tracing::debug!(run = %run.name_any(), "{error}");
        return Action::requeue(Duration::from_millis(500));
    }
    tracing::warn!(run = %run.name_any(), "{error}");
    Action::requeue(ERROR_REQUEUE)
}
