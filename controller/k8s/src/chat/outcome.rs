//! Telling the room how a command's run ended: a small reconciler over the
//! Runs that commands started. When one is over and not yet answered, it
//! posts the outcome in the command's thread, then marks the Run answered.
//!
//! On Matrix the answer's transaction id comes from the Run's uid, so a
//! crash between the post and the mark posts once. Slack has no such id: a
//! crash in that window posts the outcome a second time.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::command;
use super::connection::{self, Connection};
use crate::api::Run;
use crate::error::Error;
use crate::names;
use crate::steps::chat::{Matrix, Post, Slack};
use crate::steps::net::{self, NetPolicy};

/// What the outcome reconciler needs.
pub struct Context {
    /// The API server.
    pub client: Client,
    /// The network policy chat calls go through.
    pub policy: Arc<NetPolicy>,
}

/// Why an outcome could not be posted yet.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// The connection's Secret.
    #[error(transparent)]
    Connection(#[from] connection::ConnectionError),
    /// The chat service.
    #[error("{0}")]
    Chat(String),
    /// The API server.
    #[error(transparent)]
    Kube(#[from] Error),
}

/// Runs the outcome reconciler over the Runs in `namespace` (or all) that
/// carry the chat label, until `shutdown`.
pub async fn run(
    client: Client,
    namespace: Option<&str>,
    policy: Arc<NetPolicy>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let runs: Api<Run> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let context = Arc::new(Context { client, policy });
    Controller::new(runs, watcher::Config::default().labels(names::CHAT_LABEL))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(run: Arc<Run>, ctx: Arc<Context>) -> Result<Action, OutcomeError> {
    let over = run
        .status
        .as_ref()
        .is_some_and(|s| crate::run::status::is_over(s.phase));
    let annotations = run.annotations();
    if !over || annotations.contains_key(names::CHAT_ANSWERED_ANNOTATION) {
        return Ok(Action::await_change());
    }
    let (Some(namespace), Some(connection), Some(room)) = (
        run.namespace(),
        annotations.get(names::CHAT_CONNECTION_ANNOTATION),
        annotations.get(names::CHAT_ROOM_ANNOTATION),
    ) else {
        return Ok(Action::await_change());
    };
    let thread = annotations
        .get(names::CHAT_THREAD_ANNOTATION)
        .map(String::as_str);
    let text = command::outcome_text(&run);
    let found = connection::read(&ctx.client, &namespace, connection).await?;
    let http = net::client(ctx.policy.clone(), net::Redirects::SameOrigin)
        .map_err(|e| OutcomeError::Chat(e.to_string()))?;
    let posted = match found {
        Connection::Matrix { url, token } => {
            let matrix = Matrix::new(http, ctx.policy.clone(), &url, &token)
                .map_err(|e| OutcomeError::Chat(e.to_string()))?;
            let txn = command::transaction("outcome", &run.uid().unwrap_or_else(|| run.name_any()));
            matrix
                .send_text(room, &txn, &text, thread)
                .await
                .map_err(|e| OutcomeError::Chat(e.to_string()))?
        }
        Connection::Slack { url, token, .. } => Slack::new(http, ctx.policy.clone(), &url, &token)
            .map_err(|e| OutcomeError::Chat(e.to_string()))?
            .post(Post {
                channel: room,
                text: &text,
                thread_ts: thread,
                idempotency_key: None,
            })
            .await
            .map(|posted| posted.ts)
            .map_err(|e| OutcomeError::Chat(e.to_string()))?,
    };
    let runs: Api<Run> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = json!({"metadata": {"annotations": BTreeMap::from([(names::CHAT_ANSWERED_ANNOTATION, posted)])}});
    runs.patch(
        &run.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|e| Error::kube(format!("marking the run {} answered", run.name_any()), e))?;
    tracing::info!(run = %run.name_any(), "chat: posted the outcome");
    Ok(Action::await_change())
}

fn error_policy(run: Arc<Run>, error: &OutcomeError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(run = %run.name_any(), "chat: cannot post the outcome yet: {error}");
    Action::requeue(Duration::from_secs(10))
}
