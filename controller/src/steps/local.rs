//! The executors `coxswain run` uses: every kind of step on this machine.

use std::sync::Arc;

use crate::engine::{Task, Work, WorkResult};

use super::Executor;
use super::http::HttpExecutor;
use super::message::MessageExecutor;
use super::script::LocalScript;
use super::secrets::EnvSecrets;

/// What the local executors need from flags and the environment.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Where agent steps go (`None`: not configured).
    pub agent_url: Option<String>,
    /// The model id for `model: default`.
    pub agent_model: Option<String>,
}

impl LocalConfig {
    /// Flags win over the environment (`COXSWAIN_AGENT_*`, `OPENAI_*`).
    pub fn from_env(
        agent_url: Option<String>,
        agent_model: Option<String>,
    ) -> Result<Self, String> {
        Ok(LocalConfig {
            agent_url,
            agent_model,
        })
    }
}

/// One executor per kind, chosen by the work's task.
#[derive(Debug)]
pub struct LocalExecutors {
    script: LocalScript,
    http: HttpExecutor,
    message: MessageExecutor,
}

impl LocalExecutors {
    /// Builds every executor; secrets come from `COXSWAIN_SECRET_<NAME>_<KEY>`.
    pub fn new(_config: LocalConfig) -> Result<Self, String> {
        let secrets = Arc::new(EnvSecrets::new());
        Ok(LocalExecutors {
            script: LocalScript::new(secrets.clone()),
            http: HttpExecutor::new(secrets.clone())?,
            message: MessageExecutor::new(secrets)?,
        })
    }
}

impl Executor for LocalExecutors {
    async fn run(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Script(_) => self.script.run(work).await,
            Task::Http(_) => self.http.run(work).await,
            Task::Message(_) => self.message.run(work).await,
            Task::Agent(_) => Err(crate::engine::step_error(
                crate::engine::codes::AGENT,
                "agent steps are not available in this build",
            )),
        }
    }
}
