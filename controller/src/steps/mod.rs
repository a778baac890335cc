//! Executors: the code that carries out one attempt of a step. The same
//! executors serve `coxswain run` and the controller.

pub mod agent;

use std::future::Future;

use crate::engine::{Work, WorkResult};

/// Carries out one attempt. Dropping the future cancels the work: a process
/// is killed, a request abandoned.
pub trait Executor: Send + Sync {
    /// Runs `work` to its end (success, failure or timeout).
    fn run(&self, work: &Work) -> impl Future<Output = WorkResult> + Send;
}

/// Where secret values come from: the Kubernetes Secret in a cluster, the
/// environment or a file locally. Values are never written to a record or a log.
pub trait Secrets: Send + Sync {
    /// The value of `key` in the secret `name`, or why it cannot be read.
    fn get(&self, name: &str, key: &str) -> Result<String, String>;
}

pub mod http;
pub mod local;
pub mod message;
pub mod net;
pub mod script;
pub mod secrets;
