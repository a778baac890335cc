//! `message` steps: post a text to a generic webhook or a Slack channel.
//!
//! The output is `{"messageId", "conversationName"}` either way, so later
//! steps need not care where the message went:
//!
//! - A webhook receives `POST {"text": …}` as JSON with an `Idempotency-Key`.
//!   `messageId` is the answer's `id` or `ts` (a JSON object's string or
//!   number) or, when the answer has neither, a generated `msg-…` id;
//!   `conversationName` is the webhook's host.
//! - Slack receives `chat.postMessage` with the bot token from the Secret.
//!   Slack answers HTTP 200 even when it refuses, so `{"ok": false, "error"}`
//!   fails the attempt with `message.failed` naming Slack's error.
//!   `messageId` is Slack's `ts`, `conversationName` the channel as written.
//!
//! The text's placeholders are inserted as text and never scanned again, so
//! data that looks like a placeholder or a reference is posted as it is. The
//! webhook's URL may hold placeholders too; each value is URL-encoded for
//! the part of the URL it stands in, as in an http step's `url`.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};

use super::net::{self, NetPolicy, ReadError};
use super::{Executor, Secrets};
use crate::api::{MessageStep, SlackTarget, StepError, WebhookTarget};
use crate::engine::{Done, Failed, Task, Work, WorkResult, codes, step_error};
use crate::template::Place;

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
    /// Neither or both of `webhook` and `slack`.
    #[error("a message step gives exactly one of `webhook` or `slack`")]
    Target,
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
    /// The deny list refused the address.
    #[error("{0}")]
    Refused(net::NetError),
    /// The post took longer than its timeout.
    #[error("posting to {shown} took longer than {}s", .limit.as_secs_f64())]
    Timeout {
        /// The URL, without credentials.
        shown: String,
        /// The timeout that applied.
        limit: Duration,
    },
    /// The post could not be sent.
    #[error("posting to {shown} failed: {reason}")]
    Send {
        /// The URL, without credentials.
        shown: String,
        /// Every cause, joined.
        reason: String,
    },
    /// The answer was over its cap.
    #[error("the answer from {shown} is larger than {}", net::size(*.limit))]
    AnswerTooLarge {
        /// The URL, without credentials.
        shown: String,
        /// The cap.
        limit: usize,
    },
    /// The answer could not be read.
    #[error("reading the answer from {shown} failed: {reason}")]
    Read {
        /// The URL, without credentials.
        shown: String,
        /// Every cause, joined.
        reason: String,
    },
    /// A status other than 2xx.
    #[error("{shown} answered {status}: {body}")]
    Status {
        /// The URL, without credentials.
        shown: String,
        /// The status.
        status: reqwest::StatusCode,
        /// The start of the answer.
        body: String,
    },
    /// The Slack token could not be read.
    #[error("Slack token: {0}")]
    Token(crate::SecretError),
    /// The Slack token cannot go in a header.
    #[error("Slack token: secret `{name}` key `{key}` holds characters a header cannot carry")]
    TokenChars {
        /// The secret.
        name: String,
        /// Its key.
        key: String,
    },
    /// Slack's answer is not JSON.
    #[error("Slack's answer is not JSON: {0}")]
    SlackNotJson(String),
    /// Slack answered `ok: false`.
    #[error("Slack refused the message to {channel}: {error}")]
    SlackRefused {
        /// The channel as written.
        channel: String,
        /// Slack's `error`.
        error: String,
    },
    /// Slack said yes but gave no message id.
    #[error("Slack accepted the message but gave no `ts`")]
    NoTs,
}

