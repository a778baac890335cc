//! The `agent` step: one attempt asks an OpenAI-compatible Chat Completions
//! endpoint, reads the reply against the step's declared fields, and gives a
//! reply that does not fit one repair turn (a follow-up message naming what
//! was wrong) before the attempt fails.
//!
//! - [`prompt`] builds the messages (fenced, untrusted inputs);
//! - [`contract`] turns declared fields into a JSON Schema and reads replies;
//! - [`client`] sends the calls, with a timeout, through the network guard.

pub mod client;
pub mod contract;
pub mod prompt;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use self::client::{CallError, ChatClient, ClientError, Completion, Endpoint};
use self::contract::{Contract, Verdict};
use self::prompt::Message;
use super::Executor;
use super::net::{self, NetPolicy};
use coxswain_core::api::{StepError, TokenUsage};
use coxswain_core::engine::{AgentTask, Done, Failed, Task, Work, WorkResult, codes, step_error};

pub use self::contract::{Mode, Provider};

/// Where agent steps send their calls, and how. One per provider; the
/// controller reads it from its config, `coxswain run` from flags or env.
#[derive(Clone, PartialEq)]
pub struct AgentConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; none for local servers.
    pub api_key: Option<String>,
    /// Flow model names (`model:` in a step) to provider model ids. A name
    /// not listed is sent as it is.
    pub models: BTreeMap<String, String>,
    /// The provider model id for `model: default` (or no `model`).
    pub default_model: String,
    /// How the output contract is put to this provider.
    pub mode: Mode,
    /// The longest one HTTP call may take. A call that fails is not
    /// repeated within the attempt: the step's `attempts` and `backoff` are
    /// the one retry policy.
    pub timeout: Duration,
    /// The largest answer accepted, in bytes; a bigger one fails the
    /// attempt without being read to its end.
    pub response_limit: usize,
    /// The most tokens one reply may have (`max_tokens`); none leaves it to
    /// the server, which for some local servers means the whole context.
    pub max_tokens: Option<u32>,
}

/// Default cap on a model server's whole answer: the reply the status keeps
/// (at most [`coxswain_core::api::MAX_VALUE_BYTES`]) plus room for its JSON
/// envelope, escaping and tool-call wrapping. Reading stops there.
pub const ANSWER_LIMIT: usize = 4 * coxswain_core::api::MAX_VALUE_BYTES;

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("models", &self.models)
            .field("default_model", &self.default_model)
            .field("mode", &self.mode)
            .field("timeout", &self.timeout)
            .field("response_limit", &self.response_limit)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            models: BTreeMap::new(),
            default_model: "gpt-4o-mini".into(),
            mode: Mode::Tools,
            timeout: Duration::from_secs(120),
            response_limit: ANSWER_LIMIT,
            max_tokens: None,
        }
    }
}

/// A configuration value that could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A variable holds something we cannot read.
    #[error("{name}={value:?}: {why}")]
    Invalid {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// What is accepted.
        why: String,
    },
}

