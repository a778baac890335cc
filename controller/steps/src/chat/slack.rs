//! A Slack Web API client: the calls Coxswain makes, over the network
//! policy's HTTP client. The `message` step posts with it, and the
//! controller answers conversation commands with it.
//!
//! Slack answers HTTP 200 even when it refuses, so an answer counts only
//! with `"ok": true`; otherwise its `error` (such as `channel_not_found`) is
//! what the caller is told. `chat.postMessage` has no idempotency key of
//! its own: callers decide when posting again is safe.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{RequestBuilder, Url};
use serde_json::{Value, json};

use crate::net::{self, NetPolicy, PostError};

/// The longest a call may take when the caller sets no other timeout.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Slack's answers to these calls are small; anything bigger is refused.
const RESPONSE_LIMIT: usize = 1 << 20;

/// Why a Slack call failed. Messages name the endpoint without credentials
/// and never the token.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    /// The API base URL does not parse.
    #[error("`{url}` is not a Slack API URL: {reason}")]
    BadUrl {
        /// The URL as built.
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// The token cannot go in a header.
    #[error("the Slack token holds characters a header cannot carry")]
    TokenChars,
    /// The call was refused by the policy, failed on the way, or was
    /// answered with an HTTP error.
    #[error("{0}")]
    Post(#[from] PostError),
    /// The answer is not JSON.
    #[error("Slack's answer is not JSON: {0}")]
    NotJson(String),
    /// Slack answered `ok: false`.
    #[error("Slack refused the message to {channel}: {error}")]
    Refusal {
        /// The channel as given.
        channel: String,
        /// Slack's `error`.
        error: String,
    },
    /// Slack took the message but gave no id for it.
    #[error("Slack accepted the message but gave no `ts`")]
    NoTs,
}

impl SlackError {
    /// Whether trying again later may work: network trouble, rate limits
    /// and server errors; not a refusal such as `channel_not_found`.
    pub fn is_transient(&self) -> bool {
        match self {
            SlackError::Post(e) => e.is_transient(),
            SlackError::Refusal { error, .. } => error == "ratelimited",
            _ => false,
        }
    }
}

/// One message to post.
#[derive(Debug, Clone, Copy)]
pub struct Post<'a> {
    /// A channel id (`C0123…`) or `#name`.
    pub channel: &'a str,
    /// The text, sent as it is.
    pub text: &'a str,
    /// The `ts` of the message to answer in the thread of.
    pub thread_ts: Option<&'a str>,
    /// Sent as `Idempotency-Key`, for servers that honour one.
    pub idempotency_key: Option<&'a str>,
}

/// What Slack said of a posted message.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    /// The message's `ts`, its id within the channel.
    pub ts: String,
    /// The channel's id as Slack gave it, or the channel as posted to.
    pub channel: String,
}

/// A Slack workspace, as the bot whose token this is.
#[derive(Clone)]
pub struct Slack {
    client: reqwest::Client,
    policy: Arc<NetPolicy>,
    api: String,
    token: HeaderValue,
    call_timeout: Duration,
}

impl std::fmt::Debug for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slack")
            .field("api", &self.api)
            .finish_non_exhaustive()
    }
}

impl Slack {
    /// A client for the Web API at `api` (`https://slack.com/api`, or a
    /// compatible server).
    pub fn new(
        client: reqwest::Client,
        policy: Arc<NetPolicy>,
        api: &str,
        token: &str,
    ) -> Result<Self, SlackError> {
        let mut token = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| SlackError::TokenChars)?;
        token.set_sensitive(true);
        Ok(Slack {
            client,
            policy,
            api: api.trim_end_matches('/').to_string(),
            token,
            call_timeout: CALL_TIMEOUT,
        })
    }

    /// The same workspace with every call bounded by `limit` (a step's
    /// attempt timeout).
    pub fn with_timeout(mut self, limit: Duration) -> Self {
        self.call_timeout = limit;
        self
    }

    /// Posts a message with `chat.postMessage`.
    pub async fn post(&self, post: Post<'_>) -> Result<Posted, SlackError> {
        let url = self.method_url("chat.postMessage")?;
        let mut body = json!({"channel": post.channel, "text": post.text});
        if let Some(ts) = post.thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let mut request = self.client.post(url.clone()).json(&body);
        if let Some(key) = post.idempotency_key {
            // Slack ignores it; compatible servers and proxies may honour it.
            request = request.header(crate::http::IDEMPOTENCY_KEY, key);
        }
        let answer = self.call(&url, request).await?;
        let answer = ok(answer).map_err(|error| SlackError::Refusal {
            channel: post.channel.to_string(),
            error,
        })?;
        let ts = text_of(&answer, "ts").ok_or(SlackError::NoTs)?;
        let channel = text_of(&answer, "channel").unwrap_or_else(|| post.channel.to_string());
        Ok(Posted { ts, channel })
    }

    /// The name of the channel with id `id`, from `conversations.info`.
    /// Needs the `channels:read` scope; a direct message has no name.
    pub async fn channel_name(&self, id: &str) -> Result<String, SlackError> {
        let mut url = self.method_url("conversations.info")?;
        url.query_pairs_mut().append_pair("channel", id);
        let answer = self.call(&url, self.client.get(url.clone())).await?;
        let refusal = |error: String| SlackError::Refusal {
            channel: id.to_string(),
            error,
        };
        ok(answer)
            .map_err(refusal)?
            .pointer("/channel/name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .ok_or_else(|| refusal("the channel has no name".into()))
    }

    /// `{api}/{method}`.
    fn method_url(&self, method: &str) -> Result<Url, SlackError> {
        let endpoint = format!("{}/{method}", self.api);
        Url::parse(&endpoint).map_err(|e| SlackError::BadUrl {
            url: endpoint,
            reason: e.to_string(),
        })
    }

    /// Sends `request` (to `url`) with the token and the call's timeout;
    /// returns the JSON of a 2xx answer.
    async fn call(&self, url: &Url, request: RequestBuilder) -> Result<Value, SlackError> {
        let request = request.header(AUTHORIZATION, self.token.clone());
        let bytes = net::exchange(
            &self.policy,
            url,
            request,
            self.call_timeout,
            RESPONSE_LIMIT,
        )
        .await?;
        serde_json::from_slice(&bytes).map_err(|_| {
            SlackError::NotJson(net::preview(String::from_utf8_lossy(&bytes).trim(), 300))
        })
    }
}

/// The answer when it says `"ok": true`, else Slack's `error`.
fn ok(answer: Value) -> Result<Value, String> {
    if answer.get("ok") == Some(&Value::Bool(true)) {
        return Ok(answer);
    }
    Err(answer
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("no error given")
        .to_string())
}

/// A non-empty string field of an answer.
fn text_of(answer: &Value, field: &str) -> Option<String> {
    answer
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
