//! `coxswain controller`: every reconciler, wired together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::api::{Approval, Run};
use crate::error::Error;
use crate::run::in_controller::InController;
use crate::run::{self, Context};
use crate::settings::{ERROR_REQUEUE, Settings};
use crate::steps::in_process::InProcess;
use crate::steps::local::{AgentFlags, LocalConfig};
use crate::steps::net::{NetPolicy, parse_block};

/// Why the controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No kubeconfig and not in a cluster, or the cluster cannot be reached.
    #[error("cannot reach the cluster: {0}")]
    Client(#[source] kube::Error),
    /// A flag's value is wrong.
    #[error("{0}")]
    Setting(String),
}

impl From<StartError> for Error {
    fn from(e: StartError) -> Self {
        Error::Corrupt(e.to_string())
    }
}

/// Runs the controller until SIGTERM or SIGINT.
pub async fn run(settings: Settings) -> Result<(), Error> {
    let client = Client::try_default().await.map_err(StartError::Client)?;
    let settings = Arc::new(settings);
    let ctx = context(client.clone(), settings.clone())?;
    let routes = ctx.routes.clone();
    let (finished_tx, finished_rx) = futures::channel::mpsc::unbounded();
    tokio::spawn(route_finishes(ctx.finishes.clone(), routes, finished_tx));
    let runs: Api<Run> = scoped(&client, settings.namespace.as_deref());
    let jobs: Api<Job> = scoped(&client, settings.namespace.as_deref());
    let approvals: Api<Approval> = scoped(&client, settings.namespace.as_deref());
    let config = Config::default().concurrency(settings.reconcile_concurrency);
    tracing::info!("coxswain controller started");
    Controller::new(runs, watcher::Config::default().any_semantic())
        .owns(
            jobs,
            watcher::Config::default().labels(crate::names::RUN_UID_LABEL),
        )
        .owns(approvals, watcher::Config::default())
        .reconcile_on(finished_rx)
        .with_config(config)
        .graceful_shutdown_on(shutdown_signal())
        .run(run::reconcile, error_policy, ctx.run.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile");
            }
        })
        .await;
    tracing::info!("coxswain controller stopped");
    Ok(())
}

/// The shared context, and what routes finished in-controller work back
/// to its Run.
struct Wired {
    run: Arc<Context>,
    routes: Routes,
    finishes: Arc<tokio::sync::Mutex<crate::steps::in_process::Finishes>>,
}

/// Run uid → the Run, for in-controller work that finishes.
pub type Routes = Arc<Mutex<HashMap<String, ObjectRef<Run>>>>;

fn context(client: Client, settings: Arc<Settings>) -> Result<Wired, Error> {
    let mut allowed = Vec::new();
    for block in &settings.allow_net {
        allowed.push(
            parse_block(block)
                .map_err(|e| StartError::Setting(format!("--allow-net {block}: {e}")))?,
        );
    }
    let policy = NetPolicy::cluster().allowing(allowed);
    let agent = LocalConfig::from_env(AgentFlags {
        url: settings.agent.agent_url.clone(),
        model: settings.agent.agent_model.clone(),
        ..Default::default()
    })
    .map(|c| c.agent)
    .map_err(|e| e.to_string());
    let executors = InController::new(client.clone(), agent, policy, settings.max_in_controller);
    let (in_controller, finishes) = InProcess::new(Arc::new(executors));
    let instance = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("pid-{}", std::process::id()));
    let reporter = Reporter {
        controller: "coxswain".into(),
        instance: Some(instance),
    };
    let routes: Routes = Arc::default();
    let run = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        settings,
        in_controller,
        flows: Default::default(),
        routes: routes.clone(),
    });
    Ok(Wired {
        run,
        routes,
        finishes: Arc::new(tokio::sync::Mutex::new(finishes)),
    })
}

/// Queues the Run of each in-controller attempt that finishes.
async fn route_finishes(
    finishes: Arc<tokio::sync::Mutex<crate::steps::in_process::Finishes>>,
    routes: Routes,
    to: futures::channel::mpsc::UnboundedSender<ObjectRef<Run>>,
) {
    let mut finishes = finishes.lock().await;
    while let Some(id) = finishes.next().await {
        let target = routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id.run)
            .cloned();
        if let Some(target) = target
            && to.unbounded_send(target).is_err()
        {
            return;
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

fn error_policy(run: Arc<Run>, error: &Error, _ctx: Arc<Context>) -> Action {
    use kube::ResourceExt;
    if error.metric_label() == "conflict" {
        // A stale read: the watch brings the newer Run; look again soon.
        tracing::debug!(run = %run.name_any(), "{error}");
        return Action::requeue(std::time::Duration::from_millis(500));
    }
    tracing::warn!(run = %run.name_any(), "{error}");
    Action::requeue(ERROR_REQUEUE)
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
