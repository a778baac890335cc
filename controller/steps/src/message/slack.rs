//! Posting to Slack: `chat.postMessage` with the bot token from the Secret,
//! then the channel's name for `conversationName`.
//!
//! Slack answers HTTP 200 even when it refuses, so `{"ok": false, "error"}`
//! fails the attempt with `message.failed` naming Slack's error. A channel
//! written `#name` is named `name`; a channel id (`C0123…`) is looked up with
//! `conversations.info`. That lookup happens after the message is posted, so
//! it never fails the step (a retry would post again): when it fails (the
//! token lacks `channels:read`, a direct message has no name) the channel is
//! named as written.

use std::time::Duration;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};

use super::{MessageError, MessageExecutor, RESPONSE_LIMIT, id_of};
use crate::api::{SecretKeyRef, SlackTarget};
use crate::engine::{Done, Work};
use crate::net::{self, Redactor};

/// The longest the channel name lookup may take; the message is already
/// posted, so it is worth little waiting.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

impl MessageExecutor {
    /// Posts `text` to the step's channel.
    pub(super) async fn slack(
        &self,
        work: &Work,
        slack: &SlackTarget,
        text: &str,
        redactor: &mut Redactor,
    ) -> Result<Done, MessageError> {
        let r = &slack.token_secret_ref;
        let token = self.token("Slack", r, redactor).await?;
        let bearer = bearer(r, &token)?;
        let url = self.slack_url("chat.postMessage")?;
        let body = json!({"channel": slack.channel, "text": text});
        let bytes = self.send(work, &url, &body, Some(bearer.clone())).await?;
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
        let name = match slack.channel.strip_prefix('#') {
            Some(name) => name.to_string(),
            None => {
                let id = answer
                    .get("channel")
                    .and_then(Value::as_str)
                    .unwrap_or(&slack.channel);
                self.channel_name(work, &bearer, id)
                    .await
                    .unwrap_or_else(|reason| {
                        tracing::warn!(
                            channel = %slack.channel,
                            "naming the Slack channel as written: conversations.info {reason}"
                        );
                        slack.channel.clone()
                    })
            }
        };
        Ok(Done {
            output: json!({"messageId": ts, "conversationName": name}),
            text: Some(text.to_string()),
            usage: None,
        })
    }

    /// `{slack_api}/{method}`.
    fn slack_url(&self, method: &str) -> Result<Url, MessageError> {
        let endpoint = format!("{}/{method}", self.slack_api);
        Url::parse(&endpoint).map_err(|e| MessageError::BadUrl {
            url: endpoint.clone(),
            reason: e.to_string(),
        })
    }

    /// The name of the channel with id `id`, from `conversations.info`, or
    /// why it could not be had.
    async fn channel_name(
        &self,
        work: &Work,
        bearer: &HeaderValue,
        id: &str,
    ) -> Result<String, String> {
        let mut url = self
            .slack_url("conversations.info")
            .map_err(|e| e.to_string())?;
        url.query_pairs_mut().append_pair("channel", id);
        self.policy
            .check_url(&url)
            .await
            .map_err(|e| e.to_string())?;
        let response = self
            .client
            .get(url)
            .timeout(net::shortest(LOOKUP_TIMEOUT, work.timeout))
            .header(AUTHORIZATION, bearer.clone())
            .send()
            .await
            .map_err(|e| format!("failed: {}", net::chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("answered {status}"));
        }
        let bytes = net::read_capped(response, RESPONSE_LIMIT)
            .await
            .map_err(|_| "gave an answer that could not be read".to_string())?;
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|_| "gave an answer that is not JSON".to_string())?;
        if answer.get("ok") != Some(&Value::Bool(true)) {
            let error = answer.get("error").and_then(Value::as_str);
            return Err(format!("refused: {}", error.unwrap_or("no error given")));
        }
        answer
            .pointer("/channel/name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .ok_or_else(|| "gave a channel without a name".to_string())
    }
}

/// `Bearer {token}` as a header value that is never logged.
fn bearer(r: &SecretKeyRef, token: &str) -> Result<HeaderValue, MessageError> {
    let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
        MessageError::TokenChars {
            service: "Slack",
            name: r.name.clone(),
            key: r.key.clone(),
        }
    })?;
    bearer.set_sensitive(true);
    Ok(bearer)
}
