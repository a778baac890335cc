//! `message` steps: post a text to a generic webhook, a Slack channel or a
//! Matrix room.
//!
//! The output is `{"messageId", "conversationName"}` whichever the target,
//! so later steps need not care where the message went:
//!
//! - A webhook receives `POST {"text": …}` as JSON with an `Idempotency-Key`.
//!   `messageId` is the answer's `id` or `ts` (a JSON object's string or
//!   number) or, when the answer has neither, a generated `msg-…` id;
//!   `conversationName` is the webhook's host.
//! - Slack receives `chat.postMessage` with the bot token from the Secret
//!   ([`slack`]). `messageId` is Slack's `ts`, `conversationName` the
//!   channel's name.
//! - Matrix receives the text as an `m.text` event under a transaction id
//!   derived from the attempt, so a repeated attempt posts once ([`matrix`]).
//!   `messageId` is the event's id, `conversationName` the room's name.
//!
//! The text's placeholders are inserted as text and never scanned again, so
//! data that looks like a placeholder or a reference is posted as it is. The
//! webhook's URL may hold placeholders too; each value is URL-encoded for
//! the part of the URL it stands in, as in an http step's `url`. A token
//! read from a Secret never reaches the status: should a server echo it, it
//! is replaced by `[redacted secret NAME/KEY]`.

mod matrix;
mod slack;

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use super::chat::{MatrixError, SlackError};
use super::net::{self, NetPolicy, PostError, Redactor};
use super::{Executor, Secrets};
use coxswain_core::api::{MessageStep, SecretKeyRef, StepError, WebhookTarget};
use coxswain_core::engine::{Done, Failed, Task, Work, WorkResult, codes, step_error};
use coxswain_core::template::Place;

/// Why a message could not be posted, or the executor not built. Each kind
/// has its stable code; messages are written for the flow's author.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(net::NetError),
    /// This executor was handed a step of another kind.
    #[error("the message executor only runs message steps")]
    NotAMessage,
    /// None, or more than one, of `webhook`, `slack` and `matrix`.
    #[error("{0}")]
    Target(String),
    /// A placeholder in the text or the URL could not be filled.
    #[error("{}", .0.message)]
    Placeholder(StepError),
    /// The URL (after filling placeholders) does not parse.
    #[error("`{url}` is not a valid URL: {reason}")]
    BadUrl {
        /// The URL as filled in.
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// The webhook is not http(s).
    #[error("a webhook must be an http or https URL, not {0}")]
    Scheme(String),
    /// The webhook was refused by the policy, failed on the way, or
    /// answered with an HTTP error.
    #[error("{0}")]
    Post(#[from] PostError),
    /// The Slack or Matrix token could not be read.
    #[error("{service} token: {error}")]
    Token {
        /// `Slack` or `Matrix`.
        service: &'static str,
        /// Why not.
        error: crate::SecretError,
    },
    /// The token cannot go in a header.
    #[error("{service} token: secret `{name}` key `{key}` holds characters a header cannot carry")]
    TokenChars {
        /// `Slack` or `Matrix`.
        service: &'static str,
        /// The secret.
        name: String,
        /// Its key.
        key: String,
    },
    /// Slack refused the message, or could not be reached (boxed: it is
    /// large and rare).
    #[error("{0}")]
    Slack(Box<SlackError>),
    /// The Matrix homeserver refused the message, or could not be reached.
    #[error("posting to the Matrix room {room}: {error}")]
    Matrix {
        /// The room as written in the step.
        room: String,
        /// What went wrong, naming the homeserver (boxed: it is large and
        /// rare).
        error: Box<MatrixError>,
    },
}

impl MessageError {
    /// The stable code recorded with the failure.
    pub fn code(&self) -> &str {
        match self {
            MessageError::Placeholder(inner) => &inner.code,
            MessageError::Post(PostError::Timeout { .. }) => codes::TIMEOUT,
            MessageError::Matrix { error, .. }
                if matches!(**error, MatrixError::Timeout { .. }) =>
            {
                codes::TIMEOUT
            }
            MessageError::Slack(error)
                if matches!(**error, SlackError::Post(PostError::Timeout { .. })) =>
            {
                codes::TIMEOUT
            }
            MessageError::Token { .. } | MessageError::TokenChars { .. } => codes::SECRET,
            _ => codes::MESSAGE,
        }
    }

    /// The token in `r` cannot go in a header: one wording for every
    /// service's client that refuses it.
    fn token_chars(service: &'static str, r: &SecretKeyRef) -> Self {
        MessageError::TokenChars {
            service,
            name: r.name.clone(),
            key: r.key.clone(),
        }
    }
}

impl From<MessageError> for StepError {
    fn from(error: MessageError) -> Self {
        step_error(error.code(), error.to_string())
    }
}

/// Slack's Web API, where `chat.postMessage` lives.
pub const SLACK_API: &str = "https://slack.com/api";
/// The longest a post may take when the attempt sets no shorter timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Answers to a post are small; anything bigger than this is refused.
const RESPONSE_LIMIT: usize = 1 << 20;

/// Runs `message` steps.
#[derive(Clone)]
pub struct MessageExecutor {
    client: reqwest::Client,
    secrets: Arc<dyn Secrets>,
    policy: Arc<NetPolicy>,
    slack_api: String,
}

impl std::fmt::Debug for MessageExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageExecutor")
            .field("policy", &self.policy)
            .field("slack_api", &self.slack_api)
            .finish_non_exhaustive()
    }
}

