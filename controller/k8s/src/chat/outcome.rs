//! Telling the room how a command's run ended: a small reconciler over the
//! Runs that commands started. When one is over and not yet answered, it
//! posts the outcome in the command's thread, then marks the Run answered.
//!
//! On Matrix the answer's transaction id comes from the Run's uid, so a
//! crash between the post and the mark posts once. Slack has no such id: a
//! crash in that window posts the outcome a second time.
//!
//! A post that fails for a passing reason (the network, a 5xx, a rate
//! limit) is tried again in seconds. One the chat refused (the bot left the
//! room, its token was revoked, the Secret is wrong) is tried less often the
//! longer ago the run ended, and a day after it ended the Run is marked
//! `coxswain.dev/chat-unanswered` with the reason and left alone: many old
//! runs never make the controller hammer a homeserver that says no.

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
use crate::error::Error;
use crate::guard::Guarded;
use crate::names;
use coxswain_core::api::Run;
use coxswain_steps::chat::{Matrix, MatrixError, Post, Slack, SlackError};
use coxswain_steps::net::{self, NetPolicy};

/// What the outcome reconciler needs.
pub struct Context {
    /// The API server.
    pub client: Client,
    /// The network policy chat calls go through.
    pub policy: Arc<NetPolicy>,
    /// The user the controller acts as: only Runs it created from a
    /// command get their outcome posted.
    pub me: String,
}

/// Why an outcome could not be posted yet.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    /// The connection's Secret.
    #[error(transparent)]
    Connection(#[from] connection::ConnectionError),
    /// The HTTP client could not be built.
    #[error("{0}")]
    Client(net::NetError),
    /// The Matrix homeserver.
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    /// Slack.
    #[error(transparent)]
    Slack(#[from] SlackError),
    /// The API server.
    #[error(transparent)]
    Kube(#[from] Error),
}

impl OutcomeError {
    /// Whether trying again soon may work, as opposed to a refusal that
    /// stands until someone changes something.
    pub fn is_transient(&self) -> bool {
        match self {
            OutcomeError::Connection(e) => e.is_transient(),
            OutcomeError::Client(_) => false,
            OutcomeError::Matrix(e) => e.is_transient(),
            OutcomeError::Slack(e) => e.is_transient(),
            OutcomeError::Kube(_) => true,
        }
    }
}

/// How soon a passing failure is tried again.
const RETRY_SOON: Duration = Duration::from_secs(10);
/// The shortest and longest wait after a refusal.
const REFUSED_WAIT: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(3600));
/// How long after a run ended its outcome is tried at all.
const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 3600);
/// The longest reason kept in the unanswered mark, in characters (cut
/// as every preview is).
const REASON_MAX: usize = 1000;

/// Runs the outcome reconciler over the Runs in `namespace` (or all) that
/// carry the chat label, until `shutdown`. Only Runs `me` (the
/// controller) started from a command are answered
/// ([`command::started_by_me`]); Runs are read one by one, so one that
/// cannot be read holds up no other.
pub async fn run(
    client: Client,
    namespace: Option<&str>,
    policy: Arc<NetPolicy>,
    me: String,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let runs: Api<Guarded<Run>> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let context = Arc::new(Context { client, policy, me });
    Controller::new(runs, watcher::Config::default().labels(names::CHAT_LABEL))
        .graceful_shutdown_on(shutdown)
        .run(reconcile_guarded, guarded_error_policy, context)
        .for_each(|_| async {})
        .await;
}

async fn reconcile_guarded(
    run: Arc<Guarded<Run>>,
    ctx: Arc<Context>,
) -> Result<Action, OutcomeError> {
    match &run.0 {
        Ok(run) => reconcile(run.clone(), ctx).await,
        // The Run reconciler reports it.
        Err(_) => Ok(Action::await_change()),
    }
}

fn guarded_error_policy(run: Arc<Guarded<Run>>, error: &OutcomeError, ctx: Arc<Context>) -> Action {
    match &run.0 {
        Ok(run) => error_policy(run.clone(), error, ctx),
        Err(_) => Action::await_change(),
    }
}

