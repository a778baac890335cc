//! Conversation commands on Slack: the Events API endpoint, served by every
//! replica (Slack calls whichever the Service picks), at
//! `POST /slack/events/{namespace}/{connection}`: the Slack app's Request
//! URL names the connection Secret, whose `signingSecret` every request
//! must be signed with ([`signature`]).
//!
//! A command is acted on before Slack is answered, within [`ANSWER_WITHIN`]
//! (Slack retries a call it gets no 200 for in 3 seconds): the Run is
//! created (named from the message, so a retry finds it there), and only a
//! Run created by this very request is announced in the thread. A retry or
//! duplicate delivery therefore starts nothing and posts nothing again
//! (`chat.postMessage` has no idempotency key). When the work does not
//! finish in time, Slack is told 503 and retries; if the Run was created
//! meanwhile, its start is not announced (its outcome still is). Refusals
//! are posted on every delivery Slack makes: it only repeats one when our
//! 200 did not reach it, so a repeated refusal is rare and harmless.
//!
//! The outcome of a Slack-started run is posted by [`super::outcome`].

pub mod event;
pub mod signature;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::guard::Guarded;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use self::event::Incoming;
use super::command::{self, Decision, Heard, Listener};
use super::connection::{self, Connection};
use crate::error::{Error, StartError};
use coxswain_core::api::{Flow, Run};
use coxswain_steps::chat::{Post, Slack};
use coxswain_steps::net::{self, NetPolicy};

/// How long a request may take before Slack is told to try again: under
/// the 3 seconds after which Slack gives up on it and retries anyway.
pub const ANSWER_WITHIN: Duration = Duration::from_millis(2500);

/// The running endpoint; [`SlackEvents::stop`] ends it.
pub struct SlackEvents {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
}

impl SlackEvents {
    /// Stops taking requests; those in flight finish.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

/// What every request needs.
struct Shared {
    client: Client,
    /// The controller's `--namespace`, if it watches one only.
    namespace: Option<String>,
    policy: Arc<NetPolicy>,
    /// The user the controller acts as: the `created-by` of the Runs it
    /// starts.
    me: String,
}

/// Binds `addr` and serves the endpoint in a spawned task. `namespace` is
/// the controller's `--namespace`: connections elsewhere are not served.
/// `me` is the user the controller acts as, written as the `created-by`
/// of the Runs commands start.
pub async fn start(
    client: Client,
    addr: SocketAddr,
    namespace: Option<String>,
    policy: Arc<NetPolicy>,
    me: String,
) -> Result<SlackEvents, StartError> {
    let listen_error =
        |e: std::io::Error| StartError::Setting(format!("--slack-events-listen {addr}: {e}"));
    let listener = TcpListener::bind(addr).await.map_err(listen_error)?;
    let addr = listener.local_addr().map_err(listen_error)?;
    let shared = Arc::new(Shared {
        client,
        namespace,
        policy,
        me,
    });
    let app = Router::new()
        .route("/slack/events/{namespace}/{connection}", post(receive))
        .with_state(shared);
    let (stop, mut stopped) = watch::channel(false);
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, %addr, "the Slack events endpoint stopped");
        }
    });
    tracing::info!(%addr, "serving Slack events at /slack/events/{{namespace}}/{{connection}}");
    Ok(SlackEvents { addr, stop })
}

/// One Events API request.
async fn receive(
    State(shared): State<Arc<Shared>>,
    Path((namespace, connection)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let within = tokio::time::timeout(
        ANSWER_WITHIN,
        answer(&shared, &namespace, &connection, &headers, &body),
    );
    match within.await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(%namespace, %connection, "slack: a request took too long; Slack will retry it");
            text(StatusCode::SERVICE_UNAVAILABLE, "not done in time; retry")
        }
    }
}

/// A plain-text answer.
fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

