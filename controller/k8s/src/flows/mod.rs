//! The Flow reconciler: a Flow's `Valid` and `Ready` conditions, its
//! summary columns, and its schedule.
//!
//! It writes only a Flow's `status` (GitOps: nothing but the author writes
//! `spec`), and only when it changed, so its own writes never start a storm.

pub mod runs;
pub mod schedule;
pub mod status;

mod reconcile;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

pub use reconcile::Context;

use crate::guard::Guarded;
use crate::{Error, StartError};
use coxswain_core::api::{Flow, Run};

/// Reconciles of Flows running at once.
const CONCURRENCY: u16 = 4;

/// A burst of Run changes (a run's status is written often) is taken as one
/// reconcile of its Flow.
const DEBOUNCE: Duration = Duration::from_millis(500);

/// Runs the Flow reconciler until `shutdown` completes (leader loss,
/// SIGTERM): reconciles in flight finish, then it returns. Watches Flows
/// and Runs in `namespace`, or in every namespace when `None`; a Run's
/// change reconciles the Flow it names (its latest run, its schedule's
/// bookkeeping). A Flow or Run that does not read as Coxswain's types never
/// stops the watch: such a Flow gets `Valid` False saying why.
///
/// `me` is the user the controller acts as (see
/// [`crate::admission::whoami`]): a Run in a schedule's slot is the
/// schedule's only when `me` created it.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    me: String,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), StartError> {
    let flows: Api<Guarded<Flow>> = scoped(&client, namespace.as_deref());
    // Runs are read one by one (see `guard`): one too deep for serde_json
    // does not fail the list, so every schedule goes on.
    let runs: Api<Guarded<Run>> = scoped(&client, namespace.as_deref());
    let (store, writer) = reflector::store();
    let run_changes = watcher(runs, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    let reporter = Reporter {
        controller: "coxswain".into(),
        instance: None,
    };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        runs: store,
        me,
    });
    Controller::new(flows, watcher::Config::default())
        .with_config(
            controller::Config::default()
                .concurrency(CONCURRENCY)
                .debounce(DEBOUNCE),
        )
        .watches_stream(run_changes, flow_of)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, on_error, context)
        .for_each(|outcome| async move {
            if let Err(error) = outcome {
                tracing::warn!(%error, "flow reconcile");
            }
        })
        .await;
    Ok(())
}

/// The Flow a Run belongs to.
fn flow_of(run: Guarded<Run>) -> Option<ObjectRef<Guarded<Flow>>> {
    let run = run.0.ok()?;
    let namespace = run.namespace()?;
    Some(ObjectRef::new(&run.spec.flow_ref.name).within(&namespace))
}

/// A failed reconcile is tried again shortly.
fn on_error(_: Arc<Guarded<Flow>>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "flow reconcile failed; retrying");
    Action::requeue(crate::settings::ERROR_REQUEUE)
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