async fn reconcile(run: Arc<Run>, ctx: Arc<Context>) -> Result<Action, OutcomeError> {
    if !command::started_by_me(&run, &ctx.me) {
        // Chat marks on a Run the controller did not start from a command:
        // the bot does not speak for it.
        tracing::debug!(run = %run.name_any(), "chat: not a command run of this controller; no outcome posted");
        return Ok(Action::await_change());
    }
    let over = run.status.as_ref().is_some_and(|s| s.phase.is_over());
    let annotations = run.annotations();
    let settled = annotations.contains_key(names::CHAT_ANSWERED_ANNOTATION)
        || annotations.contains_key(names::CHAT_UNANSWERED_ANNOTATION);
    if !over || settled {
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
    let (annotation, value) = match post(&ctx, &run, &namespace, connection, room, thread).await {
        Ok(posted) => (names::CHAT_ANSWERED_ANNOTATION, posted),
        Err(e) if ended_ago(&run).is_some_and(|ago| ago > GIVE_UP_AFTER) => {
            tracing::warn!(run = %run.name_any(), "chat: giving up on the outcome: {e}");
            (
                names::CHAT_UNANSWERED_ANNOTATION,
                net::preview(&e.to_string(), REASON_MAX),
            )
        }
        Err(e) => return Err(e),
    };
    let runs: Api<Run> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = json!({"metadata": {"annotations": BTreeMap::from([(annotation, value)])}});
    runs.patch(
        &run.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|e| Error::kube(format!("marking the run {} answered", run.name_any()), e))?;
    if annotation == names::CHAT_ANSWERED_ANNOTATION {
        tracing::info!(run = %run.name_any(), "chat: posted the outcome");
    }
    Ok(Action::await_change())
}

/// Posts the run's outcome in its thread; returns the message's id.
async fn post(
    ctx: &Context,
    run: &Run,
    namespace: &str,
    connection: &str,
    room: &str,
    thread: Option<&str>,
) -> Result<String, OutcomeError> {
    let text = command::outcome_text(run);
    let found = connection::read(&ctx.client, namespace, connection).await?;
    let http = net::client(ctx.policy.clone(), net::Redirects::SameOrigin)
        .map_err(OutcomeError::Client)?;
    Ok(match found {
        Connection::Matrix { url, token } => {
            let matrix = Matrix::new(http, ctx.policy.clone(), &url, &token)?;
            let txn = command::transaction("outcome", &run.uid().unwrap_or_else(|| run.name_any()));
            matrix.send_text(room, &txn, &text, thread).await?
        }
        Connection::Slack { url, token, .. } => {
            Slack::new(http, ctx.policy.clone(), &url, &token)?
                .post(Post {
                    channel: room,
                    text: &text,
                    thread_ts: thread,
                    idempotency_key: None,
                })
                .await?
                .ts
        }
    })
}

/// How long ago the run ended, by its status.
fn ended_ago(run: &Run) -> Option<Duration> {
    let finished: jiff::Timestamp = run.status.as_ref()?.finished_at.as_deref()?.parse().ok()?;
    Duration::try_from(jiff::Timestamp::now().duration_since(finished)).ok()
}

/// How long to wait before trying an outcome again: soon after a passing
/// failure; after a refusal, a quarter of the time since the run ended,
/// within [`REFUSED_WAIT`].
fn retry_after(transient: bool, ended_ago: Duration) -> Duration {
    if transient {
        return RETRY_SOON;
    }
    (ended_ago / 4).clamp(REFUSED_WAIT.0, REFUSED_WAIT.1)
}

fn error_policy(run: Arc<Run>, error: &OutcomeError, _ctx: Arc<Context>) -> Action {
    let wait = retry_after(error.is_transient(), ended_ago(&run).unwrap_or_default());
    tracing::warn!(run = %run.name_any(), retry_in = ?wait, "chat: cannot post the outcome yet: {error}");
    Action::requeue(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_wait_longer_the_older_the_run_and_passing_failures_do_not() {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        assert_eq!(retry_after(true, minutes(600)), RETRY_SOON);
        assert_eq!(retry_after(false, Duration::ZERO), REFUSED_WAIT.0);
        assert_eq!(retry_after(false, minutes(20)), minutes(5));
        assert_eq!(retry_after(false, minutes(600)), REFUSED_WAIT.1);
    }

    #[test]
    fn a_run_ended_an_hour_ago_is_an_hour_old() {
        let mut run = Run::new("r", Default::default());
        assert_eq!(ended_ago(&run), None);
        let hour_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
        run.status = Some(coxswain_core::api::RunStatus {
            finished_at: Some(hour_ago.to_string()),
            ..Default::default()
        });
        let ago = ended_ago(&run).expect("an age");
        assert!(
            ago >= Duration::from_secs(3600) && ago < Duration::from_secs(3700),
            "{ago:?}"
        );
    }
}