/// The signature's form, the connection, the signature, then the event.
async fn answer(
    shared: &Shared,
    namespace: &str,
    connection: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = jiff::Timestamp::now().as_second();
    let (timestamp, signed) = (
        header("x-slack-request-timestamp"),
        header("x-slack-signature"),
    );
    if let Err(e) = signature::precheck(timestamp, signed, now) {
        tracing::warn!(%namespace, %connection, "slack: a request refused: {e}");
        return text(StatusCode::UNAUTHORIZED, e.to_string());
    }
    let (url, token, signing_secret) = match slack_connection(shared, namespace, connection).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Err(e) = signature::verify(
        &signing_secret,
        header("x-slack-request-timestamp"),
        header("x-slack-signature"),
        body,
        now,
    ) {
        tracing::warn!(%namespace, %connection, "slack: a request refused: {e}");
        return text(StatusCode::UNAUTHORIZED, e.to_string());
    }
    let incoming = match event::read(body) {
        Ok(incoming) => incoming,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    match incoming {
        Incoming::Challenge(challenge) => text(StatusCode::OK, challenge),
        Incoming::Ignored(why) => {
            tracing::debug!(%namespace, %connection, "slack: ignored {why}");
            StatusCode::OK.into_response()
        }
        Incoming::Message(message) => {
            let heard = message.heard(connection);
            let retry = header("x-slack-retry-num").is_some();
            let said = match act(shared, namespace, &heard, retry).await {
                Ok(said) => said,
                Err(e) => {
                    tracing::warn!(%namespace, %connection, "slack: {e}; Slack will retry");
                    return text(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
                }
            };
            if let Some(answer) = said {
                let policy = shared.policy.clone();
                tokio::spawn(post_answer(policy, url, token, heard, answer));
            }
            StatusCode::OK.into_response()
        }
    }
}

/// The Slack connection's (url, token, signing secret), or the answer:
/// 404 when the Secret is missing or not a Slack connection (the same
/// words for both, so unsigned callers learn nothing about Secrets; the
/// log says which), 503 when it cannot be read now.
async fn slack_connection(
    shared: &Shared,
    namespace: &str,
    name: &str,
) -> Result<(String, String, String), Response> {
    let not_found = |why: String| {
        tracing::warn!(%namespace, connection = %name, "slack: a request for a connection that cannot take it: {why}");
        text(
            StatusCode::NOT_FOUND,
            format!(
                "no Slack connection {namespace}/{name} here: the Secret is missing, is not `type: slack`, or this controller does not watch its namespace (its log says which)"
            ),
        )
    };
    if let Some(watched) = &shared.namespace
        && watched != namespace
    {
        return Err(not_found(format!("this controller watches {watched} only")));
    }
    let secrets: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    let secret = match secrets.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => return Err(not_found("no such Secret".into())),
        Err(e) => {
            tracing::warn!(%namespace, connection = %name, "slack: reading the connection: {e}");
            return Err(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the connection cannot be read now; retry",
            ));
        }
    };
    match connection::from_secret(namespace, name, &secret) {
        Ok(Connection::Slack {
            url,
            token,
            signing_secret,
        }) => Ok((url, token, signing_secret)),
        Ok(other) => Err(not_found(format!("the connection is {other:?}"))),
        Err(e) => Err(not_found(e.to_string())),
    }
}

/// Decides on a message and creates its Run; returns what to post in the
/// thread, if anything. Fails when trying again may work.
async fn act(
    shared: &Shared,
    namespace: &str,
    heard: &Heard,
    retry: bool,
) -> Result<Option<String>, Error> {
    let flows = flows(shared, namespace, &heard.connection).await?;
    // Slack's rooms are channel ids as written.
    let listeners: Vec<Listener<'_>> = flows
        .iter()
        .map(|flow| Listener::of(flow, |written| Some(written.to_string())))
        .collect();
    match command::decide(heard, &listeners) {
        Decision::Ignore => Ok(None),
        Decision::Refuse(text) => {
            tracing::info!(sender = %heard.sender, retry, "chat: refused a command");
            Ok(Some(text))
        }
        Decision::Help(text) => Ok(Some(text)),
        Decision::Start(run) => create(shared, namespace, &run, heard).await,
    }
}

/// The flows in `namespace` whose valid command names `connection`.
async fn flows(shared: &Shared, namespace: &str, connection: &str) -> Result<Vec<Flow>, Error> {
    let api: Api<Guarded<Flow>> = Api::namespaced(shared.client.clone(), namespace);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube(format!("listing the flows in {namespace}"), e))?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|guard| guard.0.ok())
        .filter(|flow| command::listens_on(flow, connection, true))
        .map(Arc::unwrap_or_clone)
        .collect())
}

/// Creates the Run. Created now: announce it. There already (a retry or a
/// duplicate delivery): say nothing, it was announced the first time.
/// Refused (admission): say why.
async fn create(
    shared: &Shared,
    namespace: &str,
    run: &Run,
    heard: &Heard,
) -> Result<Option<String>, Error> {
    let runs: Api<Run> = Api::namespaced(shared.client.clone(), namespace);
    let run = &command::created_by(run, &shared.me);
    match runs.create(&PostParams::default(), run).await {
        Ok(_) => {
            tracing::info!(run = %run.name_any(), sender = %heard.sender, "chat: started a run");
            Ok(Some(command::started_text(run)))
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::info!(run = %run.name_any(), "chat: the run is there already (a repeated delivery)");
            Ok(None)
        }
        Err(kube::Error::Api(status))
            if (400..500).contains(&status.code) && status.code != 429 =>
        {
            let name = command::parse(&heard.text)
                .map(|(n, _)| n)
                .unwrap_or_default();
            Ok(Some(command::not_started_text(name, &status.message)))
        }
        Err(e) => Err(Error::kube(
            format!("creating the run {}", run.name_any()),
            e,
        )),
    }
}

/// Posts an answer in the message's thread, after Slack has had its 200.
async fn post_answer(
    policy: Arc<NetPolicy>,
    url: String,
    token: String,
    heard: Heard,
    answer: String,
) {
    let posted = match net::client(policy.clone(), net::Redirects::SameOrigin) {
        Ok(http) => match Slack::new(http, policy, &url, &token) {
            Ok(slack) => slack
                .post(Post {
                    channel: &heard.room,
                    text: &answer,
                    thread_ts: Some(&heard.thread_root),
                    idempotency_key: None,
                })
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = posted {
        tracing::warn!(channel = %heard.room, connection = %heard.connection, "chat: cannot answer on Slack: {e}");
    }
}
