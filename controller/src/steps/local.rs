//! The executors `coxswain run` uses: every kind of step on this machine.

use std::sync::Arc;

use crate::engine::{Task, Work, WorkResult};

use super::Executor;
use super::agent::{AgentConfig, AgentExecutor};
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

impl LocalConfig {
    /// Flags win over the environment (`COXSWAIN_AGENT_*`, `OPENAI_*`).
    pub fn from_env(
        agent_url: Option<String>,
        agent_model: Option<String>,
    ) -> Result<Self, String> {
        let mut agent = AgentConfig::from_env().map_err(|e| e.to_string())?;
        if let Some(url) = agent_url {
            agent.base_url = url;
        }
        if let Some(model) = agent_model {
            agent.default_model = model;
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
            http: HttpExecutor::new(secrets.clone())?,
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
