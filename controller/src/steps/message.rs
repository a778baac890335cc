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
//! data that looks like a placeholder or a reference is posted as it is.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};

use super::net::{self, DenyList, ReadError};
use super::{Executor, Secrets};
use crate::api::{MessageStep, SlackTarget, StepError, WebhookTarget};
use crate::engine::{Done, Failed, Task, Work, WorkResult, codes, step_error};
use crate::template::Place;

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
    deny: Arc<DenyList>,
    slack_api: String,
}

impl std::fmt::Debug for MessageExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageExecutor")
            .field("deny", &self.deny)
            .field("slack_api", &self.slack_api)
            .finish_non_exhaustive()
    }
}

impl MessageExecutor {
    /// An executor posting to the real Slack API, with the default deny
    /// list; Slack tokens come from `secrets`.
    pub fn new(secrets: Arc<dyn Secrets>) -> Result<Self, String> {
        Self::with_deny_list(secrets, DenyList::default())
    }

    /// An executor that refuses the addresses in `deny` instead of the default.
    pub fn with_deny_list(secrets: Arc<dyn Secrets>, deny: DenyList) -> Result<Self, String> {
        let deny = Arc::new(deny);
        Ok(MessageExecutor {
            client: net::client(deny.clone(), net::Redirects::SameOrigin)
                .map_err(|e| e.to_string())?,
            secrets,
            deny,
            slack_api: SLACK_API.to_string(),
        })
    }

    /// Posts Slack messages to `base` (as `{base}/chat.postMessage`) instead
    /// of Slack itself: for tests and for Slack-compatible servers.
    pub fn with_slack_api(mut self, base: impl Into<String>) -> Self {
        self.slack_api = base.into().trim_end_matches('/').to_string();
        self
    }

    async fn post(&self, work: &Work, step: &MessageStep) -> Result<Done, StepError> {
        let text = net::render(&step.text, Place::Message, &work.data)?;
        match (&step.webhook, &step.slack) {
            (Some(hook), None) => self.webhook(work, hook, &text).await,
            (None, Some(slack)) => self.slack(work, slack, &text).await,
            _ => Err(message_error(
                "a message step gives exactly one of `webhook` or `slack`".to_string(),
            )),
        }
    }

    /// Sends one JSON POST and returns the status and body.
    async fn send(
        &self,
        work: &Work,
        url: &Url,
        body: &Value,
        token: Option<HeaderValue>,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), StepError> {
        self.deny
            .check_url(url)
            .await
            .map_err(|e| message_error(e.to_string()))?;
        let shown = net::redact(url);
        let timeout = net::shortest(DEFAULT_TIMEOUT, work.timeout);
        let mut request = self
            .client
            .post(url.clone())
            .timeout(timeout)
            .header(super::http::IDEMPOTENCY_KEY, work.idempotency_key())
            .json(body);
        if let Some(token) = token {
            request = request.header(AUTHORIZATION, token);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                step_error(
                    codes::TIMEOUT,
                    format!(
                        "posting to {shown} took longer than {}s",
                        timeout.as_secs_f64()
                    ),
                )
            } else {
                message_error(format!("posting to {shown} failed: {}", net::chain(&e)))
            }
        })?;
        let status = response.status();
        let bytes = match net::read_capped(response, RESPONSE_LIMIT).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge(limit)) => {
                return Err(message_error(format!(
                    "the answer from {shown} is larger than {}",
                    net::size(limit)
                )));
            }
            Err(ReadError::Failed(e)) => {
                return Err(message_error(format!(
                    "reading the answer from {shown} failed: {}",
                    net::chain(&e)
                )));
            }
        };
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(message_error(format!(
                "{shown} answered {status}: {}",
                net::preview(text.trim(), 300)
            )));
        }
        Ok((status, bytes))
    }

    async fn webhook(
        &self,
        work: &Work,
        hook: &WebhookTarget,
        text: &str,
    ) -> Result<Done, StepError> {
        let url = Url::parse(&hook.url)
            .map_err(|e| message_error(format!("`{}` is not a valid URL: {e}", hook.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(message_error(format!(
                "a webhook must be an http or https URL, not {}",
                url.scheme()
            )));
        }
        let (_, bytes) = self.send(work, &url, &json!({"text": text}), None).await?;
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

    async fn slack(&self, work: &Work, slack: &SlackTarget, text: &str) -> Result<Done, StepError> {
        let r = &slack.token_secret_ref;
        let token = self
            .secrets
            .get(&r.name, &r.key)
            .await
            .map_err(|e| step_error(codes::SECRET, format!("Slack token: {e}")))?;
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            step_error(
                codes::SECRET,
                format!(
                    "Slack token: secret `{}` key `{}` holds characters a header cannot carry",
                    r.name, r.key
                ),
            )
        })?;
        bearer.set_sensitive(true);
        let endpoint = format!("{}/chat.postMessage", self.slack_api);
        let url = Url::parse(&endpoint)
            .map_err(|e| message_error(format!("`{endpoint}` is not a valid URL: {e}")))?;
        let body = json!({"channel": slack.channel, "text": text});
        let (_, bytes) = self.send(work, &url, &body, Some(bearer)).await?;
        let answer: Value = serde_json::from_slice(&bytes).map_err(|_| {
            message_error(format!(
                "Slack's answer is not JSON: {}",
                net::preview(String::from_utf8_lossy(&bytes).trim(), 300)
            ))
        })?;
        if answer.get("ok") != Some(&Value::Bool(true)) {
            let error = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no error given");
            return Err(message_error(format!(
                "Slack refused the message to {}: {error}",
                slack.channel
            )));
        }
        let ts = id_of(&answer, "ts").ok_or_else(|| {
            message_error("Slack accepted the message but gave no `ts`".to_string())
        })?;
        Ok(Done {
            output: json!({"messageId": ts, "conversationName": slack.channel}),
            text: Some(text.to_string()),
            usage: None,
        })
    }
}

impl Executor for MessageExecutor {
    async fn run(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Message(step) => self.post(work, step).await.map_err(Failed::from),
            _ => Err(
                message_error("the message executor only runs message steps".to_string()).into(),
            ),
        }
    }
}

fn message_error(message: String) -> StepError {
    step_error(codes::MESSAGE, message)
}

/// A string or number field of an answer, as text.
fn id_of(answer: &Value, field: &str) -> Option<String> {
    match answer.get(field)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
