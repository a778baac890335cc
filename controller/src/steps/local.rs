//! The executors `coxswain run` uses: every kind of step on this machine.

use std::sync::Arc;

use crate::engine::{Task, Work, WorkResult};

use super::Executor;
use super::agent::{AgentConfig, AgentExecutor, Mode, Provider};
use super::http::HttpExecutor;
use super::message::MessageExecutor;
use super::script::LocalScript;
use super::secrets::EnvSecrets;

/// What the local executors need from flags and the environment.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Where agent steps go, and how.
    pub agent: AgentConfig,
}

/// What the command line says about the agent provider; each one set wins
/// over its environment variable.
#[derive(Debug, Clone, Default)]
pub struct AgentFlags {
    /// The endpoint.
    pub url: Option<String>,
    /// The model id for `model: default`.
    pub model: Option<String>,
    /// The kind of server, which picks its best mode.
    pub provider: Option<Provider>,
    /// How the output contract is put (wins over the provider's mode).
    pub mode: Option<Mode>,
}

impl LocalConfig {
    /// Flags win over the environment (`COXSWAIN_AGENT_*`, `OPENAI_*`).
    pub fn from_env(flags: AgentFlags) -> Result<Self, String> {
        let mut agent = AgentConfig::from_env().map_err(|e| e.to_string())?;
        if let Some(url) = flags.url {
            agent.base_url = url;
        }
        if let Some(model) = flags.model {
            agent.default_model = model;
        }
        if let Some(provider) = flags.provider {
            agent.mode = provider.default_mode();
        }
        if let Some(mode) = flags.mode {
            agent.mode = mode;
        }
        Ok(LocalConfig { agent })
    }
}

/// One executor per kind, chosen by the work's task.
#[derive(Debug)]
pub struct LocalExecutors {
    script: LocalScript,
    http: HttpExecutor,
    message: MessageExecutor,
    agent: AgentExecutor,
}

impl LocalExecutors {
    /// Builds every executor; secrets come from `COXSWAIN_SECRET_<NAME>_<KEY>`.
    pub fn new(config: LocalConfig) -> Result<Self, String> {
        let secrets = Arc::new(EnvSecrets::new());
        Ok(LocalExecutors {
            script: LocalScript::new(secrets.clone()),
            http: HttpExecutor::new(secrets.clone()).map_err(|e| e.to_string())?,
            message: MessageExecutor::new(secrets)?,
            agent: AgentExecutor::new(config.agent).map_err(|e| e.to_string())?,
        })
    }
}

impl Executor for LocalExecutors {
    async fn run(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Script(_) => self.script.run(work).await,
            Task::Http(_) => self.http.run(work).await,
            Task::Message(_) => self.message.run(work).await,
            Task::Agent(_) => self.agent.run(work).await,
        }
    }
}