impl MessageExecutor {
    /// An executor posting to the real Slack API, with the default network
    /// policy; Slack tokens come from `secrets`.
    pub fn new(secrets: Arc<dyn Secrets>) -> Result<Self, MessageError> {
        Self::with_policy(secrets, NetPolicy::default())
    }

    /// An executor that reaches only what `policy` allows (the controller
    /// passes `NetPolicy::cluster()`).
    pub fn with_policy(secrets: Arc<dyn Secrets>, policy: NetPolicy) -> Result<Self, MessageError> {
        let policy = Arc::new(policy);
        Ok(MessageExecutor {
            client: net::client(policy.clone(), net::Redirects::SameOrigin)
                .map_err(MessageError::Client)?,
            secrets,
            policy,
            slack_api: SLACK_API.to_string(),
        })
    }

    /// Posts Slack messages to `base` (as `{base}/chat.postMessage`) instead
    /// of Slack itself: for tests and for Slack-compatible servers.
    pub fn with_slack_api(mut self, base: impl Into<String>) -> Self {
        self.slack_api = base.into().trim_end_matches('/').to_string();
        self
    }

    async fn post(
        &self,
        work: &Work,
        step: &MessageStep,
        redactor: &mut Redactor,
    ) -> Result<Done, MessageError> {
        if let Some(problem) = coxswain_core::flow::target_problem(step) {
            return Err(MessageError::Target(problem));
        }
        let text = net::render(&step.text, Place::Message, &work.data)
            .map_err(MessageError::Placeholder)?;
        if let Some(hook) = &step.webhook {
            self.webhook(work, hook, &text).await
        } else if let Some(slack) = &step.slack {
            self.slack(work, slack, &text, redactor).await
        } else if let Some(matrix) = &step.matrix {
            self.matrix(work, matrix, &text, redactor).await
        } else {
            Err(MessageError::Target(
                "a message step gives one of `webhook`, `slack` or `matrix`".into(),
            ))
        }
    }

    /// The token `r` names, remembered by `redactor` so no answer can carry
    /// it into the status.
    async fn token(
        &self,
        service: &'static str,
        r: &SecretKeyRef,
        redactor: &mut Redactor,
    ) -> Result<String, MessageError> {
        let token = self
            .secrets
            .get(&r.name, &r.key)
            .await
            .map_err(|error| MessageError::Token { service, error })?;
        redactor.add(&r.name, &r.key, &token);
        redactor.add(&r.name, &r.key, token.trim());
        Ok(token)
    }

    /// Sends one JSON POST with the attempt's idempotency key and returns
    /// the body of a 2xx answer.
    async fn send(&self, work: &Work, url: &Url, body: &Value) -> Result<Vec<u8>, MessageError> {
        let request = self
            .client
            .post(url.clone())
            .header(super::http::IDEMPOTENCY_KEY, work.idempotency_key())
            .json(body);
        let limit = net::shortest(DEFAULT_TIMEOUT, work.timeout);
        Ok(net::exchange(&self.policy, url, request, limit, RESPONSE_LIMIT).await?)
    }

    async fn webhook(
        &self,
        work: &Work,
        hook: &WebhookTarget,
        text: &str,
    ) -> Result<Done, MessageError> {
        let url = webhook_url(hook, work)?;
        let bytes = self.send(work, &url, &json!({"text": text})).await?;
        let answer = serde_json::from_slice::<Value>(&bytes).ok();
        let id = answer
            .as_ref()
            .and_then(|a| id_of(a, "id").or_else(|| id_of(a, "ts")))
            .unwrap_or_else(|| format!("msg-{:016x}", rand::random::<u64>()));
        Ok(Done {
            output: json!({
                "messageId": id,
                "conversationName": url.host_str().unwrap_or(""),
            }),
            text: Some(text.to_string()),
            usage: None,
            log: None,
        })
    }
}

/// The webhook's URL with its placeholders filled, each value URL-encoded
/// for where it stands; only http and https are accepted.
fn webhook_url(hook: &WebhookTarget, work: &Work) -> Result<Url, MessageError> {
    let filled =
        net::render(&hook.url, Place::Url, &work.data).map_err(MessageError::Placeholder)?;
    let url = Url::parse(&filled).map_err(|e| MessageError::BadUrl {
        url: filled.clone(),
        reason: e.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(MessageError::Scheme(url.scheme().to_string()));
    }
    Ok(url)
}

impl Executor for MessageExecutor {
    async fn run(&self, work: &Work) -> WorkResult {
        let mut redactor = Redactor::new();
        let result = match &work.task {
            Task::Message(step) => self.post(work, step, &mut redactor).await,
            _ => Err(MessageError::NotAMessage),
        };
        match result {
            Ok(done) => Ok(redactor.done(done)),
            Err(e) => Err(Failed::from(redactor.error(StepError::from(e)))),
        }
    }
}

/// The thread to answer in, its placeholders filled; none when the step
/// gives none or it fills in empty (a run not started from chat).
fn thread(written: Option<&str>, work: &Work) -> Result<Option<String>, MessageError> {
    let Some(written) = written else {
        return Ok(None);
    };
    let filled =
        net::render(written, Place::Text, &work.data).map_err(MessageError::Placeholder)?;
    let filled = filled.trim();
    Ok((!filled.is_empty()).then(|| filled.to_string()))
}

/// A string or number field of an answer, as text.
fn id_of(answer: &Value, field: &str) -> Option<String> {
    match answer.get(field)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
