//! The HTTP side: one Chat Completions call with a timeout, and the reply
//! read off the wire.
//!
//! The call goes through the same guarded client as http steps (network
//! policy on every address and redirect, a cap on the answer's size, no
//! redirect to another origin while an API key is sent). It is not retried
//! here: a failure that a retry may cure (no answer, 429, 5xx) fails the
//! attempt with `agent.unavailable`, and the step's `attempts` and `backoff`
//! decide whether and when it runs again.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use serde::Deserialize;
use serde_json::Value;

use super::contract::{ReplyParts, SUBMIT_TOOL};
use super::prompt::Message;
use crate::net::{self, NetError, NetPolicy, ReadError, Redactor, Redirects};
use coxswain_core::api::TokenUsage;

/// Why a call failed.
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
    /// The network policy refuses the model server's address.
    #[error("{0}")]
    Refused(NetError),
    /// The answer is bigger than the cap; it was not read to its end.
    #[error("the model server's answer at {url} is larger than the {} limit", net::size(*limit))]
    TooLarge {
        /// Where the request went.
        url: String,
        /// The cap, in bytes.
        limit: usize,
    },
    /// A 2xx answer that is not a Chat Completions response.
    #[error("the model server's answer could not be read: {0}")]
    Decode(String),
}

impl CallError {
    /// Whether another attempt later may succeed: no answer, 429 or 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            CallError::Status { status, .. } => *status == 429 || *status >= 500,
            CallError::Transport { .. } => true,
            CallError::Refused(_) | CallError::TooLarge { .. } | CallError::Decode(_) => false,
        }
    }
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
    match coxswain_core::text::cut(&text, 300) {
        Some(start) => format!("{start}…"),
        None => text.into_owned(),
    }
}

/// How much of a failing answer is read for its error message.
const ERROR_BODY_LIMIT: usize = 64 << 10;

/// A Chat Completions endpoint.
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    url: Url,
    shown: String,
    api_key: Option<String>,
    timeout: Duration,
    policy: Arc<NetPolicy>,
    response_limit: usize,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("url", &self.shown)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("response_limit", &self.response_limit)
            .finish()
    }
}

/// Why a [`ChatClient`] could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL cannot be read.
    #[error("the model server URL `{url}` is not usable: {reason}")]
    BadUrl {
        /// The URL as configured.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Where a [`ChatClient`] sends its calls and how much it accepts back.
#[derive(Debug, Clone)]
pub struct Endpoint<'a> {
    /// The API root; calls go to `{base_url}/chat/completions`.
    pub base_url: &'a str,
    /// Sent as `Authorization: Bearer`, when there is one.
    pub api_key: Option<String>,
    /// The longest one call may take.
    pub timeout: Duration,
    /// The largest answer accepted, in bytes.
    pub response_limit: usize,
}

impl ChatClient {
    /// A client for `{base_url}/chat/completions`, reaching only what
    /// `policy` allows.
    pub fn new(endpoint: Endpoint<'_>, policy: NetPolicy) -> Result<ChatClient, ClientError> {
        let text = format!(
            "{}/chat/completions",
            endpoint.base_url.trim_end_matches('/')
        );
        let bad = |reason: String| ClientError::BadUrl {
            url: endpoint.base_url.to_string(),
            reason,
        };
        let url = Url::parse(&text).map_err(|e| bad(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("only http and https, not {}", url.scheme())));
        }
        let api_key = endpoint.api_key.filter(|k| !k.is_empty());
        // A key may go only to the server it was configured for.
        let redirects = if api_key.is_some() {
            Redirects::SameOrigin
        } else {
            Redirects::AnyOrigin
        };
        let policy = Arc::new(policy);
        let http = net::builder(policy.clone(), redirects)?
            .connect_timeout(endpoint.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| NetError::Client(net::chain(&e)))?;
        Ok(ChatClient {
            http,
            shown: net::redact(&url),
            url,
            api_key,
            timeout: endpoint.timeout,
            policy,
            response_limit: endpoint.response_limit,
        })
    }

    /// Sends one request body and reads the reply. Nothing is retried here
    /// (see the module documentation); the API key never appears in an error.
    pub async fn complete(&self, body: &Value) -> Result<Completion, CallError> {
        let bytes = self.once(body).await.map_err(|e| self.redact(e))?;
        read_response(&bytes)
    }

    fn redact(&self, error: CallError) -> CallError {
        let Some(key) = &self.api_key else {
            return error;
        };
        let mut redactor = Redactor::new();
        redactor.add_as(key, "[redacted API key]".into());
        match error {
            CallError::Status { status, url, body } => CallError::Status {
                status,
                url,
                body: redactor.text(&body),
            },
            CallError::Transport { url, reason } => CallError::Transport {
                url,
                reason: redactor.text(&reason),
            },
            other => other,
        }
    }

    async fn once(&self, body: &Value) -> Result<Vec<u8>, CallError> {
        self.policy
            .check_url(&self.url)
            .await
            .map_err(CallError::Refused)?;
        let mut request = self
            .http
            .post(self.url.clone())
            .timeout(self.timeout)
            .json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let transport = |e: &reqwest::Error| {
            let reason = if e.is_timeout() {
                format!("no answer within {:?}", self.timeout)
            } else {
                net::chain(e)
            };
            CallError::Transport {
                url: self.shown.clone(),
                reason,
            }
        };
        let response = request.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        if !status.is_success() {
            // Only the start of an error page is shown; the status is what counts.
            let body = match net::read_capped(response, ERROR_BODY_LIMIT).await {
                Ok(bytes) => preview(&bytes),
                Err(e) => format!("({e})"),
            };
            return Err(CallError::Status {
                status: status.as_u16(),
                url: self.shown.clone(),
                body,
            });
        }
        match net::read_capped(response, self.response_limit).await {
            Ok(bytes) => Ok(bytes),
            Err(ReadError::TooLarge(limit)) => Err(CallError::TooLarge {
                url: self.shown.clone(),
                limit,
            }),
            Err(ReadError::Failed(e)) => Err(transport(&e)),
        }
    }
}

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
