//! Agent, http, message and save steps run inside the controller, as tasks, with
//! the same executors as `coxswain run`. Secrets come from the Run's own
//! namespace, so each namespace gets its executors (built on first use).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use tokio::sync::Semaphore;
use tracing::Instrument;

use coxswain_core::engine::{Failed, Task, Work, WorkResult, codes, step_error};
use coxswain_steps::agent::{AgentConfig, AgentExecutor};
use coxswain_steps::http::HttpExecutor;
use coxswain_steps::local::attempt_span;
use coxswain_steps::message::MessageExecutor;
use coxswain_steps::net::NetPolicy;
use coxswain_steps::records::Records;
use coxswain_steps::{Executor, SecretError, SecretFuture, Secrets};

/// The executors for the steps the controller runs itself, with a limit on
/// how many attempts run at once.
pub struct InController {
    client: Client,
    agent: Option<AgentExecutor>,
    agent_problem: Option<String>,
    policy: NetPolicy,
    by_namespace: Mutex<HashMap<String, Arc<NamespaceExecutors>>>,
    slots: Semaphore,
    metrics: Arc<crate::ops::Metrics>,
    records: Records,
}

/// The http and message executors reading Secrets of one namespace.
struct NamespaceExecutors {
    http: HttpExecutor,
    message: MessageExecutor,
}

impl InController {
    /// Executors under `policy`; agent steps go to `agent` (when it could be
    /// configured; otherwise each agent attempt fails saying why).
    pub fn new(
        client: Client,
        agent: Result<AgentConfig, String>,
        policy: NetPolicy,
        max_running: usize,
        metrics: Arc<crate::ops::Metrics>,
        records: Records,
    ) -> Self {
        let (agent, agent_problem) = match agent
            .and_then(|c| AgentExecutor::with_policy(c, policy.clone()).map_err(|e| e.to_string()))
        {
            Ok(executor) => (Some(executor), None),
            Err(problem) => (None, Some(problem)),
        };
        InController {
            client,
            agent,
            agent_problem,
            policy,
            by_namespace: Mutex::new(HashMap::new()),
            slots: Semaphore::new(max_running.max(1)),
            metrics,
            records,
        }
    }

    fn for_namespace(&self, namespace: &str) -> Result<Arc<NamespaceExecutors>, Failed> {
        let mut map = self.by_namespace.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = map.get(namespace) {
            return Ok(found.clone());
        }
        let secrets: Arc<dyn Secrets> = Arc::new(KubeSecrets {
            api: Api::namespaced(self.client.clone(), namespace),
        });
        let internal = |e: String| Failed::from(step_error(codes::INTERNAL, e));
        let built = Arc::new(NamespaceExecutors {
            http: HttpExecutor::with_policy(secrets.clone(), self.policy.clone())
                .map_err(|e| internal(e.to_string()))?,
            message: MessageExecutor::with_policy(secrets, self.policy.clone())
                .map_err(|e| internal(e.to_string()))?,
        });
        map.insert(namespace.to_string(), built.clone());
        Ok(built)
    }

    async fn dispatch(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Agent(_) => match &self.agent {
                Some(agent) => agent.run(work).await,
                None => Err(Failed::from(step_error(
                    codes::AGENT,
                    format!(
                        "the controller has no model server for agent steps: {}",
                        self.agent_problem.as_deref().unwrap_or("not configured")
                    ),
                ))),
            },
            Task::Http(_) => {
                self.for_namespace(&work.run.namespace)?
                    .http
                    .run(work)
                    .await
            }
            Task::Message(_) => {
                self.for_namespace(&work.run.namespace)?
                    .message
                    .run(work)
                    .await
            }
            Task::Save(_) => self.records.run(work).await,
            Task::Script(_) => Err(Failed::from(step_error(
                codes::INTERNAL,
                "a script step reached the in-controller executors; scripts run as Jobs",
            ))),
        }
    }
}

impl Executor for InController {
    async fn run(&self, work: &Work) -> WorkResult {
        // The semaphore is never closed, so acquiring only waits.
        let _slot = self.slots.acquire().await;
        let _running = self.metrics.attempt_running();
        self.dispatch(work).instrument(attempt_span(work)).await
    }
}

/// Secret values read from the API server, in one namespace.
struct KubeSecrets {
    api: Api<Secret>,
}

impl Secrets for KubeSecrets {
    fn get<'a>(&'a self, name: &'a str, key: &'a str) -> SecretFuture<'a> {
        Box::pin(async move {
            let secret = match self.api.get_opt(name).await {
                Ok(Some(secret)) => secret,
                Ok(None) => return Err(SecretError::NotFound { name: name.into() }),
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    return Err(SecretError::NotAllowed {
                        name: name.into(),
                        reason: status.message.clone(),
                    });
                }
                Err(e) => {
                    return Err(SecretError::Unavailable {
                        name: name.into(),
                        key: key.into(),
                        reason: e.to_string(),
                    });
                }
            };
            let bytes = secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
                .or_else(|| {
                    let text = secret.string_data.as_ref()?.get(key)?;
                    Some(text.clone().into_bytes())
                })
                .ok_or_else(|| SecretError::KeyMissing {
                    name: name.into(),
                    key: key.into(),
                })?;
            String::from_utf8(bytes).map_err(|_| SecretError::Unavailable {
                name: name.into(),
                key: key.into(),
                reason: "the value is not UTF-8 text".into(),
            })
        })
    }
}
