//! The one Slack Web API call the controller makes on its own: posting an
//! answer (`chat.postMessage`), in a thread when given one.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};

use crate::net::{self, NetPolicy};

/// The longest a post may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why Slack did not take a message.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    /// The API base URL does not parse.
    #[error("`{0}` is not a Slack API URL")]
    BadUrl(String),
    /// The token cannot go in a header.
    #[error("the Slack token holds characters a header cannot carry")]
    TokenChars,
    /// The network policy refused the address.
    #[error("{0}")]
    Refused(net::NetError),
    /// The request failed on the way.
    #[error("posting to Slack ({url}) failed: {reason}")]
    Send {
        /// The endpoint.
        url: String,
        /// Every cause, joined.
        reason: String,
    },
    /// Slack answered with an error or not as its API says.
    #[error("Slack refused the message to {channel}: {error}")]
    Refusal {
        /// The channel.
        channel: String,
        /// Slack's `error`, or what was wrong with the answer.
        error: String,
    },
}

impl SlackError {
    /// Whether trying again later may work.
    pub fn is_transient(&self) -> bool {
        match self {
            SlackError::Send { .. } => true,
            SlackError::Refusal { error, .. } => {
                error.starts_with("HTTP 5")
                    || error == "ratelimited"
                    || error.starts_with("HTTP 429")
            }
            _ => false,
        }
    }
}

/// A Slack workspace, as the bot whose token this is.
#[derive(Clone)]
pub struct Slack {
    client: reqwest::Client,
    policy: Arc<NetPolicy>,
    api: String,
    token: HeaderValue,
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
        })
    }

    /// Posts `text` to `channel`, in the thread of `thread_ts` when given;
    /// returns the message's `ts`.
    pub async fn post(
        &self,
        channel: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Result<String, SlackError> {
        let endpoint = format!("{}/chat.postMessage", self.api);
        let url = Url::parse(&endpoint).map_err(|_| SlackError::BadUrl(self.api.clone()))?;
        self.policy
            .check_url(&url)
            .await
            .map_err(SlackError::Refused)?;
        let mut body = json!({"channel": channel, "text": text});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let shown = net::redact(&url);
        let response = self
            .client
            .post(url)
            .timeout(CALL_TIMEOUT)
            .header(AUTHORIZATION, self.token.clone())
            .json(&body)
            .send()
            .await
            .map_err(|e| SlackError::Send {
                url: shown.clone(),
                reason: net::chain(&e),
            })?;
        let status = response.status();
        let refusal = |error: String| SlackError::Refusal {
            channel: channel.to_string(),
            error,
        };
        if !status.is_success() {
            return Err(refusal(format!("HTTP {}", status.as_u16())));
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|_| refusal("the answer is not JSON".into()))?;
        if answer.get("ok") != Some(&Value::Bool(true)) {
            let error = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no error given");
            return Err(refusal(error.to_string()));
        }
        answer
            .get("ts")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| refusal("the answer has no `ts`".into()))
    }
}