impl MessageError {
    /// The stable code recorded with the failure.
    pub fn code(&self) -> &str {
        match self {
            MessageError::Placeholder(inner) => &inner.code,
            MessageError::Timeout { .. } => codes::TIMEOUT,
            MessageError::Token(_) | MessageError::TokenChars { .. } => codes::SECRET,
            _ => codes::MESSAGE,
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

    async fn post(&self, work: &Work, step: &MessageStep) -> Result<Done, MessageError> {
        let text = net::render(&step.text, Place::Message, &work.data)
            .map_err(MessageError::Placeholder)?;
        match (&step.webhook, &step.slack) {
            (Some(hook), None) => self.webhook(work, hook, &text).await,
            (None, Some(slack)) => self.slack(work, slack, &text).await,
            _ => Err(MessageError::Target),
        }
    }

    /// Sends one JSON POST and returns the body of a 2xx answer.
    async fn send(
        &self,
        work: &Work,
        url: &Url,
        body: &Value,
        token: Option<HeaderValue>,
    ) -> Result<Vec<u8>, MessageError> {
        self.policy
            .check_url(url)
            .await
            .map_err(MessageError::Refused)?;
        let shown = net::redact(url);
        let limit = net::shortest(DEFAULT_TIMEOUT, work.timeout);
        let mut request = self
            .client
            .post(url.clone())
            .timeout(limit)
            .header(super::http::IDEMPOTENCY_KEY, work.idempotency_key())
            .json(body);
        if let Some(token) = token {
            request = request.header(AUTHORIZATION, token);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                MessageError::Timeout {
                    shown: shown.clone(),
                    limit,
                }
            } else {
                MessageError::Send {
                    shown: shown.clone(),
                    reason: net::chain(&e),
                }
            }
        })?;
        let status = response.status();
        let bytes = match net::read_capped(response, RESPONSE_LIMIT).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge(limit)) => {
                return Err(MessageError::AnswerTooLarge { shown, limit });
            }
            Err(ReadError::Failed(e)) => {
                return Err(MessageError::Read {
                    shown,
                    reason: net::chain(&e),
                });
            }
        };
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(MessageError::Status {
                shown,
                status,
                body: net::preview(text.trim(), 300),
            });
        }
        Ok(bytes)
    }

    async fn webhook(
        &self,
        work: &Work,
        hook: &WebhookTarget,
        text: &str,
    ) -> Result<Done, MessageError> {
        let url = webhook_url(hook, work)?;
        let bytes = self.send(work, &url, &json!({"text": text}), None).await?;
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
        })
    }

    async fn slack(
        &self,
        work: &Work,
        slack: &SlackTarget,
        text: &str,
    ) -> Result<Done, MessageError> {
        let r = &slack.token_secret_ref;
        let token = self
            .secrets
            .get(&r.name, &r.key)
            .await
            .map_err(MessageError::Token)?;
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            MessageError::TokenChars {
                name: r.name.clone(),
                key: r.key.clone(),
            }
        })?;
        bearer.set_sensitive(true);
        let endpoint = format!("{}/chat.postMessage", self.slack_api);
        let url = Url::parse(&endpoint).map_err(|e| MessageError::BadUrl {
            url: endpoint.clone(),
            reason: e.to_string(),
        })?;
        let body = json!({"channel": slack.channel, "text": text});
        let bytes = self.send(work, &url, &body, Some(bearer)).await?;
        let answer: Value = serde_json::from_slice(&bytes).map_err(|_| {
            MessageError::SlackNotJson(net::preview(String::from_utf8_lossy(&bytes).trim(), 300))
        })?;
        if answer.get("ok") != Some(&Value::Bool(true)) {
            let error = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no error given");
            return Err(MessageError::SlackRefused {
                channel: slack.channel.clone(),
                error: error.to_string(),
            });
        }
        let ts = id_of(&answer, "ts").ok_or(MessageError::NoTs)?;
        Ok(Done {
            output: json!({"messageId": ts, "conversationName": slack.channel}),
            text: Some(text.to_string()),
            usage: None,
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
        let result = match &work.task {
            Task::Message(step) => self.post(work, step).await,
            _ => Err(MessageError::NotAMessage),
        };
        result.map_err(|e| Failed::from(StepError::from(e)))
    }
}

/// A string or number field of an answer, as text.
fn id_of(answer: &Value, field: &str) -> Option<String> {
    match answer.get(field)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
