//! The executors `coxswain run` uses: every kind of step on this machine.
//!
//! Each attempt runs inside a `tracing` span named `attempt` with the step's
//! key, the parallel part (when there is one), the attempt number and the
//! kind of step, so whatever an executor logs can be told apart by attempt.

use std::sync::Arc;

use tracing::Instrument;

use coxswain_core::engine::{Task, Work, WorkResult};

use super::Executor;
use super::agent::{AgentConfig, AgentExecutor, ConfigError, Mode, Provider, SetupError};
use super::http::HttpExecutor;
use super::message::{MessageError, MessageExecutor};
use super::records::Records;
use super::script::LocalScript;
use super::secrets::EnvSecrets;

/// Why the local executors could not be set up; each message says which
/// setting or part is at fault.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The agent settings (flags or `COXSWAIN_AGENT_*`) are wrong.
    #[error(transparent)]
    AgentConfig(#[from] ConfigError),
    /// The agent executor's client could not be built.
    #[error(transparent)]
    AgentSetup(#[from] SetupError),
    /// The http executor could not be built.
    #[error(transparent)]
    Http(#[from] crate::net::NetError),
    /// The message executor could not be built.
    #[error(transparent)]
    Message(#[from] MessageError),
}

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
    pub fn from_env(flags: AgentFlags) -> Result<Self, LocalError> {
        let mut agent = AgentConfig::from_env()?;
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
    records: Records,
}

impl LocalExecutors {
    /// Builds every executor; secrets come from `COXSWAIN_SECRET_<NAME>_<KEY>`.
    pub fn new(config: LocalConfig) -> Result<Self, LocalError> {
        let secrets = Arc::new(EnvSecrets::new());
        Ok(LocalExecutors {
            script: LocalScript::new(secrets.clone()),
            http: HttpExecutor::new(secrets.clone())?,
            message: MessageExecutor::new(secrets)?,
            agent: AgentExecutor::new(config.agent)?,
            records: Records::unavailable("no records database is open for this run"),
        })
    }

    /// Saves go to `records` (`coxswain run --records`).
    pub fn with_records(mut self, records: Records) -> Self {
        self.records = records;
        self
    }

    /// Copies each script attempt's output to what `echo` opens, as it
    /// comes (`coxswain run` shows stderr lines under their step).
    pub fn with_script_echo(mut self, echo: Arc<dyn super::script::Echo>) -> Self {
        self.script = self.script.with_echo(echo);
        self
    }

    /// Runs every script attempt in the run's workspace (see
    /// [`LocalScript::with_workspace`]).
    pub fn with_workspace(mut self, workspace: super::script::SharedWorkspace) -> Self {
        self.script = self.script.with_workspace(workspace);
        self
    }
}

impl Executor for LocalExecutors {
    async fn run(&self, work: &Work) -> WorkResult {
        let dispatch = async {
            match &work.task {
                Task::Script(_) => self.script.run(work).await,
                Task::Http(_) => self.http.run(work).await,
                Task::Message(_) => self.message.run(work).await,
                Task::Agent(_) => self.agent.run(work).await,
                Task::Save(_) => self.records.run(work).await,
            }
        };
        dispatch.instrument(attempt_span(work)).await
    }
}

/// The span one attempt runs in: which step, which part, which attempt,
/// what kind.
pub fn attempt_span(work: &Work) -> tracing::Span {
    tracing::info_span!(
        "attempt",
        step = %work.step,
        part = work.part.as_ref().map(|p| p.key.as_str()),
        attempt = work.attempt,
        kind = work.task.kind(),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::Value;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    use super::*;
    use coxswain_core::api::ScriptStep;
    use coxswain_core::engine::{DataView, PartRef, RunInfo};

    /// Spans seen: name and fields, in order of creation.
    type Spans = Arc<Mutex<Vec<(String, BTreeMap<String, String>)>>>;

    /// A subscriber that only writes down the spans it is told about.
    struct Recorder(Spans);

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .insert(field.name().to_string(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_string(), value.to_string());
        }
    }

    impl Subscriber for Recorder {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut fields = BTreeMap::new();
            span.record(&mut Fields(&mut fields));
            let mut spans = self.0.lock().unwrap();
            spans.push((span.metadata().name().to_string(), fields));
            Id::from_u64(spans.len() as u64)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    fn script_work() -> Work {
        Work {
            step: "fan".into(),
            part: Some(PartRef {
                index: 1,
                key: "eu".into(),
                round: 1,
            }),
            attempt: 3,
            iteration: None,
            task: Task::Script(ScriptStep {
                source: Some("echo 1".into()),
                ..Default::default()
            }),
            input: Value::Null,
            timeout: Some(Duration::from_secs(30)),
            data: DataView {
                input: Value::Null,
                steps: BTreeMap::new(),
                roots: BTreeMap::new(),
            },
            run: RunInfo {
                name: "r".into(),
                namespace: "local".into(),
                uid: "u".into(),
                since: None,
            },
            review: None,
            lookups: Vec::new(),
        }
    }

    #[test]
    fn each_attempt_runs_in_a_span_naming_it() {
        crate::net::install_crypto_provider();
        let agent = AgentConfig::from_lookup(|_| None).unwrap();
        let executors = LocalExecutors::new(LocalConfig { agent }).unwrap();
        let spans = Spans::default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let done = tracing::subscriber::with_default(Recorder(spans.clone()), || {
            runtime.block_on(executors.run(&script_work()))
        })
        .unwrap();
        assert_eq!(done.output, serde_json::json!(1));
        let spans = spans.lock().unwrap();
        let (name, fields) = spans
            .iter()
            .find(|(name, _)| name == "attempt")
            .expect("an attempt span");
        assert_eq!(name, "attempt");
        let expected: BTreeMap<String, String> = [
            ("step", "fan"),
            ("part", "eu"),
            ("attempt", "3"),
            ("kind", "script"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(fields, &expected);
    }
}
