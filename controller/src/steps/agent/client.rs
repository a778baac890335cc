//! The HTTP side: one Chat Completions call with a timeout, retried on the
//! failures that retrying can cure, and the reply read off the wire.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::contract::{ReplyParts, SUBMIT_TOOL};
use super::prompt::Message;
use crate::api::TokenUsage;

/// Why a call failed after its retries.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server answered with a non-2xx status.
    #[error("the model server answered HTTP {status} at {url}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// Where the request went.
        url: String,
        /// The start of the response body.
        body: String,
    },
    /// No answer: connection refused, reset, or the call's timeout.
    #[error("could not reach the model server at {url}: {reason}")]
    Transport {
        /// Where the request went.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A 2xx answer that is not a Chat Completions response.
    #[error("the model server's answer could not be read: {0}")]
    Decode(String),
}

/// One call's answer: what the contract reads, what the repair turn echoes,
/// and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Content, submit_output arguments, finish reason.
    pub parts: ReplyParts,
    /// The assistant message as the conversation must repeat it.
    pub assistant: Message,
    /// Ids of the tool calls the assistant made, in order.
    pub tool_call_ids: Vec<String>,
    /// Tokens, when the server reported them.
    pub usage: Option<TokenUsage>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<i64>,
    #[serde(default)]
    completion_tokens: Option<i64>,
}

/// Reads a Chat Completions response body. Tolerates what real servers do:
/// content as a string or as a list of text parts, arguments as a string or
/// an object, missing `usage`, extra members.
pub fn read_response(body: &[u8]) -> Result<Completion, CallError> {
    let response: Response = serde_json::from_slice(body)
        .map_err(|e| CallError::Decode(format!("{e}: {}", preview(body))))?;
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(CallError::Decode(format!("no choices: {}", preview(body))));
    };
    let content = match choice.message.content {
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    };
    let calls = choice.message.tool_calls.unwrap_or_default();
    let named =
        |c: &&Value| c.pointer("/function/name").and_then(Value::as_str) == Some(SUBMIT_TOOL);
    let chosen = calls.iter().find(named).or(calls.first());
    let tool_arguments = chosen.and_then(|c| c.pointer("/function/arguments").cloned());
    let tool_call_ids = calls
        .iter()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(String::from))
        .collect();
    // Echoed with `content: ""` when the model only called tools: OpenAI
    // takes that, and llama-cpp-python's chat templates fail (HTTP 500) on
    // an assistant message whose content is missing or null.
    let assistant = Message {
        role: "assistant",
        content: Some(content.clone().unwrap_or_default()),
        tool_calls: if calls.is_empty() {
            None
        } else {
            Some(Value::Array(calls))
        },
        tool_call_id: None,
    };
    let usage = response.usage.map(|u| TokenUsage {
        prompt_tokens: u.prompt_tokens.unwrap_or(0),
        completion_tokens: u.completion_tokens.unwrap_or(0),
    });
    Ok(Completion {
        parts: ReplyParts {
            content,
            tool_arguments,
            finish_reason: choice.finish_reason,
        },
        assistant,
        tool_call_ids,
        usage,
    })
}

/// The first 300 characters of a body, for error messages.
fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match crate::text::cut(&text, 300) {
        Some(start) => format!("{start}…"),
        None => text.into_owned(),
    }
}

/// A Chat Completions endpoint with its retry policy.
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// Installs the ring crypto provider for rustls once per process; reqwest
/// is built without one so the whole binary shares a single provider.
pub fn install_crypto_provider() {
    // An error only says a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl ChatClient {
    /// A client for `{base_url}/chat/completions`.
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        timeout: Duration,
        max_retries: u32,
        backoff: Duration,
    ) -> Result<ChatClient, reqwest::Error> {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()?;
        Ok(ChatClient {
            http,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key: api_key.filter(|k| !k.is_empty()),
            timeout,
            max_retries,
            backoff,
        })
    }

    /// Sends one request body, retrying connection failures, timeouts, 429
    /// and 5xx up to `max_retries` times with doubling waits (or the
    /// server's `Retry-After`, capped). Other statuses fail at once.
    pub async fn complete(&self, body: &Value) -> Result<Completion, CallError> {
        let mut tries = 0;
        loop {
            let (error, retry_after) = match self.once(body).await {
                Ok(bytes) => return read_response(&bytes),
                Err(e) => e,
            };
            let retryable = match &error {
                CallError::Status { status, .. } => *status == 429 || *status >= 500,
                CallError::Transport { .. } => true,
                CallError::Decode(_) => false,
            };
            if !retryable || tries >= self.max_retries {
                return Err(error);
            }
            let wait = retry_after
                .unwrap_or_else(|| self.backoff.saturating_mul(1 << tries.min(16)))
                .min(Duration::from_secs(30));
            tries += 1;
            tokio::time::sleep(wait).await;
        }
    }

    async fn once(&self, body: &Value) -> Result<Vec<u8>, (CallError, Option<Duration>)> {
        let mut request = self.http.post(&self.url).timeout(self.timeout).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let transport = |e: reqwest::Error| {
            let reason = if e.is_timeout() {
                format!("no answer within {:?}", self.timeout)
            } else {
                crate::steps::net::chain(&e)
            };
            (
                CallError::Transport {
                    url: self.url.clone(),
                    reason,
                },
                None,
            )
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            Ok(bytes.to_vec())
        } else {
            Err((
                CallError::Status {
                    status: status.as_u16(),
                    url: self.url.clone(),
                    body: preview(&bytes),
                },
                retry_after,
            ))
        }
    }
}

/// An error with its causes, since reqwest's own message is often just
/// "error sending request".
#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_tool_calls_content_parts_and_usage() {
        let body = json!({
            "id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "other", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "submit_output", "arguments": " { \"n\" : 1 } "}}
                ]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        });
        let c = read_response(body.to_string().as_bytes()).expect("reads");
        assert_eq!(c.parts.tool_arguments, Some(json!(" { \"n\" : 1 } ")));
        assert_eq!(c.parts.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(c.tool_call_ids, vec!["a", "b"]);
        let echoed = serde_json::to_value(&c.assistant).expect("serializes");
        assert_eq!(echoed["content"], "", "tool-only replies echo empty text");
        assert_eq!(echoed["tool_calls"][1]["id"], "b");
        assert_eq!(
            c.usage,
            Some(TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 3
            })
        );
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]}}]});
        let c = read_response(parts.to_string().as_bytes()).expect("reads");
        assert_eq!(c.parts.content.as_deref(), Some("hello"));
        assert_eq!(c.usage, None);
    }

    #[test]
    fn unreadable_answers_say_why() {
        assert!(matches!(
            read_response(b"<html>"),
            Err(CallError::Decode(_))
        ));
        let e = read_response(b"{\"choices\": []}").map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("no choices"), "{e}");
    }
}