impl AgentConfig {
    /// Reads the configuration from the environment: `COXSWAIN_AGENT_BASE_URL`
    /// (or `OPENAI_BASE_URL`), `COXSWAIN_AGENT_API_KEY` (or `OPENAI_API_KEY`),
    /// `COXSWAIN_AGENT_MODEL`, `COXSWAIN_AGENT_PROVIDER` (which picks the
    /// mode a server handles best), `COXSWAIN_AGENT_MODE` (`tools`,
    /// `json_schema`, `json_object`, `text`; wins over the provider's),
    /// `COXSWAIN_AGENT_TIMEOUT` (seconds) and `COXSWAIN_AGENT_MAX_TOKENS`.
    /// Unset ones keep their defaults. `COXSWAIN_AGENT_MAX_RETRIES` is
    /// refused with a message saying where retries are set now.
    pub fn from_env() -> Result<AgentConfig, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`AgentConfig::from_env`] over any lookup, so it can be tested.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<AgentConfig, ConfigError> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let mut config = AgentConfig::default();
        if let Some(url) = get("COXSWAIN_AGENT_BASE_URL").or_else(|| get("OPENAI_BASE_URL")) {
            config.base_url = url.trim().to_string();
        }
        config.api_key = get("COXSWAIN_AGENT_API_KEY").or_else(|| get("OPENAI_API_KEY"));
        if let Some(model) = get("COXSWAIN_AGENT_MODEL") {
            config.default_model = model.trim().to_string();
        }
        let invalid = |name: &str, value: String, why: &str| ConfigError::Invalid {
            name: name.into(),
            value,
            why: why.into(),
        };
        if let Some(name) = get("COXSWAIN_AGENT_PROVIDER") {
            let provider = Provider::parse(&name).ok_or_else(|| {
                invalid(
                    "COXSWAIN_AGENT_PROVIDER",
                    name,
                    &format!("expected {}", Provider::NAMES),
                )
            })?;
            config.mode = provider.default_mode();
        }
        if let Some(mode) = get("COXSWAIN_AGENT_MODE") {
            config.mode = Mode::parse(&mode).ok_or_else(|| {
                invalid(
                    "COXSWAIN_AGENT_MODE",
                    mode,
                    &format!("expected {}", Mode::NAMES),
                )
            })?;
        }
        if let Some(t) = get("COXSWAIN_AGENT_TIMEOUT") {
            let secs: f64 = t
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s > 0.0)
                .ok_or_else(|| {
                    invalid(
                        "COXSWAIN_AGENT_TIMEOUT",
                        t.clone(),
                        "expected a positive number of seconds",
                    )
                })?;
            config.timeout = Duration::from_secs_f64(secs);
        }
        if let Some(r) = get("COXSWAIN_AGENT_MAX_RETRIES") {
            return Err(invalid(
                "COXSWAIN_AGENT_MAX_RETRIES",
                r,
                "calls are no longer retried inside an attempt; set `attempts` and `backoff` on the step instead, and unset this variable",
            ));
        }
        if let Some(n) = get("COXSWAIN_AGENT_MAX_TOKENS") {
            let n = n.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                invalid(
                    "COXSWAIN_AGENT_MAX_TOKENS",
                    n.clone(),
                    "expected a positive whole number",
                )
            })?;
            config.max_tokens = Some(n);
        }
        Ok(config)
    }

    /// The provider model id for a step's `model` (absent means `default`).
    pub fn model_for(&self, name: Option<&str>) -> String {
        let name = name.unwrap_or("default");
        match self.models.get(name) {
            Some(id) => id.clone(),
            None if name == "default" => self.default_model.clone(),
            None => name.to_string(),
        }
    }
}

/// Runs agent steps against one provider.
#[derive(Debug, Clone)]
pub struct AgentExecutor {
    config: AgentConfig,
    client: ChatClient,
}

