//! Conversation commands: people start flows from a chat room.
//!
//! A Flow's `command` names a connection (a Secret), rooms and who may ask.
//! On the leader, one [`follow::Follower`] per Matrix connection reads the
//! rooms and creates Runs; [`outcome`] posts each such run's end in the
//! command's thread. Slack pushes its events to [`slack`]'s endpoint
//! instead, which every replica serves.
//! Everything a restart needs (positions, answered runs) is in the API
//! server.

pub mod command;
pub mod connection;
pub mod follow;
pub mod outcome;
pub mod position;
pub mod slack;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::guard::Guarded;
use futures::StreamExt;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

use coxswain_core::api::Flow;
use coxswain_steps::net::NetPolicy;

/// How often the set of connections is looked at again.
const RESCAN: Duration = Duration::from_secs(2);

/// Runs the followers and the outcome poster until `shutdown`. `me` is the
/// user the controller acts as: the `created-by` of the Runs commands
/// start, and the only creator whose Runs get an outcome posted.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    policy: NetPolicy,
    reporter: Reporter,
    me: String,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let policy = Arc::new(policy);
    let flows: Api<Guarded<Flow>> = match namespace.as_deref() {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (store, writer) = reflector::store();
    let reflect = watcher(flows, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(|_| async {});
    let outcomes = outcome::run(
        client.clone(),
        namespace.as_deref(),
        policy.clone(),
        me.clone(),
        std::future::pending(),
    );
    let recorder = Recorder::new(client.clone(), reporter);
    let supervise = supervise(client, store, policy, recorder, me);
    tokio::select! {
        _ = reflect => {}
        _ = outcomes => {}
        _ = supervise => {}
        _ = shutdown => {}
    }
}

/// Keeps one follower per connection that a valid flow's command names:
/// started when the first such flow appears, stopped when the last goes.
async fn supervise(
    client: Client,
    store: Store<Guarded<Flow>>,
    policy: Arc<NetPolicy>,
    recorder: Recorder,
    me: String,
) {
    if store.wait_until_ready().await.is_err() {
        return;
    }
    let mut running: BTreeMap<(String, String), Task> = BTreeMap::new();
    loop {
        let wanted = connections(&store);
        running.retain(|key, task| wanted.contains(key) && !task.0.is_finished());
        for key in wanted {
            if running.contains_key(&key) {
                continue;
            }
            let follower = follow::Follower {
                client: client.clone(),
                namespace: key.0.clone(),
                connection: key.1.clone(),
                flows: store.clone(),
                policy: policy.clone(),
                recorder: recorder.clone(),
                me: me.clone(),
                unjoinable: Default::default(),
            };
            tracing::info!(namespace = %key.0, connection = %key.1, "chat: following a connection");
            running.insert(key, Task(tokio::spawn(follower.run())));
        }
        tokio::time::sleep(RESCAN).await;
    }
}

/// A follower's task, stopped when dropped: when the leader steps down or
/// the last flow of a connection goes.
struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// (namespace, connection) of every flow with a command.
fn connections(store: &Store<Guarded<Flow>>) -> BTreeSet<(String, String)> {
    store
        .state()
        .iter()
        .filter_map(|guard| guard.0.as_ref().ok())
        .filter_map(|flow| {
            let command = flow.spec.command.as_ref()?;
            Some((flow.namespace()?, command.chat.clone()))
        })
        .collect()
}
