//! Posting to Slack: `chat.postMessage` with the bot token from the Secret,
//! then the channel's name for `conversationName`.
//!
//! A channel written `#name` is named `name`; a channel id (`C0123…`) is
//! looked up with `conversations.info`. That lookup happens after the
//! message is posted, so it never fails the step (a retry would post
//! again): when it fails (the token lacks `channels:read`, a direct message
//! has no name) the channel is named as written.

use std::time::Duration;

use serde_json::json;

use super::{MessageError, MessageExecutor};
use crate::chat::slack::{Post, Slack, SlackError};
use crate::net::{self, Redactor};
use coxswain_core::api::SlackTarget;
use coxswain_core::engine::{Done, Work};

/// The longest the channel name lookup may take; the message is already
/// posted, so it is worth little waiting.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

impl MessageExecutor {
    /// Posts `text` to the step's channel.
    pub(super) async fn slack(
        &self,
        work: &Work,
        target: &SlackTarget,
        text: &str,
        redactor: &mut Redactor,
    ) -> Result<Done, MessageError> {
        let r = &target.token_secret_ref;
        let token = self.token("Slack", r, redactor).await?;
        let slack = Slack::new(
            self.client.clone(),
            self.policy.clone(),
            &self.slack_api,
            &token,
        )
        .map_err(|error| match error {
            SlackError::TokenChars => MessageError::token_chars("Slack", r),
            other => MessageError::Slack(Box::new(other)),
        })?;
        let thread = super::thread(target.thread.as_deref(), work)?;
        let limit = net::shortest(super::DEFAULT_TIMEOUT, work.timeout);
        let key = work.idempotency_key();
        let posted = slack
            .clone()
            .with_timeout(limit)
            .post(Post {
                channel: &target.channel,
                text,
                thread_ts: thread.as_deref(),
                idempotency_key: Some(&key),
            })
            .await
            .map_err(|error| MessageError::Slack(Box::new(error)))?;
        let name = match target.channel.strip_prefix('#') {
            Some(name) => name.to_string(),
            None => slack
                .with_timeout(net::shortest(LOOKUP_TIMEOUT, work.timeout))
                .channel_name(&posted.channel)
                .await
                .unwrap_or_else(|reason| {
                    tracing::warn!(
                        channel = %target.channel,
                        "naming the Slack channel as written: {reason}"
                    );
                    target.channel.clone()
                }),
        };
        Ok(Done {
            output: json!({"messageId": posted.ts, "conversationName": name}),
            text: Some(text.to_string()),
            usage: None,
            log: None,
        })
    }
}