/// The executor could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the HTTP client for agent steps: {0}")]
pub struct SetupError(#[from] ClientError);

impl AgentExecutor {
    /// An executor for the provider in `config`, under the local network
    /// policy (what `coxswain run` uses).
    pub fn new(config: AgentConfig) -> Result<AgentExecutor, SetupError> {
        Self::with_policy(config, NetPolicy::local())
    }

    /// An executor whose calls, and the redirects they meet, may reach only
    /// what `policy` allows. In a cluster that is [`NetPolicy::cluster`]
    /// with the model server's address range allowed.
    pub fn with_policy(
        config: AgentConfig,
        policy: NetPolicy,
    ) -> Result<AgentExecutor, SetupError> {
        let endpoint = Endpoint {
            base_url: &config.base_url,
            api_key: config.api_key.clone(),
            timeout: config.timeout,
            response_limit: config.response_limit,
        };
        let client = ChatClient::new(endpoint, policy)?;
        Ok(AgentExecutor { config, client })
    }

    /// The configuration in use.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// One attempt: the call, and one repair turn when the reply does not
    /// fit. Tokens are added to `usage` as each reply arrives, so they are
    /// known even when the attempt fails or its timeout cuts it short.
    async fn attempt(
        &self,
        task: &AgentTask,
        input: &Value,
        usage: &mut Option<TokenUsage>,
    ) -> Result<Done, StepError> {
        let contract = Contract::for_agent(&task.spec);
        let mode = self.config.mode;
        let model = self.config.model_for(task.spec.model.as_deref());
        let mut messages = prompt::build(task, input, &contract, mode).messages;
        let mut turn = 0;
        loop {
            let mut body = request_body(&model, &messages, &contract, mode);
            if let (Some(n), Some(members)) = (self.config.max_tokens, body.as_object_mut()) {
                members.insert("max_tokens".into(), n.into());
            }
            let completion = self
                .client
                .complete(&body)
                .await
                .map_err(|e| call_failed(&e))?;
            add_usage(usage, completion.usage.as_ref());
            let text = completion.parts.text();
            if text.len() > coxswain_core::api::MAX_VALUE_BYTES {
                return Err(too_long(text.len()));
            }
            match contract::interpret(&contract, &completion.parts) {
                Ok(output) => {
                    return Ok(Done {
                        output,
                        text: Some(text),
                        usage: usage.clone(),
                        log: None,
                    });
                }
                Err(Verdict::Refused(why)) => return Err(step_error(codes::AGENT, why)),
                Err(Verdict::Misfit(problems)) if turn == 0 => {
                    turn += 1;
                    repair(&mut messages, completion, &problems, &contract, mode);
                }
                Err(Verdict::Misfit(problems)) => {
                    let why = format!(
                        "the model's reply did not fit after one repair turn: {}",
                        problems.join("; ")
                    );
                    return Err(step_error(codes::AGENT, why));
                }
            }
        }
    }
}

impl Executor for AgentExecutor {
    async fn run(&self, work: &Work) -> WorkResult {
        let Task::Agent(task) = &work.task else {
            return Err(step_error(
                codes::AGENT,
                "the agent executor was handed a step that is not an agent step",
            )
            .into());
        };
        let mut usage = None;
        let outcome = match work.timeout {
            Some(limit) => tokio::time::timeout(limit, self.attempt(task, &work.input, &mut usage))
                .await
                .unwrap_or_else(|_| {
                    Err(step_error(
                        codes::TIMEOUT,
                        format!("the agent step took longer than its timeout ({limit:?})"),
                    ))
                }),
            None => self.attempt(task, &work.input, &mut usage).await,
        };
        outcome.map_err(|error| Failed {
            error,
            usage,
            log: None,
        })
    }
}

/// The JSON body of one call: model, messages and the contract's members.
pub fn request_body(model: &str, messages: &[Message], contract: &Contract, mode: Mode) -> Value {
    let mut body = Map::with_capacity(5);
    body.insert("model".into(), Value::String(model.into()));
    body.insert(
        "messages".into(),
        serde_json::to_value(messages).unwrap_or(Value::Null),
    );
    body.insert("stream".into(), Value::Bool(false));
    for (name, value) in contract.request_members(mode) {
        body.insert(name.into(), value);
    }
    Value::Object(body)
}

/// Appends the reply and the message saying what was wrong with it: a tool
/// result when the model called tools (the protocol wants one per call), a
/// user message otherwise.
fn repair(
    messages: &mut Vec<Message>,
    completion: Completion,
    problems: &[String],
    contract: &Contract,
    mode: Mode,
) {
    let how = match (contract.is_json(), mode) {
        (false, _) => "Answer again in plain text, shorter if it was cut off.",
        (true, Mode::Tools) => {
            "Hand it in again: call the `submit_output` tool once, with exactly the declared fields."
        }
        (true, Mode::JsonSchema | Mode::JsonObject) => {
            "Reply again with one JSON object holding exactly the declared fields."
        }
        (true, Mode::Text) => {
            "Reply again with one JSON object holding exactly the declared fields, inside a ```json code block."
        }
    };
    let what = format!(
        "Your reply did not fit what was asked:\n{}\n{how}",
        problems
            .iter()
            .map(|p| format!("- {p}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let ids = completion.tool_call_ids;
    messages.push(completion.assistant);
    if ids.is_empty() {
        messages.push(Message::text("user", what));
        return;
    }
    for (i, id) in ids.into_iter().enumerate() {
        messages.push(Message {
            role: "tool",
            content: Some(if i == 0 {
                what.clone()
            } else {
                "Not used: only one submit_output call is read.".into()
            }),
            tool_calls: None,
            tool_call_id: Some(id),
        });
    }
}

fn add_usage(total: &mut Option<TokenUsage>, call: Option<&TokenUsage>) {
    if let Some(call) = call {
        let sum = total.get_or_insert_with(TokenUsage::default);
        sum.prompt_tokens += call.prompt_tokens;
        sum.completion_tokens += call.completion_tokens;
    }
}

/// A failed call fails the attempt: with `agent.unavailable` when a later
/// attempt may succeed (no answer, 429, 5xx), `agent.failed` otherwise.
/// A reply longer than a status keeps of one value.
fn too_long(bytes: usize) -> StepError {
    step_error(
        codes::OUTPUT,
        format!(
            "the model's reply is {bytes} bytes, more than the {} a run keeps of one value; ask for a shorter reply or lower max_tokens",
            net::size(coxswain_core::api::MAX_VALUE_BYTES)
        ),
    )
}

fn call_failed(e: &CallError) -> StepError {
    let code = if e.is_transient() {
        codes::AGENT_UNAVAILABLE
    } else {
        codes::AGENT
    };
    step_error(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_lookup() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = AgentConfig::from_lookup(env(&[
            ("OPENAI_BASE_URL", "http://o/v1"),
            ("OPENAI_API_KEY", "sk-o"),
            ("COXSWAIN_AGENT_API_KEY", "sk-c"),
            ("COXSWAIN_AGENT_MODEL", "smol"),
            ("COXSWAIN_AGENT_MODE", "json_schema"),
            ("COXSWAIN_AGENT_TIMEOUT", "2.5"),
            ("COXSWAIN_AGENT_MAX_TOKENS", "300"),
        ]))
        .expect("valid");
        assert_eq!(c.base_url, "http://o/v1");
        assert_eq!(c.api_key.as_deref(), Some("sk-c"));
        assert_eq!(c.model_for(None), "smol");
        assert_eq!(c.model_for(Some("gpt-x")), "gpt-x");
        assert_eq!(c.mode, Mode::JsonSchema);
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.max_tokens, Some(300));
        let zero = AgentConfig::from_lookup(env(&[("COXSWAIN_AGENT_MAX_TOKENS", "0")]));
        assert!(matches!(zero, Err(ConfigError::Invalid { .. })));
        assert!(!format!("{c:?}").contains("sk-c"));
        let retries = AgentConfig::from_lookup(env(&[("COXSWAIN_AGENT_MAX_RETRIES", "2")]));
        let Err(ConfigError::Invalid { why, .. }) = retries else {
            panic!("the retired retry variable is refused");
        };
        assert!(why.contains("attempts"), "{why}");
        let bad = AgentConfig::from_lookup(env(&[("COXSWAIN_AGENT_MODE", "xml")]));
        assert!(matches!(bad, Err(ConfigError::Invalid { .. })));
        let ollama = AgentConfig::from_lookup(env(&[("COXSWAIN_AGENT_PROVIDER", "Ollama")]));
        assert_eq!(ollama.expect("valid").mode, Mode::JsonSchema);
        let chosen = AgentConfig::from_lookup(env(&[
            ("COXSWAIN_AGENT_PROVIDER", "llama-cpp-python"),
            ("COXSWAIN_AGENT_MODE", "json_object"),
        ]));
        assert_eq!(chosen.expect("valid").mode, Mode::JsonObject);
        let unknown = AgentConfig::from_lookup(env(&[("COXSWAIN_AGENT_PROVIDER", "gemini")]));
        let Err(ConfigError::Invalid { why, .. }) = unknown else {
            panic!("an unknown provider is refused");
        };
        assert!(why.contains("ollama"), "{why}");
        let d = AgentConfig::from_lookup(env(&[])).expect("defaults");
        assert_eq!(d, AgentConfig::default());
    }

    #[test]
    fn model_map() {
        let mut c = AgentConfig::default();
        c.models.insert("fast".into(), "provider-fast".into());
        c.models.insert("default".into(), "provider-default".into());
        assert_eq!(c.model_for(Some("fast")), "provider-fast");
        assert_eq!(c.model_for(None), "provider-default");
    }
}
